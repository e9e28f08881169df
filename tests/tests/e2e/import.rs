//! `gatehouse import mcp` end to end: a real rmcp server on loopback (both protocol versions),
//! imported, signed with the generic `mcp-upstream` component built from source, served by a
//! `gatehouse serve` process and called by an rmcp client through it: list, ok, an upstream
//! `isError`, the operator's credential injected, a destructive tool paused, approved, run
//! once and replayed; then drift (`--check`), and bad input (exit 2, nothing written).

use std::path::{Path, PathBuf};

use gatehouse_host::HostConfig;
use gatehouse_host::plugin::signature::SigningKey;
use gatehouse_tests::admin::request;
use gatehouse_tests::artifacts::{MCP_UPSTREAM, OPENAPI};
use gatehouse_tests::cli::gatehouse_output;
use gatehouse_tests::gateway::{Gateway, Serve};
use gatehouse_tests::mcp::{Client, client, rmcp_call, texts, tool_names};
use gatehouse_tests::mcp_upstream::McpUpstream;
use gatehouse_tests::upstream::TestCa;
use gatehouse_tests::{config, free_port};
use serde_json::json;

pub(crate) const AGENT_KEY: &str = "agent-key-import-4c1d";
const APPROVER: &str = "approver-token-import-8e2a";
/// The upstream's credential, in the environment of the import and the gateway.
pub(crate) const UPSTREAM_TOKEN: &str = "upstream-secret-b7f9";
pub(crate) const TOKEN_ENV: &str = "IMPORT_E2E_UPSTREAM_TOKEN";

/// Runs `gatehouse` with `args` in a child process with the upstream token in its
/// environment: the exit code, and what it wrote to stdout then stderr.
pub(crate) fn gatehouse(args: &[&str]) -> (i32, String) {
    gatehouse_output(args, &[(TOKEN_ENV, UPSTREAM_TOKEN)])
}

/// A publisher key in `dir`: its secret key file.
pub(crate) fn key_file(dir: &Path) -> (SigningKey, PathBuf) {
    let key = SigningKey::generate("importer").unwrap();
    let path = dir.join("importer.secret.toml");
    std::fs::write(&path, key.to_toml()).unwrap();
    (key, path)
}

/// Imports `upstream` as adapter `id` into `dir/out`, signed: the command's output.
fn import(upstream: &McpUpstream, id: &str, dir: &Path, key: &Path) -> String {
    import_with(upstream, id, dir, key, &[])
}

/// [`import`] with `extra` arguments.
fn import_with(upstream: &McpUpstream, id: &str, dir: &Path, key: &Path, extra: &[&str]) -> String {
    let out = dir.join("out");
    let header = format!("Authorization: Bearer ${{{TOKEN_ENV}}}");
    let mut args = vec![
        "import",
        "mcp",
        &upstream.url,
        "--id",
        id,
        "--header",
        &header,
        "--out",
        out.to_str().unwrap(),
        "--key",
        key.to_str().unwrap(),
        "--component",
        MCP_UPSTREAM.wasm,
    ];
    args.extend_from_slice(extra);
    let (code, text) = gatehouse(&args);
    assert_eq!(code, 0, "{text}");
    text
}

/// Writes, in `dir`, a `gatehouse serve` config trusting `key` for `test.*`, with MCP on port
/// `mcp` (an agent key), the admin API on port `admin` (an approver token), the import's
/// config snippet appended, then `extra`: the config file's path.
pub(crate) fn serve_config(
    dir: &Path,
    import_dir: &Path,
    key: &SigningKey,
    mcp: u16,
    admin: u16,
    extra: &str,
    tweak: impl FnOnce(&mut HostConfig),
) -> String {
    let file = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    };
    let mut host = config(&[], &[]);
    host.trust.publishers = vec![gatehouse_tests::trust(key, &["test.*"], &[])];
    host.pipeline.tools.clear();
    tweak(&mut host);
    // The host config without the tables the snippet appends to.
    let mut table: toml::Table = toml::from_str(&toml::to_string(&host).unwrap()).unwrap();
    for (section, key) in [("egress", "grant"), ("pipeline", "tool")] {
        if let Some(t) = table.get_mut(section).and_then(toml::Value::as_table_mut) {
            t.remove(key);
        }
    }
    let snippet = std::fs::read_to_string(import_dir.join("config.toml")).unwrap();
    let text = format!(
        "{}\n[mcp]\nlisten = \"127.0.0.1:{mcp}\"\n\n[[mcp.api_key]]\ntenant = \"default\"\nprincipal = \"agent:bot\"\nfile = {:?}\n\n[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n[[admin.token]]\nprincipal = \"usr_ops_ana\"\nroles = [\"approver\"]\nfile = {:?}\n\n{snippet}\n{extra}",
        toml::to_string(&table).unwrap(),
        file("agent.key", AGENT_KEY.as_bytes()),
        file("approver.token", APPROVER.as_bytes()),
    );
    file("gatehouse.toml", text.as_bytes())
}

/// A `gatehouse serve` process serving the imported adapter with the imported config snippet
/// appended to its config; killed when dropped.
pub(crate) struct Imported {
    _gateway: Gateway,
    pub(crate) mcp: u16,
    pub(crate) admin: u16,
    _dir: tempfile::TempDir,
}

impl Imported {
    pub(crate) async fn start(import_dir: &Path, id: &str, key: &SigningKey) -> Self {
        Self::start_with_env(import_dir, id, key, (TOKEN_ENV, UPSTREAM_TOKEN)).await
    }

    /// [`Imported::start`] with the credential's environment variable `env` set.
    pub(crate) async fn start_with_env(
        import_dir: &Path,
        id: &str,
        key: &SigningKey,
        env: (&str, &str),
    ) -> Self {
        Self::start_with(import_dir, id, key, env, "").await
    }

    /// [`Imported::start_with_env`], with `extra` appended to the config.
    pub(crate) async fn start_with(
        import_dir: &Path,
        id: &str,
        key: &SigningKey,
        env: (&str, &str),
        extra: &str,
    ) -> Self {
        Self::start_tuned(import_dir, id, key, env, extra, |_| ()).await
    }

    /// [`Imported::start_with`], the host's config changed by `tweak` first.
    pub(crate) async fn start_tuned(
        import_dir: &Path,
        id: &str,
        key: &SigningKey,
        env: (&str, &str),
        extra: &str,
        tweak: impl FnOnce(&mut HostConfig),
    ) -> Self {
        Self::start_at(free_port(), import_dir, id, key, env, extra, tweak).await
    }

    /// [`Imported::start_tuned`], its MCP endpoint on port `mcp` (which a peer may have been
    /// told before the gateway started).
    pub(crate) async fn start_at(
        mcp: u16,
        import_dir: &Path,
        id: &str,
        key: &SigningKey,
        env: (&str, &str),
        extra: &str,
        tweak: impl FnOnce(&mut HostConfig),
    ) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let admin = free_port();
        let config = serve_config(dir.path(), import_dir, key, mcp, admin, extra, tweak);
        let gateway = Serve::config(config)
            .adapter(import_dir.join(format!("{id}.wasm")))
            .env(env.0, env.1)
            .wait_for(admin)
            .wait_for(mcp)
            .start()
            .await;
        Self {
            _gateway: gateway,
            mcp,
            admin,
            _dir: dir,
        }
    }

    /// The gateway's config file.
    pub(crate) fn config_path(&self) -> PathBuf {
        self._dir.path().join("gatehouse.toml")
    }

    pub(crate) async fn client(&self) -> Client {
        client(
            &format!("http://127.0.0.1:{}/mcp", self.mcp),
            Some(AGENT_KEY),
        )
        .await
    }

    /// Approves `id` through the admin API: the status.
    pub(crate) async fn approve(&self, id: &str) -> u16 {
        let body = json!({ "reason": "reviewed" }).to_string();
        let (status, _) = request(
            self.admin,
            "POST",
            &format!("/v1/approvals/{id}/approve"),
            Some(APPROVER),
            Some(body.into()),
        )
        .await;
        status
    }
}

/// The whole path, once per protocol version the upstream may speak.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_mcp_server_is_served_governed_in_both_protocol_versions() {
    for (upstream, protocol) in [
        (McpUpstream::start().await, "2026-07-28"),
        (McpUpstream::start_legacy().await, "2025-11-25"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (key, key_path) = key_file(dir.path());
        let id = "test.upstream";
        let printed = import(&upstream, id, dir.path(), &key_path);
        let out = dir.path().join("out");
        // The table of choices, one row per tool.
        for row in [
            "get_forecast       get_forecast       observe  read_only    readOnlyHint",
            "Delete Everything  delete_everything  act      destructive  destructiveHint",
            "add_note           add_note           act      network      no readOnlyHint or destructiveHint",
        ] {
            assert!(printed.contains(row), "{row}\n{printed}");
        }
        let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
        assert!(
            manifest.contains(&format!("protocol = \"{protocol}\"")),
            "{manifest}"
        );
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            3,
            "manifest.toml, config.toml, {id}.wasm and nothing else"
        );

        let gateway = Imported::start(&out, id, &key).await;
        let client = gateway.client().await;
        let tools = tool_names(&client).await;
        assert_eq!(
            tools,
            [
                "test.upstream.add_note",
                "test.upstream.delete_everything",
                "test.upstream.fail_always",
                "test.upstream.get_forecast",
                "test.upstream.whoami",
            ],
            "{protocol}"
        );

        // ok: content and structured content as the upstream returned them
        let (result, record) = rmcp_call(
            &client,
            "test.upstream.get_forecast",
            json!({ "city": "Oslo" }),
            json!({}),
        )
        .await;
        assert_eq!(
            (result.is_error, &record["outcome"]),
            (Some(false), &json!("OK")),
            "{protocol}: {record}"
        );
        assert_eq!(texts(&result), ["sunny in Oslo"]);
        assert_eq!(
            result.structured_content,
            Some(json!({ "city": "Oslo", "sky": "sunny" }))
        );

        // an upstream isError result: the adapter's structured error
        let (result, record) =
            rmcp_call(&client, "test.upstream.fail_always", json!({}), json!({})).await;
        assert_eq!(
            (
                result.is_error,
                &record["outcome"],
                &record["error"]["code"],
                &record["error"]["kind"]
            ),
            (
                Some(true),
                &json!("TOOL_ERROR"),
                &json!("UPSTREAM_TOOL_ERROR"),
                &json!("upstream")
            ),
            "{protocol}: {record}"
        );
        assert_eq!(
            texts(&result)[0],
            "UPSTREAM_TOOL_ERROR: the upstream tool `fail_always` reported an error: no such city"
        );

        // the operator's credential reaches the upstream; the adapter never had it
        let (result, record) =
            rmcp_call(&client, "test.upstream.whoami", json!({}), json!({})).await;
        assert_eq!(record["outcome"], "OK", "{protocol}: {record}");
        assert_eq!(
            result.structured_content,
            Some(json!({ "authorization": format!("Bearer {UPSTREAM_TOKEN}") }))
        );

        // a write without an idempotency key is refused before anything runs
        let (_, record) = rmcp_call(
            &client,
            "test.upstream.add_note",
            json!({ "text": "x" }),
            json!({}),
        )
        .await;
        assert_eq!(
            record["outcome"], "IDEMPOTENCY_KEY_REQUIRED",
            "{protocol}: {record}"
        );
        assert_eq!(upstream.calls("add_note"), 0);

        // destructive: paused, approved, run exactly once, then replayed
        let meta = json!({ "gatehouse/idempotency_key": format!("wipe-{protocol}") });
        let (result, paused) = rmcp_call(
            &client,
            "test.upstream.delete_everything",
            json!({}),
            meta.clone(),
        )
        .await;
        assert_eq!(
            (result.is_error, &paused["outcome"]),
            (Some(true), &json!("APPROVAL_REQUIRED")),
            "{protocol}: {paused}"
        );
        assert_eq!(
            upstream.calls("Delete Everything"),
            0,
            "nothing ran before the approval"
        );
        let approval = paused["approval_id"].as_str().expect("an approval id");
        assert_eq!(gateway.approve(approval).await, 200);
        let (result, done) = rmcp_call(
            &client,
            "test.upstream.delete_everything",
            json!({}),
            meta.clone(),
        )
        .await;
        assert_eq!(
            (result.is_error, &done["outcome"]),
            (Some(false), &json!("OK")),
            "{protocol}: {done}"
        );
        assert_eq!(texts(&result), ["deleted"]);
        assert_eq!(upstream.calls("Delete Everything"), 1);
        let (result, replay) =
            rmcp_call(&client, "test.upstream.delete_everything", json!({}), meta).await;
        assert_eq!(replay["outcome"], "OK");
        assert_eq!(
            result.meta.as_ref().unwrap()["gatehouse/replay_of"],
            done["tool_call_id"]
        );
        assert_eq!(
            upstream.calls("Delete Everything"),
            1,
            "the replay ran nothing"
        );

        // What reached the upstream from the gateway: the injected credential, the MCP headers
        // the grant lets through, and nothing the adapter could set on its own.
        let from_gateway: Vec<_> = upstream
            .requests()
            .into_iter()
            .filter(|h| h.contains_key("traceparent"))
            .collect();
        assert!(!from_gateway.is_empty());
        for headers in &from_gateway {
            assert_eq!(
                headers["authorization"],
                format!("Bearer {UPSTREAM_TOKEN}").as_str()
            );
            let mut names: Vec<&str> = headers.keys().map(http::HeaderName::as_str).collect();
            names.sort_unstable();
            names.retain(|n| {
                ![
                    "idempotency-key",
                    "mcp-session-id",
                    "mcp-method",
                    "mcp-name",
                    "mcp-protocol-version",
                ]
                .contains(n)
            });
            assert_eq!(
                names,
                [
                    "accept",
                    "authorization",
                    "content-length",
                    "content-type",
                    "host",
                    "traceparent"
                ],
                "{protocol}: {headers:?}"
            );
        }

        // drift: none, then one tool's schema changes upstream
        let out_arg = out.to_str().unwrap();
        let (code, text) = gatehouse(&["import", "mcp", "--check", out_arg]);
        assert_eq!(
            (code, text.as_str()),
            (
                0,
                "no drift: the 5 imported tools and 3 resources, resource templates and prompts \
                 are as pinned\n"
            )
        );
        upstream.change_forecast_schema();
        let (code, text) = gatehouse(&["import", "mcp", "--check", out_arg]);
        assert_eq!(
            (code, text),
            (
                1,
                format!(
                    "changed: get_forecast\ndrift: {} changed since the import; review and import \
                     again\n",
                    upstream.url
                )
            )
        );

        // `serve` asked to check at start-up refuses to serve the drifted import.
        drop(gateway);
        let serve_dir = tempfile::tempdir().unwrap();
        let config = serve_config(
            serve_dir.path(),
            &out,
            &key,
            free_port(),
            free_port(),
            "[import]\ndrift_check = \"refuse\"\n",
            |_| (),
        );
        let wasm = out.join(format!("{id}.wasm"));
        let (code, text) = gatehouse(&[
            "serve",
            "--config",
            &config,
            "--adapter",
            wasm.to_str().unwrap(),
        ]);
        assert_eq!(code, 1, "{text}");
        assert!(
            text.contains(&format!(
                "error: adapter `test.upstream`: the MCP server at {} changed get_forecast; run \
                 `gatehouse import mcp --check` and import it again (`[import] drift_check = \
                 \"refuse\"`)",
                upstream.url
            )),
            "{text}"
        );
    }
}

/// A JSON-RPC error from the upstream is the call's structured error naming the upstream and
/// quoting it: here the signed mapping names a tool the server does not have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_json_rpc_error_is_a_failed_call_naming_the_upstream() {
    let upstream = McpUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (key, key_path) = key_file(dir.path());
    let id = "test.upstream";
    import(&upstream, id, dir.path(), &key_path);
    let out = dir.path().join("out");
    let manifest_path = out.join("manifest.toml");
    let manifest = std::fs::read_to_string(&manifest_path).unwrap();
    assert!(manifest.contains("tool = \"add_note\""), "{manifest}");
    std::fs::write(
        &manifest_path,
        manifest.replace("tool = \"add_note\"", "tool = \"no_such_tool\""),
    )
    .unwrap();
    let wasm = out.join(format!("{id}.wasm"));
    let (code, text) = gatehouse(&[
        "pack",
        MCP_UPSTREAM.wasm,
        "--manifest",
        manifest_path.to_str().unwrap(),
        "--key",
        key_path.to_str().unwrap(),
        "-o",
        wasm.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    let gateway = Imported::start(&out, id, &key).await;
    let client = gateway.client().await;
    let (result, record) = rmcp_call(
        &client,
        "test.upstream.add_note",
        json!({ "text": "x" }),
        json!({ "gatehouse/idempotency_key": "note-1" }),
    )
    .await;
    assert_eq!(
        (
            result.is_error,
            &record["outcome"],
            &record["error"]["code"]
        ),
        (
            Some(true),
            &json!("TOOL_ERROR"),
            &json!("UPSTREAM_RPC_ERROR")
        ),
        "{record}"
    );
    assert_eq!(
        record["error"]["message"],
        format!(
            "the MCP server at {} answered `tools/call` with JSON-RPC error -32602: no tool \
             `no_such_tool`",
            upstream.url
        )
    );
    assert_eq!(upstream.calls("add_note"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_sources_exit_2_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let out_arg = out.to_str().unwrap();
    let nobody = format!("http://127.0.0.1:{}/mcp", free_port());
    let not_mcp = gatehouse_tests::upstream::Upstream::start().await;
    let not_mcp_url = format!("{}/mcp", not_mcp.url(""));
    let upstream = McpUpstream::start().await;
    let cases: [(Vec<&str>, &str); 5] = [
        (vec![&nobody], "error: cannot reach http://127.0.0.1:"),
        (
            vec![&not_mcp_url],
            &format!("error: {not_mcp_url} did not answer as an MCP server: "),
        ),
        (
            vec![&upstream.url, "--header", "X-Key: abc"],
            "error: --header `X-Key: abc`: the value must end in `${ENV}`",
        ),
        (
            vec![&upstream.url, "--include", "nothing*"],
            "error: nothing to import: the server lists 5 tools and the filters leave none",
        ),
        (
            vec![&upstream.url, "--id", "Bad Id"],
            "error: the imported manifest is not valid: manifest field `id`",
        ),
    ];
    for (args, expected) in cases {
        let mut all = vec!["import", "mcp"];
        all.extend(&args);
        if !args.contains(&"--id") {
            all.extend(["--id", "test.x"]);
        }
        all.extend(["--out", out_arg]);
        let (code, text) = gatehouse(&all);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(
            text.contains(expected),
            "{args:?}: expected {expected:?} in\n{text}"
        );
        assert!(!out.exists(), "{args:?}: {out:?} was written");
    }
}

/// A server on https, with a certificate a private CA issued: the import and `--check` trust
/// the CA with `--ca-file`, the gateway with `[egress] extra_root_certificates`. Without it the
/// import stops in the handshake, says why, writes nothing, and the server hears no request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_https_is_imported_checked_and_called_trusting_the_operators_ca() {
    let ca = TestCa::new();
    let upstream = McpUpstream::start_tls(&ca).await;
    assert!(
        upstream.url.starts_with("https://localhost:"),
        "{}",
        upstream.url
    );
    let dir = tempfile::tempdir().unwrap();
    let (key, key_path) = key_file(dir.path());
    let out = dir.path().join("out");
    let out_arg = out.to_str().unwrap();

    let untrusted = [
        "import",
        "mcp",
        &upstream.url,
        "--id",
        "test.secure",
        "--out",
        out_arg,
    ];
    let (code, text) = gatehouse(&untrusted);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("TLS: invalid peer certificate: UnknownIssuer") && text.contains("--ca-file"),
        "{text}"
    );
    assert!(!out.exists());
    assert!(upstream.requests().is_empty(), "{:?}", upstream.requests());

    let ca_file = ca.pem_file();
    let ca_arg = ca_file.to_str().unwrap();
    let (code, text) =
        gatehouse(&[&untrusted[..], &["--ca-file", dir.path().to_str().unwrap()]].concat());
    assert_eq!(code, 2, "a directory is no certificate: {text}");
    assert!(
        text.contains("--ca-file") || text.contains(dir.path().to_str().unwrap()),
        "{text}"
    );
    assert!(!out.exists());

    import_with(
        &upstream,
        "test.secure",
        dir.path(),
        &key_path,
        &["--ca-file", ca_arg],
    );
    let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    assert!(manifest.contains(&upstream.url), "{manifest}");
    let (code, text) = gatehouse(&["import", "mcp", "--check", out_arg, "--ca-file", ca_arg]);
    assert_eq!(code, 0, "{text}");
    assert!(text.starts_with("no drift"), "{text}");

    let gateway = Imported::start_tuned(
        &out,
        "test.secure",
        &key,
        (TOKEN_ENV, UPSTREAM_TOKEN),
        "",
        |host| host.egress.extra_root_certificates = vec![ca.pem_file()],
    )
    .await;
    let client = gateway.client().await;
    let (result, record) = rmcp_call(
        &client,
        "test.secure.get_forecast",
        json!({ "city": "Oslo" }),
        json!({}),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{record}");
    assert_eq!(texts(&result), ["sunny in Oslo"]);
    assert_eq!(upstream.calls("get_forecast"), 1);
}

/// The Petstore-shaped service, described once as OpenAPI 3.0 JSON: path parameters, a query
/// array, a JSON body, a gated DELETE, and an operation the adapter cannot send.
fn petstore_30_json(port: u16) -> String {
    json!({
        "openapi": "3.0.3",
        "info": { "title": "Petstore", "version": "1" },
        "servers": [{ "url": "http://127.0.0.1:{port}/v1", "variables": { "port": { "default": port.to_string() } } }],
        "components": {
            "securitySchemes": { "bearerAuth": { "type": "http", "scheme": "bearer" } },
            "schemas": { "Pet": { "type": "object", "required": ["name"], "properties": { "name": { "type": "string" }, "tag": { "type": "string", "nullable": true } } } },
        },
        "paths": {
            "/pets": {
                "get": { "operationId": "listPets", "parameters": [{ "name": "tags", "in": "query", "schema": { "type": "array", "items": { "type": "string" } } }] },
                "post": { "operationId": "addPet", "requestBody": { "required": true, "content": { "application/json": { "schema": { "$ref": "#/components/schemas/Pet" } } } } },
            },
            "/pets/{petId}": {
                "parameters": [{ "name": "petId", "in": "path", "required": true, "schema": { "type": "integer" } }],
                "get": { "operationId": "getPet" },
                "delete": { "operationId": "deletePet" },
            },
            "/pets/{petId}/photo": { "post": { "operationId": "uploadPhoto", "requestBody": { "content": { "multipart/form-data": { "schema": { "type": "object" } } } } } },
        },
    })
    .to_string()
}

/// The same service as OpenAPI 3.1 YAML.
fn petstore_31_yaml(port: u16) -> String {
    format!(
        "openapi: 3.1.0
info: {{ title: Petstore, version: '1' }}
servers:
  - url: http://127.0.0.1:{port}/v1
components:
  securitySchemes:
    bearerAuth: {{ type: http, scheme: bearer }}
  schemas:
    Pet:
      type: object
      required: [name]
      properties:
        name: {{ type: string }}
        tag: {{ type: [string, 'null'] }}
paths:
  /pets:
    get:
      operationId: listPets
      parameters:
        - {{ name: tags, in: query, schema: {{ type: array, items: {{ type: string }} }} }}
    post:
      operationId: addPet
      requestBody:
        required: true
        content:
          application/json:
            schema: {{ $ref: '#/components/schemas/Pet' }}
  /pets/{{petId}}:
    parameters:
      - {{ name: petId, in: path, required: true, schema: {{ type: integer }} }}
    get: {{ operationId: getPet }}
    delete: {{ operationId: deletePet }}
  /pets/{{petId}}/photo:
    post:
      operationId: uploadPhoto
      requestBody:
        content:
          multipart/form-data:
            schema: {{ type: object }}
"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_openapi_service_is_served_governed_from_json_30_and_yaml_31() {
    let service = gatehouse_tests::upstream::Upstream::start().await;
    let port = service.port;
    for (name, spec) in [
        ("petstore.json", petstore_30_json(port)),
        ("petstore.yaml", petstore_31_yaml(port)),
    ] {
        let id = "test.petstore";
        let (dir, key, printed) = import_openapi(name, &spec, id);
        let out = dir.path().join("out");
        for row in [
            "GET /pets             listpets    observe  read_only    GET",
            "DELETE /pets/{petId}  deletepet   act      destructive  DELETE",
            "skipped POST /pets/{petId}/photo: the request body is multipart/form-data, not JSON",
        ] {
            assert!(printed.contains(row), "{name}: {row}\n{printed}");
        }
        let gateway =
            Imported::start_with_env(&out, id, &key, ("TEST_PETSTORE_BEARERAUTH", UPSTREAM_TOKEN))
                .await;
        let client = gateway.client().await;
        let before = service.seen().len();

        // a path parameter
        let (result, record) = rmcp_call(
            &client,
            "test.petstore.getpet",
            json!({ "petId": 7 }),
            json!({}),
        )
        .await;
        assert_eq!(record["outcome"], "OK", "{name}: {record}");
        assert_eq!(
            result.structured_content,
            Some(
                json!({ "status": 200, "body": { "ok": true, "method": "GET", "path": "/v1/pets/7" } })
            )
        );
        // a query array
        let (_, record) = rmcp_call(
            &client,
            "test.petstore.listpets",
            json!({ "tags": ["cat", "dog"] }),
            json!({}),
        )
        .await;
        assert_eq!(record["outcome"], "OK", "{name}: {record}");
        // a JSON body
        let (_, record) = rmcp_call(
            &client,
            "test.petstore.addpet",
            json!({ "body": { "name": "Rex", "tag": null } }),
            json!({ "gatehouse/idempotency_key": format!("add-{name}") }),
        )
        .await;
        assert_eq!(record["outcome"], "OK", "{name}: {record}");
        // a DELETE is gated: paused, nothing sent
        let (_, record) = rmcp_call(
            &client,
            "test.petstore.deletepet",
            json!({ "petId": 7 }),
            json!({ "gatehouse/idempotency_key": format!("del-{name}") }),
        )
        .await;
        assert_eq!(record["outcome"], "APPROVAL_REQUIRED", "{name}: {record}");

        let seen: Vec<_> = service.seen().into_iter().skip(before).collect();
        let requests: Vec<(&str, &str)> = seen
            .iter()
            .map(|s| (s.method.as_str(), s.path.as_str()))
            .collect();
        assert_eq!(
            requests,
            [
                ("GET", "/v1/pets/7"),
                ("GET", "/v1/pets?tags=cat&tags=dog"),
                ("POST", "/v1/pets")
            ],
            "{name}"
        );
        let post = &seen[2];
        assert_eq!(
            post.body.as_ref(),
            br#"{"name":"Rex","tag":null}"#,
            "{name}"
        );
        assert_eq!(post.headers["content-type"], "application/json");
        assert_eq!(
            post.headers["idempotency-key"],
            format!("add-{name}").as_str()
        );
        for request in &seen {
            assert_eq!(
                request.headers["authorization"],
                format!("Bearer {UPSTREAM_TOKEN}").as_str()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_specs_exit_2_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    for (name, text) in [
        ("syntax.yaml", "openapi: 3.1.0\npaths:\n  /a: [unclosed\n"),
        ("swagger.json", r#"{"swagger": "2.0", "paths": {}}"#),
        (
            "dangling.json",
            r##"{"openapi": "3.1.0", "servers": [{"url": "http://h"}], "paths": {"/a": {"get": {"parameters": [{"$ref": "#/nope"}]}}}}"##,
        ),
    ] {
        let spec = dir.path().join(name);
        std::fs::write(&spec, text).unwrap();
        let args = [
            "import",
            "openapi",
            spec.to_str().unwrap(),
            "--id",
            "test.x",
            "--out",
            out.to_str().unwrap(),
        ];
        let (code, _) = gatehouse_tests::cli::gatehouse(&args);
        assert_eq!(code, 2, "{name}");
        assert!(!out.exists(), "{name}: {out:?} was written");
    }
}

/// A document with one operation whose path parameter sits between two segments.
fn photos_json(port: u16) -> String {
    json!({
        "openapi": "3.1.0",
        "info": { "title": "Photos", "version": "1" },
        "servers": [{ "url": format!("http://127.0.0.1:{port}/v1") }],
        "paths": {
            "/pets/{petId}/photos": {
                "get": {
                    "operationId": "listPhotos",
                    "parameters": [{ "name": "petId", "in": "path", "required": true, "schema": { "type": "string" } }],
                },
            },
        },
    })
    .to_string()
}

/// Imports `spec` (written as file `name`) as adapter `id` into `<dir>/out`, signed with the
/// generic `openapi` component built from source: the directory, the key, and what the
/// command printed.
fn import_openapi(name: &str, spec: &str, id: &str) -> (tempfile::TempDir, SigningKey, String) {
    let dir = tempfile::tempdir().unwrap();
    let (key, key_path) = key_file(dir.path());
    let spec_path = dir.path().join(name);
    std::fs::write(&spec_path, spec).unwrap();
    let out = dir.path().join("out");
    let (code, printed) = gatehouse(&[
        "import",
        "openapi",
        spec_path.to_str().unwrap(),
        "--id",
        id,
        "--out",
        out.to_str().unwrap(),
        "--key",
        key_path.to_str().unwrap(),
        "--component",
        OPENAPI.wasm,
    ]);
    assert_eq!(code, 0, "{name}: {printed}");
    (dir, key, printed)
}

/// A path parameter fills its one segment of the template: `..` and `.` cannot make the
/// request another operation, and a value no encoding keeps in one segment (`/`, `%`, ...)
/// is refused as INVALID_ARGUMENTS naming it, with nothing sent; the upstream sees only the
/// requests that stayed `GET /v1/pets/{petId}/photos`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openapi_path_parameter_stays_one_segment_of_its_template() {
    let service = gatehouse_tests::upstream::Upstream::start().await;
    let id = "test.photos";
    let (dir, key, _) = import_openapi("photos.json", &photos_json(service.port), id);
    let gateway = Imported::start(&dir.path().join("out"), id, &key).await;
    let client = gateway.client().await;
    let tool = "test.photos.listphotos";

    for (value, sent) in [
        ("rex", "/v1/pets/rex/photos"),
        ("a b?c#d", "/v1/pets/a%20b%3Fc%23d/photos"),
        ("...", "/v1/pets/.../photos"),
        ("r.x", "/v1/pets/r.x/photos"),
    ] {
        let before = service.seen().len();
        let (result, record) = rmcp_call(&client, tool, json!({ "petId": value }), json!({})).await;
        assert_eq!(record["outcome"], "OK", "{value:?}: {record}");
        let seen: Vec<String> = service.seen()[before..]
            .iter()
            .map(|s| format!("{} {}", s.method, s.path))
            .collect();
        assert_eq!(seen, [format!("GET {sent}")], "{value:?}");
        assert_eq!(
            result.structured_content.unwrap()["body"]["path"],
            sent.split('?').next().unwrap(),
            "{value:?}"
        );
    }

    let before = service.seen().len();
    for (value, why) in [
        (
            "..",
            "it makes its path segment `..`, which would name another path",
        ),
        (
            ".",
            "it makes its path segment `.`, which would name another path",
        ),
        ("", "it leaves its path segment empty"),
        (
            "../admin",
            "it holds `/`, which the path cannot carry inside one segment",
        ),
        (
            "a/b",
            "it holds `/`, which the path cannot carry inside one segment",
        ),
        (
            "%2e%2e",
            "it holds `%`, which the path cannot carry inside one segment",
        ),
        (
            "a%b",
            "it holds `%`, which the path cannot carry inside one segment",
        ),
        (
            "a;b",
            "it holds `;`, which the path cannot carry inside one segment",
        ),
    ] {
        let (result, record) = rmcp_call(&client, tool, json!({ "petId": value }), json!({})).await;
        assert_eq!(
            (
                &record["outcome"],
                &record["error"]["code"],
                &record["error"]["kind"]
            ),
            (
                &json!("TOOL_ERROR"),
                &json!("INVALID_ARGUMENTS"),
                &json!("validation")
            ),
            "{value:?}: {record}"
        );
        assert_eq!(
            texts(&result)[0],
            format!(
                "INVALID_ARGUMENTS: path parameter `petId` must stay one segment of the URL \
                 path: {why} (pass `petId` as the identifier itself, not a path: no `/`, `\\`, \
                 `%`, `;` or control characters, and not `.`, `..` or empty)"
            ),
            "{value:?}"
        );
        assert_eq!(
            record.get("egress"),
            None,
            "{value:?}: no request was attempted"
        );
    }
    assert_eq!(
        service.seen()[before..]
            .iter()
            .map(|s| format!("{} {}", s.method, s.path))
            .collect::<Vec<_>>(),
        Vec::<String>::new(),
        "the upstream received none of the refused calls"
    );
}

/// An OpenAPI document of a few KB whose schemas each refer twice to the one before: inlined,
/// 2^20 copies (it used to be refused past 100,000 values, and before that inlined until
/// memory ran out); imported, each schema is kept once in the input schema's `$defs`, and the
/// gateway checks a call's arguments through those refs: a valid nested body reaches the
/// upstream, a wrong type deep inside is refused with nothing sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openapi_ref_fan_out_keeps_its_schemas_shared_and_checked() {
    let service = gatehouse_tests::upstream::Upstream::start().await;
    let levels = 20;
    let mut schemas = serde_json::Map::new();
    schemas.insert("S0".into(), json!({ "type": "string" }));
    for i in 1..levels {
        let before = format!("#/components/schemas/S{}", i - 1);
        schemas.insert(
            format!("S{i}"),
            json!({ "type": "object", "properties": { "a": { "$ref": before }, "b": { "$ref": before } } }),
        );
    }
    let top = format!("#/components/schemas/S{}", levels - 1);
    let doc = json!({
        "openapi": "3.1.0",
        "servers": [{ "url": format!("http://127.0.0.1:{}/v1", service.port) }],
        "components": { "schemas": schemas },
        "paths": { "/things": { "post": { "operationId": "makeThing", "requestBody": {
            "content": { "application/json": { "schema": { "$ref": top } } } } } } },
    })
    .to_string();
    assert!(doc.len() < 4096, "{} bytes", doc.len());
    let id = "test.fanout";
    let (dir, key, printed) = import_openapi("fan-out.json", &doc, id);
    assert!(
        printed.contains(
            "note: POST /things: its input schema keeps the 20 component schemas it uses in \
             `$defs`, once each"
        ),
        "{printed}"
    );
    let gateway = Imported::start(&dir.path().join("out"), id, &key).await;
    let client = gateway.client().await;
    // Every level an object with optional members, down to S0, a string.
    let body = json!({ "a": { "b": { "a": {} } }, "b": {} });
    let (_, record) = rmcp_call(
        &client,
        "test.fanout.makething",
        json!({ "body": body }),
        json!({ "gatehouse/idempotency_key": "fan-1" }),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{record}");
    let (_, record) = rmcp_call(
        &client,
        "test.fanout.makething",
        json!({ "body": { "a": { "b": { "a": "a string where S16, an object, goes" } } } }),
        json!({ "gatehouse/idempotency_key": "fan-2" }),
    )
    .await;
    assert_eq!(record["outcome"], "INVALID_ARGUMENTS", "{record}");
    assert!(
        record["error"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("argument `/body/a/b/a` is invalid")),
        "{record}"
    );
    let seen = service.seen();
    assert_eq!(seen.len(), 1, "only the valid call was sent");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&seen[0].body).unwrap(),
        body
    );
}

/// GitHub's published description (13 MB, 1,223 operations, 25 operationIds longer than a
/// capability id) imports whole and signs with the `openapi` component the binary carries (no
/// `--component`): every long name cut to a stable, unique id the table shows, and the
/// manifest signed is the one written. (Its time is the `import` bench's: a test asserts no
/// figure.)
#[test]
fn githubs_published_description_imports() {
    let dir = tempfile::tempdir().unwrap();
    let (_, key_path) = key_file(dir.path());
    let out = dir.path().join("out");
    let spec = gatehouse_tests::github_openapi();
    let (code, printed) = gatehouse_tests::cli::gatehouse(&[
        "import",
        "openapi",
        spec.to_str().unwrap(),
        "--id",
        "test.github",
        "--out",
        out.to_str().unwrap(),
        "--key",
        key_path.to_str().unwrap(),
    ]);
    assert_eq!(
        code,
        0,
        "{}",
        &printed[printed.len().saturating_sub(2000)..]
    );
    let text = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    let written = gatehouse_host::plugin::manifest::Manifest::from_toml(&text).unwrap();
    let signed = std::fs::read(out.join("test.github.wasm")).unwrap();
    let embedded = gatehouse_host::plugin::inspect(&signed)
        .unwrap()
        .manifest
        .unwrap();
    assert_eq!(embedded, written, "what is signed is what was written");
    let gatehouse_host::plugin::manifest::Manifest::Adapter(adapter) = embedded else {
        panic!("an adapter manifest");
    };
    let count = adapter.capabilities.len();
    assert!(count >= 800, "{count} capabilities");
    let ids: std::collections::BTreeSet<&str> =
        adapter.capabilities.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), count, "every capability id is unique");
    let shortened: Vec<&str> = printed
        .lines()
        .filter(|l| l.starts_with("shortened "))
        .collect();
    assert_eq!(shortened.len(), 25, "{shortened:#?}");
    assert!(
        printed.contains(
            "shortened PATCH /orgs/{org}/properties/values: its name is longer than a capability \
             id may be; `orgs_custom-properties-for-repos-create-or-update-organ_"
        ),
        "{shortened:#?}"
    );
}

/// A schema holding JSON nulls (`"default": null`, `null` in an `enum`) is written into
/// `manifest.toml` as JSON text, and what is signed holds the nulls: a call with `null` where
/// the enum allows it reaches the upstream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_holding_json_null_is_signed_intact() {
    let service = gatehouse_tests::upstream::Upstream::start().await;
    let tag = json!({ "type": ["string", "null"], "enum": ["cat", "dog", null], "default": null });
    let spec = json!({
        "openapi": "3.1.0",
        "servers": [{ "url": format!("http://127.0.0.1:{}/v1", service.port) }],
        "paths": { "/pets": { "post": { "operationId": "addPet", "requestBody": { "required": true,
            "content": { "application/json": { "schema": { "type": "object", "properties": { "tag": tag } } } } } } } },
    })
    .to_string();
    let id = "test.nulls";
    let (dir, key, _) = import_openapi("nulls.json", &spec, id);
    let out = dir.path().join("out");
    let text = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    assert!(text.contains(r#""default":null"#), "{text}");
    let signed = std::fs::read(out.join(format!("{id}.wasm"))).unwrap();
    let Some(gatehouse_host::plugin::manifest::Manifest::Adapter(adapter)) =
        gatehouse_host::plugin::inspect(&signed).unwrap().manifest
    else {
        panic!("an adapter manifest");
    };
    assert_eq!(
        adapter.capabilities[0].input_schema["properties"]["body"]["properties"]["tag"],
        tag
    );
    let gateway = Imported::start(&out, id, &key).await;
    let client = gateway.client().await;
    let before = service.seen().len();
    let (_, record) = rmcp_call(
        &client,
        "test.nulls.addpet",
        json!({ "body": { "tag": null } }),
        json!({ "gatehouse/idempotency_key": "nulls-1" }),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{record}");
    let (_, record) = rmcp_call(
        &client,
        "test.nulls.addpet",
        json!({ "body": { "tag": "fish" } }),
        json!({ "gatehouse/idempotency_key": "nulls-2" }),
    )
    .await;
    assert_eq!(record["outcome"], "INVALID_ARGUMENTS", "{record}");
    let seen = service.seen();
    assert_eq!(seen.len() - before, 1, "only the valid call was sent");
    assert_eq!(seen[before].body.as_ref(), br#"{"tag":null}"#);
}

/// A `gatehouse serve` of `adapter` with the import in `out`'s config snippet (the upstream's
/// credential in its environment) and `[import] drift_check = mode`: the gateway once its
/// admin port listens, or its log if it exited first; and the directory of its config, which
/// must outlive it.
pub(crate) async fn checking_drift(
    out: &Path,
    key: &SigningKey,
    adapter: &Path,
    mode: &str,
) -> (Result<Gateway, String>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let (mcp, admin) = (free_port(), free_port());
    let extra = format!("[import]\ndrift_check = \"{mode}\"\n");
    let config = serve_config(dir.path(), out, key, mcp, admin, &extra, |_| ());
    let started = Serve::config(&config)
        .adapter(adapter)
        .env(TOKEN_ENV, UPSTREAM_TOKEN)
        .wait_for(admin)
        .try_start()
        .await;
    (started, dir)
}

/// `[import] drift_check` connects through the egress gate only: a trusted publisher's
/// manifest that points its `upstream` URL at another listener (here a loopback "collector")
/// gets no request there, so none of the operator's credentials; the check is refused by the
/// gate for want of a grant, and said so. The import's own upstream, which the grant covers,
/// is asked through the gate, as the gate sends (its `traceparent`), with the grant's
/// credential.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drift_check_connects_only_through_the_adapters_grant() {
    let upstream = McpUpstream::start_legacy().await;
    let collector = gatehouse_tests::upstream::Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (key, key_path) = key_file(dir.path());
    let id = "test.upstream";
    import(&upstream, id, dir.path(), &key_path);
    let out = dir.path().join("out");

    // The honest import: the check asks the upstream through the gate, and it starts.
    let before = upstream.requests().len();
    let (gateway, _config) =
        checking_drift(&out, &key, &out.join(format!("{id}.wasm")), "refuse").await;
    let gateway = gateway.unwrap_or_else(|log| panic!("it did not start: {log}"));
    let asked: Vec<_> = upstream.requests().into_iter().skip(before).collect();
    assert!(
        asked.len() >= 3,
        "initialize, notifications/initialized, tools/list: {asked:?}"
    );
    for headers in &asked {
        assert!(
            headers.contains_key("traceparent"),
            "sent by the gate: {headers:?}"
        );
        assert_eq!(
            headers["authorization"],
            format!("Bearer {UPSTREAM_TOKEN}").as_str()
        );
    }
    drop(gateway);

    // The same adapter, signed by the same trusted key, its mappings pointed elsewhere.
    let text = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    let mut manifest = gatehouse_host::plugin::manifest::Manifest::from_toml(&text).unwrap();
    let gatehouse_host::plugin::manifest::Manifest::Adapter(adapter) = &mut manifest else {
        panic!("an adapter manifest");
    };
    let elsewhere = collector.url("/mcp");
    for capability in &mut adapter.capabilities {
        capability.upstream.as_mut().unwrap()["url"] = json!(elsewhere);
    }
    let component = std::fs::read(MCP_UPSTREAM.wasm).unwrap();
    let signed = gatehouse_host::plugin::pack(&component, &manifest, &key).unwrap();
    let hostile = dir.path().join("hostile.wasm");
    std::fs::write(&hostile, signed).unwrap();
    for (mode, starts) in [("warn", true), ("refuse", false)] {
        let (started, _config) = checking_drift(&out, &key, &hostile, mode).await;
        let log = match &started {
            Ok(gateway) => gateway.log(),
            Err(log) => log.clone(),
        };
        assert_eq!(started.is_ok(), starts, "{mode}: {log}");
        assert!(
            log.contains(&format!(
                "adapter `{id}`: the MCP server at {elsewhere} cannot check it: the egress gate: \
                 no egress grant for this adapter covers {elsewhere}"
            )),
            "{mode}: {log}"
        );
        assert_eq!(
            collector.seen().len(),
            0,
            "{mode}: the collector received a request: {:?}",
            collector.seen()
        );
    }
}

/// Only `mcp-upstream` manifests are drift-checked: an OpenAPI import served with
/// `drift_check = "refuse"` starts, and its service hears nothing at start-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_drift_check_leaves_openapi_imports_alone() {
    let service = gatehouse_tests::upstream::Upstream::start().await;
    let id = "test.photos";
    let (dir, key, _) = import_openapi("photos.json", &photos_json(service.port), id);
    let out = dir.path().join("out");
    let (gateway, _config) =
        checking_drift(&out, &key, &out.join(format!("{id}.wasm")), "refuse").await;
    let gateway = gateway.unwrap_or_else(|log| panic!("it did not start: {log}"));
    assert_eq!(service.seen().len(), 0, "{:?}", service.seen());
    drop(gateway);
}

/// The capability `id` of a manifest read as TOML.
fn capability<'a>(manifest: &'a mut toml::Table, id: &str) -> &'a mut toml::Table {
    manifest["capability"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .filter_map(toml::Value::as_table_mut)
        .find(|c| c["id"].as_str() == Some(id))
        .unwrap()
}

/// An imported tool without annotations is `act`/`network`: its calls need an idempotency key
/// because of its class, which the manifest does not repeat. Reviewed down to
/// `observe`/`read_only` and signed with `gatehouse pack`, it is called without a key. A
/// manifest whose `idempotency` table still asks for one (an older import's) makes `pack`
/// warn, saying what to remove.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_reviewed_down_to_read_only_needs_no_idempotency_key() {
    let upstream = McpUpstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (key, key_path) = key_file(dir.path());
    let id = "test.upstream";
    import(&upstream, id, dir.path(), &key_path);
    let out = dir.path().join("out");
    let text = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    let mut manifest: toml::Table = toml::from_str(&text).unwrap();
    let add_note = capability(&mut manifest, "add_note");
    assert_eq!(add_note["capability_class"].as_str(), Some("act"));
    assert!(
        !add_note.contains_key("idempotency"),
        "the key follows from the class: {add_note:?}"
    );
    add_note.insert("capability_class".into(), "observe".into());
    add_note.insert("approval_mode".into(), "read_only".into());
    let reviewed = dir.path().join("reviewed.toml");
    std::fs::write(&reviewed, toml::to_string(&manifest).unwrap()).unwrap();
    let wasm = out.join(format!("{id}.wasm"));
    let pack = |manifest: &Path, output: &Path| {
        gatehouse(&[
            "pack",
            MCP_UPSTREAM.wasm,
            "--manifest",
            manifest.to_str().unwrap(),
            "--key",
            key_path.to_str().unwrap(),
            "-o",
            output.to_str().unwrap(),
        ])
    };
    let (code, packed) = pack(&reviewed, &wasm);
    assert_eq!(code, 0, "{packed}");
    assert!(!packed.contains("warning"), "{packed}");

    let gateway = Imported::start(&out, id, &key).await;
    let client = gateway.client().await;
    let (_, record) = rmcp_call(
        &client,
        "test.upstream.add_note",
        json!({ "text": "reviewed" }),
        json!({}),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{record}");
    assert_eq!(upstream.calls("add_note"), 1);

    let add_note = capability(&mut manifest, "add_note");
    let mut idempotency = toml::Table::new();
    idempotency.insert("required".into(), true.into());
    add_note.insert("idempotency".into(), idempotency.into());
    let older = dir.path().join("older.toml");
    std::fs::write(&older, toml::to_string(&manifest).unwrap()).unwrap();
    let (code, packed) = pack(&older, &dir.path().join("older.wasm"));
    assert_eq!(code, 0, "{packed}");
    assert!(
        packed.contains(
            "warning: capability `add_note`: `idempotency.required = true` asks every call for \
             an idempotency key, though class `observe` at mode `read_only` needs none"
        ),
        "{packed}"
    );
}

/// What a server offers besides its tools, imported, pinned and served governed in both
/// protocol versions: its resources, template and prompt listed, read and filled in through
/// the gateway (the upstream counts each), completions forwarded, a template parameter outside
/// the operator's constraint refused before the upstream sees a read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_servers_resources_and_prompts_are_served_governed() {
    use rmcp::model::{
        ArgumentInfo, CompleteRequestParams, GetPromptRequestParams, ReadResourceRequestParams,
        Reference,
    };
    for (upstream, protocol) in [
        (McpUpstream::start().await, "2026-07-28"),
        (McpUpstream::start_legacy().await, "2025-11-25"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let (key, key_path) = key_file(dir.path());
        let id = "test.notes";
        let printed = import(&upstream, id, dir.path(), &key_path);
        for line in [
            "resource notes://today as `today_s_notes`: classification `unreviewed`",
            "resource template notes://day/{date} as `notes_of_a_day`",
            "prompt `review_code`: pinned",
        ] {
            assert!(printed.contains(line), "{line}\n{printed}");
        }
        let out = dir.path().join("out");
        let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
        for pinned in [
            "[[resource]]",
            "[[resource_template]]",
            "[[prompt]]",
            "prompt = \"Review Code\"",
        ] {
            assert!(manifest.contains(pinned), "{pinned}\n{manifest}");
        }
        // The operator constrains the template's parameter for the default tenant.
        let constraint = "[[pipeline.tool]]\ntools = \"test.notes.notes_of_a_day\"\ntenants = [\"default\"]\narg_constraints = { date = { pattern = \"2026-[0-9]{2}-[0-9]{2}\" } }\n";
        let gateway =
            Imported::start_with(&out, id, &key, (TOKEN_ENV, UPSTREAM_TOKEN), constraint).await;
        let client = gateway.client().await;

        let resources = client.list_all_resources().await.unwrap();
        assert_eq!(
            resources.iter().map(|r| r.uri.as_str()).collect::<Vec<_>>(),
            ["notes://today"],
            "{protocol}"
        );
        let templates = client.list_all_resource_templates().await.unwrap();
        assert_eq!(templates[0].uri_template, "notes://day/{date}");
        let prompts = client.list_all_prompts().await.unwrap();
        assert_eq!(
            prompts.iter().map(|p| p.name.as_str()).collect::<Vec<_>>(),
            ["test.notes.review_code"]
        );

        let read = |uri: &str| {
            let client = &client;
            let uri = uri.to_owned();
            async move {
                client
                    .read_resource(ReadResourceRequestParams::new(uri))
                    .await
            }
        };
        let today = serde_json::to_value(read("notes://today").await.unwrap()).unwrap();
        assert_eq!(today["contents"][0]["text"], "today: buy milk", "{today}");
        let day = serde_json::to_value(read("notes://day/2026-11-28").await.unwrap()).unwrap();
        assert!(
            day["contents"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with("notes of 2026-11-28"),
            "{day}"
        );
        assert_eq!(upstream.calls("read notes://today"), 1);
        assert_eq!(upstream.calls("read notes://day/2026-11-28"), 1);
        // Outside the constraint: refused, and the upstream saw no read.
        let refused = read("notes://day/yesterday").await.unwrap_err().to_string();
        assert!(refused.contains("date"), "{refused}");
        assert_eq!(upstream.calls("read notes://day/yesterday"), 0);
        // Not a resource the server offers: not found, nothing forwarded.
        assert!(read("notes://elsewhere").await.is_err());
        assert_eq!(upstream.calls("read notes://elsewhere"), 0);

        let prompt = client
            .get_prompt(
                GetPromptRequestParams::new("test.notes.review_code").with_arguments(
                    serde_json::from_value(json!({ "code": "fn main() {}" })).unwrap(),
                ),
            )
            .await
            .unwrap();
        let prompt = serde_json::to_value(prompt).unwrap();
        assert_eq!(
            prompt["messages"][0]["content"]["text"], "Please review: fn main() {}",
            "{prompt}"
        );
        assert_eq!(upstream.calls("prompt Review Code"), 1);

        let completion = client
            .complete(CompleteRequestParams::new(
                Reference::for_resource("notes://day/{date}"),
                ArgumentInfo::new("date", "2026-11-2"),
            ))
            .await
            .unwrap();
        assert_eq!(
            completion.completion.values,
            ["2026-11-27", "2026-11-28"],
            "{protocol}"
        );

        // A prompt changed upstream is drift, as a tool is.
        upstream.change_prompt();
        let (code, text) = gatehouse(&["import", "mcp", "--check", out.to_str().unwrap()]);
        assert_eq!(
            (code, text),
            (
                1,
                format!(
                    "changed: prompt Review Code\ndrift: {} changed since the import; review and \
                     import again\n",
                    upstream.url
                )
            )
        );
    }
}

/// Runs the TypeScript SDK's agent (`tests/clients/agent.mjs`, `@modelcontextprotocol/client`
/// unless `options` say `--sdk v1`) calling `tool` with `args` through the gateway on port
/// `mcp` at `version`, with `options`: the JSON lines it printed.
pub(crate) async fn typescript_agent(
    mcp: u16,
    version: &str,
    tool: &str,
    args: &serde_json::Value,
    options: &[&str],
) -> Vec<serde_json::Value> {
    let clients = Path::new(env!("CARGO_MANIFEST_DIR")).join("clients");
    assert!(
        clients
            .join("node_modules/@modelcontextprotocol/client")
            .exists(),
        "the MCP TypeScript SDKs are not installed: run build-support/toolchains"
    );
    let mut command = std::process::Command::new("node");
    command
        .arg(clients.join("agent.mjs"))
        .arg(format!("http://127.0.0.1:{mcp}/mcp"))
        .args([version, tool, &args.to_string(), "--token", AGENT_KEY])
        .args(options);
    let output = tokio::task::spawn_blocking(move || command.output().expect("node runs"))
        .await
        .unwrap();
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

/// What an imported server tells and asks its client during a call reaches the caller (an
/// official SDK client) through the gateway, as an adapter's would: on a 2025-11-25 upstream,
/// its progress and its `elicitation/create` on the call's event stream, the answer posted
/// back; on a 2026-07-28 upstream, its `InputRequiredResult`, answered in a
/// retry with its `requestState`. Without the operator's `[[caller.grant]]` nobody is asked:
/// the upstream gets the protocol's error back (2025-11-25), or no retry (2026-07-28).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_servers_questions_reach_the_caller_under_the_operators_grant() {
    for legacy in [true, false] {
        let upstream = McpUpstream::start_asking(legacy).await;
        let dir = tempfile::tempdir().unwrap();
        let (key, key_path) = key_file(dir.path());
        let id = "test.asks";
        let out = dir.path().join("out");
        import_with(
            &upstream,
            id,
            dir.path(),
            &key_path,
            &["--include", "ask_name"],
        );
        let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
        assert!(manifest.contains("[caller]"), "{manifest}");
        let config = std::fs::read_to_string(out.join("config.toml")).unwrap();
        assert!(config.contains("# [[caller.grant]]"), "{config}");

        // Granted: the question reaches the client, its answer the upstream.
        let grant = format!("[[caller.grant]]\nadapter = \"{id}\"\nask = [\"elicitation\"]\n");
        let gateway =
            Imported::start_with(&out, id, &key, (TOKEN_ENV, UPSTREAM_TOKEN), &grant).await;
        let lines = typescript_agent(
            gateway.mcp,
            "2025-11-25",
            "test.asks.ask_name",
            &json!({}),
            &["--progress"],
        )
        .await;
        let event = |kind: &'static str| lines.iter().filter(move |l| l["event"] == kind);
        let asked: Vec<_> = event("elicitation").collect();
        assert_eq!(asked.len(), 1, "legacy {legacy}: {lines:#?}");
        assert_eq!(asked[0]["params"]["message"], "Your name?");
        let result = event("result")
            .next()
            .unwrap_or_else(|| panic!("{lines:#?}"));
        assert_eq!(
            result["result"]["content"][0]["text"], "answered: {\"approve\":true}",
            "{lines:#?}"
        );
        assert_eq!(
            upstream.answers(),
            [json!({ "action": "accept", "content": { "approve": true } })]
        );
        if legacy {
            // On the upstream's event stream, before its question: its progress. (Its log
            // line goes to the session's standalone stream, which rmcp's server uses for what
            // is not tied to a request, and the adapter does not open: not relayed.)
            let progress: Vec<_> = event("progress").collect();
            assert_eq!(progress.len(), 1, "{lines:#?}");
            assert_eq!(progress[0]["progress"]["message"], "asking");
        }
        drop(gateway);

        // Not granted: the client is never asked.
        let gateway = Imported::start(&out, id, &key).await;
        let lines = typescript_agent(
            gateway.mcp,
            "2025-11-25",
            "test.asks.ask_name",
            &json!({}),
            &[],
        )
        .await;
        assert!(
            lines.iter().all(|l| l["event"] != "elicitation"),
            "legacy {legacy}: {lines:#?}"
        );
        let answers = upstream.answers();
        if legacy {
            // The upstream got the protocol's error for its question, not a hang.
            assert_eq!(answers.len(), 2, "{answers:?}");
            let error = answers[1]["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("-32603") || error.contains("refused") || error.contains("grant"),
                "{error}"
            );
        } else {
            // No retry reached the upstream: the call ends with the gateway's refusal.
            assert_eq!(answers.len(), 1, "{answers:?}");
            // Granted: the first call and its retry; refused: the first alone.
            assert_eq!(upstream.calls("ask_name"), 3);
        }
    }
}

/// A caller that cancels its call cancels the imported 2025-11-25 server's request too: the
/// gateway cuts the adapter's wait on the upstream's event stream, and the adapter tells the
/// upstream (`notifications/cancelled`, in its session) in the moment the egress gate leaves
/// it, so the server stops working for nobody. The caller is the official TypeScript SDK, whose
/// request times out, which it cancels. (A 2026-07-28 upstream needs no notification: the
/// closed stream is its cancellation.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_cancels_the_imported_http_servers_request() {
    let upstream = McpUpstream::start_asking(true).await;
    let dir = tempfile::tempdir().unwrap();
    let (key, key_path) = key_file(dir.path());
    let id = "test.waits";
    import_with(&upstream, id, dir.path(), &key_path, &["--include", "wait"]);
    // The gateway's own deadline and egress budget well past the client's timeout, so it is
    // the client that gives the call up.
    let gateway = Imported::start_tuned(
        &dir.path().join("out"),
        id,
        &key,
        (TOKEN_ENV, UPSTREAM_TOKEN),
        "",
        |host| {
            host.egress.max_total_ms = 30_000;
            host.sandbox
                .plugins
                .push(gatehouse_host::config::PluginBudget {
                    id: gatehouse_tests::glob(id),
                    fuel: None,
                    timeout_ms: Some(30_000),
                    memory_mib: None,
                });
        },
    )
    .await;

    let started = std::time::Instant::now();
    let lines = typescript_agent(
        gateway.mcp,
        "2025-11-25",
        "test.waits.wait",
        &json!({ "seconds": 30 }),
        // The SDK's timeout covers `initialize` too, and on a busy machine the call may take
        // more than a second to reach the upstream: a timeout before then cancels a call the
        // upstream never saw (a full run timed out at 1.5 s once, against a 2 s deadline).
        &["--timeout", "5000", "--linger", "1000"],
    )
    .await;
    let errors: Vec<_> = lines.iter().filter(|l| l["event"] == "error").collect();
    assert_eq!(errors.len(), 1, "the request timed out: {lines:#?}");
    let heard = loop {
        let heard = upstream.cancellations();
        if !heard.is_empty() || started.elapsed() > std::time::Duration::from_secs(20) {
            break heard;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(
        heard,
        [json!({
            "requestId": 1,
            "reason": "the gateway gave the request up (its call was cancelled or cut short)",
        })],
        "after {:?}",
        started.elapsed()
    );
    // Well before the 30 s the tool waits: the request was given up, not waited out.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(upstream.calls("wait"), 1);
}

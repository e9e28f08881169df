//! MCP over Streamable HTTP: a real rmcp client against `McpServer` on loopback, and raw HTTP
//! for what a client library would never send. Two API keys: tenant `acme` sees every tool,
//! tenant `globex` only `gatehouse.echo.*`. The conformance adapter's tools are served as the
//! MCP conformance suite calls them (`conformance.rs` runs the suite itself).

use std::sync::Arc;
use std::time::Duration;

use gatehouse_host::HostConfig;
use gatehouse_host::config::EgressConfig;
use gatehouse_server::mcp::{ApiKeyConfig, McpConfig};
use gatehouse_tests::artifacts::{CONFORMANCE, ECHO, EGRESS_PROBE, LEDGER, PANIC, TEXTKIT};
use gatehouse_tests::cli::{gatehouse_async, s, serve_in_process};
use gatehouse_tests::host::HostBuilder;
use gatehouse_tests::mcp::{
    Client, client, client_speaking, mcp_post, texts, tool_names, tools_call,
};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{Artifact, grant};
use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion, ResultType};
use serde_json::{Value, json};

const ACME_KEY: &str = "acme-key-5d1e";
const GLOBEX_KEY: &str = "globex-key-93ab";

/// A gateway's MCP server running in this process: its endpoint URL and port, and the
/// directory holding its key files.
struct Endpoint {
    url: String,
    port: u16,
    host: Arc<gatehouse_host::Host>,
    _keys: tempfile::TempDir,
}

async fn gateway(tweak: impl FnOnce(&mut McpConfig)) -> Endpoint {
    gateway_with(|_| {}, &[], tweak).await
}

/// [`gateway`] with the host config tweaked and more plugins installed.
async fn gateway_with(
    host_tweak: impl FnOnce(&mut HostConfig),
    more: &[Artifact],
    tweak: impl FnOnce(&mut McpConfig),
) -> Endpoint {
    let keys = tempfile::tempdir().unwrap();
    let key = |tenant: &str, key: &str| {
        let path = keys.path().join(tenant);
        std::fs::write(&path, key).unwrap();
        ApiKeyConfig {
            tenant: tenant.to_owned(),
            principal: Some(format!("agent:{tenant}-bot")),
            env: None,
            file: Some(path),
            roles: Vec::new(),
            groups: Vec::new(),
        }
    };
    let mut mcp = McpConfig {
        api_keys: vec![key("acme", ACME_KEY), key("globex", GLOBEX_KEY)],
        ..McpConfig::default()
    };
    tweak(&mut mcp);
    let host = HostBuilder::trusting(&["gatehouse.*", "test.*"], &[])
        .with(|config| {
            config.pipeline.tools = vec![
                grant("*", &["acme"]),
                grant("gatehouse.echo.*", &["globex"]),
            ];
        })
        .with(host_tweak)
        .adapters(&[ECHO, TEXTKIT, LEDGER, CONFORMANCE])
        .adapters(more)
        .build();
    let host = Arc::new(host);
    let port = gatehouse_tests::mcp::serve(Arc::clone(&host), &mcp).await;
    Endpoint {
        url: format!("http://127.0.0.1:{port}/mcp"),
        port,
        host,
        _keys: keys,
    }
}

/// An rmcp client of `gateway` with API key `key`.
async fn connect(gateway: &Endpoint, key: &str) -> Client {
    client(&gateway.url, Some(key)).await
}

fn params(call: Value) -> CallToolRequestParams {
    serde_json::from_value(call).unwrap()
}

/// The gateway's record of the call.
fn record(result: &CallToolResult) -> &Value {
    &result.meta.as_ref().expect("_meta is set")["gatehouse/result"]
}

/// `tools/list` for `client` includes every tool in `expected`.
async fn assert_lists(client: &Client, expected: &[&str]) {
    let names = tool_names(client).await;
    for tool in expected {
        assert!(
            names.iter().any(|n| n == tool),
            "{tool} missing from {names:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_shows_each_tenant_its_tools_with_schemas() {
    let gateway = gateway(|_| {}).await;
    let acme = connect(&gateway, ACME_KEY).await;
    assert_lists(
        &acme,
        &[
            "gatehouse.echo.echo",
            "gatehouse.textkit.word_stats",
            "test.ledger.transfer",
        ],
    )
    .await;

    let globex = connect(&gateway, GLOBEX_KEY).await;
    let tools = globex.list_all_tools().await.unwrap();
    assert_eq!(tools.len(), 1, "{tools:#?}");
    let echo = &tools[0];
    assert_eq!(echo.name, "gatehouse.echo.echo");
    assert_eq!(echo.input_schema["required"], json!(["message"]));
    assert!(echo.output_schema.is_some());
    let hints = echo.annotations.as_ref().expect("the manifest's hints");
    assert_eq!(hints.read_only_hint, Some(true));
    assert_eq!(hints.destructive_hint, None);
    assert!(echo.description.as_deref().is_some_and(|d| !d.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_call_runs_the_governed_pipeline() {
    let gateway = gateway(|_| {}).await;
    let acme = connect(&gateway, ACME_KEY).await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let result = acme
        .call_tool(params(json!({
            "name": "gatehouse.echo.echo",
            "arguments": { "message": "over mcp" },
            "_meta": { "traceparent": traceparent },
        })))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{result:#?}");
    assert_eq!(texts(&result), ["over mcp"]);
    assert_eq!(
        result.structured_content,
        Some(json!({ "message": "over mcp", "length": 8 }))
    );
    let record = record(&result);
    assert_eq!(record["outcome"], "OK");
    assert_eq!(record["trace_id"], "0af7651916cd43dd8448eb211c80319c");
    assert_eq!(record["adapter"]["id"], "gatehouse.echo");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_call_is_a_tool_error_result_with_its_outcome() {
    let gateway = gateway(|_| {}).await;
    let acme = connect(&gateway, ACME_KEY).await;
    let result = acme
        .call_tool(params(
            json!({ "name": "gatehouse.echo.echo", "arguments": { "message": 42 } }),
        ))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(true));
    assert_eq!(record(&result)["outcome"], "INVALID_ARGUMENTS");
    let text = texts(&result).join("\n");
    assert!(text.starts_with("INVALID_ARGUMENTS: "), "{text}");
    assert!(text.contains("message"), "{text}");
    assert!(result.structured_content.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_idempotency_key_and_approval_mode_travel_in_meta() {
    let gateway = gateway(|_| {}).await;
    let acme = connect(&gateway, ACME_KEY).await;
    let transfer = |meta: Value| {
        params(json!({
            "name": "test.ledger.transfer",
            "arguments": { "amount": 10, "currency": "EUR" },
            "_meta": meta,
        }))
    };
    let without = acme.call_tool(transfer(json!({}))).await.unwrap();
    assert_eq!(record(&without)["outcome"], "IDEMPOTENCY_KEY_REQUIRED");

    let with = acme
        .call_tool(transfer(json!({
            "gatehouse/idempotency_key": "order-77",
            "gatehouse/approval_mode": "network",
        })))
        .await
        .unwrap();
    assert_eq!(with.is_error, Some(false), "{with:#?}");
    assert_eq!(record(&with)["approval_mode_effective"], "network");
    assert!(with.structured_content.as_ref().unwrap()["transfer_id"].is_string());

    let bad = acme
        .call_tool(transfer(json!({ "gatehouse/approval_mode": "yolo" })))
        .await
        .expect_err("an unknown approval mode is invalid params");
    assert!(bad.to_string().contains("gatehouse/approval_mode"), "{bad}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_and_missing_tools_are_the_same_protocol_error() {
    let gateway = gateway(|_| {}).await;
    let globex = connect(&gateway, GLOBEX_KEY).await;
    let hidden = globex
        .call_tool(params(
            json!({ "name": "gatehouse.textkit.word_stats", "arguments": { "text": "a" } }),
        ))
        .await
        .expect_err("hidden");
    let missing = globex
        .call_tool(params(
            json!({ "name": "gatehouse.nothing.here", "arguments": {} }),
        ))
        .await
        .expect_err("missing");
    let shape = |e: &rmcp::ServiceError| {
        e.to_string()
            .replace("gatehouse.textkit.word_stats", "<tool>")
            .replace("gatehouse.nothing.here", "<tool>")
    };
    assert_eq!(shape(&hidden), shape(&missing));
    assert!(hidden.to_string().contains("unknown tool"), "{hidden}");
}

/// One raw HTTP POST to the gateway; returns (status, headers, body).
const LIST: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_refusals_have_exact_statuses() {
    let gateway = gateway(|mcp| {
        mcp.allowed_origins = vec!["https://console.example:443".to_owned()];
        mcp.max_request_bytes = 4096;
    })
    .await;
    let port = gateway.port;
    let auth = format!("Bearer {ACME_KEY}");
    let auth = auth.as_str();

    let (status, headers, body) = mcp_post(port, "/mcp", &[], LIST).await;
    assert_eq!(status, 401, "{body}");
    // RFC 9728: the challenge names the protected resource metadata (`[mcp] public_url`, by
    // default the listen address).
    assert_eq!(
        headers["www-authenticate"],
        "Bearer resource_metadata=\"http://127.0.0.1:8787/.well-known/oauth-protected-resource/mcp\""
    );
    assert!(body.contains("IDENTITY_INVALID"), "{body}");

    let (status, headers, body) =
        mcp_post(port, "/mcp", &[("authorization", "Bearer nope")], LIST).await;
    assert_eq!(status, 401, "{body}");
    assert!(
        headers["www-authenticate"]
            .to_str()
            .unwrap()
            .ends_with(", error=\"invalid_token\""),
        "{headers:?}"
    );
    assert!(body.contains("not valid"), "{body}");

    let (status, _, body) = mcp_post(port, "/other", &[("authorization", auth)], LIST).await;
    assert_eq!(status, 404, "{body}");

    let (status, _, body) = mcp_post(
        port,
        "/mcp",
        &[("authorization", auth), ("origin", "https://evil.example")],
        LIST,
    )
    .await;
    assert_eq!(status, 403, "{body}");

    let (status, _, body) = mcp_post(
        port,
        "/mcp",
        &[
            ("authorization", auth),
            ("origin", "https://console.example"),
        ],
        LIST,
    )
    .await;
    assert_eq!(status, 200, "an allowed origin passes: {body}");

    // DNS rebinding: a name that resolves to loopback but is not an allowed host.
    let (status, _, body) = mcp_post(
        port,
        "/mcp",
        &[("authorization", auth), ("host", "attacker.example")],
        LIST,
    )
    .await;
    assert_eq!(status, 403, "{body}");

    let big = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"pad":"{}"}}}}"#,
        "x".repeat(8192)
    );
    let (status, _, body) = mcp_post(port, "/mcp", &[("authorization", auth)], big).await;
    assert_eq!(status, 413, "{body}");

    // A body that is not JSON is the JSON-RPC parse error; JSON that is not a JSON-RPC
    // message the invalid-request error; both HTTP 400 with a JSON-RPC error body.
    let (status, headers, body) =
        mcp_post(port, "/mcp", &[("authorization", auth)], "{not json").await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(headers["content-type"], "application/json");
    let reply: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(reply["jsonrpc"], "2.0");
    assert_eq!(reply["id"], Value::Null);
    assert_eq!(reply["error"]["code"], -32700, "{body}");
    let (status, _, body) =
        mcp_post(port, "/mcp", &[("authorization", auth)], r#"{"hello":1}"#).await;
    assert_eq!(status, 400, "{body}");
    let reply: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
    assert_eq!(reply["error"]["code"], -32600, "{body}");
    // A body declared as something else than JSON keeps HTTP's 415.
    let (status, _, body) = mcp_post(
        port,
        "/mcp",
        &[("authorization", auth), ("content-type", "text/plain")],
        LIST,
    )
    .await;
    assert_eq!(status, 415, "{body}");
    // A `tools/call` is refused the same: a bad Host or a foreign Origin is 403.
    let call = r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"gatehouse.echo.echo","arguments":{"message":"x"}}}"#;
    for refused in [
        ("host", "attacker.example"),
        ("origin", "https://evil.example"),
    ] {
        let (status, _, body) =
            mcp_post(port, "/mcp", &[("authorization", auth), refused], call).await;
        assert_eq!(status, 403, "{refused:?}: {body}");
    }
    // Refusals before the body is read keep their order: a bad Host is 403, body or not.
    let (status, _, body) = mcp_post(
        port,
        "/mcp",
        &[("authorization", auth), ("host", "attacker.example")],
        "{not json",
    )
    .await;
    assert_eq!(status, 403, "{body}");
}

/// JSON is UTF-8. serde_json skips a field nothing reads without checking its bytes, so a
/// `tools/call` with invalid UTF-8 in such a field ran (found by the fuzz target
/// `mcp::fuzz::request`). It is the parse error, and nothing runs; the same call with valid
/// text runs, whatever the `Accept`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_with_invalid_utf8_in_a_field_nobody_reads_is_a_parse_error_and_does_not_run() {
    let gateway = gateway(|_| {}).await;
    let auth = format!("Bearer {ACME_KEY}");
    let call = |note: &[u8]| {
        let mut body = br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"gatehouse.echo.echo","arguments":{"message":"x"},"note":""#.to_vec();
        body.extend_from_slice(note);
        body.extend_from_slice(br#""}}"#);
        body
    };
    for accept in [
        "application/json, text/event-stream",
        "text/event-stream;q=1",
    ] {
        let headers = [("authorization", auth.as_str()), ("accept", accept)];
        let (status, _, body) = mcp_post(gateway.port, "/mcp", &headers, call(b"\xa1\xa1")).await;
        assert_eq!(status, 400, "{accept}: {body}");
        let reply: Value = serde_json::from_str(&body).expect("a JSON-RPC error");
        assert_eq!(reply["error"]["code"], -32700, "{accept}: {body}");
        assert!(reply.get("result").is_none(), "{accept}: {body}");

        let (status, _, body) = mcp_post(gateway.port, "/mcp", &headers, call(b"ok")).await;
        assert_eq!(status, 200, "{accept}: {body}");
        assert!(body.contains("gatehouse/result"), "{accept}: {body}");
    }
}

/// `Host`, `Origin` and `Accept` are checks, never path selectors (issue 56, item 0): a
/// 2025-11-25 client from an allowed browser origin, with parameters in its `Accept`, gets what
/// a plain one gets. Before, such a request went another way (rmcp's service, not gatehouse's
/// 2025-11-25 path): no `capabilities.tasks`, no task for `params.task`, `tasks/get` refused.
/// Each request is sent both ways: status, content type and the JSON-RPC message must match (a
/// call's record differs only in the call's own ids).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn headers_are_checks_so_a_browser_origin_gets_every_feature_a_plain_client_gets() {
    let gateway = gateway(|_| {}).await;
    let auth = format!("Bearer {ACME_KEY}");
    let plain = [("authorization", auth.as_str())];
    let browser = [
        ("authorization", auth.as_str()),
        ("origin", "http://localhost:3000"),
        ("accept", "text/event-stream;q=1, application/json;q=0.9"),
    ];
    let request = |id: &str, method: &str, params: Value| {
        json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params }).to_string()
    };
    let call = |id: &str, params: Value| request(id, "tools/call", params);
    let cases = [
        request(
            "i",
            "initialize",
            json!({ "protocolVersion": "2025-11-25", "capabilities": {},
                    "clientInfo": { "name": "t", "version": "1" } }),
        ),
        request("l", "tools/list", json!({})),
        // ok, with structured content and the record in `_meta`
        call(
            "1",
            json!({ "name": "gatehouse.echo.echo", "arguments": { "message": "same" } }),
        ),
        // a tool error result (arguments against the schema)
        call(
            "2",
            json!({ "name": "gatehouse.echo.echo", "arguments": { "message": 7 } }),
        ),
        // a protocol error: the unknown tool
        call("3", json!({ "name": "no.such.tool", "arguments": {} })),
        // a protocol error: bad `_meta`
        call(
            "4",
            json!({ "name": "gatehouse.echo.echo", "arguments": { "message": "x" },
                    "_meta": { "gatehouse/idempotency_key": 5 } }),
        ),
    ];
    for body in cases {
        let (status, headers, plain_body) =
            mcp_post(gateway.port, "/mcp", &plain, body.clone()).await;
        let (browser_status, browser_headers, browser_body) =
            mcp_post(gateway.port, "/mcp", &browser, body.clone()).await;
        assert_eq!(status, 200, "{body}: {plain_body}");
        assert_eq!(browser_status, 200, "{body}: {browser_body}");
        assert_eq!(headers["content-type"], browser_headers["content-type"]);
        let mut plain_reply: Value = serde_json::from_str(&plain_body).unwrap();
        let mut browser_reply: Value = serde_json::from_str(&browser_body).unwrap();
        let records = [&mut plain_reply, &mut browser_reply].map(|reply| {
            reply
                .pointer_mut("/result/_meta/gatehouse~1result")
                .map(Value::take)
        });
        assert_eq!(plain_reply, browser_reply, "{body}");
        if let [Some(plain_record), Some(browser_record)] = records {
            assert_eq!(plain_record["outcome"], browser_record["outcome"], "{body}");
            assert_ne!(
                plain_record["tool_call_id"], browser_record["tool_call_id"],
                "two calls ran"
            );
        }
        if body.contains("initialize") {
            assert!(
                browser_reply["result"]["capabilities"]["tasks"].is_object(),
                "{browser_reply}"
            );
        }
        if body.contains("tools/list") {
            assert_eq!(
                browser_reply["result"]["tools"][0]["execution"]["taskSupport"], "optional",
                "{browser_reply}"
            );
        }
    }
    // A task, asked for and read back from the browser's origin.
    let task = call(
        "t",
        json!({ "name": "gatehouse.echo.echo", "arguments": { "message": "task" }, "task": { "ttl": 60000 } }),
    );
    let (status, _, created) = mcp_post(gateway.port, "/mcp", &browser, task).await;
    assert_eq!(status, 200, "{created}");
    let created: Value = serde_json::from_str(&created).unwrap();
    let task_id = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("a task: {created}"))
        .to_owned();
    let get = request("g", "tasks/get", json!({ "taskId": task_id }));
    let (status, _, got) = mcp_post(gateway.port, "/mcp", &browser, get).await;
    assert_eq!(status, 200, "{got}");
    let got: Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["result"]["status"], "completed", "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loopback_listener_admits_loopback_browser_origins_by_default() {
    let gateway = gateway(|_| {}).await;
    let auth = format!("Bearer {ACME_KEY}");
    let origin = |origin: &'static str| [("authorization", auth.as_str()), ("origin", origin)];
    for allowed in [
        "http://localhost:8787",
        "http://localhost",
        "http://127.0.0.1:3000",
        "http://[::1]:5173",
        "https://localhost:8443",
    ] {
        let (status, _, body) = mcp_post(gateway.port, "/mcp", &origin(allowed), LIST).await;
        assert_eq!(status, 200, "{allowed}: {body}");
        assert!(body.contains("gatehouse.echo.echo"), "{allowed}: {body}");
    }
    for refused in [
        "https://evil.example",
        "http://localhost.evil.example:8787",
        "http://127.0.0.2:8787",
        "null",
    ] {
        let (status, _, body) = mcp_post(gateway.port, "/mcp", &origin(refused), LIST).await;
        assert_eq!(status, 403, "{refused}: {body}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_listener_admits_only_listed_origins() {
    let listen = "0.0.0.0:0".parse().unwrap();
    let unlisted = gateway(|mcp| mcp.listen = listen).await;
    let listed = gateway(|mcp| {
        mcp.listen = listen;
        mcp.allowed_origins = vec!["http://localhost:8787".to_owned()];
    })
    .await;
    let auth = format!("Bearer {ACME_KEY}");
    let headers = [
        ("authorization", auth.as_str()),
        ("origin", "http://localhost:8787"),
    ];
    let (status, _, body) = mcp_post(unlisted.port, "/mcp", &headers, LIST).await;
    assert_eq!(status, 403, "{body}");
    let (status, _, body) = mcp_post(listed.port, "/mcp", &headers, LIST).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, body) = mcp_post(
        listed.port,
        "/mcp",
        &[
            ("authorization", auth.as_str()),
            ("origin", "http://127.0.0.1:8787"),
        ],
        LIST,
    )
    .await;
    assert_eq!(status, 403, "only the listed origin: {body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_results_follow_the_negotiated_protocol_version() {
    let gateway = gateway(|_| {}).await;
    let call = || params(json!({ "name": "gatehouse.echo.echo", "arguments": { "message": "v" } }));
    for (version, result_type) in [
        // 2026-07-28: no initialize; `server/discover`, then self-contained requests.
        (ProtocolVersion::V_2026_07_28, Some(ResultType::COMPLETE)),
        (ProtocolVersion::V_2025_11_25, None),
    ] {
        let client = client_speaking(&gateway.url, Some(ACME_KEY), &version).await;
        let result = client.call_tool(call()).await.unwrap();
        assert_eq!(result.is_error, Some(false), "{result:#?}");
        assert_eq!(record(&result)["outcome"], "OK");
        // 2026-07-28 requires `resultType: "complete"`; 2025-11-25 does not know the field.
        assert_eq!(result.result_type, result_type, "{version}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gatehouse_serve_demo_answers_an_mcp_client_without_a_key() {
    // The README's "run the gateway" command, on any free port. It serves until the test
    // process ends.
    let (url, output) = serve_in_process(&["--demo", "--listen", "127.0.0.1:0"]);
    assert!(output.contains("tenant `default`"), "{output}");
    let client = client(&url, None).await;
    assert_lists(
        &client,
        &["gatehouse.echo.echo", "gatehouse.textkit.word_stats"],
    )
    .await;
    // The conformance adapter is for the test suite, not a new user's tool list.
    let tools = client.list_all_tools().await.unwrap();
    assert!(
        tools.iter().all(|t| !t.name.contains("conformance")),
        "{:?}",
        tools.iter().map(|t| &t.name).collect::<Vec<_>>()
    );
    let result = client
        .call_tool(params(json!({ "name": "gatehouse.textkit.word_stats", "arguments": { "text": "one two two" } })))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{result:#?}");
    assert_eq!(record(&result)["outcome"], "OK");

    // The README's own `tools/call` (its curl command: these headers, this body) answers OK.
    let port: u16 = url
        .trim_start_matches("http://127.0.0.1:")
        .trim_end_matches("/mcp")
        .parse()
        .unwrap_or_else(|_| panic!("a loopback endpoint: {url}"));
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("the README");
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"gatehouse.echo.echo","arguments":{"message":"hi"}}}"#;
    assert!(
        readme.contains(&format!("-d '{body}'")),
        "the README's curl command sends this body"
    );
    let (status, _, answer) = gatehouse_tests::http(
        port,
        "POST",
        "/mcp",
        &[
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        body,
    )
    .await;
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(status, 200, "{answer}");
    assert!(answer.contains(r#""outcome":"OK""#), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_never_finishes_its_headers_is_disconnected() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let gateway = gateway(|mcp| mcp.header_timeout_ms = 200).await;
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", gateway.port))
        .await
        .unwrap();
    stream
        .write_all(b"POST /mcp HTTP/1.1\r\nhost: 127.0.0.1\r\n")
        .await
        .unwrap();
    // The gateway closes the connection (possibly after a 408) instead of waiting forever.
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection is still open after 5 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
}

/// The MCP conformance suite's fixed tool names, as `[mcp.aliases]` maps them.
const SUITE_TOOLS: [&str; 32] = [
    "confirm_delete",
    "failing_job",
    "greet",
    "json_schema_2020_12_tool",
    "multi_input",
    "protocol_error_job",
    "slow_compute",
    "test_audio_content",
    "test_elicitation",
    "test_elicitation_sep1034_defaults",
    "test_elicitation_sep1330_enums",
    "test_embedded_resource",
    "test_error_handling",
    "test_header_param",
    "test_image_content",
    "test_input_required_result_capabilities",
    "test_input_required_result_elicitation",
    "test_input_required_result_list_roots",
    "test_input_required_result_multi_round",
    "test_input_required_result_multiple_inputs",
    "test_input_required_result_request_state",
    "test_input_required_result_sampling",
    "test_input_required_result_tampered_state",
    "test_logging_tool",
    "test_missing_capability",
    "test_multiple_content_types",
    "test_sampling",
    "test_simple_text",
    "test_streaming_elicitation",
    "test_tool_with_logging",
    "test_tool_with_progress",
    "test_tool_with_task",
];

/// A 1x1 red PNG, base64: what `test_image_content` returns.
const RED_PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";

fn content(result: &CallToolResult) -> Value {
    serde_json::to_value(&result.content).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aliased_conformance_tools_answer_what_the_suite_expects() {
    let aliases: Value = SUITE_TOOLS
        .iter()
        .map(|t| ((*t).to_owned(), json!(format!("gatehouse.conformance.{t}"))))
        .collect::<serde_json::Map<_, _>>()
        .into();
    let gateway = gateway(|mcp| mcp.aliases = serde_json::from_value(aliases).unwrap()).await;
    let acme = connect(&gateway, ACME_KEY).await;
    let tools = acme.list_all_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for name in SUITE_TOOLS {
        assert!(names.contains(&name), "{name} missing from {names:?}");
    }
    assert!(
        !names
            .iter()
            .any(|n| n.starts_with("gatehouse.conformance.")),
        "an aliased tool is listed under its alias only: {names:?}"
    );
    // json-schema-2020-12: the keywords reach the client untouched.
    let schema = &tools
        .iter()
        .find(|t| t.name == "json_schema_2020_12_tool")
        .unwrap()
        .input_schema;
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    assert_eq!(schema["$defs"]["address"]["type"], "object");
    assert_eq!(schema["$defs"]["address"]["$anchor"], "addressDef");
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(
        schema["allOf"],
        json!([{ "anyOf": [{ "required": ["phone"] }, { "required": ["email"] }] }])
    );
    assert_eq!(schema["then"], json!({ "required": ["phone"] }));
    assert_eq!(schema["else"], json!({ "required": ["email"] }));
    assert_eq!(
        schema["if"]["properties"]["contactMethod"]["const"],
        "phone"
    );

    let call = |name: &str, args: Value| {
        let acme = &acme;
        let request = params(json!({ "name": name, "arguments": args }));
        async move { acme.call_tool(request).await.unwrap() }
    };
    let text = call("test_simple_text", json!({})).await;
    assert_eq!(
        content(&text),
        json!([{ "type": "text", "text": "This is a simple text response for testing." }])
    );
    // The record names the real tool, not the alias.
    assert_eq!(
        record(&text)["capability_id"],
        "gatehouse.conformance.test_simple_text"
    );
    let image = call("test_image_content", json!({})).await;
    assert_eq!(
        content(&image),
        json!([{ "type": "image", "data": RED_PIXEL_PNG, "mimeType": "image/png" }])
    );
    let audio = call("test_audio_content", json!({})).await;
    let audio = content(&audio);
    assert_eq!(audio[0]["type"], "audio");
    assert_eq!(audio[0]["mimeType"], "audio/wav");
    // "RIFF" in base64, and 44 header bytes + 800 samples = 844 bytes = 1128 base64 chars.
    assert!(
        audio[0]["data"].as_str().unwrap().starts_with("UklGR"),
        "{audio}"
    );
    assert_eq!(audio[0]["data"].as_str().unwrap().len(), 1128);
    let resource = call("test_embedded_resource", json!({})).await;
    assert_eq!(
        content(&resource),
        json!([{ "type": "resource", "resource": {
            "uri": "test://embedded-resource",
            "mimeType": "text/plain",
            "text": "This is an embedded resource content.",
        } }])
    );
    let mixed = call("test_multiple_content_types", json!({})).await;
    let types: Vec<Value> = content(&mixed)
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["type"].clone())
        .collect();
    assert_eq!(types, [json!("text"), json!("image"), json!("resource")]);
    let error = call("test_error_handling", json!({})).await;
    assert_eq!(error.is_error, Some(true));
    assert_eq!(record(&error)["outcome"], "TOOL_ERROR");
    assert_eq!(
        texts(&error),
        ["TEST_ERROR: This tool intentionally returns an error for testing"]
    );
    let args = json!({ "name": "Ada", "address": { "street": "1 Main St", "city": "Paris" },
                       "email": "ada@example.org" });
    let ok = call("json_schema_2020_12_tool", args.clone()).await;
    assert_eq!(ok.is_error, Some(false), "{ok:#?}");
    assert_eq!(texts(&ok), [format!("received: {args}")]);
    let phone = json!({ "name": "Ada", "contactMethod": "phone", "phone": "+33 1 23 45 67 89" });
    assert_eq!(
        call("json_schema_2020_12_tool", phone).await.is_error,
        Some(false)
    );
    // The 2020-12 schema is enforced: `$ref` into `$defs`, no additional properties, `allOf`
    // with `anyOf`, and `if`/`then`/`else` (SEP-2106).
    for bad in [
        json!({ "name": "Ada", "address": { "city": 7 }, "email": "a@b.c" }),
        json!({ "name": "Ada", "age": 36, "email": "a@b.c" }),
        json!({ "name": "Ada" }),
        json!({ "name": "Ada", "contactMethod": "phone", "email": "a@b.c" }),
        json!({ "name": "Ada", "contactMethod": "fax", "email": "a@b.c" }),
    ] {
        let refused = call("json_schema_2020_12_tool", bad.clone()).await;
        assert_eq!(record(&refused)["outcome"], "INVALID_ARGUMENTS", "{bad}");
    }
}

/// 2025-11-25 has the client choose a task (`params.task`); a tool's manifest says whether it
/// may (`task_support`): a `forbidden` tool asked for a task and a `required` one called
/// without are method not found, before anything runs; an `optional` one runs either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_support_decides_which_calls_may_be_tasks_on_2025_11_25() {
    let aliases = json!({
        "greet": "gatehouse.conformance.greet",
        "failing_job": "gatehouse.conformance.failing_job",
        "slow_compute": "gatehouse.conformance.slow_compute",
    });
    let gateway = gateway(|mcp| mcp.aliases = serde_json::from_value(aliases).unwrap()).await;
    let auth = format!("Bearer {ACME_KEY}");
    let post = |tool: &str, args: Value, task: bool| {
        let mut body: Value = serde_json::from_str(&tools_call(tool, args, Value::Null)).unwrap();
        if task {
            body["params"]["task"] = json!({ "ttl": 60_000 });
        }
        let auth = auth.clone();
        async move {
            let headers = [("authorization", auth.as_str())];
            let (status, _, body) =
                mcp_post(gateway.port, "/mcp", &headers, body.to_string()).await;
            assert_eq!(status, 200, "{body}");
            serde_json::from_str::<Value>(&body).unwrap()
        }
    };

    let listed = post_list(gateway.port, &auth).await;
    let support = |name: &str| {
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == name)
            .map(|tool| tool["execution"]["taskSupport"].clone())
    };
    assert_eq!(support("greet"), Some(json!("forbidden")));
    assert_eq!(support("failing_job"), Some(json!("required")));
    assert_eq!(support("slow_compute"), Some(json!("optional")));
    assert_eq!(support("gatehouse.echo.echo"), Some(json!("optional")));

    let refused = post("greet", json!({ "name": "Ada" }), true).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not run as a task")
    );
    let refused = post("failing_job", json!({}), false).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("runs only as a task")
    );

    let greeted = post("greet", json!({ "name": "Ada" }), false).await;
    assert_eq!(
        greeted["result"]["content"][0]["text"], "Hello, Ada!",
        "{greeted}"
    );
    let task = post(
        "slow_compute",
        json!({ "seconds": 0, "label": "now" }),
        true,
    )
    .await;
    assert_eq!(task["result"]["task"]["status"], "completed", "{task}");
}

/// A 2026-07-28 `prompts/get` whose prompt asks its caller: an `InputRequiredResult` first,
/// then, on the retry with the answer and the `requestState`, the messages, from the same
/// call. The state resumes only that prompt with those arguments: not other arguments, and
/// not a `tools/call` of the same name. Without the operator's `[[caller.grant]]`, nobody is
/// asked and the prompt fails saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_that_asks_gets_an_input_round_and_its_state_resumes_only_itself() {
    let aliases = || {
        serde_json::from_value(json!({
            "asking": "gatehouse.conformance.test_input_required_result_prompt",
        }))
        .unwrap()
    };
    let granted = gateway_with(
        |config| {
            config.caller = serde_json::from_value(json!({ "grant": [{
                "adapter": "gatehouse.conformance", "ask": ["elicitation"],
            }] }))
            .unwrap();
        },
        &[],
        |mcp| mcp.aliases = aliases(),
    )
    .await;
    let auth = format!("Bearer {ACME_KEY}");
    let post = |port: u16, method: &'static str, params: Value| {
        let auth = auth.clone();
        async move {
            let mut params = params;
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": { "elicitation": {} },
            });
            let name = params["name"].as_str().unwrap().to_owned();
            let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
            let headers = [
                ("authorization", auth.as_str()),
                ("content-type", "application/json"),
                ("accept", "application/json, text/event-stream"),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", method),
                ("mcp-name", name.as_str()),
            ];
            let (_, _, body) =
                gatehouse_tests::http(port, "POST", "/mcp", &headers, body.to_string()).await;
            serde_json::from_slice::<Value>(&body).unwrap()
        }
    };

    let first = post(granted.port, "prompts/get", json!({ "name": "asking" })).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let request = &first["result"]["inputRequests"]["user_context"];
    assert_eq!(request["method"], "elicitation/create", "{first}");
    let state = first["result"]["requestState"].clone();
    let answer = json!({ "user_context": { "action": "accept", "content": { "context": "tea" } } });

    // The state, under other arguments or on a tool call of the same name: refused.
    let other = post(
        granted.port,
        "prompts/get",
        json!({ "name": "asking", "arguments": { "x": "y" }, "requestState": state, "inputResponses": answer }),
    )
    .await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    let as_tool = post(
        granted.port,
        "tools/call",
        json!({ "name": "asking", "arguments": {}, "requestState": state, "inputResponses": answer }),
    )
    .await;
    assert_eq!(as_tool["error"]["code"], -32602, "{as_tool}");

    let answered = post(
        granted.port,
        "prompts/get",
        json!({ "name": "asking", "requestState": state, "inputResponses": answer }),
    )
    .await;
    assert_eq!(answered["result"]["resultType"], "complete", "{answered}");
    assert_eq!(
        answered["result"]["messages"][0]["content"]["text"],
        "Answer with this context in mind: tea",
        "{answered}"
    );
    // Its round is over: the same state resumes nothing now.
    let again = post(
        granted.port,
        "prompts/get",
        json!({ "name": "asking", "requestState": state, "inputResponses": answer }),
    )
    .await;
    assert_eq!(again["error"]["code"], -32602, "{again}");

    // No grant: nobody is asked, and the prompt says why.
    let ungranted = gateway(|mcp| mcp.aliases = aliases()).await;
    let refused = post(ungranted.port, "prompts/get", json!({ "name": "asking" })).await;
    assert!(refused.get("error").is_some(), "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ask"),
        "{refused}"
    );
}

/// A 2025-11-25 caller's event stream (a `GET`): a resource it subscribed to is said to change
/// when the adapter serving it is upgraded, one it did not subscribe to is not, and the tool
/// list is said to change when an adapter is installed. It subscribes only to what it may
/// read. The same from a 2026-07-28 `subscriptions/listen`, acknowledged first, each
/// notification naming the request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_tells_a_subscriber_what_changed_and_nothing_else() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let endpoint = gateway(|_| {}).await;
    let port = endpoint.port;
    let auth = format!("Bearer {ACME_KEY}");
    let rpc = |method: &str, params: Value| {
        json!({ "jsonrpc": "2.0", "id": 3, "method": method, "params": params }).to_string()
    };
    let headers = [("authorization", auth.as_str())];
    let (_, _, body) = mcp_post(
        port,
        "/mcp",
        &headers,
        rpc(
            "resources/subscribe",
            json!({ "uri": "test://static-text" }),
        ),
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&body).unwrap()["result"],
        json!({}),
        "{body}"
    );
    let (_, _, body) = mcp_post(
        port,
        "/mcp",
        &headers,
        rpc("resources/subscribe", json!({ "uri": "test://nowhere" })),
    )
    .await;
    let refused: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(refused["error"]["code"], -32602, "{body}");
    assert_eq!(refused["error"]["data"]["uri"], "test://nowhere", "{body}");

    // A stream: the request's head as a client sends it, then server-sent events as they come.
    let open = |head: String, body: String| async move {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        stream.write_all(head.as_bytes()).await.unwrap();
        stream.write_all(body.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(stream);
        let mut status = String::new();
        reader.read_line(&mut status).await.unwrap();
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        reader
    };
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {auth}\r\n\
         Accept: text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    let mut legacy = open(head, String::new()).await;
    let listen = json!({
        "jsonrpc": "2.0", "id": "listen-1", "method": "subscriptions/listen",
        "params": {
            "notifications": {
                "toolsListChanged": true,
                "resourceSubscriptions": ["test://static-text", "test://nowhere"],
            },
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    })
    .to_string();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {auth}\r\n\
         Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n\
         MCP-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\n\
         Content-Length: {}\r\n\r\n",
        listen.len()
    );
    let mut modern = open(head, listen).await;
    let next = gatehouse_tests::mcp::next_event;
    let ack = next(&mut modern, Duration::from_secs(5))
        .await
        .expect("the acknowledgement");
    assert_eq!(
        ack["method"], "notifications/subscriptions/acknowledged",
        "{ack}"
    );
    assert_eq!(
        ack["params"]["notifications"],
        json!({ "toolsListChanged": true, "resourceSubscriptions": ["test://static-text"] }),
        "what it may read, and what the gateway offers: {ack}"
    );
    assert_eq!(
        ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );
    // Nothing changed: nothing said.
    assert_eq!(next(&mut legacy, Duration::from_secs(5)).await, None);

    // An upgrade of the adapter that serves the resource.
    let mut manifest = CONFORMANCE.manifest();
    if let gatehouse_host::plugin::manifest::Manifest::Adapter(adapter) = &mut manifest {
        adapter.version = "0.1.1".to_owned();
    }
    let signed = gatehouse_host::plugin::pack(
        &CONFORMANCE.bytes(),
        &manifest,
        gatehouse_tests::publisher(),
    )
    .unwrap();
    endpoint.host.install_adapter(&signed).unwrap();
    let updated = next(&mut legacy, Duration::from_secs(10))
        .await
        .expect("an update");
    assert_eq!(
        updated,
        json!({ "jsonrpc": "2.0", "method": "notifications/resources/updated", "params": { "uri": "test://static-text" } })
    );
    let updated = next(&mut modern, Duration::from_secs(10))
        .await
        .expect("an update");
    assert_eq!(
        updated["method"], "notifications/resources/updated",
        "{updated}"
    );
    assert_eq!(updated["params"]["uri"], "test://static-text");
    assert_eq!(
        updated["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        "listen-1"
    );

    // Unsubscribed, then a new adapter: the tool list changed, and nothing else is said.
    mcp_post(
        port,
        "/mcp",
        &headers,
        rpc(
            "resources/unsubscribe",
            json!({ "uri": "test://static-text" }),
        ),
    )
    .await;
    endpoint.host.install_adapter(&PANIC.signed()).unwrap();
    let changed = next(&mut legacy, Duration::from_secs(10))
        .await
        .expect("a list change");
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    let changed = next(&mut modern, Duration::from_secs(10))
        .await
        .expect("a list change");
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    assert_eq!(next(&mut legacy, Duration::from_secs(5)).await, None);
}

/// A caller's event streams are bounded (16 at once; the next is 429 until one closes),
/// 2026-07-28 has no `GET` stream (405), and a `GET` must accept an event stream (406).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_streams_are_bounded_per_caller_and_get_is_a_2025_stream_only() {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    let endpoint = gateway(|_| {}).await;
    let port = endpoint.port;
    let auth = format!("Bearer {ACME_KEY}");
    let get = |version: &'static str, accept: &'static str| {
        let auth = auth.clone();
        async move {
            let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .unwrap();
            let head = format!(
                "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: {auth}\r\n\
                 Accept: {accept}\r\nMCP-Protocol-Version: {version}\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await.unwrap();
            let mut reader = BufReader::new(stream);
            let mut status = String::new();
            reader.read_line(&mut status).await.unwrap();
            (status, reader)
        }
    };
    let mut open = Vec::new();
    for _ in 0..16 {
        let (status, stream) = get("2025-11-25", "text/event-stream").await;
        assert!(status.starts_with("HTTP/1.1 200"), "{status}");
        open.push(stream);
    }
    let (status, _) = get("2025-11-25", "text/event-stream").await;
    assert!(
        status.starts_with("HTTP/1.1 429"),
        "a seventeenth stream: {status}"
    );
    drop(open.pop());
    // The closed stream is noticed at its next look or keepalive, at most KEEPALIVE later.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (status, stream) = get("2025-11-25", "text/event-stream").await;
        if status.starts_with("HTTP/1.1 200") {
            open.push(stream);
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "a closed stream was never freed: {status}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let (status, _) = get("2026-07-28", "text/event-stream").await;
    assert!(status.starts_with("HTTP/1.1 405"), "{status}");
    let (status, _) = get("2025-11-25", "application/json").await;
    assert!(status.starts_with("HTTP/1.1 406"), "{status}");
}

/// `tools/list` on 2025-11-25 with `auth`, as JSON.
async fn post_list(port: u16, auth: &str) -> Value {
    let (status, _, body) = mcp_post(port, "/mcp", &[("authorization", auth)], LIST).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exported_conformance_config_serves_the_suites_tool_names() {
    let dir = tempfile::tempdir().unwrap();
    let (code, out) = gatehouse_async(&["demo", "--export", s(dir.path())]).await;
    assert_eq!(code, 0, "{out}");
    let config = dir.path().join("conformance.toml");
    let adapter = dir.path().join("conformance.signed.wasm");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(
        text.contains("test_simple_text = \"gatehouse.conformance.test_simple_text\""),
        "{text}"
    );

    // Serves until the test process ends.
    let (url, _) = serve_in_process(&[
        "--config",
        s(&config),
        "--adapter",
        s(&adapter),
        "--listen",
        "127.0.0.1:0",
    ]);
    let client = client(&url, None).await;
    let names = tool_names(&client).await;
    assert_eq!(names, SUITE_TOOLS);
    let result = client
        .call_tool(params(json!({ "name": "test_simple_text" })))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{result:#?}");
}

// Issue 9, item 7: what callers see.

/// Every string in `value`, joined: what a caller could read.
fn all_text(result: &CallToolResult) -> String {
    serde_json::to_string(result).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caller_sees_outcomes_not_the_gateways_internals() {
    let upstream = Upstream::start().await;
    let port = upstream.port;
    // The probe may reach any host except special-purpose addresses; loopback is refused with
    // a reason that names the internal address and the config key that would open it.
    let gateway = gateway_with(
        |config| {
            config.egress = serde_json::from_value::<EgressConfig>(json!({
                "grant": [{ "adapter": "test.egress-probe", "url": "http://*:*", "methods": ["GET"] }],
            }))
            .unwrap();
        },
        &[EGRESS_PROBE, PANIC],
        |_| {},
    )
    .await;
    let acme = connect(&gateway, ACME_KEY).await;
    let probe = acme
        .call_tool(params(json!({
            "name": "test.egress-probe.read",
            "arguments": { "requests": [{ "method": "GET", "url": format!("http://127.0.0.1:{port}/internal") }] },
        })))
        .await
        .unwrap();
    assert_eq!(record(&probe)["outcome"], "OK");
    let text = all_text(&probe);
    for internal in [
        "127.0.0.1",
        "allow_private",
        "address_not_allowed",
        "fuel_consumed",
        "decision_id",
    ] {
        assert!(
            !text.contains(internal),
            "the caller sees `{internal}`: {text}"
        );
    }
    assert!(upstream.seen().is_empty());

    // A crashing tool: the caller gets the outcome, not the trap or the guest's stderr.
    let crash = acme
        .call_tool(params(json!({ "name": "test.panic.run", "arguments": {} })))
        .await
        .unwrap();
    assert_eq!(crash.is_error, Some(true));
    assert_eq!(record(&crash)["outcome"], "TOOL_TRAPPED");
    assert_eq!(record(&crash)["error"]["message"], "the tool crashed");
    let text = all_text(&crash);
    for internal in ["deliberate panic", "stderr", "wasm", "[sandbox]"] {
        assert!(
            !text.contains(internal),
            "the caller sees `{internal}`: {text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replayed_result_is_the_callers_view_too() {
    let gateway = gateway(|_| {}).await;
    let acme = connect(&gateway, ACME_KEY).await;
    let transfer = || {
        params(json!({
            "name": "test.ledger.transfer",
            "arguments": { "amount": 10, "currency": "EUR" },
            "_meta": { "gatehouse/idempotency_key": "replay-view-1" },
        }))
    };
    let first = acme.call_tool(transfer()).await.unwrap();
    let again = acme.call_tool(transfer()).await.unwrap();
    assert!(
        again
            .meta
            .as_ref()
            .unwrap()
            .get("gatehouse/replay_of")
            .is_some()
    );
    for result in [&first, &again] {
        assert_eq!(record(result)["outcome"], "OK");
        for internal in ["policy_decision", "egress", "usage"] {
            assert!(
                record(result).get(internal).is_none(),
                "{internal}: {result:#?}"
            );
        }
    }
}

// Issue 9, item 5: connection and body-time caps on the listener.

/// Writes `bytes` on a fresh connection, then reads until the gateway closes it (at most 5 s);
/// returns what it answered ("" when it closed or reset the connection unanswered).
async fn exchange(port: u16, bytes: &[u8]) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // A refused connection may be reset before or while we write: that is its answer.
    let _ = stream.write_all(bytes).await;
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
    assert!(read.is_ok(), "the connection is still open after 5 s");
    String::from_utf8_lossy(&answer).into_owned()
}

/// A whole `tools/list` request that asks the gateway to close the connection after it.
fn list_request(port: u16) -> Vec<u8> {
    format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {ACME_KEY}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2025-11-25\r\nconnection: close\r\ncontent-length: {}\r\n\r\n{LIST}",
        LIST.len()
    )
    .into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_trickles_past_body_timeout_gets_408_and_calls_nothing() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let gateway = gateway(|mcp| mcp.body_timeout_ms = 500).await;
    let port = gateway.port;
    // A complete, valid tools/call, with a Content-Length 16 bytes longer: the attacker sends
    // the JSON, trickles a few of the promised bytes, then holds the rest back.
    let call = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {
            "name": "test.ledger.transfer",
            "arguments": { "amount": 10, "currency": "EUR" },
            "_meta": { "gatehouse/idempotency_key": "slow-body-1" },
        },
    })
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nauthorization: Bearer {ACME_KEY}\r\n\
         content-type: application/json\r\naccept: application/json, text/event-stream\r\n\
         mcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n{call}",
        call.len() + 16
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = std::time::Instant::now();
    let trickle = async {
        for _ in 0..3 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            stream.write_all(b" ").await.unwrap();
        }
        let mut answer = Vec::new();
        tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer))
            .await
            .expect("the gateway answers and closes within 5 s")
            .unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    };
    // While the attacker holds its body back, a normal client is answered.
    let (answer, tools) = tokio::join!(trickle, async {
        let acme = connect(&gateway, ACME_KEY).await;
        acme.list_all_tools().await.unwrap()
    });
    let elapsed = started.elapsed();
    assert!(!tools.is_empty());
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    let body: Value = serde_json::from_str(answer.split("\r\n\r\n").nth(1).unwrap()).unwrap();
    assert_eq!(body["error"], "request_timeout", "{body}");
    assert!(
        elapsed >= Duration::from_millis(400) && elapsed < Duration::from_secs(3),
        "answered after {elapsed:?}, body_timeout_ms is 500"
    );
    // The held call never ran: the same idempotency key now runs fresh, not as a replay.
    let acme = connect(&gateway, ACME_KEY).await;
    let transfer = acme
        .call_tool(params(json!({
            "name": "test.ledger.transfer",
            "arguments": { "amount": 10, "currency": "EUR" },
            "_meta": { "gatehouse/idempotency_key": "slow-body-1" },
        })))
        .await
        .unwrap();
    assert_eq!(record(&transfer)["outcome"], "OK");
    assert!(
        transfer
            .meta
            .as_ref()
            .unwrap()
            .get("gatehouse/replay_of")
            .is_none(),
        "the held call ran: {transfer:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_max_connections_are_closed_unserved_until_one_frees() {
    let gateway = gateway(|mcp| mcp.max_connections = 2).await;
    let port = gateway.port;
    // Two clients open connections and send nothing: they hold both slots.
    let first = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let second = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    // The third is closed without an answer, whatever it sends.
    assert_eq!(exchange(port, &list_request(port)).await, "");
    assert_eq!(exchange(port, &list_request(port)).await, "");
    drop(second);
    // Once one closes, a request is served again (the slot frees when the gateway sees EOF).
    let mut answer = String::new();
    for _ in 0..50 {
        answer = exchange(port, &list_request(port)).await;
        if !answer.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.contains("gatehouse.echo.echo"), "{answer}");
    drop(first);
}

// Issue 9, item 9: fuzzing the JSON-RPC input.

/// Whether `request` is a `tools/call` the gateway may run: a JSON-RPC 2.0 request object with
/// an id, that method, and params naming a tool.
fn is_valid_tools_call(request: &[u8]) -> bool {
    let Ok(Value::Object(request)) = serde_json::from_slice::<Value>(request) else {
        return false;
    };
    request.get("jsonrpc") == Some(&json!("2.0"))
        && request.get("method") == Some(&json!("tools/call"))
        && request
            .get("id")
            .is_some_and(|id| id.is_string() || id.as_f64().is_some_and(|n| n.fract() == 0.0))
        && request["params"]["name"].is_string()
}

/// Arbitrary JSON, as deep as JSON-RPC bodies get.
fn json_values() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;

    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        proptest::sample::select(
            &[
                "2.0",
                "tools/call",
                "tools/list",
                "initialize",
                "gatehouse.echo.echo",
                "test.ledger.transfer",
                ""
            ][..]
        )
        .prop_map(Value::from),
        ".{0,12}".prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            proptest::collection::btree_map(
                proptest::sample::select(
                    &[
                        "jsonrpc",
                        "id",
                        "method",
                        "params",
                        "name",
                        "arguments",
                        "_meta",
                        "message",
                        "result",
                        "error"
                    ][..]
                )
                .prop_map(str::to_owned),
                inner,
                0..5,
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

/// Bodies an attacker POSTs: arbitrary bytes, arbitrary JSON, and JSON-RPC requests with
/// arbitrary parts.
fn bodies() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
    use proptest::prelude::*;

    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..128),
        json_values().prop_map(|v| v.to_string().into_bytes()),
        (json_values(), proptest::sample::select(&["tools/call", "tools/list", "ping", "notifications/initialized"][..]), json_values(), json_values())
            .prop_map(|(id, method, name, arguments)| {
                json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": { "name": name, "arguments": arguments } })
                    .to_string()
                    .into_bytes()
            }),
    ]
}

#[test]
fn any_body_posted_gets_a_documented_answer_and_only_valid_tools_calls_run() {
    use proptest::test_runner::{Config, TestRunner};

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let gateway = runtime.block_on(gateway(|_| {}));
    let auth = format!("Bearer {ACME_KEY}");
    // Each case is a round trip through the gateway: a few dozen by default (CI), more with
    // PROPTEST_CASES.
    let cases = std::env::var("PROPTEST_CASES")
        .map_or(48, |n| n.parse().expect("PROPTEST_CASES is a number"));
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let result = runner.run(&bodies(), |body| {
        let (status, _, answer) = runtime.block_on(mcp_post(
            gateway.port,
            "/mcp",
            &[("authorization", &auth)],
            body.clone(),
        ));
        let input = String::from_utf8_lossy(&body);
        proptest::prop_assert!(
            [200, 202, 400].contains(&status),
            "{status} for {input}: {answer}"
        );
        if status == 202 {
            return Ok(());
        }
        let answer: Value = serde_json::from_str(&answer).map_err(|e| {
            proptest::test_runner::TestCaseError::fail(format!("{e}: not JSON: {answer}"))
        })?;
        proptest::prop_assert_eq!(&answer["jsonrpc"], "2.0", "{}", answer);
        let ran = answer["result"]["_meta"].get("gatehouse/result").is_some();
        proptest::prop_assert!(
            !ran || is_valid_tools_call(&body),
            "a call ran for {input}: {answer}"
        );
        if status == 400 {
            let code = answer["error"]["code"].as_i64();
            proptest::prop_assert!(matches!(code, Some(-32700 | -32600)), "{input}: {answer}");
        }
        Ok(())
    });
    if let Err(failure) = result {
        panic!("{failure}");
    }
}

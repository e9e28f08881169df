//! Plugins from OCI registries, against a real registry on loopback (the CNCF distribution
//! server, `gatehouse_tests::registry`): anonymous over http, with htpasswd auth over TLS, and
//! with the distribution spec's bearer-token flow (a token server here). `gatehouse push`, then
//! `serve` from the pinned digest, then a call over MCP whose record and audit entry cite the
//! digest; a retag to a tampered component is refused on reload and the old one keeps
//! serving; a followed tag (`[oci] watch_seconds`) installs what it moves to and refuses a
//! tampered build, and a build of another plugin or kind; a tag moved back to an older signed
//! build is refused at restart and on reload against the version the store records as last
//! served, unless the operator allows the downgrade (audited); a restart with the registry
//! down serves from the cache. Every bad answer a registry can give gets its own error, and
//! loads nothing. (The policy swap from a registry under calls is in `admin`.)

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use gatehouse_host::oci::{OciConfig, OciError, OciRef, Registries, RegistryConfig, Tags};
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_tests::artifacts::{ECHO, POLICY_PROBE, TEXTKIT};
use gatehouse_tests::cli::gatehouse_async;
use gatehouse_tests::gateway::{Gateway, Serve};
use gatehouse_tests::mcp::{call, record, tool_list};
use gatehouse_tests::registry::{PASSWORD, Registry, USER};
use gatehouse_tests::{free_port, listening};
use http_body_util::Full;
use hyper::service::service_fn;
use serde_json::{Value, json};

/// A gateway's files: a config trusting the test publisher, serving echo to anonymous callers,
/// with `[oci]` caching in this directory and `registry_entry` appended.
struct Site {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Site {
    fn new(registry_entry: &str) -> Self {
        Self::with(registry_entry, "")
    }

    /// [`Site::new`], with `more` config text (keys of `[oci]`, then tables) after `[oci]`'s.
    fn with(registry_entry: &str, more: &str) -> Self {
        Self::trusting(registry_entry, more, &["test.*"])
    }

    /// [`Site::with`], the publisher trusted for policy modules matching `policies`.
    fn trusting(registry_entry: &str, more: &str, policies: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let host = gatehouse_tests::config(&["gatehouse.*"], policies);
        let config = dir.path().join("gatehouse.toml");
        let text = format!(
            "{}\n[mcp]\nanonymous_tenant = \"default\"\n\n[oci]\ncache_dir = {:?}\n{more}\n\n{registry_entry}",
            toml::to_string(&host).unwrap(),
            dir.path().join("oci-cache"),
        );
        std::fs::write(&config, text).unwrap();
        Self { dir, config }
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let path = self.dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        path.display().to_string()
    }

    /// `gatehouse push FILE REFERENCE` with this site's config: the pinned reference it prints.
    async fn push(&self, bytes: &[u8], reference: &str) -> String {
        let file = self.file("push.wasm", bytes);
        let config = self.config.display().to_string();
        let (code, out) = gatehouse_async(&["push", &file, reference, "--config", &config]).await;
        assert_eq!(code, 0, "{out}");
        let pinned = out
            .lines()
            .find_map(|line| line.strip_prefix("pinned "))
            .unwrap_or_else(|| panic!("no pinned reference in {out}"));
        pinned.to_owned()
    }

    /// The registries this site's config describes, for the library-level checks.
    fn registries(&self) -> Registries {
        let config = gatehouse_cli::ServeConfig::from_file(&self.config).unwrap();
        Registries::new(&config.oci, &self.dir.path().join("cache"))
    }

    /// What this site's state store records as the version each plugin last served: kind,
    /// id, version and source.
    async fn served(&self) -> Vec<[Option<String>; 4]> {
        let config = gatehouse_cli::ServeConfig::from_file(&self.config).unwrap();
        let store = gatehouse_host::state::open(&config.host.store).unwrap();
        let served = store.served_versions().await.unwrap();
        (served.into_iter())
            .map(|s| [Some(s.kind), Some(s.plugin), Some(s.version), s.source])
            .collect()
    }

    /// The audit log's entries of kind `plugin` (changes to what serves), as `gatehouse audit
    /// export` prints them.
    async fn plugin_entries(&self) -> Vec<Value> {
        let config = self.config.display().to_string();
        let (code, out) = gatehouse_async(&["audit", "export", "--config", &config]).await;
        assert_eq!(code, 0, "{out}");
        (out.lines())
            .filter_map(|line| serde_json::from_str::<Value>(line).ok())
            .filter(|entry| entry["kind"] == "plugin")
            .collect()
    }
}

/// `gatehouse.echo` as the store records it: serving `version`, pulled from `source`.
fn echo_served(version: &str, source: &str) -> [Option<String>; 4] {
    ["adapter", "gatehouse.echo", version, source].map(|s| Some(s.to_owned()))
}

/// `gatehouse serve` of `site` with `args` (`--adapter REF`, or none: the config's
/// `[plugins]`) on a free port, logging at `info`: `Err` with its log if it exits instead of
/// listening.
async fn serve(site: &Site, args: &[&str]) -> Result<Gateway, String> {
    let port = free_port();
    args.iter()
        .fold(Serve::config(&site.config).listen(port), |serve, arg| {
            serve.arg(arg)
        })
        .env("RUST_LOG", "info")
        .log(site.dir.path().join(format!("serve-{port}.log")))
        .try_start()
        .await
}

/// `gatehouse.echo.echo` over MCP: the gateway's record of the call.
async fn echo(gateway: &Gateway, message: &str) -> Value {
    let result = call(
        gateway.port(),
        &[],
        "gatehouse.echo.echo",
        json!({ "message": message }),
        Value::Null,
    )
    .await;
    record(&result).clone()
}

/// The component with one byte of its code flipped after signing: the signature no longer
/// matches.
fn tampered(signed: &[u8]) -> Vec<u8> {
    let mut bytes = signed.to_vec();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    bytes
}

async fn push_serve_and_call(registry: &Registry) {
    let site = Site::new(&registry.config_entry(false));
    let pinned = site
        .push(&ECHO.signed(), &registry.reference("acme/echo", ":1.0"))
        .await;
    assert!(
        pinned.starts_with(&registry.reference("acme/echo", "@sha256:")),
        "{pinned}"
    );

    // `pull` of the tag resolves it to the same digest, and the bytes are the ones pushed.
    let out_file = site.dir.path().join("pulled.wasm");
    let (tag, out_path) = (
        registry.reference("acme/echo", ":1.0"),
        out_file.display().to_string(),
    );
    let config = site.config.display().to_string();
    let (code, out) =
        gatehouse_async(&["pull", &tag, "--out", &out_path, "--config", &config]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&format!("pinned {pinned}")), "{out}");
    assert_eq!(std::fs::read(&out_file).unwrap(), ECHO.signed());

    let gateway = serve(&site, &["--adapter", &pinned]).await.unwrap();
    let record = echo(&gateway, "from a registry").await;
    assert_eq!(record["outcome"], "OK", "{record}");
    assert_eq!(record["adapter"]["source"], json!(pinned), "{record}");
    assert!(
        gateway.log().contains(&pinned),
        "the digest is logged: {}",
        gateway.log()
    );

    // The call's audit entry cites the digest too.
    let call = record["tool_call_id"].as_str().unwrap().to_owned();
    gateway.stop().await;
    let (code, out) = gatehouse_async(&["audit", "show", &call, "--config", &config]).await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(&pinned), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_then_serve_from_the_pinned_digest_then_call_over_mcp_anonymous_http() {
    push_serve_and_call(&Registry::anonymous()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_then_serve_from_the_pinned_digest_then_call_over_mcp_with_auth_and_tls() {
    let registry = Registry::with_auth_and_tls();
    push_serve_and_call(&registry).await;

    // Without the credentials, or with wrong ones, or without the CA: clear errors.
    let reference: OciRef = registry.reference("acme/echo", ":1.0").parse().unwrap();
    let ca = registry.ca.as_ref().unwrap().pem_file();
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    std::fs::write(&password, "not-the-password").unwrap();
    let pull = |entry: RegistryConfig| {
        let config = OciConfig {
            registries: vec![entry],
            ..OciConfig::default()
        };
        let registries = Registries::new(&config, dir.path());
        let reference = reference.clone();
        async move { registries.pull(&reference, Tags::Resolve).await }
    };
    // `plain_http = false`: without `ca_file`, a loopback registry would be spoken to over http.
    let entry = |username: Option<&str>, ca_file: Option<&Path>| RegistryConfig {
        host: registry.host.clone(),
        plain_http: Some(false),
        ca_file: ca_file.map(Path::to_owned),
        username: username.map(str::to_owned),
        password_env: None,
        password_file: username.map(|_| password.clone()),
        allow_tags: true,
    };
    let error = pull(entry(None, Some(&ca))).await.unwrap_err();
    assert!(matches!(error, OciError::Unauthorized { .. }), "{error}");
    let error = pull(entry(Some(USER), Some(&ca))).await.unwrap_err();
    assert!(matches!(error, OciError::Unauthorized { .. }), "{error}");
    assert!(!error.to_string().contains("not-the-password"), "{error}");
    let error = pull(entry(Some(USER), None)).await.unwrap_err();
    assert!(
        matches!(
            error,
            OciError::Registry { .. } | OciError::Unreachable { .. }
        ),
        "{error}"
    );
    assert!(
        error.to_string().to_lowercase().contains("certificate"),
        "{error}"
    );
    std::fs::write(&password, PASSWORD).unwrap();
    let pulled = pull(entry(Some(USER), Some(&ca))).await.unwrap();
    assert_eq!(pulled.bytes, ECHO.signed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retag_to_a_tampered_component_is_refused_and_the_old_one_keeps_serving() {
    let registry = Registry::anonymous();
    let site = Site::new(&registry.config_entry(true));
    let tag = registry.reference("acme/echo", ":stable");
    let pinned = site.push(&ECHO.signed(), &tag).await;
    let gateway = serve(&site, &["--adapter", &tag]).await.unwrap();
    assert_eq!(
        echo(&gateway, "v1").await["adapter"]["source"],
        json!(pinned)
    );

    // The tag now names a tampered build (pushed around `gatehouse push`, which refuses
    // unsigned files but cannot see tampering).
    let tampered_digest = site
        .registries()
        .push(
            &tag.parse().unwrap(),
            tampered(&ECHO.signed()),
            Default::default(),
        )
        .await
        .unwrap();
    assert!(!pinned.ends_with(&tampered_digest));
    gateway.signal("HUP");
    gateway
        .logged("config reload failed", Duration::from_secs(30))
        .await;
    assert!(gateway.log().contains("signature"), "{}", gateway.log());
    let record = echo(&gateway, "still v1").await;
    assert_eq!(record["outcome"], "OK", "{record}");
    assert_eq!(record["adapter"]["source"], json!(pinned), "{record}");

    // A fresh start from the tag refuses it outright.
    drop(gateway);
    let error = serve(&site, &["--adapter", &tag])
        .await
        .expect_err("refused");
    assert!(
        error.contains("refused") && error.contains("signature"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_tag_installs_what_it_moves_to_and_refuses_a_tampered_build() {
    let registry = Registry::anonymous();
    let tag = registry.reference("acme/echo", ":stable");
    // The adapter named in the config's `[plugins]`, not on the command line.
    let site = Site::with(
        &registry.config_entry(true),
        &format!("watch_seconds = 1\n\n[plugins]\nadapters = [{tag:?}]\n"),
    );
    let v1 = site.push(&ECHO.signed(), &tag).await;
    let gateway = serve(&site, &[]).await.unwrap();
    let record = echo(&gateway, "v1").await;
    assert_eq!(
        (&record["adapter"]["version"], &record["adapter"]["source"]),
        (&json!("0.1.0"), &json!(v1))
    );

    // The tag moves to 0.2.0: served within a few seconds, and audited.
    let v2 = site.push(&ECHO.signed_as_version("0.2.0"), &tag).await;
    gateway
        .logged("installed what the tag moved to", Duration::from_secs(30))
        .await;
    let record = echo(&gateway, "v2").await;
    assert_eq!(
        (&record["adapter"]["version"], &record["adapter"]["source"]),
        (&json!("0.2.0"), &json!(v2))
    );

    // The tag moves to a tampered build: refused, 0.2.0 serves on.
    site.registries()
        .push(
            &tag.parse().unwrap(),
            tampered(&ECHO.signed_as_version("0.3.0")),
            Default::default(),
        )
        .await
        .unwrap();
    gateway
        .logged("what the tag moved to was refused", Duration::from_secs(30))
        .await;
    let record = echo(&gateway, "still v2").await;
    assert_eq!(
        (&record["outcome"], &record["adapter"]["source"]),
        (&json!("OK"), &json!(v2))
    );

    gateway.stop().await;
    let installs = site.plugin_entries().await;
    assert_eq!(installs.len(), 1, "{installs:#?}");
    assert_eq!(installs[0]["principal"], json!(format!("watch:{tag}")));
    assert!(installs[0].to_string().contains(&v2), "{installs:#?}");
    // What the tag moved to is the version on record: a restart holds it as the floor.
    assert_eq!(site.served().await, [echo_served("0.2.0", &v2)]);
}

/// The policy probe, signed by the test publisher as plugin `id`.
fn policy_named(id: &str) -> Vec<u8> {
    let mut manifest = POLICY_PROBE.manifest();
    let Manifest::Policy(policy) = &mut manifest else {
        panic!("the policy probe is a policy");
    };
    policy.id = id.to_owned();
    gatehouse_host::plugin::pack(
        &POLICY_PROBE.bytes(),
        &manifest,
        gatehouse_tests::publisher(),
    )
    .unwrap()
}

/// A followed tag is a version stream of one plugin. Moved to another adapter, or to a policy
/// module under the same id, both validly signed by a trusted publisher, it is refused with a
/// warning naming both, and the old version answers on; a new version of the plugin it serves
/// is still followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_followed_tag_moved_to_another_plugin_or_kind_is_refused_and_the_old_one_answers() {
    let registry = Registry::anonymous();
    let tag = registry.reference("acme/echo", ":stable");
    let site = Site::trusting(
        &registry.config_entry(true),
        &format!("watch_seconds = 1\n\n[plugins]\nadapters = [{tag:?}]\n"),
        &["test.*", "gatehouse.*"],
    );
    let v1 = site.push(&ECHO.signed(), &tag).await;
    let gateway = serve(&site, &[]).await.unwrap();
    let serves_v1 = async |message: &str| {
        let record = echo(&gateway, message).await;
        assert_eq!(
            (&record["outcome"], &record["adapter"]["version"]),
            (&json!("OK"), &json!("0.1.0")),
            "{record}"
        );
        assert_eq!(record["adapter"]["source"], json!(v1), "{record}");
    };
    serves_v1("v1").await;

    // Another adapter id.
    site.push(&TEXTKIT.signed(), &tag).await;
    gateway
        .logged(
            "the tag now names adapter `gatehouse.textkit`, not adapter `gatehouse.echo`",
            Duration::from_secs(30),
        )
        .await;
    serves_v1("after a retag to another id").await;
    let tools = tool_list(gateway.port()).await;
    assert!(
        tools.iter().all(|tool| tool.starts_with("gatehouse.echo.")),
        "{tools:?}"
    );

    // The same id, another kind.
    site.push(&policy_named("gatehouse.echo"), &tag).await;
    gateway
        .logged(
            "the tag now names policy `gatehouse.echo`, not adapter `gatehouse.echo`",
            Duration::from_secs(30),
        )
        .await;
    serves_v1("after a retag to another kind").await;

    // A new version of the plugin it serves is still followed.
    let v2 = site.push(&ECHO.signed_as_version("0.2.0"), &tag).await;
    gateway
        .logged("installed what the tag moved to", Duration::from_secs(30))
        .await;
    let record = echo(&gateway, "v2").await;
    assert_eq!(
        (&record["adapter"]["version"], &record["adapter"]["source"]),
        (&json!("0.2.0"), &json!(v2))
    );
    gateway.stop().await;
    // One change to what serves, audited and on record: the new version; nothing of the
    // substitutes.
    let installs = site.plugin_entries().await;
    assert_eq!(installs.len(), 1, "{installs:#?}");
    assert_eq!(installs[0]["record"]["plugin"]["version"], "0.2.0");
    assert_eq!(site.served().await, [echo_served("0.2.0", &v2)]);
}

/// A tag moved back to an older, validly signed build: a restart refuses it rather than serve
/// it. It cannot keep the newer one serving: the gateway holds only what the tag names now,
/// and serving nothing under the id would change the tools silently, so it fails closed, and
/// says how to allow the downgrade. Allowed, the downgrade serves, is audited and becomes the
/// version on record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_after_the_tag_moved_back_is_refused_unless_the_downgrade_is_allowed_and_audited()
{
    let registry = Registry::anonymous();
    let site = Site::new(&registry.config_entry(true));
    let tag = registry.reference("acme/echo", ":stable");
    let v2 = site.push(&ECHO.signed_as_version("0.2.0"), &tag).await;
    let gateway = serve(&site, &["--adapter", &tag]).await.unwrap();
    let record = echo(&gateway, "v2").await;
    assert_eq!(
        (&record["adapter"]["version"], &record["adapter"]["source"]),
        (&json!("0.2.0"), &json!(v2))
    );
    gateway.stop().await;
    assert_eq!(site.served().await, [echo_served("0.2.0", &v2)]);

    // The publisher's older build, validly signed, pushed to the tag again.
    let v1 = site.push(&ECHO.signed(), &tag).await;
    let error = serve(&site, &["--adapter", &tag])
        .await
        .expect_err("a restart onto an older version is refused");
    assert!(error.starts_with("exited (exit status: 1)"), "{error}");
    assert!(
        error.contains("gatehouse.echo 0.1.0 (") && error.contains(&v1),
        "names what the tag now names: {error}"
    );
    assert!(
        error.contains("refused: `gatehouse.echo` 0.1.0 is older than 0.2.0, the version this gateway last served")
            && error.contains("`--allow-downgrade gatehouse.echo`"),
        "{error}"
    );
    assert_eq!(site.served().await, [echo_served("0.2.0", &v2)]);
    assert_eq!(site.plugin_entries().await, Vec::<Value>::new());

    // The operator allows it: it serves, audited.
    let allow = ["--adapter", &tag, "--allow-downgrade", "gatehouse.echo"];
    let gateway = serve(&site, &allow).await.unwrap();
    let record = echo(&gateway, "v1").await;
    assert_eq!(
        (&record["adapter"]["version"], &record["adapter"]["source"]),
        (&json!("0.1.0"), &json!(v1))
    );
    assert!(
        gateway
            .log()
            .contains("allowed by `--allow-downgrade gatehouse.echo`, and audited"),
        "{}",
        gateway.log()
    );
    gateway.stop().await;
    let entries = site.plugin_entries().await;
    assert_eq!(entries.len(), 1, "{entries:#?}");
    assert_eq!(entries[0]["principal"], "serve --allow-downgrade");
    let change = &entries[0]["record"];
    assert_eq!(
        [
            &change["action"],
            &change["kind"],
            &change["plugin"]["version"],
            &change["plugin"]["source"],
            &change["replaced"]["version"],
            &change["replaced"]["source"],
        ],
        [
            "downgrade",
            "adapter",
            "0.1.0",
            v1.as_str(),
            "0.2.0",
            v2.as_str()
        ]
        .map(|s| json!(s))
        .each_ref(),
        "{change}"
    );
    // The downgrade is the version on record: the next start needs no flag.
    assert_eq!(site.served().await, [echo_served("0.1.0", &v1)]);
    let gateway = serve(&site, &["--adapter", &tag]).await.unwrap();
    assert_eq!(
        echo(&gateway, "v1 again").await["adapter"]["version"],
        "0.1.0"
    );
}

/// SIGHUP after the tag moved back to an older signed build: the reload is refused, naming
/// the versions and the flag, and the newer version keeps serving (the running host still
/// has it) and stays on record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_after_the_tag_moved_back_is_refused_and_the_newer_version_answers() {
    let registry = Registry::anonymous();
    let site = Site::new(&registry.config_entry(true));
    let tag = registry.reference("acme/echo", ":stable");
    let v2 = site.push(&ECHO.signed_as_version("0.2.0"), &tag).await;
    let gateway = serve(&site, &["--adapter", &tag]).await.unwrap();
    assert_eq!(echo(&gateway, "v2").await["adapter"]["version"], "0.2.0");

    site.push(&ECHO.signed(), &tag).await;
    gateway.signal("HUP");
    gateway
        .logged("config reload failed", Duration::from_secs(30))
        .await;
    let log = gateway.log();
    assert!(
        log.contains("refused: `gatehouse.echo` 0.1.0 is older than 0.2.0")
            && log.contains("`--allow-downgrade gatehouse.echo`"),
        "{log}"
    );
    let record = echo(&gateway, "still v2").await;
    assert_eq!(
        (
            &record["outcome"],
            &record["adapter"]["version"],
            &record["adapter"]["source"]
        ),
        (&json!("OK"), &json!("0.2.0"), &json!(v2))
    );
    gateway.stop().await;
    assert_eq!(site.served().await, [echo_served("0.2.0", &v2)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_the_registry_down_serves_from_the_cache() {
    let mut registry = Registry::anonymous();
    let site = Site::new(&registry.config_entry(true));
    let tag = registry.reference("acme/echo", ":stable");
    let pinned = site.push(&ECHO.signed(), &tag).await;
    for reference in [&pinned, &tag] {
        let gateway = serve(&site, &["--adapter", reference]).await.unwrap();
        assert_eq!(echo(&gateway, "up").await["outcome"], "OK");
    }

    registry.stop();
    // The pinned digest is in the cache: the registry is not asked.
    let gateway = serve(&site, &["--adapter", &pinned]).await.unwrap();
    let record = echo(&gateway, "registry down").await;
    assert_eq!(
        (&record["outcome"], &record["adapter"]["source"]),
        (&json!("OK"), &json!(pinned))
    );
    drop(gateway);
    // The tag serves the digest it last resolved to, and says so.
    let gateway = serve(&site, &["--adapter", &tag]).await.unwrap();
    assert_eq!(
        echo(&gateway, "registry down").await["adapter"]["source"],
        json!(pinned)
    );
    assert!(
        gateway.log().contains("registry unreachable"),
        "{}",
        gateway.log()
    );
    drop(gateway);

    // A reference the cache never saw cannot be served with the registry down.
    let other = registry.reference("acme/other", ":1");
    let error = serve(&site, &["--adapter", &other])
        .await
        .expect_err("refused");
    assert!(error.contains("cannot reach the registry"), "{error}");
    let error = site
        .registries()
        .pull(&other.parse().unwrap(), Tags::Resolve)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unreachable { .. }), "{error}");
    registry.start_again();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_answer_or_reference_gets_its_own_error_and_loads_nothing() {
    let registry = Registry::anonymous();
    let site = Site::new(&registry.config_entry(false));
    let registries = site.registries();
    let pinned = site
        .push(&ECHO.signed(), &registry.reference("acme/echo", ":1.0"))
        .await;
    let pull = |reference: String, tags| {
        let registries = registries.clone();
        async move { registries.pull(&reference.parse().unwrap(), tags).await }
    };

    // A missing tag; a digest the registry does not have.
    let error = pull(registry.reference("acme/echo", ":2.0"), Tags::Resolve)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::NotFound { .. }), "{error}");
    let absent = registry.reference("acme/echo", &format!("@sha256:{}", "0".repeat(64)));
    let error = pull(absent, Tags::Resolve).await.unwrap_err();
    assert!(matches!(error, OciError::NotFound { .. }), "{error}");
    // A tag where the config allows only digests (what serve and the admin API load).
    let error = pull(registry.reference("acme/echo", ":1.0"), Tags::AsConfigured)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::TagNotAllowed { .. }), "{error}");
    assert!(error.to_string().contains("allow_tags"), "{error}");
    // Over the size bound.
    let small = Registries::new(
        &OciConfig {
            max_blob_mib: 0,
            ..OciConfig::default()
        },
        site.dir.path(),
    );
    let error = small
        .pull(&pinned.parse().unwrap(), Tags::Resolve)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::TooLarge { .. }), "{error}");
    // A registry that is down.
    let down = format!("oci://127.0.0.1:{}/acme/echo:1.0", free_port());
    let error = pull(down, Tags::Resolve).await.unwrap_err();
    assert!(matches!(error, OciError::Unreachable { .. }), "{error}");
    // References that are not references.
    for bad in [
        "acme/echo:1.0",
        "oci://acme/echo:1.0",
        "oci://127.0.0.1:5000/acme/echo@sha256:12",
    ] {
        let error = bad.parse::<OciRef>().unwrap_err();
        assert!(
            matches!(error, OciError::Reference { .. }),
            "{bad}: {error}"
        );
    }

    // An unsigned component behind a valid reference: pushed around `gatehouse push`, which
    // refuses it, then refused by serve.
    let unsigned = registry.reference("acme/unsigned", ":1");
    let digest = registries
        .push(&unsigned.parse().unwrap(), ECHO.bytes(), Default::default())
        .await
        .unwrap();
    let (file, config) = (
        site.file("unsigned.wasm", &ECHO.bytes()),
        site.config.display().to_string(),
    );
    let (code, _) = gatehouse_async(&["push", &file, &unsigned, "--config", &config]).await;
    assert_eq!(code, 1, "push refuses an unsigned component");
    let error = serve(
        &site,
        &[
            "--adapter",
            &registry.reference("acme/unsigned", &format!("@{digest}")),
        ],
    )
    .await
    .expect_err("refused");
    assert!(error.contains("refused"), "{error}");

    // A registry that answers with HTML, a manifest that is not a wasm artifact, one whose
    // digest is not the one asked for, and one declaring a layer over the bound.
    let fake = FakeRegistry::start().await;
    let error = pull(fake.reference("html", ":1"), Tags::Resolve)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::NotAManifest { .. }), "{error}");
    assert!(error.to_string().contains("<html>"), "{error}");
    let error = pull(fake.reference("image", ":1"), Tags::Resolve)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::NotWasm { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("application/vnd.oci.image.config.v1+json"),
        "{error}"
    );
    let error = pull(
        fake.reference("wasm", &format!("@sha256:{}", "ab".repeat(32))),
        Tags::Resolve,
    )
    .await
    .unwrap_err();
    assert!(matches!(error, OciError::DigestMismatch { .. }), "{error}");
    let error = pull(fake.reference("huge", ":1"), Tags::Resolve)
        .await
        .unwrap_err();
    assert!(
        matches!(error, OciError::TooLarge { size, .. } if size == 1 << 40),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_and_pull_through_the_bearer_token_flow() {
    let tokens = TokenServer::start().await;
    let registry = Registry::with_tokens(
        &format!("http://127.0.0.1:{}/token", tokens.port),
        TokenServer::SERVICE,
        TokenServer::ISSUER,
        &tokens.certificate,
    );
    let dir = tempfile::tempdir().unwrap();
    let password = dir.path().join("password");
    let registries = |username: Option<&str>, cache: &str| {
        let config = OciConfig {
            registries: vec![RegistryConfig {
                host: registry.host.clone(),
                plain_http: None,
                ca_file: None,
                username: username.map(str::to_owned),
                password_env: None,
                password_file: username.map(|_| password.clone()),
                allow_tags: true,
            }],
            ..OciConfig::default()
        };
        Registries::new(&config, &dir.path().join(cache))
    };
    let reference: OciRef = registry.reference("acme/echo", ":1.0").parse().unwrap();

    // With the publisher's credentials, the registry's challenge sends the client to the
    // token server, which checks them and issues a token scoped to the repository.
    std::fs::write(&password, PASSWORD).unwrap();
    let publisher = registries(Some(USER), "a");
    let digest = publisher
        .push(&reference, ECHO.signed(), Default::default())
        .await
        .unwrap();
    let pulled = registries(Some(USER), "b")
        .pull(&reference, Tags::Resolve)
        .await
        .unwrap();
    assert_eq!(pulled.pinned, reference.pinned(&digest));
    assert_eq!(pulled.bytes, ECHO.signed());
    assert!(
        tokens.issued() >= 2,
        "a token for the push and one for the pull"
    );

    // No credentials, or wrong ones: the token server refuses.
    let error = registries(None, "c")
        .pull(&reference, Tags::Resolve)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unauthorized { .. }), "{error}");
    std::fs::write(&password, "not-the-password").unwrap();
    let error = registries(Some(USER), "d")
        .pull(&reference, Tags::Resolve)
        .await
        .unwrap_err();
    assert!(matches!(error, OciError::Unauthorized { .. }), "{error}");
}

/// The token server of the distribution spec's bearer flow, as a registry deployment runs
/// beside `docker-registry`: it checks [`USER`] and [`PASSWORD`] (basic auth) and issues an
/// ES256 JWT for the scopes asked, signed by the key of a certificate the registry trusts
/// (`rootcertbundle`), the certificate in the token's `x5c` header.
struct TokenServer {
    port: u16,
    certificate: PathBuf,
    issued: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    _dir: tempfile::TempDir,
}

impl TokenServer {
    const SERVICE: &str = "gatehouse-registry";
    const ISSUER: &str = "gatehouse-tests";

    async fn start() -> Self {
        use base64::Engine as _;
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["gatehouse-token-issuer".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let certificate = dir.path().join("token-issuer.pem");
        std::fs::write(&certificate, cert.pem()).unwrap();
        let signing = jsonwebtoken::EncodingKey::from_ec_der(&key.serialize_der());
        let x5c = base64::engine::general_purpose::STANDARD.encode(cert.der());
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
        );
        let issued = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let counter = std::sync::Arc::clone(&issued);
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (signing, x5c, basic, counter) = (
                    signing.clone(),
                    x5c.clone(),
                    basic.clone(),
                    std::sync::Arc::clone(&counter),
                );
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let authorized = request
                        .headers()
                        .get("authorization")
                        .is_some_and(|value| value.as_bytes() == basic.as_bytes());
                    let query = request.uri().query().unwrap_or_default().to_owned();
                    let reply = if authorized {
                        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        let token = Self::token(&query, &signing, &x5c);
                        hyper::Response::new(Full::new(Bytes::from(
                            json!({ "token": token, "access_token": token, "expires_in": 300 })
                                .to_string(),
                        )))
                    } else {
                        let mut reply = hyper::Response::new(Full::new(Bytes::from_static(
                            br#"{"errors":[{"code":"UNAUTHORIZED","message":"bad credentials"}]}"#,
                        )));
                        *reply.status_mut() = hyper::StatusCode::UNAUTHORIZED;
                        reply
                    };
                    async move { Ok::<_, std::convert::Infallible>(reply) }
                });
                tokio::spawn(
                    hyper::server::conn::http1::Builder::new()
                        .serve_connection(wasmtime_wasi_http::io::TokioIo::new(stream), service),
                );
            }
        });
        Self {
            port,
            certificate,
            issued,
            _dir: dir,
        }
    }

    /// A token granting what `query`'s `scope`s ask (`repository:NAME:pull,push`).
    fn token(query: &str, signing: &jsonwebtoken::EncodingKey, x5c: &str) -> String {
        let access: Vec<Value> = url::form_urlencoded::parse(query.as_bytes())
            .filter(|(name, _)| name == "scope")
            .filter_map(|(_, scope)| {
                let (kind, rest) = scope.split_once(':')?;
                let (name, actions) = rest.rsplit_once(':')?;
                Some(json!({ "type": kind, "name": name, "actions": actions.split(',').collect::<Vec<_>>() }))
            })
            .collect();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = json!({
            "iss": Self::ISSUER, "sub": USER, "aud": Self::SERVICE,
            "exp": now + 300, "nbf": now - 10, "iat": now,
            "jti": format!("token-{}", gatehouse_tests::unique()), "access": access,
        });
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::ES256);
        header.x5c = Some(vec![x5c.to_owned()]);
        jsonwebtoken::encode(&header, &claims, signing).unwrap()
    }

    fn issued(&self) -> usize {
        self.issued.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A loopback server that speaks just enough of the distribution API to answer badly: the
/// answers no real registry gives (an HTML page, a manifest that does not hash to its digest),
/// and manifests a test would otherwise have to hand-craft and push.
struct FakeRegistry {
    port: u16,
}

impl FakeRegistry {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(
                    wasmtime_wasi_http::io::TokioIo::new(stream),
                    service_fn(
                        |request: hyper::Request<hyper::body::Incoming>| async move {
                            Ok::<_, std::convert::Infallible>(Self::answer(request.uri().path()))
                        },
                    ),
                ));
            }
        });
        assert!(listening(port).await);
        Self { port }
    }

    fn answer(path: &str) -> hyper::Response<Full<Bytes>> {
        let manifest = |config_type: &str, size: u64| {
            json!({
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "config": { "mediaType": config_type, "digest": format!("sha256:{}", "1".repeat(64)), "size": 2 },
                "layers": [{ "mediaType": "application/wasm", "digest": format!("sha256:{}", "2".repeat(64)), "size": size }],
            })
            .to_string()
        };
        let (content_type, body) = match path {
            "/v2/" => ("application/json", "{}".to_owned()),
            p if p.starts_with("/v2/acme/html/") => (
                "text/html",
                "<html><body>Welcome to our registry</body></html>".to_owned(),
            ),
            p if p.starts_with("/v2/acme/image/") => (
                "application/vnd.oci.image.manifest.v1+json",
                manifest("application/vnd.oci.image.config.v1+json", 10),
            ),
            p if p.starts_with("/v2/acme/wasm/") => (
                "application/vnd.oci.image.manifest.v1+json",
                manifest("application/vnd.wasm.config.v0+json", 10),
            ),
            p if p.starts_with("/v2/acme/huge/") => (
                "application/vnd.oci.image.manifest.v1+json",
                manifest("application/vnd.wasm.config.v0+json", 1 << 40),
            ),
            _ => ("text/plain", String::new()),
        };
        hyper::Response::builder()
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))
            .unwrap()
    }

    fn reference(&self, repository: &str, rest: &str) -> String {
        format!("oci://127.0.0.1:{}/acme/{repository}{rest}", self.port)
    }
}

/// A hostile "registry" on loopback, spoken to over raw TCP so it can misbehave as no real
/// server would: `/v2/` answers `{}`; `/v2/acme/huge/manifests/*` streams a 64 MiB manifest
/// (chunked, no length), as fast as it is read; `/v2/acme/slow/manifests/*` sends its head,
/// then one byte every `trickle`, ten in all. (Both end, so a client without bounds fails
/// these tests instead of hanging them.) It counts the manifest bytes it managed to send, and
/// notices when the client hangs up.
struct HostileRegistry {
    port: u16,
    sent: std::sync::Arc<std::sync::atomic::AtomicU64>,
    hung_up: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl HostileRegistry {
    async fn start(trickle: Duration) -> Self {
        use std::sync::atomic::Ordering;
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let hung_up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (counter, closed) = (sent.clone(), hung_up.clone());
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (counter, closed) = (counter.clone(), closed.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let path = head.split(' ').nth(1).unwrap_or_default().to_owned();
                    let manifest_head = "HTTP/1.1 200 OK\r\ncontent-type: application/vnd.oci.image.manifest.v1+json\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                    if path.starts_with("/v2/acme/huge/manifests/") {
                        let _ = stream.write_all(manifest_head.as_bytes()).await;
                        let opening = br#"{"schemaVersion":2,"annotations":{"x":""#;
                        let filler = vec![b'a'; 64 * 1024];
                        let mut chunk = format!("{:x}\r\n", opening.len()).into_bytes();
                        chunk.extend_from_slice(opening);
                        chunk.extend_from_slice(b"\r\n");
                        let _ = stream.write_all(&chunk).await;
                        for _ in 0..1024 {
                            let mut chunk = format!("{:x}\r\n", filler.len()).into_bytes();
                            chunk.extend_from_slice(&filler);
                            chunk.extend_from_slice(b"\r\n");
                            if stream.write_all(&chunk).await.is_err() {
                                closed.store(true, Ordering::SeqCst);
                                return;
                            }
                            counter.fetch_add(filler.len() as u64, Ordering::SeqCst);
                        }
                        let _ = stream.write_all(b"4\r\n\"}}\n\r\n0\r\n\r\n").await;
                    } else if path.starts_with("/v2/acme/slow/manifests/") {
                        let _ = stream.write_all(manifest_head.as_bytes()).await;
                        for _ in 0..10 {
                            if stream.write_all(b"1\r\n \r\n").await.is_err() {
                                closed.store(true, Ordering::SeqCst);
                                return;
                            }
                            counter.fetch_add(1, Ordering::SeqCst);
                            tokio::time::sleep(trickle).await;
                        }
                        let _ = stream.write_all(b"0\r\n\r\n").await;
                    } else {
                        let _ = stream
                            .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}")
                            .await;
                    }
                });
            }
        });
        assert!(listening(port).await);
        Self {
            port,
            sent,
            hung_up,
        }
    }

    fn reference(&self, repository: &str) -> OciRef {
        format!("oci://127.0.0.1:{}/acme/{repository}:1", self.port)
            .parse()
            .unwrap()
    }

    fn sent(&self) -> u64 {
        self.sent.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Waits (at most 10 s) until the client has hung up on a stream: whether it did.
    async fn hung_up(&self) -> bool {
        for _ in 0..100 {
            if self.hung_up.load(std::sync::atomic::Ordering::SeqCst) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}

/// A registry cannot exhaust memory with a manifest: the pull stops reading past 4 MiB
/// (`TooLarge`, naming the manifest) and hangs up, so the registry manages to send no more
/// than the bound and what was in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_manifest_is_refused_at_its_bound() {
    let hostile = HostileRegistry::start(Duration::from_secs(3)).await;
    let dir = tempfile::tempdir().unwrap();
    let registries = Registries::new(&OciConfig::default(), dir.path());
    let error = registries
        .pull(&hostile.reference("huge"), Tags::Resolve)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            OciError::TooLarge { what: "manifest", size, max, .. }
                if max == gatehouse_host::oci::MAX_MANIFEST_BYTES && size > max
        ),
        "{error}"
    );
    assert!(error.to_string().contains("the manifest is"), "{error}");
    assert!(hostile.hung_up().await, "the pull hung up on the registry");
    let sent = hostile.sent();
    // What the pull read (4 MiB) and what the two ends' socket buffers held when it hung up;
    // far from the 64 MiB on offer.
    assert!(
        sent < 32 * 1024 * 1024,
        "the registry sent {sent} bytes before the pull hung up (4 MiB bound)"
    );
}

/// A registry that sends one byte every 3 s passes every per-read timeout; the pull's overall
/// deadline (`[oci] deadline_seconds`, here 2 s) cuts it off as unreachable, and it hangs up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trickling_registry_is_cut_off_at_the_deadline() {
    let hostile = HostileRegistry::start(Duration::from_secs(3)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = OciConfig {
        deadline_seconds: 2,
        ..OciConfig::default()
    };
    let registries = Registries::new(&config, dir.path());
    let start = std::time::Instant::now();
    let error = registries
        .pull(&hostile.reference("slow"), Tags::Resolve)
        .await
        .unwrap_err();
    let took = start.elapsed();
    assert!(matches!(error, OciError::Unreachable { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("no complete answer within 2 s (`[oci] deadline_seconds`)"),
        "{error}"
    );
    assert!(
        took < Duration::from_secs(10),
        "the pull took {took:?} against a 2 s deadline"
    );
    assert!(hostile.hung_up().await, "the pull hung up on the registry");
    assert!(
        hostile.sent() <= 2,
        "{} bytes trickled in before the deadline",
        hostile.sent()
    );
}

//! Operating a running `gatehouse serve` process, as an operator's service manager does:
//! SIGTERM and Ctrl-C (SIGINT) stop accepting, let calls in flight finish (for at most
//! `[mcp] drain_timeout_ms`) and exit 0; SIGHUP reloads the config file without dropping calls,
//! and an invalid file keeps the serving config and logs why; `--log-format json` writes one
//! JSON object per log line, in the call's spans; the caller's `traceparent` continues through
//! the MCP request, policy, adapter and egress spans, exported over OTLP to a loopback
//! collector. Each test drives a child process running the `gatehouse` CLI.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use gatehouse_host::HostConfig;
use gatehouse_tests::admin::request;
use gatehouse_tests::artifacts::{ECHO, POLICY_PROBE};
use gatehouse_tests::gateway::{Gateway, rest_and_echo, write_config, write_rest_config};
use gatehouse_tests::host::rest_config;
use gatehouse_tests::mcp::{outcome_of, tool_list, try_call};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{bind, free_port, grant};
use serde_json::{Value, json};

/// A `gatehouse.rest.send` call the upstream answers after `delay_ms`.
fn slow_call(
    port: u16,
    upstream: &Upstream,
    delay_ms: u64,
    key: &str,
) -> tokio::task::JoinHandle<Option<Value>> {
    let args = json!({
        "url": upstream.url(&format!("/delay/{delay_ms}/api/{key}")),
        "method": "POST",
        "body": {},
    });
    let key = key.to_owned();
    tokio::spawn(async move { try_call(port, "gatehouse.rest.send", args, &key).await })
}

async fn until_seen(upstream: &Upstream, count: usize) {
    let start = Instant::now();
    while upstream.seen().len() < count {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the call never reached the upstream"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_config_without_dropping_calls_and_keeps_it_when_invalid() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    write_rest_config(&config, &upstream, "gatehouse.rest.*", "");
    let mut gateway = rest_and_echo(dir.path(), &config).start().await;
    assert_eq!(
        tool_list(gateway.port()).await,
        ["gatehouse.rest.get", "gatehouse.rest.send"]
    );

    // A call is in flight while the config changes: it finishes, on the config it started with.
    let in_flight = slow_call(gateway.port(), &upstream, 1500, "reload-1");
    until_seen(&upstream, 1).await;
    write_rest_config(&config, &upstream, "gatehouse.*", "");
    gateway.signal("HUP");
    let reloaded = gateway
        .logged_message("reloaded", Duration::from_secs(30))
        .await;
    assert_eq!(reloaded["level"], "INFO", "{reloaded}");
    // It says what changed: the tools granted and the store (each config the test writes has a
    // fresh store path), and no plugin.
    assert_eq!(
        (
            &reloaded["fields"]["changed"],
            &reloaded["fields"]["plugins_added"],
            &reloaded["fields"]["plugins_removed"],
        ),
        (
            &json!("pipeline.tool, store"),
            &json!("none"),
            &json!("none")
        ),
        "{reloaded}"
    );
    let tools = tool_list(gateway.port()).await;
    assert!(
        tools.contains(&"gatehouse.echo.echo".to_owned()),
        "{tools:?}"
    );
    let result = in_flight
        .await
        .unwrap()
        .expect("the call in flight was answered");
    assert_eq!(outcome_of(&result), "OK", "{result}");

    // An invalid file: the serving config stays, and the log says why.
    std::fs::write(&config, "[sandbox]\nfule = 1\n").unwrap();
    gateway.signal("HUP");
    let refused = gateway
        .logged_message("reload failed", Duration::from_secs(30))
        .await;
    assert_eq!(refused["level"], "WARN", "{refused}");
    let error = refused["fields"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("gatehouse.toml") && error.contains("unknown field `fule`"),
        "{refused}"
    );
    assert_eq!(tool_list(gateway.port()).await, tools);
    let echo = try_call(
        gateway.port(),
        "gatehouse.echo.echo",
        json!({ "message": "still" }),
        "e-1",
    )
    .await
    .unwrap();
    assert_eq!(outcome_of(&echo), "OK", "{echo}");

    gateway.signal("TERM");
    assert_eq!(
        gateway.exit_status(Duration::from_secs(15)).await.code(),
        Some(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_and_ctrl_c_stop_accepting_finish_calls_in_flight_and_exit_0() {
    let upstream = Upstream::start().await;
    for (n, signal) in ["TERM", "INT"].into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("gatehouse.toml");
        write_rest_config(&config, &upstream, "gatehouse.*", "");
        let mut gateway = rest_and_echo(dir.path(), &config).start().await;
        let in_flight = slow_call(gateway.port(), &upstream, 1500, &format!("stop-{signal}"));
        until_seen(&upstream, n + 1).await;
        gateway.signal(signal);
        // The listener closes at once; the call in flight goes on.
        let start = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", gateway.port()))
            .await
            .is_ok()
        {
            assert!(
                start.elapsed() < Duration::from_secs(1),
                "still accepting after SIG{signal}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let result = in_flight
            .await
            .unwrap()
            .expect("the call in flight was answered");
        assert_eq!(outcome_of(&result), "OK", "SIG{signal}: {result}");
        assert_eq!(
            gateway.exit_status(Duration::from_secs(15)).await.code(),
            Some(0),
            "SIG{signal}"
        );
        let stopped = gateway
            .logged_message("stopped", Duration::from_secs(1))
            .await;
        assert_eq!(stopped["fields"]["unfinished_connections"], 0, "{stopped}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_longer_than_the_drain_timeout_does_not_hold_the_exit() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    write_rest_config(
        &config,
        &upstream,
        "gatehouse.*",
        "drain_timeout_ms = 200\n",
    );
    let mut gateway = rest_and_echo(dir.path(), &config).start().await;
    let in_flight = slow_call(gateway.port(), &upstream, 5000, "drain-1");
    until_seen(&upstream, 1).await;
    let signalled = Instant::now();
    gateway.signal("TERM");
    assert_eq!(
        gateway.exit_status(Duration::from_secs(4)).await.code(),
        Some(0)
    );
    assert!(signalled.elapsed() < Duration::from_secs(4));
    assert_eq!(in_flight.await.unwrap(), None, "the cut call got no answer");
    let stopped = gateway
        .logged_message("stopped", Duration::from_secs(1))
        .await;
    assert_eq!(stopped["level"], "WARN", "{stopped}");
    assert_eq!(stopped["fields"]["unfinished_connections"], 1, "{stopped}");
}

/// The spans of an OTLP/HTTP protobuf export, as (name, trace id, span id, parent span id).
fn exported_spans(upstream: &Upstream) -> Vec<(String, String, String, String)> {
    use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
    use prost::Message as _;
    upstream
        .seen()
        .iter()
        .filter(|seen| seen.path == "/v1/traces")
        .flat_map(|seen| {
            let request = ExportTraceServiceRequest::decode(seen.body.clone())
                .expect("an OTLP protobuf export");
            request.resource_spans.into_iter().flat_map(|resource| {
                resource.scope_spans.into_iter().flat_map(|scope| {
                    scope.spans.into_iter().map(|span| {
                        (
                            span.name,
                            hex(&span.trace_id),
                            hex(&span.span_id),
                            hex(&span.parent_span_id),
                        )
                    })
                })
            })
        })
        .collect()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_traceparent_continues_through_policy_adapter_and_egress_spans() {
    const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
    const PARENT: &str = "00f067aa0ba902b7";
    let upstream = Upstream::start().await;
    let collector = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    let mut host: HostConfig = rest_config(&upstream);
    host.pipeline.tools = vec![grant("gatehouse.*", &["default"])];
    host.pipeline.policies.push(bind(
        "test.policy-probe",
        "gatehouse.rest.*",
        0,
        json!({ "verdict": "allow" }),
    ));
    write_config(&config, &host, "");
    let probe = dir.path().join("probe.wasm");
    std::fs::write(&probe, POLICY_PROBE.signed()).unwrap();
    let mut gateway = rest_and_echo(dir.path(), &config)
        .policy(&probe)
        .env(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            format!("http://127.0.0.1:{}", collector.port),
        )
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .start()
        .await;

    // A tools/call carrying W3C trace context in its HTTP headers, as an instrumented agent
    // framework sends it.
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "gatehouse.rest.send",
            "arguments": { "url": upstream.url("/api/traced"), "method": "POST", "body": {} },
            "_meta": { "gatehouse/idempotency_key": "traced-1" },
        },
    });
    let traceparent = format!("00-{TRACE}-{PARENT}-01");
    let (_, _, reply) = gatehouse_tests::mcp::mcp_post(
        gateway.port(),
        "/mcp",
        &[("traceparent", traceparent.as_str())],
        body.to_string(),
    )
    .await;
    let reply: Value = serde_json::from_str(&reply).unwrap();
    let record = &reply["result"]["_meta"]["gatehouse/result"];
    assert_eq!(record["outcome"], "OK", "{reply}");
    assert_eq!(record["trace_id"], TRACE, "{reply}");

    // The spans reach the collector: one trace, each span under the one that ran it.
    let start = Instant::now();
    let names = ["mcp_call", "tool_call", "policy", "adapter", "egress"];
    let spans = loop {
        let spans = exported_spans(&collector);
        if names.iter().all(|n| spans.iter().any(|s| s.0 == *n)) {
            break spans;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "spans exported so far: {spans:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let span = |name: &str| {
        let found: Vec<_> = spans.iter().filter(|s| s.0 == name).collect();
        assert_eq!(found.len(), 1, "{name}: {spans:?}");
        found[0].clone()
    };
    let (mcp, call, policy, adapter, egress) = (
        span("mcp_call"),
        span("tool_call"),
        span("policy"),
        span("adapter"),
        span("egress"),
    );
    for s in [&mcp, &call, &policy, &adapter, &egress] {
        assert_eq!(s.1, TRACE, "{s:?}");
    }
    assert_eq!(mcp.3, PARENT, "the caller's span is the request's parent");
    assert_eq!(call.3, mcp.2);
    assert_eq!(policy.3, call.2);
    assert_eq!(adapter.3, call.2);
    assert_eq!(egress.3, adapter.2);
    // The upstream's request names the egress span as its parent.
    let seen = upstream.seen();
    assert_eq!(
        seen[0].headers["traceparent"].to_str().unwrap(),
        format!("00-{TRACE}-{}-01", egress.2)
    );

    // The log line of the egress gate carries the spans it was written in.
    let sent = gateway
        .logged_message("egress sent", Duration::from_secs(5))
        .await;
    let in_spans: Vec<&str> = sent["spans"]
        .as_array()
        .unwrap_or_else(|| panic!("{sent}"))
        .iter()
        .filter_map(|s| s["name"].as_str())
        .collect();
    // (rmcp's own request span may come first.)
    assert!(
        in_spans.ends_with(&["mcp_call", "tool_call", "adapter", "egress"]),
        "{sent}"
    );
    let call_span = sent["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "tool_call")
        .unwrap();
    assert_eq!(call_span["trace_id"], TRACE, "{sent}");

    gateway.signal("TERM");
    assert_eq!(
        gateway.exit_status(Duration::from_secs(15)).await.code(),
        Some(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_log_format_json_every_line_is_json_the_banner_included_and_text_has_no_colours() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    write_rest_config(&config, &upstream, "gatehouse.*", "");
    let mut gateway = rest_and_echo(dir.path(), &config).start().await;
    let banner = gateway
        .logged_message(
            "gatehouse: serving MCP (Streamable HTTP) at",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(banner["level"], "INFO", "{banner}");
    gateway
        .logged_message("Ctrl-C stops the gateway", Duration::from_secs(10))
        .await;
    gateway.signal("TERM");
    assert_eq!(
        gateway.exit_status(Duration::from_secs(15)).await.code(),
        Some(0)
    );
    gateway
        .logged_message("gatehouse: stopped", Duration::from_secs(1))
        .await;
    assert_eq!(gateway.non_json_lines(), Vec::<String>::new());

    // Text logs into a file (not a terminal): no ANSI colour codes.
    // In a directory without a gatehouse.toml, so the built-in defaults are used, with a warning.
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("text.log");
    let status = gatehouse_tests::cli::gatehouse_child(&json!(["verify", ECHO.wasm]))
        .current_dir(dir.path())
        .env_remove("GATEHOUSE_CONFIG")
        // The built-in defaults' store and cache, in the test's directory.
        .env("XDG_DATA_HOME", dir.path())
        .env("XDG_CACHE_HOME", dir.path())
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .status()
        .unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "nothing is trusted without a config"
    );
    let text = std::fs::read_to_string(&stderr).unwrap();
    assert!(
        text.contains("WARN") && text.contains("no config file: using built-in defaults"),
        "{text}"
    );
    assert!(!text.contains('\u{1b}'), "ANSI escapes in {text:?}");
}

/// The admin listener of a [`write_rest_config`] config on `port`: no tokens, so `/v1` answers 401
/// and `/metrics` answers anyone.
fn admin_table(port: u16) -> String {
    format!("\n[admin]\nlisten = \"127.0.0.1:{port}\"\n")
}

/// `GET path` on the admin listener, without a token: the status and the body.
async fn admin_get(port: u16, path: &str) -> (u16, String) {
    let (status, body) = request(port, "GET", path, None, None).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// A gateway on a [`write_rest_config`] config (every `gatehouse.*` tool) with an admin listener,
/// in `dir`: the gateway and the admin port.
async fn with_admin(dir: &Path, upstream: &Upstream) -> (Gateway, u16) {
    let config = dir.join("gatehouse.toml");
    let admin = free_port();
    write_rest_config(&config, upstream, "gatehouse.*", &admin_table(admin));
    let gateway = rest_and_echo(dir, &config).wait_for(admin).start().await;
    (gateway, admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_request_has_an_access_line_and_401s_are_warned_about_and_counted() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (gateway, admin) = with_admin(dir.path(), &upstream).await;

    // A governed call: its access line names who, what, how it ended and its trace.
    let echo = try_call(
        gateway.port(),
        "gatehouse.echo.echo",
        json!({ "message": "hi" }),
        "access-1",
    )
    .await
    .unwrap();
    assert_eq!(outcome_of(&echo), "OK", "{echo}");
    let access = |l: &Value| l["target"] == "gatehouse::access";
    let line = gateway
        .logged_where(
            |l| access(l) && l["fields"]["tool"] == "gatehouse.echo.echo",
            Duration::from_secs(10),
        )
        .await;
    let fields = &line["fields"];
    assert_eq!(
        (
            &fields["listener"],
            &fields["method"],
            &fields["path"],
            &fields["status"],
            &fields["tenant"],
            &fields["principal"],
            &fields["outcome"],
        ),
        (
            &json!("mcp"),
            &json!("POST"),
            &json!("/mcp"),
            &json!(200),
            &json!("default"),
            &json!("anonymous"),
            &json!("OK"),
        ),
        "{line}"
    );
    assert_eq!(
        fields["trace_id"], echo["_meta"]["gatehouse/result"]["trace_id"],
        "{line}"
    );
    assert!(fields["bytes"].as_u64().unwrap() > 0, "{line}");
    assert!(fields["latency_ms"].as_f64().unwrap() > 0.0, "{line}");

    // A refused key on the MCP endpoint and a missing token on the admin API: 401s, warned
    // about (the first at once) and counted per listener.
    let (status, _, _) = gatehouse_tests::mcp::mcp_post(
        gateway.port(),
        "/mcp",
        &[("authorization", "Bearer not-a-key")],
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(status, 401);
    let (status, _) = admin_get(admin, "/v1/approvals").await;
    assert_eq!(status, 401);
    for listener in ["mcp", "admin"] {
        let warned = gateway
            .logged_where(
                |l| {
                    l["fields"]["listener"] == listener
                        && l["fields"]["message"] == "requests refused: authentication failed (401)"
                },
                Duration::from_secs(10),
            )
            .await;
        assert_eq!(
            (&warned["level"], &warned["fields"]["refused"]),
            (&json!("WARN"), &json!(1)),
            "{warned}"
        );
        let line = gateway
            .logged_where(
                |l| {
                    access(l) && l["fields"]["listener"] == listener && l["fields"]["status"] == 401
                },
                Duration::from_secs(10),
            )
            .await;
        assert_eq!(line["fields"]["principal"], Value::Null, "{line}");
    }
    let mcp_reason = gateway
        .logged_where(
            |l| l["fields"]["listener"] == "mcp" && l["fields"]["refused"] == 1,
            Duration::from_secs(1),
        )
        .await;
    assert!(
        !mcp_reason.to_string().contains("not-a-key"),
        "the credential is never logged: {mcp_reason}"
    );
    let (status, metrics) = admin_get(admin, "/metrics").await;
    assert_eq!(status, 200);
    for expected in [
        "gatehouse_unauthorized_requests_total{listener=\"mcp\"} 1",
        "gatehouse_unauthorized_requests_total{listener=\"admin\"} 1",
    ] {
        assert!(metrics.contains(expected), "{expected} in:\n{metrics}");
    }
    let line = gateway
        .logged_where(
            |l| access(l) && l["fields"]["path"] == "/metrics",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(
        (
            &line["fields"]["listener"],
            &line["fields"]["method"],
            &line["fields"]["status"]
        ),
        (&json!("admin"), &json!("GET"), &json!(200)),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn egress_denials_are_warned_about_with_their_reason_and_counted_by_destination() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let (gateway, admin) = with_admin(dir.path(), &upstream).await;
    let ok = try_call(
        gateway.port(),
        "gatehouse.rest.get",
        json!({ "url": upstream.url("/api/items/1") }),
        "egress-1",
    )
    .await
    .unwrap();
    assert_eq!(outcome_of(&ok), "OK", "{ok}");
    // A port the grant does not cover.
    let denied = try_call(
        gateway.port(),
        "gatehouse.rest.get",
        json!({ "url": "http://127.0.0.1:9/elsewhere" }),
        "egress-2",
    )
    .await
    .unwrap();
    assert_eq!(outcome_of(&denied), "TOOL_ERROR", "{denied}");
    let warned = gateway
        .logged_where(
            |l| l["fields"]["message"] == "egress denied" && l["level"] == "WARN",
            Duration::from_secs(10),
        )
        .await;
    assert_eq!(
        (
            &warned["fields"]["code"],
            &warned["fields"]["destination"],
            &warned["fields"]["denied"]
        ),
        (
            &json!("no_matching_grant"),
            &json!("http://127.0.0.1:9/elsewhere"),
            &json!(1)
        ),
        "{warned}"
    );
    assert!(
        warned["fields"]["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{warned}"
    );
    let (_, metrics) = admin_get(admin, "/metrics").await;
    for expected in [
        format!(
            "gatehouse_egress_destination_requests_total{{destination=\"127.0.0.1:{}\",code=\"ok\"}} 1",
            upstream.port
        ),
        "gatehouse_egress_destination_requests_total{destination=\"denied\",code=\"no_matching_grant\"} 1".to_owned(),
        "gatehouse_store_up 1".to_owned(),
        "gatehouse_store_commit_seconds_count 2".to_owned(),
        format!(
            "gatehouse_build_info{{version=\"{}\",commit=\"",
            env!("CARGO_PKG_VERSION")
        ),
    ] {
        assert!(metrics.contains(&expected), "{expected} in:\n{metrics}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_file_is_created_owner_only_and_a_looser_one_is_warned_about() {
    use std::os::unix::fs::PermissionsExt;
    let upstream = Upstream::start().await;
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    for existing in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("state.db");
        if existing {
            std::fs::write(&store, b"").unwrap();
            std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let mut host: HostConfig = rest_config(&upstream);
        host.store.path = Some(store.clone());
        host.pipeline.tools = vec![grant("gatehouse.*", &["default"])];
        let config = dir.path().join("gatehouse.toml");
        write_config(&config, &host, "");
        let gateway = rest_and_echo(dir.path(), &config).start().await;
        let echo = try_call(
            gateway.port(),
            "gatehouse.echo.echo",
            json!({ "message": "m" }),
            "mode-1",
        )
        .await
        .unwrap();
        assert_eq!(outcome_of(&echo), "OK", "{echo}");
        if existing {
            assert_eq!(mode(&store), 0o644, "an existing file is left as it is");
            let warned = gateway
                .logged_message(
                    "the state store file is readable by others",
                    Duration::from_secs(5),
                )
                .await;
            assert_eq!(
                (&warned["level"], &warned["fields"]["mode"]),
                (&json!("WARN"), &json!("644")),
                "{warned}"
            );
        } else {
            for file in ["state.db", "state.db-wal", "state.db-shm"] {
                assert_eq!(mode(&dir.path().join(file)), 0o600, "{file}");
            }
            assert!(
                !gateway
                    .json_logs()
                    .iter()
                    .any(|l| l.to_string().contains("readable by others")),
                "{:#?}",
                gateway.json_logs()
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policy_denials_are_warned_about_with_their_reasons() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    let mut host: HostConfig = rest_config(&upstream);
    host.pipeline.tools = vec![grant("gatehouse.*", &["default"])];
    host.pipeline.policies.push(bind(
        "test.policy-probe",
        "gatehouse.echo.*",
        0,
        json!({ "verdict": "deny" }),
    ));
    write_config(&config, &host, "");
    let probe = dir.path().join("probe.wasm");
    std::fs::write(&probe, POLICY_PROBE.signed()).unwrap();
    let gateway = rest_and_echo(dir.path(), &config)
        .policy(&probe)
        .start()
        .await;
    for n in 0..2 {
        let denied = try_call(
            gateway.port(),
            "gatehouse.echo.echo",
            json!({ "message": "no" }),
            &format!("deny-{n}"),
        )
        .await
        .unwrap();
        assert_eq!(outcome_of(&denied), "POLICY_BLOCKED", "{denied}");
    }
    let denials = |level: &str| {
        gateway
            .json_logs()
            .into_iter()
            .filter(|l| {
                l["level"] == level
                    && l["fields"]["message"]
                        .as_str()
                        .is_some_and(|m| m.starts_with("call denied by policy: "))
            })
            .collect::<Vec<_>>()
    };
    let warned = gateway
        .logged_where(
            |l| !denials("WARN").is_empty() && l["level"] == "WARN",
            Duration::from_secs(10),
        )
        .await;
    let warnings = denials("WARN");
    assert_eq!(
        warnings.len(),
        1,
        "one warning per interval: {warnings:#?} ({warned})"
    );
    assert_eq!(
        (
            &warnings[0]["fields"]["outcome"],
            &warnings[0]["fields"]["denied"]
        ),
        (&json!("POLICY_BLOCKED"), &json!(1)),
        "{warnings:#?}"
    );
    let message = warnings[0]["fields"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("call denied by policy: policy denied the call: "),
        "the policy's reasons: {message}"
    );
    assert_eq!(
        denials("INFO").len(),
        1,
        "the second, within the interval, at INFO"
    );
}

//! Operating a running `gatehouse serve` process, as an operator's service manager does:
//! SIGTERM and Ctrl-C (SIGINT) stop accepting, let calls in flight finish (for at most
//! `[mcp] drain_timeout_ms`) and exit 0; SIGHUP reloads the config file without dropping calls,
//! and an invalid file keeps the serving config and logs why; `--log-format json` writes one
//! JSON object per log line, in the call's spans; the caller's `traceparent` continues through
//! the MCP request, policy, adapter and egress spans, exported over OTLP to a loopback
//! collector. Each test drives a child process running the `gatehouse` CLI.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use gatehouse_host::HostConfig;
use gatehouse_host::config::{PolicyBinding, ToolGrant};
use gatehouse_tests::artifacts::{ECHO, POLICY_PROBE, REST};
use gatehouse_tests::glob;
use gatehouse_tests::upstream::Upstream;
use serde_json::{Value, json};

use gatehouse_tests::{free_port, listening};

use crate::state::{mcp_call, outcome_of, rest_config};

/// A `gatehouse serve --log-format json` process; killed when dropped.
pub(crate) struct Gateway {
    child: std::process::Child,
    pub(crate) port: u16,
    stderr: PathBuf,
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Gateway {
    pub(crate) async fn start(dir: &Path, config: &Path) -> Self {
        Self::start_with(dir, config, &[], &[]).await
    }

    /// [`Gateway::start`] with `more` arguments and `env` variables.
    pub(crate) async fn start_with(
        dir: &Path,
        config: &Path,
        more: &[Value],
        env: &[(&str, String)],
    ) -> Self {
        let port = free_port();
        let rest = dir.join("rest.wasm");
        let echo = dir.join("echo.wasm");
        std::fs::write(&rest, REST.signed()).unwrap();
        std::fs::write(&echo, ECHO.signed()).unwrap();
        let mut args = json!([
            "serve",
            "--config",
            config,
            "--adapter",
            rest,
            "--adapter",
            echo,
            "--listen",
            format!("127.0.0.1:{port}"),
            "--log-format",
            "json",
        ]);
        args.as_array_mut().unwrap().extend(more.iter().cloned());
        let stderr = dir.join(format!("stderr-{port}.log"));
        let child = gatehouse_tests::gatehouse_child(&args)
            .env("RUST_LOG", "info")
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let gateway = Self {
            child,
            port,
            stderr,
        };
        assert!(
            listening(port).await,
            "the gateway did not start listening on {port}: {:?}",
            gateway.logs()
        );
        gateway
    }

    /// Sends `signal` (`TERM`, `INT`, `HUP`) to the process.
    pub(crate) fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([format!("-{signal}"), self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal}");
    }

    /// Every JSON log line so far (other lines, e.g. the test harness's, are skipped).
    pub(crate) fn logs(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.stderr)
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect()
    }

    /// Waits (at most `within`) for a log line whose message contains `text`.
    async fn logged(&self, text: &str, within: Duration) -> Value {
        let start = Instant::now();
        loop {
            if let Some(line) = self.logs().into_iter().find(|l| {
                l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.contains(text))
            }) {
                return line;
            }
            assert!(
                start.elapsed() < within,
                "no log line with {text:?} in {:#?}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub(crate) async fn exit_status(&mut self, within: Duration) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < within, "still running after {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The tool names `tools/list` answers.
    async fn tools(&self) -> Vec<String> {
        let (_, _, body) = gatehouse_tests::mcp_post(
            self.port,
            "/mcp",
            &[],
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
        )
        .await;
        let reply: Value = serde_json::from_str(&body).unwrap();
        reply["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{reply}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }
}

/// Writes `gatehouse serve`'s config: the rest adapter granted the upstream, tools matching
/// `tools` visible to callers without a key, and `mcp` appended to `[mcp]`.
pub(crate) fn write_config(path: &Path, upstream: &Upstream, tools: &str, mcp: &str) {
    let mut host: HostConfig = rest_config(upstream);
    host.pipeline.tools = vec![ToolGrant {
        tools: glob(tools),
        tenants: ["default"].into_iter().collect(),
        arg_constraints: Default::default(),
    }];
    let text = format!(
        "{}\n[mcp]\nanonymous_tenant = \"default\"\n{mcp}",
        toml::to_string(&host).unwrap()
    );
    std::fs::write(path, text).unwrap();
}

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
    tokio::spawn(async move { mcp_call(port, "gatehouse.rest.send", args, &key).await })
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
    write_config(&config, &upstream, "gatehouse.rest.*", "");
    let mut gateway = Gateway::start(dir.path(), &config).await;
    assert_eq!(
        gateway.tools().await,
        ["gatehouse.rest.get", "gatehouse.rest.send"]
    );

    // A call is in flight while the config changes: it finishes, on the config it started with.
    let in_flight = slow_call(gateway.port, &upstream, 1500, "reload-1");
    until_seen(&upstream, 1).await;
    write_config(&config, &upstream, "gatehouse.*", "");
    gateway.signal("HUP");
    let reloaded = gateway.logged("reloaded", Duration::from_secs(30)).await;
    assert_eq!(reloaded["level"], "INFO", "{reloaded}");
    let tools = gateway.tools().await;
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
        .logged("reload failed", Duration::from_secs(30))
        .await;
    assert_eq!(refused["level"], "WARN", "{refused}");
    let error = refused["fields"]["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("gatehouse.toml") && error.contains("unknown field `fule`"),
        "{refused}"
    );
    assert_eq!(gateway.tools().await, tools);
    let echo = mcp_call(
        gateway.port,
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
        write_config(&config, &upstream, "gatehouse.*", "");
        let mut gateway = Gateway::start(dir.path(), &config).await;
        let in_flight = slow_call(gateway.port, &upstream, 1500, &format!("stop-{signal}"));
        until_seen(&upstream, n + 1).await;
        gateway.signal(signal);
        // The listener closes at once; the call in flight goes on.
        let start = Instant::now();
        while tokio::net::TcpStream::connect(("127.0.0.1", gateway.port))
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
        let stopped = gateway.logged("stopped", Duration::from_secs(1)).await;
        assert_eq!(stopped["fields"]["unfinished_connections"], 0, "{stopped}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_longer_than_the_drain_timeout_does_not_hold_the_exit() {
    let upstream = Upstream::start().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    write_config(
        &config,
        &upstream,
        "gatehouse.*",
        "drain_timeout_ms = 200\n",
    );
    let mut gateway = Gateway::start(dir.path(), &config).await;
    let in_flight = slow_call(gateway.port, &upstream, 5000, "drain-1");
    until_seen(&upstream, 1).await;
    let signalled = Instant::now();
    gateway.signal("TERM");
    assert_eq!(
        gateway.exit_status(Duration::from_secs(4)).await.code(),
        Some(0)
    );
    assert!(signalled.elapsed() < Duration::from_secs(4));
    assert_eq!(in_flight.await.unwrap(), None, "the cut call got no answer");
    let stopped = gateway.logged("stopped", Duration::from_secs(1)).await;
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
    host.pipeline.tools = vec![ToolGrant {
        tools: glob("gatehouse.*"),
        tenants: ["default"].into_iter().collect(),
        arg_constraints: Default::default(),
    }];
    host.pipeline.policies.push(PolicyBinding {
        module: "test.policy-probe".to_owned(),
        tenants: ["*"].into_iter().collect(),
        tools: vec![glob("gatehouse.rest.*")],
        order: 0,
        config: json!({ "verdict": "allow" }),
    });
    let text = format!(
        "{}\n[mcp]\nanonymous_tenant = \"default\"\n",
        toml::to_string(&host).unwrap()
    );
    std::fs::write(&config, text).unwrap();
    let probe = dir.path().join("probe.wasm");
    std::fs::write(&probe, POLICY_PROBE.signed()).unwrap();
    let mut gateway = Gateway::start_with(
        dir.path(),
        &config,
        &[json!("--policy"), json!(probe)],
        &[
            (
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                format!("http://127.0.0.1:{}", collector.port),
            ),
            ("OTEL_BSP_SCHEDULE_DELAY", "100".to_owned()),
        ],
    )
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
    let (_, _, reply) = gatehouse_tests::mcp_post(
        gateway.port,
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
    let sent = gateway.logged("egress sent", Duration::from_secs(5)).await;
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

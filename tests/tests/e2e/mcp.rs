//! MCP over Streamable HTTP: a real rmcp client against `McpServer` on loopback, and raw HTTP
//! for what a client library would never send. Two API keys: tenant `acme` sees every tool,
//! tenant `globex` only `gatehouse.echo.*`.

use std::sync::Arc;

use bytes::Bytes;
use gatehouse_host::config::EgressConfig;
use gatehouse_host::config::ToolGrant;
use gatehouse_host::mcp::{ApiKeyConfig, McpConfig, McpServer};
use gatehouse_host::{Host, HostConfig};
use gatehouse_tests::artifacts::{ECHO, EGRESS_PROBE, LEDGER, PANIC, TEXTKIT};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{Artifact, glob};
use http_body_util::{BodyExt, Full};
use rmcp::ServiceExt;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use wasmtime_wasi_http::io::TokioIo;

const ACME_KEY: &str = "acme-key-5d1e";
const GLOBEX_KEY: &str = "globex-key-93ab";

/// A running gateway: its endpoint URL and the directory holding its key files.
struct Gateway {
    url: String,
    port: u16,
    _keys: tempfile::TempDir,
}

async fn gateway(tweak: impl FnOnce(&mut McpConfig)) -> Gateway {
    gateway_with(|_| {}, &[], tweak).await
}

/// [`gateway`] with the host config tweaked and more plugins installed.
async fn gateway_with(
    host_tweak: impl FnOnce(&mut HostConfig),
    more: &[Artifact],
    tweak: impl FnOnce(&mut McpConfig),
) -> Gateway {
    let keys = tempfile::tempdir().unwrap();
    let key = |tenant: &str, key: &str| {
        let path = keys.path().join(tenant);
        std::fs::write(&path, key).unwrap();
        ApiKeyConfig {
            tenant: tenant.to_owned(),
            principal: Some(format!("agent:{tenant}-bot")),
            env: None,
            file: Some(path),
        }
    };
    let mut config = gatehouse_tests::config(&["gatehouse.*", "test.*"], &[]);
    config.pipeline.tools = vec![
        ToolGrant {
            tools: glob("*"),
            tenants: ["acme"].into_iter().collect(),
            arg_constraints: Default::default(),
        },
        ToolGrant {
            tools: glob("gatehouse.echo.*"),
            tenants: ["globex"].into_iter().collect(),
            arg_constraints: Default::default(),
        },
    ];
    let mut mcp = McpConfig {
        api_keys: vec![key("acme", ACME_KEY), key("globex", GLOBEX_KEY)],
        ..McpConfig::default()
    };
    tweak(&mut mcp);
    host_tweak(&mut config);
    let host = Arc::new(Host::new(config).unwrap());
    for plugin in [ECHO, TEXTKIT, LEDGER].iter().chain(more) {
        host.install_adapter(&plugin.signed()).unwrap();
    }
    let server = McpServer::new(host, &mcp).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(server.serve(listener, std::future::pending()));
    Gateway {
        url: format!("http://127.0.0.1:{port}/mcp"),
        port,
        _keys: keys,
    }
}

async fn client(gateway: &Gateway, key: &str) -> RunningService<RoleClient, ()> {
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(gateway.url.as_str()).auth_header(key),
    );
    ().serve(transport).await.expect("the client initializes")
}

fn params(call: Value) -> CallToolRequestParams {
    serde_json::from_value(call).unwrap()
}

/// The gateway's record of the call.
fn record(result: &CallToolResult) -> &Value {
    &result.meta.as_ref().expect("_meta is set")["gatehouse/result"]
}

fn texts(result: &CallToolResult) -> Vec<String> {
    serde_json::to_value(&result.content)
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

/// `tools/list` for `client` includes every tool in `expected`.
async fn assert_lists(client: &RunningService<RoleClient, ()>, expected: &[&str]) {
    let names: Vec<String> = client
        .list_all_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
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
    let acme = client(&gateway, ACME_KEY).await;
    assert_lists(
        &acme,
        &[
            "gatehouse.echo.echo",
            "gatehouse.textkit.word_stats",
            "test.ledger.transfer",
        ],
    )
    .await;

    let globex = client(&gateway, GLOBEX_KEY).await;
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
    let acme = client(&gateway, ACME_KEY).await;
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
    let acme = client(&gateway, ACME_KEY).await;
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
    let acme = client(&gateway, ACME_KEY).await;
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
    let globex = client(&gateway, GLOBEX_KEY).await;
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
async fn post(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> (u16, hyper::HeaderMap, String) {
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let mut request = hyper::Request::post(path);
    if !headers.iter().any(|(name, _)| *name == "host") {
        request = request.header("host", format!("127.0.0.1:{port}"));
    }
    request = request
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender
        .send_request(request.body(Full::new(body.into())).unwrap())
        .await
        .unwrap();
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

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

    let (status, headers, body) = post(port, "/mcp", &[], LIST).await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(headers["www-authenticate"], "Bearer");
    assert!(body.contains("IDENTITY_INVALID"), "{body}");

    let (status, _, body) = post(port, "/mcp", &[("authorization", "Bearer nope")], LIST).await;
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("not valid"), "{body}");

    let (status, _, body) = post(port, "/other", &[("authorization", auth)], LIST).await;
    assert_eq!(status, 404, "{body}");

    let (status, _, body) = post(
        port,
        "/mcp",
        &[("authorization", auth), ("origin", "https://evil.example")],
        LIST,
    )
    .await;
    assert_eq!(status, 403, "{body}");

    let (status, _, body) = post(
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
    let (status, _, body) = post(
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
    let (status, _, body) = post(port, "/mcp", &[("authorization", auth)], big).await;
    assert_eq!(status, 413, "{body}");

    // rmcp answers a body that is not JSON-RPC with 415 and the parser's message.
    let (status, _, body) = post(port, "/mcp", &[("authorization", auth)], "{not json").await;
    assert_eq!(status, 415, "{body}");
    assert!(body.contains("deserialize request body"), "{body}");
}

/// Collects what the CLI writes, for a test reading it from another thread.
struct Lines(std::sync::mpsc::Sender<String>);

impl std::io::Write for Lines {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.send(String::from_utf8_lossy(buf).into_owned());
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gatehouse_serve_demo_answers_an_mcp_client_without_a_key() {
    let (tx, rx) = std::sync::mpsc::channel();
    // The README's "run the gateway" command, on any free port. It serves until the test
    // process ends.
    std::thread::spawn(move || {
        gatehouse_host::cli::run(
            ["gatehouse", "serve", "--demo", "--listen", "127.0.0.1:0"],
            &mut Lines(tx),
        )
    });
    let mut output = String::new();
    while !output.contains("Ctrl-C stops the gateway.") {
        let chunk = rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("serve did not start ({e}); output so far:\n{output}"));
        output.push_str(&chunk);
    }
    let url = output
        .split_whitespace()
        .find(|w| w.starts_with("http://127.0.0.1:") && w.ends_with("/mcp"))
        .unwrap_or_else(|| panic!("no endpoint in:\n{output}"))
        .to_owned();
    assert!(output.contains("tenant `default`"), "{output}");

    let transport = StreamableHttpClientTransport::from_uri(url.as_str());
    let client = ().serve(transport).await.expect("the client initializes");
    assert_lists(
        &client,
        &["gatehouse.echo.echo", "gatehouse.textkit.word_stats"],
    )
    .await;
    let result = client
        .call_tool(params(json!({ "name": "gatehouse.textkit.word_stats", "arguments": { "text": "one two two" } })))
        .await
        .unwrap();
    assert_eq!(result.is_error, Some(false), "{result:#?}");
    assert_eq!(record(&result)["outcome"], "OK");
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
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        stream.read_to_end(&mut answer),
    )
    .await;
    assert!(read.is_ok(), "the connection is still open after 5 s");
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 408"),
        "{answer}"
    );
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
    let acme = client(&gateway, ACME_KEY).await;
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
    let acme = client(&gateway, ACME_KEY).await;
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

//! MCP for the tests, from both ends:
//!
//! 1. raw JSON-RPC over HTTP, for what a client library hides or would never send:
//!    [`mcp_post`] (one POST, any headers and body), [`call`] (`tools/call`, answered 200),
//!    [`try_call`] (`tools/call` to a gateway that may be killed or stopping),
//!    [`tool_list`]; and what a result carries: [`record`], [`outcome_of`];
//! 2. an rmcp client: [`client`], [`client_speaking`] (one protocol version), [`rmcp_call`],
//!    [`tool_names`], [`texts`];
//! 3. a gateway's MCP server in this process, on a loopback port: [`serve`], [`with_api_key`],
//!    and a kept-alive connection to it for benches ([`KeptAlive`]).

use std::sync::Arc;

use bytes::Bytes;
use gatehouse_host::Host;
use gatehouse_server::mcp::{ApiKeyConfig, McpConfig, McpServer};
use http_body_util::{BodyExt, Full};
use rmcp::ServiceExt as _;
use rmcp::model::{CallToolRequestParams, CallToolResult, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};
use wasmtime_wasi_http::io::TokioIo;

/// An rmcp client session.
pub type Client = RunningService<RoleClient, ()>;

/// One POST to a gatehouse MCP endpoint on loopback port `port`, as an MCP client sends it
/// (`Host`, JSON content type, `Accept` and protocol version 2025-11-25, unless `headers` set
/// `host` or `content-type` themselves), plus `headers`: the status, headers and body.
pub async fn mcp_post(
    port: u16,
    path: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> (u16, hyper::HeaderMap, String) {
    let mut all: Vec<(&str, &str)> = Vec::new();
    if !headers.iter().any(|(name, _)| *name == "content-type") {
        all.push(("content-type", "application/json"));
    }
    all.extend([
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", "2025-11-25"),
    ]);
    all.extend_from_slice(headers);
    let (status, headers, body) = crate::http(port, "POST", path, &all, body).await;
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

/// The body of a `tools/call` of `tool` with `args`, and `meta` as its `_meta` unless it is
/// null.
pub fn tools_call(tool: &str, args: Value, meta: Value) -> String {
    let mut params = serde_json::Map::new();
    params.insert("name".to_owned(), tool.into());
    params.insert("arguments".to_owned(), args);
    if !meta.is_null() {
        params.insert("_meta".to_owned(), meta);
    }
    json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params }).to_string()
}

/// `tools/call` of `tool` with `args` and `meta` (null: none) on loopback port `port`'s `/mcp`,
/// with `headers` (an `authorization`, or none for an anonymous caller): the JSON-RPC
/// `result`.
///
/// # Panics
/// Unless answered 200 with JSON, showing the answer.
pub async fn call(
    port: u16,
    headers: &[(&str, &str)],
    tool: &str,
    args: Value,
    meta: Value,
) -> Value {
    let (status, _, text) = mcp_post(port, "/mcp", headers, tools_call(tool, args, meta)).await;
    assert_eq!(status, 200, "{text}");
    let reply: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    reply["result"].clone()
}

/// `tools/call` of `tool` with `args` under idempotency key `key`, as an anonymous caller, on
/// loopback port `port`: the JSON-RPC `result`, or `None` when there was no answer (the
/// connection was refused or cut: a gateway killed or stopping).
pub async fn try_call(port: u16, tool: &str, args: Value, key: &str) -> Option<Value> {
    let body = tools_call(tool, args, json!({ "gatehouse/idempotency_key": key }));
    let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .ok()?;
    tokio::spawn(conn);
    let request = hyper::Request::post("/mcp")
        .header("host", format!("127.0.0.1:{port}"))
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", "2025-11-25")
        .body(Full::new(Bytes::from(body)))
        .expect("a valid request");
    let response = sender.send_request(request).await.ok()?;
    let bytes = response.into_body().collect().await.ok()?.to_bytes();
    let reply: Value = serde_json::from_slice(&bytes).ok()?;
    Some(reply["result"].clone())
}

/// The tool names `tools/list` answers an anonymous caller on loopback port `port`, in the
/// order listed.
pub async fn tool_list(port: u16) -> Vec<String> {
    let (status, _, body) = mcp_post(
        port,
        "/mcp",
        &[],
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#,
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let reply: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    reply["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{reply}"))
        .iter()
        .map(|t| t["name"].as_str().expect("a tool has a name").to_owned())
        .collect()
}

/// The gateway's record of a call, in a JSON-RPC `tools/call` result.
pub fn record(result: &Value) -> &Value {
    &result["_meta"]["gatehouse/result"]
}

/// The outcome code in a call's record (`?` if there is none).
pub fn outcome_of(result: &Value) -> &str {
    record(result)["outcome"].as_str().unwrap_or("?")
}

/// An rmcp client of the MCP endpoint at `url`, with API key `key` (or none), after the
/// protocol version's start (whichever rmcp prefers).
pub async fn client(url: &str, key: Option<&str>) -> Client {
    ().serve(StreamableHttpClientTransport::from_config(transport(
        url, key,
    )))
    .await
    .expect("the client initializes")
}

/// An rmcp client of `url` with `key` that speaks `version`: 2026-07-28 discovers the server
/// (`server/discover`, then self-contained requests), 2025-11-25 initializes.
///
/// # Panics
/// If the server does not agree to `version`.
pub async fn client_speaking(url: &str, key: Option<&str>, version: &ProtocolVersion) -> Client {
    let lifecycle = if *version == ProtocolVersion::V_2026_07_28 {
        ClientLifecycleMode::Discover {
            preferred_versions: vec![version.clone()],
        }
    } else {
        ClientLifecycleMode::Initialize
    };
    let client = ()
        .serve_with_lifecycle(
            StreamableHttpClientTransport::from_config(transport(url, key)),
            lifecycle,
        )
        .await
        .expect("the client connects");
    assert_eq!(
        client
            .peer_info()
            .map(|p| p.protocol_version.clone())
            .as_ref(),
        Some(version)
    );
    client
}

/// The transport's config for `url` with `key`, once the process has a rustls provider
/// (rmcp's reqwest client takes the process's).
fn transport(url: &str, key: Option<&str>) -> StreamableHttpClientTransportConfig {
    gatehouse_host::install_default_provider();
    let config = StreamableHttpClientTransportConfig::with_uri(url);
    match key {
        Some(key) => config.auth_header(key),
        None => config,
    }
}

/// `tools/call` of `tool` through an rmcp client, with `args` and the request's `_meta`: the
/// result, and the gateway's record of the call (`_meta["gatehouse/result"]`).
pub async fn rmcp_call(
    client: &Client,
    tool: &str,
    args: Value,
    meta: Value,
) -> (CallToolResult, Value) {
    let params: CallToolRequestParams =
        serde_json::from_value(json!({ "name": tool, "arguments": args, "_meta": meta }))
            .expect("call parameters");
    let result = client.call_tool(params).await.expect("a tool result");
    let record = result.meta.as_ref().expect("_meta is set")["gatehouse/result"].clone();
    (result, record)
}

/// The names `tools/list` gives an rmcp client, sorted.
pub async fn tool_names(client: &Client) -> Vec<String> {
    let mut names: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list answers")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    names.sort();
    names
}

/// The text blocks of a tool result, in order.
pub fn texts(result: &CallToolResult) -> Vec<String> {
    serde_json::to_value(&result.content)
        .expect("content serializes")
        .as_array()
        .expect("content is a list")
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_owned))
        .collect()
}

/// An MCP config admitting `key` as an API key of tenant `default`, read from a file in the
/// returned directory (keep it while the server runs).
pub fn with_api_key(key: &str) -> (McpConfig, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("key");
    std::fs::write(&file, key).expect("write key");
    let config = McpConfig {
        api_keys: vec![ApiKeyConfig {
            tenant: "default".to_owned(),
            principal: None,
            env: None,
            file: Some(file),
            roles: Vec::new(),
            groups: Vec::new(),
        }],
        ..McpConfig::default()
    };
    (config, dir)
}

/// Serves `host` over MCP with `config` in this process, on a free port of `[mcp] listen`'s
/// address (what the server allows depends on it), until the test process ends: the port.
pub async fn serve(host: Arc<Host>, config: &McpConfig) -> u16 {
    let server = McpServer::new(host, config).expect("the MCP config is valid");
    let listener = tokio::net::TcpListener::bind((config.listen.ip(), 0))
        .await
        .expect("a free port");
    let port = listener.local_addr().expect("a bound listener").port();
    tokio::spawn(server.serve(listener, std::future::pending()));
    port
}

/// One kept-alive HTTP/1.1 connection to a gateway's MCP endpoint on loopback, for benches
/// that time calls without a connection's set-up. Calls on it take turns.
pub struct KeptAlive {
    port: u16,
    sender: tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Full<Bytes>>>,
}

impl KeptAlive {
    /// Connects to port `port`.
    pub async fn open(port: u16) -> Self {
        let stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        Self {
            port,
            sender: tokio::sync::Mutex::new(sender),
        }
    }

    /// Posts the `tools/call` request `body` with API key `key`, as an MCP client does: the
    /// JSON-RPC answer, which must be a result that is not an error.
    pub async fn tools_call(&self, key: &str, body: &str) -> Value {
        let request = hyper::Request::post("/mcp")
            .header("host", format!("127.0.0.1:{}", self.port))
            .header("authorization", format!("Bearer {key}"))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-11-25")
            .body(Full::new(Bytes::from(body.to_owned())))
            .expect("request");
        let mut sender = self.sender.lock().await;
        sender.ready().await.expect("the connection is kept alive");
        let response = sender.send_request(request).await.expect("response");
        assert_eq!(response.status(), 200);
        let answer = response.into_body().collect().await.expect("body");
        let answer: Value =
            serde_json::from_slice(&answer.to_bytes()).expect("a JSON-RPC response");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        answer
    }
}

/// The next server-sent event's message on a raw stream (its `data:` line as JSON), if one
/// comes within `wait`.
///
/// # Panics
/// If the stream cannot be read, or an event is not JSON.
pub async fn next_event(
    reader: &mut tokio::io::BufReader<tokio::net::TcpStream>,
    wait: std::time::Duration,
) -> Option<Value> {
    use tokio::io::AsyncBufReadExt as _;
    let read = async {
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).await.unwrap() == 0 {
                return None;
            }
            if let Some(data) = line.strip_prefix("data: ") {
                return Some(serde_json::from_str::<Value>(data.trim()).unwrap());
            }
        }
    };
    tokio::time::timeout(wait, read).await.ok().flatten()
}

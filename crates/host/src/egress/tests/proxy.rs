//! A stdio server's egress proxy, end to end: a real server process in the real sandbox
//! (bubblewrap, which `.ci/run` installs), its requests through the proxy in its network
//! namespace, judged by the gate against loopback upstreams that record what reached them.

use serde_json::{Value, json};

use super::*;
use crate::stdio::{StdioServer, Supervision};

/// A stdio MCP server whose tools try the network from inside the sandbox:
/// - `fetch {url, method}`: a GET (or a POST) through the proxy the environment names (Python's urllib reads
///   `http_proxy`); answers `STATUS CODE BODY`, where CODE is the proxy's
///   `x-gatehouse-denial` or `-`;
/// - `tunnel {authority, request}`: `CONNECT` to the proxy, then `request` sent raw inside
///   the tunnel; answers the CONNECT status line and the first line inside;
/// - `direct {port}`: a TCP connection to 127.0.0.1:port without the proxy;
/// - `dns {name}`: a lookup;
/// - `later {url, ms}`: the same GET as `fetch`, `ms` after the call has been answered;
///   `result` answers what it got.
const SERVER: &str = r#"
import json, os, socket, sys, threading, time, urllib.request, urllib.error
later = {"result": "none yet"}
def get(url, method="GET"):
    data = b"{}" if method == "POST" else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, method=method), timeout=5) as r:
            return "%d - %s" % (r.status, r.read().decode())
    except urllib.error.HTTPError as e:
        return "%d %s %s" % (e.code, e.headers.get("x-gatehouse-denial", "-"), e.read().decode())
    except Exception as e:
        return "ERR %r" % (e,)
def run(name, args):
    if name == "fetch":
        return get(args["url"], args.get("method", "GET"))
    if name == "tunnel":
        proxy = os.environ["http_proxy"].split("//")[1]
        host, port = proxy.split(":")
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (args["authority"], args["authority"])).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = s.recv(4096)
            if not chunk:
                break
            head += chunk
        status = head.split(b"\r\n")[0].decode()
        if " 200 " not in status + " ":
            return status + " | " + head.split(b"\r\n\r\n", 1)[-1].decode()
        s.sendall(args["request"].encode())
        inside = s.recv(4096).split(b"\r\n")[0].decode()
        return status + " | " + inside
    if name == "direct":
        try:
            socket.create_connection(("127.0.0.1", args["port"]), timeout=2)
            return "connected"
        except OSError as e:
            return "refused: %s" % e.strerror
    if name == "dns":
        try:
            return "resolved %s" % socket.getaddrinfo(args["name"], 443)[0][4][0]
        except OSError as e:
            return "no lookup: %s" % e
    if name == "later":
        def go():
            time.sleep(args["ms"] / 1000)
            later["result"] = get(args["url"])
        threading.Thread(target=go, daemon=True).start()
        return "started"
    if name == "result":
        return later["result"]
    return "unknown"
for line in sys.stdin:
    request = json.loads(line)
    rid, method = request.get("id"), request.get("method")
    if rid is None:
        continue
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "net", "version": "1"}}
    elif method == "tools/call":
        text = run(request["params"]["name"], request["params"].get("arguments", {}))
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = {}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
    sys.stdout.flush()
"#;

/// The adapter's grants: the `/api` prefix of `upstream` with a credential, and all of
/// `whole` for tunnels (`https`, since a client tunnels what it would send with TLS). The
/// server is granted a third port of nothing.
fn grants(upstream: &Upstream, whole: &Upstream) -> EgressConfig {
    let text = format!(
        r#"
        [[grant]]
        adapter = "t"
        url = "http://127.0.0.1:{port}/api"
        methods = ["GET", "POST"]
        allow_private = ["127.0.0.0/8"]
        credentials = {{ api_token = {{ file = {token:?}, scheme = "Bearer" }} }}
        [[grant]]
        adapter = "t"
        url = "https://127.0.0.1:{whole}/"
        methods = ["GET"]
        allow_private = ["127.0.0.0/8"]
        "#,
        port = upstream.port,
        whole = whole.port,
        token = token_file().display().to_string(),
    );
    toml::from_str(&text).unwrap()
}

struct Served {
    _dir: tempfile::TempDir,
    grants: Arc<Grants>,
}

/// The server, with the egress proxy of `config`'s grants when `network`.
fn served(config: &EgressConfig, network: bool) -> Served {
    let (dir, launch) = crate::stdio::tests::python_server(SERVER, 61_002);
    let requested = vec![
        EgressRequest {
            url: "http://*:*".parse().unwrap(),
            methods: ["GET", "POST"].map(|m| m.parse().unwrap()).into(),
            credentials: vec!["api_token".to_owned()],
        },
        EgressRequest {
            url: "https://*:*".parse().unwrap(),
            methods: ["GET"].map(|m| m.parse().unwrap()).into(),
            credentials: Vec::new(),
        },
    ];
    let mut grants = Grants::for_adapter(config, &TlsClient::default(), "t", &requested).unwrap();
    let supervision = Supervision {
        max_in_flight: 4,
        max_message_bytes: 64 * 1024,
        idle_stop: None,
        pool: 1,
    };
    grants.stdio = Some(StdioServer::new("t", launch, supervision));
    let grants = Arc::new(grants);
    if network {
        grants
            .stdio
            .as_ref()
            .unwrap()
            .set_network(super::network(&grants));
    }
    Served { _dir: dir, grants }
}

/// Calls `tool` through the gate (`stdio://t`, as the adapter does), in a call of `mode`;
/// returns the tool's text and the call's egress record.
async fn call(
    served: &Served,
    mode: ApprovalMode,
    tool: &str,
    args: Value,
) -> (String, Vec<EgressAttempt>) {
    let gate = EgressGate::new(
        Arc::clone(&served.grants),
        CallInfo::new(mode, "4bf92f3577b34da6a3ce929d0e0e4736", None),
    );
    let message = json!({
        "jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": { "name": tool, "arguments": args },
    });
    let response = gate
        .fetch(
            Request::post("stdio://t")
                .body(Bytes::from(message.to_string()))
                .unwrap(),
        )
        .await
        .unwrap();
    let answer: Value = serde_json::from_slice(response.body()).unwrap();
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned();
    (text, gate.take_attempts())
}

#[tokio::test]
async fn a_stdio_servers_only_way_out_is_the_gate() {
    let upstream = Upstream::start().await;
    let whole = Upstream::start().await;
    let other = Upstream::start().await;
    let served = served(&grants(&upstream, &whole), true);

    // A granted fetch reaches the upstream with the credential the gate injects, which the
    // server never held; the request is on the call's record.
    let url = upstream.url("/api/items");
    let (text, record) = call(
        &served,
        ApprovalMode::ReadOnly,
        "fetch",
        json!({ "url": url }),
    )
    .await;
    assert_eq!(text, r#"200 - {"ok":true}"#);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].path, "/api/items");
    assert_eq!(
        seen[0].headers["authorization"],
        format!("Bearer {TOKEN}").as_str()
    );
    let fetched: Vec<_> = record.iter().filter(|a| a.destination == url).collect();
    assert_eq!(fetched.len(), 1, "{record:?}");
    assert!(fetched[0].allowed && fetched[0].code == "ok" && fetched[0].status == Some(200));

    // Another loopback port: refused with the gate's reason, recorded; nothing reached it.
    let (text, record) = call(
        &served,
        ApprovalMode::ReadOnly,
        "fetch",
        json!({ "url": other.url("/api/items") }),
    )
    .await;
    assert!(
        text.starts_with("403 no_matching_grant no egress grant for this adapter covers"),
        "{text}"
    );
    assert!(
        record
            .iter()
            .any(|a| a.code == "no_matching_grant" && !a.allowed)
    );
    // A path outside the grant; a write in a read-only call, and then in a `network` one.
    let (text, _) = call(
        &served,
        ApprovalMode::ReadOnly,
        "fetch",
        json!({ "url": upstream.url("/admin") }),
    )
    .await;
    assert!(text.starts_with("403 no_matching_grant"), "{text}");
    let post = json!({ "url": upstream.url("/api/items"), "method": "POST" });
    let (text, _) = call(&served, ApprovalMode::ReadOnly, "fetch", post.clone()).await;
    assert!(
        text.starts_with("403 approval_mode POST can change"),
        "{text}"
    );
    assert_eq!(upstream.seen().len(), 1);
    assert!(other.seen().is_empty());
    let (text, _) = call(&served, ApprovalMode::Network, "fetch", post).await;
    assert_eq!(text, r#"200 - {"ok":true}"#);
    let seen = upstream.seen();
    assert_eq!((seen.len(), seen[1].method.as_str()), (2, "POST"));

    // Without the proxy there is nothing: no route to the host's loopback, no resolver.
    let (text, _) = call(
        &served,
        ApprovalMode::ReadOnly,
        "direct",
        json!({ "port": upstream.port }),
    )
    .await;
    assert!(text.starts_with("refused"), "{text}");
    let (text, _) = call(
        &served,
        ApprovalMode::ReadOnly,
        "dns",
        json!({ "name": "example.com" }),
    )
    .await;
    assert!(text.starts_with("no lookup"), "{text}");
    assert_eq!(upstream.seen().len(), 2);

    // A tunnel needs a grant of the whole host: `/api` alone does not open one.
    let (text, record) = call(
        &served,
        ApprovalMode::ReadOnly,
        "tunnel",
        json!({ "authority": format!("127.0.0.1:{}", upstream.port), "request": "" }),
    )
    .await;
    assert!(
        text.starts_with("HTTP/1.1 403 Forbidden | no egress grant"),
        "{text}"
    );
    assert!(
        record
            .iter()
            .any(|a| a.method == "CONNECT" && a.code == "tunnel_not_granted")
    );
    // The whole host: the tunnel opens, and what goes inside is the server's own (no
    // credential is injected into it).
    let inside = format!(
        "GET /inside HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
        whole.port
    );
    let (text, record) = call(
        &served,
        ApprovalMode::ReadOnly,
        "tunnel",
        json!({ "authority": format!("127.0.0.1:{}", whole.port), "request": inside }),
    )
    .await;
    assert_eq!(text, "HTTP/1.1 200 OK | HTTP/1.1 200 OK", "{record:?}");
    let seen = whole.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/inside");
    assert!(!seen[0].headers.contains_key("authorization"));
    assert!(
        record
            .iter()
            .any(|a| a.method == "CONNECT" && a.allowed && a.code == "ok")
    );

    // A request the server sends when it serves no call is charged to none, so refused.
    let (text, _) = call(
        &served,
        ApprovalMode::ReadOnly,
        "later",
        json!({ "url": upstream.url("/api/later"), "ms": 300 }),
    )
    .await;
    assert_eq!(text, "started");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (text, _) = call(&served, ApprovalMode::ReadOnly, "result", json!({})).await;
    assert!(
        text.starts_with("403 no_call the server is serving no call"),
        "{text}"
    );
    assert_eq!(upstream.seen().len(), 2);
}

/// A server the loader gives no network (its adapter's grant names no destination) has no
/// proxy and no way out at all.
#[tokio::test]
async fn without_the_network_there_is_no_proxy() {
    let upstream = Upstream::start().await;
    let served = served(&grants(&upstream, &upstream), false);
    let (text, record) = call(
        &served,
        ApprovalMode::ReadOnly,
        "fetch",
        json!({ "url": upstream.url("/api/items") }),
    )
    .await;
    assert!(text.starts_with("ERR"), "{text}");
    assert!(upstream.seen().is_empty());
    assert_eq!(
        record.len(),
        1,
        "only the call to the server itself: {record:?}"
    );
}

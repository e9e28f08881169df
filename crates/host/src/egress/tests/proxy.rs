//! A stdio server's egress proxy, end to end: a real server process in the real sandbox
//! (bubblewrap, which `.ci/run` installs), its requests through the proxy in its network
//! namespace, judged by the gate against loopback upstreams that record what reached them.

use serde_json::{Value, json};

use super::*;
use crate::stdio::{Isolate, StdioServer, Supervision};

/// A stdio MCP server whose tools try the network from inside the sandbox, each call on a
/// thread of its own:
/// - `fetch {url, method}`: a GET (or a POST) through the proxy the environment names (Python's urllib reads
///   `http_proxy`); answers `STATUS CODE BODY`, where CODE is the proxy's
///   `x-gatehouse-denial` or `-`;
/// - `tunnel {authority, request}`: `CONNECT` to the proxy, then `request` sent raw inside
///   the tunnel; answers the CONNECT status line and the first line inside;
/// - `direct {port}`: a TCP connection to 127.0.0.1:port without the proxy;
/// - `dns {name}`: a lookup;
/// - `later {url, ms}`: the same GET as `fetch`, `ms` after the call has been answered;
///   `result` answers what it got;
/// - `hold {ms}`: answers after `ms` (a call in flight meanwhile);
/// - `instance`: a name this process drew at its start;
/// - `fds`: the descriptors it holds, each with what it is (`/proc/self/fd`, less the
///   listing's own); the host's tests (`host/tests.rs`) read it beside a wasmtime engine.
const SERVER: &str = r#"
import json, os, socket, sys, threading, time, urllib.request, urllib.error
lock = threading.Lock()
INSTANCE = os.urandom(6).hex()
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
    if name == "hold":
        time.sleep(args["ms"] / 1000)
        return "held"
    if name == "instance":
        return INSTANCE
    if name == "fds":
        held = {}
        for fd in os.listdir("/proc/self/fd"):
            try:
                held[fd] = os.readlink("/proc/self/fd/" + fd)
            except OSError:
                pass
        return json.dumps(held, sort_keys=True)
    return "unknown"
def answer(request):
    rid, method = request.get("id"), request.get("method")
    if method == "initialize":
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "net", "version": "1"}}
    elif method == "tools/call":
        text = run(request["params"]["name"], request["params"].get("arguments", {}))
        result = {"content": [{"type": "text", "text": text}]}
    else:
        result = {}
    with lock:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": rid, "result": result}) + "\n")
        sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    if request.get("id") is None:
        continue
    threading.Thread(target=answer, args=(request,), daemon=True).start()
"#;

/// The adapter's grants: the `/api` prefix of `upstream` with a credential; all of `whole`
/// with GET only, and all of `every` with every method (`https`, since a client tunnels what
/// it would send with TLS). The server is granted a further port of nothing. A call's time
/// budget is 30 s, not the default 4 s: it includes starting the sandboxed server, which on
/// two cores busy with the rest of the suite has taken longer than 4 s.
pub(crate) fn grants(upstream: &Upstream, whole: &Upstream, every: &Upstream) -> EgressConfig {
    let text = format!(
        r#"
        max_total_ms = 30000
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
        [[grant]]
        adapter = "t"
        url = "https://127.0.0.1:{every}/"
        methods = {methods:?}
        allow_private = ["127.0.0.0/8"]
        "#,
        port = upstream.port,
        whole = whole.port,
        every = every.port,
        methods = TUNNEL_METHODS,
        token = token_file().display().to_string(),
    );
    toml::from_str(&text).unwrap()
}

pub(crate) struct Served {
    _dir: tempfile::TempDir,
    grants: Arc<Grants>,
}

/// The server, with the egress proxy of `config`'s grants when `network`: one process.
pub(crate) fn served(config: &EgressConfig, network: bool) -> Served {
    served_in(config, network, 1, Isolate::Shared)
}

/// The server, with the egress proxy of `config`'s grants when `network`, a pool of `pool`
/// processes, and `isolate`.
fn served_in(config: &EgressConfig, network: bool, pool: u32, isolate: Isolate) -> Served {
    let (dir, launch) = crate::stdio::tests::python_server(SERVER, 61_002);
    let requested = vec![
        EgressRequest {
            url: "http://*:*".parse().unwrap(),
            methods: ["GET", "POST"].map(|m| m.parse().unwrap()).into(),
            credentials: vec!["api_token".to_owned()],
        },
        EgressRequest {
            url: "https://*:*".parse().unwrap(),
            methods: TUNNEL_METHODS.map(|m| m.parse().unwrap()).into(),
            credentials: Vec::new(),
        },
    ];
    let mut grants = Grants::for_adapter(config, &TlsClient::default(), "t", &requested).unwrap();
    let supervision = Supervision {
        max_in_flight: 4,
        max_message_bytes: 64 * 1024,
        idle_stop: None,
        pool,
        isolate,
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

/// The trace id of every call of these tests.
const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";

/// Calls `tool` through the gate (`stdio://t`, as the adapter does), in a call of `mode` for
/// no tenant; returns the tool's text and the call's egress record.
pub(crate) async fn call(
    served: &Served,
    mode: ApprovalMode,
    tool: &str,
    args: Value,
) -> (String, Vec<EgressAttempt>) {
    call_for(served, "", mode, tool, args).await
}

/// Calls `tool` through the gate in a call of `tenant` at `mode`.
async fn call_for(
    served: &Served,
    tenant: &str,
    mode: ApprovalMode,
    tool: &str,
    args: Value,
) -> (String, Vec<EgressAttempt>) {
    call_as(
        Arc::clone(&served.grants),
        CallInfo::new(mode, TRACE, None).for_tenant(tenant),
        tool,
        args,
    )
    .await
}

/// A call of `tenant` at `mode` that holds the server for 2 s, on a task of its own: in flight
/// once this returns.
async fn holding(
    served: &Served,
    tenant: &str,
    mode: ApprovalMode,
) -> tokio::task::JoinHandle<(String, Vec<EgressAttempt>)> {
    let grants = Arc::clone(&served.grants);
    let info = CallInfo::new(mode, TRACE, None).for_tenant(tenant);
    let held = tokio::spawn(call_as(grants, info, "hold", json!({ "ms": 2000 })));
    tokio::time::sleep(Duration::from_millis(500)).await;
    held
}

/// The name the process serving `tenant` drew at its start.
async fn instance(served: &Served, tenant: &str) -> String {
    let info = CallInfo::new(ApprovalMode::ReadOnly, TRACE, None).for_tenant(tenant);
    call_as(Arc::clone(&served.grants), info, "instance", json!({}))
        .await
        .0
}

/// Calls `tool` through the gate in a call of `info`: the tool's text and the call's record.
async fn call_as(
    grants: Arc<Grants>,
    info: CallInfo,
    tool: &str,
    args: Value,
) -> (String, Vec<EgressAttempt>) {
    let gate = EgressGate::new(grants, info);
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
    let answer: Value = serde_json::from_slice(response.body()).unwrap_or_else(|error| {
        panic!(
            "{error}: {} {}",
            response.status(),
            String::from_utf8_lossy(response.body())
        )
    });
    let text = answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{answer}"))
        .to_owned();
    (text, gate.take_attempts())
}

/// The attempts of `record` to reach `destination` (the call to the server itself left out).
fn to<'a>(record: &'a [EgressAttempt], destination: &str) -> Vec<&'a EgressAttempt> {
    record
        .iter()
        .filter(|a| a.destination == destination)
        .collect()
}

#[tokio::test]
async fn a_stdio_servers_only_way_out_is_the_gate() {
    let upstream = Upstream::start().await;
    let whole = Upstream::start().await;
    let other = Upstream::start().await;
    let served = served(&grants(&upstream, &whole, &whole), true);

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
    let served = served(&grants(&upstream, &upstream, &upstream), false);
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

/// The request of a tunnel: `method` to `/inside` of `upstream`, with an empty JSON body for a
/// POST.
fn inside(method: &str, upstream: &Upstream) -> String {
    let body = if method == "POST" { "{}" } else { "" };
    format!(
        "{method} /inside HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        upstream.port,
        body.len()
    )
}

/// A tunnel carries any method unseen: it opens only on a grant of the whole host with every
/// method, in a call whose approval mode allows writes. A POST sent inside a tunnel during a
/// `read_only` call, on a grant of GET alone, never reaches the upstream.
#[tokio::test]
async fn a_tunnel_opens_only_for_every_method_and_a_call_that_may_write() {
    let upstream = Upstream::start().await;
    let whole = Upstream::start().await;
    let every = Upstream::start().await;
    let served = served(&grants(&upstream, &whole, &every), true);
    let tunnel = |to: &Upstream, method: &str| json!({ "authority": format!("127.0.0.1:{}", to.port), "request": inside(method, to) });

    // A grant of the whole host with GET only: no tunnel, in a read-only call or a writing
    // one; every method, but a read-only call: no tunnel either.
    let get_only = format!(
        "HTTP/1.1 403 Forbidden | no egress grant for this adapter gives all of \
         https://127.0.0.1:{}/ with every method (GET, HEAD, OPTIONS, POST, PUT, PATCH, \
         DELETE), which a tunnel (CONNECT) can carry unseen: grant the whole host with those \
         methods in `[[egress.grant]]`, or have the server send plain http through the proxy",
        whole.port
    );
    let read_only = "HTTP/1.1 403 Forbidden | a tunnel (CONNECT) can carry any method unseen, \
                     and a `read_only` call may only use GET, HEAD and OPTIONS: the server \
                     reaches https destinations only in calls whose approval mode allows \
                     writes (`network` or above), or sends plain http through the proxy";
    let refused = [
        (
            &whole,
            ApprovalMode::ReadOnly,
            get_only.as_str(),
            "tunnel_not_granted",
        ),
        (
            &whole,
            ApprovalMode::Network,
            &get_only,
            "tunnel_not_granted",
        ),
        (&every, ApprovalMode::ReadOnly, read_only, "approval_mode"),
    ];
    for (to, mode, answer, code) in refused {
        let (text, record) = call(&served, mode, "tunnel", tunnel(to, "POST")).await;
        assert_eq!(text, answer, "{mode}");
        let connects: Vec<_> = record.iter().filter(|a| a.method == "CONNECT").collect();
        assert_eq!(connects.len(), 1, "{record:?}");
        assert_eq!(
            (connects[0].allowed, connects[0].code.as_str()),
            (false, code)
        );
        assert!(to.seen().is_empty(), "{mode}: {:?}", to.seen());
    }

    // Every method and a `network` call: the tunnel opens, and what goes inside is the
    // server's own, any method (no credential is injected into it).
    let (text, record) = call(
        &served,
        ApprovalMode::Network,
        "tunnel",
        tunnel(&every, "POST"),
    )
    .await;
    assert_eq!(text, "HTTP/1.1 200 OK | HTTP/1.1 200 OK", "{record:?}");
    let seen = every.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("POST", "/inside")
    );
    assert!(!seen[0].headers.contains_key("authorization"));
    assert!(
        record
            .iter()
            .any(|a| a.method == "CONNECT" && a.allowed && a.code == "ok")
    );
    assert!(whole.seen().is_empty() && upstream.seen().is_empty());
}

/// A request the server sends while its process serves several calls is judged against every
/// one: a read-only call's POST, sent while a `network` call of the same tenant is in flight,
/// is refused, and the refusal is on both calls' records; alone, the `network` call's POST
/// goes out.
#[tokio::test]
async fn a_read_only_calls_write_does_not_go_out_under_another_calls_mode() {
    let upstream = Upstream::start().await;
    let served = served(&grants(&upstream, &upstream, &upstream), true);
    let url = upstream.url("/api/items");
    let post = json!({ "url": url, "method": "POST" });

    let holding = holding(&served, "acme", ApprovalMode::Network).await;
    let (text, record) = call_for(
        &served,
        "acme",
        ApprovalMode::ReadOnly,
        "fetch",
        post.clone(),
    )
    .await;
    assert!(
        text.starts_with("403 approval_mode POST can change upstream state; a `read_only` call"),
        "{text}"
    );
    let (held, held_record) = holding.await.unwrap();
    assert_eq!(held, "held");
    assert!(
        upstream.seen().iter().all(|seen| seen.method != "POST"),
        "the upstream received the POST: {:?}",
        upstream.seen()
    );
    for record in [&record, &held_record] {
        let posted = to(record, &url);
        assert_eq!(posted.len(), 1, "{record:?}");
        assert_eq!(
            (
                posted[0].method.as_str(),
                posted[0].allowed,
                posted[0].code.as_str()
            ),
            ("POST", false, "approval_mode")
        );
    }

    // The `network` call alone: its POST goes out, on its record only.
    let (text, record) = call_for(&served, "acme", ApprovalMode::Network, "fetch", post).await;
    assert_eq!(text, r#"200 - {"ok":true}"#);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, "POST");
    assert_eq!(
        seen[0].headers["traceparent"]
            .to_str()
            .unwrap()
            .split('-')
            .nth(1),
        Some(TRACE)
    );
    assert_eq!(to(&record, &url).len(), 1);
}

/// A process serving calls of two tenants charges neither with what it sends: every request
/// is refused and recorded on neither call (the URL may be the other tenant's).
#[tokio::test]
async fn a_process_serving_two_tenants_charges_neither_with_its_requests() {
    let upstream = Upstream::start().await;
    let served = served(&grants(&upstream, &upstream, &upstream), true);
    let url = upstream.url("/api/items");

    let holding = holding(&served, "globex", ApprovalMode::Network).await;
    for method in ["POST", "GET"] {
        let (text, record) = call_for(
            &served,
            "acme",
            ApprovalMode::Network,
            "fetch",
            json!({ "url": url, "method": method }),
        )
        .await;
        assert!(
            text.starts_with(
                "403 several_tenants the server's process is serving calls of more than one \
                 tenant, so no one call can be charged with this request; set `isolate = \
                 \"tenant\"`"
            ),
            "{method}: {text}"
        );
        assert!(to(&record, &url).is_empty(), "{record:?}");
    }
    let (_, held_record) = holding.await.unwrap();
    assert!(to(&held_record, &url).is_empty(), "{held_record:?}");
    assert!(upstream.seen().is_empty(), "{:?}", upstream.seen());
}

/// `isolate = "tenant"`: each tenant's calls go to processes of its own, so one tenant's
/// requests are judged against its own calls only, while another tenant's call is in flight.
#[tokio::test]
async fn isolated_by_tenant_each_process_serves_one_tenant() {
    let upstream = Upstream::start().await;
    let served = served_in(
        &grants(&upstream, &upstream, &upstream),
        true,
        2,
        Isolate::Tenant,
    );
    let url = upstream.url("/api/items");
    let globex = instance(&served, "globex").await;

    let holding = holding(&served, "globex", ApprovalMode::ReadOnly).await;
    let acme = instance(&served, "acme").await;
    assert_ne!(acme, globex, "a process of its own");
    // Judged against acme's own call alone: the `network` call's POST goes out, the
    // `read_only` one's does not, whatever globex's call may do.
    let post = json!({ "url": url, "method": "POST" });
    let (text, record) = call_for(
        &served,
        "acme",
        ApprovalMode::Network,
        "fetch",
        post.clone(),
    )
    .await;
    assert_eq!(text, r#"200 - {"ok":true}"#);
    assert_eq!(to(&record, &url).len(), 1);
    let (text, _) = call_for(&served, "acme", ApprovalMode::ReadOnly, "fetch", post).await;
    assert!(text.starts_with("403 approval_mode"), "{text}");
    let (_, held_record) = holding.await.unwrap();
    assert!(to(&held_record, &url).is_empty(), "{held_record:?}");
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(instance(&served, "globex").await, globex);
}

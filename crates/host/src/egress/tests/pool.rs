//! Kept-alive connections, driven through the gate against a loopback upstream written on raw
//! TCP, so each test decides exactly when the upstream answers, stays silent or closes, and
//! counts the connections it accepted.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// How the raw upstream treats the requests of each connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Script {
    /// Answers every request `200 ok` and keeps the connection open.
    KeepAlive,
    /// Answers the first request, then closes the connection (no `Connection: close`).
    CloseAfterFirst,
    /// Answers the first request; reads the second to its end, then closes without answering.
    DropSecond,
}

/// One request the raw upstream read: on which connection (0-based, in accept order), the
/// method, and the `authorization` header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RawSeen {
    conn: usize,
    method: String,
    authorization: String,
}

struct RawUpstream {
    port: u16,
    accepted: Arc<AtomicUsize>,
    closed_by_client: Arc<AtomicUsize>,
    closed_by_server: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<RawSeen>>>,
}

impl RawUpstream {
    async fn start(script: Script) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let accepted = Arc::new(AtomicUsize::new(0));
        let closed_by_client = Arc::new(AtomicUsize::new(0));
        let closed_by_server = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count, closed, shut, record) = (
            Arc::clone(&accepted),
            Arc::clone(&closed_by_client),
            Arc::clone(&closed_by_server),
            Arc::clone(&seen),
        );
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let conn = count.fetch_add(1, Ordering::SeqCst);
                let (closed, shut, record) =
                    (Arc::clone(&closed), Arc::clone(&shut), Arc::clone(&record));
                tokio::spawn(serve(stream, conn, script, closed, shut, record));
            }
        });
        Self {
            port,
            accepted,
            closed_by_client,
            closed_by_server,
            seen,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn closed_by_client(&self) -> usize {
        self.closed_by_client.load(Ordering::SeqCst)
    }

    fn closed_by_server(&self) -> usize {
        self.closed_by_server.load(Ordering::SeqCst)
    }

    fn seen(&self) -> Vec<RawSeen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Serves one connection by `script`: reads each request head (and its `content-length`
/// body), records it, and answers or closes.
async fn serve(
    mut stream: tokio::net::TcpStream,
    conn: usize,
    script: Script,
    closed: Arc<AtomicUsize>,
    closed_by_server: Arc<AtomicUsize>,
    record: Arc<Mutex<Vec<RawSeen>>>,
) {
    let mut buf = Vec::new();
    let mut served = 0;
    loop {
        let head_end = loop {
            if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break end + 4;
            }
            let mut chunk = [0; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => {
                    closed.fetch_add(1, Ordering::SeqCst);
                    return;
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let header = |name: &str| {
            head.lines()
                .find_map(|line| {
                    let (key, value) = line.split_once(':')?;
                    key.eq_ignore_ascii_case(name)
                        .then(|| value.trim().to_owned())
                })
                .unwrap_or_default()
        };
        let length: usize = header("content-length").parse().unwrap_or(0);
        while buf.len() < head_end + length {
            let mut chunk = [0; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + length);
        record.lock().unwrap().push(RawSeen {
            conn,
            method: head.split(' ').next().unwrap_or_default().to_owned(),
            authorization: header("authorization"),
        });
        served += 1;
        if script == Script::DropSecond && served == 2 {
            return;
        }
        let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
        if stream.write_all(answer).await.is_err() {
            return;
        }
        if script == Script::CloseAfterFirst {
            closed_by_server.fetch_add(1, Ordering::SeqCst);
            return;
        }
    }
}

/// The files holding tokens `a` and `b`, written once for the whole test process: tests run
/// in parallel, and rewriting a file another test is reading lets it see the file empty.
fn token_files() -> (&'static std::path::Path, &'static std::path::Path) {
    static FILES: std::sync::OnceLock<(std::path::PathBuf, std::path::PathBuf)> =
        std::sync::OnceLock::new();
    let (a, b) = FILES.get_or_init(|| {
        let dir = token_file().parent().unwrap();
        let (a, b) = (dir.join("a"), dir.join("b"));
        std::fs::write(&a, "token-a").unwrap();
        std::fs::write(&b, "token-b").unwrap();
        (a, b)
    });
    (a, b)
}

/// An adapter `t` granted GET, POST and DELETE on `/a/` with token `a`, and on `/b/` with
/// token `b`, of the raw upstream; `extra` is appended to `[egress]`.
fn pool_config(upstream: &RawUpstream, extra: &str) -> EgressConfig {
    let (a, b) = token_files();
    let text = format!(
        r#"
        {extra}
        [[grant]]
        adapter = "t"
        url = "http://127.0.0.1:{port}/a/"
        methods = ["GET", "POST", "DELETE"]
        allow_private = ["127.0.0.0/8"]
        credentials = {{ api_token = {{ file = {a:?} }} }}
        [[grant]]
        adapter = "t"
        url = "http://127.0.0.1:{port}/b/"
        methods = ["GET", "POST", "DELETE"]
        allow_private = ["127.0.0.0/8"]
        credentials = {{ api_token = {{ file = {b:?} }} }}
        "#,
        port = upstream.port,
    );
    toml::from_str(&text).unwrap()
}

/// Grants for `config`. One `TlsClient` (one pool) per test, as one per host.
fn pool_grants(config: &EgressConfig, tls: &TlsClient) -> Arc<Grants> {
    Arc::new(Grants::for_adapter(config, tls, "t", &requested()).unwrap())
}

/// One request through a fresh gate (one per call, as the host does); returns the status and
/// the body read to the end, or the error and the attempt's code.
async fn call(grants: &Arc<Grants>, method: &str, url: &str) -> Result<(u16, Bytes), String> {
    let gate = EgressGate::new(
        Arc::clone(grants),
        CallInfo::new(
            ApprovalMode::Network,
            "4bf92f3577b34da6a3ce929d0e0e4736",
            None,
        ),
    );
    match gate.send_plain(request(method, url, &[], b"")).await {
        Ok(response) => {
            let status = response.status().as_u16();
            let body = response.into_body().collect().await.unwrap().to_bytes();
            Ok((status, body))
        }
        Err(error) => Err(format!("{error:?} {}", gate.take_attempts()[0].code)),
    }
}

/// Waits until `done` holds, for at most two seconds.
async fn eventually(what: &str, done: impl Fn() -> bool) {
    for _ in 0..200 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("timed out waiting for {what}");
}

#[tokio::test]
async fn sequential_calls_reuse_one_connection() {
    let upstream = RawUpstream::start(Script::KeepAlive).await;
    let config = pool_config(&upstream, "");
    let grants = pool_grants(&config, &TlsClient::from_config(&config).unwrap());
    for _ in 0..5 {
        let answer = call(&grants, "GET", &upstream.url("/a/x")).await;
        assert_eq!(answer, Ok((200, Bytes::from_static(b"ok"))));
    }
    assert_eq!(upstream.accepted(), 1);
    assert_eq!(upstream.seen().len(), 5);
    assert!(upstream.seen().iter().all(|s| s.conn == 0));
}

#[tokio::test]
async fn pool_off_opens_a_connection_per_request() {
    let upstream = RawUpstream::start(Script::KeepAlive).await;
    let config = pool_config(&upstream, "max_idle_connections_per_destination = 0");
    let grants = pool_grants(&config, &TlsClient::from_config(&config).unwrap());
    for _ in 0..3 {
        let answer = call(&grants, "GET", &upstream.url("/a/x")).await;
        assert_eq!(answer, Ok((200, Bytes::from_static(b"ok"))));
    }
    assert_eq!(upstream.accepted(), 3);
}

#[tokio::test]
async fn grants_with_different_credentials_never_share_a_connection() {
    let upstream = RawUpstream::start(Script::KeepAlive).await;
    let config = pool_config(&upstream, "");
    let tls = TlsClient::from_config(&config).unwrap();
    let grants = pool_grants(&config, &tls);
    // The same config loaded again (another adapter load): same credentials, other grants.
    let reloaded = pool_grants(&config, &tls);
    for _ in 0..3 {
        for path in ["/a/x", "/b/x"] {
            let answer = call(&grants, "GET", &upstream.url(path)).await;
            assert_eq!(answer, Ok((200, Bytes::from_static(b"ok"))));
        }
    }
    let answer = call(&reloaded, "GET", &upstream.url("/a/x")).await;
    assert_eq!(answer, Ok((200, Bytes::from_static(b"ok"))));
    // One connection per rule, one more for the other load.
    assert_eq!(upstream.accepted(), 3);
    let seen = upstream.seen();
    assert_eq!(seen.len(), 7);
    for conn in 0..3 {
        let tokens: std::collections::BTreeSet<&str> = seen
            .iter()
            .filter(|s| s.conn == conn)
            .map(|s| s.authorization.as_str())
            .collect();
        assert_eq!(tokens.len(), 1, "connection {conn} carried {tokens:?}");
    }
    let on_reloaded = seen.last().unwrap();
    assert_eq!(on_reloaded.authorization, "token-a");
    assert!(
        seen[..6].iter().all(|s| s.conn != on_reloaded.conn),
        "the reloaded grants rode an old connection: {seen:?}"
    );
}

#[tokio::test]
async fn a_connection_the_upstream_closed_is_not_reused() {
    let upstream = RawUpstream::start(Script::CloseAfterFirst).await;
    let config = pool_config(&upstream, "");
    let grants = pool_grants(&config, &TlsClient::from_config(&config).unwrap());
    for n in 1..=3 {
        let answer = call(&grants, "POST", &upstream.url("/a/x")).await;
        assert_eq!(answer, Ok((200, Bytes::from_static(b"ok"))));
        eventually("the upstream to close", || upstream.closed_by_server() == n).await;
        // Give the client's connection task a moment to read the close, as it would between
        // calls; a close racing the request itself is the next two tests.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(upstream.accepted(), 3);
    let conns: Vec<usize> = upstream.seen().iter().map(|s| s.conn).collect();
    assert_eq!(conns, [0, 1, 2]);
}

#[tokio::test]
async fn a_post_is_never_replayed_on_a_broken_kept_alive_connection() {
    let upstream = RawUpstream::start(Script::DropSecond).await;
    let config = pool_config(&upstream, "");
    let grants = pool_grants(&config, &TlsClient::from_config(&config).unwrap());
    let first = call(&grants, "POST", &upstream.url("/a/x")).await;
    assert_eq!(first, Ok((200, Bytes::from_static(b"ok"))));
    // The upstream reads the second POST on the kept connection and closes without answering:
    // it may have acted on it, so the gate must not send it again.
    let second = call(&grants, "POST", &upstream.url("/a/x")).await;
    let error = second.unwrap_err();
    assert!(error.ends_with(" upstream_error"), "{error}");
    assert_eq!(upstream.accepted(), 1);
    let methods: Vec<(usize, String)> = upstream
        .seen()
        .into_iter()
        .map(|s| (s.conn, s.method))
        .collect();
    assert_eq!(methods, [(0, "POST".to_owned()), (0, "POST".to_owned())]);
}

#[tokio::test]
async fn an_idempotent_request_is_sent_again_on_a_new_connection() {
    let upstream = RawUpstream::start(Script::DropSecond).await;
    let config = pool_config(&upstream, "");
    let grants = pool_grants(&config, &TlsClient::from_config(&config).unwrap());
    let first = call(&grants, "GET", &upstream.url("/a/x")).await;
    assert_eq!(first, Ok((200, Bytes::from_static(b"ok"))));
    let second = call(&grants, "DELETE", &upstream.url("/a/x")).await;
    assert_eq!(second, Ok((200, Bytes::from_static(b"ok"))));
    assert_eq!(upstream.accepted(), 2);
    let methods: Vec<(usize, String)> = upstream
        .seen()
        .into_iter()
        .map(|s| (s.conn, s.method))
        .collect();
    assert_eq!(
        methods,
        [
            (0, "GET".to_owned()),
            (0, "DELETE".to_owned()),
            (1, "DELETE".to_owned())
        ]
    );
}

#[tokio::test]
async fn an_idle_connection_is_closed_after_the_idle_timeout() {
    let upstream = RawUpstream::start(Script::KeepAlive).await;
    let config = pool_config(&upstream, "idle_connection_timeout_ms = 300");
    let grants = pool_grants(&config, &TlsClient::from_config(&config).unwrap());
    let answer = call(&grants, "GET", &upstream.url("/a/x")).await;
    assert_eq!(answer, Ok((200, Bytes::from_static(b"ok"))));
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(upstream.closed_by_client(), 0, "closed before the timeout");
    eventually("the idle connection to close", || {
        upstream.closed_by_client() == 1
    })
    .await;
    let answer = call(&grants, "GET", &upstream.url("/a/x")).await;
    assert_eq!(answer, Ok((200, Bytes::from_static(b"ok"))));
    assert_eq!(upstream.accepted(), 2);
}

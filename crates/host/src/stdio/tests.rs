//! The supervisor against a real process in the real sandbox: a small stdio MCP server in
//! Python whose tools misbehave on request. Needs bubblewrap (`.ci/run` installs it).

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::sandbox::{Launch, Limits};
use super::server::PING_TIMEOUT;
use super::*;

/// Answers each `tools/call` on a thread of its own, by tool name: `echo`, `sleep` (for
/// `ms`), `whoami` (after `ms`, a name this process drew at its start), `crash` (exits 3),
/// `hang` (stops reading and answering), `ignore` (never answers this request, answers the
/// rest), `flood` (a megabyte without a newline), `shout` (200 stderr lines), `shared`
/// (maps `mib` MiB of shared memory, touches it and keeps it), `fill` (writes `mib` MiB to a
/// file at `path`, or a `memfd` for `path = "memfd"`, a MiB at a time, and keeps it), `ask`
/// (tells its progress, for the request's token, and a log line, then asks its client for a
/// sampling and answers with what it got back), `offered` (the client capabilities its
/// `initialize` declared), `notes` (the notifications it was sent).
const SERVER: &str = r#"
import json, mmap, os, sys, threading, time
lock = threading.Lock()
INSTANCE = os.urandom(6).hex()
KEPT = []
ANSWERS = {}
ANSWERED = threading.Condition()
OFFERED = {}
NOTES = []
def shared(mib):
    try:
        m = mmap.mmap(-1, mib << 20, flags=mmap.MAP_SHARED)
    except OSError as e:
        return "refused: %s" % e.strerror
    for at in range(0, mib << 20, 4096):
        m[at] = 1
    KEPT.append(m)
    return "held %d MiB" % mib
def fill(path, mib):
    try:
        fd = os.memfd_create("hoard") if path == "memfd" else os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as e:
        return "refused: %s" % e.strerror
    KEPT.append(fd)
    chunk = b"x" * (1 << 20)
    for written in range(mib):
        try:
            os.write(fd, chunk)
        except OSError as e:
            return "refused after %d MiB: %s" % (written, e.strerror)
    return "wrote %d MiB" % mib
def send(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
def answer(request):
    rid, method = request.get("id"), request.get("method")
    if method == "initialize":
        OFFERED.update(request["params"].get("capabilities", {}))
        return send({"jsonrpc": "2.0", "id": rid, "result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}}, "serverInfo": {"name": "fake", "version": "1"}}})
    if method == "ping":
        return send({"jsonrpc": "2.0", "id": rid, "result": {}})
    if method != "tools/call":
        return send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}})
    name, args = request["params"]["name"], request["params"].get("arguments", {})
    if name == "sleep":
        time.sleep(args["ms"] / 1000)
    elif name == "whoami":
        time.sleep(args["ms"] / 1000)
        return send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": INSTANCE}]}})
    elif name == "crash":
        os._exit(3)
    elif name == "ignore":
        return
    elif name == "flood":
        with lock:
            sys.stdout.write("x" * (1 << 20))
            sys.stdout.flush()
        return
    elif name == "shared":
        return send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": shared(args["mib"])}]}})
    elif name == "fill":
        return send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": fill(args["path"], args["mib"])}]}})
    elif name == "notes":
        return send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps(NOTES)}]}})
    elif name == "offered":
        return send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps(OFFERED, sort_keys=True)}]}})
    elif name == "ask":
        token = request["params"].get("_meta", {}).get("progressToken")
        if token is not None:
            send({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": 1, "total": 2}})
        send({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "asking"}})
        asked = "s-%s" % rid
        send({"jsonrpc": "2.0", "id": asked, "method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}})
        with ANSWERED:
            ANSWERED.wait_for(lambda: asked in ANSWERS, timeout=10)
            got = ANSWERS.pop(asked, None)
        return send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": json.dumps(got, sort_keys=True)}]}})
    elif name == "shout":
        for i in range(200):
            sys.stderr.write("line %d\n" % i)
        sys.stderr.flush()
    send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": "%s %s" % (name, json.dumps(args, sort_keys=True))}]}})
for line in sys.stdin:
    request = json.loads(line)
    if "id" not in request:
        NOTES.append(request)
        continue
    if "method" not in request:
        with ANSWERED:
            ANSWERS[request["id"]] = request
            ANSWERED.notify_all()
        continue
    if request.get("method") == "tools/call" and request["params"]["name"] == "hang":
        time.sleep(3600)
    threading.Thread(target=answer, args=(request,), daemon=True).start()
"#;

struct Fake {
    _dir: tempfile::TempDir,
    launch: Launch,
}

fn fake() -> Fake {
    let (dir, launch) = python_server(SERVER, 61_001);
    Fake { _dir: dir, launch }
}

/// A stdio server written in Python (`script`, run by the system's Python) in a directory of
/// its own the sandbox shows, run as `run_as` under a root gateway: the directory (keep it)
/// and the launch.
pub(crate) fn python_server(script: &str, run_as: u32) -> (tempfile::TempDir, Launch) {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = dir.path().join("server.py");
    std::fs::write(&path, script).unwrap();
    let launch = Launch {
        program: PathBuf::from("/usr/bin/python3"),
        args: vec![path.display().to_string()],
        env: Vec::new(),
        package_dir: Some(dir.path().to_owned()),
        pin: None,
        dirs: Vec::new(),
        limits: Limits {
            memory_bytes: 512 << 20,
            cpu_seconds: 60,
            processes: 64,
            open_files: 64,
        },
        run_as,
        bwrap: PathBuf::from("bwrap"),
        bare: false,
    };
    (dir, launch)
}

fn supervision() -> Supervision {
    Supervision {
        max_in_flight: 16,
        max_message_bytes: 64 * 1024,
        idle_stop: None,
        pool: 1,
        isolate: Isolate::Shared,
    }
}

/// A server of a pool of `pool` processes, each serving one tenant.
fn isolated(fake: &Fake, pool: u32) -> StdioServer {
    StdioServer::new(
        "test.isolated",
        fake.launch.clone(),
        Supervision {
            pool,
            isolate: Isolate::Tenant,
            ..supervision()
        },
    )
}

fn soon(ms: u64) -> Instant {
    Instant::now() + Duration::from_millis(ms)
}

async fn call(
    server: &StdioServer,
    tool: &str,
    args: Value,
    ms: u64,
) -> Result<String, StdioError> {
    call_for(server, "", tool, args, ms).await
}

/// [`call`] for a call of `tenant`.
async fn call_for(
    server: &StdioServer,
    tenant: &str,
    tool: &str,
    args: Value,
    ms: u64,
) -> Result<String, StdioError> {
    let until = soon(ms);
    let answer = server
        .process(tenant, until)
        .await?
        .request(
            "tools/call",
            Some(json!({ "name": tool, "arguments": args })),
            &|| until,
            None,
        )
        .await?;
    Ok(answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned())
}

#[tokio::test]
async fn requests_are_multiplexed_on_one_process_by_id() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision());
    assert_eq!(server.status().state, State::Stopped);
    let started = Instant::now();
    let calls = (0..8u64).map(|i| {
        let server = server.clone();
        async move { call(&server, "sleep", json!({ "ms": 400 - i * 40 }), 20_000).await }
    });
    let answers = futures_join(calls).await;
    for (i, answer) in answers.into_iter().enumerate() {
        assert_eq!(
            answer.unwrap(),
            format!("sleep {{\"ms\": {}}}", 400 - i * 40)
        );
    }
    // Eight sleeps of up to 400 ms, answered out of order, took about the longest of them.
    assert!(
        started.elapsed() < Duration::from_millis(400 * 8),
        "{:?}",
        started.elapsed()
    );
    let status = server.status();
    assert_eq!(
        (status.state, status.restarts, status.bare),
        (State::Running, 0, false)
    );
    let initialized = server.process("", soon(1000)).await.unwrap().initialized();
    assert_eq!(initialized["serverInfo"]["name"], "fake");
}

/// A pool keeps one process for one caller at a time, grows only while every process holds a
/// call, and never past its bound.
#[tokio::test]
async fn a_pool_grows_only_while_every_process_is_busy() {
    let fake = fake();
    let server = StdioServer::new(
        "test.pool",
        fake.launch.clone(),
        Supervision {
            pool: 3,
            ..supervision()
        },
    );
    let whoami = |ms: u64| {
        let server = server.clone();
        async move {
            call(&server, "whoami", json!({ "ms": ms }), 20_000)
                .await
                .unwrap()
        }
    };
    let first = whoami(0).await;
    assert_eq!(whoami(0).await, first, "one caller at a time: one process");
    assert_eq!(server.status().pids.len(), 1);

    let three: std::collections::BTreeSet<String> = futures_join((0..3).map(|_| whoami(1500)))
        .await
        .into_iter()
        .collect();
    assert_eq!(three.len(), 3, "three at once: a process each");
    assert!(three.contains(&first));
    let status = server.status();
    assert_eq!((status.state, status.pids.len()), (State::Running, 3));

    let six: std::collections::BTreeSet<String> = futures_join((0..6).map(|_| whoami(300)))
        .await
        .into_iter()
        .collect();
    assert_eq!(six, three, "six at once: still the three");
    server.shutdown().await;
    let status = server.status();
    assert_eq!((status.state, status.pids.len()), (State::ShutDown, 0));
}

#[tokio::test]
async fn a_crash_fails_the_held_calls_retryably_and_the_next_call_restarts_it() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision());
    assert_eq!(
        call(&server, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    let held = {
        let server = server.clone();
        tokio::spawn(async move { call(&server, "sleep", json!({ "ms": 5000 }), 20_000).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    let crash = call(&server, "crash", json!({}), 20_000).await.unwrap_err();
    let held = held.await.unwrap().unwrap_err();
    for error in [&crash, &held] {
        let StdioError::Crashed { reason, .. } = error else {
            panic!("{error:?}");
        };
        assert!(reason.starts_with("it exited (exit status: 3)"), "{reason}");
        assert!(error.retryable());
    }
    assert_eq!(server.status().state, State::Restarting);
    assert_eq!(
        call(&server, "echo", json!({"again": 1}), 20_000)
            .await
            .unwrap(),
        "echo {\"again\": 1}"
    );
    let status = server.status();
    assert_eq!((status.state, status.restarts), (State::Running, 1));
    assert!(status.last_failure.unwrap().contains("exit status: 3"));
}

#[tokio::test]
async fn an_oversized_message_is_refused_and_the_process_restarted() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision());
    let error = call(&server, "flood", json!({}), 20_000).await.unwrap_err();
    let StdioError::Crashed { reason, .. } = &error else {
        panic!("{error:?}");
    };
    assert!(
        reason.starts_with("it wrote a message longer than 65536 bytes"),
        "{reason}"
    );
    assert_eq!(
        call(&server, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    assert_eq!(server.status().restarts, 1);
}

#[tokio::test]
async fn a_hung_process_is_killed_after_a_missed_ping_and_an_ignored_request_is_not() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision());
    // Ignoring one request: that call times out, the ping is answered, nothing restarts.
    let ignored = call(&server, "ignore", json!({}), 300).await.unwrap_err();
    assert_eq!(
        ignored,
        StdioError::Timeout {
            adapter: "test.fake".to_owned()
        }
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        call(&server, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    assert_eq!(server.status().restarts, 0);
    // Hanging: the call times out, the ping is not answered, the process is killed.
    let hung = call(&server, "hang", json!({}), 300).await.unwrap_err();
    assert!(matches!(hung, StdioError::Timeout { .. }), "{hung:?}");
    let waited = Instant::now();
    while server.status().state != State::Restarting {
        assert!(waited.elapsed() < PING_TIMEOUT * 3, "{:?}", server.status());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        server.status().last_failure.unwrap().starts_with(
            "it did not answer a ping within 5000 ms after a request timed out (hung)"
        )
    );
    assert_eq!(
        call(&server, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    assert_eq!(server.status().restarts, 1);
}

/// A caller that goes away before the request's deadline (as a call whose sandbox ran out of
/// time does) leaves a hung process checked and restarted all the same.
#[tokio::test]
async fn a_hung_process_is_restarted_when_its_caller_goes_away() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision());
    let abandoned = tokio::time::timeout(
        Duration::from_millis(300),
        call(&server, "hang", json!({}), 60_000),
    )
    .await;
    assert!(abandoned.is_err(), "the caller gave up first");
    let waited = Instant::now();
    while server.status().state != State::Restarting {
        assert!(waited.elapsed() < PING_TIMEOUT * 3, "{:?}", server.status());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        call(&server, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    assert_eq!(server.status().restarts, 1);
}

#[tokio::test]
async fn calls_past_the_in_flight_bound_wait_for_a_place_within_their_deadline() {
    let fake = fake();
    let server = StdioServer::new(
        "test.fake",
        fake.launch.clone(),
        Supervision {
            max_in_flight: 2,
            ..supervision()
        },
    );
    server.start().await.unwrap();
    let slow = |ms| {
        let server = server.clone();
        tokio::spawn(async move { call(&server, "sleep", json!({ "ms": ms }), 20_000).await })
    };
    let (first, second) = (slow(1500), slow(1500));
    tokio::time::sleep(Duration::from_millis(200)).await;
    let third = call(&server, "echo", json!({}), 500).await.unwrap_err();
    assert_eq!(
        third,
        StdioError::Busy {
            adapter: "test.fake".to_owned(),
            max: 2
        }
    );
    assert!(third.retryable());
    first.await.unwrap().unwrap();
    second.await.unwrap().unwrap();
    assert_eq!(
        call(&server, "echo", json!({}), 5_000).await.unwrap(),
        "echo {}"
    );
}

#[tokio::test]
async fn an_idle_server_is_stopped_and_started_again_and_shutdown_refuses_calls() {
    let fake = fake();
    let server = StdioServer::new(
        "test.fake",
        fake.launch.clone(),
        Supervision {
            idle_stop: Some(Duration::from_millis(300)),
            ..supervision()
        },
    );
    call(&server, "shout", json!({}), 20_000).await.unwrap();
    let waited = Instant::now();
    while server.status().state != State::Idle {
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "{:?}",
            server.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.status().pid, None);
    assert_eq!(
        call(&server, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    assert_eq!(
        (server.status().state, server.status().restarts),
        (State::Running, 0)
    );
    server.shutdown().await;
    assert_eq!(
        call(&server, "echo", json!({}), 1000).await.unwrap_err(),
        StdioError::ShutDown {
            adapter: "test.fake".to_owned()
        }
    );
    assert_eq!(server.status().state, State::ShutDown);
}

#[tokio::test]
async fn without_a_sandbox_the_server_is_refused_unless_its_grant_says_bare() {
    let fake = fake();
    let mut launch = fake.launch.clone();
    launch.bwrap = PathBuf::from("/nonexistent/bwrap");
    let server = StdioServer::new("test.fake", launch.clone(), supervision());
    let refused = call(&server, "echo", json!({}), 20_000).await.unwrap_err();
    let StdioError::NoSandbox { reason, .. } = &refused else {
        panic!("{refused:?}");
    };
    assert!(reason.contains("install bubblewrap"), "{reason}");
    assert!(
        refused.to_string().contains("set `bare = true`"),
        "{refused}"
    );
    launch.bare = true;
    let bare = StdioServer::new("test.fake", launch, supervision());
    assert_eq!(
        call(&bare, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    assert!(bare.status().bare);
}

#[tokio::test]
async fn prepare_and_start_check_the_grant_against_the_request_and_the_package_against_its_pin() {
    let packages = tempfile::tempdir().unwrap();
    let pin = PackagePin {
        registry: Registry::Npm,
        name: "@acme/server".to_owned(),
        version: "1.0.0".to_owned(),
        integrity: "sha512-x".to_owned(),
        digest: String::new(),
    };
    let installed = pin.install_dir(packages.path());
    assert!(installed.ends_with("npm/@acme+server@1.0.0"));
    std::fs::create_dir_all(installed.join("dist")).unwrap();
    std::fs::write(installed.join("dist/index.js"), "1").unwrap();
    let spec = StdioSpec {
        command: "/usr/bin/node".to_owned(),
        args: vec!["{package}/dist/index.js".to_owned()],
        env: vec!["TOKEN".to_owned()],
        dirs: vec![DirGrant::parse("/srv/docs:ro").unwrap()],
        package: Some(PackagePin {
            digest: pin::tree_digest(&installed).unwrap(),
            ..pin
        }),
    };
    let config = |server: ServerConfig| StdioConfig {
        packages_dir: Some(packages.path().to_owned()),
        bwrap: None,
        servers: vec![server],
    };
    let mut granted = ServerConfig::new("acme.fs");
    granted.dirs = vec![DirGrant::parse("/srv/docs/public:ro").unwrap()];
    granted.env.insert(
        "TOKEN".to_owned(),
        EnvBinding {
            value: Some("t".to_owned()),
            env: None,
            file: None,
        },
    );
    let servers = StdioServers::new(config(granted.clone()));
    let loaded = servers.prepare("acme.fs", &spec, &[]).unwrap();
    assert_eq!(servers.statuses()[0].state, State::Stopped);

    let other = StdioServers::new(config(granted.clone()));
    assert_eq!(
        other.prepare("acme.other", &spec, &[]).unwrap_err(),
        StdioError::NotGranted {
            adapter: "acme.other".to_owned()
        }
    );
    let mut wider = granted.clone();
    wider.dirs = vec![DirGrant::parse("/srv/docs:rw").unwrap()];
    let err = StdioServers::new(config(wider))
        .prepare("acme.fs", &spec, &[])
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "directory `/srv/docs:rw` is not within one the manifest asks for (/srv/docs:ro)"
        ),
        "{err}"
    );
    let mut extra = granted.clone();
    extra.env.insert(
        "HOME_SECRET".to_owned(),
        EnvBinding {
            value: Some("x".to_owned()),
            env: None,
            file: None,
        },
    );
    let err = StdioServers::new(config(extra))
        .prepare("acme.fs", &spec, &[])
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("env `HOME_SECRET` is not one the manifest names (TOKEN)"),
        "{err}"
    );

    std::fs::write(installed.join("dist/index.js"), "2").unwrap();
    // Changed after the load: the start refuses it, before anything runs.
    let StdioError::Package { reason, .. } = loaded.start().await.unwrap_err() else {
        panic!("a package error");
    };
    assert!(
        reason.contains("no longer match the signed pin"),
        "{reason}"
    );
    let err = StdioServers::new(config(granted))
        .prepare("acme.fs", &spec, &[])
        .unwrap_err();
    let StdioError::Package { reason, .. } = &err else {
        panic!("{err:?}");
    };
    assert!(
        reason.contains("no longer match the signed pin"),
        "{reason}"
    );
}

/// Runs the futures concurrently on this task and returns their outputs in order.
async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for handle in handles {
        outputs.push(handle.await.unwrap());
    }
    outputs
}

/// `isolate = "tenant"`: a process serves one tenant. A second tenant takes an empty place, a
/// third replaces a process holding no call, and while every process holds another tenant's
/// call a tenant waits within its deadline.
#[tokio::test]
async fn a_pool_isolated_by_tenant_gives_each_tenant_processes_of_its_own() {
    let fake = fake();
    let server = isolated(&fake, 2);
    let whoami = |tenant: &'static str, ms: u64| {
        let server = server.clone();
        async move {
            call_for(&server, tenant, "whoami", json!({ "ms": ms }), 20_000)
                .await
                .unwrap()
        }
    };
    let acme = whoami("acme", 0).await;
    let globex = whoami("globex", 0).await;
    assert_ne!(acme, globex, "a process each");
    assert_eq!(whoami("acme", 0).await, acme);
    assert_eq!(whoami("globex", 0).await, globex);
    let status = server.status();
    assert_eq!((status.isolate, status.pids.len()), (Isolate::Tenant, 2));

    // Both hold a call: a third tenant waits, within its deadline, for a process of its own.
    let held = tokio::spawn(futures_join(
        [whoami("acme", 1500), whoami("globex", 1500)].into_iter(),
    ));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let refused = call_for(&server, "initech", "whoami", json!({ "ms": 0 }), 400)
        .await
        .unwrap_err();
    assert_eq!(
        refused,
        StdioError::PoolTaken {
            adapter: "test.isolated".to_owned(),
            pool: 2
        }
    );
    assert!(refused.retryable());
    let initech = whoami("initech", 0).await;
    assert_eq!(held.await.unwrap(), [acme.clone(), globex.clone()]);
    assert!(
        initech != acme && initech != globex,
        "a process of its own, in the place of one holding no call"
    );
    assert_eq!(server.status().pids.len(), 2);
    // One of the two kept its process; the other is started again for its next call.
    let (acme_again, globex_again) = (whoami("acme", 0).await, whoami("globex", 0).await);
    assert!(
        (acme_again == acme) != (globex_again == globex),
        "{acme} {globex} {acme_again} {globex_again}"
    );
    assert_eq!(
        server.status().last_failure,
        None,
        "a replaced process is no failure"
    );
}

/// The host's shared memory (`Shmem` in `/proc/meminfo`: tmpfs files and shared mappings), in
/// bytes.
fn host_shmem() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kib: u64 = meminfo
        .lines()
        .find_map(|line| line.strip_prefix("Shmem:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kib * 1024
}

/// Under `memory_mib = 64`, a server that maps 512 MiB of shared memory, or fills `/tmp`,
/// `/dev/shm`, the root or `/dev` with 512 MiB, is refused, and the host's shared memory grows
/// by no more than the limit while the process holds what it got; `admin plugins` shows the
/// limit that applied.
#[tokio::test]
async fn memory_past_the_limit_is_refused_and_the_host_keeps_its_own() {
    const LIMIT: u64 = 64 << 20;
    let fake = fake();
    let mut launch = fake.launch.clone();
    launch.limits.memory_bytes = LIMIT;
    let server = StdioServer::new("test.memory", launch, supervision());
    assert_eq!(
        call(&server, "echo", json!({}), 20_000).await.unwrap(),
        "echo {}"
    );
    assert_eq!(
        server.status().memory,
        Some(sandbox::MemoryLimit {
            process_bytes: LIMIT,
            file_bytes: LIMIT,
            tmpfs_bytes: Some(LIMIT / 2),
        })
    );
    let before = host_shmem();
    let attempt = |tool: &'static str, args: Value| {
        let server = server.clone();
        async move { call(&server, tool, args, 60_000).await.unwrap() }
    };
    let mapped = attempt("shared", json!({ "mib": 512 })).await;
    assert_eq!(mapped, "refused: Cannot allocate memory");
    for (path, limit_mib) in [("/tmp/hoard", 32), ("/dev/shm/hoard", 32)] {
        let text = attempt("fill", json!({ "path": path, "mib": 512 })).await;
        let written: u64 = text
            .strip_prefix("refused after ")
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{path}: {text}"));
        assert!(written <= limit_mib, "{path}: {text}");
    }
    for path in ["/hoard", "/dev/hoard"] {
        let text = attempt("fill", json!({ "path": path, "mib": 512 })).await;
        assert_eq!(text, "refused: Read-only file system", "{path}");
    }
    let grown = host_shmem().saturating_sub(before);
    // What the process holds now (the files above) is at most the limit; the margin is for
    // other processes of the host changing their shared memory meanwhile.
    assert!(
        grown <= LIMIT + (16 << 20),
        "the host's shared memory grew by {} MiB",
        grown >> 20
    );
    // One memfd is bounded by the file size limit.
    let text = attempt("fill", json!({ "path": "memfd", "mib": 512 })).await;
    assert!(
        text.starts_with("refused after 64 MiB: File too large"),
        "{text}"
    );
    assert_eq!(
        server.status().state,
        State::Running,
        "the server is still serving"
    );
    server.shutdown().await;
}

/// A listener for a request of call `call`, cancelled by `cancel`, and what it is told.
fn listening(
    call: usize,
    cancel: Option<crate::relay::Cancel>,
) -> (Listener, tokio::sync::mpsc::Receiver<Value>) {
    let (to, told) = tokio::sync::mpsc::channel(TOLD_QUEUE);
    (Listener { to, call, cancel }, told)
}

/// What a server says while it works on a request reaches that request's listener: its
/// progress (under the adapter's own token, though the server saw one of the host's), its log
/// line, and its request of the client, under an id of the host's, which only the same call
/// answers, and whose answer the server gets under its own id. Its session offered what it
/// may ask.
#[tokio::test]
async fn a_servers_progress_log_and_question_reach_the_request_it_serves() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision())
        .offering(&[crate::relay::AskKind::Sampling]);
    assert_eq!(
        call(&server, "offered", json!({}), 20_000).await.unwrap(),
        r#"{"sampling": {}}"#
    );
    let until = soon(20_000);
    let process = server.process("", until).await.unwrap();
    let (listener, mut told) = listening(7, None);
    let params = json!({ "name": "ask", "arguments": {}, "_meta": { "progressToken": "mine" } });
    let deadline = || until;
    let request = process.request("tools/call", Some(params), &deadline, Some(listener));
    let answering = async {
        let progress = told.recv().await.unwrap();
        assert_eq!(progress["params"]["progressToken"], "mine", "{progress}");
        let log = told.recv().await.unwrap();
        assert_eq!(log["params"]["data"], "asking", "{log}");
        let asked = told.recv().await.unwrap();
        assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
        let own = asked["id"].as_str().unwrap().to_owned();
        assert!(own.starts_with("gatehouse-"), "{own}");
        let answer = json!({ "jsonrpc": "2.0", "id": own, "result": { "text": "hi" } });
        let refused = server.respond(8, &answer).await.unwrap_err();
        assert!(
            refused.contains("no request of the server's awaits"),
            "{refused}"
        );
        server.respond(7, &answer).await.unwrap();
        // Answered once: not again.
        assert!(server.respond(7, &answer).await.is_err());
    };
    let (answer, ()) = tokio::join!(request, answering);
    let text = answer.unwrap()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let got: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(got["result"], json!({ "text": "hi" }), "{got}");
    assert!(
        got["id"].as_str().is_some_and(|id| id.starts_with("s-")),
        "{got}"
    );
}

/// A request of the server's that no one request can be told from (two in flight) is
/// answered with an error, never left waiting; so is one made with no listener.
#[tokio::test]
async fn a_servers_question_no_single_request_owns_gets_an_error() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision());
    let until = soon(20_000);
    let process = server.process("", until).await.unwrap();
    let (listener, _told) = listening(1, None);
    let deadline = || until;
    let sleeping = process.request(
        "tools/call",
        Some(json!({ "name": "sleep", "arguments": { "ms": 1500 } })),
        &deadline,
        None,
    );
    let asking = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        process
            .request(
                "tools/call",
                Some(json!({ "name": "ask", "arguments": {} })),
                &deadline,
                Some(listener),
            )
            .await
    };
    let (slept, asked) = tokio::join!(sleeping, asking);
    slept.unwrap();
    let text = asked.unwrap()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    let got: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(got["error"]["code"], -32603, "{got}");
    assert!(
        got["error"]["message"]
            .as_str()
            .unwrap()
            .contains("only while the server works on one call"),
        "{got}"
    );
    let alone = call(&server, "ask", json!({}), 20_000).await.unwrap();
    assert!(alone.contains("-32603"), "{alone}");
}

/// A request whose caller cancels the call is given up at once, and the server is told
/// (`notifications/cancelled` with the id the host sent it under); the process is not taken
/// for hung, and serves on.
#[tokio::test]
async fn a_cancelled_request_is_given_up_and_the_server_told() {
    let fake = fake();
    let server = StdioServer::new("test.fake", fake.launch.clone(), supervision());
    let until = soon(20_000);
    let process = server.process("", until).await.unwrap();
    let (canceller, cancel) = crate::relay::cancellation();
    let (listener, _told) = listening(1, Some(cancel));
    let deadline = || until;
    let started = Instant::now();
    let sleeping = process.request(
        "tools/call",
        Some(json!({ "name": "sleep", "arguments": { "ms": 10_000 } })),
        &deadline,
        Some(listener),
    );
    let cancelling = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        canceller.cancel();
    };
    let (slept, ()) = tokio::join!(sleeping, cancelling);
    assert!(
        matches!(slept, Err(StdioError::Cancelled { .. })),
        "{slept:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(process);
    let notes: Value =
        serde_json::from_str(&call(&server, "notes", json!({}), 20_000).await.unwrap()).unwrap();
    let cancelled: Vec<&Value> = (notes.as_array().unwrap().iter())
        .filter(|n| n["method"] == "notifications/cancelled")
        .collect();
    assert_eq!(cancelled.len(), 1, "{notes}");
    assert!(cancelled[0]["params"]["requestId"].is_u64(), "{notes}");
    assert_eq!(
        cancelled[0]["params"]["reason"],
        "the caller cancelled the call"
    );
    assert_eq!(server.status().restarts, 0);
}

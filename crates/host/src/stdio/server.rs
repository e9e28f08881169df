//! One stdio server, supervised: its process started on demand in the sandbox, spoken to in
//! newline-delimited JSON-RPC, restarted when it fails. A server may keep a small pool of
//! processes (`pool`, each with its own sandbox and session): a request goes to a process
//! holding none, and another process is started only while every running one holds requests.
//! Under `isolate = "tenant"` each process is started for one tenant and serves only that
//! tenant's requests ([`StdioServer::process`]): another tenant's request takes an empty
//! place, or replaces a process of another tenant that holds no request, or waits for one.
//!
//! 1. **Start** (at the first request, or at load with `start = "at_start"`): the installed
//!    package is checked against its pin again (it may have changed since the load), the
//!    sandbox is probed ([`super::sandbox::probe`]), the process spawned, and the MCP session opened
//!    (`initialize`, then `notifications/initialized`) within [`START_TIMEOUT`]. The host holds
//!    this one session; the adapter's requests are sent on it.
//! 2. **Requests** ([`Served::request`], on a process [`StdioServer::process`] picks) are
//!    multiplexed on the process by JSON-RPC id: each gets an id of the host's, and its
//!    answer is matched back by it. At most
//!    `max_in_flight` are outstanding; a request past that waits for a place within its
//!    deadline. What the server says while it works on a request reaches that request's
//!    [`Listener`] (the `stdio://` transport streams it to the adapter, as a Streamable HTTP
//!    server would): its `notifications/progress` for the request's progress token (the server
//!    is sent a token of the host's, and the listener gets the adapter's own back); and, while
//!    the request is the only one its process holds, its log lines (`notifications/message`)
//!    and its own requests (`elicitation/create`, `sampling/createMessage`, `roots/list`),
//!    each under an id of the host's, whose answer the same call sends back
//!    ([`StdioServer::respond`]). A request of the server's that no single request can be
//!    told from (none held, or several) is answered with an error; `ping` with `{}`; other
//!    notifications are dropped. The session's `initialize` declares the client capabilities
//!    the adapter passes on ([`StdioServer::offering`]: its manifest's `[caller] ask`); the
//!    operator's `[[caller.grant]]` and the caller decide each ask.
//! 3. **Failure**: a process that exits, writes a message longer than `max_message_kib`, or
//!    does not answer a `ping` within [`PING_TIMEOUT`] after a request timed out (hung), is
//!    killed; every request it held fails with [`StdioError::Crashed`] (retryable), and the
//!    next request starts it again after a backoff (250 ms, doubling to 30 s, reset by an
//!    answered request). Its stderr goes to the log line by line with the server's id, at
//!    most [`STDERR_LINES_PER_SECOND`] lines a second (the rest counted).
//! 4. **Stop**: each process after `idle_stop_seconds` without a request, and all at
//!    shutdown (`gatehouse serve` shuts them down after its drain); a dropped server kills
//!    its processes (and bubblewrap takes the sandbox's processes with it).

use std::collections::HashMap;
use std::future::Future;
use std::os::fd::AsRawFd as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::ChildStdin;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio::task::AbortHandle;

use super::StdioError;
use super::config::Isolate;
use super::sandbox::{Launch, MemoryLimit, ProxyFds, probe};
use crate::relay::AskKind;

/// How long starting the process and opening its MCP session may take: an installed package
/// starts in well under a second; a slow disk or a large runtime gets the rest.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a process whose request timed out has to answer a `ping` before it is taken for
/// hung and restarted.
pub const PING_TIMEOUT: Duration = Duration::from_secs(5);
/// Stderr lines logged per second per server, at most; the rest are counted in the next line.
pub const STDERR_LINES_PER_SECOND: u32 = 20;
/// The longest stderr line logged; the rest of a longer one is cut.
const MAX_STDERR_LINE: usize = 2048;
/// Stderr lines kept to explain a failed start.
const STDERR_TAIL: usize = 8;
/// The first restart waits this long; each further failure doubles it, up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait before a restart.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The protocol version the host asks a server for; it answers with the one it speaks.
const PROTOCOL: &str = "2025-11-25";
/// How the progress tokens the host sends a server begin: the rest is the request's id.
const TOKEN_PREFIX: &str = "gatehouse-";

/// How many messages wait for a request's listener at most: past it, notifications are dropped
/// and the server's requests refused.
pub const TOLD_QUEUE: usize = 64;

/// Where what a server says about one request while it works on it goes ([`Served::request`]).
#[derive(Debug, Clone)]
pub struct Listener {
    /// The messages, as the server wrote them but for ids and tokens of the host's: progress
    /// notifications, log lines and the server's requests (see the module docs).
    pub to: mpsc::Sender<Value>,
    /// The call the request is made for: only it may answer the server's requests
    /// ([`StdioServer::respond`]).
    pub call: usize,
    /// Whether the call's caller cancels it: the server is then sent
    /// `notifications/cancelled` for the request, and its answer is not awaited
    /// ([`StdioError::Cancelled`]).
    pub cancel: Option<crate::relay::Cancel>,
}

/// A request of the server's passed on to a listener, until the call answers it.
#[derive(Debug)]
struct Asked {
    process: Weak<Process>,
    /// The server's own id for it.
    id: Value,
    /// The host's id of the request it was passed on with.
    request: u64,
    /// The call it was passed on to.
    call: usize,
}

/// A request sent to a process, waiting for its answer.
#[derive(Debug)]
struct Waiter {
    answer: oneshot::Sender<Result<Value, StdioError>>,
    listener: Option<Listener>,
    /// The progress token the adapter sent, which the server was sent one of the host's for.
    token: Option<Value>,
}

/// The deadline of a request: when it must be answered, as of now (an ask of the caller's in
/// between moves it later).
pub type Deadline<'a> = &'a (dyn Fn() -> Instant + Send + Sync);

/// What supervision needs besides the launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Supervision {
    /// Requests outstanding at once, at most.
    pub max_in_flight: u32,
    /// The longest stdout message, in bytes.
    pub max_message_bytes: usize,
    /// Stop after this long without a request; `None`: never.
    pub idle_stop: Option<Duration>,
    /// Processes at most (at least 1): a second is started only when every running one is
    /// answering a request, so a server used by one caller at a time keeps one.
    pub pool: u32,
    /// Whose requests one process serves.
    pub isolate: Isolate,
}

/// The state of a server, as `gatehouse admin plugins` and the console show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Not started yet.
    Stopped,
    /// Being started.
    Starting,
    /// Its process runs.
    Running,
    /// Stopped after a time without requests; the next starts it.
    Idle,
    /// Its process failed; the next request starts it after a backoff.
    Restarting,
    /// Shut down with the gateway.
    ShutDown,
}

/// A snapshot of a server for operators.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Status {
    /// The adapter whose server it is.
    pub adapter: String,
    /// Its state.
    pub state: State,
    /// The process id of the first running process, if one runs.
    pub pid: Option<u32>,
    /// The ids of every running process of its pool.
    pub pids: Vec<u32>,
    /// Processes started after a failure.
    pub restarts: u64,
    /// Why the last process ended, if it failed.
    pub last_failure: Option<String>,
    /// Whether it runs without the sandbox (`bare = true` where bubblewrap cannot run).
    pub bare: bool,
    /// Whose calls one process serves (`isolate`).
    pub isolate: Isolate,
    /// The memory limit that applied to its last started process; `None` before the first.
    pub memory: Option<MemoryLimit>,
    /// What runs: the pinned program and its arguments, the package's directory filled in.
    pub command: Vec<String>,
    /// The user (and group) id its processes run as under a root gateway (`[[stdio.server]]
    /// uid`): what must be able to write its `rw` directories. `None` when the gateway is not
    /// root: they run as the gateway's own user.
    pub uid: Option<u32>,
}

/// One supervised stdio server. Cheap to clone; the last clone dropped kills its process.
#[derive(Debug, Clone)]
pub struct StdioServer {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    adapter: String,
    launch: Launch,
    supervision: Supervision,
    /// The pool: each slot's live process, if any; a start holds its slot's lock.
    slots: Vec<Slot>,
    books: Mutex<Books>,
    shut_down: AtomicBool,
    /// The egress proxy put into its sandbox, when its adapter's grant names destinations.
    network: OnceLock<Network>,
    /// The client capabilities its session declares ([`StdioServer::offering`]).
    capabilities: Value,
    /// The server's requests passed on to a call, by the id of the host's they were passed on
    /// under.
    asked: Mutex<HashMap<String, Asked>>,
    next_ask: AtomicU64,
}

/// What serves a sandboxed server's network: given the listener made in one process's network
/// namespace (at [`super::netns::PROXY`]) and that process's number ([`Served::number`]), it
/// serves the egress proxy of that process on it until the handle it returns is aborted. Set
/// by the loader from the adapter's grants (`crate::egress`).
#[derive(Clone)]
pub struct Network(
    pub Arc<dyn Fn(std::net::TcpListener, u64) -> std::io::Result<AbortHandle> + Send + Sync>,
);

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Network(egress proxy)")
    }
}

/// Aborts a task when dropped: the egress proxy of a process, which ends with it.
#[derive(Debug)]
struct AbortOnDrop(Option<AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        if let Some(handle) = &self.0 {
            handle.abort();
        }
    }
}

/// One place of the pool.
#[derive(Debug, Default)]
struct Slot {
    /// Its live process, if any; a start holds the lock.
    live: Arc<tokio::sync::Mutex<Option<Live>>>,
    /// Under `isolate = "tenant"`: the tenant of its process, or of the one being started.
    tenant: Mutex<Option<String>>,
}

/// Numbers every process of every server, so the egress proxy of one process charges the
/// calls of that process only.
static PROCESSES: AtomicU64 = AtomicU64::new(1);

/// A running process and the means to kill it; dropping it kills the process.
#[derive(Debug)]
struct Live {
    process: Arc<Process>,
    kill: Option<oneshot::Sender<String>>,
}

impl Live {
    fn kill(&mut self, reason: String) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(reason);
        }
    }
}

/// A process of a server held for one caller ([`StdioServer::process`]): the caller's
/// requests go to it, and while it is held no other tenant's request replaces it and no idle
/// stop takes it.
#[derive(Debug)]
pub struct Served {
    inner: Arc<Inner>,
    process: Arc<Process>,
}

impl Served {
    fn new(inner: &Arc<Inner>, process: &Arc<Process>) -> Self {
        process.users.fetch_add(1, Ordering::SeqCst);
        Self {
            inner: Arc::clone(inner),
            process: Arc::clone(process),
        }
    }

    /// The process's number, unique in the gateway: the one its egress proxy is given
    /// ([`Network`]), so the calls registered under it are the ones its requests are
    /// charged to.
    pub fn number(&self) -> u64 {
        self.process.number
    }

    /// What the process answered to `initialize` (its `serverInfo`, `protocolVersion`,
    /// `capabilities`).
    pub fn initialized(&self) -> Value {
        self.process
            .initialized
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends `method` with `params` to the process and returns its answer: the JSON-RPC
    /// response message (with `result` or `error`; its `id` is the host's). What the server
    /// says about it meanwhile goes to `listener`, if any (see the module docs).
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        deadline: Deadline<'_>,
        listener: Option<Listener>,
    ) -> Result<Value, StdioError> {
        let answer = self
            .inner
            .send(&self.process, method, params, deadline, listener)
            .await;
        if answer.is_ok() {
            self.inner.books().failures = 0;
        }
        answer
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        *self
            .process
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        self.process.users.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What the supervisor remembers across processes.
#[derive(Debug)]
struct Books {
    state: State,
    failures: u32,
    retry_at: Option<Instant>,
    restarts: u64,
    last_failure: Option<String>,
    bare: bool,
    memory: Option<MemoryLimit>,
}

/// One process: its stdin, the requests it holds, its place count.
#[derive(Debug)]
struct Process {
    /// Its number, unique in the gateway ([`PROCESSES`]).
    number: u64,
    /// Callers holding it ([`Served`]), from the pick to the end of their request: a process
    /// of another tenant is replaced only while it has none.
    users: AtomicUsize,
    pid: Option<u32>,
    stdin: tokio::sync::Mutex<ChildStdin>,
    pending: Mutex<HashMap<u64, Waiter>>,
    next_id: AtomicU64,
    places: Semaphore,
    /// Why it ended, once it did (the first reason given wins).
    ended: Mutex<Option<String>>,
    stderr_tail: Mutex<Vec<String>>,
    /// `initialize`'s result.
    initialized: Mutex<Value>,
    /// When it was last sent a request (for the idle stop).
    last_used: Mutex<Instant>,
}

impl Process {
    fn end(&self, adapter: &str, reason: &str) {
        let reason = {
            let mut ended = self.ended.lock().unwrap_or_else(PoisonError::into_inner);
            ended.get_or_insert_with(|| reason.to_owned()).clone()
        };
        let held: Vec<_> = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain()
            .collect();
        for (_, waiter) in held {
            let _ = waiter.answer.send(Err(StdioError::Crashed {
                adapter: adapter.to_owned(),
                reason: reason.clone(),
            }));
        }
    }

    /// Callers holding it.
    fn users(&self) -> usize {
        self.users.load(Ordering::SeqCst)
    }

    fn is_ended(&self) -> bool {
        self.ended
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    fn tail(&self) -> String {
        let tail = self
            .stderr_tail
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if tail.is_empty() {
            "no stderr".to_owned()
        } else {
            format!("its stderr ended: {}", tail.join(" | "))
        }
    }

    /// The listener of the one request the process holds, with the request's id: `None`
    /// while it holds none or several, or that one has no listener.
    fn sole_listener(&self) -> Option<(u64, Listener)> {
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let mut held = pending.iter();
        match (held.next(), held.next()) {
            (Some((id, waiter)), None) => waiter.listener.clone().map(|l| (*id, l)),
            _ => None,
        }
    }

    /// Passes a progress notification on to the listener of the request whose token (one of
    /// the host's) it carries, with the adapter's own token back; any other is dropped.
    fn progress(&self, mut message: Value) {
        let request = (message["params"]["progressToken"].as_str())
            .and_then(|token| token.strip_prefix(TOKEN_PREFIX))
            .and_then(|id| id.parse::<u64>().ok());
        let pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(waiter) = request.and_then(|id| pending.get(&id)) else {
            return;
        };
        if let (Some(listener), Some(token)) = (&waiter.listener, &waiter.token) {
            message["params"]["progressToken"] = token.clone();
            let _ = listener.to.try_send(message);
        }
    }

    async fn write(&self, message: &Value) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(message).expect("JSON values serialize");
        line.push(b'\n');
        let mut stdin = self.stdin.lock().await;
        stdin.write_all(&line).await?;
        stdin.flush().await
    }
}

impl StdioServer {
    /// A server for `adapter`, not started.
    pub fn new(adapter: impl Into<String>, launch: Launch, supervision: Supervision) -> Self {
        Self {
            inner: Arc::new(Inner {
                adapter: adapter.into(),
                launch,
                supervision,
                slots: (0..supervision.pool.max(1))
                    .map(|_| Slot::default())
                    .collect(),
                books: Mutex::new(Books {
                    state: State::Stopped,
                    failures: 0,
                    retry_at: None,
                    restarts: 0,
                    last_failure: None,
                    bare: false,
                    memory: None,
                }),
                shut_down: AtomicBool::new(false),
                network: OnceLock::new(),
                capabilities: json!({}),
                asked: Mutex::default(),
                next_ask: AtomicU64::new(1),
            }),
        }
    }

    /// The server, its session declaring that its client can be asked `asks` (what its
    /// adapter passes on to its callers): without, the server is told it can ask nothing.
    /// Before the server is shared.
    #[must_use]
    pub fn offering(mut self, asks: &[AskKind]) -> Self {
        Arc::get_mut(&mut self.inner)
            .expect("offering is set before the server is shared")
            .capabilities = crate::relay::client_capabilities(asks);
        self
    }

    /// Sends `message`, call `call`'s answer to a request the server made of it (passed on to
    /// its [`Listener`] under an id of the host's), to the process that asked, under the
    /// server's own id. Refused, saying why, for an id no request of the server's awaits an
    /// answer under, or one passed on to another call.
    pub async fn respond(&self, call: usize, message: &Value) -> Result<(), String> {
        let own = message["id"].as_str().unwrap_or_default();
        let asked = {
            let mut asked = self
                .inner
                .asked
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            match asked.get(own) {
                Some(ask) if ask.call == call => asked.remove(own),
                _ => None,
            }
        };
        let Some(asked) = asked else {
            return Err(format!(
                "no request of the server's awaits this call's answer under id {}",
                message["id"]
            ));
        };
        let Some(process) = asked.process.upgrade().filter(|p| !p.is_ended()) else {
            return Err("the process that asked has ended".to_owned());
        };
        let mut reply = json!({ "jsonrpc": "2.0", "id": asked.id });
        match (message.get("result"), message.get("error")) {
            (Some(result), _) => reply["result"] = result.clone(),
            (None, Some(error)) => reply["error"] = error.clone(),
            (None, None) => return Err("a response needs a `result` or an `error`".to_owned()),
        }
        process
            .write(&reply)
            .await
            .map_err(|e| format!("writing to the server failed: {e}"))
    }

    /// Gives the server the network through `network`, the egress proxy of its adapter's
    /// grants, from its next start on. Without it the server has no network at all. Set
    /// once; later calls are ignored.
    pub fn set_network(&self, network: Network) {
        let _ = self.inner.network.set(network);
    }

    /// Whether the server reaches the network (through its egress proxy).
    pub fn has_network(&self) -> bool {
        self.inner.network.get().is_some()
    }

    /// The adapter whose server this is.
    pub fn adapter(&self) -> &str {
        &self.inner.adapter
    }

    /// The server's state now.
    pub fn status(&self) -> Status {
        // A slot being started is locked, so not counted.
        let pids: Vec<u32> = self
            .inner
            .slots
            .iter()
            .filter_map(|slot| {
                let slot = slot.live.try_lock().ok()?;
                slot.as_ref()
                    .filter(|live| !live.process.is_ended())
                    .and_then(|live| live.process.pid)
            })
            .collect();
        let books = self.inner.books();
        // One process of a pool stopped for idleness leaves the server running.
        let state = match books.state {
            State::Idle if !pids.is_empty() => State::Running,
            state => state,
        };
        Status {
            adapter: self.inner.adapter.clone(),
            state,
            pid: pids.first().copied(),
            pids,
            restarts: books.restarts,
            last_failure: books.last_failure.clone(),
            bare: books.bare,
            isolate: self.inner.supervision.isolate,
            memory: books.memory,
            command: std::iter::once(self.inner.launch.program.display().to_string())
                .chain(self.inner.launch.args.iter().cloned())
                .collect(),
            uid: super::sandbox::is_root().then_some(self.inner.launch.run_as),
        }
    }

    /// Adds to `answer`, the server's answer to a `tools/call`, why a file access it reports
    /// failing failed in its sandbox, if the sandbox explains it ([`super::hint`]).
    pub fn explain(&self, answer: &mut Value) {
        // Not an error: nothing to explain, and no need to ask whether the gateway is root.
        if answer["result"]["isError"] != Value::Bool(true) {
            return;
        }
        let launch = &self.inner.launch;
        let uid = super::sandbox::is_root().then_some(launch.run_as);
        super::hint::explain(answer, &launch.dirs, uid);
    }

    /// A process for requests of `tenant`, started if need be, held until the [`Served`] is
    /// dropped. Under `isolate = "tenant"` it serves that tenant only: a process of its own,
    /// else an empty place of the pool, else a process of another tenant holding no request
    /// (replaced), else one of its busy ones; while every place serves other tenants'
    /// requests, it waits until `deadline` ([`StdioError::PoolTaken`]).
    pub async fn process(&self, tenant: &str, deadline: Instant) -> Result<Served, StdioError> {
        let owner = (self.inner.supervision.isolate == Isolate::Tenant).then_some(tenant);
        self.inner.ensure(owner, deadline).await
    }

    /// Starts a process now if none is running (for `start = "at_start"`); under `isolate =
    /// "tenant"` it serves the first tenant that calls.
    pub async fn start(&self) -> Result<(), StdioError> {
        self.inner
            .ensure(None, Instant::now() + START_TIMEOUT)
            .await
            .map(drop)
    }

    /// Stops its processes, if any, and refuses every later request.
    pub async fn shutdown(&self) {
        self.inner.shut_down.store(true, Ordering::SeqCst);
        for slot in &self.inner.slots {
            if let Some(mut live) = slot.live.lock().await.take() {
                live.kill(SHUTDOWN_REASON.to_owned());
            }
        }
        self.inner.books().state = State::ShutDown;
    }
}

impl Inner {
    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The slot a request of `tenant` goes to (`None`: any process, as when the server is
    /// shared): a process of its own holding no caller; else an empty slot, where a process
    /// is started (the pool grows while every process is busy); else a slot whose process of
    /// another tenant holds no caller (replaced); else its process holding the fewest
    /// callers; else one being started for it. `None` while every slot serves (or is being
    /// started for) other tenants' callers.
    fn pick(&self, tenant: Option<&str>) -> Option<usize> {
        let mut best: Option<((u8, usize), usize)> = None;
        for (i, slot) in self.slots.iter().enumerate() {
            let owner = slot
                .tenant
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let mine = tenant.is_none() || owner.is_none() || owner.as_deref() == tenant;
            let key = match slot.live.try_lock() {
                Err(_) if mine => (3, 0),
                Err(_) => continue,
                Ok(live) => match live.as_ref().filter(|live| !live.process.is_ended()) {
                    None => (0, 0),
                    Some(live) if mine && live.process.users() == 0 => return Some(i),
                    Some(live) if mine => (2, live.process.users()),
                    Some(live) if live.process.users() == 0 => (1, 0),
                    Some(_) => continue,
                },
            };
            if best.is_none_or(|(better, _)| key < better) {
                best = Some((key, i));
            }
        }
        best.map(|(_, i)| i)
    }

    /// A live process for `tenant` (see [`Inner::pick`]), held for the caller, started (after
    /// any backoff) if its slot has none.
    async fn ensure(
        self: &Arc<Self>,
        tenant: Option<&str>,
        deadline: Instant,
    ) -> Result<Served, StdioError> {
        let (index, mut slot) = loop {
            if self.shut_down.load(Ordering::SeqCst) {
                return Err(StdioError::ShutDown {
                    adapter: self.adapter.clone(),
                });
            }
            let Some(index) = self.pick(tenant) else {
                if Instant::now() >= deadline {
                    return Err(StdioError::PoolTaken {
                        adapter: self.adapter.clone(),
                        pool: self.supervision.pool,
                    });
                }
                tokio::time::sleep(
                    POOL_WAIT.min(deadline.saturating_duration_since(Instant::now())),
                )
                .await;
                continue;
            };
            let slot = tokio::time::timeout_at(
                deadline.into(),
                Arc::clone(&self.slots[index].live).lock_owned(),
            )
            .await
            .map_err(|_| StdioError::Timeout {
                adapter: self.adapter.clone(),
            })?;
            let mut owner = self.slots[index]
                .tenant
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let Some(live) = slot.as_ref().filter(|live| !live.process.is_ended()) else {
                *owner = tenant.map(str::to_owned);
                break (index, slot);
            };
            match (tenant, owner.as_deref()) {
                (None, _) => return Ok(Served::new(self, &live.process)),
                (Some(tenant), None) => {
                    // Started at load for no one yet: the first tenant's.
                    *owner = Some(tenant.to_owned());
                    return Ok(Served::new(self, &live.process));
                }
                (Some(tenant), Some(serving)) if tenant == serving => {
                    return Ok(Served::new(self, &live.process));
                }
                (Some(tenant), Some(_)) if live.process.users() == 0 => {
                    *owner = Some(tenant.to_owned());
                    drop(owner);
                    let mut slot = slot;
                    if let Some(mut live) = slot.take() {
                        live.kill(REPLACED.to_owned());
                    }
                    break (index, slot);
                }
                // Another tenant's caller took it since the pick: pick again.
                (Some(_), Some(_)) => {}
            }
        };
        *slot = None;
        let retry_at = self.books().retry_at;
        if let Some(at) = retry_at.filter(|at| *at > Instant::now()) {
            if at > deadline {
                return Err(StdioError::Restarting {
                    adapter: self.adapter.clone(),
                    retry_after_ms: millis(at.saturating_duration_since(Instant::now())),
                });
            }
            tokio::time::sleep_until(at.into()).await;
        }
        self.books().state = State::Starting;
        // The start runs to its own end (at most START_TIMEOUT), holding the slot, even when
        // this request's deadline comes first: a server slower to start than one call's
        // budget is running for the next call, not started over by each. The caller's hold
        // is taken before the slot is let go (so no other tenant replaces the process in
        // between), and dropped with the task's output if the caller is gone.
        let inner = Arc::clone(self);
        let start = tokio::spawn(async move {
            let started = match tokio::time::timeout(START_TIMEOUT, inner.spawn()).await {
                Ok(started) => started,
                Err(_) => Err(StdioError::Start {
                    adapter: inner.adapter.clone(),
                    reason: format!(
                        "it did not open its MCP session (`initialize`) within {} ms",
                        millis(START_TIMEOUT)
                    ),
                }),
            };
            match started {
                Ok(live) => {
                    let served = Served::new(&inner, &live.process);
                    *slot = Some(live);
                    if let Some(idle) = inner.supervision.idle_stop {
                        tokio::spawn(reap_when_idle(Arc::downgrade(&inner), index, idle));
                    }
                    let mut books = inner.books();
                    books.state = State::Running;
                    if books.retry_at.take().is_some() {
                        books.restarts += 1;
                    }
                    Ok(served)
                }
                Err(error) => {
                    inner.failed(&error.to_string());
                    Err(error)
                }
            }
        });
        match tokio::time::timeout_at(deadline.into(), start).await {
            Ok(Ok(started)) => started,
            Ok(Err(panicked)) => Err(StdioError::Start {
                adapter: self.adapter.clone(),
                reason: format!("the start failed: {panicked}"),
            }),
            Err(_) => Err(StdioError::Timeout {
                adapter: self.adapter.clone(),
            }),
        }
    }

    /// Books a failed process: the backoff before the next start.
    fn failed(&self, reason: &str) {
        let mut books = self.books();
        books.failures = books.failures.saturating_add(1);
        let backoff = FIRST_BACKOFF
            .saturating_mul(1 << books.failures.saturating_sub(1).min(16))
            .min(MAX_BACKOFF);
        books.retry_at = Some(Instant::now() + backoff);
        books.last_failure = Some(reason.to_owned());
        if books.state != State::ShutDown {
            books.state = State::Restarting;
        }
    }

    /// Spawns the process, starts its reader, stderr and waiter tasks, and opens the session.
    async fn spawn(self: &Arc<Self>) -> Result<Live, StdioError> {
        if let (Some(pin), Some(dir)) = (&self.launch.pin, &self.launch.package_dir) {
            let (adapter, pin, dir) = (self.adapter.clone(), pin.clone(), dir.clone());
            tokio::task::spawn_blocking(move || super::check_package(&adapter, &pin, &dir))
                .await
                .map_err(|e| StdioError::Start {
                    adapter: self.adapter.clone(),
                    reason: format!("checking its package failed: {e}"),
                })??;
        }
        let sandboxed = match probe(&self.launch).await {
            Ok(()) => true,
            Err(reason) if self.launch.bare => {
                tracing::warn!(adapter = %self.adapter, %reason, "stdio server runs without the sandbox (`bare = true`)");
                false
            }
            Err(reason) => {
                return Err(StdioError::NoSandbox {
                    adapter: self.adapter.clone(),
                    reason,
                });
            }
        };
        {
            let mut books = self.books();
            books.bare = !sandboxed;
            books.memory = Some(self.launch.limits.memory(sandboxed));
        }
        let number = PROCESSES.fetch_add(1, Ordering::Relaxed);
        let start_failed = |reason: String| StdioError::Start {
            adapter: self.adapter.clone(),
            reason,
        };
        // With the network granted: bubblewrap names the sandbox on one pipe and waits on the
        // other, while the proxy's listener is put into it.
        let network = self.network.get().filter(|_| sandboxed);
        let pipes = match network {
            Some(_) => Some(
                std::io::pipe()
                    .and_then(|info| Ok((info, std::io::pipe()?)))
                    .map_err(|e| start_failed(format!("cannot make its pipes: {e}")))?,
            ),
            None => None,
        };
        let fds = pipes.as_ref().map(|((_, info), (block, _))| ProxyFds {
            info: info.as_raw_fd(),
            block: block.as_raw_fd(),
        });
        let mut command = self.launch.command(sandboxed, fds);
        command
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().map_err(|e| {
            start_failed(format!("cannot run {}: {e}", self.launch.program.display()))
        })?;
        // The proxy serves while the process lives; the waiter below drops it.
        let proxy = match (network, pipes) {
            (Some(network), Some(((info, info_writer), (block_reader, block)))) => {
                drop((info_writer, block_reader));
                match put_proxy(network, number, info, block).await {
                    Ok(handle) => AbortOnDrop(Some(handle)),
                    Err(reason) => {
                        let _ = child.kill().await;
                        return Err(start_failed(format!(
                            "cannot give it its egress proxy: {reason}"
                        )));
                    }
                }
            }
            _ => AbortOnDrop(None),
        };
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three streams are piped");
        };
        let process = Arc::new(Process {
            number,
            users: AtomicUsize::new(0),
            pid: child.id(),
            stdin: tokio::sync::Mutex::new(stdin),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            places: Semaphore::new(self.supervision.max_in_flight.max(1) as usize),
            ended: Mutex::default(),
            stderr_tail: Mutex::default(),
            initialized: Mutex::new(Value::Null),
            last_used: Mutex::new(Instant::now()),
        });
        let (kill, killed) = oneshot::channel::<String>();
        let adapter = self.adapter.clone();
        // The waiter owns the child: it kills it when told (or when the server is dropped),
        // and books its end.
        let weak = Arc::downgrade(self);
        let watched = Arc::clone(&process);
        tokio::spawn(async move {
            let _proxy = proxy;
            let reason = tokio::select! {
                status = child.wait() => match status {
                    Ok(status) => format!("it exited ({status})"),
                    Err(e) => format!("waiting for it failed: {e}"),
                },
                reason = killed => {
                    let reason = reason.unwrap_or_else(|_| "its server was dropped".to_owned());
                    let _ = child.kill().await;
                    reason
                }
            };
            let expected =
                [IDLE, SHUTDOWN_REASON, START_FAILED, REPLACED].contains(&reason.as_str());
            let reason = format!("{reason}; {}", watched.tail());
            watched.end(&adapter, &reason);
            if let Some(inner) = weak.upgrade() {
                if expected {
                    let mut books = inner.books();
                    if books.state == State::Running {
                        books.state = State::Idle;
                    }
                } else {
                    tracing::warn!(adapter = %adapter, %reason, "stdio server ended");
                    inner.failed(&reason);
                }
            }
        });
        let max = self.supervision.max_message_bytes;
        tokio::spawn(read_stdout(
            self.adapter.clone(),
            Arc::downgrade(self),
            Arc::clone(&process),
            BufReader::new(stdout),
            max,
        ));
        tokio::spawn(read_stderr(
            self.adapter.clone(),
            Arc::clone(&process),
            BufReader::new(stderr),
        ));
        let mut live = Live {
            process: Arc::clone(&process),
            kill: Some(kill),
        };
        let params = json!({
            "protocolVersion": PROTOCOL,
            "capabilities": self.capabilities,
            "clientInfo": { "name": "gatehouse", "version": env!("CARGO_PKG_VERSION") },
        });
        let opened = async {
            let until = Instant::now() + START_TIMEOUT;
            let answer = self
                .send(&process, "initialize", Some(params), &|| until, None)
                .await?;
            let result = answer
                .get("result")
                .cloned()
                .ok_or_else(|| StdioError::Start {
                    adapter: self.adapter.clone(),
                    reason: format!("it refused `initialize`: {}", answer["error"]),
                })?;
            *process
                .initialized
                .lock()
                .unwrap_or_else(PoisonError::into_inner) = result;
            process
                .write(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }))
                .await
                .map_err(|e| StdioError::Crashed {
                    adapter: self.adapter.clone(),
                    reason: format!("writing to it failed: {e}"),
                })
        };
        match opened.await {
            Ok(()) => Ok(live),
            Err(error) => {
                live.kill(START_FAILED.to_owned());
                let reason = match error {
                    StdioError::Crashed { reason, .. } => reason,
                    other => format!("{other}; {}", process.tail()),
                };
                Err(StdioError::Start {
                    adapter: self.adapter.clone(),
                    reason,
                })
            }
        }
    }

    /// One request on `process`: a place, an id, the line written, the answer awaited (past
    /// `deadline`, which an ask of the caller's moves later, a timeout).
    async fn send(
        self: &Arc<Self>,
        process: &Arc<Process>,
        method: &str,
        mut params: Option<Value>,
        deadline: Deadline<'_>,
        listener: Option<Listener>,
    ) -> Result<Value, StdioError> {
        let _place = tokio::time::timeout_at(deadline().into(), process.places.acquire())
            .await
            .map_err(|_| StdioError::Busy {
                adapter: self.adapter.clone(),
                max: self.supervision.max_in_flight,
            })?
            .expect("the semaphore is never closed");
        *process
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Instant::now();
        let id = process.next_id.fetch_add(1, Ordering::Relaxed);
        // Its progress comes back under a token of the host's: tokens of several calls on one
        // process cannot collide.
        let token = match (&listener, params.as_mut()) {
            (Some(_), Some(params)) => params
                .get_mut("_meta")
                .and_then(|meta| meta.get_mut("progressToken"))
                .map(|token| std::mem::replace(token, json!(format!("{TOKEN_PREFIX}{id}")))),
            _ => None,
        };
        let cancelled =
            crate::relay::until_cancelled(listener.as_ref().and_then(|l| l.cancel.clone()));
        tokio::pin!(cancelled);
        let (answer, mut answered) = oneshot::channel();
        process
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(
                id,
                Waiter {
                    answer,
                    listener,
                    token,
                },
            );
        let mut outstanding = Outstanding {
            inner: self,
            process,
            id,
            check: method != "ping",
            armed: true,
        };
        if process.is_ended() {
            process.end(&self.adapter, "it had ended");
        }
        let mut message = json!({ "jsonrpc": "2.0", "id": id, "method": method });
        if let Some(params) = params {
            message["params"] = params;
        }
        if let Err(e) = process.write(&message).await {
            outstanding.check = false;
            return Err(StdioError::Crashed {
                adapter: self.adapter.clone(),
                reason: format!("writing to it failed: {e}"),
            });
        }
        loop {
            let waited = tokio::select! {
                waited = tokio::time::timeout_at(deadline().into(), &mut answered) => waited,
                () = &mut cancelled => {
                    // Not hung: told to stop. `outstanding` forgets the request.
                    outstanding.check = false;
                    let cancel = json!({
                        "jsonrpc": "2.0",
                        "method": "notifications/cancelled",
                        "params": { "requestId": id, "reason": "the caller cancelled the call" },
                    });
                    let _ = process.write(&cancel).await;
                    return Err(StdioError::Cancelled {
                        adapter: self.adapter.clone(),
                    });
                }
            };
            match waited {
                Ok(Ok(answer)) => {
                    outstanding.armed = false;
                    return answer;
                }
                Ok(Err(_)) => {
                    outstanding.armed = false;
                    return Err(StdioError::Crashed {
                        adapter: self.adapter.clone(),
                        reason: "it ended".to_owned(),
                    });
                }
                // The call waited for its caller meanwhile: its deadline is later now.
                Err(_) if Instant::now() < deadline() => {}
                // `outstanding` checks the process.
                Err(_) => {
                    return Err(StdioError::Timeout {
                        adapter: self.adapter.clone(),
                    });
                }
            }
        }
    }

    /// Passes `message`, a request the server made of its client, on to the listener of the
    /// one request `process` holds, under an id of the host's; the reason if it cannot.
    fn pass_on(&self, process: &Arc<Process>, mut message: Value) -> Result<(), String> {
        let Some((request, listener)) = process.sole_listener() else {
            return Err(
                "gatehouse passes a request of a stdio server's on to a caller only while the \
                 server works on one call"
                    .to_owned(),
            );
        };
        let own = format!(
            "{TOKEN_PREFIX}{}",
            self.next_ask.fetch_add(1, Ordering::Relaxed)
        );
        let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
        asked.insert(
            own.clone(),
            Asked {
                process: Arc::downgrade(process),
                id: message["id"].take(),
                request,
                call: listener.call,
            },
        );
        message["id"] = json!(own);
        if listener.to.try_send(message).is_err() {
            asked.remove(&own);
            return Err("the call it belongs to no longer listens".to_owned());
        }
        Ok(())
    }

    /// Forgets the server's requests passed on with request `id` of `process`: it has ended.
    fn forget_asks(&self, process: &Arc<Process>, id: u64) {
        self.asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, ask| {
                !(ask.request == id && std::ptr::eq(ask.process.as_ptr(), Arc::as_ptr(process)))
            });
    }

    /// Kills `process` if it is still a live one.
    async fn kill(&self, process: &Arc<Process>, reason: String) {
        for slot in &self.slots {
            let mut slot = slot.live.lock().await;
            if let Some(live) = slot.as_mut()
                && Arc::ptr_eq(&live.process, process)
            {
                live.kill(reason);
                *slot = None;
                return;
            }
        }
    }
}

/// A request sent and not yet answered. Given up on (its deadline passed, or its caller went
/// away, as when the call's sandbox ran out of time), it is forgotten, and the process, which
/// may be hung, is asked for a `ping` ([`check_alive`]).
struct Outstanding<'a> {
    inner: &'a Arc<Inner>,
    process: &'a Arc<Process>,
    id: u64,
    /// Whether giving up checks the process (not for a ping, nor after a failed write).
    check: bool,
    /// Cleared once the request is answered or its process ended.
    armed: bool,
}

impl Drop for Outstanding<'_> {
    fn drop(&mut self) {
        self.inner.forget_asks(self.process, self.id);
        if !self.armed {
            return;
        }
        self.process
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.id);
        if self.check
            && !self.process.is_ended()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(check_alive(
                Arc::downgrade(self.inner),
                Arc::clone(self.process),
            ));
        }
    }
}

/// The reason an idle process is stopped with.
const IDLE: &str = "idle";
/// The reason a process is stopped with at shutdown.
const SHUTDOWN_REASON: &str = "the gateway shut down";
/// The reason a process that failed to open its session is stopped with (booked by the start).
const START_FAILED: &str = "it failed to start";
/// The reason a process of one tenant, holding no request, is stopped with when another
/// tenant's request takes its place (`isolate = "tenant"`).
const REPLACED: &str = "its place was given to another tenant";
/// How often a request waits again for a place while every process serves other tenants.
const POOL_WAIT: Duration = Duration::from_millis(50);

/// Reads the sandbox's first process from bubblewrap's `info` pipe, makes the proxy's listener
/// in its network namespace, starts `network` on it, and lets bubblewrap run the server
/// (a byte on `block`).
async fn put_proxy(
    network: &Network,
    number: u64,
    info: std::io::PipeReader,
    block: std::io::PipeWriter,
) -> Result<AbortHandle, String> {
    let listener = tokio::task::spawn_blocking(move || {
        let pid = child_pid(info)?;
        super::netns::listen_in(pid, super::netns::PROXY).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())??;
    let handle = (network.0)(listener, number).map_err(|e| e.to_string())?;
    let mut block = block;
    if let Err(e) = std::io::Write::write_all(&mut block, b"1") {
        handle.abort();
        return Err(format!("cannot let bubblewrap go on: {e}"));
    }
    Ok(handle)
}

/// The `child-pid` bubblewrap writes to its `--info-fd` (a JSON object), read until it
/// parses; the pipe ends when bubblewrap does.
fn child_pid(mut info: std::io::PipeReader) -> Result<u32, String> {
    let mut text = Vec::new();
    let mut chunk = [0u8; 512];
    loop {
        if let Ok(value) = serde_json::from_slice::<Value>(&text)
            && let Some(pid) = value["child-pid"].as_u64()
        {
            return u32::try_from(pid).map_err(|e| e.to_string());
        }
        let read = std::io::Read::read(&mut info, &mut chunk).map_err(|e| e.to_string())?;
        if read == 0 || text.len() > 64 << 10 {
            return Err(format!(
                "bubblewrap named no sandbox process (it wrote {:?})",
                String::from_utf8_lossy(&text)
            ));
        }
        text.extend_from_slice(&chunk[..read]);
    }
}

/// After a request timed out: a process that does not answer a ping is hung, and killed.
/// (Boxed: `send` spawns it, and it calls `send`.)
fn check_alive(
    server: Weak<Inner>,
    process: Arc<Process>,
) -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
    Box::pin(async move {
        let Some(inner) = server.upgrade() else {
            return;
        };
        if process.is_ended() {
            return;
        }
        let until = Instant::now() + PING_TIMEOUT;
        let ping = inner.send(&process, "ping", None, &|| until, None).await;
        if let Err(StdioError::Timeout { .. } | StdioError::Busy { .. }) = ping {
            let reason = format!(
                "it did not answer a ping within {} ms after a request timed out (hung)",
                millis(PING_TIMEOUT)
            );
            inner.kill(&process, reason).await;
        }
    })
}

/// Stops the process in slot `index` after `idle` without requests; ends with it.
async fn reap_when_idle(server: Weak<Inner>, index: usize, idle: Duration) {
    let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(5));
    loop {
        tokio::time::sleep(every).await;
        let Some(inner) = server.upgrade() else {
            return;
        };
        let mut slot = inner.slots[index].live.lock().await;
        let Some(live) = slot.as_mut() else {
            return;
        };
        if live.process.is_ended() {
            return;
        }
        let quiet = live.process.users() == 0
            && live
                .process
                .pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .is_empty();
        let last_used = *live
            .process
            .last_used
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if quiet && last_used.elapsed() >= idle {
            tracing::info!(adapter = %inner.adapter, idle_ms = millis(idle), "stdio server stopped: idle");
            live.kill(IDLE.to_owned());
            *slot = None;
            return;
        }
    }
}

/// What reading one line found.
enum Line {
    /// A whole line (without its newline).
    Whole,
    /// A line longer than the bound: `buf` holds its first bytes, the rest was not read.
    Over,
    /// The stream ended (`buf` holds any unterminated rest).
    End,
}

/// Reads one line into `buf` (cleared first), at most `max` bytes of it.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(Line::End);
        }
        let (take, whole) = match available.iter().position(|b| *b == b'\n') {
            Some(at) => (at, true),
            None => (available.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        buf.extend_from_slice(&available[..take.min(room)]);
        let over = take > room;
        reader.consume(if whole && !over {
            take + 1
        } else {
            take.min(room)
        });
        if over {
            return Ok(Line::Over);
        }
        if whole {
            return Ok(Line::Whole);
        }
    }
}

/// Reads the server's messages: answers go to their requests; a message over `max` bytes
/// kills the process.
async fn read_stdout<R: AsyncBufRead + Unpin>(
    adapter: String,
    server: Weak<Inner>,
    process: Arc<Process>,
    mut reader: R,
    max: usize,
) {
    let mut buf = Vec::new();
    loop {
        match read_line(&mut reader, &mut buf, max).await {
            Ok(Line::Whole) => {}
            Ok(Line::Over) => {
                let reason = format!(
                    "it wrote a message longer than {max} bytes (`max_message_kib`); refused"
                );
                tracing::warn!(adapter = %adapter, %reason, "stdio server restarted");
                if let Some(inner) = server.upgrade() {
                    process.end(&adapter, &reason);
                    inner.kill(&process, reason).await;
                }
                return;
            }
            Ok(Line::End) | Err(_) => return,
        }
        if buf.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&buf) else {
            tracing::debug!(adapter = %adapter, "stdio server wrote a line that is not JSON; ignored");
            continue;
        };
        let id = message.get("id");
        let is_answer = message.get("result").is_some() || message.get("error").is_some();
        match (id, message.get("method").and_then(Value::as_str)) {
            (Some(id), None) if is_answer => {
                let waiter = id.as_u64().and_then(|id| {
                    process
                        .pending
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .remove(&id)
                });
                if let Some(waiter) = waiter {
                    let _ = waiter.answer.send(Ok(message));
                }
            }
            (Some(id), Some("ping")) => {
                let pong = json!({ "jsonrpc": "2.0", "id": id, "result": {} });
                let _ = process.write(&pong).await;
            }
            (Some(id), Some(_)) => {
                let id = id.clone();
                let passed = match server.upgrade() {
                    Some(inner) => inner.pass_on(&process, message),
                    None => Err("the server is gone".to_owned()),
                };
                if let Err(reason) = passed {
                    let refusal = json!({
                        "jsonrpc": "2.0",
                        "id": id,
                        "error": { "code": -32603, "message": reason },
                    });
                    let _ = process.write(&refusal).await;
                }
            }
            (None, Some("notifications/progress")) => process.progress(message),
            (None, Some("notifications/message")) => {
                if let Some((_, listener)) = process.sole_listener() {
                    let _ = listener.to.try_send(message);
                }
            }
            _ => {}
        }
    }
}

/// Logs the server's stderr, a line at a time, rate-limited; keeps the last lines.
async fn read_stderr<R: AsyncBufRead + Unpin>(
    adapter: String,
    process: Arc<Process>,
    mut reader: R,
) {
    let mut buf = Vec::new();
    let mut window = Instant::now();
    let mut logged = 0u32;
    let mut dropped = 0u64;
    loop {
        let line = match read_line(&mut reader, &mut buf, MAX_STDERR_LINE).await {
            Ok(Line::Whole) => String::from_utf8_lossy(&buf).into_owned(),
            Ok(Line::Over) => {
                let cut = format!("{}…", String::from_utf8_lossy(&buf));
                // Skip the rest of the long line.
                let mut rest = Vec::new();
                while let Ok(Line::Over) = read_line(&mut reader, &mut rest, MAX_STDERR_LINE).await
                {
                }
                cut
            }
            Ok(Line::End) if !buf.is_empty() => String::from_utf8_lossy(&buf).into_owned(),
            Ok(Line::End) | Err(_) => return,
        };
        {
            let mut tail = process
                .stderr_tail
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if tail.len() == STDERR_TAIL {
                tail.remove(0);
            }
            tail.push(line.chars().take(200).collect());
        }
        if window.elapsed() >= Duration::from_secs(1) {
            if dropped > 0 {
                tracing::warn!(adapter = %adapter, dropped, "stdio server stderr: lines not logged (rate limit)");
            }
            window = Instant::now();
            logged = 0;
            dropped = 0;
        }
        if logged < STDERR_LINES_PER_SECOND {
            logged += 1;
            tracing::info!(adapter = %adapter, "stdio server stderr: {line}");
        } else {
            dropped += 1;
        }
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

//! A real PostgreSQL server for one test: the distribution's `initdb` and `pg_ctl`, a cluster
//! in a temporary directory, listening on a free loopback port (no Unix socket), trust
//! authentication for the `gatehouse` role. Stopped (immediately) when dropped.
//!
//! Where the server binaries are not installed, [`Postgres::start`] panics saying so: a test
//! that needs PostgreSQL never passes without it. `.ci/run` installs them.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running PostgreSQL server.
pub struct Postgres {
    /// The loopback port it listens on.
    pub port: u16,
    bin: PathBuf,
    data: PathBuf,
    /// Run the server as this user (`initdb` refuses to run as root).
    user: Option<&'static str>,
    _dir: tempfile::TempDir,
}

impl Postgres {
    /// Creates a cluster and starts the server; panics (naming what is missing) if it cannot.
    pub fn start() -> Self {
        let bin = server_binaries().unwrap_or_else(|| {
            panic!(
                "PostgreSQL's server binaries (initdb, pg_ctl) are not on PATH or under \
                 /usr/lib/postgresql/*/bin: install PostgreSQL (Debian: apt-get install \
                 postgresql; .ci/run does) to run the shared-store tests"
            )
        });
        let root = running_as_root();
        let user = root.then_some("postgres");
        let dir = tempfile::tempdir().expect("a temporary directory");
        let data = dir.path().join("data");
        std::fs::create_dir(&data).expect("the data directory");
        if root {
            // The server runs as `postgres`: it needs its directory, and a way into it.
            set_mode(dir.path(), 0o755);
            chown_to_postgres(&data);
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let server = Self {
            port,
            bin,
            data,
            user,
            _dir: dir,
        };
        server.run(
            "initdb",
            &[
                "-D",
                &server.data.display().to_string(),
                "-U",
                "gatehouse",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        );
        server.resume();
        server
    }

    /// The connection URL of the `postgres` database as `gatehouse`.
    pub fn url(&self) -> String {
        url(self.port)
    }

    /// Stops the server (fast shutdown: open connections are closed).
    pub fn stop(&self) {
        self.pg_ctl(&["stop", "-m", "fast"]);
    }

    /// Starts the stopped server again on the same port.
    pub fn resume(&self) {
        let log = self.data.join("server.log").display().to_string();
        let options = format!("-p {} -k '' -c listen_addresses=127.0.0.1", self.port);
        self.pg_ctl(&["start", "-w", "-l", &log, "-o", &options]);
    }

    fn pg_ctl(&self, args: &[&str]) {
        let data = self.data.display().to_string();
        let mut all = vec!["-D", data.as_str()];
        all.extend_from_slice(args);
        self.run("pg_ctl", &all);
    }

    /// `program` of the server's binaries, run as the server's user.
    fn command(&self, program: &str) -> Command {
        let program = self.bin.join(program);
        let mut command = match self.user {
            Some(user) => {
                let mut command = Command::new("runuser");
                command.args(["-u", user, "--"]).arg(&program);
                command
            }
            None => Command::new(&program),
        };
        command.current_dir("/");
        command
    }

    fn run(&self, program: &str, args: &[&str]) {
        let output = self
            .command(program)
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
        assert!(
            output.status.success(),
            "{program} {args:?} failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.data.display().to_string();
        let _ = self
            .command("pg_ctl")
            .args(["-D", &data, "stop", "-m", "immediate"])
            .output();
    }
}

/// Whether PostgreSQL's server binaries are installed (for benchmarks, which skip their rows
/// without them; tests call [`Postgres::start`], which panics).
pub fn installed() -> bool {
    server_binaries().is_some()
}

/// The directory holding `initdb` and `pg_ctl`: on PATH, else the newest under
/// `/usr/lib/postgresql/*/bin` (Debian puts them there).
fn server_binaries() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .unwrap_or_default();
    let mut versioned: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path().join("bin"))
                .collect()
        })
        .unwrap_or_default();
    versioned.sort_by_key(|p| std::cmp::Reverse(version_of(p)));
    on_path
        .into_iter()
        .chain(versioned)
        .map(|dir| match std::fs::canonicalize(dir.join("pg_ctl")) {
            // A symlink on PATH (Debian's wrappers) points into the real directory.
            Ok(real) => real.parent().map_or(dir, Path::to_path_buf),
            Err(_) => dir,
        })
        .find(|dir| dir.join("initdb").is_file() && dir.join("pg_ctl").is_file())
}

fn version_of(bin: &Path) -> u32 {
    bin.parent()
        .and_then(Path::file_name)
        .and_then(|v| v.to_str())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn running_as_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .expect("the directory's mode can be set");
}

fn chown_to_postgres(path: &Path) {
    let status = Command::new("chown")
        .arg("postgres:")
        .arg(path)
        .status()
        .expect("chown runs");
    assert!(
        status.success(),
        "cannot give {} to postgres",
        path.display()
    );
}

/// The `postgres` database as `gatehouse`, on a loopback port.
fn url(port: u16) -> String {
    format!("postgres://gatehouse@127.0.0.1:{port}/postgres?sslmode=disable")
}

/// A TCP proxy on loopback that holds every byte for `delay` each way before passing it on: a
/// database at a distance, for benchmarks. Bytes keep their order, and the delay does not
/// bound throughput (what was read is forwarded when its time comes, while more is read).
/// tokio's timer ticks in milliseconds, so a delay of 2 ms holds bytes 2 to 3 ms.
pub struct DelayProxy {
    /// The loopback port it listens on.
    pub port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl DelayProxy {
    /// Listens on a free loopback port, forwarding each connection to `127.0.0.1:upstream`.
    /// Call inside a tokio runtime; it serves until dropped.
    pub async fn start(upstream: u16, delay: std::time::Duration) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("the proxy binds a loopback port");
        let port = listener.local_addr().expect("its address").port();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await
                else {
                    continue;
                };
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let (client_read, client_write) = client.into_split();
                let (server_read, server_write) = server.into_split();
                tokio::spawn(delayed(client_read, server_write, delay));
                tokio::spawn(delayed(server_read, client_write, delay));
            }
        });
        Self { port, task }
    }

    /// The URL of [`Postgres::url`]'s database, through this proxy.
    pub fn url(&self) -> String {
        url(self.port)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Copies `from` to `to`, each chunk `delay` after it was read.
async fn delayed(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: std::time::Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (chunks, mut due) = tokio::sync::mpsc::unbounded_channel();
    let read = async move {
        let mut buffer = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buffer).await {
            let at = tokio::time::Instant::now() + delay;
            if chunks.send((at, buffer[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = due.recv().await {
            tokio::time::sleep_until(at).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(read, write);
}

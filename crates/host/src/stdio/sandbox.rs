//! The sandbox a stdio server runs in, made by bubblewrap (`bwrap`), with its limits set by
//! util-linux's `prlimit` and, under a root gateway, its user changed by `setpriv`: this
//! module writes command lines, no namespace code.
//!
//! What the process sees ([`Launch::command`]):
//! 1. a read-only system: `/usr` (and `/bin`, `/lib`, `/lib64`, `/sbin` as the host has them),
//!    and from `/etc` only what programs need to run ([`ETC`]: the loader cache, TLS roots,
//!    `passwd`, `group`, time zone); never the rest of `/etc`, `/root`, `/home`, `/var` or the
//!    gateway's config, store and keys;
//! 2. a private `/tmp` (a fresh tmpfs, also `HOME` and `TMPDIR`), its own `/proc` and a
//!    minimal `/dev` with a `/dev/shm` of its own; `/tmp` and `/dev/shm` are bounded to half
//!    the memory limit each ([`Limits::tmpfs_bytes`]), and the root and `/dev` (tmpfs mounts
//!    bubblewrap makes, sized at half the host's memory) are read-only, so files the server
//!    writes hold at most the memory limit of the host's memory;
//! 3. the package's install directory read-only, and only the directories its grant lists,
//!    read-only or read-write, at the same paths;
//! 4. its own user, PID, IPC, UTS, cgroup and network namespaces (`--unshare-all`): no
//!    network at all, not even the host's loopback (only a loopback of its own), unless
//!    its adapter's egress grant names destinations: then its one way out is the egress
//!    proxy the gateway puts on that loopback ([`super::netns`], `crate::egress`'s
//!    `proxy`), named in its environment ([`PROXY_VARIABLES`]); no new privileges (bubblewrap always sets
//!    `PR_SET_NO_NEW_PRIVS`), every capability dropped, a new session (no terminal to
//!    inject into); it dies with the gateway (`--die-with-parent`);
//! 5. exactly the environment its grant names, besides `PATH`, `HOME` and `TMPDIR`;
//! 6. limits on memory (the address space of each process, `RLIMIT_AS`, which counts shared
//!    mappings and a runtime's reservations, and the size of each file it writes,
//!    `RLIMIT_FSIZE`, which bounds a `memfd` too), CPU time, processes and open files
//!    (`prlimit`), and under a root gateway a user of its own (`setpriv`), so the process
//!    limit counts its processes only and it owns none of root's files;
//! 7. no descriptor of the gateway's but its standard streams (and, for bubblewrap alone, the
//!    two pipes of [`ProxyFds`]): every other is closed at `exec`, even one a library's
//!    after-fork handler made inheritable (wasmtime re-opens `/proc/self/pagemap` with
//!    `dup2`, which clears close-on-exec).
//!
//! The memory limit is per process, so a server that forks may hold up to `processes` times
//! it; a cgroup would bound the whole server, and is not used (see
//! `docs/hostile-input.md`).
//!
//! Where bubblewrap cannot make the sandbox ([`probe`]: not installed, no user namespaces),
//! the server is refused, saying why, unless its grant says `bare = true`: then it runs with
//! 5, 6 and 7 only, and its files are bounded per file only ([`MemoryLimit`]).

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::spec::{DirGrant, DirMode, PackagePin};

/// Files and directories of `/etc` the sandbox shows, read-only, where the host has them.
pub const ETC: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
];
/// Top-level directories that are links into `/usr` on merged-`/usr` systems, or directories
/// of their own elsewhere; shown as the host has them.
const SYSTEM: &[&str] = &["/bin", "/lib", "/lib64", "/lib32", "/libx32", "/sbin"];
/// `PATH` inside the sandbox.
pub const PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The variables that name the egress proxy to a server granted the network: what curl,
/// Python (`urllib`, `requests`, `httpx`), Go and Node (with `NODE_USE_ENV_PROXY=1`, from
/// Node 22.21 and 24) read.
pub const PROXY_VARIABLES: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// The descriptors bubblewrap is given when the gateway puts the egress proxy into the
/// sandbox: it writes the sandbox's first process id (`{"child-pid": N}`) to `info`, and
/// runs the server only when a byte can be read from `block`, so the proxy listens before
/// the server's first request. Both must be inheritable in the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProxyFds {
    /// bubblewrap's `--info-fd`.
    pub info: i32,
    /// bubblewrap's `--block-fd`.
    pub block: i32,
}

/// The limits of one process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// `RLIMIT_AS` and `RLIMIT_FSIZE`, bytes; half of it bounds each of `/tmp` and
    /// `/dev/shm`.
    pub memory_bytes: u64,
    /// `RLIMIT_CPU`, seconds.
    pub cpu_seconds: u64,
    /// `RLIMIT_NPROC`.
    pub processes: u64,
    /// `RLIMIT_NOFILE`.
    pub open_files: u64,
}

impl Limits {
    /// The size of each of the sandbox's `/tmp` and `/dev/shm`: half the memory limit, so
    /// both together hold at most the limit (at least one page each).
    pub fn tmpfs_bytes(&self) -> u64 {
        (self.memory_bytes / 2).max(4096)
    }

    /// The memory limit that applies to a process started `sandboxed` or bare.
    pub fn memory(&self, sandboxed: bool) -> MemoryLimit {
        MemoryLimit {
            process_bytes: self.memory_bytes,
            file_bytes: self.memory_bytes,
            tmpfs_bytes: sandboxed.then(|| self.tmpfs_bytes()),
        }
    }
}

/// The memory limit that applied to a server's processes, as `gatehouse admin plugins` shows
/// it. There is no cgroup: each bound is per process, or per mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct MemoryLimit {
    /// The address space of each process (`RLIMIT_AS`: heap, shared mappings and a runtime's
    /// reservations), bytes.
    pub process_bytes: u64,
    /// The size of each file a process writes (`RLIMIT_FSIZE`, a `memfd` included), bytes.
    pub file_bytes: u64,
    /// The size of each of the sandbox's `/tmp` and `/dev/shm`, bytes; `None` for a server
    /// run bare (`bare = true`), whose files are bounded per file only.
    pub tmpfs_bytes: Option<u64>,
}

/// Everything needed to start one server's process.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program (placeholders expanded).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its environment besides `PATH`, `HOME`, `TMPDIR`.
    pub env: Vec<(String, String)>,
    /// The package's install directory, shown read-only.
    pub package_dir: Option<PathBuf>,
    /// What the files in `package_dir` must be: checked before every start, so a package
    /// changed after the gateway loaded it is not run.
    pub pin: Option<PackagePin>,
    /// The granted directories.
    pub dirs: Vec<DirGrant>,
    /// The limits.
    pub limits: Limits,
    /// The uid (and gid) to run as, when the gateway is root.
    pub run_as: u32,
    /// The bubblewrap program.
    pub bwrap: PathBuf,
    /// Whether to run without bubblewrap where it cannot make the sandbox.
    pub bare: bool,
}

/// Whether the gateway runs as root (the owner of its own `/proc/self`): then each server
/// runs as a user of its own.
pub fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

impl Launch {
    /// The command that starts the server: in the sandbox when `sandboxed`, else bare (limits,
    /// user and environment only). Its standard streams are for the caller to set. With
    /// `proxy` (sandboxed only), bubblewrap names the sandbox's first process on
    /// `proxy.info` and waits for a byte on `proxy.block` before it runs the server, and the
    /// server's environment names the egress proxy ([`ProxyFds`]).
    pub fn command(&self, sandboxed: bool, proxy: Option<ProxyFds>) -> tokio::process::Command {
        let mut argv: Vec<String> = Vec::new();
        if is_root() {
            argv.extend([
                "setpriv".to_owned(),
                format!("--reuid={}", self.run_as),
                format!("--regid={}", self.run_as),
                "--clear-groups".to_owned(),
                "--".to_owned(),
            ]);
        }
        let limits = &self.limits;
        argv.extend([
            "prlimit".to_owned(),
            format!("--as={}", limits.memory_bytes),
            format!("--fsize={}", limits.memory_bytes),
            format!("--cpu={}", limits.cpu_seconds),
            format!("--nproc={}", limits.processes),
            format!("--nofile={}", limits.open_files),
            // No core files: a crash dump would write the server's memory somewhere.
            "--core=0".to_owned(),
            "--".to_owned(),
        ]);
        if sandboxed {
            argv.push(self.bwrap.display().to_string());
            argv.extend(self.bwrap_args(proxy));
        }
        argv.push(self.program.display().to_string());
        argv.extend(self.args.iter().cloned());
        let mut command = tokio::process::Command::new(&argv[0]);
        command.args(&argv[1..]);
        command.env_clear();
        if !sandboxed {
            // bubblewrap sets the environment inside; bare, the process inherits this one.
            command
                .env("PATH", PATH)
                .env("HOME", "/tmp")
                .env("TMPDIR", "/tmp");
            for (name, value) in &self.env {
                command.env(name, value);
            }
            command.current_dir("/tmp");
        } else {
            // Only for finding setpriv, prlimit and bwrap; the sandbox gets `PATH` anew.
            command.env("PATH", PATH);
        }
        command.kill_on_drop(true);
        let mut keep: Vec<i32> = proxy
            .map(|fds| vec![fds.info, fds.block])
            .unwrap_or_default();
        keep.sort_unstable();
        #[allow(unsafe_code, reason = "system calls between fork and exec")]
        // SAFETY: runs in the forked child before `exec`, and makes system calls only (no
        // allocation, no lock): `keep` was made before the fork.
        unsafe {
            command.pre_exec(move || inherit_only(&keep));
        }
        command
    }

    /// bubblewrap's options (before the program).
    fn bwrap_args(&self, proxy: Option<ProxyFds>) -> Vec<String> {
        let mut args: Vec<String> = [
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--ro-bind",
            "/usr",
            "/usr",
        ]
        .map(str::to_owned)
        .to_vec();
        for dir in SYSTEM {
            match std::fs::read_link(dir) {
                Ok(target) => {
                    args.extend([
                        "--symlink".to_owned(),
                        target.display().to_string(),
                        (*dir).to_owned(),
                    ]);
                }
                Err(_) if Path::new(dir).is_dir() => {
                    args.extend(["--ro-bind".to_owned(), (*dir).to_owned(), (*dir).to_owned()]);
                }
                Err(_) => {}
            }
        }
        for path in ETC {
            args.extend([
                "--ro-bind-try".to_owned(),
                (*path).to_owned(),
                (*path).to_owned(),
            ]);
        }
        let tmpfs = self.limits.tmpfs_bytes().to_string();
        args.extend(
            [
                "--proc",
                "/proc",
                "--dev",
                "/dev",
                "--size",
                &tmpfs,
                "--tmpfs",
                "/dev/shm",
                "--remount-ro",
                "/dev",
                "--size",
                &tmpfs,
                "--tmpfs",
                "/tmp",
            ]
            .map(str::to_owned),
        );
        // A program outside the system and the package (e.g. a node under ~/.nvm) is shown
        // alone, read-only, at its path.
        let program = self.program.display().to_string();
        let shown = self.program.starts_with("/usr")
            || self
                .package_dir
                .as_ref()
                .is_some_and(|dir| self.program.starts_with(dir));
        if !shown {
            args.extend(["--ro-bind".to_owned(), program.clone(), program]);
        }
        if let Some(dir) = &self.package_dir {
            let dir = dir.display().to_string();
            args.extend(["--ro-bind".to_owned(), dir.clone(), dir]);
        }
        for grant in &self.dirs {
            let path = grant.path.display().to_string();
            let option = match grant.mode {
                DirMode::Ro => "--ro-bind",
                DirMode::Rw => "--bind",
            };
            args.extend([option.to_owned(), path.clone(), path]);
        }
        // Last of the mounts: the root tmpfs holds the mount points made above, and no file
        // of the server's (non-recursive: `/tmp` and the granted directories stay as they are).
        args.extend(["--remount-ro", "/"].map(str::to_owned));
        args.extend(
            [
                "--chdir",
                "/tmp",
                "--clearenv",
                "--setenv",
                "PATH",
                PATH,
                "--setenv",
                "HOME",
                "/tmp",
                "--setenv",
                "TMPDIR",
                "/tmp",
            ]
            .map(str::to_owned),
        );
        for (name, value) in &self.env {
            args.extend(["--setenv".to_owned(), name.clone(), value.clone()]);
        }
        if let Some(fds) = proxy {
            let url = format!("http://{}", super::netns::PROXY);
            for name in PROXY_VARIABLES {
                args.extend(["--setenv".to_owned(), (*name).to_owned(), url.clone()]);
            }
            args.extend([
                "--setenv".to_owned(),
                "NODE_USE_ENV_PROXY".to_owned(),
                "1".to_owned(),
                "--info-fd".to_owned(),
                fds.info.to_string(),
                "--block-fd".to_owned(),
                fds.block.to_string(),
            ]);
        }
        args.push("--".to_owned());
        args
    }
}

/// Between fork and exec: every descriptor above 2 is closed at `exec` but those of `keep`
/// (sorted), which are made inheritable. Descriptors are marked close-on-exec rather than
/// closed, so the one the standard library reports a failed `exec` on still works.
fn inherit_only(keep: &[i32]) -> std::io::Result<()> {
    let mut first = 3;
    for &fd in keep {
        let Ok(fd_number) = u32::try_from(fd) else {
            continue;
        };
        if fd_number < first {
            continue;
        }
        if fd_number > first {
            close_on_exec(first, fd_number - 1)?;
        }
        // SAFETY: `fd` is one of the pipes the caller holds open across the spawn.
        #[allow(unsafe_code, reason = "a descriptor the caller keeps open")]
        let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        rustix::io::fcntl_setfd(borrowed, rustix::io::FdFlags::empty())?;
        first = fd_number + 1;
    }
    close_on_exec(first, u32::MAX)
}

/// Marks the descriptors `first..=last` close-on-exec: `close_range(2)` (Linux 5.11), else
/// one by one up to the open-file limit.
fn close_on_exec(first: u32, last: u32) -> std::io::Result<()> {
    #[allow(unsafe_code, reason = "system calls on plain integers")]
    // SAFETY: `close_range`, `getrlimit` and `fcntl` take integers and a local struct, and are
    // async-signal-safe.
    unsafe {
        if libc::syscall(
            libc::SYS_close_range,
            first,
            last,
            libc::CLOSE_RANGE_CLOEXEC,
        ) == 0
        {
            return Ok(());
        }
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut limit) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let end = u32::try_from(limit.rlim_cur.min(u64::from(last))).unwrap_or(last);
        for fd in first..=end {
            let Ok(fd) = i32::try_from(fd) else {
                break;
            };
            // A descriptor not open fails with EBADF: nothing to mark.
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        }
    }
    Ok(())
}

/// A bubblewrap program, and whether it can make a sandbox here.
type Probed = (PathBuf, Result<(), String>);

/// Whether bubblewrap at `bwrap` can make a sandbox here: `Ok`, or why not and what to do.
/// Run once per program and remembered (a host does not gain user namespaces while it runs).
pub async fn probe(launch: &Launch) -> Result<(), String> {
    static PROBED: OnceLock<Mutex<Vec<Probed>>> = OnceLock::new();
    let probed = PROBED.get_or_init(Mutex::default);
    if let Some((_, known)) = probed
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .find(|(path, _)| *path == launch.bwrap)
    {
        return known.clone();
    }
    let found = if launch.bwrap.is_absolute() {
        launch.bwrap.is_file()
    } else {
        std::env::split_paths(PATH).any(|dir| dir.join(&launch.bwrap).is_file())
    };
    if !found {
        let result = Err(format!(
            "bubblewrap (`{}`) is not installed; install it (Debian: apt-get install \
             bubblewrap) or name it in `[stdio] bwrap`",
            launch.bwrap.display()
        ));
        probed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((launch.bwrap.clone(), result.clone()));
        return result;
    }
    let trial = Launch {
        program: PathBuf::from("/usr/bin/true"),
        args: Vec::new(),
        env: Vec::new(),
        package_dir: None,
        pin: None,
        dirs: Vec::new(),
        ..launch.clone()
    };
    let mut command = trial.command(true, None);
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null());
    let result =
        match tokio::time::timeout(std::time::Duration::from_secs(10), command.output()).await {
            Ok(Ok(output)) if output.status.success() => Ok(()),
            Ok(Ok(output)) => Err(format!(
                "bubblewrap ({}) cannot make the sandbox here: {}; it needs user namespaces \
             (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0), and \
             bubblewrap 0.5 or later (`--size`, which bounds the sandbox's /tmp and /dev/shm)",
                launch.bwrap.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            )),
            Ok(Err(e)) => Err(format!(
                "cannot run the sandbox ({}, with util-linux's setpriv and prlimit): {e}; install \
             bubblewrap (Debian: apt-get install bubblewrap) or name it in `[stdio] bwrap`",
                launch.bwrap.display()
            )),
            Err(_) => Err("bubblewrap did not start `true` within 10 s".to_owned()),
        };
    probed
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((launch.bwrap.clone(), result.clone()));
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(script: &str, dirs: Vec<DirGrant>) -> Launch {
        Launch {
            program: PathBuf::from("/bin/sh"),
            args: vec!["-c".to_owned(), script.to_owned()],
            env: vec![("GRANTED".to_owned(), "yes".to_owned())],
            package_dir: None,
            pin: None,
            dirs,
            limits: Limits {
                memory_bytes: 256 << 20,
                cpu_seconds: 10,
                processes: 32,
                open_files: 64,
            },
            run_as: 61_234,
            bwrap: PathBuf::from("bwrap"),
            bare: false,
        }
    }

    async fn run(launch: &Launch) -> String {
        let output = launch.command(true, None).output().await.unwrap();
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The sandbox as the process sees it: read-only system, private /tmp, only the granted
    /// directories, exactly the granted environment, its own PID namespace, no network, and
    /// none of /root, /home or /etc/shadow. Needs bubblewrap (`.ci/run` installs it).
    #[tokio::test]
    async fn the_process_sees_only_what_it_is_granted() {
        let outside = tempfile::tempdir().unwrap();
        let granted = tempfile::tempdir().unwrap();
        let readable = tempfile::tempdir().unwrap();
        for dir in [&granted, &readable] {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        }
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::fs::write(readable.path().join("r"), "r").unwrap();
        let script = format!(
            r#"
            echo x > /usr/probe 2>/dev/null && echo usr-writable || echo usr-readonly
            echo x > /tmp/probe && echo tmp-writable
            test -e {outside} && echo outside-seen || echo outside-unseen
            echo x > {granted}/w && echo granted-writable
            cat {readable}/r >/dev/null && echo readable-read
            echo x > {readable}/w 2>/dev/null && echo readable-writable || echo readable-readonly
            test -e /etc/shadow && echo shadow-seen || echo shadow-unseen
            test -e /root && echo root-seen || echo root-unseen
            echo "env: $(env | cut -d= -f1 | sort | tr '\n' ' ')"
            echo "pid: $$"
            cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | tr '\n' ' '; echo
            "#,
            outside = outside.path().display(),
            granted = granted.path().display(),
            readable = readable.path().display(),
        );
        let dirs = vec![
            DirGrant::parse(&format!("{}:rw", granted.path().display())).unwrap(),
            DirGrant::parse(&format!("{}:ro", readable.path().display())).unwrap(),
        ];
        let seen = run(&launch(&script, dirs)).await;
        let lines: Vec<&str> = seen.lines().map(str::trim).collect();
        assert_eq!(
            lines,
            [
                "usr-readonly",
                "tmp-writable",
                "outside-unseen",
                "granted-writable",
                "readable-read",
                "readable-readonly",
                "shadow-unseen",
                "root-unseen",
                "env: GRANTED HOME PATH PWD TMPDIR",
                // bubblewrap's reaper is 1 in the new PID namespace.
                "pid: 2",
                "lo",
            ],
            "{seen}"
        );
        assert!(granted.path().join("w").exists());
        assert!(!readable.path().join("w").exists());
    }

    /// A fork bomb stops at the process limit, inside the sandbox.
    #[tokio::test]
    async fn the_process_limit_holds() {
        let mut bomb = launch("", Vec::new());
        // A user of its own: RLIMIT_NPROC counts a user's processes, so the bomb's sleeping
        // children must not use up the places of the other tests' processes.
        bomb.run_as = 61_235;
        bomb.program = PathBuf::from("/usr/bin/python3");
        bomb.args = vec![
            "-c".to_owned(),
            "import os, time\nn = 0\nfor _ in range(100):\n    try:\n        pid = os.fork()\n    except OSError:\n        break\n    if pid == 0:\n        time.sleep(5)\n        os._exit(0)\n    n += 1\nprint('started', n)".to_owned(),
        ];
        let seen = run(&bomb).await;
        let started: u32 = seen.trim().trim_start_matches("started ").parse().unwrap();
        assert!(started < 32, "{seen}");
    }

    #[tokio::test]
    async fn a_missing_bubblewrap_is_refused_saying_what_to_install() {
        let mut launch = launch("true", Vec::new());
        launch.bwrap = PathBuf::from("/nonexistent/bwrap");
        let err = probe(&launch).await.unwrap_err();
        assert!(err.contains("apt-get install bubblewrap"), "{err}");
    }
}

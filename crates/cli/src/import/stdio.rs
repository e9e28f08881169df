//! `gatehouse import mcp --stdio -- COMMAND ARGS…`: the import of an MCP server that speaks on
//! its standard streams.
//!
//! 1. **Pin** what runs ([`pin`]):
//!    - `npx [-y] PACKAGE[@VERSION] ARGS…`: the package is installed with `npm install
//!      --ignore-scripts` into `<packages_dir>/npm/<name>@<version>`; the command becomes
//!      `node` and the package's own bin script, and the pin records the exact version, npm's
//!      `integrity` and a digest of the installed files;
//!    - `uvx [--from SPEC] NAME ARGS…` (or `NAME==VERSION`, `NAME@VERSION`): the package is
//!      installed from wheels only (a source distribution's build would run its code at
//!      import) with pip into a virtual environment of the system's Python at
//!      `<packages_dir>/pypi/<name>@<version>`; the command is its console script, and the pin
//!      records the version, the sha256 of the distribution pip installed, and the digest;
//!    - any other program: its absolute path (found on `PATH` if need be) and the arguments.
//!
//!    A package's name and version make its install directory's name, so both are checked
//!    ([`Registry::check_name`], [`Registry::check_version`]: never a path) before anything
//!    is moved, removed or written there, and every such path must resolve to one directory
//!    under the packages directory (`install_dir`). Under a root gateway the server's own
//!    user must be able to read the packages directory: checked before installing.
//! 2. **List**: the server is started once, in the sandbox the gateway will run it in, with
//!    the directories (`--dir`) and environment (`--env`) the import names, and asked for its
//!    tools (every `tools/list` page). A read-write directory that does not exist yet is made
//!    first, owned under a root gateway by the user the server runs as.
//! 3. **Build**: the tools become capabilities as for an HTTP server ([`super::mcp`]), each
//!    forwarding to `stdio://<ID>`; the manifest's `[stdio]` table is the pin and what the
//!    server asks for, and the config snippet grants it in a `[[stdio.server]]` entry. Each
//!    `--net URL` is an egress request of the manifest and a `[[egress.grant]]` of the
//!    snippet (with the `--header` credentials): the destinations the server reaches through
//!    its egress proxy. Listing the tools runs without the network.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use gatehouse_host::config::{MethodName, TUNNEL_METHODS};
use gatehouse_host::stdio::pin::tree_digest;
use gatehouse_host::stdio::reach::{self, Access};
use gatehouse_host::stdio::spec::DirMode;
use gatehouse_host::stdio::{
    DirGrant, EnvBinding, PackagePin, Registry, ServerConfig, StdioConfig, StdioServers, StdioSpec,
};
use serde_json::{Value, json};

use super::headers::HeaderCredential;
use super::mcp::{Listing, build_with};
use super::{Destination, Import, ImportError, Options};

/// The protocol version the gateway's session with a stdio server is in (the host opens it).
const SESSION: &str = "2025-11-25";
/// How long listing the tools may take, start included.
const LIST_TIMEOUT: Duration = Duration::from_secs(60);
/// `tools/list` pages read at most.
const MAX_PAGES: usize = 100;

/// What `--stdio` is asked to import: the command line and what the server gets.
#[derive(Debug, Clone, Default)]
pub struct Source {
    /// The command and its arguments, as an operator would type them.
    pub command: Vec<String>,
    /// `--env NAME=${ENV}` (the value read from the gateway's environment) or `NAME=value`.
    pub env: BTreeMap<String, EnvBinding>,
    /// `--dir PATH[:ro|:rw]`.
    pub dirs: Vec<DirGrant>,
    /// Where packages are installed (`[stdio] packages_dir`); `None`: the default.
    pub packages_dir: Option<PathBuf>,
    /// `--net URL`: destinations the server reaches through its egress proxy.
    pub net: Vec<String>,
    /// `--header`: credentials the gateway injects into its plain-http requests to each of
    /// them.
    pub headers: Vec<HeaderCredential>,
}

impl Source {
    /// Parses `--env` values: `NAME=${ENV}` or `NAME=value`.
    pub fn parse_env(text: &str) -> Result<(String, EnvBinding), ImportError> {
        let invalid = |problem: &str| ImportError::Stdio(format!("--env `{text}`: {problem}"));
        let (name, value) = text
            .split_once('=')
            .ok_or_else(|| invalid("write it as NAME=${ENV} or NAME=value"))?;
        if !gatehouse_host::stdio::spec::is_env_name(name) {
            return Err(invalid("the name is not an environment variable name"));
        }
        let binding = match value.strip_prefix("${").and_then(|v| v.strip_suffix('}')) {
            Some(env) if gatehouse_host::stdio::spec::is_env_name(env) => EnvBinding {
                value: None,
                env: Some(env.to_owned()),
                file: None,
            },
            Some(_) => return Err(invalid("`${...}` must name an environment variable")),
            None => EnvBinding {
                value: Some(value.to_owned()),
                env: None,
                file: None,
            },
        };
        Ok((name.to_owned(), binding))
    }

    /// Parses a `--dir` value: a directory (a relative path is the working directory's),
    /// `:ro` (the default) or `:rw`. A read-only one must exist; a read-write one that does
    /// not is made by [`import`].
    pub fn parse_dir(text: &str) -> Result<DirGrant, ImportError> {
        let text = match text.starts_with('/') {
            true => text.to_owned(),
            false => {
                let here = std::env::current_dir().map_err(|e| {
                    ImportError::Stdio(format!("--dir `{text}`: no working directory: {e}"))
                })?;
                // `components` drops the `.` of `./data`.
                let path: PathBuf = here.join(text).components().collect();
                path.display().to_string()
            }
        };
        let dir = DirGrant::parse(&text).map_err(|e| ImportError::Stdio(format!("--dir: {e}")))?;
        let missing_rw = dir.mode == DirMode::Rw && !dir.path.exists();
        if !dir.path.is_dir() && !missing_rw {
            return Err(ImportError::Stdio(format!(
                "--dir `{}`: no such directory",
                dir.path.display()
            )));
        }
        Ok(dir)
    }
}

/// Pins, lists and builds the import of `source` (see the module docs).
pub async fn import(source: &Source, options: &Options) -> Result<Import, ImportError> {
    let packages = packages_dir(source);
    let grant = ServerConfig {
        dirs: source.dirs.clone(),
        env: source.env.clone(),
        ..ServerConfig::new(options.id.clone())
    };
    if let Some(program) = source.command.first()
        && matches!(base_name(program), "npx" | "uvx")
    {
        readable_packages(&packages, grant.run_as())?;
    }
    let made = make_writable_dirs(&source.dirs, grant.run_as())?;
    let spec = pin(source, &packages)?;
    let listing = list(&options.id, &spec, &grant, &packages).await?;
    let table = StdioConfig {
        packages_dir: source.packages_dir.clone(),
        bwrap: None,
        servers: vec![grant],
    };
    if !source.headers.is_empty() && source.net.is_empty() {
        return Err(ImportError::Stdio(
            "--header with --stdio is a credential for a destination the server reaches: \
             name it with --net URL"
                .to_owned(),
        ));
    }
    // Every method a tunnel can carry, so an `https` destination can be reached through one;
    // the call's approval mode still decides, call by call, whether one that writes may go.
    let methods: BTreeSet<MethodName> = TUNNEL_METHODS
        .iter()
        .map(|m| MethodName::parse(m).expect("standard methods parse"))
        .collect();
    let net = source
        .net
        .iter()
        .map(|url| Destination {
            url,
            methods: methods.clone(),
            credentials: &source.headers,
            headers: BTreeSet::new(),
            read_methods: BTreeSet::new(),
        })
        .collect();
    let mut import = build_with(options, &listing, spec, table, net)?;
    import.notes.extend(made);
    Ok(import)
}

/// Makes each read-write directory of `dirs` that does not exist yet, owned under a root
/// gateway by `uid`, the user the server runs as (its gid the same), so the server can write
/// there: a note for each, for the reviewer.
fn make_writable_dirs(dirs: &[DirGrant], uid: u32) -> Result<Vec<String>, ImportError> {
    let mut made = Vec::new();
    for dir in dirs
        .iter()
        .filter(|d| d.mode == DirMode::Rw && !d.path.exists())
    {
        let path = &dir.path;
        let fail =
            |e: std::io::Error| ImportError::Stdio(format!("cannot make {}: {e}", path.display()));
        std::fs::create_dir_all(path).map_err(fail)?;
        if gatehouse_host::stdio::sandbox::is_root() {
            std::os::unix::fs::chown(path, Some(uid), Some(uid)).map_err(fail)?;
            made.push(format!(
                "made {} for the server to write in, owned by uid {uid}, the user it runs as",
                path.display()
            ));
        } else {
            made.push(format!(
                "made {} for the server to write in",
                path.display()
            ));
        }
    }
    Ok(made)
}

/// Under a root gateway, makes sure the server's own user (`uid`) can read `packages`, where
/// its package is about to be installed: said before anything is installed, rather than by
/// bubblewrap when the server starts.
fn readable_packages(packages: &Path, uid: u32) -> Result<(), ImportError> {
    if !gatehouse_host::stdio::sandbox::is_root() {
        return Ok(());
    }
    std::fs::create_dir_all(packages)
        .map_err(|e| ImportError::Stdio(format!("cannot create {}: {e}", packages.display())))?;
    reach::check(uid, packages, Access::Read).map_err(|e| {
        ImportError::Stdio(format!(
            "the server runs as its own user under a root gateway, and {e}; or pass \
             --packages-dir with a directory uid {uid} can read (and name it as `[stdio] \
             packages_dir` in the gateway's config)"
        ))
    })
}

/// The packages directory: `source`'s, or the default of `[stdio] packages_dir`.
pub fn packages_dir(source: &Source) -> PathBuf {
    StdioConfig {
        packages_dir: source.packages_dir.clone(),
        ..StdioConfig::default()
    }
    .packages_dir()
}

/// Starts the server of `spec` as `grant` grants it, in the sandbox, and reads its tools.
pub async fn list(
    adapter: &str,
    spec: &StdioSpec,
    grant: &ServerConfig,
    packages: &Path,
) -> Result<Listing, ImportError> {
    let servers = StdioServers::new(StdioConfig {
        packages_dir: Some(packages.to_owned()),
        bwrap: None,
        servers: vec![grant.clone()],
    });
    let server = servers
        .prepare(adapter, spec, &super::mcp::ASKS)
        .map_err(|e| ImportError::Stdio(e.to_string()))?;
    let deadline = Instant::now() + LIST_TIMEOUT;
    let fail = |e: gatehouse_host::stdio::StdioError| ImportError::Stdio(e.to_string());
    let listed = async {
        // The gateway's own request: no tenant's.
        let server = server.process("", deadline).await.map_err(fail)?;
        let offers = server.initialized()["capabilities"].clone();
        let pages = |method, key| pages(&server, method, key, deadline);
        let mut listing = Listing {
            protocol: SESSION.to_owned(),
            tools: pages("tools/list", "tools").await?,
            ..Listing::default()
        };
        if offers.get("resources").is_some() {
            listing.resources = pages("resources/list", "resources").await?;
            listing.templates = pages("resources/templates/list", "resourceTemplates").await?;
        }
        if offers.get("prompts").is_some() {
            listing.prompts = pages("prompts/list", "prompts").await?;
        }
        Ok::<_, ImportError>(listing)
    };
    let listing = listed.await;
    servers.shutdown().await;
    listing
}

/// Every page of `method`'s list under `key`, as the server sent each item.
async fn pages(
    server: &gatehouse_host::stdio::Served,
    method: &str,
    key: &str,
    deadline: Instant,
) -> Result<Vec<Value>, ImportError> {
    let fail = |e: gatehouse_host::stdio::StdioError| ImportError::Stdio(e.to_string());
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|c| json!({ "cursor": c }));
        let mut answer = server
            .request(method, params, &|| deadline, None)
            .await
            .map_err(fail)?;
        if let Some(error) = answer.get("error") {
            return Err(ImportError::Stdio(format!(
                "the server answered {method} with an error: {error}"
            )));
        }
        let result = answer["result"].take();
        let Some(page) = result[key].as_array() else {
            return Err(ImportError::Stdio(format!(
                "the server's {method} result has no `{key}` list"
            )));
        };
        items.extend(page.iter().cloned());
        match result["nextCursor"].as_str() {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok(items),
        }
    }
    Err(ImportError::Stdio(format!(
        "the server's {method} has more than {MAX_PAGES} pages"
    )))
}

/// Step 1: what runs, pinned, installing a package into `packages` when the command names one.
pub fn pin(source: &Source, packages: &Path) -> Result<StdioSpec, ImportError> {
    let Some((program, rest)) = source.command.split_first() else {
        return Err(ImportError::Stdio(
            "name the server's command after `--`, e.g. `-- npx -y @modelcontextprotocol/server-filesystem /srv/docs`"
                .to_owned(),
        ));
    };
    let (command, args, package) = match base_name(program) {
        "npx" => npm(rest, packages)?,
        "uvx" => pypi(rest, packages)?,
        _ => (absolute(program)?, rest.to_vec(), None),
    };
    let spec = StdioSpec {
        command,
        args,
        env: source.env.keys().cloned().collect(),
        dirs: source.dirs.clone(),
        package,
    };
    spec.validate().map_err(ImportError::Stdio)?;
    Ok(spec)
}

/// The file name of `program`: `npx` of `/usr/bin/npx`.
fn base_name(program: &str) -> &str {
    Path::new(program)
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or(program)
}

/// `program` as an absolute path, found on `PATH` when it is a bare name.
fn absolute(program: &str) -> Result<String, ImportError> {
    let path = Path::new(program);
    if path.is_absolute() {
        return Ok(program.to_owned());
    }
    if program.contains('/') {
        return std::fs::canonicalize(path)
            .map(|p| p.display().to_string())
            .map_err(|e| ImportError::Stdio(format!("`{program}`: {e}")));
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
        .map(|p| p.display().to_string())
        .ok_or_else(|| ImportError::Stdio(format!("`{program}` is not on PATH")))
}

/// Runs `command`, refusing with its stderr's end when it fails.
fn run(command: &mut Command, what: &str) -> Result<Vec<u8>, ImportError> {
    let output = command
        .output()
        .map_err(|e| ImportError::Stdio(format!("{what}: cannot run it: {e}")))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        return Err(ImportError::Stdio(format!(
            "{what} failed ({}): {}",
            output.status,
            tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
        )));
    }
    Ok(output.stdout)
}

/// A fresh staging directory under `parent`, removed when dropped.
fn staging(parent: &Path) -> Result<tempfile::TempDir, ImportError> {
    std::fs::create_dir_all(parent)
        .map_err(|e| ImportError::Stdio(format!("cannot create {}: {e}", parent.display())))?;
    tempfile::Builder::new()
        .prefix(".staging-")
        .tempdir_in(parent)
        .map_err(|e| {
            ImportError::Stdio(format!(
                "cannot create a directory in {}: {e}",
                parent.display()
            ))
        })
}

/// Where `pin` is installed: one directory of `<packages>/<registry>`, checked before
/// anything is removed or written there. [`PackagePin::check`] has made sure its name and
/// version are no path; this holds that the joined path and, links followed, its parent (made
/// by [`staging`]) lie within `packages`.
fn install_dir(pin: &PackagePin, packages: &Path) -> Result<PathBuf, ImportError> {
    pin.check().map_err(ImportError::Stdio)?;
    let dir = pin.install_dir(packages);
    let outside = || {
        ImportError::Stdio(format!(
            "{} package `{}` {}: its install directory {} is not within `packages_dir` {}; \
             nothing was installed",
            pin.registry.label(),
            pin.name,
            pin.version,
            dir.display(),
            packages.display()
        ))
    };
    let relative = dir.strip_prefix(packages).map_err(|_| outside())?;
    let parts: Vec<_> = relative.components().collect();
    if parts.len() != 2
        || !parts
            .iter()
            .all(|part| matches!(part, std::path::Component::Normal(_)))
    {
        return Err(outside());
    }
    let resolved = |path: &Path| {
        std::fs::canonicalize(path)
            .map_err(|e| ImportError::Stdio(format!("{}: {e}", path.display())))
    };
    let parent = dir.parent().ok_or_else(outside)?;
    if !resolved(parent)?.starts_with(resolved(packages)?) {
        return Err(outside());
    }
    Ok(dir)
}

/// Moves the finished install at `from` to `to`, replacing an earlier install of the same
/// version, and makes it readable by the server's user.
fn settle(from: &Path, to: &Path) -> Result<(), ImportError> {
    remove_earlier(to)?;
    std::fs::rename(from, to).map_err(|e| {
        ImportError::Stdio(format!("cannot move the install to {}: {e}", to.display()))
    })?;
    make_readable(to)
}

/// Removes an earlier install at `dir`, if any: an import installs its version afresh.
fn remove_earlier(dir: &Path) -> Result<(), ImportError> {
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|e| ImportError::Stdio(format!("cannot replace {}: {e}", dir.display())))?;
    }
    Ok(())
}

/// Makes the install at `dir` readable, and writable by its owner only: under a root gateway
/// the server runs as a user of its own, which reads it and never writes.
fn make_readable(dir: &Path) -> Result<(), ImportError> {
    run(
        Command::new("chmod").args(["-R", "a+rX,go-w"]).arg(dir),
        "chmod",
    )
    .map(drop)
}

type Pinned = (String, Vec<String>, Option<PackagePin>);

/// `npx [-y|--yes] PACKAGE[@VERSION] ARGS…`.
fn npm(rest: &[String], packages: &Path) -> Result<Pinned, ImportError> {
    let mut rest = rest.iter().skip_while(|a| *a == "-y" || *a == "--yes");
    let Some(spec) = rest.next() else {
        return Err(ImportError::Stdio("npx: name the package".to_owned()));
    };
    if spec.starts_with('-') {
        return Err(ImportError::Stdio(format!(
            "npx option `{spec}` is not supported: write `npx -y PACKAGE[@VERSION] ARGS…`"
        )));
    }
    let args: Vec<String> = rest.cloned().collect();
    // `@scope/name@1.2.3`, `name@file:PATH`: the version (or what npm installs from) is after
    // the first `@` that is not the first character; a name holds no other.
    let name = match spec[1..].find('@') {
        Some(at) => &spec[..=at],
        None => spec.as_str(),
    };
    Registry::Npm.check_name(name).map_err(|e| {
        ImportError::Stdio(format!(
            "{e}; a local tarball or directory is written `NAME@file:PATH`"
        ))
    })?;
    let parent = packages.join(Registry::Npm.as_str());
    let stage = staging(&parent)?;
    run(
        Command::new("npm")
            .args([
                "install",
                "--ignore-scripts",
                "--no-audit",
                "--no-fund",
                "--omit=dev",
            ])
            .arg("--prefix")
            .arg(stage.path())
            .arg(spec),
        &format!("npm install {spec}"),
    )?;
    let read_json = |path: PathBuf| -> Result<Value, ImportError> {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ImportError::Stdio(format!("{}: {e}", path.display())))?;
        serde_json::from_str(&text)
            .map_err(|e| ImportError::Stdio(format!("{}: {e}", path.display())))
    };
    let package_json = read_json(
        stage
            .path()
            .join("node_modules")
            .join(name)
            .join("package.json"),
    )?;
    let lock = read_json(stage.path().join("package-lock.json"))?;
    let entry = &lock["packages"][format!("node_modules/{name}")];
    let version = package_json["version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let integrity = entry["integrity"].as_str().unwrap_or_default().to_owned();
    if version.is_empty() || !integrity.starts_with("sha") {
        return Err(ImportError::Stdio(format!(
            "npm installed {name} without a version and an integrity digest in its lock file"
        )));
    }
    let unscoped = name.rsplit('/').next().unwrap_or(name);
    let bin = match &package_json["bin"] {
        Value::String(path) => path.clone(),
        Value::Object(bins) => bins
            .get(unscoped)
            .or_else(|| (bins.len() == 1).then(|| bins.values().next()).flatten())
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ImportError::Stdio(format!(
                    "{name} has several programs ({}) and none named `{unscoped}`",
                    bins.keys().cloned().collect::<Vec<_>>().join(", ")
                ))
            })?
            .to_owned(),
        _ => {
            return Err(ImportError::Stdio(format!(
                "{name}@{version} has no `bin` program to run"
            )));
        }
    };
    let bin = bin.trim_start_matches("./");
    if Path::new(bin).is_absolute() || bin.split(['/', '\\']).any(|part| part == "..") {
        return Err(ImportError::Stdio(format!(
            "{name}@{version}: its `bin` program `{bin}` is not a path inside the package"
        )));
    }
    let pin = PackagePin {
        registry: Registry::Npm,
        name: name.to_owned(),
        version,
        integrity,
        digest: String::new(),
    };
    let dir = install_dir(&pin, packages)?;
    settle(stage.path(), &dir)?;
    let digest = tree_digest(&dir).map_err(ImportError::Stdio)?;
    let mut args = args;
    args.insert(0, format!("{{package}}/node_modules/{name}/{bin}"));
    Ok((absolute("node")?, args, Some(PackagePin { digest, ..pin })))
}

/// `uvx [--from SPEC] NAME ARGS…`, or `uvx NAME[==VERSION|@VERSION] ARGS…`.
fn pypi(rest: &[String], packages: &Path) -> Result<Pinned, ImportError> {
    let (requirement, script, args) = match rest {
        [from, spec, script, args @ ..] if from == "--from" => {
            (spec.clone(), script.clone(), args.to_vec())
        }
        [first, ..] if first.starts_with('-') => {
            return Err(ImportError::Stdio(format!(
                "uvx option `{first}` is not supported: write `uvx [--from SPEC] NAME ARGS…`"
            )));
        }
        [spec, args @ ..] => {
            let spec = spec.replacen('@', "==", 1);
            let script = spec.split("==").next().unwrap_or_default().to_owned();
            (spec, script, args.to_vec())
        }
        [] => return Err(ImportError::Stdio("uvx: name the package".to_owned())),
    };
    let name = requirement
        .split(['=', '<', '>', '~', '!', '[', ' ', ';', '@'])
        .next()
        .unwrap_or_default()
        .to_owned();
    Registry::Pypi
        .check_name(&name)
        .map_err(ImportError::Stdio)?;
    // The system's Python, so that the interpreter is one the sandbox shows (under /usr).
    let python = "/usr/bin/python3";
    let parent = packages.join(Registry::Pypi.as_str());
    let probe = staging(&parent)?;
    let report = probe.path().join("report.json");
    run(
        Command::new(python)
            .arg("-m")
            .arg("venv")
            .arg(probe.path().join("venv")),
        "python3 -m venv (Debian: apt-get install python3-venv)",
    )?;
    run(
        Command::new(probe.path().join("venv/bin/pip"))
            .args([
                "install",
                "--quiet",
                "--only-binary=:all:",
                "--dry-run",
                "--ignore-installed",
                "--report",
            ])
            .arg(&report)
            .arg(&requirement),
        &format!("pip install --dry-run {requirement}"),
    )?;
    let version = reported(&report, &name)?.0;
    let pin = PackagePin {
        registry: Registry::Pypi,
        name: name.clone(),
        version: version.clone(),
        integrity: String::new(),
        digest: String::new(),
    };
    let dir = install_dir(&pin, packages)?;
    remove_earlier(&dir)?;
    // A virtual environment holds its own path in its scripts, so it is made where it stays.
    let made = (|| {
        run(
            Command::new(python).arg("-m").arg("venv").arg(&dir),
            "python3 -m venv",
        )?;
        run(
            Command::new(dir.join("bin/pip"))
                .args(["install", "--quiet", "--only-binary=:all:", "--report"])
                .arg(&report)
                .arg(format!("{name}=={version}")),
            &format!("pip install {name}=={version}"),
        )?;
        let (_, integrity) = reported(&report, &name)?;
        make_readable(&dir)?;
        let digest = tree_digest(&dir).map_err(ImportError::Stdio)?;
        Ok::<_, ImportError>(PackagePin {
            integrity,
            digest,
            ..pin
        })
    })();
    let pin = match made {
        Ok(pin) => pin,
        Err(error) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(error);
        }
    };
    Ok((format!("{{package}}/bin/{script}"), args, Some(pin)))
}

/// The version and `sha256:` digest pip's installation report gives for `name`.
fn reported(report: &Path, name: &str) -> Result<(String, String), ImportError> {
    let text = std::fs::read_to_string(report)
        .map_err(|e| ImportError::Stdio(format!("pip's report {}: {e}", report.display())))?;
    let report: Value = serde_json::from_str(&text)
        .map_err(|e| ImportError::Stdio(format!("pip's report: {e}")))?;
    let canonical = |n: &str| n.to_ascii_lowercase().replace(['_', '.'], "-");
    let item = report["install"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|item| {
            item["metadata"]["name"]
                .as_str()
                .is_some_and(|n| canonical(n) == canonical(name))
        })
        .ok_or_else(|| ImportError::Stdio(format!("pip did not install `{name}`")))?;
    let version = item["metadata"]["version"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let info = &item["download_info"]["archive_info"];
    let sha256 = info["hashes"]["sha256"]
        .as_str()
        .map(str::to_owned)
        .or_else(|| {
            info["hash"]
                .as_str()
                .and_then(|h| h.strip_prefix("sha256="))
                .map(str::to_owned)
        })
        .unwrap_or_default();
    Ok((version, format!("sha256:{sha256}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_and_dirs_parse_with_clear_errors() {
        let (name, binding) = Source::parse_env("TOKEN=${ACME_TOKEN}").unwrap();
        assert_eq!(name, "TOKEN");
        assert_eq!(binding.env.as_deref(), Some("ACME_TOKEN"));
        let (_, literal) = Source::parse_env("LEVEL=info").unwrap();
        assert_eq!(literal.value.as_deref(), Some("info"));
        for bad in ["TOKEN", "1X=y", "T=${not a name}"] {
            let err = Source::parse_env(bad).unwrap_err().to_string();
            assert!(err.contains(bad), "{err}");
        }
        // A read-only directory must exist; a read-write one is made by the import.
        let err = Source::parse_dir("/no/such/dir:ro")
            .unwrap_err()
            .to_string();
        assert!(err.contains("no such directory"), "{err}");
        let rw = Source::parse_dir("/no/such/dir:rw").unwrap();
        assert_eq!(rw.path, Path::new("/no/such/dir"));
        // A relative path is the working directory's, without its `.`.
        let here = std::env::current_dir().unwrap();
        let relative = Source::parse_dir("./data:rw").unwrap();
        assert_eq!(relative.path, here.join("data"));
        let err = Source::parse_dir("../x:rw").unwrap_err().to_string();
        assert!(err.contains("`..`"), "{err}");
    }

    /// An install directory is one directory under `<packages>/<registry>`, links followed: a
    /// registry directory that is a link out of `packages`, or a version that is a path, is
    /// refused before anything is removed or written.
    #[test]
    fn an_install_directory_outside_the_packages_directory_is_refused() {
        let packages = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        let pin = PackagePin {
            registry: Registry::Npm,
            name: "echo-server".to_owned(),
            version: "1.0.0".to_owned(),
            integrity: String::new(),
            digest: String::new(),
        };
        std::fs::create_dir(packages.path().join("npm")).unwrap();
        assert_eq!(
            install_dir(&pin, packages.path()).unwrap(),
            packages.path().join("npm/echo-server@1.0.0")
        );
        std::fs::remove_dir(packages.path().join("npm")).unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), packages.path().join("npm")).unwrap();
        let err = install_dir(&pin, packages.path()).unwrap_err().to_string();
        assert!(
            err.contains("npm package `echo-server` 1.0.0: its install directory")
                && err.contains("is not within `packages_dir`"),
            "{err}"
        );
        let hostile = PackagePin {
            version: "1.0.0/../../../victim".to_owned(),
            ..pin
        };
        let err = install_dir(&hostile, packages.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a semantic version"), "{err}");
    }

    #[test]
    fn a_plain_program_is_pinned_by_its_absolute_path() {
        let source = Source {
            command: vec!["sh".to_owned(), "-c".to_owned(), "true".to_owned()],
            ..Source::default()
        };
        let spec = pin(&source, Path::new("/nonexistent")).unwrap();
        assert!(Path::new(&spec.command).is_absolute(), "{}", spec.command);
        assert!(spec.command.ends_with("/sh"));
        assert_eq!(spec.args, ["-c", "true"]);
        assert!(spec.package.is_none());
        let none = pin(&Source::default(), Path::new("/"))
            .unwrap_err()
            .to_string();
        assert!(none.contains("after `--`"), "{none}");
    }
}

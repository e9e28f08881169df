//! `gatehouse import mcp | openapi | a2a`: write the manifest and config snippet of a generic
//! adapter from an upstream's own description (see `crate::import`), optionally pack and sign
//! it; `import mcp --check` and `import a2a --check` compare an import with the upstream now.

use std::io::Write;
use std::path::{Path, PathBuf};

use gatehouse_host::TlsClient;
use gatehouse_host::plugin::manifest::{AdapterManifest, Manifest, PluginKind};
use gatehouse_host::plugin::signature::SigningKey;
use gatehouse_host::plugin::{self, read_file};
use gatehouse_host::stdio::DirGrant;
use gatehouse_host::stdio::spec::DirMode;

use crate::config::ServeConfig;
use crate::exit::{Failure, refused, usage};
use crate::import::generic::Generic;
use crate::import::headers::{HeaderCredential, from_grants, values_now};
use crate::import::merge::{Addition, merge};
use crate::import::output::{
    CONFIG_FILE, MANIFEST_FILE, config_toml, manifest_toml, table, write_all,
};
use crate::import::{Import, ImportError, Options, a2a, mcp, openapi, stdio};

/// What to import from.
#[derive(Debug, clap::Subcommand)]
pub enum ImportCommand {
    /// Import the tools of an MCP server (Streamable HTTP, or with --stdio a command that
    /// speaks on its standard streams), or with --check, compare an import with what the
    /// server offers now (exit 1 if anything changed).
    Mcp(Box<McpArgs>),
    /// Import the operations of an HTTP service from its OpenAPI document (3.0 or 3.1, JSON or
    /// YAML).
    Openapi(Box<OpenApiArgs>),
    /// Import the skills of an A2A agent (protocol 1.0, JSON-RPC binding) from its agent card,
    /// or with --check, compare an import with the card now (exit 1 if anything changed).
    A2a(Box<A2aArgs>),
}

/// `gatehouse import a2a`.
#[derive(Debug, clap::Args)]
pub struct A2aArgs {
    /// The agent's URL, e.g. http://127.0.0.1:8940/ (its card is read at
    /// <URL>/.well-known/agent-card.json), or its card's URL (ending in .json).
    #[arg(required_unless_present = "check")]
    url: Option<String>,
    /// A credential the agent wants, as 'Name: ${ENV}' or 'Name: Scheme ${ENV}' (repeatable):
    /// the gateway sends it from its environment, the adapter never sees it. The import sends
    /// it now to read the extended card, if the agent offers one. With --check: default, the
    /// import's config.toml.
    #[arg(long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// The public key (base64 Ed25519, as `gatehouse keygen` writes it) the card must be signed
    /// with. Default: the key its signature's `jku` serves, trusted on first use. Either way
    /// the key is pinned, and a signed card that does not verify is not imported.
    #[arg(long, value_name = "BASE64")]
    card_key: Option<String>,
    /// A CA certificate (PEM) the agent's https certificate may chain to, besides the system's
    /// roots (repeatable): a private CA. The gateway trusts it through `[egress]
    /// extra_root_certificates`.
    #[arg(long, value_name = "PEM")]
    ca_file: Vec<PathBuf>,
    /// Compare the import in this directory with the agent's card now: list skills changed,
    /// added or removed, a changed card, a signature that no longer verifies with the pinned
    /// key; exit 1 if any.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["url", "id", "out", "key", "component", "config"])]
    check: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

/// `gatehouse import mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// The server's MCP endpoint, http or https, e.g. http://127.0.0.1:8931/mcp.
    #[arg(required_unless_present_any = ["check", "stdio"], conflicts_with = "stdio")]
    url: Option<String>,
    /// Import a stdio server: the command after `--`, e.g. `-- npx -y
    /// @modelcontextprotocol/server-filesystem /srv/docs` or `-- uvx mcp-server-time`. An npm
    /// or PyPI package is installed now into `--packages-dir` and pinned (version, registry
    /// digest, installed files); the server is started once in its sandbox to list its tools.
    #[arg(long, requires = "command", conflicts_with = "check")]
    stdio: bool,
    /// With --stdio: a variable the server gets, as NAME=${ENV} (read from the gateway's
    /// environment) or NAME=value (repeatable). It gets no other.
    #[arg(long = "env", value_name = "NAME=VALUE", requires = "stdio")]
    env: Vec<String>,
    /// With --stdio: a directory the server sees, as PATH, PATH:ro or PATH:rw (repeatable).
    /// It sees no other of the host's, besides the system's programs and libraries.
    #[arg(long = "dir", value_name = "PATH[:ro|:rw]", requires = "stdio")]
    dirs: Vec<String>,
    /// With --stdio: where packages are installed; the gateway's `[stdio] packages_dir` must
    /// be the same (the written config.toml says so). Default: /var/lib/gatehouse/stdio as
    /// root, else $XDG_DATA_HOME/gatehouse/stdio.
    #[arg(long, value_name = "DIR")]
    packages_dir: Option<PathBuf>,
    /// With --stdio: the server's command and its arguments, after `--`.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
    /// A credential the server wants, as 'Name: ${ENV}' or 'Name: Scheme ${ENV}' (repeatable):
    /// the gateway sends it from its environment, the adapter never sees it. The import reads
    /// the variable now to list the tools. With --check: default, the import's config.toml.
    /// With --stdio, each is injected into the server's plain-http requests to its `--net`
    /// destinations.
    #[arg(long = "header", value_name = "HEADER")]
    headers: Vec<String>,
    /// With --stdio: a destination the server may reach, as a URL prefix such as
    /// https://api.github.com/ (repeatable). Its only way out is the gateway's egress proxy,
    /// which checks each request against these; a whole host (path `/`) also opens https
    /// tunnels. Without --net the server has no network at all.
    #[arg(long = "net", value_name = "URL", requires = "stdio")]
    net: Vec<String>,
    /// A CA certificate (PEM) the server's https certificate may chain to, besides the
    /// system's roots (repeatable): a private CA. The gateway trusts it through `[egress]
    /// extra_root_certificates`.
    #[arg(long, value_name = "PEM", conflicts_with = "stdio")]
    ca_file: Vec<PathBuf>,
    /// Compare the import in this directory with the server's tools now: list tools changed,
    /// added or removed upstream; exit 1 if any.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["url", "id", "out", "key", "component", "config"])]
    check: Option<PathBuf>,
    #[command(flatten)]
    output: OutputArgs,
}

/// `gatehouse import openapi`.
#[derive(Debug, clap::Args)]
pub struct OpenApiArgs {
    /// The OpenAPI document: a .json or .yaml file.
    spec: PathBuf,
    /// The service's base URL, e.g. https://api.example.com/v1. Default: the document's first
    /// server, its variables at their defaults.
    #[arg(long)]
    server: Option<String>,
    #[command(flatten)]
    output: OutputArgs,
}

/// What every import writes, and how.
#[derive(Debug, clap::Args)]
pub struct OutputArgs {
    /// The adapter id to write, e.g. `acme.tools`; its tools are `<ID>.<capability>`.
    #[arg(long)]
    id: Option<String>,
    /// Directory to write manifest.toml and config.toml (and with --key, <ID>.wasm) to.
    /// Default with --config: <the config's folder>/<ID>.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Write or merge a complete gateway config here, which `gatehouse serve --config FILE`
    /// then serves as it is: the trust entry for the signing key, the signed adapter, what it
    /// reaches, and who sees its tools. A new file also admits anonymous callers on its
    /// loopback listener and runs each call as its manifest says (`policy_default = "allow"`);
    /// an existing one keeps its own. The import always signs then: with --key, or with
    /// <the config's folder>/publisher.secret.toml (a fresh key, made if missing).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Import only tools (MCP tool names, OpenAPI operationIds) matching this glob (repeatable).
    #[arg(long, value_name = "GLOB")]
    include: Vec<String>,
    /// Leave out tools matching this glob (repeatable).
    #[arg(long, value_name = "GLOB")]
    exclude: Vec<String>,
    /// The manifest's version.
    #[arg(long, default_value = "0.1.0")]
    adapter_version: String,
    /// The manifest's publisher.
    #[arg(long, default_value = "operator")]
    publisher: String,
    /// Also pack and sign: embed the manifest in the generic component (the one this binary
    /// carries, or --component) and sign it with this secret key file from `gatehouse
    /// keygen`, writing <OUT>/<ID>.wasm.
    #[arg(long)]
    key: Option<PathBuf>,
    /// A generic component to sign instead of the one this binary carries, as built for
    /// wasm32-wasip2 (`cargo build -p mcp-upstream` or `-p openapi`, `--target wasm32-wasip2
    /// --profile plugin`); its code is the same for every import.
    #[arg(long, requires = "key")]
    component: Option<PathBuf>,
}

/// What signs an import: the key, and the component it signs.
type Signing = (SigningKey, Vec<u8>);

/// The key a `--config` import makes when none is given, in the config's folder.
const FRESH_KEY: &str = "publisher";

/// What `--config` names: the file, its text if it exists (read and checked before anything
/// is imported), and the key the import made for it, if it made one (written with the rest).
struct Target {
    path: PathBuf,
    existing: Option<(String, ServeConfig)>,
    /// Where the fresh key goes, and its file's text.
    fresh_key: Option<(PathBuf, String)>,
}

impl Target {
    /// The folder the config file is in.
    fn folder(path: &Path) -> &Path {
        match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        }
    }

    /// The key an import signs with when none is given, beside the config at `path`.
    fn key_path(path: &Path) -> PathBuf {
        Self::folder(path).join(format!("{FRESH_KEY}.secret.toml"))
    }
}

/// Where and how an import writes.
struct Resolved {
    options: Options,
    dir: PathBuf,
    signing: Option<Signing>,
    target: Option<Target>,
}

impl OutputArgs {
    /// The import options, the output directory, the signing inputs (the component: the
    /// `generic` one this binary carries unless --component names another) and the config to
    /// merge into; `--id` is required here, and `--out` unless `--config` is given.
    fn resolve(&self, generic: Generic) -> Result<Resolved, Failure> {
        let Some(id) = &self.id else {
            return Err(usage("--id is required"));
        };
        let options = Options {
            id: id.clone(),
            version: self.adapter_version.clone(),
            publisher: self.publisher.clone(),
            include: self.include.clone(),
            exclude: self.exclude.clone(),
        };
        let (target, fresh) = match &self.config {
            Some(path) => {
                let (target, fresh) = target(path, self.key.is_none())?;
                (Some(target), fresh)
            }
            None => (None, None),
        };
        let dir = match (&self.out, &target) {
            (Some(dir), _) => dir.clone(),
            (None, Some(target)) => Target::folder(&target.path).join(id),
            (None, None) => return Err(usage("--out is required (or --config)")),
        };
        let key = match (&self.key, &target, fresh) {
            (Some(key), _, _) => Some(SigningKey::from_file(key).map_err(usage)?),
            (None, _, Some(fresh)) => Some(fresh),
            (None, Some(Target { path, .. }), None) => {
                Some(SigningKey::from_file(&Target::key_path(path)).map_err(usage)?)
            }
            (None, None, None) => None,
        };
        let signing = match (key, &self.component) {
            (Some(key), Some(component)) => Some((key, read_file(component).map_err(usage)?)),
            (Some(key), None) => Some((key, generic.component().to_vec())),
            (None, _) => None,
        };
        Ok(Resolved {
            options,
            dir,
            signing,
            target,
        })
    }
}

/// The config at `path`, read and checked now if it exists; with `make_key`, a fresh key for
/// its folder when none is there yet.
fn target(path: &Path, make_key: bool) -> Result<(Target, Option<SigningKey>), Failure> {
    let existing = if path.exists() {
        let text =
            std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        let config =
            ServeConfig::from_toml(&text).map_err(|e| usage(format!("{}: {e}", path.display())))?;
        Some((text, config))
    } else {
        None
    };
    let key_path = Target::key_path(path);
    let fresh = (make_key && !key_path.exists())
        .then(|| SigningKey::generate(FRESH_KEY).map_err(refused))
        .transpose()?;
    let target = Target {
        path: path.to_owned(),
        existing,
        fresh_key: fresh.as_ref().map(|key| (key_path, key.to_toml())),
    };
    Ok((target, fresh))
}

/// Runs `gatehouse import`.
pub fn import(command: ImportCommand, out: &mut dyn Write) -> Result<u8, Failure> {
    match command {
        ImportCommand::Mcp(args) => import_mcp(&args, out),
        ImportCommand::A2a(args) => import_a2a(&args, out),
        ImportCommand::Openapi(args) => {
            let resolved = args.output.resolve(Generic::OpenApi)?;
            let text = std::fs::read_to_string(&args.spec)
                .map_err(|e| usage(format!("{}: {e}", args.spec.display())))?;
            let import = openapi::import(&text, args.server.as_deref(), &resolved.options)
                .map_err(|e| usage(format!("{}: {e}", args.spec.display())))?;
            let source = args.spec.display().to_string();
            write(&import, &source, resolved, out)
        }
    }
}

/// The `--header` credentials, parsed.
fn header_credentials(headers: &[String]) -> Result<Vec<HeaderCredential>, Failure> {
    headers
        .iter()
        .map(|h| HeaderCredential::parse(h))
        .collect::<Result<Vec<_>, _>>()
        .map_err(usage)
}

/// The runtime an import's requests run on.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the async runtime: {e}")))
}

fn import_a2a(args: &A2aArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    let headers = header_credentials(&args.headers)?;
    let runtime = runtime()?;
    if let Some(dir) = &args.check {
        return check_a2a(&runtime, dir, &headers, args, out);
    }
    let resolved = args.output.resolve(Generic::A2aUpstream)?;
    let url = args.url.as_deref().unwrap_or_default();
    let tls = crate::import::tls(&args.ca_file).map_err(usage)?;
    let source = a2a::Source {
        url,
        card_key: args.card_key.as_deref(),
        tls: &tls,
    };
    let import = runtime
        .block_on(a2a::import(source, &headers, &resolved.options))
        .map_err(usage)?;
    write(&import, url, resolved, out)
}

/// `import a2a --check DIR`: the drift between the import in `dir` and the agent's card now.
fn check_a2a(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    headers: &[HeaderCredential],
    args: &A2aArgs,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let (manifest, options) = imported(dir, &args.output)?;
    let Some((card_url, signer)) = a2a::pinned(&manifest) else {
        return Err(usage(format!(
            "{}: no capability pins an agent card; it was not written by `gatehouse import a2a`",
            dir.join(MANIFEST_FILE).display()
        )));
    };
    let headers = if headers.is_empty() {
        granted_headers(&dir.join(CONFIG_FILE), &manifest.id)?
    } else {
        values_now(headers).map_err(usage)?
    };
    let tls = crate::import::tls(&args.ca_file).map_err(usage)?;
    let source = a2a::Source {
        url: &card_url,
        card_key: args.card_key.as_deref().or(signer.as_deref()),
        tls: &tls,
    };
    let card = match runtime.block_on(a2a::read(source, &headers)) {
        Ok(card) => card,
        Err(ImportError::Signature { reason, .. }) => {
            say!(out, "changed: the card's signature: {reason}");
            say!(
                out,
                "drift: {card_url} changed since the import; review and import again"
            );
            return Ok(1);
        }
        Err(other) => return Err(usage(other)),
    };
    let drift = a2a::drift(&manifest, &options, &card).map_err(usage)?;
    let pinned = format!("the {} imported skills", manifest.capabilities.len());
    say_drift(&drift, &pinned, &card_url, out)
}

fn import_mcp(args: &McpArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    let headers = header_credentials(&args.headers)?;
    let runtime = runtime()?;
    if let Some(dir) = &args.check {
        let tls = crate::import::tls(&args.ca_file).map_err(usage)?;
        return check(&runtime, dir, &headers, &tls, &args.output, out);
    }
    let resolved = args.output.resolve(Generic::McpUpstream)?;
    let options = &resolved.options;
    if args.stdio {
        // Installed where the config's gateway looks for packages.
        let configured = (resolved.target.as_ref())
            .and_then(|t| t.existing.as_ref())
            .and_then(|(_, config)| config.host.stdio.packages_dir.clone());
        let packages_dir = match (&args.packages_dir, configured) {
            (Some(given), Some(configured)) if *given != configured => {
                return Err(usage(format!(
                    "--packages-dir {} differs from the config's [stdio] packages_dir {}, where \
                     its gateway looks for packages: leave --packages-dir out",
                    given.display(),
                    configured.display()
                )));
            }
            (Some(given), _) => Some(given.clone()),
            (None, configured) => configured,
        };
        let source = stdio::Source {
            command: args.command.clone(),
            env: args
                .env
                .iter()
                .map(|e| stdio::Source::parse_env(e))
                .collect::<Result<_, _>>()
                .map_err(usage)?,
            dirs: args
                .dirs
                .iter()
                .map(|d| stdio::Source::parse_dir(d))
                .collect::<Result<_, _>>()
                .map_err(usage)?,
            packages_dir,
            net: args.net.clone(),
            headers,
        };
        outside_writable(&source.dirs, &resolved)?;
        let import = runtime
            .block_on(stdio::import(&source, options))
            .map_err(usage)?;
        return write(&import, &args.command.join(" "), resolved, out);
    }
    let url = args.url.as_deref().unwrap_or_default();
    let tls = crate::import::tls(&args.ca_file).map_err(usage)?;
    let import = runtime
        .block_on(mcp::import(url, &headers, &tls, options))
        .map_err(usage)?;
    write(&import, url, resolved, out)
}

/// Writes the import's files to its directory (and the signed component, given a key and the
/// generic component), and with `--config` merges it into that config, then prints the table
/// of choices, what was written and what to do next. The merged config is checked before any
/// file is written.
fn write(
    import: &Import,
    source: &str,
    resolved: Resolved,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let Resolved {
        dir,
        signing,
        target,
        ..
    } = resolved;
    let manifest_text = manifest_toml(import, source).map_err(usage)?;
    let config_text = config_toml(import);
    let id = &import.manifest.id;
    let wasm_name = format!("{id}.wasm");
    let signed = match signing {
        Some((key, component)) => {
            // What is signed is exactly what manifest.toml says: read back from its text.
            let manifest = Manifest::from_toml(&manifest_text)
                .map_err(|e| refused(format!("the written manifest does not read back: {e}")))?;
            // Compiled in a child process within bounds, as `pack` compiles.
            let bounds = crate::examine::Bounds::from_env().map_err(usage)?;
            crate::examine::examine(
                &component,
                PluginKind::Adapter,
                &format!("the component of {id}"),
                &bounds,
            )
            .map_err(refused)?;
            let signed = plugin::pack(&component, &manifest, &key).map_err(refused)?;
            let digest = plugin::inspect(&signed).map_err(refused)?.digest;
            Some((signed, key, digest))
        }
        None => None,
    };
    let merged = match (&target, &signed) {
        (Some(target), Some((_, key, _))) => {
            let addition = Addition {
                import,
                source,
                key_id: &key.key_id,
                public_key: key.public_key().to_base64(),
                component: listed(Target::folder(&target.path), &dir.join(&wasm_name))
                    .map_err(usage)?,
            };
            let existing = target.existing.as_ref().map(|(text, _)| text.as_str());
            Some(merge(existing, &addition, &target.path).map_err(usage)?)
        }
        _ => None,
    };
    if let Some((path, key)) = target.as_ref().and_then(|t| t.fresh_key.as_ref()) {
        gatehouse_core::secret::write_private(path, key.as_bytes())
            .map_err(|e| usage(format!("{}: {e}", path.display())))?;
    }
    let mut files: Vec<(&str, &[u8])> = vec![
        (MANIFEST_FILE, manifest_text.as_bytes()),
        (CONFIG_FILE, config_text.as_bytes()),
    ];
    if let Some((bytes, _, _)) = &signed {
        files.push((&wasm_name, bytes));
    }
    write_all(&dir, &files).map_err(usage)?;
    if let (Some(target), Some(merged)) = (&target, &merged) {
        let name = target
            .path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| {
                usage(format!(
                    "--config {}: not a file name",
                    target.path.display()
                ))
            })?;
        write_all(
            Target::folder(&target.path),
            &[(name, merged.text.as_bytes())],
        )
        .map_err(usage)?;
    }
    say!(out, "{}", table(import));
    say!(out, "wrote {}", dir.join(MANIFEST_FILE).display());
    say!(out, "wrote {}", dir.join(CONFIG_FILE).display());
    match &signed {
        Some((_, key, digest)) => {
            say!(
                out,
                "wrote {} signed by `{}` ({digest})",
                dir.join(&wasm_name).display(),
                key.key_id
            );
        }
        None => {
            say!(
                out,
                "next: review {}, then sign it: run the same import again with --key KEY (it \
                 signs the generic component this binary carries) and it writes {}",
                dir.join(MANIFEST_FILE).display(),
                dir.join(&wasm_name).display()
            );
        }
    }
    if let (Some(target), Some(merged)) = (&target, &merged) {
        if let Some((path, _)) = &target.fresh_key {
            say!(
                out,
                "wrote {}: a fresh signing key (keep it private; later imports into this config \
                 sign with it too)",
                path.display()
            );
        }
        let verb = if target.existing.is_some() {
            "merged the import into"
        } else {
            "wrote"
        };
        say!(out, "{verb} {}:", target.path.display());
        for line in &merged.said {
            say!(out, "  {line}");
        }
        say!(
            out,
            "next: gatehouse serve --config {}",
            target.path.display()
        );
    }
    Ok(0)
}

/// Refuses an import whose files would lie in a directory its server is granted to write
/// (`--dir PATH:rw`): the server could change its own signed component, the key signing it or
/// the gateway's config.
fn outside_writable(dirs: &[DirGrant], resolved: &Resolved) -> Result<(), Failure> {
    let mut written = vec![("--out", resolved.dir.clone())];
    if let Some(target) = &resolved.target {
        written.push(("--config", target.path.clone()));
        if let Some((key, _)) = &target.fresh_key {
            written.push(("the signing key", key.clone()));
        }
    }
    for (what, path) in written {
        let path: PathBuf = std::path::absolute(&path)
            .map_err(|e| usage(format!("{}: {e}", path.display())))?
            .components()
            .collect();
        if let Some(dir) = dirs
            .iter()
            .find(|d| d.mode == DirMode::Rw && path.starts_with(&d.path))
        {
            return Err(usage(format!(
                "{what} {} lies within --dir {}:rw, which the server may write: it could change \
                 what the import writes there; write it elsewhere, or grant the server a \
                 directory of its own",
                path.display(),
                dir.path.display()
            )));
        }
    }
    Ok(())
}

/// `component` as `[plugins] adapters` in a config in `folder` lists it: relative to the
/// folder when it lies within it, else absolute.
fn listed(folder: &Path, component: &Path) -> Result<String, String> {
    let absolute = |path: &Path| -> Result<PathBuf, String> {
        std::path::absolute(path).map_err(|e| format!("{}: {e}", path.display()))
    };
    let (folder, component) = (absolute(folder)?, absolute(component)?);
    Ok(match component.strip_prefix(&folder) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => component.display().to_string(),
    })
}

/// `--check DIR`: the drift between the import in `dir` and the server now (over https, as
/// `tls` trusts).
fn check(
    runtime: &tokio::runtime::Runtime,
    dir: &Path,
    headers: &[HeaderCredential],
    tls: &TlsClient,
    args: &OutputArgs,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let (manifest, options) = imported(dir, args)?;
    let path = dir.join(MANIFEST_FILE);
    if let Some(spec) = &manifest.stdio {
        let config = granted_config(&dir.join(CONFIG_FILE))?;
        let grant = config.stdio.server(&manifest.id).cloned().ok_or_else(|| {
            usage(format!(
                "{}: no [[stdio.server]] entry for `{}`",
                dir.join(CONFIG_FILE).display(),
                manifest.id
            ))
        })?;
        let packages = config.stdio.packages_dir();
        let listing = runtime
            .block_on(stdio::list(&manifest.id, spec, &grant, &packages))
            .map_err(usage)?;
        let source = format!("the stdio server of `{}`", manifest.id);
        return report(&manifest, &options, &listing, &source, out);
    }
    let url = mcp::upstream_url(&manifest).ok_or_else(|| {
        usage(format!(
            "{}: no capability has an `upstream` table; it was not written by `gatehouse import mcp`",
            path.display()
        ))
    })?;
    let headers = if headers.is_empty() {
        granted_headers(&dir.join(CONFIG_FILE), &manifest.id)?
    } else {
        values_now(headers).map_err(usage)?
    };
    let listing = runtime
        .block_on(mcp::list(url, &headers, tls))
        .map_err(usage)?;
    report(&manifest, &options, &listing, url, out)
}

/// The manifest of the import in `dir`, and the options (its filters) to compare it with.
fn imported(dir: &Path, args: &OutputArgs) -> Result<(AdapterManifest, Options), Failure> {
    let path = dir.join(MANIFEST_FILE);
    let manifest = match Manifest::from_file(&path).map_err(usage)? {
        Manifest::Adapter(manifest) => manifest,
        Manifest::Policy(_) => {
            return Err(usage(format!(
                "{}: a policy manifest is no import",
                path.display()
            )));
        }
    };
    let options = Options {
        include: args.include.clone(),
        exclude: args.exclude.clone(),
        ..Options::new(manifest.id.clone())
    };
    Ok((manifest, options))
}

/// Prints the drift between `manifest` and `listing`, the tools `source` offers now: exit 1
/// if any.
fn report(
    manifest: &AdapterManifest,
    options: &Options,
    listing: &mcp::Listing,
    source: &str,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let drift = mcp::drift(manifest, options, listing).map_err(usage)?;
    let served =
        manifest.resources.len() + manifest.resource_templates.len() + manifest.prompts.len();
    let pinned = if served == 0 {
        format!("the {} imported tools", manifest.capabilities.len())
    } else {
        format!(
            "the {} imported tools and {served} resources, resource templates and prompts",
            manifest.capabilities.len()
        )
    };
    say_drift(&drift, &pinned, source, out)
}

/// Prints `drift`, what `source` changed of what was `pinned`: exit 1 if anything did.
fn say_drift(
    drift: &mcp::Drift,
    pinned: &str,
    source: &str,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    if drift.is_empty() {
        say!(out, "no drift: {pinned} are as pinned");
        return Ok(0);
    }
    for (what, names) in [
        ("changed", &drift.changed),
        ("added", &drift.added),
        ("removed", &drift.removed),
    ] {
        for name in names {
            say!(out, "{what}: {name}");
        }
    }
    say!(
        out,
        "drift: {source} changed since the import; review and import again"
    );
    Ok(1)
}

/// The credential headers the import's `config.toml` binds for `adapter`, so `--check` reaches
/// the server as the import and the gateway do. A missing file means none.
fn granted_headers(path: &Path, adapter: &str) -> Result<Vec<(String, String)>, Failure> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    from_grants(&granted_config(path)?.egress.grants, adapter).map_err(usage)
}

/// The import's `config.toml`, read as a host config.
fn granted_config(path: &Path) -> Result<gatehouse_host::HostConfig, Failure> {
    let text =
        std::fs::read_to_string(path).map_err(|e| usage(format!("{}: {e}", path.display())))?;
    toml::from_str(&text).map_err(|e| usage(format!("{}: {e}", path.display())))
}

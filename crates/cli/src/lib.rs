//! gatehouse-cli: the `gatehouse` command line.
//!
//! Each command is a module by job: `serve` (the gateway: a [`gatehouse_host::Host`] behind
//! `gatehouse-server`'s endpoints, reloads, shutdown), `state` (approvals, the audit log and
//! idempotency keys, on the local store or through a running gateway's admin API), `admin`
//! (a running gateway's plugins and policies), `registry` (`push`, `pull`), [`import`]
//! (manifests for the generic adapters, and the config `--config` merges them into), `new`
//! (plugin projects, from the templates beside this crate's `src/`), `build`, `policy`
//! (Cedar rules), `call` (one call, in process) and, with feature `demo`, [`demo`]. This file
//! parses the command line and runs the small commands (`keygen`, `pack`, `verify`,
//! `inspect`).
//!
//! Exit codes: 0 success; 1 the component was refused or the call failed (the output says
//! why); 2 bad usage, unreadable files or invalid config.

#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use tracing_subscriber::Layer as _;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::{Capability, Manifest, PluginKind};
use gatehouse_host::plugin::signature::SigningKey;
use gatehouse_host::plugin::{self, read_file};

use crate::config::{ConfigArg, load_config};
use crate::exit::{Failure, refused, usage};
pub use config::ServeConfig;

/// Writes a line of command output; a closed stdout is not worth failing over.
macro_rules! say {
    ($out:expr, $($arg:tt)*) => {
        let _ = writeln!($out, $($arg)*);
    };
}

mod admin;
mod approvals;
mod build;
mod call;
mod config;
#[cfg(feature = "demo")]
pub mod demo;
mod drift;
mod examine;
mod exit;
pub mod import;
mod new;
mod policy;
mod receipt;
mod registry;
mod sdks;
mod serve;
mod state;

/// gatehouse: a policy-enforcement host for AI-agent tool calls.
///
/// Adapters and policy modules are signed WebAssembly components. Publishers create a key
/// (`keygen`), embed a manifest and sign (`pack`), and may publish to an OCI registry
/// (`push`); operators trust publisher keys in their config and `verify`, `inspect` and `call`
/// components, and serve them from files or registries.
#[derive(Debug, Parser)]
#[command(
    name = "gatehouse",
    version,
    propagate_version = true,
    after_help = "Exit codes: 0 success; 1 the component was refused or the call failed; \
                  2 bad usage, unreadable file or invalid config.\n\
                  Logs go to stderr; RUST_LOG=info shows plugin log lines."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log line format on stderr: `text`, or `json` (one JSON object per line, for log
    /// collectors).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create a publisher signing key pair: <ID>.secret.toml and <ID>.pub.toml.
    Keygen {
        /// Key id that signatures will carry, e.g. `alice-2026`.
        #[arg(long)]
        key_id: String,
        /// Directory to write the two files to.
        #[arg(long, default_value = ".")]
        out_dir: PathBuf,
    },
    /// Embed a manifest into a component and sign it.
    Pack {
        /// The component, as built for wasm32-wasip2.
        component: PathBuf,
        /// Manifest file (TOML, or JSON if it ends in .json).
        #[arg(long)]
        manifest: PathBuf,
        /// Secret key file from `gatehouse keygen`.
        #[arg(long)]
        key: PathBuf,
        /// Output file. Default: <component stem>.signed.wasm next to the input.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Check a component as the host would before loading it: signature, trusted key and its
    /// scope, manifest, and that it implements its world. Executes nothing.
    Verify {
        /// The signed component.
        component: PathBuf,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Print a component's manifest and signature block without verifying or executing it.
    Inspect {
        /// The component.
        component: PathBuf,
    },
    /// Run one capability of a signed adapter through the governed pipeline (tool grants,
    /// policies, skills from the config; and the modules --policy names) and print the
    /// ToolResultEnvelope as JSON. Given a policy module instead, print the decision it (with
    /// the config's other policies) makes for a call of TOOL.
    Call(call::CallArgs),
    /// Serve MCP over Streamable HTTP (`[mcp]` in the config): tools/list shows each caller
    /// the tools its tenant may see, tools/call runs them through the governed pipeline.
    /// Runs until SIGTERM or Ctrl-C (calls in flight finish first); SIGHUP reloads the config.
    Serve {
        /// A signed adapter to serve (repeatable); the config must trust its key. A file, or
        /// `oci://REGISTRY/REPO@sha256:...` (a `:TAG` where `[[oci.registry]] allow_tags`),
        /// pulled at start and on SIGHUP, and cached by digest.
        #[arg(long = "adapter", value_name = "FILE|oci://...")]
        adapters: Vec<String>,
        /// A signed policy module to install (repeatable); bind it in `[[pipeline.policy]]`.
        /// A file or an `oci://` reference, as for `--adapter`.
        #[arg(long = "policy", value_name = "FILE|oci://...")]
        policies: Vec<String>,
        /// Address to listen on, overriding `[mcp] listen` (e.g. 127.0.0.1:0 for any port).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// Serve plugin ID even below the version it last served, as the state store records
        /// it (repeatable). Without it, a start or SIGHUP reload whose plugin is older than the
        /// one its id served before (a registry tag moved back, an older file) is refused. The
        /// downgrade is audited and becomes the version on record, so the next start needs no
        /// flag; the flag holds for every reload of this process.
        #[arg(long = "allow-downgrade", value_name = "ID")]
        allow_downgrade: Vec<String>,
        /// Serve the built-in first-party plugins, signed with a throwaway key, on the demo
        /// config: every tool visible, callers without an API key run as tenant `default`.
        #[cfg(feature = "demo")]
        #[arg(long, conflicts_with_all = ["adapters", "policies", "config"])]
        demo: bool,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Publish a signed component to an OCI registry as a WebAssembly artifact (the CNCF
    /// layout `wkg` and `oras` read) and print its digest. Credentials and transport come
    /// from `[[oci.registry]]` in the config, never from the command line.
    Push {
        /// The signed component (from `gatehouse pack`).
        component: PathBuf,
        /// Where: `oci://REGISTRY/REPOSITORY:TAG`.
        #[arg(value_name = "oci://REGISTRY/REPO:TAG")]
        reference: String,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Fetch a component from an OCI registry by tag or digest, and print the reference pinned
    /// to its digest (what `serve --adapter` and `--policy` take). Verifies nothing: run
    /// `gatehouse verify` on the file, as a gateway does when it loads.
    Pull {
        /// `oci://REGISTRY/REPOSITORY:TAG` or `oci://REGISTRY/REPOSITORY@sha256:DIGEST`.
        #[arg(value_name = "oci://...")]
        reference: String,
        /// Where to write it. Default: the repository's last name, `.wasm`, here.
        #[arg(short, long)]
        out: Option<PathBuf>,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Pending calls and their decisions: list, show, approve, reject (`[store]` in the
    /// config names the store file).
    Approvals {
        #[command(subcommand)]
        command: approvals::ApprovalsCommand,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Act on a running gateway through its admin API (`[admin]` in its config): approvals,
    /// policy push and rollback, plugins, audit verification. The token comes from
    /// $GATEHOUSE_ADMIN_TOKEN (or --token-file).
    Admin {
        #[command(subcommand)]
        command: admin::AdminCommand,
        #[command(flatten)]
        args: admin::AdminArgs,
    },
    /// The hash-chained audit log: verify, export, show.
    Audit {
        #[command(subcommand)]
        command: state::AuditCommand,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Signed receipts of calls (`[receipts]`): check one offline.
    Receipt {
        #[command(subcommand)]
        command: receipt::ReceiptCommand,
    },
    /// Idempotency records: list the ones a crash left indeterminate, and resolve them.
    Idempotency {
        #[command(subcommand)]
        command: state::IdempotencyCommand,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Evaluate a recorded call's action again with the given policy modules (and the config's
    /// bindings), without running any adapter, and say whether the decision would change:
    /// the what-if to run before swapping a policy. With --session, every call of a recorded
    /// session, each with the session as it stood then: try a flow rule on recorded traffic
    /// before enforcing it.
    Replay {
        /// The recorded call's id (`call_...`).
        #[arg(required_unless_present = "session", conflicts_with = "session")]
        tool_call_id: Option<String>,
        /// A signed policy module to evaluate with (repeatable).
        #[arg(long = "policy", value_name = "FILE")]
        policies: Vec<PathBuf>,
        /// Replay every call of this session (its key: an MCP session id, a trace id, `""` for
        /// the principal's window), oldest first.
        #[arg(long, value_name = "KEY", requires_all = ["tenant", "principal"])]
        session: Option<String>,
        /// The session's tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Whose session it is.
        #[arg(long)]
        principal: Option<String>,
        #[command(flatten)]
        config: ConfigArg,
    },
    /// Policies written as Cedar rules: `pack` checks them against the config's tools and
    /// signs them as a policy module; `test` runs table tests of them.
    Policy {
        #[command(subcommand)]
        command: policy::PolicyCommand,
    },
    /// Put an existing MCP server or OpenAPI service behind gatehouse: write the manifest of
    /// the generic `mcp-upstream` or `openapi` adapter (one capability per tool or operation,
    /// defaults from annotations or methods) and the operator-config snippet granting it;
    /// review them, then sign (--key) and serve.
    Import {
        #[command(subcommand)]
        command: import::command::ImportCommand,
    },
    /// Start a plugin: write an adapter or policy project (manifest, code with tests,
    /// development key, a config that serves it) that builds, tests and packs as is, with the
    /// SDK this binary carries.
    New(new::NewArgs),
    /// Build the plugin project in a directory, whatever its language (Rust, JavaScript,
    /// Python): compile it to a component for wasm32-wasip2, pack it with manifest.toml and
    /// sign it with the project's development key (or --key). The JavaScript and Python
    /// toolchains are installed on first use into a per-user cache.
    Build(build::BuildArgs),
    /// Internal: `pack`'s look at the code, run by `pack` in a child process within bounds.
    #[command(name = examine::WORKER, hide = true)]
    Examine {
        /// The world the component implements.
        #[arg(long, value_enum)]
        kind: examine::Kind,
        /// The component.
        component: PathBuf,
        /// Where to write what was found.
        out: PathBuf,
    },
    /// Run the host on its built-in defaults with the first-party plugins, signed with a
    /// throwaway key, through a short tour of governed calls.
    #[cfg(feature = "demo")]
    Demo {
        /// Also write the signed plugins, the demo key pair and a matching gatehouse.toml here.
        #[arg(long)]
        export: Option<PathBuf>,
    },
}

/// How this process runs `gatehouse` again with some arguments, for work done in a child
/// process (`pack`'s compile, within bounds): set by an embedder whose program is not
/// `gatehouse` ([`relaunch_with`]).
static RELAUNCH: std::sync::OnceLock<fn(&[String]) -> std::process::Command> =
    std::sync::OnceLock::new();

/// Sets how this process runs `gatehouse` again with some arguments, for the work the command
/// line does in a child process (`pack` compiles the component in one, within bounds). By
/// default the program is this process's own executable, which is right for the `gatehouse`
/// binary; a program that runs the command line through [`run`] or [`main_with`] and is not
/// `gatehouse` itself (a test binary) sets a command that ends in [`main_with`] with those
/// arguments. The first setting stays.
pub fn relaunch_with(command: fn(&[String]) -> std::process::Command) {
    let _ = RELAUNCH.set(command);
}

/// The command that runs `gatehouse args...` in a child process ([`relaunch_with`]).
fn relaunch(args: &[String]) -> std::process::Command {
    match RELAUNCH.get() {
        Some(command) => command(args),
        None => {
            let program = std::env::current_exe().unwrap_or_else(|_| "gatehouse".into());
            let mut command = std::process::Command::new(program);
            command.args(args);
            command
        }
    }
}

/// Runs the `gatehouse` binary: logs to stderr (`RUST_LOG` filters, default `warn`); with
/// feature `otlp` and `OTEL_EXPORTER_OTLP_ENDPOINT` set, call spans are exported over OTLP.
pub fn main() -> ExitCode {
    ExitCode::from(main_with(std::env::args_os()))
}

/// [`main`] with these arguments (the first is the program name): sets up logging as
/// `--log-format` says, then [`run`]s, writing results to stdout. Returns the exit code.
pub fn main_with<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let args: Vec<std::ffi::OsString> = args.into_iter().map(Into::into).collect();
    // The process's rustls provider, before any reqwest client (OCI, import, OTLP) is built.
    gatehouse_host::install_default_provider();
    // Bad arguments are reported by `run`; logging then is plain text.
    let format = Cli::try_parse_from(&args).map_or(LogFormat::Text, |cli| cli.log_format);
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"))
        // The lines `serve` prints at start are log lines in JSON mode, whatever the level.
        .add_directive(
            format!("{BANNER}=info")
                .parse()
                .expect("a valid filter directive"),
        );
    let logging = Tracing::new(format, filter);
    // Fails only if this process already set a subscriber; logging then goes there.
    let _ = tracing_subscriber::registry()
        .with(logging.layers)
        .try_init();
    #[cfg(feature = "otlp")]
    if let Some(error) = logging.otlp_error {
        tracing::warn!("{error}; traces are not exported");
    }
    let code = run(args, &mut std::io::stdout().lock());
    #[cfg(feature = "otlp")]
    if let Some(exporter) = logging.exporter {
        exporter.shutdown();
    }
    code
}

/// The process's tracing layers: the log lines, and the call spans' export.
struct Tracing {
    layers: Vec<Box<dyn tracing_subscriber::Layer<tracing_subscriber::Registry> + Send + Sync>>,
    /// Flushes the exported spans at exit.
    #[cfg(feature = "otlp")]
    exporter: Option<gatehouse_host::telemetry::otlp::Exporter>,
    /// Why spans are not exported although the environment names an endpoint.
    #[cfg(feature = "otlp")]
    otlp_error: Option<String>,
}

impl Tracing {
    /// Log lines in `format` to stderr, as `filter` lets through; with feature `otlp` and an
    /// OTLP endpoint in the environment, the call spans exported, whatever `filter` says.
    ///
    /// Without an exporter there is no layer for the spans at all. An empty layer
    /// (`Option::None`) beside a filtered one enables every span, and each call paid for spans
    /// nobody read.
    fn new(format: LogFormat, filter: tracing_subscriber::EnvFilter) -> Self {
        // Colours only for a person at a terminal, never into a file or a log collector.
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
        let logs = match format {
            LogFormat::Text => logs.boxed(),
            LogFormat::Json => logs.json().boxed(),
        }
        .with_filter(filter);
        #[cfg_attr(
            not(feature = "otlp"),
            expect(unused_mut, reason = "feature `otlp` adds a layer")
        )]
        let mut layers = vec![logs.boxed()];
        #[cfg(feature = "otlp")]
        let (exporter, otlp_error) = if gatehouse_host::telemetry::otlp::configured() {
            match gatehouse_host::telemetry::otlp::layer() {
                Ok((layer, exporter)) => {
                    // The call's spans (`gatehouse_host::telemetry`) and the MCP request's
                    // (`mcp_call`, gatehouse-server's).
                    let spans = tracing_subscriber::filter::Targets::new()
                        .with_target("gatehouse_host", tracing::Level::INFO)
                        .with_target("gatehouse_server", tracing::Level::INFO);
                    layers.push(layer.with_filter(spans).boxed());
                    (Some(exporter), None)
                }
                Err(error) => (None, Some(error)),
            }
        } else {
            (None, None)
        };
        Self {
            layers,
            #[cfg(feature = "otlp")]
            exporter,
            #[cfg(feature = "otlp")]
            otlp_error,
        }
    }
}

/// Runs the CLI with these arguments (the first is the program name), writing results to
/// `out` and errors to stderr. Returns the exit code.
pub fn run<I, T>(args: I, out: &mut dyn Write) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let _ = e.print();
            return u8::try_from(e.exit_code()).unwrap_or(2);
        }
    };
    let json = cli.log_format == LogFormat::Json;
    match execute(cli.command, json, out) {
        Ok(code) => code,
        Err(failure) => {
            // In JSON mode through the JSON log, when this process set one up.
            if json && tracing::dispatcher::has_been_set() {
                tracing::error!(target: BANNER, "{}", failure.message);
            } else {
                eprintln!("error: {}", failure.message);
            }
            failure.code
        }
    }
}

/// The log target of the lines `serve` prints as it starts and stops, and of a command's
/// error, in `--log-format json` mode: always shown, like the text it replaces.
const BANNER: &str = "gatehouse::banner";

/// What `serve` writes for a person, as log lines instead (`--log-format json`): each line
/// written becomes one INFO event of target [`BANNER`], so every line on the output is JSON.
#[derive(Default)]
struct LogLines(Vec<u8>);

impl Write for LogLines {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.extend_from_slice(bytes);
        while let Some(end) = self.0.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.0.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..end]);
            tracing::info!(target: BANNER, "{line}");
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn execute(command: Command, json: bool, out: &mut dyn Write) -> Result<u8, Failure> {
    match command {
        Command::Keygen { key_id, out_dir } => keygen(&key_id, &out_dir, out),
        Command::Pack {
            component,
            manifest,
            key,
            output,
        } => pack(&component, &manifest, &key, output, out),
        Command::Verify { component, config } => verify(&component, &config, out),
        Command::Inspect { component } => inspect(&component, out),
        Command::Push {
            component,
            reference,
            config,
        } => registry::push(&component, &reference, &config, out),
        Command::Pull {
            reference,
            out: file,
            config,
        } => registry::pull(&reference, file.as_deref(), &config, out),
        Command::Approvals { command, config } => {
            approvals::run(command, &state::StoreDesk::open(&config)?, out)
        }
        Command::Audit { command, config } => state::audit(command, &config, out),
        Command::Admin { command, args } => admin::admin(&args, command, out),
        Command::Receipt { command } => receipt::receipt(command, out),
        Command::Import { command } => import::command::import(command, out),
        Command::Policy { command } => policy::policy(command, out),
        Command::New(args) => new::new(&args, out),
        Command::Build(args) => build::build(&args, out),
        Command::Examine {
            kind,
            component,
            out: file,
        } => examine::worker(kind.into(), &component, &file).map_err(usage),
        Command::Idempotency { command, config } => state::idempotency(command, &config, out),
        Command::Replay {
            tool_call_id,
            policies,
            session,
            tenant,
            principal,
            config,
        } => match (tool_call_id, session, tenant, principal) {
            (_, Some(key), Some(tenant), Some(principal)) => {
                let key = gatehouse_host::state::SessionKey {
                    tenant,
                    principal,
                    key,
                };
                state::replay_session(&key, &policies, &config, out)
            }
            (Some(tool_call_id), ..) => state::replay(&tool_call_id, &policies, &config, out),
            _ => Err(usage(
                "name a recorded call (`call_...`), or a session with --session, --tenant and --principal",
            )),
        },
        Command::Serve {
            adapters,
            policies,
            listen,
            allow_downgrade,
            #[cfg(feature = "demo")]
            demo,
            config,
        } => {
            #[cfg(not(feature = "demo"))]
            let demo = false;
            let mut lines = LogLines::default();
            let out: &mut dyn Write = if json { &mut lines } else { out };
            let args = serve::ServeArgs {
                adapters: &adapters,
                policies: &policies,
                listen,
                demo,
                allow_downgrade: &allow_downgrade,
            };
            serve::serve(&args, &config, out)
        }
        #[cfg(feature = "demo")]
        Command::Demo { export } => demo::run(export.as_deref(), out)
            .map(|()| 0)
            .map_err(refused),
        Command::Call(args) => call::call(&args, out),
    }
}

fn keygen(key_id: &str, out_dir: &Path, out: &mut dyn Write) -> Result<u8, Failure> {
    if key_id.is_empty()
        || !key_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return Err(usage(format!(
            "key id `{key_id}` must be non-empty [A-Za-z0-9._-]"
        )));
    }
    let key = SigningKey::generate(key_id).map_err(refused)?;
    std::fs::create_dir_all(out_dir).map_err(|e| usage(format!("{}: {e}", out_dir.display())))?;
    let secret = out_dir.join(format!("{key_id}.secret.toml"));
    let public = out_dir.join(format!("{key_id}.pub.toml"));
    for path in [&secret, &public] {
        if path.exists() {
            return Err(usage(format!(
                "{} already exists; refusing to overwrite a key",
                path.display()
            )));
        }
    }
    gatehouse_core::secret::write_private(&secret, key.to_toml().as_bytes())
        .map_err(|e| usage(format!("{}: {e}", secret.display())))?;
    std::fs::write(&public, key.public_key().to_toml())
        .map_err(|e| usage(format!("{}: {e}", public.display())))?;
    say!(out, "wrote {} (keep it private)", secret.display());
    say!(out, "wrote {} (give it to operators)", public.display());
    say!(out, "");
    say!(out, "Operators trust this key with, in gatehouse.toml:");
    say!(out, "[[trust.publisher]]");
    say!(out, "key_id = \"{key_id}\"");
    say!(out, "public_key = \"{}\"", key.public_key().to_base64());
    say!(out, "adapters = [\"<adapter id glob>\"]");
    say!(out, "policies = []");
    Ok(0)
}

pub(crate) fn pack(
    component: &Path,
    manifest_path: &Path,
    key: &Path,
    output: Option<PathBuf>,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let bytes = read_file(component).map_err(usage)?;
    let manifest = Manifest::from_file(manifest_path).map_err(usage)?;
    let key = SigningKey::from_file(key).map_err(usage)?;
    // The world, and the ids the code handles, checked against the manifest and recorded; the
    // code compiled and asked in a child process within bounds.
    let bounds = examine::Bounds::from_env().map_err(usage)?;
    let handles = examine::examine(
        &bytes,
        manifest.kind(),
        &component.display().to_string(),
        &bounds,
    )
    .map_err(refused)?;
    let (bytes, warnings) = plugin::handles::record(
        &bytes,
        &manifest,
        handles,
        &manifest_path.display().to_string(),
    )
    .map_err(refused)?;
    for warning in warnings {
        say!(out, "warning: {warning}");
    }
    if let Manifest::Adapter(adapter) = &manifest {
        for warning in adapter
            .capabilities
            .iter()
            .filter_map(Capability::idempotency_disagreement)
        {
            say!(out, "warning: {warning}");
        }
    }
    let signed = plugin::pack(&bytes, &manifest, &key).map_err(refused)?;
    let output = output.unwrap_or_else(|| {
        let stem = component
            .file_stem()
            .map_or("component".into(), |s| s.to_string_lossy());
        component.with_file_name(format!("{stem}.signed.wasm"))
    });
    std::fs::write(&output, &signed).map_err(|e| usage(format!("{}: {e}", output.display())))?;
    let inspection = plugin::inspect(&signed).map_err(refused)?;
    say!(
        out,
        "packed {} {} {} signed by `{}` -> {} ({})",
        manifest.kind(),
        manifest.id(),
        manifest.version(),
        key.key_id,
        output.display(),
        inspection.digest
    );
    Ok(0)
}

fn verify(component: &Path, config: &ConfigArg, out: &mut dyn Write) -> Result<u8, Failure> {
    let host = Host::new(load_config(config)?.host).map_err(usage)?;
    let bytes = read_file(component).map_err(usage)?;
    let verified = host
        .verify(&bytes)
        .map_err(|e| refused(format!("{}: refused: {e}", component.display())))?;
    let kind = verified.manifest.kind();
    let (id, version) = (
        verified.manifest.id().to_owned(),
        verified.manifest.version().to_owned(),
    );
    match kind {
        PluginKind::Adapter => host.load_adapter(&bytes).map(drop),
        PluginKind::Policy => host.load_policy(&bytes).map(drop),
    }
    .map_err(|e| refused(format!("{}: refused: {e}", component.display())))?;
    say!(
        out,
        "ok: {kind} {id} {version}, signed by trusted key `{}`, digest {}",
        verified.key_id,
        verified.digest
    );
    Ok(0)
}

fn inspect(component: &Path, out: &mut dyn Write) -> Result<u8, Failure> {
    let bytes = read_file(component).map_err(usage)?;
    let inspection = plugin::inspect(&bytes).map_err(refused)?;
    let mut shown = serde_json::to_value(&inspection).expect("inspection serializes");
    // A module `gatehouse policy pack` made carries its rules' text, for a reviewer.
    if let Ok(list) = plugin::sections::sections(&bytes)
        && let Some(rules) = plugin::sections::custom(&list, policy::RULES_SECTION).first()
    {
        shown["cedar_rules"] = serde_json::Value::String(String::from_utf8_lossy(rules).into());
    }
    say!(
        out,
        "{}",
        serde_json::to_string_pretty(&shown).expect("inspection serializes")
    );
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether an INFO span of the host (as [`gatehouse_host::telemetry`] makes for every call) is
    /// enabled under the process's tracing set up with the log filter `filter`.
    fn call_span_enabled(filter: &str) -> bool {
        let logging = Tracing::new(LogFormat::Json, tracing_subscriber::EnvFilter::new(filter));
        let subscriber = tracing_subscriber::registry().with(logging.layers);
        tracing::subscriber::with_default(subscriber, || {
            !tracing::info_span!(target: "gatehouse_host::telemetry", "tool_call").is_disabled()
        })
    }

    #[test]
    fn the_call_spans_are_made_only_when_a_layer_reads_them() {
        // No OTLP endpoint in the test's environment: only the log lines read spans.
        assert!(
            !call_span_enabled("warn"),
            "nobody reads them at the default level"
        );
        assert!(call_span_enabled("info"), "log lines at INFO carry them");
    }
}

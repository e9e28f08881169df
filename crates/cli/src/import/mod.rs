//! `gatehouse import`: the manifest of a generic first-party adapter, written from an
//! upstream's own description, and the operator-config snippet that grants it.
//!
//! 1. **Read** the source: an MCP server's `tools/list` ([`mcp`]), or an OpenAPI document
//!    ([`openapi`]).
//! 2. **Choose**, per tool: a capability id (made valid, refused if two tools collide:
//!    [`names`]), the capability class and approval mode from what the source says, and the
//!    signed `upstream` mapping the generic component forwards with, including a digest of
//!    the tool's definition ([`digest`]), so a changed upstream is noticed (`--check`).
//! 3. **Write** `manifest.toml` and `config.toml` ([`output`]): each file is written next to
//!    its final name first and renamed into place only once all are written, so a failed
//!    import leaves nothing half-written.
//!
//! Every choice is returned as a [`Choice`] so the command line can print the table an
//! operator reads before signing.
//!
//! ```no_run
//! # async fn run() -> Result<(), gatehouse_cli::import::ImportError> {
//! use gatehouse_cli::import::{mcp, Options};
//!
//! let options = Options::new("acme.tools");
//! let import = mcp::import("http://127.0.0.1:8931/mcp", &[], &options).await?;
//! println!("{} capabilities", import.manifest.capabilities.len());
//! # Ok(()) }
//! ```

use std::collections::BTreeSet;
use std::path::PathBuf;

use gatehouse_core::model::{ApprovalMode, CapabilityClass};
use gatehouse_host::config::{GrantConfig, MethodName, UrlPattern};
use gatehouse_host::plugin::manifest::EgressRequest;
use gatehouse_host::plugin::manifest::{AdapterManifest, Capability, Manifest};
use headers::{HeaderCredential, bindings};

pub(crate) mod command;
pub mod digest;
pub mod headers;
pub mod mcp;
pub mod names;
pub mod openapi;
pub mod output;

/// Capabilities one import may write, at most. The manifest travels inside the component and
/// every capability is a tool in `tools/list`: past a few thousand, neither is reviewable nor
/// usable by a model; `--include`/`--exclude` narrow a larger source.
pub const MAX_CAPABILITIES: usize = 4096;

/// What an import is asked for, besides its source.
#[derive(Debug, Clone)]
pub struct Options {
    /// The adapter id of the manifest, e.g. `acme.tools`.
    pub id: String,
    /// The manifest's version. Default: `0.1.0`.
    pub version: String,
    /// The manifest's publisher. Default: `operator`.
    pub publisher: String,
    /// Globs over the source's tool names: only matching tools are imported. Default: all.
    pub include: Vec<String>,
    /// Globs over the source's tool names: matching tools are left out. Default: none.
    pub exclude: Vec<String>,
}

impl Options {
    /// Options for adapter `id` with the defaults above.
    pub fn new(id: impl Into<String>) -> Self {
        Self {
            id: id.into(),
            version: "0.1.0".to_owned(),
            publisher: "operator".to_owned(),
            include: Vec::new(),
            exclude: Vec::new(),
        }
    }
}

/// A finished import: the manifest, the egress grant it needs, and what was chosen.
#[derive(Debug, Clone)]
pub struct Import {
    /// The adapter manifest, valid (checked like any manifest).
    pub manifest: AdapterManifest,
    /// The `[[egress.grant]]` the adapter needs, with the credential bindings.
    pub grant: GrantConfig,
    /// One row per imported capability, in manifest order.
    pub choices: Vec<Choice>,
    /// Source items left out, with the reason (filtered out, or unsupported).
    pub skipped: Vec<Skipped>,
}

/// How one source item became a capability, for the table an operator reviews.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The item in the source: the tool's name.
    pub source: String,
    /// The capability id chosen for it.
    pub capability: String,
    /// Its class.
    pub class: CapabilityClass,
    /// Its maximum approval mode.
    pub mode: ApprovalMode,
    /// Why: which annotation or method decided.
    pub reason: String,
}

/// A source item that was not imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The item in the source.
    pub source: String,
    /// Why it was left out.
    pub reason: String,
}

/// The one destination an imported adapter reaches, as both the manifest's egress request
/// and the operator's grant say it.
#[derive(Debug, Clone)]
struct Destination<'a> {
    /// The upstream's URL (an MCP endpoint, an OpenAPI server), as `scheme://host[:port]/path`.
    url: &'a str,
    /// The methods the capabilities use.
    methods: BTreeSet<MethodName>,
    /// The credentials it is sent with.
    credentials: &'a [HeaderCredential],
    /// Guest headers the grant lets through.
    headers: BTreeSet<String>,
    /// Non-safe methods that only read there.
    read_methods: BTreeSet<MethodName>,
}

/// The import of `capabilities` (with their `choices` and the `skipped` rest), reaching
/// `destination`: refused if there is nothing to import (`empty` says why), too much, or the
/// manifest is not valid.
fn assemble(
    options: &Options,
    description: String,
    destination: Destination<'_>,
    (capabilities, choices, skipped): (Vec<Capability>, Vec<Choice>, Vec<Skipped>),
    empty: impl FnOnce() -> String,
) -> Result<Import, ImportError> {
    if capabilities.is_empty() {
        return Err(ImportError::Empty { reason: empty() });
    }
    if capabilities.len() > MAX_CAPABILITIES {
        return Err(ImportError::TooMany {
            count: capabilities.len(),
        });
    }
    let url = destination.url;
    let pattern =
        UrlPattern::parse(url).map_err(|e| ImportError::Manifest(format!("url `{url}`: {e}")))?;
    let manifest = AdapterManifest {
        id: options.id.clone(),
        version: options.version.clone(),
        publisher: options.publisher.clone(),
        description,
        egress: vec![EgressRequest {
            url: pattern.clone(),
            methods: destination.methods.clone(),
            credentials: destination
                .credentials
                .iter()
                .map(|c| c.slot.clone())
                .collect(),
        }],
        capabilities,
    };
    Manifest::Adapter(manifest.clone())
        .validate()
        .map_err(|e| ImportError::Manifest(e.to_string()))?;
    let grant = GrantConfig {
        adapter: options.id.clone(),
        url: pattern,
        methods: destination.methods,
        credentials: bindings(destination.credentials),
        allow_private: output::private_ranges(url),
        headers: destination.headers,
        read_methods: destination.read_methods,
    };
    Ok(Import {
        manifest,
        grant,
        choices,
        skipped,
    })
}

/// Why an import did not happen. Each says what to fix; the command line exits 2 on all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The upstream URL is not an `http(s)://host[:port]/path` URL.
    #[error(
        "`{url}` is not an http(s) URL of an MCP endpoint, e.g. `https://tools.example.com/mcp`"
    )]
    Url {
        /// The URL as given.
        url: String,
    },
    /// Nothing answered at the upstream's address.
    #[error("cannot reach {url}: {reason}; check the URL and that the server is running")]
    Unreachable {
        /// The upstream.
        url: String,
        /// The connection error.
        reason: String,
    },
    /// Something answered, but not as an MCP server.
    #[error("{url} did not answer as an MCP server: {reason}")]
    NotMcp {
        /// The upstream.
        url: String,
        /// What went wrong, bounded.
        reason: String,
    },
    /// A `--header` is not `Name: [scheme ]${ENV}`.
    #[error("--header `{header}`: {problem}")]
    Header {
        /// The argument as given.
        header: String,
        /// What is wrong and the expected form.
        problem: String,
    },
    /// An `--include` or `--exclude` glob does not parse.
    #[error("glob `{glob}`: {reason}")]
    Glob {
        /// The glob.
        glob: String,
        /// The parser's message.
        reason: String,
    },
    /// The OpenAPI document does not parse.
    #[error("the spec is not valid {format} at line {line}, column {column}: {message}")]
    Syntax {
        /// `JSON` or `YAML`.
        format: &'static str,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The OpenAPI document parses but cannot be imported (its version, its server, a `$ref`
    /// that does not resolve).
    #[error("the spec: {0}")]
    Spec(String),
    /// Two source items map to the same capability id.
    #[error(
        "`{first}` and `{second}` both become capability `{capability}`; leave one out with \
         --exclude, or rename it upstream"
    )]
    Collision {
        /// The capability id.
        capability: String,
        /// The first item.
        first: String,
        /// The second item.
        second: String,
    },
    /// A source item's name has nothing a capability id can be made of.
    #[error(
        "`{source_name}` has no letter or digit to make a capability id of; leave it out with --exclude"
    )]
    Unnamable {
        /// The item.
        source_name: String,
    },
    /// The filters left nothing to import.
    #[error("nothing to import: {reason}")]
    Empty {
        /// What the source offered and what the filters left.
        reason: String,
    },
    /// More capabilities than [`MAX_CAPABILITIES`].
    #[error(
        "{count} capabilities is more than one adapter may declare ({MAX_CAPABILITIES}); import \
         a part with --include or --exclude"
    )]
    TooMany {
        /// How many the source yields after filtering.
        count: usize,
    },
    /// The result would not be a valid manifest (a bad `--id`, a schema TOML cannot hold).
    #[error("the imported manifest is not valid: {0}")]
    Manifest(String),
    /// An existing import directory could not be read (`--check`).
    #[error("{path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The output could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

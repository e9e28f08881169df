//! `gatehouse import`: the manifest of a generic first-party adapter, written from an
//! upstream's own description, and the operator-config snippet that grants it.
//!
//! 1. **Read** the source: an MCP server's `tools/list` ([`mcp`]), an OpenAPI document
//!    ([`openapi`]), or an A2A agent's card ([`a2a`]).
//! 2. **Choose**, per tool: a capability id (made valid, refused if two tools collide:
//!    [`names`]), the capability class and approval mode from what the source says, and the
//!    signed `upstream` mapping the generic component forwards with, including a digest of
//!    the tool's definition ([`digest`]), so a changed upstream is noticed (`--check`).
//! 3. **Write** `manifest.toml` and `config.toml` ([`output`]): each file is written next to
//!    its final name first and renamed into place only once all are written, so a failed
//!    import leaves nothing half-written.
//!
//! Every choice is returned as a [`Choice`] so the command line can print the table an
//! operator reads before signing. With `--config FILE`, the import is also merged into the
//! operator's config, so the file serves as it is ([`merge`]).
//!
//! ```no_run
//! # async fn run() -> Result<(), gatehouse_cli::import::ImportError> {
//! use gatehouse_cli::import::{mcp, Options};
//!
//! let options = Options::new("acme.tools");
//! let tls = gatehouse_cli::import::tls(&[])?; // the system's roots, no extra CA
//! let import = mcp::import("https://mcp.example.com/mcp", &[], &tls, &options).await?;
//! println!("{} capabilities", import.manifest.capabilities.len());
//! # Ok(()) }
//! ```

use std::collections::BTreeSet;
use std::net::IpAddr;

use gatehouse_core::model::{ApprovalMode, CapabilityClass};
use gatehouse_host::config::{GrantConfig, MethodName, UrlPattern};
use gatehouse_host::plugin::manifest::EgressRequest;
use gatehouse_host::plugin::manifest::{
    AdapterManifest, CallerRequest, Capability, Manifest, Prompt, Resource, ResourceTemplate,
};
use gatehouse_host::stdio::{StdioConfig, StdioSpec};
use headers::{HeaderCredential, bindings};
use ipnet::IpNet;

pub use error::ImportError;

pub mod a2a;
pub(crate) mod command;
pub mod digest;
mod error;
pub mod generic;
pub mod headers;
pub mod mcp;
pub mod merge;
pub mod names;
pub mod openapi;
pub mod output;
pub mod stdio;

/// Capabilities one import may write, at most. The manifest travels inside the component and
/// every capability is a tool in `tools/list`: past a few thousand, neither is reviewable nor
/// usable by a model; `--include`/`--exclude` narrow a larger source.
pub const MAX_CAPABILITIES: usize = 4096;

/// How an import reaches its source over https, as the gateway will: trusting the system's
/// roots and the CA certificates in `ca_files` (`--ca-file`, which the gateway trusts through
/// `[egress] extra_root_certificates`).
pub fn tls(ca_files: &[std::path::PathBuf]) -> Result<gatehouse_host::TlsClient, ImportError> {
    let config = gatehouse_host::config::EgressConfig {
        extra_root_certificates: ca_files.to_vec(),
        ..gatehouse_host::config::EgressConfig::default()
    };
    gatehouse_host::TlsClient::from_config(&config).map_err(|e| ImportError::Read {
        path: "--ca-file".into(),
        reason: e.to_string(),
    })
}

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
    /// The `[[egress.grant]]` entries the adapter needs, with the credential bindings: the
    /// upstream's one; for a stdio server (whose adapter reaches only its own process), those
    /// the server reaches through its egress proxy (`--net`), if any.
    pub grants: Vec<GrantConfig>,
    /// The `[stdio]` table that grants a stdio server what the import gave it: its
    /// `[[stdio.server]]` entry, and the packages directory when the import named one.
    pub stdio: Option<StdioConfig>,
    /// One row per imported capability, in manifest order.
    pub choices: Vec<Choice>,
    /// Source items left out, with the reason (filtered out, or unsupported).
    pub skipped: Vec<Skipped>,
    /// What the import changed or assumed to make the source fit, for the reviewer: an
    /// OpenAPI server without a scheme taken as https, schemas kept in `$defs`, patterns
    /// translated or dropped.
    pub notes: Vec<String>,
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
    /// Whether the source's name was longer than a capability id may be, so the id is cut
    /// and ends in a suffix from the name's SHA-256 ([`names`]).
    pub shortened: bool,
    /// The labels proposed for it ([`proposed_labels`]), as the manifest's `produces` and
    /// `sends` say them, with why; empty when none.
    pub labels: String,
}

impl Choice {
    /// The row of `source`, imported as `capability` with `class` and `mode` because of
    /// `reason`, with the proposed `labels`.
    fn new(
        source: &str,
        capability: String,
        (class, mode): (CapabilityClass, ApprovalMode),
        reason: &str,
        labels: String,
    ) -> Self {
        Self {
            source: source.to_owned(),
            capability,
            class,
            mode,
            reason: reason.to_owned(),
            shortened: names::shortened(source),
            labels,
        }
    }
}

/// Words in a tool's name that say it reads the open web: its results are `untrusted`.
const UNTRUSTED_WORDS: [&str; 8] = [
    "fetch", "browse", "browser", "navigate", "scrape", "crawl", "web", "url",
];

/// The labels an import proposes for an MCP tool, for the operator to review as the class and
/// mode: a tool that fetches or browses (a word of its name: `fetch`, `browser_navigate`)
/// `produces` `untrusted` content; one whose `openWorldHint` is true `sends` data `external`.
/// Returns (`produces`, `sends`, the table's words for them).
pub fn proposed_labels(name: &str, open_world: Option<bool>) -> (Vec<String>, Vec<String>, String) {
    use gatehouse_core::model::label::{EXTERNAL, UNTRUSTED};
    let lower = name.to_ascii_lowercase();
    let fetches = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|word| UNTRUSTED_WORDS.contains(&word));
    let produces: Vec<String> = fetches.then(|| UNTRUSTED.to_owned()).into_iter().collect();
    let sends: Vec<String> = (open_world == Some(true))
        .then(|| EXTERNAL.to_owned())
        .into_iter()
        .collect();
    let mut why = Vec::new();
    if fetches {
        why.push(format!("produces {UNTRUSTED} (its name)"));
    }
    if !sends.is_empty() {
        why.push(format!("sends {EXTERNAL} (openWorldHint)"));
    }
    (produces, sends, why.join("; "))
}

/// A source item that was not imported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skipped {
    /// The item in the source.
    pub source: String,
    /// Why it was left out.
    pub reason: String,
}

/// An import's capabilities, with their choices and the source items left out.
type Parts = (Vec<Capability>, Vec<Choice>, Vec<Skipped>);

/// What an import serves besides its capabilities (an MCP server's resources, resource
/// templates and prompts), pinned in the manifest as they are.
#[derive(Debug, Clone, Default)]
pub struct Served {
    /// `[[resource]]` entries.
    pub resources: Vec<Resource>,
    /// `[[resource_template]]` entries.
    pub templates: Vec<ResourceTemplate>,
    /// `[[prompt]]` entries.
    pub prompts: Vec<Prompt>,
}

impl Served {
    fn len(&self) -> usize {
        self.resources.len() + self.templates.len() + self.prompts.len()
    }
}

/// What an imported adapter reaches: one HTTP destination, or its own stdio server.
#[derive(Debug, Clone)]
enum Reach<'a> {
    /// An upstream over HTTP, through an egress grant.
    Http(Destination<'a>),
    /// A stdio server: what runs (signed), the operator's grant of it, and the destinations
    /// the server reaches through its egress proxy.
    Stdio(StdioSpec, StdioConfig, Vec<Destination<'a>>),
}

/// The one destination an imported adapter reaches, as both the manifest's egress request
/// and the operator's grant say it.
#[derive(Debug, Clone)]
pub struct Destination<'a> {
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

/// The import of `capabilities` (with their `choices` and the `skipped` rest) and what it
/// `served` besides, reaching `destination`: refused if there is nothing to import (`empty` says why), too much, or the
/// manifest is not valid.
fn assemble(
    options: &Options,
    description: String,
    reach: Reach<'_>,
    (capabilities, choices, skipped): Parts,
    served: Served,
    empty: impl FnOnce() -> String,
) -> Result<Import, ImportError> {
    if capabilities.is_empty() && served.len() == 0 {
        return Err(ImportError::Empty { reason: empty() });
    }
    let count = capabilities.len() + served.len();
    if count > MAX_CAPABILITIES {
        return Err(ImportError::TooMany {
            count,
            max: MAX_CAPABILITIES,
        });
    }
    let (destinations, spec, stdio) = match reach {
        Reach::Http(destination) => (vec![destination], None, None),
        Reach::Stdio(spec, grant, net) => (net, Some(spec), Some(grant)),
    };
    let (egress, grants) = destinations
        .into_iter()
        .map(|destination| {
            let url = destination.url;
            let pattern = UrlPattern::parse(url)
                .map_err(|e| ImportError::Manifest(format!("url `{url}`: {e}")))?;
            let request = EgressRequest {
                url: pattern.clone(),
                methods: destination.methods.clone(),
                credentials: destination
                    .credentials
                    .iter()
                    .map(|c| c.slot.clone())
                    .collect(),
            };
            let grant = GrantConfig {
                adapter: options.id.clone(),
                url: pattern,
                methods: destination.methods,
                credentials: bindings(destination.credentials),
                allow_private: private_ranges(url),
                headers: destination.headers,
                read_methods: destination.read_methods,
                delegate: false,
            };
            Ok((request, grant))
        })
        .collect::<Result<(Vec<_>, Vec<_>), ImportError>>()?;
    let manifest = AdapterManifest {
        id: options.id.clone(),
        version: options.version.clone(),
        publisher: options.publisher.clone(),
        description,
        egress,
        stdio: spec.map(Box::new),
        caller: CallerRequest::default(),
        capabilities,
        resources: served.resources,
        resource_templates: served.templates,
        prompts: served.prompts,
    };
    Manifest::Adapter(manifest.clone())
        .validate()
        .map_err(|e| ImportError::Manifest(e.to_string()))?;
    Ok(Import {
        manifest,
        grants,
        stdio,
        choices,
        skipped,
        notes: Vec::new(),
    })
}

/// The special-purpose ranges the grant must open for the upstream's host to be reachable:
/// its own address when the URL names a loopback, private or link-local IP, both loopback
/// addresses for `localhost`, none for a name (the gate refuses it if it resolves to one).
pub fn private_ranges(url: &str) -> Vec<IpNet> {
    let Ok(parsed) = url::Url::parse(url) else {
        return Vec::new();
    };
    match parsed.host() {
        Some(url::Host::Domain("localhost")) => vec![
            IpNet::from(IpAddr::from([127, 0, 0, 1])),
            IpNet::from(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)),
        ],
        Some(url::Host::Ipv4(ip)) if ip.is_loopback() || ip.is_private() || ip.is_link_local() => {
            vec![IpNet::from(IpAddr::V4(ip))]
        }
        Some(url::Host::Ipv6(ip)) if ip.is_loopback() => vec![IpNet::from(IpAddr::V6(ip))],
        _ => Vec::new(),
    }
}

//! `gatehouse import mcp`: the manifest of `gatehouse.mcp-upstream` for the tools of one MCP
//! server, and `--check`, which compares an import with what the server offers now.
//!
//! The server is asked with rmcp's client over Streamable HTTP: protocol 2026-07-28 first
//! (`server/discover`), then 2025-11-25 (`initialize`) if that fails. The version
//! it answers is recorded in each capability's mapping, and the adapter speaks it per call.
//!
//! Defaults from the tool's annotations (hints the operator reviews in the printed table):
//!
//! | annotation              | class     | approval mode | also                                  |
//! |-------------------------|-----------|---------------|---------------------------------------|
//! | `readOnlyHint: true`    | `observe` | `read_only`   |                                       |
//! | `destructiveHint: true` | `act`     | `destructive` | approval gate `IMPORTED_DESTRUCTIVE`, idempotency key required |
//! | neither                 | `act`     | `network`     | idempotency key required              |
//!
//! The key follows from the class (every `act` call needs one), so the manifest writes no
//! `idempotency` table: a review that lowers a tool to `observe`/`read_only` lowers it too.
//!
//! Every MCP request is a POST, which the egress gate allows `read_only` calls only where the
//! grant names it in `read_methods`: the config snippet does, for the upstream's endpoint, so
//! a read-only tool runs at `read_only` (no idempotency key, no approval). The read-only
//! promise is the upstream's, as its hint says; the operator reviews it in the table.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use gatehouse_core::model::{ApprovalMode, CapabilityClass};
use gatehouse_host::config::MethodName;
use gatehouse_host::plugin::manifest::{AdapterManifest, Annotations, Capability};
use rmcp::model::{ClientConfig, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::headers::{HeaderCredential, values_now};
use super::names::{Filter, Ids};
use super::{
    Choice, Destination, Import, ImportError, Options, Parts, Reach, Skipped, assemble, digest,
};
use gatehouse_host::stdio::{StdioConfig, StdioSpec};

/// The approval gate destructive tools are imported behind.
pub const DESTRUCTIVE_GATE: &str = "IMPORTED_DESTRUCTIVE";
/// Request headers the adapter sends that the grant must let through: the protocol version,
/// the session (2025-11-25) and the SEP-2243 routing headers (2026-07-28).
pub const MCP_HEADERS: [&str; 4] = [
    "mcp-method",
    "mcp-name",
    "mcp-protocol-version",
    "mcp-session-id",
];
/// How long connecting to the server may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the whole conversation (discover or initialize, then every `tools/list` page) may
/// take: generous for a large server, short enough that a silent one is reported.
const LIST_TIMEOUT: Duration = Duration::from_secs(30);

/// What the server offers: the protocol version it answered in, and its tools as JSON.
#[derive(Debug, Clone)]
pub struct Listing {
    /// `2026-07-28` or `2025-11-25`.
    pub protocol: String,
    /// Each tool's definition, as the server sent it.
    pub tools: Vec<Value>,
}

/// Imports the tools of the MCP server at `url` (credentials from `headers`).
pub async fn import(
    url: &str,
    headers: &[HeaderCredential],
    options: &Options,
) -> Result<Import, ImportError> {
    let listing = list(url, &values_now(headers)?).await?;
    build(url, headers, options, &listing)
}

/// Asks the server at `url` for its tools, sending `headers` (name, value) with each request.
pub async fn list(url: &str, headers: &[(String, String)]) -> Result<Listing, ImportError> {
    let parsed = url::Url::parse(url).map_err(|_| ImportError::Url {
        url: url.to_owned(),
    })?;
    let host = parsed
        .host_str()
        .filter(|_| parsed.scheme() == "http")
        .ok_or_else(|| match parsed.scheme() {
            "https" => ImportError::Unreachable {
                url: url.to_owned(),
                reason: "this build's import client speaks plain HTTP only (the gateway itself \
                         reaches https upstreams); import through a local http address of the \
                         server, then set the manifest's URLs to the https one before signing"
                    .to_owned(),
            },
            _ => ImportError::Url {
                url: url.to_owned(),
            },
        })?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let unreachable = |reason: String| ImportError::Unreachable {
        url: url.to_owned(),
        reason,
    };
    match tokio::time::timeout(
        CONNECT_TIMEOUT,
        tokio::net::TcpStream::connect((host, port)),
    )
    .await
    {
        Ok(Ok(_probe)) => {}
        Ok(Err(e)) => return Err(unreachable(e.to_string())),
        Err(_) => {
            return Err(unreachable(format!(
                "no connection within {CONNECT_TIMEOUT:?}"
            )));
        }
    }
    let mut custom = std::collections::HashMap::new();
    for (name, value) in headers {
        let invalid = |problem: &str| ImportError::Header {
            header: name.clone(),
            problem: problem.to_owned(),
        };
        custom.insert(
            http::HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| invalid("not a header name"))?,
            http::HeaderValue::from_str(value)
                .map_err(|_| invalid("its value is not a valid header value"))?,
        );
    }
    let not_mcp = |reason: String| ImportError::NotMcp {
        url: url.to_owned(),
        reason,
    };
    let conversation = async {
        // 2026-07-28 first; a server that does not speak it is asked with `initialize`.
        let discover = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        let client = match connect(url, &custom, discover).await {
            Ok(client) => client,
            Err(modern) => connect(url, &custom, ClientLifecycleMode::Initialize)
                .await
                .map_err(|legacy| {
                    not_mcp(format!("{legacy} (and to server/discover: {modern})"))
                })?,
        };
        let protocol = client
            .peer_info()
            .map(|info| info.protocol_version.to_string())
            .unwrap_or_default();
        let tools = client
            .list_all_tools()
            .await
            .map_err(|e| not_mcp(format!("tools/list failed: {e}")))?;
        let _closed = client.cancel().await;
        Ok::<_, ImportError>((protocol, tools))
    };
    let (protocol, tools) = tokio::time::timeout(LIST_TIMEOUT, conversation)
        .await
        .map_err(|_| not_mcp(format!("no complete answer within {LIST_TIMEOUT:?}")))??;
    if protocol != ProtocolVersion::V_2026_07_28.as_str()
        && protocol != ProtocolVersion::V_2025_11_25.as_str()
    {
        return Err(not_mcp(format!(
            "it speaks protocol version `{protocol}`; the adapter speaks 2026-07-28 and 2025-11-25"
        )));
    }
    let tools = tools
        .iter()
        .map(|tool| serde_json::to_value(tool).expect("rmcp tools serialize"))
        .collect();
    Ok(Listing { protocol, tools })
}

/// An rmcp client of the server at `url`, started in `lifecycle` (whose `initialize` asks for
/// 2025-11-25), sending `headers` with each request.
async fn connect(
    url: &str,
    headers: &std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    lifecycle: ClientLifecycleMode,
) -> Result<RunningService<RoleClient, ClientConfig>, String> {
    // rmcp's reqwest client takes the process's rustls provider.
    gatehouse_host::install_default_provider();
    let transport = StreamableHttpClientTransport::from_config(
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers.clone()),
    );
    let mut info = ClientConfig::default();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.client_info =
        rmcp::model::Implementation::new("gatehouse-import", env!("CARGO_PKG_VERSION"));
    info.serve_with_lifecycle(transport, lifecycle)
        .await
        .map_err(|e| e.to_string())
}

/// The import of `listing`, the tools of the server at `url`.
pub fn build(
    url: &str,
    headers: &[HeaderCredential],
    options: &Options,
    listing: &Listing,
) -> Result<Import, ImportError> {
    let post: BTreeSet<MethodName> = [MethodName::parse("POST").expect("POST is a method")].into();
    let destination = Destination {
        url,
        methods: post.clone(),
        credentials: headers,
        headers: MCP_HEADERS.iter().map(|&h| h.to_owned()).collect(),
        // Every MCP request is a POST, a read-only tool's too.
        read_methods: post,
    };
    assemble(
        options,
        format!("Tools of the MCP server at {url}, imported by `gatehouse import mcp`."),
        Reach::Http(destination),
        capabilities(url, options, listing)?,
        || empty(listing),
    )
}

/// The import of `listing`, the tools of the stdio server `spec` pins, granted by `grant` (a
/// `[stdio]` table with its one `[[stdio.server]]` entry):
/// each tool forwards to `stdio://<id>`.
pub fn build_with(
    options: &Options,
    listing: &Listing,
    spec: StdioSpec,
    grant: StdioConfig,
    net: Vec<Destination<'_>>,
) -> Result<Import, ImportError> {
    let url = format!("{}://{}", gatehouse_host::stdio::SCHEME, options.id);
    let mut command = vec![spec.command.clone()];
    command.extend(spec.args.iter().cloned());
    let description = match &spec.package {
        Some(pin) => format!(
            "Tools of the stdio MCP server {} {}@{}, imported by `gatehouse import mcp --stdio`.",
            pin.registry.as_str(),
            pin.name,
            pin.version
        ),
        None => format!(
            "Tools of the stdio MCP server `{}`, imported by `gatehouse import mcp --stdio`.",
            command.join(" ")
        ),
    };
    assemble(
        options,
        description,
        Reach::Stdio(spec, grant, net),
        capabilities(&url, options, listing)?,
        || empty(listing),
    )
}

fn empty(listing: &Listing) -> String {
    format!(
        "the server lists {} tools and the filters leave none",
        listing.tools.len()
    )
}

/// The capabilities of `listing`'s tools, forwarding to `url`, with their choices and the
/// tools the filters leave out.
fn capabilities(url: &str, options: &Options, listing: &Listing) -> Result<Parts, ImportError> {
    let filter = Filter::new(&options.include, &options.exclude)?;
    let mut ids = Ids::default();
    let mut capabilities = Vec::new();
    let mut choices = Vec::new();
    let mut skipped = Vec::new();
    for tool in &listing.tools {
        let name = tool["name"].as_str().unwrap_or_default();
        if let Some(reason) = filter.refuses(name) {
            skipped.push(Skipped {
                source: name.to_owned(),
                reason: reason.to_owned(),
            });
            continue;
        }
        let id = ids.assign(name)?;
        let (capability, choice) = capability(url, &listing.protocol, id, tool);
        capabilities.push(capability);
        choices.push(choice);
    }
    Ok((capabilities, choices, skipped))
}

/// The definition a digest is pinned over: name, description, schemas and annotations.
pub fn definition(tool: &Value) -> Value {
    let field = |key: &str| tool.get(key).cloned().unwrap_or(Value::Null);
    json!({
        "name": field("name"),
        "description": field("description"),
        "inputSchema": field("inputSchema"),
        "outputSchema": field("outputSchema"),
        "annotations": field("annotations"),
    })
}

fn capability(url: &str, protocol: &str, id: String, tool: &Value) -> (Capability, Choice) {
    let name = tool["name"].as_str().unwrap_or_default();
    let hints = &tool["annotations"];
    let hint = |key: &str| hints[key].as_bool();
    let (class, mode, reason) = if hint("readOnlyHint") == Some(true) {
        (
            CapabilityClass::Observe,
            ApprovalMode::ReadOnly,
            "readOnlyHint",
        )
    } else if hint("destructiveHint") == Some(true) {
        (
            CapabilityClass::Act,
            ApprovalMode::Destructive,
            "destructiveHint",
        )
    } else {
        (
            CapabilityClass::Act,
            ApprovalMode::Network,
            "no readOnlyHint or destructiveHint",
        )
    };
    let annotations = Annotations {
        read_only_hint: hint("readOnlyHint"),
        destructive_hint: hint("destructiveHint"),
        idempotent_hint: hint("idempotentHint"),
        open_world_hint: hint("openWorldHint"),
    };
    let capability = Capability {
        id: id.clone(),
        title: tool["title"]
            .as_str()
            .or_else(|| hints["title"].as_str())
            .map(str::to_owned),
        description: tool["description"].as_str().unwrap_or_default().to_owned(),
        capability_class: class,
        approval_mode: mode,
        input_schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "object" })),
        output_schema: tool.get("outputSchema").filter(|s| !s.is_null()).cloned(),
        evidence_keys: Vec::new(),
        // Derived from the class (an `act` call needs a key), so a review that lowers the
        // class lowers it too.
        idempotency: None,
        approval_gate: (mode == ApprovalMode::Destructive).then(|| DESTRUCTIVE_GATE.to_owned()),
        rollback: None,
        annotations: (annotations != Annotations::default()).then_some(annotations),
        sensitive: false,
        client_capabilities: Vec::new(),
        upstream: Some(json!({
            "url": url,
            "tool": name,
            "protocol": protocol,
            "digest": digest::of(&definition(tool)),
        })),
    };
    let choice = Choice {
        source: name.to_owned(),
        capability: id,
        class,
        mode,
        reason: reason.to_owned(),
        shortened: super::names::shortened(name),
    };
    (capability, choice)
}

/// What changed upstream since an import.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// Imported tools whose definition changed (name, description, schemas, annotations).
    pub changed: Vec<String>,
    /// Tools the server lists that the import does not have (and the filters let through).
    pub added: Vec<String>,
    /// Imported tools the server no longer lists.
    pub removed: Vec<String>,
}

impl Drift {
    /// Whether anything changed.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

/// Compares the tools pinned in `manifest` with `listing`, what the server offers now;
/// `options` carries the filters the import was made with.
pub fn drift(
    manifest: &AdapterManifest,
    options: &Options,
    listing: &Listing,
) -> Result<Drift, ImportError> {
    let filter = Filter::new(&options.include, &options.exclude)?;
    let pinned: BTreeMap<&str, &str> = manifest
        .capabilities
        .iter()
        .filter_map(|c| {
            let upstream = c.upstream.as_ref()?;
            Some((upstream["tool"].as_str()?, upstream["digest"].as_str()?))
        })
        .collect();
    let mut drift = Drift::default();
    let mut seen = BTreeSet::new();
    for tool in &listing.tools {
        let name = tool["name"].as_str().unwrap_or_default();
        seen.insert(name);
        match pinned.get(name) {
            Some(&pinned) if pinned != digest::of(&definition(tool)) => {
                drift.changed.push(name.to_owned());
            }
            Some(_) => {}
            None if filter.refuses(name).is_none() => drift.added.push(name.to_owned()),
            None => {}
        }
    }
    drift.removed = pinned
        .keys()
        .filter(|name| !seen.contains(*name))
        .map(|name| (*name).to_owned())
        .collect();
    Ok(drift)
}

/// The upstream URL an imported manifest forwards to (every capability's is the same).
pub fn upstream_url(manifest: &AdapterManifest) -> Option<&str> {
    manifest
        .capabilities
        .iter()
        .find_map(|c| c.upstream.as_ref()?["url"].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two tools whose names agree on their first 64 characters are two capabilities, each
    /// cut to a stable id that says it was shortened; the mapping keeps the upstream's name.
    #[test]
    fn long_tool_names_stay_two_capabilities() {
        let stem = "search_repositories_by_language_and_stars_and_topic_and_license_and";
        let names = [format!("{stem}_owner"), format!("{stem}_date")];
        let listing = Listing {
            protocol: "2025-11-25".to_owned(),
            tools: names
                .iter()
                .map(|name| json!({ "name": name, "inputSchema": { "type": "object" } }))
                .collect(),
        };
        let import = build(
            "http://127.0.0.1:9/mcp",
            &[],
            &Options::new("test.tools"),
            &listing,
        )
        .unwrap();
        let ids: Vec<&str> = import
            .choices
            .iter()
            .map(|c| c.capability.as_str())
            .collect();
        assert_eq!(
            ids,
            [
                super::super::names::capability_id(&names[0]).unwrap(),
                super::super::names::capability_id(&names[1]).unwrap()
            ]
        );
        assert_ne!(ids[0], ids[1]);
        assert!(
            ids.iter()
                .all(|id| id.len() == 64 && id.starts_with(&stem[..55]))
        );
        assert!(import.choices.iter().all(|c| c.shortened));
        assert_eq!(
            import.manifest.capabilities[1].upstream.as_ref().unwrap()["tool"],
            names[1].as_str()
        );
    }
}

//! `gatehouse import mcp`: the manifest of `gatehouse.mcp-upstream` for the tools of one MCP
//! server, and `--check`, which compares an import with what the server offers now.
//!
//! The server is asked with rmcp's client over Streamable HTTP (http, or https trusting the
//! system's roots and the operator's `--ca-file`s): protocol 2026-07-28 first
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
use gatehouse_host::TlsClient;
use gatehouse_host::config::MethodName;
use gatehouse_host::plugin::manifest::{
    AdapterManifest, Annotations, AskKind, CallerRequest, Capability, Prompt, PromptArgument,
    Resource, ResourceTemplate, TaskSupport,
};
use rmcp::model::{ClientConfig, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt as _, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use serde_json::{Value, json};

use super::headers::{HeaderCredential, values_now};
use super::names::{Filter, Ids};
use super::{
    Choice, Destination, Import, ImportError, Options, Parts, Reach, Served, Skipped, assemble,
    digest,
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

/// What the server offers: the protocol version it answered in, and its tools, resources,
/// resource templates and prompts as JSON.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// `2026-07-28` or `2025-11-25`.
    pub protocol: String,
    /// Each tool's definition, as the server sent it.
    pub tools: Vec<Value>,
    /// Each resource's, if the server offers resources.
    pub resources: Vec<Value>,
    /// Each resource template's, if the server offers resources.
    pub templates: Vec<Value>,
    /// Each prompt's, if the server offers prompts.
    pub prompts: Vec<Value>,
}

/// Imports the tools of the MCP server at `url` (credentials from `headers`; https as `tls`
/// trusts, [`super::tls`]).
pub async fn import(
    url: &str,
    headers: &[HeaderCredential],
    tls: &TlsClient,
    options: &Options,
) -> Result<Import, ImportError> {
    let listing = list(url, &values_now(headers)?, tls).await?;
    build(url, headers, options, &listing)
}

/// Asks the server at `url` for its tools, sending `headers` (name, value) with each request;
/// over https, trusting what `tls` trusts. A certificate it does not trust is refused in a
/// handshake before any request is sent, the error naming why.
pub async fn list(
    url: &str,
    headers: &[(String, String)],
    tls: &TlsClient,
) -> Result<Listing, ImportError> {
    let parsed = url::Url::parse(url).map_err(|_| ImportError::Url {
        url: url.to_owned(),
    })?;
    let host = parsed
        .host_str()
        .filter(|_| matches!(parsed.scheme(), "http" | "https"))
        .map(|host| host.trim_matches(['[', ']']))
        .ok_or_else(|| ImportError::Url {
            url: url.to_owned(),
        })?;
    let port = parsed.port_or_known_default().unwrap_or(80);
    let unreachable = |reason: String| ImportError::Unreachable {
        url: url.to_owned(),
        reason,
    };
    let probe = async {
        let tcp = tokio::net::TcpStream::connect((host, port))
            .await
            .map_err(|e| e.to_string())?;
        if parsed.scheme() == "https" {
            let name = tokio_rustls::rustls::pki_types::ServerName::try_from(host.to_owned())
                .map_err(|e| format!("bad server name: {e}"))?;
            tls.connector().connect(name, tcp).await.map_err(|e| {
                format!("TLS: {e} (a certificate a private CA issued: give the CA with --ca-file)")
            })?;
        }
        Ok::<_, String>(())
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, probe).await {
        Ok(Ok(())) => {}
        Ok(Err(e)) => return Err(unreachable(e)),
        Err(_) => {
            return Err(unreachable(format!(
                "no connection within {CONNECT_TIMEOUT:?}"
            )));
        }
    }
    let http = http_client(tls)?;
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
        let client = match connect(url, &http, &custom, discover).await {
            Ok(client) => client,
            Err(modern) => connect(url, &http, &custom, ClientLifecycleMode::Initialize)
                .await
                .map_err(|legacy| {
                    not_mcp(format!("{legacy} (and to server/discover: {modern})"))
                })?,
        };
        let protocol = client
            .peer_info()
            .map(|info| info.protocol_version.to_string())
            .unwrap_or_default();
        let offers = client
            .peer_info()
            .map(|info| info.capabilities.clone())
            .unwrap_or_default();
        let mut listing = Listing {
            protocol,
            tools: (client.list_all_tools().await)
                .map_err(|e| not_mcp(format!("tools/list failed: {e}")))?
                .iter()
                .map(json)
                .collect(),
            ..Listing::default()
        };
        if offers.resources.is_some() {
            listing.resources = (client.list_all_resources().await)
                .map_err(|e| not_mcp(format!("resources/list failed: {e}")))?
                .iter()
                .map(json)
                .collect();
            listing.templates = (client.list_all_resource_templates().await)
                .map_err(|e| not_mcp(format!("resources/templates/list failed: {e}")))?
                .iter()
                .map(json)
                .collect();
        }
        if offers.prompts.is_some() {
            listing.prompts = (client.list_all_prompts().await)
                .map_err(|e| not_mcp(format!("prompts/list failed: {e}")))?
                .iter()
                .map(json)
                .collect();
        }
        let _closed = client.cancel().await;
        Ok::<_, ImportError>(listing)
    };
    let listing = tokio::time::timeout(LIST_TIMEOUT, conversation)
        .await
        .map_err(|_| not_mcp(format!("no complete answer within {LIST_TIMEOUT:?}")))??;
    let protocol = &listing.protocol;
    if protocol != ProtocolVersion::V_2026_07_28.as_str()
        && protocol != ProtocolVersion::V_2025_11_25.as_str()
    {
        return Err(not_mcp(format!(
            "it speaks protocol version `{protocol}`; the adapter speaks 2026-07-28 and 2025-11-25"
        )));
    }
    Ok(listing)
}

/// An rmcp model value (a tool, resource, template or prompt) as the JSON the server sent.
fn json(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).expect("rmcp's model types serialize")
}

/// The HTTP client the server is asked with: over https, `tls`'s configuration, so the import
/// trusts what the gateway will.
fn http_client(tls: &TlsClient) -> Result<reqwest::Client, ImportError> {
    let rustls = tls.connector().config().as_ref().clone();
    reqwest::Client::builder()
        .tls_backend_preconfigured(rustls)
        .connect_timeout(CONNECT_TIMEOUT)
        .build()
        .map_err(|e| ImportError::Read {
            path: "--ca-file".into(),
            reason: format!("cannot build the import's HTTP client: {e}"),
        })
}

/// An rmcp client of the server at `url`, asked over `http`, started in `lifecycle` (whose
/// `initialize` asks for 2025-11-25), sending `headers` with each request.
async fn connect(
    url: &str,
    http: &reqwest::Client,
    headers: &std::collections::HashMap<http::HeaderName, http::HeaderValue>,
    lifecycle: ClientLifecycleMode,
) -> Result<RunningService<RoleClient, ClientConfig>, String> {
    let transport = StreamableHttpClientTransport::with_client(
        http.clone(),
        StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers.clone()),
    );
    let mut info = ClientConfig::default();
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    info.capabilities =
        serde_json::from_value(client_capabilities()).expect("client capabilities deserialize");
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
    let (parts, served) = capabilities(url, options, listing)?;
    assemble(
        options,
        format!("Tools of the MCP server at {url}, imported by `gatehouse import mcp`."),
        Reach::Http(destination),
        parts,
        served,
        || empty(listing),
    )
    .map(tells_and_asks)
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
    let (parts, served) = capabilities(&url, options, listing)?;
    assemble(
        options,
        description,
        Reach::Stdio(spec, grant, net),
        parts,
        served,
        || empty(listing),
    )
    .map(tells_and_asks)
}

/// An imported server's adapter passes on what the server tells and asks its client
/// (progress, log lines, elicitation, sampling, roots): its manifest declares all of it, and
/// the operator's `[[caller.grant]]` decides which asks reach the caller (none by default).
fn tells_and_asks(mut import: Import) -> Import {
    import.manifest.caller = CallerRequest {
        progress: true,
        log: true,
        ask: ASKS.to_vec(),
    };
    import
}

/// Everything a server may ask its client that the gateway can pass on to a caller: what an
/// imported server's adapter declares, and what the import (and the drift check, and a stdio
/// server's session) tells the server its client can be asked, so that it lists the tools
/// that ask (a server may offer those only to a client that can be asked).
pub const ASKS: [AskKind; 3] = [AskKind::Elicitation, AskKind::Sampling, AskKind::Roots];

/// [`ASKS`] as MCP's client capabilities.
pub fn client_capabilities() -> Value {
    gatehouse_host::relay::client_capabilities(&ASKS)
}

fn empty(listing: &Listing) -> String {
    format!(
        "the server lists {} tools and the filters leave none, and no resources or prompts",
        listing.tools.len()
    )
}

/// The capabilities of `listing`'s tools, forwarding to `url`, with their choices and the
/// tools the filters leave out; and its resources, templates and prompts ([`served`]).
fn capabilities(
    url: &str,
    options: &Options,
    listing: &Listing,
) -> Result<(Parts, Served), ImportError> {
    let filter = Filter::new(&options.include, &options.exclude)?;
    let mut ids = Ids::default();
    let mut capabilities = Vec::new();
    let mut choices = Vec::new();
    let mut skipped = Vec::new();
    for tool in &listing.tools {
        let name = tool["name"].as_str().unwrap_or_default();
        if !kept(&filter, name, &mut skipped) {
            continue;
        }
        let id = ids.assign(name)?;
        let (capability, choice) = capability(url, &listing.protocol, id, tool);
        capabilities.push(capability);
        choices.push(choice);
    }
    let served = served(
        url,
        &listing.protocol,
        &mut ids,
        listing,
        &filter,
        &mut skipped,
    )?;
    Ok(((capabilities, choices, skipped), served))
}

/// The resources, resource templates and prompts of `listing`, each pinned with an
/// `upstream` table (the URL, the protocol, its URI, URI template or prompt name, and the
/// digest of its definition, which `--check` compares) and ids shared with the tools'. A
/// resource's classification is `unreviewed` until the operator reviews it. The filters
/// apply to their names as to tools'. A template the gateway cannot match (the manifest's
/// rule, [`parameter_names`](gatehouse_host::plugin::content::parameter_names)) is left out,
/// with the reason.
fn served(
    url: &str,
    protocol: &str,
    ids: &mut Ids,
    listing: &Listing,
    filter: &Filter,
    skipped: &mut Vec<Skipped>,
) -> Result<Served, ImportError> {
    let text = |value: &Value, key: &str| value[key].as_str().map(str::to_owned);
    let pin = |value: &Value, key: &str, name: &str| json!({ "url": url, "protocol": protocol, key: name, "digest": digest::of(&served_definition(value)) });
    let mut served = Served::default();
    for resource in &listing.resources {
        let uri = resource["uri"].as_str().unwrap_or_default();
        let name = text(resource, "name").unwrap_or_else(|| uri.to_owned());
        if !kept(filter, &name, skipped) {
            continue;
        }
        served.resources.push(Resource {
            id: ids.assign_kind(&name, "resource")?,
            uri: uri.to_owned(),
            name: Some(name),
            title: text(resource, "title"),
            description: text(resource, "description").unwrap_or_default(),
            mime_type: text(resource, "mimeType"),
            size: resource["size"].as_u64(),
            classification: Some(UNREVIEWED.to_owned()),
            sensitive: false,
            upstream: Some(pin(resource, "uri", uri)),
            produces: Vec::new(),
        });
    }
    for template in &listing.templates {
        let uri_template = template["uriTemplate"].as_str().unwrap_or_default();
        let name = text(template, "name").unwrap_or_else(|| uri_template.to_owned());
        if !kept(filter, &name, skipped) {
            continue;
        }
        if let Err(why) = gatehouse_host::plugin::content::parameter_names(uri_template) {
            skipped.push(Skipped {
                source: uri_template.to_owned(),
                reason: format!("a resource template the gateway cannot match: {why}"),
            });
            continue;
        }
        served.templates.push(ResourceTemplate {
            id: ids.assign_kind(&name, "resource-template")?,
            uri_template: uri_template.to_owned(),
            name: Some(name),
            title: text(template, "title"),
            description: text(template, "description").unwrap_or_default(),
            mime_type: text(template, "mimeType"),
            classification: Some(UNREVIEWED.to_owned()),
            parameters: serde_json::Map::new(),
            sensitive: false,
            upstream: Some(pin(template, "uri", uri_template)),
            produces: Vec::new(),
        });
    }
    for prompt in &listing.prompts {
        let name = prompt["name"].as_str().unwrap_or_default();
        if !kept(filter, name, skipped) {
            continue;
        }
        let arguments = (prompt["arguments"].as_array().into_iter().flatten())
            .filter_map(|argument| {
                Some(PromptArgument {
                    name: argument["name"].as_str()?.to_owned(),
                    title: text(argument, "title"),
                    description: text(argument, "description"),
                    required: argument["required"].as_bool().unwrap_or(false),
                })
            })
            .collect();
        served.prompts.push(Prompt {
            id: ids.assign_kind(name, "prompt")?,
            title: text(prompt, "title"),
            description: text(prompt, "description").unwrap_or_default(),
            arguments,
            upstream: Some(pin(prompt, "prompt", name)),
        });
    }
    Ok(served)
}

/// Whether the filters keep `name`; if not, it is skipped, saying why.
fn kept(filter: &Filter, name: &str, skipped: &mut Vec<Skipped>) -> bool {
    let Some(reason) = filter.refuses(name) else {
        return true;
    };
    skipped.push(Skipped {
        source: name.to_owned(),
        reason: reason.to_owned(),
    });
    false
}

/// The classification an imported resource or template has until the operator reviews it.
pub const UNREVIEWED: &str = "unreviewed";

/// The definition of a resource, template or prompt a digest is pinned over: what it is and
/// says, not what it holds now (a resource's size changes with its contents).
fn served_definition(value: &Value) -> Value {
    let mut definition = value.clone();
    if let Some(fields) = definition.as_object_mut() {
        fields.remove("size");
        fields.remove("_meta");
    }
    definition
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
    let mut upstream = json!({
        "url": url,
        "tool": name,
        "protocol": protocol,
        "digest": digest::of(&definition(tool)),
    });
    // 2025-11-25's task-augmented calls (a 2026-07-28 server directs its own tasks).
    let upstream_task = protocol == "2025-11-25" && tool["execution"]["taskSupport"] == "required";
    if upstream_task {
        upstream["task"] = json!("required");
    }
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
    let (produces, sends, labels) = super::proposed_labels(name, hint("openWorldHint"));
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
        // A tool the upstream runs only as a task runs as one there (`mcp-upstream` waits for
        // its result within the call); here a client may take the call as a task too.
        task_support: upstream_task.then_some(TaskSupport::Optional),
        upstream: Some(upstream),
        produces,
        sends,
    };
    (
        capability,
        Choice::new(name, id, (class, mode), reason, labels),
    )
}

/// What changed upstream since an import: tools by name, the rest as `resource <uri>`,
/// `resource template <uri template>` and `prompt <name>`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// Imported tools, resources, templates and prompts whose definition changed (for a tool:
    /// name, description, schemas, annotations).
    pub changed: Vec<String>,
    /// What the server lists that the import does not have (tools: that the filters let
    /// through).
    pub added: Vec<String>,
    /// What the import has that the server no longer lists.
    pub removed: Vec<String>,
}

impl Drift {
    /// Whether anything changed.
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.added.is_empty() && self.removed.is_empty()
    }
}

/// Compares the tools, resources, resource templates and prompts pinned in `manifest` with
/// `listing`, what the server offers now; `options` carries the filters the import was made
/// with (they apply to names, as at the import). A tool is named as the server names it; the rest as
/// `resource <uri>`, `resource template <uri template>` and `prompt <name>`.
pub fn drift(
    manifest: &AdapterManifest,
    options: &Options,
    listing: &Listing,
) -> Result<Drift, ImportError> {
    let filter = Filter::new(&options.include, &options.exclude)?;
    let pinned_of = |upstream: Option<&Value>, key: &str, kind: &str| {
        let upstream = upstream?;
        let name = upstream[key].as_str()?;
        Some((
            format!("{kind}{name}"),
            upstream["digest"].as_str()?.to_owned(),
        ))
    };
    let pinned: BTreeMap<String, String> = (manifest.capabilities.iter())
        .filter_map(|c| pinned_of(c.upstream.as_ref(), "tool", ""))
        .chain(
            (manifest.resources.iter())
                .filter_map(|r| pinned_of(r.upstream.as_ref(), "uri", "resource ")),
        )
        .chain(
            (manifest.resource_templates.iter())
                .filter_map(|t| pinned_of(t.upstream.as_ref(), "uri", "resource template ")),
        )
        .chain(
            (manifest.prompts.iter())
                .filter_map(|p| pinned_of(p.upstream.as_ref(), "prompt", "prompt ")),
        )
        .collect();
    let tools = (listing.tools.iter()).map(|tool| {
        let name = tool["name"].as_str().unwrap_or_default().to_owned();
        (name.clone(), digest::of(&definition(tool)), name)
    });
    let current = tools
        .chain(offered(&listing.resources, "uri", "resource "))
        .chain(offered(
            &listing.templates,
            "uriTemplate",
            "resource template ",
        ))
        .chain(offered(&listing.prompts, "name", "prompt "));
    let mut drift = Drift::default();
    let mut seen = BTreeSet::new();
    for (name, digest, filtered_as) in current {
        match pinned.get(&name) {
            Some(pinned) if *pinned != digest => drift.changed.push(name.clone()),
            Some(_) => {}
            None if filter.refuses(&filtered_as).is_none() => drift.added.push(name.clone()),
            None => {}
        }
        seen.insert(name);
    }
    drift.removed = pinned
        .keys()
        .filter(|name| !seen.contains(*name))
        .cloned()
        .collect();
    Ok(drift)
}

/// The resources, templates or prompts of a listing (`list`), each named as [`drift`] names
/// it (`kind` and its `key`), with the digest of its definition and the name the import's
/// filters saw (its `name`).
fn offered<'a>(
    list: &'a [Value],
    key: &'a str,
    kind: &'a str,
) -> impl Iterator<Item = (String, String, String)> + 'a {
    list.iter().map(move |value| {
        let name = format!("{kind}{}", value[key].as_str().unwrap_or_default());
        let filtered_as = value["name"].as_str().unwrap_or_default().to_owned();
        (name, digest::of(&served_definition(value)), filtered_as)
    })
}

/// The upstream URL an imported manifest forwards to (every `upstream` table's is the same).
pub fn upstream_url(manifest: &AdapterManifest) -> Option<&str> {
    (manifest.capabilities.iter().map(|c| &c.upstream))
        .chain(manifest.resources.iter().map(|r| &r.upstream))
        .chain(manifest.resource_templates.iter().map(|t| &t.upstream))
        .chain(manifest.prompts.iter().map(|p| &p.upstream))
        .find_map(|upstream| upstream.as_ref()?["url"].as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The import of a server speaking `protocol` that lists `tools`.
    fn imported(protocol: &str, tools: Vec<Value>) -> Import {
        let listing = Listing {
            protocol: protocol.to_owned(),
            tools,
            ..Listing::default()
        };
        let options = Options::new("test.tools");
        build("http://127.0.0.1:9/mcp", &[], &options, &listing).unwrap()
    }

    /// Two tools whose names agree on their first 64 characters are two capabilities, each
    /// cut to a stable id that says it was shortened; the mapping keeps the upstream's name.
    #[test]
    fn long_tool_names_stay_two_capabilities() {
        let stem = "search_repositories_by_language_and_stars_and_topic_and_license_and";
        let names = [format!("{stem}_owner"), format!("{stem}_date")];
        let import = imported(
            "2025-11-25",
            names
                .iter()
                .map(|name| json!({ "name": name, "inputSchema": { "type": "object" } }))
                .collect(),
        );
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

    /// A 2025-11-25 tool the upstream runs only as a task is marked so in its mapping (the
    /// adapter calls it as one), and may run as a task here; a 2026-07-28 upstream directs
    /// its own tasks, and a tool that merely may be a task is called as any.
    #[test]
    fn a_tool_that_runs_only_as_a_task_is_marked() {
        let tool = |name: &str, support: &str| {
            json!({
                "name": name, "inputSchema": { "type": "object" },
                "execution": { "taskSupport": support },
            })
        };
        for (protocol, marked) in [("2025-11-25", true), ("2026-07-28", false)] {
            let import = imported(
                protocol,
                vec![tool("research", "required"), tool("lookup", "optional")],
            );
            let of = |id: &str| {
                (import.manifest.capabilities.iter())
                    .find(|c| c.id == id)
                    .unwrap_or_else(|| panic!("no {id}"))
            };
            let (research, lookup) = (of("research"), of("lookup"));
            let task = |c: &Capability| c.upstream.as_ref().unwrap().get("task").cloned();
            assert_eq!(
                task(research),
                marked.then(|| json!("required")),
                "{protocol}"
            );
            assert_eq!(
                research.task_support,
                marked.then_some(TaskSupport::Optional),
                "{protocol}"
            );
            assert_eq!((task(lookup), lookup.task_support), (None, None));
        }
    }
}

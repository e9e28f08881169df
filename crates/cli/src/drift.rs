//! `[import] drift_check`: at start-up, `serve` compares the tools, resources, resource
//! templates and prompts each served adapter written by `gatehouse import mcp` pins (their
//! definitions' digests) with what its MCP server offers now, and warns or refuses to start.
//!
//! ```toml
//! [import]
//! drift_check = "refuse"   # default "off"; or "warn"
//! ```
//!
//! 1. Only `mcp-upstream` manifests are checked: every `upstream` table is that adapter's
//!    mapping (`url`, `protocol`, `digest` and one of `tool`, `uri`, `prompt`, nothing else).
//!    Any other manifest, an OpenAPI import's included, is left alone.
//! 2. The server is asked through the egress gate, as the adapter's own `read_only` calls go
//!    ([`Host::fetch_for_adapter`]): only where that adapter's grants reach, with the address
//!    checks, and with the credentials of the grant that matches, never another's. The URL
//!    comes from the signed manifest, so a publisher could point it anywhere; the gate is
//!    what decides where the gateway connects.
//! 3. It speaks the protocol version the import recorded: 2026-07-28 asks `tools/list` (and
//!    `resources/list`, `resources/templates/list`, `prompts/list`, for a manifest that pins
//!    any) in one request per page; 2025-11-25 first `initialize`s (and sends
//!    `notifications/initialized`). Each item is read through rmcp's model type (`Tool`,
//!    `Resource`, ...), as the import read it, so the digests compare like with like.
//!
//! A stdio server's import (`stdio://<id>`) is checked the same way: the gate answers from
//! the adapter's own supervised server, started for the check if it is not running.
//!
//! Drift here is a pinned tool whose definition changed or that the server no longer lists;
//! a tool the server added is not served, so it is no reason to refuse.

use bytes::Bytes;
use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::{AdapterManifest, Manifest};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::DriftCheck;
use crate::exit::{Failure, refused};
use crate::import::Options;
use crate::import::mcp::{self, Listing};

/// The protocol version that needs no session.
const STATELESS: &str = "2026-07-28";
/// `tools/list` pages read at most: a server that keeps handing out cursors is not listed
/// forever (4096 capabilities at most per adapter, so far more pages than any import needs).
const MAX_PAGES: usize = 64;

/// One `upstream` table as `gatehouse import mcp` writes it (a capability's names its `tool`;
/// a resource's or template's its `uri`; a prompt's its `prompt`), and nothing else.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct McpMapping {
    url: String,
    protocol: String,
    #[expect(dead_code, reason = "read only to recognize the mapping's shape")]
    digest: String,
    #[expect(dead_code, reason = "read only to recognize the mapping's shape")]
    #[serde(default)]
    tool: Option<String>,
    #[expect(dead_code, reason = "read only to recognize the mapping's shape")]
    #[serde(default)]
    uri: Option<String>,
    #[expect(dead_code, reason = "read only to recognize the mapping's shape")]
    #[serde(default)]
    prompt: Option<String>,
}

/// The upstream URL and protocol of an `mcp-upstream` manifest; `None` for any other.
fn mcp_upstream(adapter: &AdapterManifest) -> Option<(String, String)> {
    let tables = (adapter.capabilities.iter().map(|c| &c.upstream))
        .chain(adapter.resources.iter().map(|r| &r.upstream))
        .chain(adapter.resource_templates.iter().map(|t| &t.upstream))
        .chain(adapter.prompts.iter().map(|p| &p.upstream));
    let mut found = None;
    for table in tables {
        let mapping: McpMapping = serde_json::from_value(table.clone()?).ok()?;
        found.get_or_insert((mapping.url, mapping.protocol));
    }
    found
}

/// Runs the check over the served adapters' `manifests`, asking through `host`'s gate.
pub async fn check(mode: DriftCheck, host: &Host, manifests: &[Manifest]) -> Result<(), Failure> {
    if mode == DriftCheck::Off {
        return Ok(());
    }
    for manifest in manifests {
        let Manifest::Adapter(adapter) = manifest else {
            continue;
        };
        let Some((url, protocol)) = mcp_upstream(adapter) else {
            continue;
        };
        let problem = match drift_of(host, adapter, &url, &protocol).await {
            Ok(None) => continue,
            Ok(Some(drift)) => drift,
            Err(error) => format!("cannot check it: {error}"),
        };
        let message = format!(
            "adapter `{}`: the MCP server at {url} {problem}; run `gatehouse import mcp --check` \
             and import it again",
            adapter.id
        );
        match mode {
            DriftCheck::Refuse => {
                return Err(refused(format!(
                    "{message} (`[import] drift_check = \"refuse\"`)"
                )));
            }
            DriftCheck::Warn | DriftCheck::Off => tracing::warn!("{message}"),
        }
    }
    Ok(())
}

/// What changed for `adapter`, said for people, or `None`.
async fn drift_of(
    host: &Host,
    adapter: &AdapterManifest,
    url: &str,
    protocol: &str,
) -> Result<Option<String>, String> {
    let session = Session {
        host,
        adapter: &adapter.id,
        url,
    };
    let listing = session.list(protocol, adapter).await?;
    let drift = mcp::drift(adapter, &Options::new(adapter.id.clone()), &listing)
        .map_err(|e| e.to_string())?;
    if drift.changed.is_empty() && drift.removed.is_empty() {
        return Ok(None);
    }
    let mut said = Vec::new();
    if !drift.changed.is_empty() {
        said.push(format!("changed {}", drift.changed.join(", ")));
    }
    if !drift.removed.is_empty() {
        said.push(format!("no longer lists {}", drift.removed.join(", ")));
    }
    Ok(Some(said.join(" and ")))
}

/// One listing conversation: the session's headers, and how it names itself.
struct Lister<'a> {
    session: &'a Session<'a>,
    protocol: &'a str,
    headers: Vec<(&'static str, String)>,
    client: Value,
}

impl Lister<'_> {
    /// Every page of `method`'s list under `key`, each item read through `T` (rmcp's model
    /// type, as the import read it) and written back as JSON.
    async fn all<T: serde::de::DeserializeOwned + serde::Serialize>(
        &self,
        method: &str,
        key: &str,
    ) -> Result<Vec<Value>, String> {
        let mut headers = self.headers.clone();
        if self.protocol == STATELESS {
            headers.push(("mcp-method", method.to_owned()));
        }
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        for page in 1..=MAX_PAGES {
            let mut params = json!({});
            if self.protocol == STATELESS {
                params["_meta"] = json!({
                    "io.modelcontextprotocol/protocolVersion": STATELESS,
                    "io.modelcontextprotocol/clientCapabilities": mcp::client_capabilities(),
                    "io.modelcontextprotocol/clientInfo": self.client,
                });
            }
            if let Some(cursor) = &cursor {
                params["cursor"] = Value::String(cursor.clone());
            }
            let id = u64::try_from(page).unwrap_or(u64::MAX);
            let (result, _) = self.session.request(&headers, id, method, params).await?;
            for item in result[key].as_array().into_iter().flatten() {
                let item: T = serde_json::from_value(item.clone())
                    .map_err(|e| format!("its {method} listed an item that is not MCP's: {e}"))?;
                items.push(serde_json::to_value(item).map_err(|e| e.to_string())?);
            }
            match result["nextCursor"].as_str() {
                Some(next) => cursor = Some(next.to_owned()),
                None => return Ok(items),
            }
        }
        Err(format!(
            "it handed out more than {MAX_PAGES} pages of {method}"
        ))
    }
}

/// Requests to one adapter's MCP server, sent through the host's egress gate for it.
struct Session<'a> {
    host: &'a Host,
    adapter: &'a str,
    url: &'a str,
}

impl Session<'_> {
    /// What the server offers now, in `protocol`, of what `adapter` pins: its tools; its
    /// resources and templates, if it pins any; its prompts, if it pins any. Each read through
    /// rmcp's model type, as the import read it, so the digests compare.
    async fn list(&self, protocol: &str, adapter: &AdapterManifest) -> Result<Listing, String> {
        let client =
            json!({ "name": "gatehouse-drift-check", "version": env!("CARGO_PKG_VERSION") });
        let mut headers = vec![("mcp-protocol-version", protocol.to_owned())];
        if protocol != STATELESS {
            let init = json!({ "protocolVersion": protocol, "capabilities": mcp::client_capabilities(), "clientInfo": client });
            let (_, session) = self.request(&[], 0, "initialize", init).await?;
            let mut notify = vec![("mcp-protocol-version", protocol.to_owned())];
            if let Some(session) = session {
                headers.push(("mcp-session-id", session.clone()));
                notify.push(("mcp-session-id", session));
            }
            let body = json!({ "jsonrpc": "2.0", "method": "notifications/initialized" });
            let response = self.post(&notify, &body).await?;
            if !response.status().is_success() {
                return Err(format!(
                    "it answered `notifications/initialized` with HTTP {}",
                    response.status()
                ));
            }
        }
        let lister = Lister {
            session: self,
            protocol,
            headers,
            client,
        };
        let mut listing = Listing {
            protocol: protocol.to_owned(),
            tools: lister
                .all::<rmcp::model::Tool>("tools/list", "tools")
                .await?,
            ..Listing::default()
        };
        if !(adapter.resources.is_empty() && adapter.resource_templates.is_empty()) {
            listing.resources = lister
                .all::<rmcp::model::Resource>("resources/list", "resources")
                .await?;
            listing.templates = lister
                .all::<rmcp::model::ResourceTemplate>(
                    "resources/templates/list",
                    "resourceTemplates",
                )
                .await?;
        }
        if !adapter.prompts.is_empty() {
            listing.prompts = lister
                .all::<rmcp::model::Prompt>("prompts/list", "prompts")
                .await?;
        }
        Ok(listing)
    }

    /// The request `method` with `id` and `params`: its `result`, and the session the server
    /// assigned, if any.
    async fn request(
        &self,
        headers: &[(&str, String)],
        id: u64,
        method: &str,
        params: Value,
    ) -> Result<(Value, Option<String>), String> {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let response = self.post(headers, &body).await?;
        let status = response.status();
        let session = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let event_stream = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.trim_start().starts_with("text/event-stream"));
        let text = String::from_utf8_lossy(response.body());
        let message = if event_stream {
            events(&text)
                .into_iter()
                .find(|m| m.get("id") == Some(&Value::from(id)))
        } else {
            serde_json::from_str::<Value>(&text).ok()
        };
        match message {
            Some(mut m) if status.is_success() && m.get("result").is_some() => {
                Ok((m["result"].take(), session))
            }
            Some(m) if m["error"].is_object() => Err(format!(
                "it answered `{method}` with JSON-RPC error {}: {}",
                m["error"]["code"],
                m["error"]["message"].as_str().unwrap_or("(no message)")
            )),
            _ => Err(format!(
                "it did not answer `{method}` as an MCP server (HTTP {status})"
            )),
        }
    }

    /// POSTs `body` with `headers` through the gate.
    async fn post(
        &self,
        headers: &[(&str, String)],
        body: &Value,
    ) -> Result<http::Response<Bytes>, String> {
        let mut request = http::Request::post(self.url)
            .header(http::header::ACCEPT, "application/json, text/event-stream")
            .header(http::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(*name, value.as_str());
        }
        let request = request
            .body(Bytes::from(body.to_string()))
            .map_err(|e| format!("cannot build the request: {e}"))?;
        match self.host.fetch_for_adapter(self.adapter, request).await {
            Some(Ok(response)) => Ok(response),
            Some(Err(error)) => Err(format!("the egress gate: {error}")),
            None => Err(format!("adapter `{}` is not served", self.adapter)),
        }
    }
}

/// The JSON messages of an SSE stream: the `data` of each event, joined by newlines, that
/// parses as JSON (events without data, and comments, are skipped).
fn events(stream: &str) -> Vec<Value> {
    let mut messages = Vec::new();
    let mut data: Vec<&str> = Vec::new();
    for line in stream.lines().chain(std::iter::once("")) {
        if line.is_empty() {
            if let Ok(message) = serde_json::from_str(&data.join("\n")) {
                messages.push(message);
            }
            data.clear();
        } else if let Some(value) = line.strip_prefix("data:") {
            data.push(value.strip_prefix(' ').unwrap_or(value));
        }
    }
    messages
}

#[cfg(test)]
mod tests {
    use gatehouse_host::plugin::manifest::Manifest;

    use super::*;

    fn adapter(upstreams: &[Value]) -> AdapterManifest {
        let capabilities: Vec<Value> = upstreams
            .iter()
            .enumerate()
            .map(|(i, upstream)| {
                json!({ "id": format!("t{i}"), "capability_class": "observe", "approval_mode": "read_only",
                        "input_schema": { "type": "object" }, "upstream": upstream })
            })
            .collect();
        let manifest = json!({ "kind": "adapter", "id": "test.x", "version": "0.1.0", "publisher": "p",
                               "capability": capabilities });
        match Manifest::from_json(manifest.to_string().as_bytes()).unwrap() {
            Manifest::Adapter(adapter) => adapter,
            Manifest::Policy(_) => unreachable!("an adapter manifest"),
        }
    }

    #[test]
    fn checks_mcp_upstream_manifests_only() {
        let mcp = json!({ "url": "http://h/mcp", "tool": "a", "protocol": "2025-11-25", "digest": "sha256:0" });
        let openapi =
            json!({ "method": "GET", "url": "http://h/v1/pets", "parameters": [], "body": false });
        assert_eq!(
            mcp_upstream(&adapter(&[mcp.clone(), mcp.clone()])),
            Some(("http://h/mcp".to_owned(), "2025-11-25".to_owned()))
        );
        assert_eq!(mcp_upstream(&adapter(std::slice::from_ref(&openapi))), None);
        assert_eq!(mcp_upstream(&adapter(&[mcp.clone(), openapi])), None);
        let mut extra = mcp;
        extra["headers"] = json!({ "x": "y" });
        assert_eq!(mcp_upstream(&adapter(&[extra])), None);
    }

    #[test]
    fn reads_the_messages_of_an_sse_stream() {
        let stream = "id: 0\nretry: 3000\ndata:\n\n: comment\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"id\":1,\"result\":{}}\n";
        let messages = events(stream);
        assert_eq!(
            messages,
            [json!({ "jsonrpc": "2.0", "id": 1, "result": {} })]
        );
    }
}

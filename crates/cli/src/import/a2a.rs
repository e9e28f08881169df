//! `gatehouse import a2a`: the manifest of `gatehouse.a2a-upstream` for the skills of one A2A
//! agent (protocol 1.0, JSON-RPC binding), read from its agent card; and `--check`, which
//! compares an import with the card now.
//!
//! 1. **The card** ([`read`]): `GET <URL>/.well-known/agent-card.json` (or the URL itself, if
//!    it names a `.json` file), over http or https (the system's roots, and `--ca-file`). Its first interface with `protocolBinding` `JSONRPC` and
//!    protocol 1.x is where the adapter sends messages. With `--header`, and a card that says
//!    `capabilities.extendedAgentCard`, the extended card (`GetExtendedAgentCard`, sent with
//!    the credentials) gives the skills.
//! 2. **Its signature** (A2A 1.0 §8.4): a signed card must verify, or nothing is imported. The
//!    key is `--card-key` (base64 Ed25519, as `gatehouse keygen` writes it) or, without it,
//!    the JWKS the signature's `jku` names, found by its `kid`: trusted on first use, and
//!    pinned, so `--check` notices a card signed by another key later.
//! 3. **The skills**: each becomes a capability. A2A says nothing of a skill's effects, so
//!    the class and mode follow its tags, hints the operator reviews in the printed table as
//!    for an MCP import's annotations:
//!
//! | tag (any case, `-`/`_` ignored) | class     | approval mode | also                       |
//! |---------------------------------|-----------|---------------|----------------------------|
//! | `readonly`                      | `observe` | `read_only`   |                            |
//! | `destructive`                   | `act`     | `destructive` | approval gate `IMPORTED_DESTRUCTIVE`, idempotency key |
//! | neither                         | `act`     | `network`     | idempotency key            |
//!
//! Every capability takes the same arguments ([`input_schema`]): `text`, `data`, and the
//! `task_id` and `context_id` of a task that asked for input. Each pins its skill's digest,
//! and the card's (without signatures) and signer, for `--check`.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use bytes::Bytes;
use gatehouse_core::agent_card;
use gatehouse_core::keys::PublicKey;
use gatehouse_core::model::{ApprovalMode, CapabilityClass};
use gatehouse_host::TlsClient;
use gatehouse_host::config::MethodName;
use gatehouse_host::plugin::manifest::{
    AdapterManifest, AskKind, CallerRequest, Capability, TaskSupport,
};
use http_body_util::{BodyExt as _, Full};
use serde_json::{Value, json};

use super::headers::HeaderCredential;
use super::mcp::{DESTRUCTIVE_GATE, Drift};
use super::names::{Filter, Ids};
use super::{Choice, Destination, Import, ImportError, Options, Reach, Served, Skipped, assemble};
use super::{digest, proposed_labels};

/// Where an agent serves its card (A2A 1.0 §8.2).
pub const CARD_PATH: &str = "/.well-known/agent-card.json";
/// Request headers the adapter sends that the grant must let through.
pub const A2A_HEADERS: [&str; 1] = ["a2a-version"];
/// How long each request of the import may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a card, or of a JWKS, read at most.
const MAX_BODY: usize = 4 << 20;

/// An agent's card, as the import read it.
#[derive(Debug, Clone)]
pub struct Card {
    /// Where it was read.
    pub url: String,
    /// The card: the extended one, when it was asked for and given.
    pub card: Value,
    /// The JSON-RPC endpoint of A2A 1.x it offers.
    pub endpoint: String,
    /// The key its signature verified with, if it is signed.
    pub signer: Option<PublicKey>,
    /// Where that key was fetched (its signature's `jku`), if no key was given: trusted on
    /// first use.
    pub key_from: Option<String>,
}

/// Where an import reads a card, and how.
#[derive(Debug, Clone, Copy)]
pub struct Source<'a> {
    /// The agent's URL, or its card's.
    pub url: &'a str,
    /// The key the card must be signed with (base64 Ed25519), if one is expected.
    pub card_key: Option<&'a str>,
    /// How https is reached: the system's roots and the operator's CAs ([`tls`]).
    pub tls: &'a TlsClient,
}

/// Imports the skills of the A2A agent at `source` (credentials from `headers`).
pub async fn import(
    source: Source<'_>,
    headers: &[HeaderCredential],
    options: &Options,
) -> Result<Import, ImportError> {
    let card = read(source, &super::headers::values_now(headers)?).await?;
    build(&card, headers, options)
}

/// The URL of the card of the agent at `url`: `url` itself if it names a `.json` file.
pub fn card_url(url: &str) -> Result<url::Url, ImportError> {
    let bad = || ImportError::Url {
        url: url.to_owned(),
    };
    let parsed = url::Url::parse(url).map_err(|_| bad())?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(bad());
    }
    if parsed.path().ends_with(".json") {
        return Ok(parsed);
    }
    let base = url.trim_end_matches('/');
    url::Url::parse(&format!("{base}{CARD_PATH}")).map_err(|_| bad())
}

/// Reads and checks the card at `source`: its JSON-RPC interface, its signature (with
/// `source.card_key`, else the key its `jku` serves), and with `headers` the extended card.
pub async fn read(source: Source<'_>, headers: &[(String, String)]) -> Result<Card, ImportError> {
    let Source { url, card_key, tls } = source;
    let card_url = card_url(url)?;
    let shown = card_url.to_string();
    let not_a2a = |reason: String| ImportError::NotA2a {
        url: shown.clone(),
        reason,
    };
    let (status, body) = fetch(&card_url, tls, http::Method::GET, &[], None).await?;
    let card: Value = match serde_json::from_slice(&body) {
        Ok(card @ Value::Object(_)) if status == 200 => card,
        _ => {
            return Err(not_a2a(format!(
                "HTTP {status}, not a JSON agent card: {}",
                quote(&body)
            )));
        }
    };
    let endpoint = endpoint(&card).map_err(&not_a2a)?;
    let (signer, key_from) = signer(&card_url, &card, card_key, tls).await?.unzip();
    let key_from = key_from.flatten();
    let extended = card["capabilities"]["extendedAgentCard"] == true;
    let card = if extended && !headers.is_empty() {
        let extended = extended_card(&endpoint, headers, tls).await?;
        if let Some(signer) = &signer
            && let Some(signature) = extended["signatures"].get(0)
        {
            agent_card::verify(&extended, signature, signer).map_err(|reason| {
                ImportError::Signature {
                    url: endpoint.clone(),
                    reason: format!("the extended card: {reason}"),
                }
            })?;
        }
        extended
    } else {
        card
    };
    Ok(Card {
        url: shown,
        card,
        endpoint,
        signer,
        key_from,
    })
}

/// The card's JSON-RPC endpoint of A2A 1.x: its first such interface's URL.
fn endpoint(card: &Value) -> Result<String, String> {
    let interfaces = card["supportedInterfaces"]
        .as_array()
        .ok_or("the card lists no `supportedInterfaces` (is it an A2A 1.0 card?)")?;
    let jsonrpc = interfaces.iter().find(|i| {
        i["protocolBinding"] == "JSONRPC"
            && i["protocolVersion"]
                .as_str()
                .is_none_or(|v| v.starts_with("1."))
    });
    let Some(url) = jsonrpc.and_then(|i| i["url"].as_str()) else {
        let offered: Vec<String> = interfaces
            .iter()
            .map(|i| format!("{} {}", i["protocolBinding"], i["protocolVersion"]))
            .collect();
        return Err(format!(
            "it offers no JSON-RPC interface of A2A 1.x (it offers: {}); the adapter speaks \
             JSON-RPC",
            offered.join(", ")
        ));
    };
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(url.to_owned()),
        _ => Err(format!(
            "its JSON-RPC interface's URL `{url}` is not http(s)"
        )),
    }
}

/// The key the card's signature verifies with: none for an unsigned card (refused if a key was
/// given, which says a signature is expected); `key` (base64) if given, else the key its
/// `jku` serves under its `kid`, with that `jku`.
async fn signer(
    card_url: &url::Url,
    card: &Value,
    key: Option<&str>,
    tls: &TlsClient,
) -> Result<Option<(PublicKey, Option<String>)>, ImportError> {
    let refused = |reason: String| ImportError::Signature {
        url: card_url.to_string(),
        reason,
    };
    let signatures = card["signatures"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let Some(signature) = signatures.first() else {
        return match key {
            Some(_) => Err(refused(
                "it is not signed, and a key to verify it was given (--card-key, or pinned by \
                 the import): a card that lost its signature is not trusted"
                    .to_owned(),
            )),
            None => Ok(None),
        };
    };
    let header = agent_card::header(signature).map_err(&refused)?;
    let kid = header.get("kid").and_then(Value::as_str).unwrap_or("card");
    let (key, from) = match key {
        Some(key) => (
            PublicKey::from_base64(kid, key).map_err(|e| refused(e.to_string()))?,
            None,
        ),
        None => {
            let jku = header.get("jku").and_then(Value::as_str).ok_or_else(|| {
                refused(
                    "it is signed, but its signature names no `jku` to fetch the key from: give \
                     the signer's public key with --card-key"
                        .to_owned(),
                )
            })?;
            let key = jwks_key(jku, kid, tls).await.map_err(&refused)?;
            (key, Some(jku.to_owned()))
        }
    };
    agent_card::verify(card, signature, &key).map_err(refused)?;
    Ok(Some((key, from)))
}

/// The Ed25519 key `kid` of the JWKS at `jku`.
async fn jwks_key(jku: &str, kid: &str, tls: &TlsClient) -> Result<PublicKey, String> {
    let url = url::Url::parse(jku).map_err(|_| format!("its `jku` `{jku}` is not a URL"))?;
    let (status, body) = fetch(&url, tls, http::Method::GET, &[], None)
        .await
        .map_err(|e| format!("its key set at {jku}: {e}"))?;
    let jwks: Value = serde_json::from_slice(&body)
        .ok()
        .filter(|_| status == 200)
        .ok_or_else(|| format!("{jku} answered HTTP {status}, not a JSON key set"))?;
    agent_card::key_in_set(&jwks, kid).map_err(|e| format!("{jku}: {e}"))
}

/// `GetExtendedAgentCard` at `endpoint`, sent with `headers`: the card it answers.
async fn extended_card(
    endpoint: &str,
    headers: &[(String, String)],
    tls: &TlsClient,
) -> Result<Value, ImportError> {
    let not_a2a = |reason: String| ImportError::NotA2a {
        url: endpoint.to_owned(),
        reason,
    };
    let url = url::Url::parse(endpoint).map_err(|_| ImportError::Url {
        url: endpoint.to_owned(),
    })?;
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "GetExtendedAgentCard", "params": {} });
    let (status, answer) = fetch(&url, tls, http::Method::POST, headers, Some(body)).await?;
    let answer: Value = serde_json::from_slice(&answer).unwrap_or(Value::Null);
    if let Some(error) = answer.get("error") {
        return Err(not_a2a(format!(
            "GetExtendedAgentCard with the --header credentials: JSON-RPC error {}: {}",
            error["code"], error["message"]
        )));
    }
    match answer.get("result") {
        Some(card @ Value::Object(_)) if status == 200 => Ok(card.clone()),
        _ => Err(not_a2a(format!(
            "GetExtendedAgentCard with the --header credentials answered HTTP {status} without \
             a card"
        ))),
    }
}

/// One request (GET, or a JSON-RPC POST of `body`) with `headers`, over `tls` for an https
/// URL: the status and the body.
async fn fetch(
    url: &url::Url,
    tls: &TlsClient,
    method: http::Method,
    headers: &[(String, String)],
    body: Option<Value>,
) -> Result<(u16, Bytes), ImportError> {
    let unreachable = |reason: String| ImportError::Unreachable {
        url: url.to_string(),
        reason,
    };
    let host = url
        .host_str()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_owned();
    let port = url.port_or_known_default().unwrap_or(80);
    let exchange = async {
        let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
            .await
            .map_err(|e| e.to_string())?;
        let mut request = http::Request::builder()
            .method(method)
            .uri(&url[url::Position::BeforePath..])
            .header(
                http::header::HOST,
                &url[url::Position::BeforeHost..url::Position::AfterPort],
            )
            .header(http::header::ACCEPT, "application/json")
            .header("a2a-version", "1.0");
        for (name, value) in headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let bytes = match body {
            Some(body) => {
                request = request.header(http::header::CONTENT_TYPE, "application/json");
                Bytes::from(body.to_string())
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(bytes)).map_err(|e| e.to_string())?;
        let response = gatehouse_server::outbound::send(url, tcp, tls, request).await?;
        let status = response.status().as_u16();
        let limited = http_body_util::Limited::new(response.into_body(), MAX_BODY);
        let body = limited
            .collect()
            .await
            .map_err(|e| e.to_string())?
            .to_bytes();
        Ok::<_, String>((status, body))
    };
    match tokio::time::timeout(TIMEOUT, exchange).await {
        Ok(answer) => answer.map_err(unreachable),
        Err(_) => Err(unreachable(format!("no answer within {TIMEOUT:?}"))),
    }
}

/// At most 512 bytes of `body`, as text.
fn quote(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let mut end = text.len().min(512);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].trim().to_owned()
}

/// The import of `card`'s skills.
pub fn build(
    card: &Card,
    headers: &[HeaderCredential],
    options: &Options,
) -> Result<Import, ImportError> {
    let post: BTreeSet<MethodName> = [MethodName::parse("POST").expect("POST is a method")].into();
    let destination = Destination {
        url: &card.endpoint,
        methods: post.clone(),
        credentials: headers,
        headers: A2A_HEADERS.iter().map(|&h| h.to_owned()).collect(),
        // Every A2A request is a POST, a read-only skill's too.
        read_methods: post,
    };
    let filter = Filter::new(&options.include, &options.exclude)?;
    let mut ids = Ids::default();
    let pin = card.pin();
    let (mut capabilities, mut choices, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    let skills = card.card["skills"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for skill in skills {
        let Some(name) = skill["id"].as_str().filter(|id| !id.is_empty()) else {
            skipped.push(Skipped {
                source: skill["name"].as_str().unwrap_or("a skill").to_owned(),
                reason: "it has no `id`".to_owned(),
            });
            continue;
        };
        if let Some(reason) = filter.refuses(name) {
            skipped.push(Skipped {
                source: name.to_owned(),
                reason: reason.to_owned(),
            });
            continue;
        }
        let id = ids.assign(name)?;
        let (capability, choice) = capability(card, &pin, id, skill);
        capabilities.push(capability);
        choices.push(choice);
    }
    let agent = card.card["name"].as_str().unwrap_or("an agent");
    let mut import = assemble(
        options,
        format!(
            "Skills of the A2A agent \"{agent}\" at {}, imported by `gatehouse import a2a`.",
            card.endpoint
        ),
        Reach::Http(destination),
        (capabilities, choices, skipped),
        Served::default(),
        || {
            format!(
                "the card lists {} skills and the filters leave none",
                skills.len()
            )
        },
    )?;
    // A peer that calls back into the gateway does so on the call's behalf: its requests
    // carry the call's delegation.
    for grant in &mut import.grants {
        grant.delegate = true;
    }
    // The agent's status updates reach the caller as progress, its questions as elicitation.
    import.manifest.caller = CallerRequest {
        progress: true,
        log: false,
        ask: vec![AskKind::Elicitation],
    };
    if let Some(signer) = &card.signer {
        import.notes.push(format!(
            "the card is signed; its signature verified with key `{}` ({}), pinned for --check",
            signer.key_id,
            signer.to_base64()
        ));
        if let Some(jku) = &card.key_from {
            import.notes.push(format!(
                "that key is the one {jku} serves, trusted on first use: compare it with the \
                 key the agent's operator publishes, or import with --card-key"
            ));
        }
    }
    Ok(import)
}

/// The arguments every imported skill takes.
pub fn input_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "text": { "type": "string", "description": "What to ask the agent, in words." },
            "data": { "type": "object", "description": "Structured input for the skill." },
            "task_id": {
                "type": "string",
                "description": "To answer an agent that asked for input: the `task_id` of that result.",
            },
            "context_id": {
                "type": "string",
                "description": "The conversation to continue: the `context_id` of an earlier result.",
            },
        },
        "additionalProperties": false,
    })
}

impl Card {
    /// The digest of the card, without its signatures.
    fn digest(&self) -> String {
        let mut unsigned = self.card.clone();
        if let Some(fields) = unsigned.as_object_mut() {
            fields.remove("signatures");
        }
        digest::of(&unsigned)
    }

    /// What each capability pins of the card: where it was read, its digest, and the key its
    /// signature verified with.
    fn pin(&self) -> Value {
        let mut pin = json!({ "url": self.url, "digest": self.digest() });
        if let Some(signer) = &self.signer {
            pin["signer"] = Value::from(signer.to_base64());
        }
        pin
    }
}

/// The capability `id` of `skill` of `card`, pinning `pin` ([`Card::pin`]).
fn capability(card: &Card, pin: &Value, id: String, skill: &Value) -> (Capability, Choice) {
    let name = skill["id"].as_str().unwrap_or_default();
    let tags: Vec<String> = (skill["tags"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .map(|tag| tag.to_ascii_lowercase().replace(['-', '_'], ""))
        .collect();
    let (class, mode, reason) = if tags.iter().any(|t| t == "readonly") {
        (
            CapabilityClass::Observe,
            ApprovalMode::ReadOnly,
            "tag read-only",
        )
    } else if tags.iter().any(|t| t == "destructive") {
        (
            CapabilityClass::Act,
            ApprovalMode::Destructive,
            "tag destructive",
        )
    } else {
        (
            CapabilityClass::Act,
            ApprovalMode::Network,
            "no read-only or destructive tag",
        )
    };
    let upstream = json!({
        "url": card.endpoint,
        "skill": name,
        "streaming": card.card["capabilities"]["streaming"] == true,
        "digest": digest::of(skill),
        "card": pin,
    });
    let (produces, sends, labels) = proposed_labels(name, None);
    let capability = Capability {
        id: id.clone(),
        title: skill["name"].as_str().map(str::to_owned),
        description: skill["description"].as_str().unwrap_or_default().to_owned(),
        capability_class: class,
        approval_mode: mode,
        input_schema: input_schema(),
        output_schema: None,
        evidence_keys: Vec::new(),
        idempotency: None,
        approval_gate: (mode == ApprovalMode::Destructive).then(|| DESTRUCTIVE_GATE.to_owned()),
        rollback: None,
        annotations: None,
        sensitive: false,
        client_capabilities: Vec::new(),
        // An agent's task may run long: a client that takes tasks gets its call as one past
        // `[mcp] task_after_ms`, within the adapter's time budget.
        task_support: Some(TaskSupport::Optional),
        upstream: Some(upstream),
        produces,
        sends,
    };
    (
        capability,
        Choice::new(name, id, (class, mode), reason, labels),
    )
}

/// The card URL, and the signer, an import pinned: its first capability's.
pub fn pinned(manifest: &AdapterManifest) -> Option<(String, Option<String>)> {
    let card = &manifest.capabilities.first()?.upstream.as_ref()?["card"];
    let url = card["url"].as_str()?.to_owned();
    Some((url, card["signer"].as_str().map(str::to_owned)))
}

/// Compares the skills pinned in `manifest` with `card` now: skills changed, added (that the
/// filters let through) or removed, and `card` itself when the rest of it changed (its name,
/// interfaces, capabilities).
pub fn drift(
    manifest: &AdapterManifest,
    options: &Options,
    card: &Card,
) -> Result<Drift, ImportError> {
    let filter = Filter::new(&options.include, &options.exclude)?;
    let upstreams = || (manifest.capabilities.iter()).filter_map(|c| c.upstream.as_ref());
    let pinned: BTreeMap<&str, &str> = upstreams()
        .filter_map(|u| Some((u["skill"].as_str()?, u["digest"].as_str()?)))
        .collect();
    let mut drift = Drift::default();
    let card_now = card.digest();
    if upstreams().any(|u| u["card"]["digest"].as_str() != Some(card_now.as_str())) {
        drift.changed.push("card".to_owned());
    }
    let mut seen = BTreeSet::new();
    for skill in card.card["skills"].as_array().into_iter().flatten() {
        let Some(name) = skill["id"].as_str() else {
            continue;
        };
        match pinned.get(name) {
            Some(digest) if *digest != digest::of(skill) => drift.changed.push(name.to_owned()),
            Some(_) => {}
            None if filter.refuses(name).is_none() => drift.added.push(name.to_owned()),
            None => {}
        }
        seen.insert(name);
    }
    drift.removed = (pinned.keys())
        .filter(|name| !seen.contains(*name))
        .map(|name| (*name).to_owned())
        .collect();
    Ok(drift)
}

#[cfg(test)]
mod tests {
    use gatehouse_core::keys::SigningKey;

    use super::*;

    fn card(skills: &Value) -> Card {
        Card {
            url: "http://127.0.0.1:1/.well-known/agent-card.json".to_owned(),
            card: json!({
                "name": "Room desk",
                "supportedInterfaces": [{ "url": "http://127.0.0.1:1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }],
                "capabilities": { "streaming": true },
                "skills": skills,
            }),
            endpoint: "http://127.0.0.1:1/".to_owned(),
            signer: None,
            key_from: None,
        }
    }

    #[test]
    fn skills_become_capabilities_classed_by_their_tags() {
        let card = card(&json!([
            { "id": "echo", "name": "Echo", "description": "Echoes.", "tags": ["Read-Only"] },
            { "id": "book", "name": "Book", "description": "Books.", "tags": ["write"] },
            { "id": "Cancel All", "name": "Cancel", "description": "Cancels.", "tags": ["destructive"] },
            { "name": "nameless" },
        ]));
        let import = build(&card, &[], &Options::new("acme.desk")).unwrap();
        let rows: Vec<(&str, CapabilityClass, ApprovalMode)> = (import.choices.iter())
            .map(|c| (c.capability.as_str(), c.class, c.mode))
            .collect();
        assert_eq!(
            rows,
            [
                ("echo", CapabilityClass::Observe, ApprovalMode::ReadOnly),
                ("book", CapabilityClass::Act, ApprovalMode::Network),
                (
                    "cancel_all",
                    CapabilityClass::Act,
                    ApprovalMode::Destructive
                ),
            ]
        );
        assert_eq!(import.skipped[0].reason, "it has no `id`");
        let book = &import.manifest.capabilities[1];
        let upstream = book.upstream.as_ref().unwrap();
        assert_eq!(upstream["skill"], "book");
        assert_eq!(upstream["streaming"], true);
        assert_eq!(upstream["card"]["url"], card.url);
        assert_eq!(book.task_support, Some(TaskSupport::Optional));
        let gated = &import.manifest.capabilities[2];
        assert_eq!(gated.approval_gate.as_deref(), Some(DESTRUCTIVE_GATE));
        assert_eq!(
            import.grants[0].headers,
            BTreeSet::from(["a2a-version".to_owned()])
        );
        assert_eq!(import.manifest.caller.ask, [AskKind::Elicitation]);
    }

    #[test]
    fn drift_names_skills_changed_added_removed_and_the_card() {
        let skills = json!([{ "id": "echo", "description": "Echoes." }, { "id": "book" }]);
        let before = card(&skills);
        let import = build(&before, &[], &Options::new("acme.desk")).unwrap();
        let options = Options::new("acme.desk");
        assert!(
            drift(&import.manifest, &options, &before)
                .unwrap()
                .is_empty()
        );
        let mut after = before.clone();
        after.card["skills"] =
            json!([{ "id": "echo", "description": "Louder." }, { "id": "hang" }]);
        let found = drift(&import.manifest, &options, &after).unwrap();
        assert_eq!(found.changed, ["card", "echo"]);
        assert_eq!(
            (found.added, found.removed),
            (vec!["hang".to_owned()], vec!["book".to_owned()])
        );
    }

    #[test]
    fn the_endpoint_is_the_first_json_rpc_interface_of_a2a_1() {
        let with = |interfaces: Value| json!({ "supportedInterfaces": interfaces });
        let card = with(json!([
            { "url": "http://a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0" },
            { "url": "http://a/old", "protocolBinding": "JSONRPC", "protocolVersion": "0.3" },
            { "url": "http://a/rpc", "protocolBinding": "JSONRPC", "protocolVersion": "1.0" },
        ]));
        assert_eq!(endpoint(&card).unwrap(), "http://a/rpc");
        let only_grpc = with(json!([{ "url": "http://a/grpc", "protocolBinding": "GRPC" }]));
        let error = endpoint(&only_grpc).unwrap_err();
        assert!(error.contains("it offers: \"GRPC\" null"), "{error}");
        assert!(endpoint(&json!({ "name": "x" })).is_err());
    }

    #[tokio::test]
    async fn a_signed_card_verifies_with_the_given_key_or_is_refused() {
        let key = SigningKey::generate("desk").unwrap();
        let mut signed = card(&json!([])).card;
        signed["signatures"] = json!([agent_card::sign(&signed, &key, None)]);
        let url = url::Url::parse("http://127.0.0.1:1/.well-known/agent-card.json").unwrap();
        let public = key.public_key().to_base64();
        let tls = TlsClient::default();
        let verified = signer(&url, &signed, Some(&public), &tls).await.unwrap();
        assert_eq!(
            verified.map(|(k, from)| (k.to_base64(), from)),
            Some((public.clone(), None))
        );
        signed["name"] = json!("Someone else");
        let error = signer_error(&url, &signed, Some(&public)).await;
        assert!(error.contains("does not verify"), "{error}");
        // No key given and no `jku` to fetch it from.
        let error = signer_error(&url, &signed, None).await;
        assert!(error.contains("--card-key"), "{error}");
        // A key given for an unsigned card: the signature was expected.
        let error = signer_error(&url, &card(&json!([])).card, Some(&public)).await;
        assert!(error.contains("not signed"), "{error}");
        let unsigned = signer(&url, &card(&json!([])).card, None, &tls).await;
        assert_eq!(unsigned.unwrap(), None);
    }

    async fn signer_error(url: &url::Url, card: &Value, key: Option<&str>) -> String {
        let tls = TlsClient::default();
        signer(url, card, key, &tls).await.unwrap_err().to_string()
    }

    #[test]
    fn the_card_is_read_at_its_well_known_path() {
        let at = |url: &str| card_url(url).map(|u| u.to_string());
        assert_eq!(
            at("http://127.0.0.1:9/").unwrap(),
            "http://127.0.0.1:9/.well-known/agent-card.json"
        );
        assert_eq!(
            at("http://h/agents/desk/card.json").unwrap(),
            "http://h/agents/desk/card.json"
        );
        assert!(at("ftp://h/").is_err() && at("not a url").is_err());
    }
}

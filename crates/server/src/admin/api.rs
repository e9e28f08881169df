//! The admin API's handlers. Each calls the same host and store code as the `gatehouse`
//! commands (approvals through [`Host::decide`] and so `Store::decide`, with its rules;
//! uploads through [`Host::install`], verified exactly like a file at start-up), and records
//! every change to the serving plugins in the audit log.

use std::sync::Arc;

use base64::Engine as _;
use bytes::Bytes;
use gatehouse_core::model::Obligation;
use gatehouse_host::error::PolicyError;
use gatehouse_host::plugin::manifest::PluginKind;
use gatehouse_host::{Host, InstallError, PluginRef};
use gatehouse_store::check_anchor;
use gatehouse_store::{
    Anchor, Approval, ApprovalFilter, ApprovalStatus, AuditQuery, PluginChange, ServedAs,
    SessionFilter, SessionKey, StoreError, Waiting, now_ms,
};
use http::StatusCode;
use serde_json::{Value, json};

use super::auth::Operator;
use super::reply::{ApiError, Query, Reply, json_reply};

/// Largest page of approvals or audit entries.
const MAX_PAGE: usize = 1000;
/// Default page size.
const DEFAULT_PAGE: usize = 100;

fn store_error(error: StoreError) -> ApiError {
    match error {
        StoreError::NotFound(what) => ApiError::not_found(format!("{what} not found")),
        StoreError::Refused(why) => ApiError::conflict(why),
        StoreError::Open { .. } | StoreError::Unavailable(_) => {
            ApiError::unavailable(error.to_string())
        }
    }
}

fn page(query: &mut Query) -> Result<usize, ApiError> {
    match query.take_number::<usize>("limit")? {
        None => Ok(DEFAULT_PAGE),
        Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
        Some(n) => Err(ApiError::bad_request(format!(
            "query parameter `limit` = {n}: expected 1 to {MAX_PAGE}"
        ))),
    }
}

fn parse_json(body: &[u8], what: &str) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON ({what}): {e}")))
}

pub async fn ready(host: &Host) -> Result<Reply, ApiError> {
    host.ready()
        .await
        .map_err(|e| ApiError::unavailable(format!("not ready: {e}")))?;
    Ok(json_reply(StatusCode::OK, &json!({ "status": "ready" })))
}

pub async fn metrics(host: &Host) -> Result<Reply, ApiError> {
    let text = host.metrics_text().await.map_err(store_error)?;
    let mut reply = http::Response::new(http_body_util::Full::new(Bytes::from(text)));
    reply.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static(
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
    );
    Ok(reply)
}

/// ADR-047's resolution trace: the skills text a call of `tool` by `tenant` (and `user`) would
/// receive, and which skills matched at each level.
pub fn resolve_skills(host: &Host, mut query: Query) -> Result<Reply, ApiError> {
    let mut required = |name: &str| {
        query.take(name).filter(|v| !v.is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "query parameter `{name}` is required, e.g. ?tenant=acme&tool=gatehouse.echo.echo"
            ))
        })
    };
    let tenant = required("tenant")?;
    let tool = required("tool")?;
    let user = query.take("user");
    query.none()?;
    let users: Vec<&str> = user.as_deref().into_iter().collect();
    let resolution = host.resolve_skills(&tenant, &tool, &users);
    Ok(json_reply(
        StatusCode::OK,
        &json!({
            "tenant": tenant,
            "tool": tool,
            "user": user,
            "resolved_context": resolution.text,
            "trace": resolution.trace,
        }),
    ))
}

pub async fn list_approvals(host: &Host, mut query: Query) -> Result<Reply, ApiError> {
    let status = ApprovalStatus::parse_filter(query.take("status").as_deref().unwrap_or("pending"))
        .map_err(|e| ApiError::bad_request(format!("query parameter {e}")))?;
    let filter = ApprovalFilter {
        status,
        tenant: query.take("tenant"),
        limit: page(&mut query)?,
    };
    query.none()?;
    let approvals = host.approvals(filter).await.map_err(store_error)?;
    let mut views = Vec::with_capacity(approvals.len());
    for approval in approvals {
        views.push(approval_view(host, approval, false).await?);
    }
    Ok(json_reply(StatusCode::OK, &json!({ "approvals": views })))
}

/// One approval as [`approval_view`] shows it; `reveal` (a role in `[admin]
/// reveal_sensitive`, checked by the caller) shows a sensitive capability's arguments in clear,
/// and appends who saw them to the audit log first.
pub async fn show_approval(
    host: &Host,
    operator: &Operator,
    id: &str,
    reveal: bool,
) -> Result<Reply, ApiError> {
    let approval = host
        .approval(id)
        .await
        .map_err(store_error)?
        .ok_or_else(|| ApiError::not_found(format!("there is no approval `{id}`")))?;
    if reveal {
        let record =
            json!({ "approval_id": approval.id, "tool": approval.tool, "revealed": "arguments" });
        host.audit_event("reveal", &operator.principal, &record)
            .await
            .map_err(store_error)?;
    }
    Ok(json_reply(
        StatusCode::OK,
        &approval_view(host, approval, reveal).await?,
    ))
}

/// An approval as people see it: its record, plus
/// - `state`: its status, or `expired` once past its expiry undecided or unused;
/// - `declared_mode`: the approval mode its tool's capability declares (absent if the tool is
///   no longer served);
/// - `policy_decision`: each policy module's verdict, reasons and digest, from the audit entry
///   of the call that proposed it;
/// - `url`: where an approver decides (`[store] approval_url`);
/// - `call.args` with that decision's obligations applied (redacted pointers and masked
///   personal data), so an approver never sees a value the policy withholds, and a sensitive
///   capability's arguments masked (their hashes) unless `reveal`;
/// - `waiting_on` (`held`, `task` or `retry`: how the caller waits for the decision) and
///   `waiting_until_ms` (a held request's end), and `time_left_ms` until it expires.
async fn approval_view(host: &Host, approval: Approval, reveal: bool) -> Result<Value, ApiError> {
    let state = if approval.expired(now_ms()) {
        "expired"
    } else {
        approval.status.as_str()
    };
    let declared_mode = host
        .tool_catalog(&approval.tenant)
        .into_iter()
        .find(|(name, _)| *name == approval.tool)
        .map(|(_, capability)| capability.approval_mode);
    let proposing_call = approval
        .call
        .get("tool_call_id")
        .and_then(Value::as_str)
        .map(str::to_owned);
    let decision = match proposing_call {
        Some(id) => host
            .audit(AuditQuery {
                tool_call_id: Some(id),
                kind: Some("call".to_owned()),
                limit: 1,
                ..AuditQuery::default()
            })
            .await
            .map_err(store_error)?
            .first()
            .map(|entry| entry.expanded()["record"]["result"]["policy_decision"].clone())
            .filter(|decision| !decision.is_null()),
        None => None,
    };
    let obligations: Vec<Obligation> = decision
        .as_ref()
        .and_then(|d| d.get("obligations"))
        .and_then(|o| serde_json::from_value(o.clone()).ok())
        .unwrap_or_default();
    let url = host.approval_url(&approval.id);
    let now = now_ms();
    let (waiting_on, waiting_until) = match &approval.waiting {
        Waiting::Task { .. } => ("task", None),
        Waiting::Held { until_ms } if *until_ms > now => ("held", Some(*until_ms)),
        Waiting::Held { .. } | Waiting::Retry => ("retry", None),
    };
    let time_left = (state == "pending" || state == "approved")
        .then(|| approval.expires_at_ms.saturating_sub(now));
    let tool = approval.tool.clone();
    let mut view = json!(approval);
    if let Some(args) = view.pointer_mut("/call/args") {
        if !reveal {
            *args = host.approver_view(&tool, args);
        }
        gatehouse_host::apply_obligations(&obligations, args);
    }
    view["sensitive"] = json!(host.is_sensitive(&tool));
    view["revealed"] = json!(reveal);
    view["waiting_on"] = json!(waiting_on);
    view["waiting_until_ms"] = json!(waiting_until);
    view["time_left_ms"] = json!(time_left);
    view["state"] = json!(state);
    view["declared_mode"] = json!(declared_mode);
    view["policy_decision"] = decision.unwrap_or(Value::Null);
    view["url"] = json!(url);
    Ok(view)
}

/// Approves or rejects as the token's principal: `{"reason": "..."}` (required to reject).
pub async fn decide(
    host: &Host,
    operator: &Operator,
    id: &str,
    approve: bool,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let reason = if body.iter().all(u8::is_ascii_whitespace) {
        String::new()
    } else {
        let body = parse_json(body, r#"expected {"reason": "..."}"#)?;
        let Value::Object(mut fields) = body else {
            return Err(ApiError::bad_request(
                r#"the body must be an object: {"reason": "..."}"#,
            ));
        };
        let reason = match fields.remove("reason") {
            None => String::new(),
            Some(Value::String(reason)) => reason,
            Some(_) => return Err(ApiError::bad_request("`reason` must be a string")),
        };
        if let Some(key) = fields.keys().next() {
            return Err(ApiError::bad_request(format!(
                "unknown field `{key}`: the body takes only `reason`"
            )));
        }
        reason
    };
    if !approve && reason.trim().is_empty() {
        return Err(ApiError::bad_request(
            r#"a rejection needs a reason (the caller sees it): {"reason": "..."}"#,
        ));
    }
    let approval = host
        .decide(id, approve, &operator.principal, &reason)
        .await
        .map_err(store_error)?;
    Ok(json_reply(
        StatusCode::OK,
        &approval_view(host, approval, false).await?,
    ))
}

/// The audit filters of a query: every parameter of `GET /v1/audit` but `limit`.
fn audit_filters(query: &mut Query, limit: usize) -> Result<AuditQuery, ApiError> {
    let audit = AuditQuery {
        tool_call_id: query.take("tool_call_id"),
        tenant: query.take("tenant"),
        outcome: query.take("outcome"),
        tool: query.take("tool"),
        principal: query.take("principal"),
        kind: query.take("kind"),
        replay_of: query.take("replay_of"),
        since_ms: query.take_number("since_ms")?,
        until_ms: query.take_number("until_ms")?,
        after_seq: query.take_number("after_seq")?,
        chain: query.take_number("chain")?,
        limit,
    };
    query.none()?;
    Ok(audit)
}

pub async fn query_audit(host: &Host, mut query: Query) -> Result<Reply, ApiError> {
    let limit = page(&mut query)?;
    let audit = audit_filters(&mut query, limit)?;
    let entries = host.audit(audit).await.map_err(store_error)?;
    // A full page may have a next one: page on with `after_seq`.
    let next = (entries.len() == limit)
        .then(|| entries.last().map(|e| e.seq))
        .flatten();
    let entries: Vec<Value> = entries
        .iter()
        .map(gatehouse_store::AuditEntry::expanded)
        .collect();
    Ok(json_reply(
        StatusCode::OK,
        &json!({ "entries": entries, "next_after_seq": next }),
    ))
}

/// Every entry the filters select, as JSON lines (`gatehouse audit export`'s format), for
/// download.
pub async fn export_audit(host: &Host, mut query: Query) -> Result<Reply, ApiError> {
    let mut audit = audit_filters(&mut query, MAX_PAGE)?;
    let mut lines = String::new();
    loop {
        let entries = host.audit(audit.clone()).await.map_err(store_error)?;
        let Some(last) = entries.last() else { break };
        audit.after_seq = Some(last.seq);
        for entry in &entries {
            lines.push_str(&entry.expanded().to_string());
            lines.push('\n');
        }
    }
    let mut reply = http::Response::new(http_body_util::Full::new(Bytes::from(lines)));
    let headers = reply.headers_mut();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/x-ndjson"),
    );
    headers.insert(
        http::header::CONTENT_DISPOSITION,
        http::HeaderValue::from_static("attachment; filename=\"gatehouse-audit.jsonl\""),
    );
    Ok(reply)
}

/// Every chain; `?head=SEQ:HASH[,SEQ:HASH...]` (what an earlier verify returned as `keep`; a
/// bare hash is looked up) also checks that the log still holds each head at its entry:
/// entries appended since are fine. `heads` are each chain's.
pub async fn verify_audit(host: &Host, mut query: Query) -> Result<Reply, ApiError> {
    let heads = query
        .take("head")
        .map(|head| Anchor::parse_list(&head))
        .transpose()
        .map_err(|e| ApiError::bad_request(format!("query parameter {e}")))?
        .unwrap_or_default();
    query.none()?;
    let report = host.verify_audit().await.map_err(store_error)?;
    let mut head_problem = None;
    if report.first_break.is_none() {
        for head in &heads {
            if let Err(problem) = check_anchor(&**host.store(), &report, head)
                .await
                .map_err(store_error)?
            {
                head_problem = Some((head, problem));
                break;
            }
        }
    }
    let keep = Anchor::of(&report);
    let (ok, message) = match (&report.first_break, head_problem) {
        (Some(problem), _) => (
            false,
            format!("BROKEN after {} good entries: {problem}", report.entries),
        ),
        (None, Some((head, problem))) => (
            false,
            format!(
                "{} entries chain correctly, but not through the head you recorded ({}): {problem}",
                report.entries, head.hash
            ),
        ),
        (None, None) => (true, report.intact("?head=")),
    };
    Ok(json_reply(
        StatusCode::OK,
        &json!({
            "ok": ok,
            "entries": report.entries,
            "head": report.head(),
            "heads": report.heads,
            "keep": keep,
            "first_break": report.first_break,
            "message": message,
        }),
    ))
}

/// The signed checkpoints the store holds, oldest first (`[store.checkpoints]`).
pub async fn list_checkpoints(host: &Host, query: Query) -> Result<Reply, ApiError> {
    query.none()?;
    let checkpoints = host.store().checkpoints().await.map_err(store_error)?;
    Ok(json_reply(
        StatusCode::OK,
        &json!({ "checkpoints": checkpoints }),
    ))
}

pub fn list_plugins(host: &Host) -> Reply {
    json_reply(
        StatusCode::OK,
        &json!({
            "adapters": host.adapters(),
            "policies": host.policies(),
            "stdio": host.stdio().statuses(),
        }),
    )
}

/// Records a change the host already made, and keeps it for a restart (`kept`, applied again
/// at start by [`Host::restore_plugin_changes`]), with the version it made serve, if any
/// (`served`: the floor a restart holds, [`Host::record_served`]); if the store cannot, says
/// so (the change stands).
async fn record(
    host: &Host,
    operator: &Operator,
    change: &Value,
    kept: PluginChange,
    served: Option<(PluginKind, &PluginRef, ServedAs)>,
) -> Result<(), ApiError> {
    host.store().add_plugin_change(kept).await.map_err(|e| {
        ApiError::internal(format!(
            "the change is in effect but could not be stored, so a restart would not serve it: {e}"
        ))
    })?;
    if let Some((kind, plugin, how)) = served {
        host.record_served(kind, plugin, how).await.map_err(|e| {
            ApiError::internal(format!(
                "the change is in effect but its version could not be recorded as served, so a \
                 restart would not hold it as the floor of `{}`: {e}",
                plugin.id
            ))
        })?;
    }
    host.audit_plugin_change(&operator.principal, change)
        .await
        .map_err(|e| {
            ApiError::internal(format!(
                "the change is in effect but could not be recorded in the audit log: {e}"
            ))
        })
}

/// A signed adapter or policy module, as the raw `.wasm` body; `source` is the registry
/// reference it was pulled from, if it was ([`pull`]).
pub async fn upload(
    host: &Arc<Host>,
    operator: &Operator,
    body: Bytes,
    source: Option<String>,
) -> Result<Reply, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request(
            "the body is empty: send the signed component's bytes (content-type application/wasm)",
        ));
    }
    // Verifying and compiling take a while: off the async workers.
    let installing = Arc::clone(host);
    let component = base64::engine::general_purpose::STANDARD.encode(&body);
    let from = source.clone();
    let (kind, plugin) = tokio::task::spawn_blocking(move || installing.install_from(&body, from))
        .await
        .map_err(|e| ApiError::internal(format!("the install task failed: {e}")))?
        .map_err(|e| install_error(&e))?;
    let replaced = match kind {
        PluginKind::Policy => host
            .policies()
            .into_iter()
            .find(|p| p.plugin.id == plugin.id)
            .and_then(|p| p.previous.last().cloned()),
        PluginKind::Adapter => None,
    };
    let change = json!({
        "action": "install", "kind": kind.to_string(), "plugin": plugin, "replaced": replaced,
    });
    let kept = PluginChange::Install {
        plugin: plugin.id.clone(),
        component,
        source,
        at_ms: now_ms(),
    };
    let served = Some((kind, &plugin, ServedAs::Install));
    record(host, operator, &change, kept, served).await?;
    tracing::info!(by = %operator.principal, kind = %kind, id = %plugin.id, version = %plugin.version, digest = %plugin.digest, "admin: installed");
    Ok(json_reply(StatusCode::CREATED, &change))
}

/// A signed adapter or policy module pulled from a registry: the JSON body
/// `{"source": "oci://..."}`. The gateway pulls it with its own `[oci]` settings (credentials,
/// cache, tag rule), then installs it exactly as an upload, citing the digest it pulled.
#[cfg(feature = "oci")]
pub async fn pull(
    host: &Arc<Host>,
    registries: Option<&gatehouse_host::oci::Registries>,
    operator: &Operator,
    body: &[u8],
) -> Result<Reply, ApiError> {
    use gatehouse_host::oci::{OciError, OciRef, Tags};
    #[derive(serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Pull {
        source: String,
    }
    let Pull { source } = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "expected {{\"source\": \"oci://REGISTRY/REPO@sha256:...\"}}: {e}"
        ))
    })?;
    let reference: OciRef = source
        .parse()
        .map_err(|e: OciError| ApiError::bad_request(e.to_string()))?;
    let Some(registries) = registries else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "refused",
            "this admin server pulls from no registry (it was built without `AdminServer::with_registries`): upload the component's bytes",
        ));
    };
    let pulled = registries
        .pull(&reference, Tags::AsConfigured)
        .await
        .map_err(|e| {
            let status = match e {
                OciError::Reference { .. } | OciError::TagNotAllowed { .. } => {
                    StatusCode::BAD_REQUEST
                }
                // The gateway's own `[oci]` settings or cache: not the registry's fault.
                OciError::Config(_) | OciError::Cache { .. } => StatusCode::INTERNAL_SERVER_ERROR,
                _ => StatusCode::BAD_GATEWAY,
            };
            ApiError::new(
                status,
                "refused",
                format!("refused; the serving version is unchanged: {e}"),
            )
        })?;
    tracing::info!(by = %operator.principal, reference = %reference, pinned = %pulled.pinned, cached = pulled.from_cache, "admin: pulled");
    upload(
        host,
        operator,
        Bytes::from(pulled.bytes),
        Some(pulled.pinned.to_string()),
    )
    .await
}

fn install_error(error: &InstallError) -> ApiError {
    let message = match error {
        // The error's own advice names the library's forced installs, which this API has not.
        InstallError::Downgrade {
            id,
            serving,
            offered,
        } => format!(
            "refused; the serving version is unchanged: `{id}` {offered} is older than {serving}, \
             the version serving or last served under that id. Uploads never downgrade; to \
             return a policy module to the version it replaced, roll it back (`gatehouse admin \
             policy rollback {id}`)"
        ),
        error => format!("refused; the serving version is unchanged: {error}"),
    };
    ApiError::new(StatusCode::BAD_REQUEST, "refused", message)
}

fn policy_error(error: &PolicyError) -> ApiError {
    match error {
        PolicyError::NoPrevious { .. } | PolicyError::NotShadow { .. } => {
            ApiError::conflict(error.to_string())
        }
        PolicyError::Unbound { .. } => ApiError::not_found(error.to_string()),
        PolicyError::Config { .. } | PolicyError::Schema { .. } => {
            ApiError::new(StatusCode::BAD_REQUEST, "refused", error.to_string())
        }
    }
}

pub async fn rollback(host: &Host, operator: &Operator, module: &str) -> Result<Reply, ApiError> {
    let replaced = host.policy_version(module);
    if replaced.is_none() {
        return Err(ApiError::not_found(format!(
            "no policy module `{module}` is installed"
        )));
    }
    let plugin = host.rollback_policy(module).map_err(|e| policy_error(&e))?;
    let change = json!({
        "action": "rollback", "kind": "policy", "plugin": plugin, "replaced": replaced,
    });
    let kept = PluginChange::Rollback {
        plugin: module.to_owned(),
        at_ms: now_ms(),
    };
    // A rollback is the operator's downgrade: it lowers the floor.
    let served = Some((PluginKind::Policy, &plugin, ServedAs::Downgrade));
    record(host, operator, &change, kept, served).await?;
    tracing::info!(by = %operator.principal, module, version = %plugin.version, "admin: rolled back");
    Ok(json_reply(StatusCode::OK, &change))
}

/// Promotes every shadow binding of `module` to enforcing: an audited act.
pub async fn promote(host: &Host, operator: &Operator, module: &str) -> Result<Reply, ApiError> {
    let bindings = host.promote_policy(module).map_err(|e| policy_error(&e))?;
    let change = json!({
        "action": "promote", "kind": "policy", "module": module, "bindings": bindings,
        "serving": host.policy_version(module),
    });
    let kept = PluginChange::Promote {
        plugin: module.to_owned(),
        at_ms: now_ms(),
    };
    record(host, operator, &change, kept, None).await?;
    tracing::info!(by = %operator.principal, module, bindings, "admin: shadow binding promoted to enforcing");
    Ok(json_reply(StatusCode::OK, &change))
}

/// Replaces the config of every binding of `module` with the JSON body.
pub async fn set_config(
    host: &Host,
    operator: &Operator,
    module: &str,
    body: &[u8],
) -> Result<Reply, ApiError> {
    let config = parse_json(body, "expected the binding's config")?;
    host.set_policy_config(module, &config)
        .map_err(|e| policy_error(&e))?;
    let change =
        json!({ "action": "set_config", "kind": "policy", "module": module, "config": config });
    let kept = PluginChange::SetConfig {
        plugin: module.to_owned(),
        config,
        at_ms: now_ms(),
    };
    record(host, operator, &change, kept, None).await?;
    tracing::info!(by = %operator.principal, module, "admin: binding config set");
    Ok(json_reply(StatusCode::OK, &change))
}

/// The session a query names: `tenant` and `principal` (required), `key` (absent: the
/// principal's window).
fn session_key(query: &mut Query) -> Result<SessionKey, ApiError> {
    let mut required = |name: &str| {
        query.take(name).filter(|v| !v.is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "query parameter `{name}` is required: a session is a principal's in a tenant \
                 (`tenant`, `principal`), under a `key` (absent: the principal's window)"
            ))
        })
    };
    let tenant = required("tenant")?;
    let principal = required("principal")?;
    Ok(SessionKey {
        tenant,
        principal,
        key: query.take("key").unwrap_or_default(),
    })
}

/// Sessions, the most recently started first, without their actions; `tenant` and
/// `principal` filter, `limit` pages.
pub async fn list_sessions(host: &Host, mut query: Query) -> Result<Reply, ApiError> {
    let limit = page(&mut query)?;
    let filter = SessionFilter {
        tenant: query.take("tenant"),
        principal: query.take("principal"),
        limit,
    };
    query.none()?;
    let sessions = host.store().sessions(filter).await.map_err(store_error)?;
    let now = now_ms();
    let sessions: Vec<Value> = sessions
        .iter()
        .map(|s| session_view(host, s, now))
        .collect();
    Ok(json_reply(StatusCode::OK, &json!({ "sessions": sessions })))
}

/// One session's timeline: the session, and its actions since it started, newest first
/// (`limit`), each with the labels it brought.
pub async fn session_timeline(host: &Host, mut query: Query) -> Result<Reply, ApiError> {
    let key = session_key(&mut query)?;
    let limit = page(&mut query)?;
    query.none()?;
    let (session, entries) = host
        .store()
        .session_entries(key.clone(), limit)
        .await
        .map_err(store_error)?
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "there is no session `{}` of `{}` in tenant `{}`",
                key.key, key.principal, key.tenant
            ))
        })?;
    let actions: Vec<Value> = entries
        .iter()
        .map(|entry| {
            let id = entry.event.tool_call_id.as_deref().unwrap_or_default();
            let labels: Vec<&str> = (session.labels.iter())
                .filter(|l| l.tool_call_id == id)
                .map(|l| l.label.as_str())
                .collect();
            json!({
                "seq": entry.seq,
                "at_ms": entry.event.at_ms,
                "tool_call_id": id,
                "tool": entry.event.tool,
                "outcome": entry.event.outcome,
                "labels": labels,
            })
        })
        .collect();
    let view = session_view(host, &session, now_ms());
    Ok(json_reply(
        StatusCode::OK,
        &json!({ "session": view, "actions": actions }),
    ))
}

/// A session as the API shows it: as stored, and whether it is `live` at `now_ms`.
fn session_view(host: &Host, session: &gatehouse_store::Session, now_ms: u64) -> Value {
    let mut view = json!(session);
    view["live"] = json!(session.live(now_ms, host.session_limits()));
    view
}

/// Ends a session: its next call starts a new one, with no labels. Audited.
pub async fn end_session(
    host: &Host,
    operator: &Operator,
    mut query: Query,
) -> Result<Reply, ApiError> {
    let key = session_key(&mut query)?;
    query.none()?;
    let ended = host
        .store()
        .end_session(key.clone(), now_ms())
        .await
        .map_err(store_error)?;
    if !ended {
        return Err(ApiError::not_found(format!(
            "there is no session `{}` of `{}` in tenant `{}` that has not ended",
            key.key, key.principal, key.tenant
        )));
    }
    let record = json!({ "session_ended": key });
    host.audit_event("session", &operator.principal, &record)
        .await
        .map_err(store_error)?;
    Ok(json_reply(
        StatusCode::OK,
        &json!({ "ended": key, "message": "its next call starts a new session, with no labels" }),
    ))
}

/// Users' connections to `[[oauth.provider]]`s (their own upstream accounts), never their
/// tokens; `tenant`, `principal` and `provider` filter.
pub async fn list_connections(
    broker: Option<&crate::oauth::Broker>,
    mut query: Query,
) -> Result<Reply, ApiError> {
    let filter = gatehouse_store::ConnectionFilter {
        tenant: query.take("tenant"),
        principal: query.take("principal"),
        provider: query.take("provider"),
    };
    query.none()?;
    connections(broker, filter).await
}

/// The connections `filter` selects, as the API answers them.
async fn connections(
    broker: Option<&crate::oauth::Broker>,
    filter: gatehouse_store::ConnectionFilter,
) -> Result<Reply, ApiError> {
    let broker = broker.ok_or_else(no_oauth)?;
    let connections = broker.connections(filter).await.map_err(store_error)?;
    Ok(json_reply(
        StatusCode::OK,
        &json!({ "connections": connections }),
    ))
}

/// Revokes a user's connection (`tenant`, `principal`, `provider`): at the provider where it
/// has a revocation endpoint, and in the store; audited. Their next call that needs it pauses
/// for them to connect again.
pub async fn revoke_connection(
    host: &Host,
    broker: Option<&crate::oauth::Broker>,
    operator: &Operator,
    mut query: Query,
) -> Result<Reply, ApiError> {
    let broker = broker.ok_or_else(no_oauth)?;
    let mut required = |name: &str| {
        query.take(name).filter(|v| !v.is_empty()).ok_or_else(|| {
            ApiError::bad_request(format!(
                "query parameter `{name}` is required: a connection is a principal's (`principal`) in a tenant (`tenant`) at a provider (`provider`)"
            ))
        })
    };
    let key = gatehouse_store::ConnectionKey {
        tenant: required("tenant")?,
        principal: required("principal")?,
        provider: required("provider")?,
    };
    query.none()?;
    revoke(host, broker, &operator.principal, key).await
}

/// Revokes connection `key`, by `by` (audited as theirs).
async fn revoke(
    host: &Host,
    broker: &crate::oauth::Broker,
    by: &str,
    key: gatehouse_store::ConnectionKey,
) -> Result<Reply, ApiError> {
    let revoked = broker.revoke(&key).await.map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("the connection could not be revoked: {e}"),
        )
    })?;
    if !revoked {
        return Err(ApiError::not_found(format!(
            "`{}` of tenant `{}` has no connection to `{}`",
            key.principal, key.tenant, key.provider
        )));
    }
    let record = json!({ "connection_revoked": {
        "tenant": key.tenant, "principal": key.principal, "provider": key.provider,
    } });
    host.audit_event("connection", by, &record)
        .await
        .map_err(store_error)?;
    Ok(json_reply(
        StatusCode::OK,
        &json!({
            "revoked": record["connection_revoked"],
            "message": "its tokens are forgotten (and revoked at the provider, where it has a revocation endpoint); the user's next call that needs them asks them to connect again",
        }),
    ))
}

/// A signed-in user's own connections (`whose`: tenant and principal).
pub async fn my_connections(
    broker: Option<&crate::oauth::Broker>,
    whose: (&str, &str),
) -> Result<Reply, ApiError> {
    let filter = gatehouse_store::ConnectionFilter {
        tenant: Some(whose.0.to_owned()),
        principal: Some(whose.1.to_owned()),
        provider: None,
    };
    connections(broker, filter).await
}

/// A signed-in user revokes their own connection to `provider`; audited, by them.
pub async fn revoke_my_connection(
    host: &Host,
    broker: Option<&crate::oauth::Broker>,
    whose: (&str, &str),
    mut query: Query,
) -> Result<Reply, ApiError> {
    let provider = query
        .take("provider")
        .filter(|p| !p.is_empty())
        .ok_or_else(|| ApiError::bad_request("query parameter `provider` is required"))?;
    query.none()?;
    let broker = broker.ok_or_else(no_oauth)?;
    let key = gatehouse_store::ConnectionKey {
        tenant: whose.0.to_owned(),
        principal: whose.1.to_owned(),
        provider,
    };
    revoke(host, broker, whose.1, key).await
}

fn no_oauth() -> ApiError {
    ApiError::not_found("this gateway keeps no users' connections (no `[oauth]` in its config)")
}

//! The records the store keeps and the errors it answers with: idempotency keys and their
//! claims, approvals and their decisions (who decided, how the caller waits), tasks, a call's
//! record and its audit event, plugin changes, the versions plugins last served. Plain data, shared by the
//! [`Store`](crate::store::Store) trait and both backends.

use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Why the store could not do what was asked. Every variant names the file or the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store cannot be opened (corrupt, unwritable, a newer schema).
    #[error("cannot open the state store {path}: {detail}")]
    Open {
        /// The file.
        path: String,
        /// What went wrong and the fix.
        detail: String,
    },
    /// A read or write failed (disk full, I/O error, the database went away).
    #[error("the state store failed: {0}")]
    Unavailable(String),
    /// No such record.
    #[error("{0} not found")]
    NotFound(String),
    /// The operation is not allowed in the record's current state.
    #[error("{0}")]
    Refused(String),
}

/// What identifies an idempotent call: the same key means the same effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct IdempotencyKey {
    /// Tenant the call runs for.
    pub tenant: String,
    /// The tool, after meta-tool resolution.
    pub tool: String,
    /// The caller's key.
    pub key: String,
}

/// Gate 7's question: may this call run under its key?
#[derive(Debug, Clone)]
pub struct ClaimRequest {
    /// The key.
    pub key: IdempotencyKey,
    /// Hash of the canonical request ([`request_hash`]).
    pub request_hash: String,
    /// The claiming call.
    pub tool_call_id: String,
    /// Until when the claim holds if the call never finishes (a crash); after it the record is
    /// `indeterminate`. Unix ms.
    pub lease_until_ms: u64,
    /// Until when the key is remembered (the capability's dedupe window). Unix ms.
    pub expires_at_ms: u64,
}

/// Gate 7's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    /// The key is new (or its record expired): this call runs, and must record its result.
    Run,
    /// A call with this key and request completed: here is the result it delivered.
    Replay {
        /// The call that ran.
        tool_call_id: String,
        /// The result envelope it delivered, as JSON; `None` when an operator resolved the key
        /// as done (the effect happened, no result was recorded).
        result: Option<String>,
    },
    /// The key was used for a different request.
    Conflict {
        /// The call that holds the key.
        tool_call_id: String,
    },
    /// A call with this key and request is running now.
    InFlight {
        /// The call that holds the key.
        tool_call_id: String,
    },
    /// A call with this key started and never recorded an outcome (the process died): whether
    /// its effect happened is unknown. An operator resolves it; it is never re-run by itself.
    Indeterminate {
        /// The call that held the key.
        tool_call_id: String,
    },
}

/// The state of an idempotency record, as operators see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    /// A call holds the key and is running (or died; see the lease).
    InProgress,
    /// The call completed; its result replays.
    Complete,
    /// The call died before recording an outcome; an operator must resolve it.
    Indeterminate,
}

/// An idempotency record, for operators.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KeyRecord {
    /// The key.
    pub key: IdempotencyKey,
    /// Its state (`in_progress` past its lease is reported as `indeterminate`).
    pub state: KeyState,
    /// The call that holds or held it.
    pub tool_call_id: String,
    /// When it was claimed, unix ms.
    pub created_at_ms: u64,
    /// When it expires, unix ms.
    pub expires_at_ms: u64,
}

/// How an operator resolves an indeterminate key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The effect did not happen: forget the key, so the next call with it runs.
    Release,
    /// The effect happened: later calls with the key get a result saying so, and nothing runs.
    Done,
}

/// The status of an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for an approver.
    Pending,
    /// Approved: the caller's next call with the same request runs, once.
    Approved,
    /// Rejected: the call will not run.
    Rejected,
    /// Approved and run.
    Executed,
}

impl ApprovalStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Executed => "executed",
        }
    }

    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "pending" => Some(Self::Pending),
            "approved" => Some(Self::Approved),
            "rejected" => Some(Self::Rejected),
            "executed" => Some(Self::Executed),
            _ => None,
        }
    }

    /// A status filter as operators write it (`gatehouse approvals list --status`, the admin
    /// API's `?status=`): one of the statuses, or `all` (no filter).
    pub fn parse_filter(text: &str) -> Result<Option<Self>, String> {
        match text {
            "all" => Ok(None),
            other => Self::parse(other).map(Some).ok_or_else(|| {
                format!("status `{other}`: expected pending, approved, rejected, executed or all")
            }),
        }
    }
}

/// A proposed call waiting for (or past) a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approval {
    /// `apr_<hex>`.
    pub id: String,
    /// Tenant of the call.
    pub tenant: String,
    /// The tool.
    pub tool: String,
    /// The call's idempotency key, if it had one.
    pub idempotency_key: Option<String>,
    /// Hash of the canonical request: a retry must be the same request.
    pub request_hash: String,
    /// The proposed call (its `ToolCallEnvelope`, JSON), with its principal chain.
    pub call: Value,
    /// Ids of the principals in the requesting chain.
    pub principals: Vec<String>,
    /// The effective approval mode the call will run at.
    pub mode: String,
    /// Why it needs approval (policy reasons or the capability's approval gate).
    pub reasons: Vec<String>,
    /// Where it stands.
    pub status: ApprovalStatus,
    /// When it was proposed, unix ms.
    pub created_at_ms: u64,
    /// When it stops being valid (undecided, or approved but not run), unix ms.
    pub expires_at_ms: u64,
    /// Who decided.
    pub decided_by: Option<String>,
    /// Why.
    pub decided_reason: Option<String>,
    /// When, unix ms.
    pub decided_at_ms: Option<u64>,
    /// The call that ran it.
    pub executed_by_call: Option<String>,
    /// In what capacity it was decided (`None` while undecided).
    #[serde(default)]
    pub decided_as: Option<DecidedAs>,
    /// How its caller waits for the decision. Default: [`Waiting::Retry`].
    #[serde(default)]
    pub waiting: Waiting,
}

impl Approval {
    /// Whether it is past its expiry at `now_ms` without having run or been rejected.
    pub fn expired(&self, now_ms: u64) -> bool {
        matches!(
            self.status,
            ApprovalStatus::Pending | ApprovalStatus::Approved
        ) && now_ms >= self.expires_at_ms
    }

    /// One line for people: id, state (`expired` once past its expiry), who decided, the
    /// tool, tenant, requesting chain, age and reasons.
    pub fn summary(&self, now_ms: u64) -> String {
        let age = now_ms.saturating_sub(self.created_at_ms) / 1000;
        let state = if self.expired(now_ms) {
            "expired"
        } else {
            self.status.as_str()
        };
        let decided = self
            .decided_by
            .as_deref()
            .map(|by| format!(" by {by}"))
            .unwrap_or_default();
        format!(
            "{}  {state}{decided}  {}  tenant {}  asked by {}  {age}s ago  ({})",
            self.id,
            self.tool,
            self.tenant,
            self.principals.join(" > "),
            self.reasons.join("; ")
        )
    }
}

/// How an approval is found for a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApprovalLookup {
    /// By id (a call without idempotency key resumes with the approval id).
    Id(String),
    /// By the call's key.
    Key(IdempotencyKey),
}

/// How the caller of an approval waits for its decision.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(tag = "on", rename_all = "snake_case")]
pub enum Waiting {
    /// The caller was answered `approval_required` and must call again (the default: an
    /// approval proposed by a call that does not wait).
    #[default]
    Retry,
    /// The caller's request is held open until this time, unix ms, waiting for the decision.
    Held {
        /// Until when it is held, unix ms.
        until_ms: u64,
    },
    /// The caller polls an MCP task that runs the call once the approval is decided.
    Task {
        /// The task, `task_<hex>`.
        id: String,
    },
}

impl Waiting {
    /// The name the `approvals.waiting_on` column keeps: `retry`, `held` or `task`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Held { .. } => "held",
            Self::Task { .. } => "task",
        }
    }
}

/// In what capacity an approval was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedAs {
    /// By an approver (the admin API, the console, the `gatehouse approvals` commands): not a
    /// principal of the requesting chain, unless `[store] allow_self_approval`.
    Approver,
    /// By the calling user, who consented (MCP form elicitation): a principal of the
    /// requesting chain.
    Consent,
    /// By the caller, withdrawing its own proposal (a cancelled task): always a rejection.
    Caller,
}

impl DecidedAs {
    /// The wire name: `approver`, `consent` or `caller`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approver => "approver",
            Self::Consent => "consent",
            Self::Caller => "caller",
        }
    }

    /// The capacity a wire name names; `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "approver" => Some(Self::Approver),
            "consent" => Some(Self::Consent),
            "caller" => Some(Self::Caller),
            _ => None,
        }
    }
}

/// A decision on an approval: an approver's, the calling user's consent, or the caller's
/// withdrawal ([`DecidedAs`]). Built by [`StoreConfig::decision`](crate::StoreConfig::decision),
/// [`consent`](crate::StoreConfig::consent) or [`withdrawal`](crate::StoreConfig::withdrawal).
#[derive(Debug, Clone)]
pub struct Decision {
    /// The approval.
    pub id: String,
    /// Approve (true) or reject.
    pub approve: bool,
    /// Who decides (a principal id).
    pub by: String,
    /// Why.
    pub reason: String,
    /// Now, unix ms.
    pub now_ms: u64,
    /// Whether someone in the requesting chain may decide as an approver.
    pub allow_self_approval: bool,
    /// In what capacity `by` decides: the rules differ ([`DecidedAs`]).
    pub decided_as: DecidedAs,
}

/// Which approvals to list.
#[derive(Debug, Clone, Default)]
pub struct ApprovalFilter {
    /// Only this status.
    pub status: Option<ApprovalStatus>,
    /// Only this tenant.
    pub tenant: Option<String>,
    /// At most this many, newest first. Default (0): 100.
    pub limit: usize,
}

/// Where an MCP task stands (the MCP `tasks` utility's statuses).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    /// Running, or waiting on something the client need not act on (an approver).
    Working,
    /// Waiting for the client (its user's consent, say).
    InputRequired,
    /// Done: its result is the call's.
    Completed,
    /// Ended without running to completion (a rejection, an expired approval, an error).
    Failed,
    /// Cancelled by the client.
    Cancelled,
}

impl TaskStatus {
    /// The wire name: `working`, `input_required`, `completed`, `failed` or `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Working => "working",
            Self::InputRequired => "input_required",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// The status a wire name names; `None` for any other text.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "working" => Some(Self::Working),
            "input_required" => Some(Self::InputRequired),
            "completed" => Some(Self::Completed),
            "failed" => Some(Self::Failed),
            "cancelled" => Some(Self::Cancelled),
            _ => None,
        }
    }

    /// Whether the task has ended (`completed`, `failed`, `cancelled`): its status does not
    /// change again.
    pub fn is_terminal(self) -> bool {
        match self {
            Self::Completed | Self::Failed | Self::Cancelled => true,
            Self::Working | Self::InputRequired => false,
        }
    }
}

/// An MCP task: a tool call that waits (on an approval, say) while its client polls it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// `task_<32 hex>` ([`task_id`]), made by the caller.
    pub id: String,
    /// Tenant of the call.
    pub tenant: String,
    /// The id of the principal that made it: only it may see the task.
    pub principal: String,
    /// The tool, as the client called it.
    pub tool: String,
    /// The approval it waits on, if any.
    pub approval_id: Option<String>,
    /// The call it runs (its `ToolCallEnvelope`, JSON).
    pub call: Value,
    /// Where it stands.
    pub status: TaskStatus,
    /// A line for people about its status.
    pub status_message: Option<String>,
    /// What it delivered (JSON), once terminal.
    pub result: Option<Value>,
    /// When it was made, unix ms.
    pub created_at_ms: u64,
    /// When its status last changed, unix ms.
    pub updated_at_ms: u64,
    /// When it is forgotten ([`Store::prune`](crate::Store::prune)), unix ms.
    pub expires_at_ms: u64,
}

/// A conditional change of a task's status ([`Store::update_task`](crate::Store::update_task)):
/// applied only if the task's current status is one of `from`. The status, message and
/// result are set as given (`None` clears).
#[derive(Debug, Clone)]
pub struct TaskUpdate {
    /// The task.
    pub id: String,
    /// The statuses it may be in for the change to apply (empty: none, nothing applies).
    pub from: Vec<TaskStatus>,
    /// Its new status.
    pub status: TaskStatus,
    /// Its new status message.
    pub status_message: Option<String>,
    /// Its result (JSON), for a terminal status.
    pub result: Option<Value>,
    /// Now, unix ms: the task's `updated_at_ms`.
    pub now_ms: u64,
}

/// Which tasks to list ([`Store::tasks`](crate::Store::tasks)), newest first.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only this tenant's.
    pub tenant: Option<String>,
    /// Only those this principal made.
    pub principal: Option<String>,
    /// Only tasks in one of these statuses (empty: any).
    pub statuses: Vec<TaskStatus>,
    /// Only those waiting on this approval.
    pub approval_id: Option<String>,
    /// At most this many. Default (0): 100.
    pub limit: usize,
    /// A cursor: only tasks whose `(created_at_ms, id)` is strictly before this one, in the
    /// list's order (newest first, ties by id descending). The last task of a page, as the
    /// next page's cursor, pages through them all.
    pub before: Option<(u64, String)>,
}

/// Everything one call leaves behind, written in one transaction (gate 10).
#[derive(Debug, Clone)]
pub struct CallRecord {
    /// The audit entry.
    pub audit: AuditEvent,
    /// The key this call claimed, and the result to replay for it.
    pub completes: Option<(IdempotencyKey, String)>,
    /// The key this call claimed but that nothing ran under (the call could not start): the
    /// key is forgotten, so a retry runs.
    pub releases: Option<IdempotencyKey>,
    /// The approval this call executed.
    pub executes: Option<String>,
    /// Whether the record must be durable before this returns (write-class calls, and calls
    /// that add a label to their session). Otherwise it is queued and this returns at once.
    pub durable: bool,
    /// The call's session, and the labels its result adds to it.
    pub session: Option<crate::sessions::SessionWrite>,
}

/// What an audit entry says: everything but its place in the chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuditEvent {
    /// `call`, `approval` (a decision), `approval_refused` (a decision the store refused: the
    /// approval was decided already, expired, or the decider may not decide it), `operator`
    /// (an operator's resolution of a key) or `plugin` (a plugin installed, rolled back or
    /// reconfigured on a running host).
    pub kind: String,
    /// The call it is about.
    pub tool_call_id: Option<String>,
    /// Tenant.
    pub tenant: Option<String>,
    /// The acting principal (for `prior-actions`): the last of a call's chain, or the approver.
    pub principal: Option<String>,
    /// The tool.
    pub tool: Option<String>,
    /// The outcome code.
    pub outcome: Option<String>,
    /// The record itself: JSON text, hashed as stored.
    pub record: String,
    /// When, unix ms.
    pub at_ms: u64,
}

impl AuditEvent {
    /// The optional columns, in the order the chain's hash takes them: the call, tenant,
    /// principal, tool and outcome.
    pub fn ids(&self) -> [Option<&str>; 5] {
        [
            &self.tool_call_id,
            &self.tenant,
            &self.principal,
            &self.tool,
            &self.outcome,
        ]
        .map(Option::as_deref)
    }
}

/// A change an operator made to the serving plugins at run time (the admin API), kept so a
/// restarted gateway serves what the running one did: table `plugin_changes`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum PluginChange {
    /// A signed adapter or policy module was installed: its bytes, base64 (verified again,
    /// signature and trust, when applied).
    Install {
        /// The plugin id.
        plugin: String,
        /// The signed component, base64.
        component: String,
        /// Where it was fetched from (`oci://...@sha256:`), if from a registry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
        /// When, unix ms.
        at_ms: u64,
    },
    /// A policy module was rolled back.
    Rollback {
        /// The module id.
        plugin: String,
        /// When, unix ms.
        at_ms: u64,
    },
    /// Every shadow binding of a policy module was promoted to enforcing.
    Promote {
        /// The module id.
        plugin: String,
        /// When, unix ms.
        at_ms: u64,
    },
    /// The config of every binding of a policy module was replaced.
    SetConfig {
        /// The module id.
        plugin: String,
        /// The config.
        config: Value,
        /// When, unix ms.
        at_ms: u64,
    },
}

impl PluginChange {
    /// `install`, `rollback`, `set_config` or `promote`, as the audit log's plugin entries say.
    pub fn action(&self) -> &'static str {
        match self {
            Self::Install { .. } => "install",
            Self::Rollback { .. } => "rollback",
            Self::SetConfig { .. } => "set_config",
            Self::Promote { .. } => "promote",
        }
    }

    /// The plugin it changed.
    pub fn plugin(&self) -> &str {
        match self {
            Self::Install { plugin, .. }
            | Self::Rollback { plugin, .. }
            | Self::SetConfig { plugin, .. }
            | Self::Promote { plugin, .. } => plugin,
        }
    }
}

/// The version of a plugin that last started serving, by kind and id: the floor a later start,
/// reload or followed tag may not go below unless the operator forces it (table
/// `served_versions`). Written whenever a plugin starts serving ([`Store::record_served`]).
///
/// [`Store::record_served`]: crate::Store::record_served
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServedVersion {
    /// `adapter` or `policy` (the plugin's WIT world).
    pub kind: String,
    /// The plugin id.
    pub plugin: String,
    /// Its version (semver, as manifests require).
    pub version: String,
    /// `sha256:<hex>` of the unsigned component.
    pub digest: String,
    /// Where it was fetched from (`oci://...@sha256:`), if from a registry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// When it started serving, unix ms.
    pub at_ms: u64,
}

/// How a version came to serve, which decides whether it may lower the recorded one
/// ([`Store::record_served`](crate::Store::record_served)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServedAs {
    /// An install (at start, on reload, through the admin API, a watched directory or a
    /// followed tag), which the host refuses below the recorded version: it never lowers the
    /// record. A lower one can only come from another gateway that recorded a higher version
    /// meanwhile, which stands.
    Install,
    /// An operator's downgrade: a policy rolled back, or a downgrade forced at start
    /// (`--allow-downgrade`). It replaces the record, lower or not.
    Downgrade,
}

/// The current time, unix ms.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A fresh approval id, `apr_<hex>`.
pub fn approval_id() -> String {
    format!("apr_{}", gatehouse_core::ids::random_hex(8))
}

/// A fresh task id, `task_<32 hex>` (128 random bits: a task id is all a client needs to poll
/// the task, so it must not be guessed).
pub fn task_id() -> String {
    format!("task_{}", gatehouse_core::ids::random_hex(16))
}

/// A pending proposal of `t.pay` for tenant `acme`, asked by `usr_alice` through `agent_a`,
/// valid for a minute from now, under idempotency key `key` (for the store's tests).
#[cfg(test)]
pub(crate) fn proposal(id: &str, key: Option<&str>) -> Approval {
    Approval {
        id: id.to_owned(),
        tenant: "acme".to_owned(),
        tool: "t.pay".to_owned(),
        idempotency_key: key.map(str::to_owned),
        request_hash: "h".to_owned(),
        call: serde_json::json!({ "tool_call_id": "call_1" }),
        principals: vec!["usr_alice".to_owned(), "agent_a".to_owned()],
        mode: "delegated".to_owned(),
        reasons: vec!["R: why".to_owned()],
        status: ApprovalStatus::Pending,
        created_at_ms: now_ms(),
        expires_at_ms: now_ms() + 60_000,
        decided_by: None,
        decided_reason: None,
        decided_at_ms: None,
        executed_by_call: None,
        decided_as: None,
        waiting: Waiting::Retry,
    }
}

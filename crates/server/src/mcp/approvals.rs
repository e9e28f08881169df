//! Approvals through the protocol: how a call paused for approval (`APPROVAL_REQUIRED`) reaches
//! the person behind the agent, and how it resumes, in every protocol version gatehouse serves.
//!
//! The pipeline proposes the call as it always has (gate 6). What the client gets back depends
//! on what it declared it can do, checked in this order:
//!
//! | client | what it gets | how the call resumes |
//! |---|---|---|
//! | asked for a task (2025-11-25 `params.task`, or the 2026-07-28 tasks extension) | a task, `working` while it waits ([`super::tasks`]) | the gateway runs it when the approval is decided |
//! | 2026-07-28, form elicitation, the effective mode in `[mcp] consent_modes` | `InputRequiredResult` asking the user's consent in a form | the retry carries the answer: consent runs the call, a decline rejects it |
//! | 2026-07-28, URL elicitation | `InputRequiredResult`: a URL-mode elicitation of the approval's console page and a signed `requestState` | the retry waits up to `[mcp] approval_hold_ms` for the decision, then runs the call once, or answers the same way again |
//! | 2025-11-25, URL elicitation declared at `initialize` | the console page as an `elicitation/create` on the response's event stream, the request held up to `approval_hold_ms` ([`super::legacy`]) | the held request runs the call once approved (after `notifications/elicitation/complete`), or ends with the URL elicitation error (-32042) |
//! | anything else | the paused result; its text names the console page and how to resume | call again with the same arguments and idempotency key |
//!
//! A `requestState` is sealed by the gateway (HMAC-SHA256, rmcp's [`RequestStateCodec`]) over
//! the approval id, and bound (as associated data, so it verifies only for the same binding) to
//! the tenant, the principal, the tool as called, a digest of the arguments as sent and the
//! idempotency key sent in `_meta`, with the approval's expiry as its own. A forged, altered or expired state, or one sent by another
//! principal or tenant, for other arguments or under another key, is refused as invalid params
//! and nothing runs. (Gate 6 holds the same line for every path: an approval runs only its own
//! proposal, under its own key.)
//!
//! Exactly-once holds across every path because every path runs the call through the pipeline
//! under the same approval and idempotency key (gate 7 runs it once; later paths replay it).
//! This departs from docs/architecture.md section 8 ("approval is permission, the caller's
//! retry is the execution"): a held request or a task runs the approved call itself, without
//! waiting for a retry that may never come; a retry after that replays the stored result.

use std::time::Duration;

use gatehouse_core::canonical::request_hash;
use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_core::model::ApprovalMode;
use gatehouse_store::Approval;
use rmcp::model::{
    InputRequest, InputRequests, InputRequiredResult, JsonObject, RequestStateCodec,
    RequestStateError, SealOptions,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::caller::Caller;

/// The key of the approval's URL elicitation in an `InputRequiredResult`'s `inputRequests`.
pub const APPROVAL_INPUT: &str = "gatehouse_approval";
/// The key of the consent form in an `InputRequiredResult`'s `inputRequests`.
pub const CONSENT_INPUT: &str = "gatehouse_consent";

/// `_meta` key of the client capabilities a 2026-07-28 request carries.
pub const CLIENT_CAPABILITIES_META: &str = "io.modelcontextprotocol/clientCapabilities";

/// What ties a sealed state to its caller and request (associated data, never in the token).
const BINDING: &[u8] = b"gatehouse.approval-state.v2";

/// How approvals reach clients: the `requestState` seal, how long a retry is held, and which
/// modes the caller's user may consent to.
pub struct Approvals {
    codec: RequestStateCodec,
    hold: Duration,
    consent_modes: Vec<ApprovalMode>,
}

impl std::fmt::Debug for Approvals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Approvals")
            .field("hold", &self.hold)
            .field("consent_modes", &self.consent_modes)
            .finish_non_exhaustive()
    }
}

/// What a client declared it can do: be asked (elicitation, sampling, roots) and follow tasks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientCan {
    /// URL-mode elicitation.
    pub url: bool,
    /// Form-mode elicitation.
    pub form: bool,
    /// The tasks extension (2026-07-28).
    pub tasks: bool,
    /// Sampling.
    pub sampling: bool,
    /// Roots.
    pub roots: bool,
}

impl ClientCan {
    /// From client capabilities as JSON (`initialize`'s, or a 2026-07-28 request's
    /// `_meta["io.modelcontextprotocol/clientCapabilities"]`). An `elicitation` object without
    /// modes means form mode (2025-11-25).
    pub fn from_capabilities(capabilities: Option<&Value>) -> Self {
        let Some(capabilities) = capabilities else {
            return Self::default();
        };
        let elicitation = capabilities.get("elicitation").and_then(Value::as_object);
        Self {
            url: elicitation.is_some_and(|e| e.contains_key("url")),
            form: elicitation.is_some_and(|e| e.is_empty() || e.contains_key("form")),
            tasks: capabilities
                .pointer("/extensions/io.modelcontextprotocol~1tasks")
                .is_some(),
            sampling: capabilities.get("sampling").is_some_and(Value::is_object),
            roots: capabilities.get("roots").is_some_and(Value::is_object),
        }
    }

    /// What the host may ask of this client during a call.
    pub fn asks(self) -> gatehouse_host::relay::CallerCan {
        gatehouse_host::relay::CallerCan {
            elicit_form: self.form,
            elicit_url: self.url,
            sample: self.sampling,
            roots: self.roots,
        }
    }
}

/// A request as the client sent it, as far as a `requestState` is bound to it: the tool as
/// called, the arguments (the key argument among them, if the key came so) and the key in
/// `_meta`.
#[derive(Debug, Clone, Copy)]
pub struct Sent<'a> {
    /// The tool, as called (an alias included).
    pub tool: &'a str,
    /// The arguments, as sent.
    pub args: &'a JsonObject,
    /// `_meta["gatehouse/idempotency_key"]`, if sent.
    pub key: Option<&'a str>,
}

/// What a sealed `requestState` resumes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Resumes {
    /// A call paused for approval: its approval.
    Approval {
        /// The approval's id.
        approval: String,
    },
    /// A call held in this gateway while its adapter waits for the client's answers
    /// ([`super::v2026_07_28::held`]), at this round (each round's state differs).
    Held {
        /// The held call's id.
        held: String,
        /// How many rounds it has had.
        round: u32,
    },
}

/// Why a `requestState` is refused; nothing runs.
#[derive(Debug, thiserror::Error)]
pub enum StateRefusal {
    /// Past its expiry (the approval's).
    #[error(
        "the requestState has expired with its approval; call the tool again without it to propose the call again"
    )]
    Expired,
    /// Forged, altered, or issued to another caller or for another request.
    #[error(
        "the requestState does not verify: it was altered, or issued to another caller or for another tool or other arguments; nothing ran"
    )]
    Invalid,
}

impl Approvals {
    /// With `key` (at least 32 bytes) sealing states, retries held up to `hold`, and consent
    /// allowed for `consent_modes` (never `destructive`: the config refuses it).
    pub fn new(
        key: &[u8],
        hold: Duration,
        consent_modes: Vec<ApprovalMode>,
    ) -> Result<Self, RequestStateError> {
        Ok(Self {
            codec: RequestStateCodec::try_new(key.to_vec())?,
            hold,
            consent_modes,
        })
    }

    /// How long a retry waits for a pending approval's decision.
    pub fn hold(&self) -> Duration {
        self.hold
    }

    /// Whether the caller's user may consent to a paused call of this result: its effective
    /// mode is one the operator listed, and it is not `destructive`.
    pub fn consent_applies(&self, result: &ToolResultEnvelope) -> bool {
        result
            .approval_mode_effective
            .is_some_and(|mode| self.may_consent(mode))
    }

    /// Whether the calling user may consent to a call at `mode`: one the operator listed, never
    /// `destructive`.
    pub fn may_consent(&self, mode: ApprovalMode) -> bool {
        mode != ApprovalMode::Destructive && self.consent_modes.contains(&mode)
    }

    /// A state for `caller`'s request `sent`, resuming `approval`.
    pub fn seal(
        &self,
        caller: &Caller,
        sent: &Sent<'_>,
        approval: &Approval,
        now_ms: u64,
    ) -> String {
        let ttl = Duration::from_millis(approval.expires_at_ms.saturating_sub(now_ms).max(1_000));
        let resumes = Resumes::Approval {
            approval: approval.id.clone(),
        };
        self.seal_state(caller, sent, &resumes, ttl)
    }

    /// A state for `caller`'s request `sent`, resuming what `resumes` names, valid for `ttl`.
    pub fn seal_state(
        &self,
        caller: &Caller,
        sent: &Sent<'_>,
        resumes: &Resumes,
        ttl: Duration,
    ) -> String {
        let binding = binding(caller, sent);
        let options = SealOptions::new().associated_data(&binding).ttl(ttl);
        match self.codec.seal_json_with(resumes, &options) {
            Ok(sealed) => sealed,
            // Strings and a number always serialize.
            Err(error) => unreachable!("a request state does not serialize: {error}"),
        }
    }

    /// What a state resumes, if it verifies for this caller and request.
    pub fn open(
        &self,
        sealed: &str,
        caller: &Caller,
        sent: &Sent<'_>,
    ) -> Result<Resumes, StateRefusal> {
        let binding = binding(caller, sent);
        match self.codec.open_json_with::<Resumes>(sealed, &binding) {
            Ok(resumes) => Ok(resumes),
            Err(RequestStateError::Expired) => Err(StateRefusal::Expired),
            Err(_) => Err(StateRefusal::Invalid),
        }
    }

    /// The `InputRequiredResult` of a paused call: `inputs` (none when the client already
    /// answered them) and the sealed state.
    pub fn input_required(inputs: Option<InputRequests>, state: String) -> InputRequiredResult {
        InputRequiredResult::new(inputs, Some(state))
    }
}

/// The key that signs `requestState`s: read from `path`, or made there if the file does not
/// exist ([`gatehouse_core::secret::key_file`]); without a path, made for this process alone.
pub fn state_key(path: Option<&std::path::Path>) -> Result<Vec<u8>, String> {
    let existed = path.is_some_and(std::path::Path::exists);
    let key = gatehouse_core::secret::key_file(path, "`[mcp] request_state_key_file`")?;
    if let Some(path) = path.filter(|_| !existed) {
        tracing::info!(path = %path.display(), "made a new key for request states");
    }
    Ok(key)
}

/// The URL-mode elicitation of an approval's console page, as one input request: its
/// `elicitationId` is the approval's id, as at 2025-11-25.
pub fn url_request(url: &str, tool: &str, approval_id: &str) -> InputRequests {
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "elicitationId": approval_id,
            "message": url_message(tool, approval_id),
            "url": url,
        },
    });
    one(APPROVAL_INPUT, request)
}

/// What a URL elicitation of an approval tells the user.
pub fn url_message(tool: &str, approval_id: &str) -> String {
    format!(
        "`{tool}` needs a person's approval before it runs (approval {approval_id}). Open the \
         link to see it; an approver decides there, and the call then runs once."
    )
}

/// The form asking the calling user's consent: the tool, its arguments (as approvers see
/// them), and the mode it would run at.
pub fn consent_request(tool: &str, args: &Value, mode: ApprovalMode) -> InputRequests {
    let request = json!({
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": consent_message(tool, args, mode),
            "requestedSchema": consent_schema(),
        },
    });
    one(CONSENT_INPUT, request)
}

/// What the consent form says.
pub fn consent_message(tool: &str, args: &Value, mode: ApprovalMode) -> String {
    format!(
        "Allow `{tool}` to run at approval mode `{mode}` with these arguments?\n{}",
        serde_json::to_string_pretty(args).unwrap_or_default()
    )
}

/// The consent form's schema: one boolean.
pub fn consent_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "approve": {
                "type": "boolean",
                "title": "Allow this call",
                "description": "Allow the call to run once, as shown.",
            },
        },
        "required": ["approve"],
    })
}

/// The user's answer to the consent form: `Some(true)` to allow, `Some(false)` to decline,
/// `None` for no decision (dismissed, or not an answer).
pub fn consent_answer(response: &Value) -> Option<bool> {
    match response.get("action").and_then(Value::as_str) {
        Some("accept") => Some(
            response
                .pointer("/content/approve")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        ),
        Some("decline") => Some(false),
        _ => None,
    }
}

/// `request` (a JSON `elicitation/create`) as the one input request under `key`.
pub(super) fn one(key: &str, request: Value) -> InputRequests {
    let mut inputs = InputRequests::new();
    match serde_json::from_value::<InputRequest>(request) {
        Ok(request) => {
            inputs.insert(key.to_owned(), request);
        }
        // The JSON above is a valid `elicitation/create`; rmcp reads every such request.
        Err(error) => unreachable!("an elicitation request does not parse: {error}"),
    }
    inputs
}

/// The associated data of a state: who called, what, with which arguments and key.
fn binding(caller: &Caller, sent: &Sent<'_>) -> Vec<u8> {
    let digest = request_hash(sent.tool, &Value::Object(sent.args.clone()), None);
    let mut binding = BINDING.to_vec();
    // The key a request carries in `_meta` (`None` and an empty key cannot both be sent: an
    // empty key is refused before any state is sealed).
    for part in [
        caller.tenant.as_str(),
        caller.principal.id.as_str(),
        sent.tool,
        &digest,
        sent.key.unwrap_or_default(),
    ] {
        binding.push(0);
        binding.extend_from_slice(&(part.len() as u64).to_le_bytes());
        binding.extend_from_slice(part.as_bytes());
    }
    binding
}

#[cfg(test)]
mod tests {
    use gatehouse_store::ApprovalStatus;

    use super::*;

    fn approvals() -> Approvals {
        Approvals::new(&[7; 32], Duration::from_secs(1), Vec::new()).unwrap()
    }

    fn caller(tenant: &str, principal: &str) -> Caller {
        super::super::caller::caller(tenant, principal.to_owned())
    }

    fn approval(expires_at_ms: u64) -> Approval {
        Approval {
            id: "apr_1".into(),
            tenant: "acme".into(),
            tool: "t".into(),
            idempotency_key: None,
            request_hash: String::new(),
            call: Value::Null,
            principals: vec!["agent".into()],
            mode: "network".into(),
            reasons: Vec::new(),
            status: ApprovalStatus::Pending,
            created_at_ms: 0,
            expires_at_ms,
            decided_by: None,
            decided_reason: None,
            decided_at_ms: None,
            executed_by_call: None,
            waiting: gatehouse_store::Waiting::Retry,
            decided_as: None,
        }
    }

    fn sent<'a>(tool: &'a str, args: &'a JsonObject, key: Option<&'a str>) -> Sent<'a> {
        Sent { tool, args, key }
    }

    fn args(n: i64) -> JsonObject {
        let Value::Object(args) = json!({ "amount": n }) else {
            unreachable!()
        };
        args
    }

    #[test]
    fn a_state_opens_only_for_its_caller_tool_and_arguments() {
        let approvals = approvals();
        let now = gatehouse_store::now_ms();
        let one = args(1);
        let sent = sent("t", &one, Some("k1"));
        let sealed = approvals.seal(
            &caller("acme", "agent"),
            &sent,
            &approval(now + 60_000),
            now,
        );
        assert_eq!(
            approvals
                .open(&sealed, &caller("acme", "agent"), &sent)
                .unwrap(),
            Resumes::Approval {
                approval: "apr_1".to_owned()
            }
        );
        let two = args(2);
        for (who, tool, args, key) in [
            (caller("acme", "mallory"), "t", &one, Some("k1")),
            (caller("other", "agent"), "t", &one, Some("k1")),
            (caller("acme", "agent"), "u", &one, Some("k1")),
            (caller("acme", "agent"), "t", &two, Some("k1")),
            // The same request under another key, or none: another effect, not this one.
            (caller("acme", "agent"), "t", &one, Some("k2")),
            (caller("acme", "agent"), "t", &one, None),
        ] {
            assert!(matches!(
                approvals.open(&sealed, &who, &Sent { tool, args, key }),
                Err(StateRefusal::Invalid)
            ));
        }
    }

    #[test]
    fn an_altered_byte_or_another_key_fails_verification() {
        let approvals = approvals();
        let now = gatehouse_store::now_ms();
        let who = caller("acme", "agent");
        let one = args(1);
        let sent = sent("t", &one, None);
        let sealed = approvals.seal(&who, &sent, &approval(now + 60_000), now);
        for index in 0..sealed.len() {
            let mut bytes = sealed.clone().into_bytes();
            bytes[index] = if bytes[index] == b'A' { b'B' } else { b'A' };
            let altered = String::from_utf8(bytes).unwrap();
            if altered == sealed {
                continue;
            }
            assert!(
                approvals.open(&altered, &who, &sent).is_err(),
                "byte {index} altered still verifies"
            );
        }
        let other = Approvals::new(&[8; 32], Duration::from_secs(1), Vec::new()).unwrap();
        assert!(matches!(
            other.open(&sealed, &who, &sent),
            Err(StateRefusal::Invalid)
        ));
    }

    #[test]
    fn a_state_expires_with_its_approval() {
        let approvals = approvals();
        let who = caller("acme", "agent");
        // A state of an approval already past its expiry gets the shortest life, one second.
        let now = gatehouse_store::now_ms();
        let one = args(1);
        let sent = sent("t", &one, None);
        let sealed = approvals.seal(&who, &sent, &approval(now - 60_000), now);
        assert!(approvals.open(&sealed, &who, &sent).is_ok());
        std::thread::sleep(Duration::from_millis(1_100));
        assert!(matches!(
            approvals.open(&sealed, &who, &sent),
            Err(StateRefusal::Expired)
        ));
    }

    #[test]
    fn capabilities_read_as_declared() {
        assert_eq!(
            ClientCan::from_capabilities(Some(&json!({"elicitation": {"form": {}, "url": {}}}))),
            ClientCan {
                url: true,
                form: true,
                ..ClientCan::default()
            }
        );
        assert_eq!(
            ClientCan::from_capabilities(Some(&json!({"elicitation": {}}))),
            ClientCan {
                form: true,
                ..ClientCan::default()
            }
        );
        assert_eq!(
            ClientCan::from_capabilities(Some(
                &json!({"extensions": {"io.modelcontextprotocol/tasks": {}}})
            )),
            ClientCan {
                tasks: true,
                ..ClientCan::default()
            }
        );
        assert_eq!(
            ClientCan::from_capabilities(Some(
                &json!({"sampling": {}, "roots": {"listChanged": true}, "elicitation": "no"})
            )),
            ClientCan {
                sampling: true,
                roots: true,
                ..ClientCan::default()
            }
        );
        assert_eq!(ClientCan::from_capabilities(None), ClientCan::default());
    }

    #[test]
    fn consent_answers() {
        assert_eq!(
            consent_answer(&json!({"action": "accept", "content": {"approve": true}})),
            Some(true)
        );
        assert_eq!(
            consent_answer(&json!({"action": "accept", "content": {"approve": false}})),
            Some(false)
        );
        assert_eq!(consent_answer(&json!({"action": "decline"})), Some(false));
        assert_eq!(consent_answer(&json!({"action": "cancel"})), None);
        assert_eq!(consent_answer(&json!("nonsense")), None);
    }

    #[test]
    fn the_input_requests_parse_as_rmcp_reads_them() {
        let url = url_request("https://console.example/#/approvals/apr_1", "t", "apr_1");
        let wire = serde_json::to_value(&url).unwrap();
        assert_eq!(wire[APPROVAL_INPUT]["params"]["mode"], "url");
        assert_eq!(wire[APPROVAL_INPUT]["params"]["elicitationId"], "apr_1");
        let form = consent_request("t", &json!({"a": 1}), ApprovalMode::Delegated);
        let wire = serde_json::to_value(&form).unwrap();
        assert_eq!(wire[CONSENT_INPUT]["params"]["mode"], "form");
        assert_eq!(
            wire[CONSENT_INPUT]["params"]["requestedSchema"]["required"][0],
            "approve"
        );
    }
}

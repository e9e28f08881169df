//! Cedar rules over gatehouse calls: one entity model for the generic policy module
//! (`plugins/cedar`, in the sandbox) and for `gatehouse policy pack | test` (natively).
//!
//! # The entity model
//! - **principal**: `Caller::"<id>"`, the last link of the principal chain, `in Tenant::"<t>"`;
//!   attributes `tenant`, `kind` (`user`, `agent`, `service`), `chain` (every link's id), and
//!   `roles` and `groups`: the claims gatehouse admitted when it identified the caller (from a
//!   JWT, the claims `[mcp.jwt] roles_claim` and `groups_claim` name; from an API key, its
//!   entry's `roles` and `groups`).
//! - **action**: one action per tool, `Action::"<adapter>.<capability>"`, each `in
//!   Action::"call"`: a rule for every tool says `action in Action::"call"`, a rule for one
//!   tool says `action == Action::"refunds.issue"`. One action per tool is what lets the schema
//!   type `context.args` from that tool's input schema (a departure from the issue's single
//!   `call` action, which could only type the arguments every tool shares).
//! - **resource**: `Tool::"<adapter>.<capability>"`, `in Adapter::"<adapter>"`; attributes
//!   `adapter`, `capability`, `class` (capability_class, e.g. `act`), `max_mode` (the declared
//!   maximum approval mode) and `annotations` (the MCP hints the manifest sets:
//!   `read_only`, `destructive`, `idempotent`, `open_world`), `produces` and `sends` (the
//!   labels its results carry and what it can do with data, as its manifest and the
//!   operator's `[[sessions.label]]` give them: `resource.sends.contains("external")`).
//! - **context**: `args` (typed from the input schema: `integer` is `Long`, `number` is
//!   `decimal`, objects are records, arrays sets; an argument of no such type is left out),
//!   `mode` (the call's approval mode as earlier policies left it), `now` (host time, ms since
//!   the epoch), `hour` (0-23, UTC), `weekday` (1 = Monday ... 7 = Sunday, UTC),
//!   `prior_actions`, `data_classification` and `skills` (the names of the skills resolved for
//!   the call), and `session`: the caller's session, `session.labels` (every label it holds:
//!   `private`, `untrusted`, `pii:email`...) and `session.tools` (its latest actions, oldest
//!   first, as `prior_actions`); `protocol` (`mcp`, `a2a` or `direct`: how the call reached
//!   the gateway) and, for a call a peer made on another call's behalf, `delegated_by` (that
//!   call's id: `context has delegated_by`; the principal's `chain` then starts with that
//!   call's principals).
//!
//! # Verdicts
//! - a matching `forbid` denies; its `@id` is the reason's code and its `@reason` the message;
//! - a matching `permit` allows, unless an annotation says more:
//!   - `@approval("required")`: approval is required;
//!   - `@approval("<mode>")` (`read_only` ... `destructive`): the call runs at that approval
//!     mode, which may only lower it; a mode above the tool's declared maximum denies;
//!   - `@redact("/ptr, /other")`: redact those JSON pointers of the result;
//!   - `@mask_pii("email, phone")`: mask those kinds of personal data in the result;
//!   - `@evidence("...")`: an evidence reference for the decision record;
//! - a rule that fails to evaluate (an attribute a call lacks) denies if it is a `forbid`
//!   (fail closed) and is skipped if it is a `permit`;
//! - nothing matches: abstain.
//!
//! Every rule that matched is named in the reasons, with its `@id`.

pub mod check;
mod request;
pub mod schema;

use std::collections::{HashMap, HashSet};
use std::str::FromStr;

use cedar_policy::{
    ActionConstraint, Authorizer, Decision, Effect, Entities, Entity, EntityUid, Policy, PolicySet,
    Request, ResourceConstraint, RestrictedExpression,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The approval modes, lowest first, as gatehouse spells them.
pub const MODES: [&str; 5] = [
    "read_only",
    "local_write",
    "network",
    "delegated",
    "destructive",
];

/// The position of `mode` in [`MODES`].
pub fn mode_rank(mode: &str) -> Option<usize> {
    MODES.iter().position(|m| *m == mode)
}

/// What a rule set knows of one tool when it is packed: the resource's attributes and the
/// type of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    /// `<adapter id>.<capability id>`.
    pub name: String,
    /// The adapter id.
    pub adapter: String,
    /// The capability id.
    pub capability: String,
    /// capability_class, e.g. `act`.
    pub class: String,
    /// The declared maximum approval mode, e.g. `network`.
    pub max_mode: String,
    /// The capability's input JSON Schema.
    #[serde(default)]
    pub input_schema: Value,
    /// The MCP hints the manifest sets, by Cedar name (`read_only`, `destructive`,
    /// `idempotent`, `open_world`).
    #[serde(default)]
    pub annotations: HashMap<String, bool>,
    /// The labels its results carry (its manifest's `produces` and the operator's).
    #[serde(default)]
    pub produces: Vec<String>,
    /// What it can do with data (`external`: its manifest's `sends` and the operator's).
    #[serde(default)]
    pub sends: Vec<String>,
}

/// One link of the principal chain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Principal {
    /// `user`, `agent` or `service`.
    pub kind: String,
    /// Its id.
    pub id: String,
}

/// One call, as the rules see it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Call {
    /// `<adapter id>.<capability id>`.
    pub tool: String,
    /// The adapter id.
    pub adapter: String,
    /// The capability id.
    pub capability: String,
    /// capability_class.
    pub class: String,
    /// The declared maximum approval mode.
    pub max_mode: String,
    /// The call's approval mode as earlier policies left it.
    pub mode: String,
    /// The arguments.
    pub args: Value,
    /// The tenant.
    pub tenant: String,
    /// The principal chain, the caller last.
    #[serde(default)]
    pub principals: Vec<Principal>,
    /// Host time, milliseconds since the epoch.
    #[serde(default)]
    pub now_unix_ms: u64,
    /// The session's latest tools, oldest first.
    #[serde(default)]
    pub prior_actions: Vec<String>,
    /// Data classifications touched in the session: its labels.
    #[serde(default)]
    pub data_classification: Vec<String>,
    /// The caller's admitted roles.
    #[serde(default)]
    pub roles: Vec<String>,
    /// The caller's admitted groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// The names of the skills resolved for the call.
    #[serde(default)]
    pub skills: Vec<String>,
    /// How the call reached the gateway: `mcp`, `a2a` or `direct` (the default).
    #[serde(default = "direct")]
    pub protocol: String,
    /// The call this one was made on behalf of (a peer called back with its delegation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delegated_by: Option<String>,
}

fn direct() -> String {
    "direct".to_owned()
}

/// The verdict of a rule set on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A permit matched.
    Allow,
    /// A forbid matched (or a rule could not be evaluated or applied).
    Deny,
    /// A permit with `@approval("required")` matched.
    RequireApproval,
    /// No rule matched.
    Abstain,
}

/// One reason: a rule's `@id` and what it says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    /// The rule's `@id` (or Cedar's `policyN`), or a code of the module's own.
    pub code: String,
    /// The rule's `@reason`, or what happened.
    pub message: String,
}

/// What a rule set decided, with the obligations of the permits that matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    /// The verdict.
    pub verdict: Verdict,
    /// The approval mode a permit lowered the call to.
    pub effective_mode: Option<String>,
    /// Every rule that matched.
    pub reasons: Vec<Reason>,
    /// `@evidence` of the matching permits.
    pub evidence: Vec<String>,
    /// `@redact` pointers of the matching permits.
    pub redact: Vec<String>,
    /// `@mask_pii` kinds of the matching permits.
    pub mask_pii: Vec<String>,
}

impl Outcome {
    fn deny(code: &str, message: String) -> Self {
        Self {
            verdict: Verdict::Deny,
            effective_mode: None,
            reasons: vec![Reason {
                code: code.to_owned(),
                message,
            }],
            evidence: Vec::new(),
            redact: Vec::new(),
            mask_pii: Vec::new(),
        }
    }
}

/// The input of the generic module's initializer, which `gatehouse policy pack` runs once:
/// the rules' text and the tools they were validated against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Packed {
    /// The Cedar text.
    pub rules: String,
    /// The tools the config served at pack time.
    pub tools: Vec<Tool>,
}

/// The rules, parsed, with each known tool's slice: the rules whose scope can match it and
/// the entities it needs, so a call evaluates only those.
#[derive(Debug)]
pub struct Rules {
    all: PolicySet,
    /// The rules whose scope names no tool or adapter: they apply to every call, and are kept
    /// once, not in every tool's slice (1,000 of them over 1,000 tools would be a million
    /// copies).
    general: PolicySet,
    tools: HashMap<String, Slice>,
}

#[derive(Debug)]
struct Slice {
    tool: Tool,
    /// The rules that name this tool (or its adapter) in their scope.
    policies: PolicySet,
    /// The tool's entities, their transitive closure computed once: a call adds its caller
    /// and tenant, and only those are closed over.
    entities: Entities,
}

impl Rules {
    /// Parses `packed.rules` and slices them by tool. The text is checked ([`check::check`])
    /// before it is packed; an error here is a parse error.
    pub fn new(packed: &Packed) -> Result<Self, String> {
        let all = PolicySet::from_str(&packed.rules).map_err(|e| e.to_string())?;
        let mut general = PolicySet::new();
        for policy in all.policies().filter(|p| is_general(p)) {
            general.add(policy.clone()).map_err(|e| e.to_string())?;
        }
        let mut tools = HashMap::new();
        for tool in &packed.tools {
            let mut policies = PolicySet::new();
            for policy in all
                .policies()
                .filter(|p| !is_general(p) && may_apply(p, tool))
            {
                policies.add(policy.clone()).map_err(|e| e.to_string())?;
            }
            let entities =
                Entities::from_entities(tool_entities(tool)?, None).map_err(|e| e.to_string())?;
            tools.insert(
                tool.name.clone(),
                Slice {
                    tool: tool.clone(),
                    policies,
                    entities,
                },
            );
        }
        Ok(Self {
            all,
            general,
            tools,
        })
    }

    /// Decides once on a call of every known tool, and evaluates a decimal: what Cedar builds
    /// lazily on first use (its extension functions, the decimal parser) is then built. The
    /// generic module runs this before its snapshot, so no call pays for it.
    pub fn warm_up(&self) {
        let warm = Packed {
            rules: r#"permit (principal, action, resource) when { context.args.d.lessThan(decimal("2.0")) };"#
                .to_owned(),
            tools: Vec::new(),
        };
        let mut calls: Vec<(&Rules, Call)> = self
            .tools
            .values()
            .map(|slice| {
                (
                    self,
                    warm_call(&slice.tool, Value::Object(Default::default())),
                )
            })
            .collect();
        let decimal = Rules::new(&warm).ok();
        if let Some(decimal) = &decimal {
            let tool = Tool {
                name: "warm.up".to_owned(),
                adapter: "warm".to_owned(),
                capability: "up".to_owned(),
                class: "observe".to_owned(),
                max_mode: "read_only".to_owned(),
                input_schema: Value::Null,
                annotations: HashMap::new(),
                produces: Vec::new(),
                sends: Vec::new(),
            };
            calls.push((decimal, warm_call(&tool, serde_json::json!({ "d": 1.5 }))));
        }
        for (rules, call) in calls {
            let _ = rules.decide(&call);
        }
    }

    /// Decides on `call`.
    pub fn decide(&self, call: &Call) -> Outcome {
        match self.try_decide(call) {
            Ok(outcome) => outcome,
            Err(message) => Outcome::deny("RULES_FAILED", message),
        }
    }

    fn try_decide(&self, call: &Call) -> Result<Outcome, String> {
        let unknown;
        // A known tool: the general rules and its own; a tool served after the rules were
        // packed: every rule, its facts from the call.
        let (sets, entities, schema): (Vec<&PolicySet>, _, _) = match self.tools.get(&call.tool) {
            Some(slice) => (
                vec![&self.general, &slice.policies],
                std::borrow::Cow::Borrowed(&slice.entities),
                Some(&slice.tool.input_schema),
            ),
            None => {
                unknown = Tool {
                    name: call.tool.clone(),
                    adapter: call.adapter.clone(),
                    capability: call.capability.clone(),
                    class: call.class.clone(),
                    max_mode: call.max_mode.clone(),
                    input_schema: Value::Null,
                    annotations: HashMap::new(),
                    produces: Vec::new(),
                    sends: Vec::new(),
                };
                let entities = Entities::from_entities(tool_entities(&unknown)?, None)
                    .map_err(|e| e.to_string())?;
                (vec![&self.all], std::borrow::Cow::Owned(entities), None)
            }
        };
        let (principal, entities) = request::with_caller(&entities, call)?;
        let request = Request::new(
            principal,
            uid("Action", &call.tool)?,
            uid("Tool", &call.tool)?,
            request::context(call, schema)?,
            None,
        )
        .map_err(|e| e.to_string())?;
        // Cedar's decision over the union of the sets: a forbid that matched in any denies,
        // else a permit that matched in any allows, else nothing matched.
        let (mut failed, mut forbids, mut permits) = (Vec::new(), Vec::new(), Vec::new());
        for policies in sets.into_iter().filter(|set| !set.is_empty()) {
            let response = Authorizer::new().is_authorized(&request, policies, &entities);
            // A forbid that could not be evaluated denies: fail closed.
            for error in response.diagnostics().errors() {
                let cedar_policy::AuthorizationError::PolicyEvaluationError(e) = error;
                if let Some(policy) = policies.policy(e.policy_id())
                    && policy.effect() == Effect::Forbid
                {
                    failed.push(Reason {
                        code: rule_id(policy),
                        message: format!(
                            "the rule could not be evaluated, so it denies: {}",
                            e.inner()
                        ),
                    });
                }
            }
            let matched = response
                .diagnostics()
                .reason()
                .filter_map(|id| policies.policy(id));
            match response.decision() {
                Decision::Deny => forbids.extend(matched),
                Decision::Allow => permits.extend(matched),
            }
        }
        if !failed.is_empty() {
            failed.sort_by(|a, b| a.code.cmp(&b.code));
            return Ok(Outcome {
                verdict: Verdict::Deny,
                reasons: failed,
                ..Outcome::deny("", String::new())
            });
        }
        forbids.sort_by_key(|p| rule_id(p));
        permits.sort_by_key(|p| rule_id(p));
        if !forbids.is_empty() {
            let reasons = forbids
                .iter()
                .map(|p| Reason {
                    code: rule_id(p),
                    message: note(p, "reason").map_or_else(
                        || format!("forbidden by rule `{}`", rule_id(p)),
                        str::to_owned,
                    ),
                })
                .collect();
            return Ok(Outcome {
                reasons,
                ..Outcome::deny("", String::new())
            });
        }
        if permits.is_empty() {
            return Ok(Outcome {
                verdict: Verdict::Abstain,
                reasons: Vec::new(),
                ..Outcome::deny("", String::new())
            });
        }
        permitted(call, &permits)
    }
}

/// A call of `tool` with `args`, for [`Rules::warm_up`].
fn warm_call(tool: &Tool, args: Value) -> Call {
    Call {
        tool: tool.name.clone(),
        adapter: tool.adapter.clone(),
        capability: tool.capability.clone(),
        class: tool.class.clone(),
        max_mode: tool.max_mode.clone(),
        mode: tool.max_mode.clone(),
        args,
        tenant: "warm-up".to_owned(),
        principals: Vec::new(),
        now_unix_ms: 0,
        prior_actions: Vec::new(),
        data_classification: Vec::new(),
        roles: Vec::new(),
        groups: Vec::new(),
        skills: Vec::new(),
        protocol: "mcp".to_owned(),
        delegated_by: None,
    }
}

/// The outcome of the permits that matched: their annotations applied.
fn permitted(call: &Call, matched: &[&Policy]) -> Result<Outcome, String> {
    let mut outcome = Outcome {
        verdict: Verdict::Allow,
        effective_mode: None,
        reasons: Vec::new(),
        evidence: Vec::new(),
        redact: Vec::new(),
        mask_pii: Vec::new(),
    };
    let max = mode_rank(&call.max_mode);
    for policy in matched {
        let id = rule_id(policy);
        let annotation = Annotations::of(policy).map_err(|e| format!("rule `{id}`: {e}"))?;
        outcome.reasons.push(Reason {
            code: id.clone(),
            message: note(policy, "reason")
                .map_or_else(|| format!("permitted by rule `{id}`"), str::to_owned),
        });
        match annotation.approval {
            Some(Approval::Required) => outcome.verdict = Verdict::RequireApproval,
            Some(Approval::Mode(rank)) => {
                if max.is_some_and(|max| rank > max) {
                    return Ok(Outcome::deny(
                        "APPROVAL_ABOVE_MAXIMUM",
                        format!(
                            "rule `{id}` asks for approval mode `{}`, above the declared maximum `{}` of `{}`; a rule may only lower a call's mode",
                            MODES[rank], call.max_mode, call.tool
                        ),
                    ));
                }
                // Two rules that lower the mode: the higher of the two (the lesser lowering).
                let current = outcome.effective_mode.as_deref().and_then(mode_rank);
                if current.is_none_or(|c| rank > c) {
                    outcome.effective_mode = Some(MODES[rank].to_owned());
                }
            }
            None => {}
        }
        outcome.redact.extend(annotation.redact);
        outcome.mask_pii.extend(annotation.mask_pii);
        outcome.evidence.extend(annotation.evidence);
    }
    outcome.redact.sort();
    outcome.redact.dedup();
    outcome.mask_pii.sort();
    outcome.mask_pii.dedup();
    Ok(outcome)
}

/// What a rule's annotation asks for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// `@approval("required")`.
    Required,
    /// `@approval("<mode>")`: the rank of the mode in [`MODES`].
    Mode(usize),
}

/// A rule's gatehouse annotations, read and checked.
#[derive(Debug, Default)]
pub struct Annotations {
    /// `@approval`.
    pub approval: Option<Approval>,
    /// `@redact`: JSON pointers.
    pub redact: Vec<String>,
    /// `@mask_pii`: `email`, `phone`.
    pub mask_pii: Vec<String>,
    /// `@evidence`.
    pub evidence: Vec<String>,
}

/// The annotations a rule may carry besides `@id` and `@reason`.
pub const OBLIGATIONS: [&str; 4] = ["approval", "redact", "mask_pii", "evidence"];

impl Annotations {
    /// Reads `policy`'s annotations; an annotation with a value gatehouse cannot carry out is
    /// an error naming it.
    pub fn of(policy: &Policy) -> Result<Self, String> {
        let mut out = Self::default();
        let list = |v: &str| -> Vec<String> {
            v.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect()
        };
        if let Some(value) = note(policy, "approval") {
            out.approval = Some(if value == "required" {
                Approval::Required
            } else {
                Approval::Mode(mode_rank(value).ok_or_else(|| {
                    format!(
                        "@approval(\"{value}\") is neither \"required\" nor an approval mode ({})",
                        MODES.join(", ")
                    )
                })?)
            });
        }
        if let Some(value) = note(policy, "redact") {
            out.redact = list(value);
            if let Some(bad) = out.redact.iter().find(|p| !p.starts_with('/')) {
                return Err(format!(
                    "@redact: `{bad}` is not a JSON pointer (it starts with `/`, e.g. `/card/number`)"
                ));
            }
        }
        if let Some(value) = note(policy, "mask_pii") {
            out.mask_pii = list(value);
            if let Some(bad) = out
                .mask_pii
                .iter()
                .find(|k| !matches!(k.as_str(), "email" | "phone"))
            {
                return Err(format!(
                    "@mask_pii: `{bad}` is not a kind of personal data gatehouse masks (email, phone)"
                ));
            }
        }
        if let Some(value) = note(policy, "evidence") {
            out.evidence = vec![value.to_owned()];
        }
        let asks = out.approval.is_some()
            || !out.redact.is_empty()
            || !out.mask_pii.is_empty()
            || !out.evidence.is_empty();
        if asks && policy.effect() == Effect::Forbid {
            return Err(
                "@approval, @redact, @mask_pii and @evidence apply to a `permit`; a `forbid` denies"
                    .to_owned(),
            );
        }
        Ok(out)
    }
}

/// The value of `policy`'s annotation `key`. Read by iterating: Cedar's own lookup parses the
/// key with its full parser at every call.
pub fn note<'a>(policy: &'a Policy, key: &str) -> Option<&'a str> {
    policy
        .annotations()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
}

/// A rule's name: its `@id`, else Cedar's `policyN`.
pub fn rule_id(policy: &Policy) -> String {
    note(policy, "id").map_or_else(|| policy.id().to_string(), str::to_owned)
}

/// Whether `policy`'s scope names no tool and no adapter: its action is any or `call`, and
/// its resource is not a `Tool` or `Adapter` entity.
fn is_general(policy: &Policy) -> bool {
    let named = |uid: &EntityUid| {
        let kind = uid.type_name().to_string();
        kind == "Tool" || kind == "Adapter"
    };
    let call =
        |uid: &EntityUid| uid.type_name().to_string() == "Action" && uid.id().unescaped() == "call";
    let action = match policy.action_constraint() {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => call(&uid),
        ActionConstraint::In(uids) => uids.iter().any(call),
    };
    let resource = match policy.resource_constraint() {
        ResourceConstraint::Any | ResourceConstraint::Is(_) => true,
        ResourceConstraint::Eq(uid)
        | ResourceConstraint::In(uid)
        | ResourceConstraint::IsIn(_, uid) => !named(&uid),
    };
    action && resource
}

/// Whether `policy`'s scope can match a call of `tool`: its action is any, the tool's, or
/// `call`; its resource is any, the tool, or the tool's adapter.
fn may_apply(policy: &Policy, tool: &Tool) -> bool {
    let is = |uid: &EntityUid, kind: &str, id: &str| {
        uid.type_name().to_string() == kind && uid.id().unescaped() == id
    };
    let action = |uid: &EntityUid| is(uid, "Action", &tool.name) || is(uid, "Action", "call");
    let action_ok = match policy.action_constraint() {
        ActionConstraint::Any => true,
        ActionConstraint::Eq(uid) => action(&uid),
        ActionConstraint::In(uids) => uids.iter().any(action),
    };
    let resource = |uid: &EntityUid| {
        uid.type_name().to_string() != "Tool" && uid.type_name().to_string() != "Adapter"
            || is(uid, "Tool", &tool.name)
            || is(uid, "Adapter", &tool.adapter)
    };
    let resource_ok = match policy.resource_constraint() {
        ResourceConstraint::Any | ResourceConstraint::Is(_) => true,
        ResourceConstraint::Eq(uid) | ResourceConstraint::In(uid) => resource(&uid),
        ResourceConstraint::IsIn(_, uid) => resource(&uid),
    };
    action_ok && resource_ok
}

/// The entity types of the model, parsed once: Cedar parses a type name with its full parser,
/// whose lexer builds its automaton at each parse, which was most of a decision's time.
static TYPES: std::sync::LazyLock<HashMap<&'static str, cedar_policy::EntityTypeName>> =
    std::sync::LazyLock::new(|| {
        ["Action", "Adapter", "Caller", "Tenant", "Tool"]
            .into_iter()
            .map(|kind| {
                let name = cedar_policy::EntityTypeName::from_str(kind)
                    .expect("the model's type names parse");
                (kind, name)
            })
            .collect()
    });

fn uid(kind: &str, id: &str) -> Result<EntityUid, String> {
    let name = match TYPES.get(kind) {
        Some(name) => name.clone(),
        None => cedar_policy::EntityTypeName::from_str(kind).map_err(|e| e.to_string())?,
    };
    Ok(EntityUid::from_type_name_and_id(
        name,
        cedar_policy::EntityId::new(id),
    ))
}

/// The tool, its adapter, its action and `Action::"call"`.
fn tool_entities(tool: &Tool) -> Result<Vec<Entity>, String> {
    let adapter = uid("Adapter", &tool.adapter)?;
    let call = uid("Action", "call")?;
    let string = |s: &str| RestrictedExpression::new_string(s.to_owned());
    let set = |items: &[String]| {
        RestrictedExpression::new_set(
            items
                .iter()
                .map(|s| RestrictedExpression::new_string(s.clone())),
        )
    };
    let annotations = RestrictedExpression::new_record(
        tool.annotations
            .iter()
            .map(|(k, v)| (k.clone(), RestrictedExpression::new_bool(*v))),
    )
    .map_err(|e| e.to_string())?;
    let attrs = HashMap::from([
        ("adapter".to_owned(), string(&tool.adapter)),
        ("capability".to_owned(), string(&tool.capability)),
        ("class".to_owned(), string(&tool.class)),
        ("max_mode".to_owned(), string(&tool.max_mode)),
        ("annotations".to_owned(), annotations),
        ("produces".to_owned(), set(&tool.produces)),
        ("sends".to_owned(), set(&tool.sends)),
    ]);
    Ok(vec![
        Entity::new(
            uid("Tool", &tool.name)?,
            attrs,
            HashSet::from([adapter.clone()]),
        )
        .map_err(|e| e.to_string())?,
        Entity::new_no_attrs(adapter, HashSet::new()),
        Entity::new_no_attrs(uid("Action", &tool.name)?, HashSet::from([call.clone()])),
        Entity::new_no_attrs(call, HashSet::new()),
    ])
}

#[cfg(test)]
mod tests;

//! The governed call: [`Pipeline::run`] runs every gate in order. It is the only place that
//! knows the order; each gate lives in its own module and is called from there.
//!
//! 1. identify — done by the caller (MCP server or embedding gateway) before the envelope
//!    exists; the envelope carries the resulting tenant and principal chain;
//! 2. **normalize** ([`normalize`]) — meta-tool resolution, registry lookup ([`registry`]); a
//!    tool the tenant may not see is reported exactly like a missing one
//!    (`UNKNOWN_CAPABILITY`);
//! 3. **validate** ([`validate`]) — input JSON Schema 2020-12, then `arg_constraints`
//!    (`INVALID_ARGUMENTS`, naming the field);
//! 4. **host invariants** ([`invariants`]) — approval-mode ceiling (`POLICY_BLOCKED`),
//!    idempotency key on write-class calls (`IDEMPOTENCY_KEY_REQUIRED`); the call's risk mode
//!    is the capability's declared maximum, whatever the caller asked for; the tenant's rate
//!    budgets ([`rate`], `RATE_LIMITED`, retryable);
//! 5. **policy** ([`crate::policy`]) — the skills resolved ([`crate::skills`]), the caller's
//!    session read ([`session`]: its labels and latest actions, for `data-classification`,
//!    `prior-actions` and the flow rules), then the bound modules, composed, over the action
//!    (which names those skills and the caller's claims);
//!    deny is `POLICY_BLOCKED`; a module may lower the risk mode; then the high-risk write rule
//!    on the risk mode (`ROLLBACK_REQUIRED`);
//! 6. **approve** ([`approve`]) — a require-approval decision, or a risk mode of network
//!    or above on a capability with an approval gate: the call is proposed in the store and
//!    ends `paused` / `APPROVAL_REQUIRED` with its approval id, until an approver approves it;
//!    then **connect** ([`connect`]) — the caller's own tokens for the grants that send them:
//!    one the caller has not connected pauses the call, `CONNECTION_REQUIRED`, with the URL
//!    where they connect ([`crate::accounts`]);
//! 7. **deduplicate** ([`dedupe`]) — a call with an idempotency key claims it, durably, before
//!    anything runs: replay, conflict, wait for the holder, or indeterminate;
//! 8. **invoke** ([`invoke`]) — the adapter run in a fresh sandbox, with the skills' text, at
//!    the run mode: the risk mode narrowed to what the caller asked for;
//! 9. **verify** ([`verify`]) — output schema (`VERIFICATION_FAILED`), evidence keys
//!    (`EVIDENCE_MISSING`), then policy obligations ([`obligations`]) on everything delivered,
//!    errors included; one that cannot be applied withholds the result
//!    (`VERIFICATION_FAILED`); the labels the result brings to the session ([`session`]): its
//!    tool's, and what the guardrails find in what it returned;
//! 10. **record** ([`record`]) — every call, refusals included, appended to the audit log
//!     with its key's result, its approval's execution and the labels it adds to its session,
//!     in one transaction; durable before delivery for write-class calls and calls that add a
//!     label.
//!
//! 11. **deliver** ([`deliver`]) — the caller gets [`deliver::caller_view`] of the recorded
//!     result: outcome codes and model-useful messages, none of the gateway's internals; with
//!     `[receipts]`, a receipt signed over its audit entry ([`receipt`]).
//!
//! Gates before 8 have no side effects: a refusal there is `rejected` (or `paused`). How each
//! refusal or failure ends the call is one table, [`outcome`].

pub mod approve;
pub mod config;
pub mod connect;
pub mod dedupe;
pub mod deliver;
pub mod invariants;
pub mod invoke;
pub mod normalize;
pub mod obligations;
pub mod outcome;
pub mod rate;
pub mod receipt;
pub mod record;
pub mod registry;
pub mod session;
pub mod validate;
pub mod verify;

use std::sync::Arc;
use std::time::Duration;

use gatehouse_core::envelope::{ToolCallEnvelope, ToolResultEnvelope};
use gatehouse_core::model::label::FlowFacts;
use gatehouse_core::model::{ActionRecord, PriorAction};
use gatehouse_core::model::{ApprovalMode, ContentBlock, Verdict};
use gatehouse_store::{
    ApprovalStatus, ClaimRequest, IdempotencyKey, Session, SessionWrite, Store, StoreConfig,
};
use tracing::Instrument;

use crate::bindings::types as wit;
use crate::delegation::Delegations;
use crate::pipeline::config::{MetaTool, PipelineConfig};
use crate::pipeline::dedupe::Dedupe;
use crate::pipeline::outcome::Stop;
use crate::pipeline::registry::{InstalledAdapter, Registry, ToolGrantError};
use crate::pipeline::session::SessionsConfig;
use crate::pipeline::validate::ValidateError;
use crate::plugin::LoadedAdapter;
use crate::policy::{self, PolicyStore};
use crate::relay::Relay;
use crate::sandbox::Sandbox;
use crate::skills::Skills;

/// How long a claimed key stays `in_progress` beyond the call's own deadline before a repeat
/// reports it `indeterminate`: covers verification and recording after the sandbox returns.
const LEASE_GRACE: Duration = Duration::from_secs(5);
/// The dedupe window of a capability whose manifest does not set one: one day.
const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(86_400);

/// Why the pipeline could not be built from the config, or an adapter not installed.
#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    /// A tool grant is invalid.
    #[error(transparent)]
    ToolGrant(#[from] ToolGrantError),
    /// A skill is invalid or looks like a secret.
    #[error(transparent)]
    Skills(#[from] crate::skills::SkillError),
    /// `[sessions]` is invalid.
    #[error("{0}")]
    Sessions(String),
    /// `[receipts]` is invalid.
    #[error("{0}")]
    Receipts(String),
    /// `[egress] delegation_key_file` cannot be read or made.
    #[error("{0}")]
    Delegation(String),
    /// A `gatehouse.flows` binding's config is invalid.
    #[error("[[pipeline.policy]] binding #{binding}: {message}")]
    Flows {
        /// The binding's place in the config, from 1.
        binding: usize,
        /// What is wrong.
        message: String,
    },
    /// An adapter's schema does not compile.
    #[error("adapter `{adapter}`: {source}")]
    Schema {
        /// The adapter id.
        adapter: String,
        /// What is wrong.
        source: ValidateError,
    },
}

/// The pipeline's state: the tools, the policies, the skills, the meta-tools and the store.
#[derive(Debug)]
pub struct Pipeline {
    pub(crate) registry: Registry,
    pub(crate) policies: PolicyStore,
    pub(crate) skills: Skills,
    meta_tools: Vec<MetaTool>,
    pub(crate) store: Arc<dyn Store>,
    store_config: StoreConfig,
    sessions: SessionsConfig,
    /// The key results' receipts are signed with (`[receipts]`); none: no receipts.
    receipts: Option<gatehouse_core::keys::SigningKey>,
    /// The key a call's delegation is sealed with (`[egress] delegation_key_file`).
    pub(crate) delegations: Delegations,
    rate_limits: Vec<rate::RateLimit>,
    rate_budget: Arc<dyn rate::RateBudget>,
    /// How long each call's record took to commit (`gatehouse_store_commit_seconds`).
    pub(crate) commits: prometheus_client::metrics::histogram::Histogram,
    /// The account broker, for grants that send the caller's own token.
    pub(crate) accounts: Option<Arc<dyn crate::accounts::Accounts>>,
}

impl Pipeline {
    /// The public half of the key results' receipts are signed with, if receipts are on.
    pub(crate) fn receipt_key(&self) -> Option<gatehouse_core::keys::PublicKey> {
        self.receipts
            .as_ref()
            .map(gatehouse_core::keys::SigningKey::public_key)
    }

    /// Builds the pipeline from the operator's `[pipeline]` config over `store`; no adapter is
    /// installed.
    pub fn new(
        config: &PipelineConfig,
        sessions: &SessionsConfig,
        receipts: &receipt::ReceiptsConfig,
        delegation_key_file: Option<&std::path::Path>,
        store: Arc<dyn Store>,
        store_config: StoreConfig,
    ) -> Result<Self, PipelineError> {
        sessions.validate().map_err(PipelineError::Sessions)?;
        let receipts = receipts.signer().map_err(PipelineError::Receipts)?;
        let delegations =
            Delegations::from_file(delegation_key_file).map_err(PipelineError::Delegation)?;
        for (index, binding) in config.policies.iter().enumerate() {
            if binding.module == policy::flows::ID {
                policy::flows::Config::parse(&binding.config).map_err(|message| {
                    PipelineError::Flows {
                        binding: index + 1,
                        message,
                    }
                })?;
            }
        }
        Ok(Self {
            registry: Registry::new(&config.tools)?,
            policies: PolicyStore::new(&config.policies, config.policy_default),
            skills: Skills::new(&config.skills, config.skill_limits.clone())?,
            meta_tools: config.meta_tools.clone(),
            rate_budget: Arc::clone(&store) as Arc<dyn rate::RateBudget>,
            store,
            store_config,
            sessions: sessions.clone(),
            receipts,
            delegations,
            rate_limits: config.rate_limits.clone(),
            commits: crate::metrics::commit_histogram(),
            accounts: None,
        })
    }

    /// Keeps the rate budgets in `budget` instead of the store.
    pub fn set_rate_budget(&mut self, budget: Arc<dyn rate::RateBudget>) {
        self.rate_budget = budget;
    }

    /// How long sessions live, and how many of their actions a call reads (`[sessions]`).
    pub fn session_limits(&self) -> gatehouse_store::SessionLimits {
        self.sessions.limits()
    }

    /// `[sessions]`.
    pub fn sessions(&self) -> &SessionsConfig {
        &self.sessions
    }

    /// The approval settings of `[store]`.
    pub fn store_config(&self) -> &StoreConfig {
        &self.store_config
    }

    /// Compiles an adapter's schemas and serves it (replacing the same id atomically).
    pub fn install_adapter(&self, adapter: LoadedAdapter) -> Result<(), PipelineError> {
        let id = adapter.manifest().id.clone();
        let installed = InstalledAdapter::new(adapter).map_err(|source| PipelineError::Schema {
            adapter: id,
            source,
        })?;
        self.registry.install(installed);
        Ok(())
    }

    /// Runs one governed call through every gate, in order. Never fails: every refusal or
    /// failure is a result envelope with a status and an outcome code.
    /// What its adapter tells and asks its caller goes to `relay` (none: dropped, and every ask
    /// `unavailable`).
    pub async fn run(
        &self,
        sandbox: &Sandbox,
        call: ToolCallEnvelope,
        relay: Option<Arc<dyn Relay>>,
    ) -> ToolResultEnvelope {
        let span =
            crate::telemetry::call_span(&call.tool_call_id, &call.capability_id, &call.trace_id);
        let now_unix_ms = gatehouse_store::now_ms();
        let entered = tokio::time::Instant::now();
        let mut result = ToolResultEnvelope::begin(&call);
        // What gate 10 records besides the result.
        let mut action = None;
        let mut sensitive = false;
        let mut claimed = None;
        let mut executes = None;
        // The policy decision's obligations, for whatever the call delivers.
        let mut pending = Vec::new();
        // The call's session (read when a policy sees the call; else, if its result brings
        // labels, when it is recorded), and the labels its result brings (gate 9).
        let session_key = session::key(&call);
        let mut found_session: Option<Session> = None;
        let mut brought = std::collections::BTreeSet::new();
        let gates = async {
            // 2. Normalize.
            let target = normalize::resolve(
                &self.registry,
                &self.meta_tools,
                &call.tenant_id,
                &call.capability_id,
                call.operation,
                &call.args,
            )?;
            let (tool, capability) = (&target.tool, target.tool.capability());
            // The adapter's own deadline (`[sandbox]`, or its `[[sandbox.plugin]]` entry),
            // and the longest it may wait for its caller's answers, bound a wait for an
            // in-flight holder of the same key, and the key's lease.
            let timeout = tool.adapter().limits().timeout + tool.adapter().caller().max_wait();
            let deadline = entered + timeout;
            result.capability_id.clone_from(&tool.name);
            result.resolved_from.clone_from(&target.via_meta_tool);
            result.adapter = Some(tool.adapter().plugin().clone());
            sensitive = capability.sensitive;
            // The store is down: nothing that must be recorded may start. Read-only calls go
            // on (unaudited) only if the operator allows it.
            let may_start = self.store.available()
                || (self.store_config.read_only_without_store
                    && invariants::read_only(capability, call.approval_mode_requested));
            if !may_start {
                return Err(Stop::StoreDown);
            }

            // 3. Validate.
            validate::check(tool.schemas(), &tool.constraints, &target.args)?;

            // 4. Host invariants. `mode` is the call's risk mode: the declared maximum, which
            // only a policy lowers; the caller's request narrows the run mode only.
            let requested = call.approval_mode_requested;
            let mode = invariants::check(
                &tool.name,
                capability,
                requested,
                call.idempotency_key.as_deref(),
            )?;
            result.approval_mode_effective = Some(invariants::run_mode(mode, requested));
            rate::take(
                &self.rate_limits,
                &*self.rate_budget,
                &call.tenant_id,
                &tool.name,
                now_unix_ms,
            )
            .await?;

            // 5. Policy, over the skills the adapter will get too, and the call's session.
            let skills = self.skills.resolve_call(&call, &tool.name);
            let names = skills.included().map(str::to_owned).collect();
            let set = self.policies.snapshot();
            let mut wit_action = target.action(&call, mode, now_unix_ms, names);
            let applies = set.applies(&call.tenant_id, &tool.name);
            if let Some(key) = session_key.as_ref().filter(|_| applies) {
                let limits = self.sessions.limits();
                found_session = Some(self.store.session(key.clone(), now_unix_ms, limits).await?);
            }
            brought.extend(self.sessions.produces(&tool.name, capability));
            let mut facts = FlowFacts::default();
            if applies {
                let context = &mut wit_action.context;
                if let Some(found) = &mut found_session {
                    // The actions move into the action (the record needs only the labels),
                    // each with the labels its result brought.
                    context.prior_actions = (found.actions.drain(..))
                        .map(|prior| {
                            let prior = PriorAction::brought(
                                prior.tool,
                                prior.tool_call_id,
                                prior.at_ms,
                                &found.labels,
                            );
                            wit::PriorAction::from(prior)
                        })
                        .collect();
                    for held in &found.labels {
                        if !context.data_classification.contains(&held.label) {
                            context.data_classification.push(held.label.clone());
                        }
                    }
                    facts.labels.clone_from(&found.labels);
                }
                facts.sends = self.sessions.sends(&tool.name, capability);
                context.sends.clone_from(&facts.sends);
            }
            let mut record = ActionRecord::from(&wit_action);
            let decision = policy::evaluate(&set, sandbox, &tool.name, wit_action, &facts).await;
            record.flows = facts;
            action = Some(record);
            drop(set);
            let mut mode = decision.approval_mode_effective;
            result.approval_mode_effective = Some(invariants::run_mode(mode, requested));
            let reasons = decision.reasons();
            let verdict = decision.verdict;
            pending.clone_from(&decision.obligations);
            result.policy_decision = Some(decision);
            let why = match verdict {
                Verdict::Allow => Vec::new(),
                // The composition never yields abstain; treat it like deny (fail closed).
                Verdict::Deny | Verdict::Abstain => return Err(Stop::PolicyDenied(reasons)),
                Verdict::RequireApproval => reasons,
            };
            invariants::high_risk(&tool.name, capability, mode)?;
            invariants::within_delegation(
                &tool.name,
                invariants::run_mode(mode, requested),
                call.delegated_by.as_ref(),
            )?;

            // 6. Approve: asked by policy, or the capability's approval gate at network or above.
            let gate = capability
                .approval_gate
                .as_ref()
                .filter(|_| mode >= ApprovalMode::Network)
                .map(|gate| format!("approval gate {gate}"));
            // What an approval and an idempotency key are bound to; a call with neither (a
            // read-only call, say) never hashes its request.
            let request_hash = || {
                gatehouse_core::canonical::request_hash(
                    &tool.name,
                    &target.args,
                    call.approval_mode_requested
                        .map(|m| m.to_string())
                        .as_deref(),
                )
            };
            let mut key = call.idempotency_key.clone();
            // An approval that ran already: its key may only replay.
            let mut spent = None;
            if verdict == Verdict::RequireApproval || gate.is_some() {
                let proposal = approve::Proposal {
                    call: &call,
                    tool: &tool.name,
                    mode,
                    why: if why.is_empty() {
                        gate.into_iter().collect()
                    } else {
                        why
                    },
                    request_hash: &request_hash(),
                    now_ms: now_unix_ms,
                };
                let approval =
                    approve::approve(&*self.store, &self.store_config, &proposal, &mut result)
                        .await?;
                mode = approve::approved_mode(&approval, mode);
                result.approval_mode_effective = Some(invariants::run_mode(mode, requested));
                // Every run of an approval claims its own key, so one runs.
                key = Some(approve::key_of(&approval));
                if approval.status == ApprovalStatus::Executed {
                    spent = Some(Stop::ApprovalSpent {
                        id: approval.id.clone(),
                        by_call: approval.executed_by_call.clone().unwrap_or_default(),
                    });
                }
                executes = Some(approval.id);
            }

            // Connect: the caller's own tokens, for the grants that send them.
            let providers = connect::providers(&tool.adapter().grants());
            let user_tokens =
                connect::tokens(self.accounts.as_deref(), &providers, &call, &tool.name).await?;

            // 7. Deduplicate.
            if let Some(key) = key {
                let key = IdempotencyKey {
                    tenant: call.tenant_id.clone(),
                    tool: tool.name.clone(),
                    key,
                };
                let window = capability
                    .idempotency
                    .as_ref()
                    .map_or(DEFAULT_DEDUP_WINDOW, |i| {
                        Duration::from_secs(i.dedup_window_seconds)
                    });
                let request = ClaimRequest {
                    key: key.clone(),
                    request_hash: request_hash(),
                    tool_call_id: call.tool_call_id.clone(),
                    lease_until_ms: now_unix_ms + millis(timeout + LEASE_GRACE),
                    expires_at_ms: now_unix_ms + millis(window),
                };
                match dedupe::dedupe(&*self.store, &call, request, deadline).await? {
                    Dedupe::Run => {
                        claimed = Some(key);
                        if let Some(spent) = spent {
                            return Err(spent);
                        }
                    }
                    Dedupe::Replay(stored) => {
                        result = *stored;
                        executes = None;
                        return Ok(());
                    }
                }
            }

            // 8. Invoke.
            let run = invariants::run_mode(mode, requested);
            let output = invoke::invoke(
                sandbox,
                &self.delegations,
                skills.text,
                &call,
                &target,
                run,
                user_tokens,
                relay,
                &mut result,
            )
            .await?;

            // 9. Verify, then apply obligations to everything delivered.
            let structured = verify::parse(output.structured.as_deref())?;
            verify::check(capability, tool.schemas(), structured.as_ref())?;
            result.content = output.content.into_iter().map(ContentBlock::from).collect();
            result.structured_content = structured;
            result.evidence_refs = output.evidence_refs;
            // What the tool returned brings labels to the session, found before any mask.
            if session_key.is_some() {
                brought.extend(session::found(
                    &result.content,
                    result.structured_content.as_ref(),
                ));
            }
            if let Err(error) = obligations::apply(&pending, &mut result) {
                result.content.clear();
                result.structured_content = None;
                result.evidence_refs.clear();
                return Err(Stop::Obligation(error));
            }
            if let Some(decision) = &result.policy_decision {
                brought.extend(session::masked(&decision.masked));
            }
            Ok::<(), Stop>(())
        };
        let stopped = gates.instrument(span.clone()).await.err();
        // The link a call paused for a connection gives its caller: never recorded.
        let connect_url = match &stopped {
            Some(Stop::ConnectionRequired { url, .. }) => Some(url.clone()),
            _ => None,
        };
        if let Some(stop) = &stopped {
            span.in_scope(|| outcome::end(&mut result, stop));
            if let (Stop::ApprovalRequired { approval_id, .. }, Some(url)) =
                (stop, &self.store_config.approval_url)
            {
                outcome::name_approval_url(&mut result, &url.replace("{id}", approval_id));
            }
            // An error from the tool or the verifier may quote its output.
            if matches!(stop, Stop::Tool(_) | Stop::Verify(_)) {
                obligations::apply_to_error(&pending, &mut result);
            }
        }
        // 10. Record.
        let nothing_ran = stopped.as_ref().is_some_and(Stop::ran_nothing);
        let may_have_run = claimed.is_some() && !nothing_ran;
        // Secrets and identifiers a policy asked to mask: named in the decision record, and
        // masked in the arguments the audit entry keeps.
        let masks = obligations::masks(&pending);
        if let Some(decision) = &mut result.policy_decision {
            decision
                .masked
                .splice(0..0, obligations::argument_findings(&masks, &call.args));
        }
        let at_ms = gatehouse_store::now_ms();
        let session = match session_key {
            Some(key) => Some(
                self.joining(key, found_session, &brought, &result, at_ms)
                    .instrument(span.clone())
                    .await,
            ),
            None => None,
        };
        let mut entry = record::record(record::Facts {
            call: &call,
            result: &result,
            action,
            sensitive,
            masks: &masks,
            claimed,
            nothing_ran,
            executes,
            session,
            at_ms,
        });
        // A receipt names the call's audit entry: it must be committed first.
        entry.durable |= self.receipts.is_some();
        let (durable, key) = (
            entry.durable,
            entry.completes.as_ref().map(|(k, _)| k.clone()),
        );
        let committing = std::time::Instant::now();
        let recorded = self.store.record(entry).instrument(span.clone()).await;
        if recorded.is_ok() {
            self.commits.observe(committing.elapsed().as_secs_f64());
        }
        if let Err(error) = recorded {
            if durable && may_have_run {
                // Nothing is delivered that is not recorded: the effect (if any) happened, but
                // its result is withheld, and a repeat under the key finds it indeterminate
                // after the lease, for an operator to resolve.
                span.in_scope(|| outcome::unrecorded(&mut result, &error, key.as_ref()));
            } else {
                // A refusal, a replay or a read-only call: no effect waits on this record.
                span.in_scope(
                    || tracing::warn!(%error, "the call's audit entry could not be recorded"),
                );
            }
        } else if let Some(key) = &self.receipts {
            // 11. Deliver, with the receipt for what was recorded.
            result.receipt = receipt::issue(&*self.store, key, &call, &result)
                .instrument(span)
                .await;
        }
        if let Some(url) = &connect_url {
            outcome::name_connect_url(&mut result, url);
        }
        result
    }
}

impl Pipeline {
    /// What a call's record writes of its session: its key, and the labels its result brought
    /// that the session lacks (a result that did not run brings none). A session not read
    /// before is read now if there are labels to add; if it cannot be, they are lost, and
    /// said so.
    async fn joining(
        &self,
        key: gatehouse_store::SessionKey,
        found: Option<Session>,
        brought: &std::collections::BTreeSet<String>,
        result: &ToolResultEnvelope,
        at_ms: u64,
    ) -> SessionWrite {
        let mut write = SessionWrite {
            key: key.key.clone(),
            labels: None,
        };
        if brought.is_empty() || result.status != gatehouse_core::envelope::Status::Ok {
            return write;
        }
        let found = match found {
            Some(found) => found,
            None => match self.store.session(key, at_ms, self.sessions.limits()).await {
                Ok(found) => found,
                Err(error) => {
                    tracing::warn!(%error, labels = ?brought, "the call's session could not be read; the labels its result brought are not kept");
                    return write;
                }
            },
        };
        let joining = session::joining(
            brought,
            &found.labels,
            &result.capability_id,
            &result.tool_call_id,
            at_ms,
        );
        if !joining.is_empty() {
            write.labels = Some((found.started_ms, joining));
        }
        write
    }
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

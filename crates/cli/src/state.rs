//! The operator's commands on the state store: `approvals` (the store's [`Desk`]; the commands are
//! [`crate::approvals`]), `audit`, `idempotency` and `replay`. They open the store file the config
//! names (`[store] path`) directly, so they work whether or not a gateway is serving from it
//! (SQLite serializes the writers).

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use clap::Subcommand;
use gatehouse_core::envelope::{DecisionRecord, OutcomeCode};
use gatehouse_core::model::{ActionRecord, PriorAction};
use gatehouse_host::Host;
use gatehouse_host::plugin::signature::PublicKey;
use gatehouse_store::audit::record;
use gatehouse_store::check_anchor;
use gatehouse_store::verify_checkpoints;
use gatehouse_store::{
    Anchor, Approval, ApprovalFilter, ApprovalLookup, ApprovalStatus, AuditQuery, Checkpoint,
    IdempotencyKey, Resolution, SessionKey, Store, now_ms,
};
use serde_json::Value;

use gatehouse_host::plugin::read_file;

use crate::approvals::{self, Desk};
use crate::config::{ConfigArg, load_config};
use crate::exit::{Failure, refused, usage};

/// `gatehouse audit ...`
#[derive(Debug, Subcommand)]
pub enum AuditCommand {
    /// Check every hash chain of the log; names the first edited, deleted, inserted or
    /// reordered entry, and prints each chain's head. Exit code 1 if a chain is broken, the
    /// log does not pass through `--head`, or does not extend every checkpoint of
    /// `--checkpoints`.
    Verify {
        /// The heads a verify printed earlier, `SEQ:HASH` each, separated by commas (a bare
        /// hash is looked up): the log must still hold each hash at its entry. Entries appended
        /// since are fine; entries removed from the end of a chain, or a rewritten and
        /// re-chained log, are not.
        #[arg(long)]
        head: Option<String>,
        /// A JSON-lines file of signed checkpoints (the `[store.checkpoints] file` sink, or
        /// `gatehouse audit checkpoints`): each signature must verify and the log must extend
        /// each checkpoint.
        #[arg(long, value_name = "FILE")]
        checkpoints: Option<PathBuf>,
        /// The public key checkpoints are checked with (`gatehouse keygen`'s
        /// `<id>.pub.toml`). Default: `[store.checkpoints] public_key`, else the public half
        /// of `[store.checkpoints] key`.
        #[arg(long, value_name = "FILE", requires = "checkpoints")]
        public_key: Option<PathBuf>,
    },
    /// Write the signed checkpoints the store holds as JSON lines (oldest first): the input
    /// of `verify --checkpoints`. The copies that count are the ones the sinks pushed out of
    /// the database; these are for export.
    Checkpoints {
        /// Write here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Write entries as JSON lines (oldest first).
    Export {
        /// Write here instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Only this outcome code, e.g. POLICY_BLOCKED.
        #[arg(long)]
        outcome: Option<String>,
        /// Only entries at or after this time (unix milliseconds).
        #[arg(long)]
        since_ms: Option<u64>,
        /// Only entries before this time (unix milliseconds).
        #[arg(long)]
        until_ms: Option<u64>,
    },
    /// Print every entry about one call (its record, approvals, resolutions).
    Show {
        /// The call's id (`call_...`).
        tool_call_id: String,
    },
}

/// `gatehouse idempotency ...`
#[derive(Debug, Subcommand)]
pub enum IdempotencyCommand {
    /// List idempotency records (only the indeterminate ones that need an operator with
    /// `--indeterminate`).
    List {
        /// Only keys whose call never recorded an outcome.
        #[arg(long)]
        indeterminate: bool,
    },
    /// Resolve an indeterminate key after checking the upstream: `--release` if the effect
    /// did not happen (the next call with the key runs), `--done` if it did (later calls get
    /// a result saying so; nothing runs).
    Resolve {
        /// Tenant of the call.
        tenant: String,
        /// The tool (`<adapter id>.<capability id>`).
        tool: String,
        /// The idempotency key.
        key: String,
        /// The effect did not happen: forget the key.
        #[arg(long, conflicts_with = "done", required_unless_present = "done")]
        release: bool,
        /// The effect happened: keep the key, run nothing.
        #[arg(long)]
        done: bool,
        /// Who resolves (recorded in the audit log).
        #[arg(long = "as", value_name = "PRINCIPAL")]
        by: String,
    },
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the async runtime: {e}")))
}

fn open(config: &ConfigArg) -> Result<(Arc<dyn Store>, gatehouse_store::StoreConfig), Failure> {
    let store_config = load_config(config)?.host.store;
    let store = gatehouse_store::open(&store_config).map_err(usage)?;
    Ok((store, store_config))
}

fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).expect("store records serialize")
}

/// The approvals of the store the config names, decided as `--as` (`gatehouse approvals`).
pub(super) struct StoreDesk {
    store: Arc<dyn Store>,
    config: gatehouse_store::StoreConfig,
    runtime: tokio::runtime::Runtime,
}

impl StoreDesk {
    /// Opens the store `config` names.
    pub(super) fn open(config: &ConfigArg) -> Result<Self, Failure> {
        let (store, config) = open(config)?;
        Ok(Self {
            store,
            config,
            runtime: runtime()?,
        })
    }
}

impl Desk for StoreDesk {
    fn list(&self, status: &str, tenant: Option<&str>) -> Result<(Vec<Approval>, Value), Failure> {
        let status = ApprovalStatus::parse_filter(status).map_err(|e| usage(format!("--{e}")))?;
        let list = self
            .runtime
            .block_on(self.store.approvals(ApprovalFilter {
                status,
                tenant: tenant.map(str::to_owned),
                limit: 0,
            }))
            .map_err(refused)?;
        let json = serde_json::to_value(&list).expect("store records serialize");
        Ok((list, json))
    }

    fn show(&self, id: &str) -> Result<Value, Failure> {
        let approval = self
            .runtime
            .block_on(self.store.approval(ApprovalLookup::Id(id.to_owned())))
            .map_err(refused)?
            .ok_or_else(|| refused(format!("there is no approval `{id}`")))?;
        Ok(serde_json::to_value(&approval).expect("store records serialize"))
    }

    fn decide(
        &self,
        id: &str,
        approve: bool,
        by: Option<&str>,
        reason: &str,
    ) -> Result<Approval, Failure> {
        let by = approvals::local_approver(by)?;
        self.runtime
            .block_on(
                self.store
                    .decide(self.config.decision(id, approve, by, reason)),
            )
            .map_err(|e| refused(format!("refused: {e}")))
    }
}

/// Runs `gatehouse audit ...`.
pub(super) fn audit(
    command: AuditCommand,
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let (store, store_config) = open(config)?;
    let location = store_config.location();
    let runtime = runtime()?;
    match command {
        AuditCommand::Verify {
            head,
            checkpoints,
            public_key,
        } => {
            // Read what the command was given before the (long) walk.
            let heads = head
                .as_deref()
                .map(Anchor::parse_list)
                .transpose()
                .map_err(|e| usage(format!("--{e}")))?
                .unwrap_or_default();
            let signed = match &checkpoints {
                Some(path) => {
                    let key = match &public_key {
                        Some(path) => PublicKey::from_file(path).map_err(usage)?,
                        None => store_config
                            .checkpoints
                            .verifying_key()
                            .map_err(usage)?
                            .ok_or_else(|| {
                                usage(
                                    "--checkpoints needs the public key: pass --public-key FILE, or set `[store.checkpoints] public_key`",
                                )
                            })?,
                    };
                    let list = Checkpoint::read_lines(path).map_err(usage)?;
                    if list.is_empty() {
                        return Err(usage(format!("{}: holds no checkpoint", path.display())));
                    }
                    Some((list, key))
                }
                None => None,
            };
            let report = runtime.block_on(store.verify_audit()).map_err(refused)?;
            if let Some(problem) = &report.first_break {
                let covered = signed
                    .iter()
                    .flat_map(|(list, _)| list.iter().enumerate())
                    .find(|(_, c)| c.seq >= problem.seq())
                    .map(|(index, c)| format!("; {} covers it", c.name(index)))
                    .unwrap_or_default();
                say!(
                    out,
                    "audit log {location}: BROKEN after {} good entries: {problem}{covered}",
                    report.entries
                );
                return Ok(1);
            }
            for head in &heads {
                let checked = runtime
                    .block_on(check_anchor(&*store, &report, head))
                    .map_err(refused)?;
                if let Err(problem) = checked {
                    say!(
                        out,
                        "audit log {location}: {} entries chain correctly, but not through the head you recorded ({}): {problem}",
                        report.entries,
                        head.hash
                    );
                    return Ok(1);
                }
            }
            let mut extends = String::new();
            if let Some((list, key)) = &signed {
                let checked = runtime
                    .block_on(verify_checkpoints(&*store, &report, list, key))
                    .map_err(refused)?;
                if let Err(problem) = checked {
                    say!(
                        out,
                        "audit log {location}: {} entries chain correctly, but {problem}",
                        report.entries
                    );
                    return Ok(1);
                }
                let last = list.iter().map(|c| c.seq).max().unwrap_or(0);
                let last_seq = report.last_seq();
                extends = format!(
                    "; it extends all {} signed checkpoints (the last at entry {last}{})",
                    list.len(),
                    if report.heads.len() > 1 {
                        "; each chain's entries after its last checkpoint are protected by the chain alone until the next one".to_owned()
                    } else if last < last_seq {
                        format!(
                            "; entries {} to {last_seq} are protected by the chain alone until the next one",
                            last + 1,
                        )
                    } else {
                        String::new()
                    }
                );
            }
            say!(
                out,
                "audit log {location}: {}{extends}",
                report.intact("--head")
            );
            Ok(0)
        }
        AuditCommand::Checkpoints { output } => {
            let list = runtime.block_on(store.checkpoints()).map_err(refused)?;
            let mut lines = String::new();
            for checkpoint in &list {
                lines
                    .push_str(&serde_json::to_string(checkpoint).expect("a checkpoint serializes"));
                lines.push('\n');
            }
            match &output {
                Some(path) => {
                    std::fs::write(path, lines)
                        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
                    say!(
                        out,
                        "wrote {} checkpoints to {}",
                        list.len(),
                        path.display()
                    );
                }
                None => write!(out, "{lines}")
                    .map_err(|e| usage(format!("cannot write the checkpoints: {e}")))?,
            }
            Ok(0)
        }
        AuditCommand::Export {
            output,
            tenant,
            outcome,
            since_ms,
            until_ms,
        } => {
            let mut file;
            let sink: &mut dyn Write = match &output {
                Some(path) => {
                    file = std::fs::File::create(path)
                        .map_err(|e| usage(format!("{}: {e}", path.display())))?;
                    &mut file
                }
                None => out,
            };
            let mut after_seq = None;
            let mut written = 0u64;
            // Paged, so a long log never sits in memory at once.
            loop {
                let page = runtime
                    .block_on(store.audit(AuditQuery {
                        tenant: tenant.clone(),
                        outcome: outcome.clone(),
                        since_ms,
                        until_ms,
                        after_seq,
                        limit: 1000,
                        ..AuditQuery::default()
                    }))
                    .map_err(refused)?;
                let Some(last) = page.last() else { break };
                after_seq = Some(last.seq);
                for entry in &page {
                    writeln!(sink, "{}", entry.expanded())
                        .map_err(|e| usage(format!("cannot write the export: {e}")))?;
                    written += 1;
                }
            }
            if let Some(path) = output {
                say!(out, "wrote {written} entries to {}", path.display());
            }
            Ok(0)
        }
        AuditCommand::Show { tool_call_id } => {
            let entries = runtime
                .block_on(store.audit(AuditQuery {
                    tool_call_id: Some(tool_call_id.clone()),
                    ..AuditQuery::default()
                }))
                .map_err(refused)?;
            if entries.is_empty() {
                return Err(refused(format!(
                    "the audit log has no entry about `{tool_call_id}`"
                )));
            }
            for entry in &entries {
                say!(out, "{}", json(&entry.expanded()));
            }
            Ok(0)
        }
    }
}

/// Runs `gatehouse idempotency ...`.
pub(super) fn idempotency(
    command: IdempotencyCommand,
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let (store, _) = open(config)?;
    let runtime = runtime()?;
    match command {
        IdempotencyCommand::List { indeterminate } => {
            let keys = runtime
                .block_on(store.keys(indeterminate, now_ms()))
                .map_err(refused)?;
            say!(out, "{}", json(&keys));
            Ok(0)
        }
        IdempotencyCommand::Resolve {
            tenant,
            tool,
            key,
            release,
            done: _,
            by,
        } => {
            let resolution = if release {
                Resolution::Release
            } else {
                Resolution::Done
            };
            runtime
                .block_on(store.resolve(
                    IdempotencyKey { tenant, tool, key },
                    resolution,
                    by,
                    now_ms(),
                ))
                .map_err(|e| refused(format!("refused: {e}")))?;
            say!(
                out,
                "{}",
                match resolution {
                    Resolution::Release => "released: the next call with this key runs",
                    Resolution::Done => "resolved as done: later calls with this key run nothing",
                }
            );
            Ok(0)
        }
    }
}

/// Runs `gatehouse replay`: the recorded action of `tool_call_id` through the given policy
/// modules, with the config's bindings; no adapter runs.
pub(super) fn replay(
    tool_call_id: &str,
    policies: &[PathBuf],
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    if policies.is_empty() {
        return Err(usage(
            "name the policy modules to evaluate with --policy FILE (the ones the gateway serves, or the ones you plan to swap in)",
        ));
    }
    let host = replaying_host(policies, config)?;
    let runtime = runtime()?;
    let entries = runtime
        .block_on(host.audit(AuditQuery {
            tool_call_id: Some(tool_call_id.to_owned()),
            ..AuditQuery::default()
        }))
        .map_err(refused)?;
    let record: Value = entries
        .iter()
        .find(|e| e.event.kind == "call")
        .and_then(|e| record::full(&e.event))
        .ok_or_else(|| refused(format!("the audit log has no call `{tool_call_id}`")))?;
    // Only the fields replay compares: a sensitive call's result holds hashes where the full
    // envelope has content.
    let recorded: Recorded = serde_json::from_value(record["result"].clone()).map_err(|e| {
        refused(format!(
            "the recorded result of `{tool_call_id}` does not read: {e}"
        ))
    })?;
    let action: ActionRecord = match record.get("action").filter(|a| !a.is_null()) {
        Some(action) => serde_json::from_value(action.clone()).map_err(|e| {
            refused(format!(
                "the recorded action of `{tool_call_id}` does not read: {e}"
            ))
        })?,
        None => {
            say!(
                out,
                "`{tool_call_id}` ended before the policy gate ({}): there is no decision to replay",
                recorded.outcome
            );
            return Ok(0);
        }
    };
    // Arguments are JSON objects; a sensitive capability's are recorded as `sha256:<hex>`.
    if action.args.starts_with("sha256:") {
        return Err(refused(format!(
            "`{}` is declared sensitive: its arguments are kept only as a hash, so its decision cannot be replayed",
            recorded.capability_id
        )));
    }
    let before = recorded.policy_decision.as_ref();
    let after = runtime.block_on(host.evaluate_policy(&recorded.capability_id, action));
    let verdict = |d: Option<&DecisionRecord>| {
        d.map_or("none".to_owned(), |d| {
            format!("{:?} at {}", d.verdict, d.approval_mode_effective).to_lowercase()
        })
    };
    let (was, now) = (verdict(before), verdict(Some(&after)));
    say!(out, "recorded decision: {was}");
    say!(out, "replayed decision: {now}");
    for module in &after.modules {
        let version = module
            .module
            .as_ref()
            .map_or("not installed".to_owned(), |m| {
                format!("{} {}", m.version, m.digest)
            });
        say!(
            out,
            "  {} ({version}): {:?} {}",
            module.module_id,
            module.verdict,
            module
                .reasons
                .iter()
                .map(|r| format!("{}: {}", r.code, r.message))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    say!(
        out,
        "{}",
        if was == now {
            "the decision would not change"
        } else {
            "the decision WOULD CHANGE"
        }
    );
    Ok(0)
}

/// `gatehouse replay --session`: every recorded call of the session under `key`, oldest first,
/// evaluated again with `policies` and the config's bindings, each with the session as it
/// stood when the call was made: the labels that had joined before it (with their sources),
/// its latest actions before it, and what its tool sends (as recorded, with the config's
/// `[[sessions.label]]`). One line per call, and the calls whose decision would change.
pub(super) fn replay_session(
    key: &SessionKey,
    policies: &[PathBuf],
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let host = replaying_host(policies, config)?;
    let runtime = runtime()?;
    let (session, mut entries) = runtime
        .block_on(host.store().session_entries(key.clone(), 0))
        .map_err(refused)?
        .ok_or_else(|| {
            refused(format!(
                "there is no session `{}` of `{}` in tenant `{}`",
                key.key, key.principal, key.tenant
            ))
        })?;
    entries.reverse();
    let kept = host.session_limits().actions;
    let mut prior: Vec<PriorAction> = Vec::new();
    let (mut replayed, mut changed) = (0, 0);
    for entry in &entries {
        let id = entry.event.tool_call_id.clone().unwrap_or_default();
        let tool = entry.event.tool.clone().unwrap_or_default();
        let this =
            PriorAction::brought(tool.clone(), id.clone(), entry.event.at_ms, &session.labels);
        let record = record::full(&entry.event).unwrap_or_default();
        let action = record
            .get("action")
            .filter(|a| !a.is_null())
            .and_then(|a| serde_json::from_value::<ActionRecord>(a.clone()).ok());
        let recorded: Option<Recorded> = serde_json::from_value(record["result"].clone()).ok();
        let Some((mut action, recorded)) = action.zip(recorded) else {
            say!(
                out,
                "#{} {tool} {id}: ended before the policy gate",
                entry.seq
            );
            prior.push(this);
            continue;
        };
        if action.args.starts_with("sha256:") {
            say!(out, "#{} {tool} {id}: sensitive, not replayed", entry.seq);
            prior.push(this);
            continue;
        }
        let held: Vec<_> = (session.labels.iter())
            .filter(|l| l.at_ms < entry.event.at_ms)
            .cloned()
            .collect();
        action.prior_actions = prior[prior.len().saturating_sub(kept)..].to_vec();
        action.data_classification = held.iter().map(|l| l.label.clone()).collect();
        action.flows.sends = host.sessions().sends_beside(&tool, &action.flows.sends);
        action.flows.labels = held;
        let after = runtime.block_on(host.evaluate_policy(&tool, action));
        let verdict = |d: Option<&DecisionRecord>| {
            d.and_then(|d| serde_json::to_value(d.verdict).ok())
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_else(|| "none".to_owned())
        };
        let (was, now) = (
            verdict(recorded.policy_decision.as_ref()),
            verdict(Some(&after)),
        );
        replayed += 1;
        if was == now {
            say!(out, "#{} {tool} {id}: {now}", entry.seq);
        } else {
            changed += 1;
            let why: Vec<String> = (after.modules.iter())
                .flat_map(|m| &m.reasons)
                .map(|r| format!("{}: {}", r.code, r.message))
                .collect();
            say!(
                out,
                "#{} {tool} {id}: {was} -> {now} (WOULD CHANGE) {}",
                entry.seq,
                why.join("; ")
            );
        }
        prior.push(this);
    }
    say!(
        out,
        "replayed {replayed} of {} calls of session `{}`: {changed} decision(s) would change",
        entries.len(),
        key.key
    );
    Ok(0)
}

/// The host `replay` evaluates with: the config's, with `policies` installed.
fn replaying_host(policies: &[PathBuf], config: &ConfigArg) -> Result<Host, Failure> {
    let host = Host::new(load_config(config)?.host).map_err(usage)?;
    for path in policies {
        let bytes = read_file(path).map_err(usage)?;
        host.install_policy(&bytes)
            .map_err(|e| refused(format!("{}: refused: {e}", path.display())))?;
    }
    Ok(host)
}

/// What `replay` reads of a recorded result.
#[derive(serde::Deserialize)]
struct Recorded {
    capability_id: String,
    outcome: OutcomeCode,
    policy_decision: Option<DecisionRecord>,
}

//! `gatehouse call`: one governed call on this machine, without serving, to try a plugin.
//!
//! - **An adapter** (`gatehouse call ADAPTER.signed.wasm CAPABILITY ARGS`): the capability
//!   runs through every gate of the pipeline, with the config's grants, policies and skills,
//!   and the `ToolResultEnvelope` is printed. Exit 0 when its outcome is `OK`, else 1.
//! - **A policy module** (`gatehouse call POLICY.signed.wasm TOOL ARGS`): the policy gate
//!   alone decides a call of TOOL (`<adapter id>.<capability id>`) with ARGS, as if its adapter
//!   declared it with `--class` and `--mode`; the decision record is printed (verdict,
//!   effective approval mode, each module's answer and reasons, obligations). Nothing else
//!   runs. Exit 0 when the verdict lets the call run (allow), else 1.
//!
//! `--session KEY --principal P` makes the call `P`'s in its session `KEY` (`""`: its window):
//! an adapter's call runs in it, as the gateway would run it (and is recorded in it); a policy
//! module decides with the session as the store holds it now: its labels, its latest actions,
//! and what the tool sends (`--sends`, with the config's `[[sessions.label]]`), so a flow rule
//! can be tried on a recorded session before it is bound (nothing is written).
//!
//! `--policy FILE` (repeatable) installs further policy modules first, so a call is tried
//! through them. A module is evaluated as the config binds it (`[[pipeline.policy]]`); one the
//! config does not bind is bound to every tool and tenant, with `{}` as its config. Every
//! component must be signed by a key the config trusts for it.

use std::io::Write;
use std::path::PathBuf;

use gatehouse_core::envelope::ToolCallEnvelope;
use gatehouse_core::model::{
    ActionRecord, ApprovalMode, CapabilityClass, Claims, Principal, PrincipalKind, PriorAction,
    Verdict,
};
use gatehouse_host::Host;
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_host::plugin::{self, read_file};
use gatehouse_host::state::SessionKey;
use serde_json::json;

use crate::config::{ConfigArg, load_config};
use crate::exit::{Failure, refused, usage};

// The command's `about` is the `Call` variant's doc comment.
#[derive(Debug, clap::Args)]
pub(super) struct CallArgs {
    /// The signed adapter (or policy module) to call.
    component: PathBuf,
    /// The adapter's capability id, e.g. `echo`; for a policy module, the tool it decides a
    /// call of, as `<adapter id>.<capability id>`, e.g. `acme.orders.delete_order`.
    capability: String,
    /// Arguments as a JSON object.
    #[arg(default_value = "{}")]
    args: String,
    /// Tenant the call runs for.
    #[arg(long, default_value = "default")]
    tenant: String,
    /// Idempotency key for write-class capabilities.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// A signed policy module to try the call through (repeatable): installed first, and
    /// bound to every tool unless the config binds it.
    #[arg(long = "policy", value_name = "FILE")]
    policies: Vec<PathBuf>,
    /// For a policy module: the capability_class of the tool it decides for.
    #[arg(long, value_name = "CLASS", default_value = "observe")]
    class: String,
    /// For a policy module: the tool's declared maximum approval_mode. Default: `network`
    /// for class `act`, else `read_only`.
    #[arg(long, value_name = "MODE")]
    mode: Option<String>,
    /// The calling principal's id (with --session: whose session it is).
    #[arg(long, value_name = "ID")]
    principal: Option<String>,
    /// The call's session key, e.g. an MCP session id (`""`: the principal's window).
    #[arg(long, value_name = "KEY", requires = "principal")]
    session: Option<String>,
    /// For a policy module: what the tool sends (`external`), as if its manifest declared it
    /// (repeatable).
    #[arg(long, value_name = "LABEL")]
    sends: Vec<String>,
    #[command(flatten)]
    config: ConfigArg,
}

pub(super) fn call(args: &CallArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    let call_args: serde_json::Value = serde_json::from_str(&args.args).map_err(|e| {
        usage(format!(
            "ARGS is not valid JSON: {e}; pass an object like '{{\"message\":\"hi\"}}'"
        ))
    })?;
    let mut config = load_config(&args.config)?.host;
    let bytes = read_file(&args.component).map_err(usage)?;
    let manifest = plugin::inspect(&bytes).ok().and_then(|i| i.manifest);
    let is_policy = matches!(manifest, Some(Manifest::Policy(_)));
    // The policy modules to install, with their ids: `--policy`, and the component if it is
    // one.
    let mut policies: Vec<(PathBuf, Vec<u8>, String)> = Vec::new();
    for path in &args.policies {
        let policy = read_file(path).map_err(usage)?;
        let id = policy_id(path, plugin::inspect(&policy).ok().and_then(|i| i.manifest))?;
        policies.push((path.clone(), policy, id));
    }
    if let Some(Manifest::Policy(policy)) = &manifest {
        policies.push((args.component.clone(), bytes.clone(), policy.id.clone()));
    }
    for (_, _, id) in &policies {
        if !config.pipeline.policies.iter().any(|b| b.module == *id) {
            let binding = serde_json::from_value(json!({ "module": id }))
                .expect("a binding of a module id reads");
            config.pipeline.policies.push(binding);
        }
    }
    let host = Host::new(config).map_err(usage)?;
    for (path, policy, _) in &policies {
        host.install_policy(policy)
            .map_err(|e| refused(format!("{}: refused: {e}", path.display())))?;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the async runtime: {e}")))?;
    if is_policy {
        return decide(&host, &runtime, args, &call_args, out);
    }
    let adapter = host
        .install_adapter(&bytes)
        .map_err(|e| refused(format!("{}: refused: {e}", args.component.display())))?;
    let mut call = ToolCallEnvelope::new(
        args.tenant.clone(),
        format!("{}.{}", adapter.id, args.capability),
        call_args,
    );
    call.idempotency_key.clone_from(&args.idempotency_key);
    if let Some(principal) = principal(args) {
        call = call.with_principal(principal);
    }
    call.session_id.clone_from(&args.session);
    let envelope = runtime.block_on(host.call(call));
    say!(
        out,
        "{}",
        serde_json::to_string_pretty(&envelope).expect("envelopes serialize")
    );
    Ok(if envelope.is_ok() { 0 } else { 1 })
}

/// The `--principal`, a user of the call's tenant.
fn principal(args: &CallArgs) -> Option<Principal> {
    Some(Principal {
        kind: PrincipalKind::User,
        id: args.principal.clone()?,
        tenant: args.tenant.clone(),
    })
}

/// `action` as a call in session `key` at `now_ms` would be: the session's labels (with their
/// sources) and its latest actions, as the store holds them now. Nothing is written: a session
/// that is not live is said so, and judged as a new one.
fn with_session(
    host: &Host,
    runtime: &tokio::runtime::Runtime,
    key: &SessionKey,
    now_ms: u64,
    action: &mut ActionRecord,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let limits = host.session_limits();
    let found = runtime
        .block_on(host.store().session_entries(key.clone(), limits.actions))
        .map_err(refused)?;
    let Some((session, entries)) = found.filter(|(s, _)| s.live(now_ms, limits)) else {
        say!(
            out,
            "session `{}` of `{}` is not live (none, ended or expired): decided as a new one",
            key.key,
            key.principal
        );
        return Ok(());
    };
    action.prior_actions = (entries.iter().rev())
        .filter_map(|entry| {
            let event = &entry.event;
            let (tool, id) = (event.tool.clone()?, event.tool_call_id.clone());
            let id = id.unwrap_or_default();
            Some(PriorAction::brought(tool, id, event.at_ms, &session.labels))
        })
        .collect();
    action.data_classification = session.labels.iter().map(|l| l.label.clone()).collect();
    action.flows.labels = session.labels;
    Ok(())
}

/// The id of the policy module at `path`, whose embedded manifest is `manifest`.
fn policy_id(path: &std::path::Path, manifest: Option<Manifest>) -> Result<String, Failure> {
    match manifest {
        Some(Manifest::Policy(manifest)) => Ok(manifest.id),
        _ => Err(usage(format!(
            "{}: not a signed policy module (its manifest says otherwise)",
            path.display()
        ))),
    }
}

/// The policy gate alone, for a call of `args.capability` (a tool name).
fn decide(
    host: &Host,
    runtime: &tokio::runtime::Runtime,
    args: &CallArgs,
    call_args: &serde_json::Value,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let tool = &args.capability;
    let Some((adapter, capability)) = tool
        .rsplit_once('.')
        .filter(|(a, c)| !a.is_empty() && !c.is_empty())
    else {
        return Err(usage(format!(
            "`{tool}`: a policy module decides a call of a tool: name it as \
             <adapter id>.<capability id>, e.g. acme.orders.delete_order"
        )));
    };
    let class: CapabilityClass = serde_json::from_value(json!(args.class)).map_err(|_| {
        usage(format!(
            "--class `{}`: one of observe, recall, think_support, act, verify",
            args.class
        ))
    })?;
    let mode: ApprovalMode = match &args.mode {
        Some(mode) => serde_json::from_value(json!(mode)).map_err(|_| {
            usage(format!(
                "--mode `{mode}`: one of read_only, local_write, network, delegated, destructive"
            ))
        })?,
        None if class == CapabilityClass::Act => ApprovalMode::Network,
        None => ApprovalMode::ReadOnly,
    };
    let now_unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let mut action = ActionRecord {
        tool_call_id: "call_cli_decide".to_owned(),
        adapter_id: adapter.to_owned(),
        capability_id: capability.to_owned(),
        capability_class: class,
        approval_mode_max: mode,
        approval_mode_requested: mode,
        args: call_args.to_string(),
        principals: Vec::new(),
        tenant: args.tenant.clone(),
        claims: Claims::default(),
        now_unix_ms,
        prior_actions: Vec::new(),
        data_classification: Vec::new(),
        skills: Vec::new(),
        risk_signals: Vec::new(),
        protocol: "direct".to_owned(),
        delegated_by: None,
        flows: gatehouse_core::model::label::FlowFacts::default(),
    };
    action.principals.extend(principal(args));
    action.flows.sends = host.sessions().sends_beside(tool, &args.sends);
    if let (Some(key), Some(principal)) = (&args.session, &args.principal) {
        let key = SessionKey {
            tenant: args.tenant.clone(),
            principal: principal.clone(),
            key: key.clone(),
        };
        with_session(host, runtime, &key, now_unix_ms, &mut action, out)?;
    }
    let decision = runtime.block_on(host.evaluate_policy(tool, action));
    say!(
        out,
        "{}",
        serde_json::to_string_pretty(&decision).expect("decisions serialize")
    );
    Ok(if decision.verdict == Verdict::Allow {
        0
    } else {
        1
    })
}

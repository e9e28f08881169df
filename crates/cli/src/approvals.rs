//! `gatehouse approvals ...` and `gatehouse admin approvals ...`: one command tree, two places
//! to decide.
//! - On the **store** the config names (`gatehouse approvals`): the command opens it directly,
//!   so it works whether or not a gateway serves from it; the approver names themselves with
//!   `--as PRINCIPAL`.
//! - Through a running gateway's **admin API** (`gatehouse admin approvals`): the token's
//!   principal decides, so `--as` is refused; the answers carry what the API adds (the
//!   policy decision, the approval's URL, the arguments as an approver may see them).
//!
//! Either way the store's rules decide whether a decision stands (pending, not expired, the
//! approver outside the requesting chain) and the output is the same.

use std::io::Write;

use clap::Subcommand;
use gatehouse_store::{Approval, Waiting, now_ms};
use serde_json::Value;

use crate::exit::{Failure, refused, usage};

/// `gatehouse [admin] approvals ...`
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// List approvals, newest first (pending ones by default).
    List {
        /// Only approvals in this state: pending, approved, rejected, executed, or `all`.
        #[arg(long, default_value = "pending")]
        status: String,
        /// Only this tenant.
        #[arg(long)]
        tenant: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Print one approval as JSON: the proposed call, who asked, why, and its decision.
    Show {
        /// The approval id (`apr_...`).
        id: String,
    },
    /// Approve a pending call. It runs once: now, for a caller whose request is held open or
    /// who polls a task; else at its caller's next call with the same request.
    Approve {
        /// The approval id.
        id: String,
        /// Who approves (a principal id), on the local store; it must not be in the requesting
        /// chain unless `[store] allow_self_approval = true`. Through the admin API the token's
        /// principal approves.
        #[arg(long = "as", value_name = "PRINCIPAL")]
        by: Option<String>,
        /// Why (recorded in the audit log).
        #[arg(long, default_value = "")]
        reason: String,
    },
    /// Reject a pending call. Its caller gets APPROVAL_REJECTED: now, where its request is held
    /// open or it polls a task; else at its next call.
    Reject {
        /// The approval id.
        id: String,
        /// Who rejects (a principal id), on the local store. Through the admin API the token's
        /// principal rejects.
        #[arg(long = "as", value_name = "PRINCIPAL")]
        by: Option<String>,
        /// Why (shown to the caller and recorded in the audit log).
        #[arg(long)]
        reason: String,
    },
}

/// Where approvals are read and decided: the local store or a gateway's admin API.
pub(crate) trait Desk {
    /// The approvals in `status` (`pending`, ..., `all`), optionally of one tenant, newest
    /// first, and their JSON as this desk gives it.
    fn list(&self, status: &str, tenant: Option<&str>) -> Result<(Vec<Approval>, Value), Failure>;

    /// One approval's JSON.
    fn show(&self, id: &str) -> Result<Value, Failure>;

    /// Approves or rejects `id`, as `by` where this desk takes a principal from the command
    /// line; the approval as decided.
    fn decide(
        &self,
        id: &str,
        approve: bool,
        by: Option<&str>,
        reason: &str,
    ) -> Result<Approval, Failure>;
}

/// Runs one approvals command at `desk`.
pub(crate) fn run(
    command: ApprovalsCommand,
    desk: &dyn Desk,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    match command {
        ApprovalsCommand::List {
            status,
            tenant,
            json,
        } => {
            let (approvals, as_json) = desk.list(&status, tenant.as_deref())?;
            if json {
                say!(out, "{}", pretty(&as_json));
            } else if approvals.is_empty() {
                say!(out, "no approvals");
            } else {
                let now = now_ms();
                for approval in &approvals {
                    say!(out, "{}", approval.summary(now));
                }
            }
        }
        ApprovalsCommand::Show { id } => {
            say!(out, "{}", pretty(&desk.show(&id)?));
        }
        ApprovalsCommand::Approve { id, by, reason } => {
            let approval = desk.decide(&id, true, by.as_deref(), &reason)?;
            let now = now_ms();
            say!(out, "{}", approval.summary(now));
            say!(out, "{}", what_follows(&approval, true, now));
        }
        ApprovalsCommand::Reject { id, by, reason } => {
            let approval = desk.decide(&id, false, by.as_deref(), &reason)?;
            let now = now_ms();
            say!(out, "{}", approval.summary(now));
            say!(out, "{}", what_follows(&approval, false, now));
        }
    }
    Ok(0)
}

/// What a decision on `approval` does next, by how its caller waits: a request held open
/// (until its hold ends) and a task get it now; otherwise the caller's next call with the same
/// request does.
fn what_follows(approval: &Approval, approved: bool, now_ms: u64) -> String {
    let (now, later) = if approved {
        ("runs it now, once", "runs it, once")
    } else {
        ("gets APPROVAL_REJECTED now", "gets APPROVAL_REJECTED")
    };
    match &approval.waiting {
        Waiting::Held { until_ms } if now_ms < *until_ms => {
            format!("its caller's request, held open for this decision, {now}")
        }
        Waiting::Task { id } => format!("task {id}, which its caller polls, {now}"),
        Waiting::Held { .. } | Waiting::Retry => {
            format!("the caller's next call with the same request {later}")
        }
    }
}

/// The principal a decision on the local store is made as: `--as`, which it needs.
pub(crate) fn local_approver(by: Option<&str>) -> Result<&str, Failure> {
    by.ok_or_else(|| {
        usage(
            "name who decides with --as PRINCIPAL (on the local store there is no token to say who you are)",
        )
    })
}

/// Refuses `--as` where the admin token says who decides.
pub(crate) fn token_approver(by: Option<&str>) -> Result<(), Failure> {
    match by {
        None => Ok(()),
        Some(by) => Err(usage(format!(
            "--as {by}: through the admin API the token's principal decides; drop --as (or decide on the local store with `gatehouse approvals`)"
        ))),
    }
}

/// An approval from the JSON an admin API answered with.
pub(crate) fn from_json(value: Value) -> Result<Approval, Failure> {
    serde_json::from_value(value).map_err(|e| {
        refused(format!(
            "the server's answer does not read as an approval: {e}"
        ))
    })
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

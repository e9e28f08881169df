//! `gatehouse receipt verify`: a call's signed receipt checked offline (issue 58): its
//! signature against the gateway's published key, and, given an audit export (`gatehouse audit
//! export`, or the admin API's `GET /v1/audit/export`), that the export holds the call's entry
//! as the receipt says: at its place in the log and its chain, with its hash, its call, tool
//! and outcome, linked to the entries around it, and, where the export keeps the arguments in
//! clear, the same request.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use gatehouse_core::keys::PublicKey;
use gatehouse_core::receipt::Receipt;
use serde_json::Value;

use crate::exit::{Failure, usage};

/// `gatehouse receipt ...`
#[derive(Debug, Subcommand)]
pub enum ReceiptCommand {
    /// Check a receipt offline: its signature, and with --audit, that an audit export holds
    /// the action as the receipt says. Exit code 1 if it does not verify.
    Verify {
        /// The receipt: a JSON file holding the receipt, or a whole result envelope (the
        /// `gatehouse/result` of a call's `_meta`) that carries one.
        receipt: PathBuf,
        /// The gateway's public key: `gatehouse keygen`'s `<id>.pub.toml` of its `[receipts]
        /// key`, or the key set the gateway publishes (a saved copy of its
        /// `/.well-known/jwks.json`), whose key under the receipt's key id is taken.
        #[arg(long, value_name = "FILE")]
        key: PathBuf,
        /// An audit export (JSON lines) that should hold the action.
        #[arg(long, value_name = "EXPORT")]
        audit: Option<PathBuf>,
    },
}

/// The public key in `path`: a `gatehouse keygen` public key file, or a JWK Set (JSON), whose
/// key `key_id` is taken.
fn public_key(path: &Path, key_id: &str) -> Result<PublicKey, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let Ok(set) = serde_json::from_str::<Value>(&text) else {
        return PublicKey::from_file(path).map_err(|e| usage(format!("{}: {e}", path.display())));
    };
    gatehouse_core::agent_card::key_in_set(&set, key_id).map_err(|e| {
        usage(format!(
            "{}: {e} (the key set a gateway serves at /.well-known/jwks.json, holding the key \
             the receipt names)",
            path.display()
        ))
    })
}

/// Runs `gatehouse receipt ...`.
pub(super) fn receipt(command: ReceiptCommand, out: &mut dyn Write) -> Result<u8, Failure> {
    let ReceiptCommand::Verify {
        receipt,
        key,
        audit,
    } = command;
    let receipt = read_receipt(&receipt)?;
    let key = public_key(&key, &receipt.key_id)?;
    if !receipt.verifies(&key) {
        say!(
            out,
            "receipt for {}: the signature does not verify with key `{}` (the receipt was altered, or signed by another key: it names `{}`)",
            receipt.tool_call_id,
            key.key_id,
            receipt.key_id
        );
        return Ok(1);
    }
    say!(
        out,
        "receipt for {} ({}, {}, {}): signed by `{}`",
        receipt.tool_call_id,
        receipt.tool,
        receipt.decision,
        receipt.outcome,
        receipt.key_id
    );
    let Some(export) = audit else {
        return Ok(0);
    };
    match in_export(&receipt, &export)? {
        Ok(notes) => {
            say!(
                out,
                "audit export {}: holds entry {} (chain {}, link {}) as the receipt says{}",
                export.display(),
                receipt.seq,
                receipt.chain,
                receipt.link,
                notes
            );
            Ok(0)
        }
        Err(problem) => {
            say!(out, "audit export {}: {problem}", export.display());
            Ok(1)
        }
    }
}

/// The receipt in `path`: the receipt itself, or an envelope carrying one.
fn read_receipt(path: &Path) -> Result<Receipt, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let value: Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("{} is not JSON: {e}", path.display())))?;
    let value = match value.get("receipt") {
        Some(receipt) => receipt.clone(),
        None => value,
    };
    Receipt::from_json(value).map_err(|e| {
        usage(format!(
            "{} holds no receipt ({e}); give the `receipt` of a result, or the result itself",
            path.display()
        ))
    })
}

/// Whether the export at `path` holds the receipt's entry as it says: `Ok(notes)` (what was
/// not checked), or `Err(what differs)`. An export that cannot be read is a usage failure.
fn in_export(receipt: &Receipt, path: &Path) -> Result<Result<String, String>, Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let mut entries = Vec::new();
    for (index, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let entry: Value = serde_json::from_str(line).map_err(|e| {
            usage(format!(
                "{} line {}: not an audit entry ({e})",
                path.display(),
                index + 1
            ))
        })?;
        entries.push(entry);
    }
    let Some(entry) = entries.iter().find(|e| e["seq"] == receipt.seq) else {
        return Ok(Err(format!(
            "holds no entry {}: the action is not in this export",
            receipt.seq
        )));
    };
    let mismatch = [
        ("chain", Value::from(receipt.chain)),
        ("link", Value::from(receipt.link)),
        ("hash", Value::from(receipt.hash.as_str())),
        ("tool_call_id", Value::from(receipt.tool_call_id.as_str())),
        ("tool", Value::from(receipt.tool.as_str())),
        ("outcome", Value::from(receipt.outcome.as_str())),
    ]
    .into_iter()
    .find(|(field, expected)| &entry[*field] != expected);
    if let Some((field, expected)) = mismatch {
        return Ok(Err(format!(
            "entry {} has {field} {}, the receipt says {expected}",
            receipt.seq, entry[field]
        )));
    }
    // Linked into its chain: the entries of the export next to it agree with its hashes.
    let chain = |e: &&Value| e["chain"] == receipt.chain;
    let at = |link: u64| entries.iter().filter(chain).find(|e| e["link"] == link);
    if let Some(before) = at(receipt.link.saturating_sub(1)).filter(|_| receipt.link > 1)
        && before["hash"] != entry["prev_hash"]
    {
        return Ok(Err(format!(
            "entry {} does not follow the chain's entry before it (its prev_hash is not that \
             entry's hash)",
            receipt.seq
        )));
    }
    if let Some(after) = at(receipt.link + 1)
        && after["prev_hash"] != entry["hash"]
    {
        return Ok(Err(format!(
            "the chain's entry after {} does not follow it",
            receipt.seq
        )));
    }
    // The request, where the export keeps the arguments as the caller sent them.
    let call = &entry["record"]["call"];
    let request = gatehouse_core::canonical::request_hash(
        &receipt.tool,
        &call["args"],
        call["approval_mode_requested"].as_str(),
    );
    let notes = if request == receipt.request {
        ", with the same request".to_owned()
    } else if call["args"].is_object() && !masked(&call["args"]) {
        return Ok(Err(format!(
            "entry {} records another request than the receipt's",
            receipt.seq
        )));
    } else {
        " (its arguments are kept hashed or masked, so the request is not compared)".to_owned()
    };
    Ok(Ok(notes))
}

/// Whether the recorded arguments were masked (a policy's mask obligations), so they cannot
/// give back the request's digest.
fn masked(args: &Value) -> bool {
    args.to_string().contains("[SECRET:") || args.to_string().contains("[REDACTED]")
}

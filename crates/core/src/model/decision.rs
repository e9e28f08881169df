//! What a policy module says about a call: its verdict, its reasons, and the obligations the
//! result must meet before delivery.

use serde::{Deserialize, Serialize};

/// A policy's verdict, host side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Proceed.
    Allow,
    /// Refuse.
    Deny,
    /// Proceed once a person approves.
    RequireApproval,
    /// No opinion.
    Abstain,
}

/// A reason given by a module or the host.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reason {
    /// Machine-readable code.
    pub code: String,
    /// For people.
    pub message: String,
}

/// Something the host must do to the result before delivering it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Obligation {
    /// Replace the value at this JSON pointer of the structured result with `"[REDACTED]"`.
    RedactPointer(String),
    /// Mask these kinds of personal data in every text of the result.
    MaskPii(Vec<PiiKind>),
}

impl Obligation {
    /// Why the host cannot carry this obligation out as given, if it cannot: a redaction
    /// pointer that is not an RFC 6901 JSON pointer (empty, or `/`-separated tokens in which
    /// `~` is always followed by `0` or `1`).
    pub fn problem(&self) -> Option<String> {
        match self {
            Self::RedactPointer(pointer) => {
                let valid = (pointer.is_empty() || pointer.starts_with('/'))
                    && pointer
                        .split('~')
                        .skip(1)
                        .all(|rest| rest.starts_with('0') || rest.starts_with('1'));
                (!valid).then(|| {
                    format!(
                        "obligation redact-pointer `{pointer}` is not a JSON pointer; write it as `/field/0/name`"
                    )
                })
            }
            Self::MaskPii(_) => None,
        }
    }
}

/// Kinds of personal data the host can mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PiiKind {
    /// Email addresses.
    Email,
    /// Phone numbers.
    Phone,
}

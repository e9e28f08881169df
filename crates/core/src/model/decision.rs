//! What a policy module says about a call: its verdict, its reasons, and the obligations the
//! result must meet before delivery.

use gatehouse_guardrails::{Identifier, Masks};
use serde::{Deserialize, Serialize};

pub use gatehouse_guardrails::SecretKind;

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
    /// Mask the secrets found, in every text of the result and in the arguments wherever the
    /// host keeps or shows them (contract 0.3.0).
    MaskSecrets {
        /// The kinds to find.
        kinds: Vec<SecretKind>,
        /// The fields whose high-entropy values are secrets.
        fields: Vec<String>,
    },
    /// Mask matches of these identifiers as `[NAME]`, where `MaskSecrets` masks (contract
    /// 0.3.0).
    MaskIdentifiers(Vec<IdentifierPattern>),
}

/// An identifier an operator names, as a policy returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentifierPattern {
    /// Its name, upper-cased into the mask.
    pub name: String,
    /// Its regular expression.
    pub pattern: String,
}

impl Obligation {
    /// Why the host cannot carry this obligation out as given, if it cannot: a redaction
    /// pointer that is not an RFC 6901 JSON pointer (empty, or `/`-separated tokens in which
    /// `~` is always followed by `0` or `1`), or an identifier whose name or pattern is not
    /// usable.
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
            Self::MaskPii(_) | Self::MaskSecrets { .. } => None,
            Self::MaskIdentifiers(_) => self.masks().err(),
        }
    }

    /// The masks this obligation asks for on arguments and results, if it is one.
    ///
    /// # Errors
    /// An identifier whose name or pattern is not usable.
    pub fn masks(&self) -> Result<Option<Masks>, String> {
        match self {
            Self::MaskSecrets { kinds, fields } => Ok(Some(Masks::new().secrets(kinds, fields))),
            Self::MaskIdentifiers(identifiers) => {
                let identifiers = identifiers
                    .iter()
                    .map(|i| Identifier::new(&i.name, &i.pattern))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Some(Masks::new().identifiers(identifiers)))
            }
            Self::RedactPointer(_) | Self::MaskPii(_) => Ok(None),
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

//! Finds secrets and operator-named identifiers in text and JSON, and masks them.
//!
//! One implementation for both sides of a guardrail:
//! - a first-party policy module (`plugins/secrets`) looks at a call's arguments with
//!   [`find`] and denies or pauses the call, naming each finding's kind and place;
//! - the host carries out the `mask-secrets` and `mask-identifiers` obligations with [`Masks`]:
//!   on every text of the result, and on the arguments wherever it keeps or shows them.
//!
//! A [`Finding`] names a kind and a place (a JSON pointer), never the value. In JSON, object
//! keys are looked at as the values are (`{"AKIA…": …}` is a finding, pointed at by its masked
//! key).
//!
//! The kinds ([`SecretKind`]), as configs and records spell them, each found wherever it stands
//! in a string (after `_`, after a letter, glued to a word), unless the kind says otherwise:
//! - `private_key`: a PEM private key block, from its `BEGIN` line to its `END` line (or the
//!   end of the text, if cut);
//! - `cloud_access_key`: AWS access key ids (`AKIA`, `ASIA` and the other documented prefixes
//!   followed by 16 upper-case letters and digits, as a whole run of upper-case letters and
//!   digits: `aws_key_AKIA…` holds one, `XAKIA…` does not) and Google API keys (`AIza` + 35);
//! - `bearer_token`: `Bearer <token>` (any case, after any spaces, a no-break space too; 8+
//!   token characters; not inside a word, as in `forbearer`), GitHub tokens (`ghp_`, `gho_`,
//!   `ghu_`, `ghs_`, `ghr_` + 36, `github_pat_` + 22) and Slack tokens (`xoxb-` and kin);
//! - `jwt`: three base64url segments of which the first two start `eyJ` (a JSON object);
//! - `high_entropy`: a string of 20+ characters without white space and with 3.5+ bits of
//!   Shannon entropy per character, as the value of a field the operator names (compared
//!   without case), once the other kinds in it are masked (`<entropic>_<jwt>` holds both).
//!   Found in JSON only; where the same value repeats in a text (an SDK's text block
//!   repeating the structured result), that copy is masked too.
//!
//! Patterns are regular expressions of the `regex` crate, so finding takes time linear in the
//! text; not `\b`-anchored, since `_` is a word character to `\b`.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};
use std::sync::{LazyLock, Mutex};

use regex::{Regex, RegexBuilder};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Field names (JSON object keys, compared without case) whose values are secrets whatever
/// they look like: the secrets guardrail's default `fields` for `high_entropy`, and the form
/// fields whose answers the host keeps as hashes in the audit log (an adapter's elicitation,
/// contract 0.5.0).
pub const SENSITIVE_FIELDS: [&str; 15] = [
    "password",
    "passwd",
    "secret",
    "client_secret",
    "api_key",
    "apikey",
    "access_key",
    "secret_key",
    "secret_access_key",
    "token",
    "access_token",
    "refresh_token",
    "private_key",
    "credential",
    "credentials",
];

/// Whether `name` is one of [`SENSITIVE_FIELDS`], compared without case.
pub fn is_sensitive_field(name: &str) -> bool {
    SENSITIVE_FIELDS
        .iter()
        .any(|field| field.eq_ignore_ascii_case(name))
}

/// A kind of secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SecretKind {
    /// A PEM private key block.
    PrivateKey,
    /// A cloud access key id or API key.
    CloudAccessKey,
    /// A bearer token.
    BearerToken,
    /// A JSON Web Token.
    Jwt,
    /// A high-entropy value of a named field.
    HighEntropy,
}

impl SecretKind {
    /// Every kind, in the order the masks apply (a JWT inside `Bearer ...` is a JWT).
    pub const ALL: [Self; 5] = [
        Self::PrivateKey,
        Self::Jwt,
        Self::CloudAccessKey,
        Self::BearerToken,
        Self::HighEntropy,
    ];

    /// The kind's name, as configs and records spell it: `private_key`.
    pub fn name(self) -> &'static str {
        match self {
            Self::PrivateKey => "private_key",
            Self::CloudAccessKey => "cloud_access_key",
            Self::BearerToken => "bearer_token",
            Self::Jwt => "jwt",
            Self::HighEntropy => "high_entropy",
        }
    }

    /// What a secret of this kind is replaced with: `[SECRET:private_key]`.
    pub fn mask(self) -> String {
        format!("[SECRET:{}]", self.name())
    }

    /// The patterns of a kind found in text (none for `high-entropy`, found by field).
    fn patterns(self) -> &'static [Pattern] {
        static PRIVATE_KEY: LazyLock<[Pattern; 1]> = LazyLock::new(|| {
            [Pattern::anywhere(
                r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)(?:-----END[A-Z0-9 ]*PRIVATE KEY-----|\z)",
            )]
        });
        static CLOUD: LazyLock<[Pattern; 2]> = LazyLock::new(|| {
            [
                // Google's first: an AWS key glued to one is judged by the mask beside it, as
                // masking the text again would judge it (the fuzz target found `AKIA…AIza…`
                // masked in two rounds).
                Pattern::anywhere(r"AIza[0-9A-Za-z_\-]{35}"),
                // A key id is a whole run of upper-case letters and digits: `aws_key_AKIA…`
                // and `awsKeyAKIA…` are keys, `XAKIA…` (21 of them) is not.
                Pattern::alone(
                    r"(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|ABIA|ACCA)[0-9A-Z]{16}",
                    |c| c.is_ascii_uppercase() || c.is_ascii_digit(),
                    |c| c.is_ascii_uppercase() || c.is_ascii_digit(),
                ),
            ]
        });
        static BEARER: LazyLock<[Pattern; 4]> = LazyLock::new(|| {
            [
                // Any space between (a no-break space too), and not inside a word
                // (`forbearer`), but after `_` (`auth_Bearer …`).
                Pattern::alone(
                    r"(?i)bearer[\t\p{Zs}]+[A-Za-z0-9\-._~+/]{8,}=*",
                    char::is_alphanumeric,
                    |_| false,
                ),
                Pattern::anywhere(r"gh[pousr]_[A-Za-z0-9]{36,}"),
                Pattern::anywhere(r"github_pat_[A-Za-z0-9_]{22,}"),
                Pattern::anywhere(r"xox[abposr]-[A-Za-z0-9\-]{10,}"),
            ]
        });
        static JWT: LazyLock<[Pattern; 1]> = LazyLock::new(|| {
            [Pattern::anywhere(
                r"eyJ[A-Za-z0-9_\-]{4,}\.eyJ[A-Za-z0-9_\-]{4,}\.[A-Za-z0-9_\-]*",
            )]
        });
        match self {
            Self::PrivateKey => &*PRIVATE_KEY,
            Self::CloudAccessKey => &*CLOUD,
            Self::BearerToken => &*BEARER,
            Self::Jwt => &*JWT,
            Self::HighEntropy => &[],
        }
    }
}

/// A pattern of secrets in text, and the characters that may not touch a match: next to one
/// of them, the match is part of a longer word, not a secret. Not `\b`: `_` is a word
/// character to `\b`, and `aws_key_AKIA…` holds a key all the same.
struct Pattern {
    regex: Regex,
    /// Characters that may not stand right before a match.
    before: fn(char) -> bool,
    /// Characters that may not stand right after a match.
    after: fn(char) -> bool,
}

impl Pattern {
    /// A pattern distinctive enough to be a secret whatever stands around it (`ghp_` + 36).
    fn anywhere(pattern: &str) -> Self {
        Self::alone(pattern, |_| false, |_| false)
    }

    /// A pattern that is a secret only when neither a `before` character precedes it nor an
    /// `after` character follows it.
    fn alone(pattern: &str, before: fn(char) -> bool, after: fn(char) -> bool) -> Self {
        Self {
            regex: Regex::new(pattern).expect("a valid built-in pattern"),
            before,
            after,
        }
    }

    /// `text` with each secret replaced by `mask`, or `None` when there is none.
    ///
    /// After a match refused for what touches it, the search goes on from the match's second
    /// character, since a secret may start inside it. The time stays linear in the text: a
    /// refused access key is 20 characters long, and a refused `Bearer` match overlaps the next
    /// one (which starts inside its token) at most by its token, holding no space.
    fn replace(&self, text: &str, mask: &str) -> Option<String> {
        let mut masked = String::new();
        let (mut copied, mut from) = (0, 0);
        while let Some(found) = self.next(text, from) {
            masked.push_str(&text[copied..found.start()]);
            masked.push_str(mask);
            copied = found.end();
            from = found.end();
        }
        // A secret was masked where the mask (never empty) was written.
        (!masked.is_empty()).then(|| {
            masked.push_str(&text[copied..]);
            masked
        })
    }

    /// Whether `text` holds a secret: [`replace`](Self::replace) would mask something.
    fn is_in(&self, text: &str) -> bool {
        self.next(text, 0).is_some()
    }

    /// The first secret in `text` at or after `from`: a match nothing refused touches.
    fn next<'t>(&self, text: &'t str, mut from: usize) -> Option<regex::Match<'t>> {
        while let Some(found) = self.regex.find_at(text, from) {
            let touched = text[..found.start()]
                .chars()
                .next_back()
                .is_some_and(self.before)
                || text[found.end()..].chars().next().is_some_and(self.after);
            if !touched {
                return Some(found);
            }
            from = found.start()
                + text[found.start()..]
                    .chars()
                    .next()
                    .map_or(1, char::len_utf8);
        }
        None
    }
}

impl std::fmt::Display for SecretKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What was found, and where: never the value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Finding {
    /// The secret kind (`jwt`) or the identifier's name (`customer-id`).
    pub kind: String,
    /// Where: a JSON pointer into the value looked at (`/body/0`), or the place the host
    /// names (`content/0`).
    pub at: String,
}

/// An identifier an operator names: matches are masked as `[NAME]`.
#[derive(Debug, Clone)]
pub struct Identifier {
    name: String,
    mask: String,
    pattern: Regex,
}

/// Most identifiers kept compiled; past it, the cache starts again.
const COMPILED_MAX: usize = 256;

/// Largest compiled size of an identifier's pattern: an operator's pattern stays small, and
/// the `regex` crate runs in time linear in the text whatever the pattern.
const PATTERN_LIMIT: usize = 1 << 20;

impl Identifier {
    /// An identifier from its name (letters, digits, `-` and `_`) and its pattern.
    ///
    /// # Errors
    /// A message naming the identifier when the name is not usable or the pattern does not
    /// compile (or matches the empty string, which would mask everywhere).
    pub fn new(name: &str, pattern: &str) -> Result<Self, String> {
        // The same few identifiers come with every call of a bound module: compiled once
        // each (a regex clone shares its compiled program).
        static COMPILED: LazyLock<Mutex<HashMap<(String, String), Identifier>>> =
            LazyLock::new(Mutex::default);
        let key = (name.to_owned(), pattern.to_owned());
        if let Some(found) = COMPILED.lock().ok().and_then(|c| c.get(&key).cloned()) {
            return Ok(found);
        }
        let identifier = Self::compile(name, pattern)?;
        if let Ok(mut compiled) = COMPILED.lock() {
            if compiled.len() >= COMPILED_MAX {
                compiled.clear();
            }
            compiled.insert(key, identifier.clone());
        }
        Ok(identifier)
    }

    fn compile(name: &str, pattern: &str) -> Result<Self, String> {
        let usable = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !usable {
            return Err(format!(
                "identifier name `{name}` must be 1-64 letters, digits, `-` or `_`"
            ));
        }
        let compiled = RegexBuilder::new(pattern)
            .size_limit(PATTERN_LIMIT)
            .build()
            .map_err(|e| format!("identifier `{name}`: pattern `{pattern}` is not valid: {e}"))?;
        if compiled.is_match("") {
            return Err(format!(
                "identifier `{name}`: pattern `{pattern}` matches the empty string"
            ));
        }
        Ok(Self {
            name: name.to_owned(),
            mask: format!("[{}]", name.to_ascii_uppercase()),
            pattern: compiled,
        })
    }

    /// The identifier's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What to find and mask: secret kinds, the fields whose high-entropy values are secrets, and
/// identifiers.
#[derive(Debug, Clone, Default)]
pub struct Masks {
    kinds: BTreeSet<SecretKind>,
    fields: BTreeSet<String>,
    identifiers: Vec<Identifier>,
}

impl Masks {
    /// Nothing to find.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds secret kinds, and fields for `high-entropy` (lower-cased).
    #[must_use]
    pub fn secrets(mut self, kinds: &[SecretKind], fields: &[String]) -> Self {
        self.kinds.extend(kinds);
        self.fields
            .extend(fields.iter().map(|f| f.to_ascii_lowercase()));
        self
    }

    /// Adds identifiers.
    #[must_use]
    pub fn identifiers(mut self, identifiers: Vec<Identifier>) -> Self {
        self.identifiers.extend(identifiers);
        self
    }

    /// Both sets of masks together.
    #[must_use]
    pub fn merge(mut self, other: Self) -> Self {
        self.kinds.extend(other.kinds);
        self.fields.extend(other.fields);
        self.identifiers.extend(other.identifiers);
        self
    }

    /// Whether there is nothing to find.
    pub fn is_empty(&self) -> bool {
        self.kinds.is_empty() && self.identifiers.is_empty()
    }

    /// Whether `text` holds a secret of these kinds or an identifier: what [`mask_text`]
    /// would find (masking kind by kind, a kind finds something only in the text as the kinds
    /// before it left it untouched), without making the masked text.
    ///
    /// [`mask_text`]: Self::mask_text
    pub fn finds_in(&self, text: &str) -> bool {
        SecretKind::ALL
            .into_iter()
            .filter(|k| self.kinds.contains(k))
            .any(|kind| kind.patterns().iter().any(|p| p.is_in(text)))
            || self.identifiers.iter().any(|i| i.pattern.is_match(text))
    }

    /// Masks `text`: each secret and identifier found is replaced with its mask. The kinds
    /// (or identifier names) found, once each.
    pub fn mask_text(&self, text: &mut String) -> Vec<String> {
        let mut found = Vec::new();
        for kind in SecretKind::ALL
            .into_iter()
            .filter(|k| self.kinds.contains(k))
        {
            for pattern in kind.patterns() {
                if let Some(masked) = pattern.replace(text, &kind.mask()) {
                    *text = masked;
                    push_once(&mut found, kind.name());
                }
            }
        }
        for identifier in &self.identifiers {
            if let Cow::Owned(masked) = identifier
                .pattern
                .replace_all(text, regex::NoExpand(&identifier.mask))
            {
                *text = masked;
                push_once(&mut found, &identifier.name);
            }
        }
        found
    }

    /// Masks every string of `value`, object keys included, and the high-entropy values of
    /// the named fields whole. Each finding with its JSON pointer under `at` (a masked key is
    /// pointed at as masked); the high-entropy values masked, for the caller to mask where the
    /// same value is repeated as text.
    pub fn mask_value(&self, value: &mut Value, at: &str) -> (Vec<Finding>, Vec<String>) {
        let mut findings = Vec::new();
        let mut entropic = Vec::new();
        self.walk(
            value,
            &mut at.to_owned(),
            false,
            &mut findings,
            &mut entropic,
        );
        (findings, entropic)
    }

    fn walk(
        &self,
        value: &mut Value,
        at: &mut String,
        named: bool,
        findings: &mut Vec<Finding>,
        entropic: &mut Vec<String>,
    ) {
        match value {
            Value::String(s) => {
                let found = self.mask_text(s);
                for kind in found {
                    findings.push(Finding {
                        kind,
                        at: at.clone(),
                    });
                }
                // What is left of a named field's value once the patterns are masked:
                // `<entropic>_<jwt>` hides a secret of each kind.
                if named
                    && self.kinds.contains(&SecretKind::HighEntropy)
                    && high_entropy(&unmasked(s))
                {
                    entropic.push(std::mem::replace(s, SecretKind::HighEntropy.mask()));
                    findings.push(Finding {
                        kind: SecretKind::HighEntropy.name().to_owned(),
                        at: at.clone(),
                    });
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = at.len();
                    at.push('/');
                    at.push_str(&i.to_string());
                    self.walk(item, at, named, findings, entropic);
                    at.truncate(len);
                }
            }
            Value::Object(map) => {
                for (key, found, mut item) in self.mask_keys(map) {
                    let len = at.len();
                    at.push('/');
                    at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                    for kind in found {
                        findings.push(Finding {
                            kind,
                            at: at.clone(),
                        });
                    }
                    let named = self.fields.contains(&key.to_ascii_lowercase());
                    self.walk(&mut item, at, named, findings, entropic);
                    at.truncate(len);
                    map.insert(key, item);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }

    /// Empties `map` into its entries, in order, each key masked, with what was found in it.
    /// A masked key that another key already spells gets `#2`, `#3`... so no entry is lost;
    /// keys with nothing found stay as they are.
    fn mask_keys(
        &self,
        map: &mut serde_json::Map<String, Value>,
    ) -> Vec<(String, Vec<String>, Value)> {
        let mut entries: Vec<(String, Vec<String>, Value)> = std::mem::take(map)
            .into_iter()
            .map(|(mut key, item)| {
                let found = self.mask_text(&mut key);
                (key, found, item)
            })
            .collect();
        let mut taken: BTreeSet<String> = entries
            .iter()
            .filter(|(_, found, _)| found.is_empty())
            .map(|(key, _, _)| key.clone())
            .collect();
        // The next number to try for each masked key: thousands of keys that mask alike take
        // linear time, not quadratic.
        let mut next: HashMap<String, usize> = HashMap::new();
        for (key, found, _) in &mut entries {
            if found.is_empty() {
                continue;
            }
            let mut n = next.get(key.as_str()).copied().unwrap_or(1);
            let mut unique = key.clone();
            while taken.contains(&unique) {
                n += 1;
                unique = format!("{key}#{n}");
            }
            next.insert(key.clone(), n);
            taken.insert(unique.clone());
            *key = unique;
        }
        entries
    }
}

/// What [`Masks`] would find in `value`, each with its JSON pointer: for a module that looks
/// at a call's arguments. `value` itself is left as it is.
pub fn find(masks: &Masks, value: &Value) -> Vec<Finding> {
    let mut copy = value.clone();
    masks.mask_value(&mut copy, "").0
}

/// Replaces every copy of each of `values` in `text` with the `high-entropy` mask.
pub fn mask_copies(text: &mut String, values: &[String]) -> bool {
    let mut masked = false;
    for value in values {
        if text.contains(value.as_str()) {
            *text = text.replace(value.as_str(), &SecretKind::HighEntropy.mask());
            masked = true;
        }
    }
    masked
}

fn push_once(found: &mut Vec<String>, name: &str) {
    if !found.iter().any(|f| f == name) {
        found.push(name.to_owned());
    }
}

/// `text` without the masks of secrets it holds.
fn unmasked(text: &str) -> Cow<'_, str> {
    let mut left = Cow::Borrowed(text);
    for kind in SecretKind::ALL {
        if left.contains(&kind.mask()) {
            left = Cow::Owned(left.replace(&kind.mask(), ""));
        }
    }
    left
}

/// 20+ characters, no white space, 3.5+ bits of Shannon entropy per character.
fn high_entropy(s: &str) -> bool {
    let len = s.chars().count();
    if len < 20 || s.chars().any(char::is_whitespace) {
        return false;
    }
    let mut counts = HashMap::new();
    for c in s.chars() {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    #[allow(clippy::cast_precision_loss, reason = "lengths far below 2^52")]
    let entropy: f64 = counts
        .values()
        .map(|&n| {
            let p = n as f64 / len as f64;
            -p * p.log2()
        })
        .sum();
    entropy >= 3.5
}

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

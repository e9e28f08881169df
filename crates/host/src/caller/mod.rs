//! The caller gate: what an adapter tells and asks its caller while a call runs (contract
//! 0.5.0's `caller` interface), checked before the call's [`Relay`] sees any of it.
//!
//! Phases, as the egress gate's:
//! 1. **load** (once per adapter): [`CallerGrant::for_adapter`] keeps what the manifest's
//!    `[caller]` table declares ([`CallerRequest`]), the operator's first matching
//!    `[[caller.grant]]` ([`AskGrant`]: asks allowed, asks per call, sampling tokens, the
//!    timeout of an ask), and the values of the adapter's egress credentials, which no ask may
//!    carry;
//! 2. **prepare** (per call): [`CallerGate::new`] with the call's relay (none for a call that
//!    did not come with a caller to ask: [`Host::call`](crate::Host::call)) and whether the
//!    capability is `sensitive`;
//! 3. **invoke**: each host call is checked, in this order:
//!    - `progress` and `notify`: declared (`[caller] progress`, `log`), a relay attached,
//!      within the per-call cap ([`MAX_NOTIFICATIONS`] each) and sizes, a finite number; else
//!      dropped and counted in the record;
//!    - `ask` and `ask-all`, each request: at most [`MAX_ASK_ALL`] in one `ask-all`; a key of
//!      1-64 `[A-Za-z0-9_.-]` not sent before in the call; declared in `[caller] ask`;
//!      granted; params a JSON object of at most [`MAX_ASK_PARAMS`] bytes, of the kind's
//!      shape (an elicitation's `message`, and a form's `requestedSchema` or a URL's
//!      absolute `http(s)` `url`; a sampling request's `messages` and a `maxTokens` within
//!      the grant's `max_sampling_tokens`); no string in them carrying a credential value
//!      (as is, or percent-decoded) — all `refused`; then a relay attached (else
//!      `unavailable`); the client declared it can answer (form and URL elicitation apart;
//!      else `not-supported`); the call's `max_asks` not spent (`refused`). What passes goes
//!      to the relay (an `ask-all`'s requests together: each [`Relay::ask`] is called before
//!      any is awaited), each with the grant's timeout, and an answer larger than
//!      [`MAX_ANSWER`] bytes is `failed`;
//! 4. **record**: [`CallerGate::into_record`], the call's [`CallerRecord`]: progress and log
//!    lines counted, each ask (at most [`MAX_ASK_RECORDS`]) with its params, answer or
//!    reason and wait, a form's sensitive fields hashed ([`record`]), and the params of an
//!    ask refused for carrying a credential hashed whole.
//!
//! The sandbox pauses the call's time budget around an ask ([`crate::sandbox`]); the ask's
//! own timeout is the grant's.

mod config;
mod record;
#[cfg(test)]
mod tests;

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use gatehouse_core::canonical::redacted;
use gatehouse_core::model::{AskOutcome, AskRecord, CallerRecord, Told};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use config::{AskGrant, CallerConfig, CallerConfigError};

use crate::relay::{Ask, AskError, AskKind, CallerCan, LogLevel, Relay};

/// Progress notifications, and log lines, relayed per call; later ones are dropped and
/// counted. Ample for a long call's progress bar; stops a loop from flooding the caller.
pub const MAX_NOTIFICATIONS: u32 = 1024;
/// Largest log line (`data`, JSON text), in bytes; a larger one is dropped.
pub const MAX_LOG_DATA: usize = 16 * 1024;
/// Longest logger name, and progress message, in bytes; longer ones are cut.
const MAX_LABEL: usize = 1024;
/// Largest params of one ask, in bytes of JSON: a form's schema or a sampling request's
/// messages, not documents.
pub const MAX_ASK_PARAMS: usize = 64 * 1024;
/// Largest answer the host takes, in bytes of JSON: a sampling result with an image.
pub const MAX_ANSWER: usize = 256 * 1024;
/// Requests one `ask-all` may carry: the most asks any grant allows a call.
pub const MAX_ASK_ALL: usize = config::MAX_ASKS_CEILING as usize;
/// Asks kept in a call's record; later ones are counted (`asks_unrecorded`).
pub const MAX_ASK_RECORDS: usize = 64;
/// Longest ask key.
const MAX_KEY: usize = 64;

/// The `[caller]` table of an adapter's manifest: what it asks to tell and ask its caller. A
/// request, like the manifest's egress: asks also need the operator's grant.
///
/// ```toml
/// [caller]
/// progress = true                       # reports progress (caller.progress)
/// log = true                            # logs lines to its caller (caller.notify)
/// ask = ["elicitation", "sampling"]     # may ask these (caller.ask, caller.ask-all)
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallerRequest {
    /// Whether it reports progress (`caller.progress`). Default: false: dropped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub progress: bool,
    /// Whether it logs lines to its caller (`caller.notify`). Default: false: dropped.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub log: bool,
    /// What it may ask: `elicitation`, `sampling`, `roots`. Default: none: every ask refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<AskKind>,
}

impl CallerRequest {
    /// Whether it declares nothing (the manifest then has no `[caller]` table).
    pub fn is_empty(&self) -> bool {
        !self.progress && !self.log && self.ask.is_empty()
    }

    /// Whether it declares `kind` in `ask`.
    pub fn asks(&self, kind: AskKind) -> bool {
        self.ask.contains(&kind)
    }

    /// The kind `ask` lists twice, if any (the manifest refuses it).
    pub fn repeated(&self) -> Option<AskKind> {
        let mut seen = BTreeSet::new();
        self.ask
            .iter()
            .find(|kind| !seen.insert(name(**kind)))
            .copied()
    }
}

/// The name of a kind, as manifests and configs spell it.
pub fn name(kind: AskKind) -> &'static str {
    match kind {
        AskKind::Elicitation => "elicitation",
        AskKind::Sampling => "sampling",
        AskKind::Roots => "roots",
    }
}

/// What one adapter may do with its caller: its manifest's `[caller]` table, the operator's
/// grant, and the values of its egress credentials. Built at load, shared by its calls.
#[derive(Default)]
pub struct CallerGrant {
    adapter: String,
    declared: CallerRequest,
    grant: Option<AskGrant>,
    /// Each egress credential's slot and secret value.
    secrets: Vec<(String, Vec<u8>)>,
}

impl std::fmt::Debug for CallerGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallerGrant")
            .field("adapter", &self.adapter)
            .field("declared", &self.declared)
            .field("grant", &self.grant)
            .field(
                "secrets",
                &self
                    .secrets
                    .iter()
                    .map(|(slot, _)| slot)
                    .collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl CallerGrant {
    /// Load phase: what adapter `adapter`, declaring `declared`, may do, under `config`;
    /// `secrets` are its egress credentials' slots and values. An adapter declaring asks that
    /// no grant allows is warned about here (each such ask is refused).
    pub fn for_adapter(
        config: &CallerConfig,
        adapter: &str,
        declared: &CallerRequest,
        secrets: Vec<(String, Vec<u8>)>,
    ) -> Self {
        let grant = config.grant_for(adapter).cloned();
        let refused: Vec<&str> = (declared.ask.iter())
            .filter(|kind| !grant.as_ref().is_some_and(|g| g.ask.contains(kind)))
            .map(|kind| name(*kind))
            .collect();
        if !refused.is_empty() {
            tracing::warn!(
                adapter,
                "its manifest declares `[caller] ask` for {} but no `[[caller.grant]]` grants \
                 it: such asks will be refused",
                refused.join(", ")
            );
        }
        Self {
            adapter: adapter.to_owned(),
            declared: declared.clone(),
            grant,
            secrets: secrets.into_iter().filter(|(_, s)| !s.is_empty()).collect(),
        }
    }

    /// The longest a call of the adapter may wait on its caller: its asks per call times the
    /// timeout of each (zero when nothing is granted). A call's lease on its idempotency key
    /// covers it.
    pub fn max_wait(&self) -> Duration {
        self.grant.as_ref().map_or(Duration::ZERO, |grant| {
            Duration::from_secs(grant.ask_timeout_seconds * u64::from(grant.max_asks))
        })
    }
}

/// One request of an `ask` or `ask-all`, as the adapter sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Its name within the call.
    pub key: String,
    /// What it asks.
    pub kind: AskKind,
    /// The MCP request's params, JSON text.
    pub params: String,
}

/// The caller gate of one call: its adapter's grant, the call's relay, what it was told and
/// asked so far.
pub struct CallerGate {
    grant: Arc<CallerGrant>,
    relay: Option<Arc<dyn Relay>>,
    sensitive: bool,
    record: CallerRecord,
    /// The keys of the asks sent to the relay.
    sent: BTreeSet<String>,
    /// This call's own secrets no ask may carry either, by name: the caller's tokens its
    /// egress sends ([`crate::accounts`]).
    call_secrets: Vec<(String, Vec<u8>)>,
}

impl CallerGate {
    /// Prepare phase (per call): a gate over `grant` for one call, carrying what passes to
    /// `relay` (none: nobody to tell or ask). `sensitive`: the capability declares its
    /// arguments and results sensitive, so its asks are recorded as hashes.
    pub fn new(grant: Arc<CallerGrant>, relay: Option<Arc<dyn Relay>>, sensitive: bool) -> Self {
        Self {
            grant,
            relay,
            sensitive,
            record: CallerRecord::default(),
            sent: BTreeSet::new(),
            call_secrets: Vec::new(),
        }
    }

    /// The same gate, refusing too any ask that carries one of `secrets` (name, value): the
    /// call's own, such as the caller's tokens, which an upstream could echo back to the
    /// adapter.
    #[must_use]
    pub fn holding(mut self, secrets: Vec<(String, Vec<u8>)>) -> Self {
        self.call_secrets = secrets.into_iter().filter(|(_, s)| !s.is_empty()).collect();
        self
    }

    /// A gate that declares and grants nothing and has nobody to ask (a policy evaluation,
    /// the ids probe of `gatehouse pack`).
    pub fn none() -> Self {
        Self::new(Arc::default(), None, false)
    }

    /// What the caller declared it can be asked (nothing, without a relay).
    pub fn can(&self) -> CallerCan {
        self.relay
            .as_ref()
            .map(|relay| relay.can())
            .unwrap_or_default()
    }

    /// `caller.progress`: relayed if declared, or dropped and counted.
    pub fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        let because = self
            .not_told(
                self.grant.declared.progress,
                "progress = true",
                &self.record.progress,
            )
            .or_else(|| {
                (!progress.is_finite() || total.is_some_and(|t| !t.is_finite()))
                    .then(|| "its progress or total is not a finite number".to_owned())
            });
        if let Some(why) = because {
            return dropped(&mut self.record.progress, why);
        }
        let message = message.map(|m| cut(m, MAX_LABEL));
        if let Some(relay) = &self.relay {
            relay.progress(progress, total, message.as_deref());
            self.record.progress.relayed += 1;
        }
    }

    /// `caller.notify`: relayed if declared, or dropped and counted. `data` that is not JSON
    /// is sent as a JSON string.
    pub fn notify(&mut self, level: LogLevel, logger: Option<String>, data: String) {
        let because = self
            .not_told(self.grant.declared.log, "log = true", &self.record.log)
            .or_else(|| {
                (data.len() > MAX_LOG_DATA)
                    .then(|| format!("its data is {} bytes, above {MAX_LOG_DATA}", data.len()))
            });
        if let Some(why) = because {
            return dropped(&mut self.record.log, why);
        }
        let data = serde_json::from_str(&data).unwrap_or(Value::String(data));
        let logger = logger.map(|l| cut(l, MAX_LABEL));
        if let Some(relay) = &self.relay {
            relay.log(level, logger.as_deref(), &data);
            self.record.log.relayed += 1;
        }
    }

    /// Why a notification of a kind the manifest declares as `declared` is not relayed, if it
    /// is not.
    fn not_told(&self, declared: bool, key: &str, told: &Told) -> Option<String> {
        if !declared {
            Some(format!("the manifest does not declare `[caller] {key}`"))
        } else if self.relay.is_none() {
            Some("no caller is attached to this call".to_owned())
        } else if told.relayed >= MAX_NOTIFICATIONS {
            Some(format!("over the per-call cap of {MAX_NOTIFICATIONS}"))
        } else {
            None
        }
    }

    /// `caller.ask-all` (and `caller.ask`, a list of one): checks each request in order, sends
    /// what passes to the relay together, waits for every answer (each within the grant's
    /// timeout), and records each.
    pub async fn ask_all(&mut self, questions: Vec<Question>) -> Vec<Result<Value, AskError>> {
        let mut checked = Vec::with_capacity(questions.len());
        for (index, question) in questions.into_iter().enumerate() {
            let params = (question.params.len() <= MAX_ASK_PARAMS)
                .then(|| serde_json::from_str::<Value>(&question.params).ok())
                .flatten();
            let outcome = self.check(index, &question, params.as_ref());
            checked.push((question, params, outcome));
        }
        let relay = self.relay.clone();
        let timeout = (self.grant.grant.as_ref()).map_or(Duration::ZERO, |g| {
            Duration::from_secs(g.ask_timeout_seconds)
        });
        let mut waits: Vec<AskWait<'_>> = Vec::new();
        if let Some(relay) = &relay {
            for (question, params, outcome) in &checked {
                if outcome.is_ok() {
                    let asked = relay.ask(Ask {
                        key: question.key.clone(),
                        kind: question.kind,
                        params: params.clone().unwrap_or(Value::Null),
                    });
                    waits.push(Box::pin(wait(asked, timeout)));
                }
            }
        }
        let mut answers = futures_util::future::join_all(waits).await.into_iter();
        let mut results = Vec::with_capacity(checked.len());
        for (question, params, outcome) in checked {
            let (result, waited) = match outcome {
                Err(error) => (Err(error), Duration::ZERO),
                Ok(()) => answers
                    .next()
                    .unwrap_or((Err(AskError::Unavailable(String::new())), Duration::ZERO)),
            };
            let result = result.and_then(|answer| {
                let size = answer.to_string().len();
                if size > MAX_ANSWER {
                    Err(AskError::Failed(format!(
                        "the answer is {size} bytes; the gateway takes at most {MAX_ANSWER}"
                    )))
                } else {
                    Ok(answer)
                }
            });
            // One that carried a credential is refused; its params are kept only as a hash, so
            // the audit log does not hold the credential either.
            let params = match params {
                Some(params) if self.credential_in(&params).is_some() => Some(redacted(&params)),
                params => params,
            };
            self.keep(&question, params, &result, waited);
            results.push(result);
        }
        results
    }

    /// Checks one request, the `index`-th of its `ask-all`, whose params parsed as `params`;
    /// one that passes is counted against the call's asks and its key taken.
    fn check(
        &mut self,
        index: usize,
        question: &Question,
        params: Option<&Value>,
    ) -> Result<(), AskError> {
        let refused = |why: String| Err(AskError::Refused(why));
        let kind = name(question.kind);
        if index >= MAX_ASK_ALL {
            return refused(format!("an ask-all carries at most {MAX_ASK_ALL} requests"));
        }
        let key = &question.key;
        let key_ok = (1..=MAX_KEY).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"_.-".contains(&b));
        if !key_ok {
            return refused(format!(
                "the key `{}` must be 1-{MAX_KEY} of [A-Za-z0-9_.-]",
                cut(key.clone(), MAX_KEY)
            ));
        }
        if self.sent.contains(key) {
            return refused(format!(
                "the key `{key}` was asked already in this call; give each ask its own key"
            ));
        }
        if !self.grant.declared.asks(question.kind) {
            return refused(format!(
                "the adapter's manifest does not declare `{kind}` in `[caller] ask`"
            ));
        }
        let Some(grant) = (self.grant.grant.as_ref()).filter(|g| g.ask.contains(&question.kind))
        else {
            return refused(format!(
                "the operator has not granted adapter `{}` to ask for `{kind}` \
                 (`[[caller.grant]]`)",
                self.grant.adapter
            ));
        };
        let Some(params) = params.filter(|p| p.is_object()) else {
            return refused(if question.params.len() > MAX_ASK_PARAMS {
                format!(
                    "its params are {} bytes; an ask carries at most {MAX_ASK_PARAMS}",
                    question.params.len()
                )
            } else {
                "its params must be a JSON object: the MCP request's params".to_owned()
            });
        };
        let mode = shape(question.kind, params, grant).map_err(AskError::Refused)?;
        if let Some(slot) = self.credential_in(params) {
            return refused(format!(
                "it carries the value of the egress credential `{slot}` (the operator's, or \
                 the caller's own token); an ask never carries a gateway credential"
            ));
        }
        let Some(relay) = &self.relay else {
            return Err(AskError::Unavailable(
                "no caller is attached to this call (it did not come through a client that \
                 can be asked)"
                    .to_owned(),
            ));
        };
        let can = relay.can();
        let supported = match mode {
            Mode::Form => can.elicit_form,
            Mode::Url => can.elicit_url,
            Mode::Sampling => can.sample,
            Mode::Roots => can.roots,
        };
        if !supported {
            return Err(AskError::NotSupported(mode.method()));
        }
        if self.sent.len() >= grant.max_asks as usize {
            return refused(format!(
                "the call's {} asks (`max_asks`) are spent",
                grant.max_asks
            ));
        }
        self.sent.insert(key.clone());
        Ok(())
    }

    /// The slot of an egress credential (or the name of a call's own secret) whose value a
    /// string in `params` carries, as is or percent-decoded.
    fn credential_in(&self, params: &Value) -> Option<&str> {
        let mut strings = Vec::new();
        strings_of(params, &mut strings);
        (self.grant.secrets.iter().chain(&self.call_secrets)).find_map(|(slot, secret)| {
            strings
                .iter()
                .any(|s| contains(s.as_bytes(), secret) || contains(&percent_decode(s), secret))
                .then_some(slot.as_str())
        })
    }

    /// Records one ask, within [`MAX_ASK_RECORDS`].
    fn keep(
        &mut self,
        question: &Question,
        params: Option<Value>,
        result: &Result<Value, AskError>,
        waited: Duration,
    ) {
        if self.record.asks.len() >= MAX_ASK_RECORDS {
            self.record.asks_unrecorded = self.record.asks_unrecorded.saturating_add(1);
            return;
        }
        let params = params.unwrap_or(Value::Null);
        let fields = record::sensitive_fields(&params);
        let hide = |value: Value, keep: fn(Value, &BTreeSet<String>) -> Value| {
            if self.sensitive {
                redacted(&value)
            } else {
                keep(value, &fields)
            }
        };
        let (outcome, answer, reason) = match result {
            Ok(answer) => (
                AskOutcome::Answered,
                Some(hide(answer.clone(), record::answer)),
                String::new(),
            ),
            Err(error) => (outcome_of(error), None, error.to_string()),
        };
        self.record.asks.push(AskRecord {
            key: cut(question.key.clone(), MAX_KEY),
            method: question.kind.method().to_owned(),
            params: hide(params, record::params),
            outcome,
            answer,
            reason,
            waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
        });
    }

    /// Record phase: what the call told and asked its caller; `None` if nothing.
    pub fn into_record(self) -> Option<CallerRecord> {
        (!self.record.is_empty()).then_some(self.record)
    }
}

/// What an ask asks, as the client's capabilities tell them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Form,
    Url,
    Sampling,
    Roots,
}

impl Mode {
    fn method(self) -> &'static str {
        match self {
            Self::Form => "elicitation/create (form)",
            Self::Url => "elicitation/create (url)",
            Self::Sampling => "sampling/createMessage",
            Self::Roots => "roots/list",
        }
    }
}

/// Checks `params` have the shape of a `kind` request (within `grant`'s sampling tokens), and
/// says which mode it is; or why not.
fn shape(kind: AskKind, params: &Value, grant: &AskGrant) -> Result<Mode, String> {
    let text = |field: &str| params.get(field).and_then(Value::as_str);
    match kind {
        AskKind::Elicitation => {
            if text("message").is_none() {
                return Err("an elicitation needs `message`, the text shown to the user".into());
            }
            match params.get("mode").map(|m| m.as_str()) {
                None | Some(Some("form")) => {
                    if !params.get("requestedSchema").is_some_and(Value::is_object) {
                        return Err("a form elicitation needs `requestedSchema`, an object \
                                    schema of the fields asked"
                            .into());
                    }
                    Ok(Mode::Form)
                }
                Some(Some("url")) => {
                    let url = text("url")
                        .ok_or("a URL elicitation needs `url`, the address the user is to open")?;
                    match url::Url::parse(url) {
                        Ok(parsed) if ["https", "http"].contains(&parsed.scheme()) => Ok(Mode::Url),
                        _ => Err(format!(
                            "the URL elicitation's `url` must be an absolute http or https URL; \
                             `{}` is not",
                            cut(url.to_owned(), 200)
                        )),
                    }
                }
                Some(_) => Err("an elicitation's `mode` is \"form\" or \"url\"".into()),
            }
        }
        AskKind::Sampling => {
            if !params.get("messages").is_some_and(Value::is_array) {
                return Err("a sampling request needs `messages`, a list".into());
            }
            let most = grant.max_sampling_tokens;
            match params.get("maxTokens").and_then(Value::as_u64) {
                None => Err(format!(
                    "a sampling request needs `maxTokens`, at most {most} for this adapter"
                )),
                Some(tokens) if tokens > u64::from(most) => Err(format!(
                    "its `maxTokens` is {tokens}; the operator allows this adapter at most \
                     {most} (`max_sampling_tokens`)"
                )),
                Some(_) => Ok(Mode::Sampling),
            }
        }
        AskKind::Roots => Ok(Mode::Roots),
    }
}

/// A request handed to the relay: its answer (or why none), and how long it took.
type AskWait<'a> = Pin<Box<dyn Future<Output = (Result<Value, AskError>, Duration)> + Send + 'a>>;

/// Waits for `asked` at most `timeout`.
async fn wait(
    asked: impl Future<Output = Result<Value, AskError>>,
    timeout: Duration,
) -> (Result<Value, AskError>, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(timeout, asked)
        .await
        .unwrap_or(Err(AskError::Timeout(timeout.as_secs())));
    (result, started.elapsed())
}

fn outcome_of(error: &AskError) -> AskOutcome {
    match error {
        AskError::Unavailable(_) => AskOutcome::Unavailable,
        AskError::NotSupported(_) => AskOutcome::NotSupported,
        AskError::Refused(_) => AskOutcome::Refused,
        AskError::Failed(_) => AskOutcome::Failed,
        AskError::Timeout(_) => AskOutcome::Timeout,
    }
}

fn dropped(told: &mut Told, why: String) {
    told.dropped = told.dropped.saturating_add(1);
    told.dropped_because.get_or_insert(why);
}

/// `text` cut to at most `max` bytes, on a character boundary.
fn cut(mut text: String, max: usize) -> String {
    text.truncate(text.floor_char_boundary(max));
    text
}

/// Every string in `value`, object keys included.
fn strings_of<'a>(value: &'a Value, out: &mut Vec<&'a str>) {
    match value {
        Value::String(s) => out.push(s),
        Value::Array(items) => items.iter().for_each(|v| strings_of(v, out)),
        Value::Object(map) => {
            for (key, v) in map {
                out.push(key);
                strings_of(v, out);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle)
}

/// `text` with its `%XX` escapes decoded (and `+` as a space, as in a query).
fn percent_decode(text: &str) -> Vec<u8> {
    percent_encoding::percent_decode_str(&text.replace('+', " ")).collect()
}

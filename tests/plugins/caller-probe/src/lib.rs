//! `test.caller-probe`: an adapter that uses every host call of the `caller` interface
//! (contract 0.5.0) through the Rust SDK, for the host's tests of the caller gate.
//!
//! - `tell`: `progress` 1, 2, 3 of 3, `notify` at info and warning, and returns what `can`
//!   says (structured `{"elicit_form", "elicit_url", "sample", "roots"}`);
//! - `ask` (and `ask_secret`, declared sensitive): asks each of `requests` (`{key, kind,
//!   params}`) with its own `ask`, or all of them in one `ask-all` when `together` is true,
//!   and returns `{"answers": [{"ok": answer} | {"error": kind, "reason": text}]}`.

use gatehouse_sdk::caller::{self, AskError, AskKind, LogLevel, Request};
use gatehouse_sdk::serde_json::{Value, json};
use gatehouse_sdk::{Adapter, Call, CallContext, ToolError, ToolOutput};
use serde::Deserialize;

#[derive(Deserialize)]
struct Asks {
    #[serde(default)]
    together: bool,
    requests: Vec<Asked>,
}

#[derive(Deserialize)]
struct Asked {
    key: String,
    kind: String,
    params: Value,
}

struct CallerProbe;

impl Adapter for CallerProbe {
    fn invoke(_ctx: &CallContext, call: &Call) -> Result<ToolOutput, ToolError> {
        match call.capability() {
            "tell" => {
                for step in 1..=3 {
                    caller::progress(f64::from(step), Some(3.0), Some(&format!("step {step}")));
                }
                caller::notify(LogLevel::Info, Some("probe"), &json!("started"));
                caller::notify(LogLevel::Warning, None, &json!({ "rows": 2 }));
                let can = caller::can();
                Ok(ToolOutput::text("told").with_structured(json!({
                    "elicit_form": can.elicit_form,
                    "elicit_url": can.elicit_url,
                    "sample": can.sample,
                    "roots": can.roots,
                })))
            }
            "ask" | "ask_secret" => {
                let asks: Asks = call.args()?;
                let requests: Vec<Request> = (asks.requests.into_iter())
                    .map(|asked| {
                        let kind = match asked.kind.as_str() {
                            "elicitation" => AskKind::Elicitation,
                            "sampling" => AskKind::Sampling,
                            _ => AskKind::Roots,
                        };
                        Request::new(asked.key, kind, asked.params)
                    })
                    .collect();
                let answers = if asks.together {
                    caller::ask_all(requests)
                } else {
                    requests.into_iter().map(caller::ask).collect()
                };
                let answers: Vec<Value> = answers.into_iter().map(shown).collect();
                Ok(ToolOutput::text("asked").with_structured(json!({ "answers": answers })))
            }
            other => Err(ToolError::unknown_capability(other)),
        }
    }
}

/// An answer, or its error's case and reason, as JSON.
fn shown(answer: Result<Value, AskError>) -> Value {
    let (error, reason) = match answer {
        Ok(answer) => return json!({ "ok": answer }),
        Err(AskError::Unavailable(why)) => ("unavailable", why),
        Err(AskError::NotSupported(why)) => ("not_supported", why),
        Err(AskError::Refused(why)) => ("refused", why),
        Err(AskError::Failed(why)) => ("failed", why),
        Err(AskError::Timeout(seconds)) => ("timeout", seconds.to_string()),
    };
    json!({ "error": error, "reason": reason })
}

gatehouse_sdk::export_adapter!(CallerProbe);

//! A caller for `Host::call_relayed`: a relay that records what an adapter tells and asks it,
//! and answers every ask.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use gatehouse_host::relay::{Ask, AskError, AskFuture, AskKind, CallerCan, LogLevel, Relay};
use serde_json::{Value, json};

/// A relay that records what reaches it, in order, and answers each ask after `delay`:
/// a form with `{"name": "Ada", "password": "hunter2"}`, a sampling request with "Paris", the
/// roots with one root.
pub struct TestRelay {
    can: CallerCan,
    delay: Duration,
    seen: Mutex<Vec<Value>>,
}

impl TestRelay {
    /// A relay declaring `can`, answering each ask after `delay`.
    pub fn new(can: CallerCan, delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            can,
            delay,
            seen: Mutex::default(),
        })
    }

    /// What reached it so far, in order.
    pub fn seen(&self) -> Vec<Value> {
        self.seen.lock().unwrap().clone()
    }
}

impl Relay for TestRelay {
    fn can(&self) -> CallerCan {
        self.can
    }

    fn progress(&self, progress: f64, total: Option<f64>, message: Option<&str>) {
        (self.seen.lock().unwrap())
            .push(json!({ "progress": progress, "total": total, "message": message }));
    }

    fn log(&self, level: LogLevel, logger: Option<&str>, data: &Value) {
        (self.seen.lock().unwrap()).push(json!({ "log": level, "logger": logger, "data": data }));
    }

    fn ask(&self, ask: Ask) -> AskFuture<'_> {
        (self.seen.lock().unwrap())
            .push(json!({ "ask": ask.key, "method": ask.kind.method(), "params": ask.params }));
        let delay = self.delay;
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            Ok::<Value, AskError>(match ask.kind {
                AskKind::Elicitation => {
                    json!({ "action": "accept", "content": { "name": "Ada", "password": "hunter2" } })
                }
                AskKind::Sampling => json!({
                    "role": "assistant",
                    "content": { "type": "text", "text": "Paris" },
                    "model": "test-model"
                }),
                AskKind::Roots => json!({ "roots": [{ "uri": "file:///work", "name": "work" }] }),
            })
        })
    }
}

/// A caller that declared it can be asked everything.
pub fn everything() -> CallerCan {
    CallerCan {
        elicit_form: true,
        elicit_url: true,
        sample: true,
        roots: true,
    }
}

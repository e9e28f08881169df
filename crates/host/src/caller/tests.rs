//! The caller gate at its hook: each check, against a relay that records what reaches it.

use std::sync::Mutex;

use serde_json::json;

use super::*;

/// A relay that records what reaches it, and answers every ask with `{"asked": key}`.
#[derive(Default)]
struct Recorder {
    can: CallerCan,
    seen: Mutex<Vec<String>>,
}

impl Relay for Recorder {
    fn can(&self) -> CallerCan {
        self.can
    }
    fn progress(&self, progress: f64, total: Option<f64>, _: Option<&str>) {
        self.seen
            .lock()
            .unwrap()
            .push(format!("progress {progress}/{total:?}"));
    }
    fn log(&self, level: LogLevel, _: Option<&str>, data: &Value) {
        self.seen
            .lock()
            .unwrap()
            .push(format!("log {level:?} {data}"));
    }
    fn ask(&self, ask: Ask) -> crate::relay::AskFuture<'_> {
        self.seen.lock().unwrap().push(format!("ask {}", ask.key));
        Box::pin(async move { Ok(json!({ "asked": ask.key })) })
    }
}

fn everything() -> CallerCan {
    CallerCan {
        elicit_form: true,
        elicit_url: true,
        sample: true,
        roots: true,
    }
}

fn grant(declared: &CallerRequest, config: &str, secret: &str) -> Arc<CallerGrant> {
    let config: CallerConfig = toml::from_str(config).unwrap();
    config.check().unwrap();
    let secrets = vec![("api".to_owned(), secret.as_bytes().to_vec())];
    Arc::new(CallerGrant::for_adapter(
        &config,
        "acme.forms",
        declared,
        secrets,
    ))
}

fn all_declared() -> CallerRequest {
    CallerRequest {
        progress: true,
        log: true,
        ask: vec![AskKind::Elicitation, AskKind::Sampling, AskKind::Roots],
    }
}

const GRANTED: &str = r#"
[[grant]]
adapter = "acme.*"
ask = ["elicitation", "sampling"]
max_asks = 2
max_sampling_tokens = 100
"#;

fn form(key: &str, message: &str) -> Question {
    Question {
        key: key.to_owned(),
        kind: AskKind::Elicitation,
        params: json!({
            "message": message,
            "requestedSchema": { "type": "object", "properties": { "name": { "type": "string" } } }
        })
        .to_string(),
    }
}

fn refusal(result: &Result<Value, AskError>) -> String {
    match result {
        Err(AskError::Refused(why)) => why.clone(),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[tokio::test]
async fn notifications_reach_the_relay_only_when_declared() {
    let relay = Arc::new(Recorder::default());
    let quiet = CallerRequest::default();
    let mut gate = CallerGate::new(grant(&quiet, "", "s3cret"), Some(relay.clone()), false);
    gate.progress(1.0, Some(2.0), None);
    gate.notify(LogLevel::Info, None, "\"hello\"".to_owned());
    assert!(relay.seen.lock().unwrap().is_empty());
    let record = gate.into_record().unwrap();
    assert_eq!((record.progress.dropped, record.log.dropped), (1, 1));
    assert_eq!(
        record.progress.dropped_because.as_deref(),
        Some("the manifest does not declare `[caller] progress = true`")
    );

    let mut gate = CallerGate::new(
        grant(&all_declared(), "", "s3cret"),
        Some(relay.clone()),
        false,
    );
    gate.progress(1.0, Some(2.0), None);
    gate.progress(f64::NAN, None, None);
    gate.notify(
        LogLevel::Warning,
        Some("db".to_owned()),
        "not json".to_owned(),
    );
    assert_eq!(
        *relay.seen.lock().unwrap(),
        ["progress 1/Some(2.0)", "log Warning \"not json\""]
    );
    let record = gate.into_record().unwrap();
    assert_eq!((record.progress.relayed, record.progress.dropped), (1, 1));
    assert_eq!(record.log.relayed, 1);

    // No relay: dropped, and counted.
    let mut gate = CallerGate::new(grant(&all_declared(), "", "s3cret"), None, false);
    gate.progress(1.0, None, None);
    assert_eq!(
        gate.into_record()
            .unwrap()
            .progress
            .dropped_because
            .as_deref(),
        Some("no caller is attached to this call")
    );
}

#[tokio::test]
async fn an_ask_is_refused_unless_declared_granted_well_formed_and_within_budget() {
    let relay = Arc::new(Recorder {
        can: everything(),
        ..Recorder::default()
    });
    // Not declared.
    let declared = CallerRequest {
        ask: vec![AskKind::Sampling],
        ..CallerRequest::default()
    };
    let mut gate = CallerGate::new(
        grant(&declared, GRANTED, "s3cret"),
        Some(relay.clone()),
        false,
    );
    let why = refusal(&gate.ask_all(vec![form("a", "hi")]).await[0]);
    assert!(why.contains("does not declare `elicitation`"), "{why}");
    // Declared, not granted.
    let mut gate = CallerGate::new(
        grant(&all_declared(), "", "s3cret"),
        Some(relay.clone()),
        false,
    );
    let why = refusal(&gate.ask_all(vec![form("a", "hi")]).await[0]);
    assert!(
        why.contains("has not granted adapter `acme.forms`"),
        "{why}"
    );
    assert!(relay.seen.lock().unwrap().is_empty(), "nothing was sent");

    let mut gate = CallerGate::new(
        grant(&all_declared(), GRANTED, "s3cret"),
        Some(relay.clone()),
        false,
    );
    let sampling = |key: &str, tokens: u64| Question {
        key: key.to_owned(),
        kind: AskKind::Sampling,
        params: json!({ "messages": [], "maxTokens": tokens }).to_string(),
    };
    let results = gate
        .ask_all(vec![
            sampling("big", 101),
            form("bad key!", "hi"),
            form("leak", "your key is s3cret"),
            form("leak2", "https://x.example/?k=s%33cret"),
            Question {
                key: "roots".to_owned(),
                kind: AskKind::Roots,
                params: "{}".to_owned(),
            },
            form("one", "hi"),
            sampling("two", 100),
            form("three", "over"),
            form("one", "again"),
        ])
        .await;
    let whys: Vec<String> = results.iter().take(5).map(refusal).collect();
    assert!(
        whys[0].contains("`maxTokens` is 101; the operator allows this adapter at most 100"),
        "{}",
        whys[0]
    );
    assert!(whys[1].contains("must be 1-64 of"), "{}", whys[1]);
    assert!(whys[2].contains("egress credential `api`"), "{}", whys[2]);
    assert!(whys[3].contains("egress credential `api`"), "{}", whys[3]);
    assert!(whys[4].contains("has not granted"), "{}", whys[4]);
    assert_eq!(results[5], Ok(json!({ "asked": "one" })));
    assert_eq!(results[6], Ok(json!({ "asked": "two" })));
    assert!(refusal(&results[7]).contains("asks (`max_asks`) are spent"));
    assert!(refusal(&results[8]).contains("was asked already"));
    assert_eq!(*relay.seen.lock().unwrap(), ["ask one", "ask two"]);
    let record = gate.into_record().unwrap();
    assert_eq!(record.asks.len(), 9);
    assert_eq!(record.asks[5].outcome, AskOutcome::Answered);
    assert_eq!(record.asks[2].outcome, AskOutcome::Refused);
}

#[tokio::test]
async fn an_ask_the_caller_cannot_answer_is_not_sent_and_none_without_a_caller() {
    let relay = Arc::new(Recorder {
        can: CallerCan {
            elicit_form: true,
            ..CallerCan::default()
        },
        ..Recorder::default()
    });
    let mut gate = CallerGate::new(
        grant(&all_declared(), GRANTED, "s3cret"),
        Some(relay.clone()),
        false,
    );
    let url = Question {
        key: "open".to_owned(),
        kind: AskKind::Elicitation,
        params: json!({ "mode": "url", "message": "Sign in", "url": "https://example.com/x", "elicitationId": "e" }).to_string(),
    };
    let results = gate.ask_all(vec![url]).await;
    assert_eq!(
        results[0],
        Err(AskError::NotSupported("elicitation/create (url)"))
    );
    assert!(relay.seen.lock().unwrap().is_empty());
    let mut gate = CallerGate::new(grant(&all_declared(), GRANTED, "s3cret"), None, false);
    assert!(matches!(
        gate.ask_all(vec![form("a", "hi")]).await[0],
        Err(AskError::Unavailable(_))
    ));
}

#[tokio::test]
async fn an_ask_carrying_the_calls_own_secret_is_refused() {
    let relay = Arc::new(Recorder {
        can: everything(),
        ..Recorder::default()
    });
    let mut gate = CallerGate::new(
        grant(&all_declared(), GRANTED, "s3cret"),
        Some(relay.clone()),
        false,
    )
    .holding(vec![("oauth:github".to_owned(), b"gho_alices".to_vec())]);
    let results = gate
        .ask_all(vec![
            form("echo", "the upstream said gho_alices"),
            form("ok", "hi"),
        ])
        .await;
    let why = refusal(&results[0]);
    assert!(why.contains("`oauth:github`"), "{why}");
    assert_eq!(results[1], Ok(json!({ "asked": "ok" })));
    assert_eq!(*relay.seen.lock().unwrap(), ["ask ok"]);
}

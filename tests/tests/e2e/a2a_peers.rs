//! A2A agents behind gatehouse (issue 59, part 1): a peer agent written with the official A2A
//! SDK's server (`tests/clients/a2a_peer.py`, "Room desk") is imported with `gatehouse import
//! a2a`, signed, served, and called by MCP clients (rmcp, and the official TypeScript SDK) as
//! an agent host calls a tool. Each test asserts what reached the peer, from its own log.

use std::time::{Duration, Instant};

use gatehouse_host::config::PluginBudget;
use gatehouse_tests::a2a_peer::Peer;
use gatehouse_tests::admin::request;
use gatehouse_tests::cli::gatehouse_output;
use gatehouse_tests::free_port;
use gatehouse_tests::mcp::{Client, mcp_post, rmcp_call, texts};
use gatehouse_tests::upstream::TestCa;
use serde_json::{Value, json};

use crate::import::{Imported, key_file, typescript_agent};

/// The credential the peer wants, and where the import and the gateway read it.
const PEER_TOKEN: &str = "peer-token-a2a-5d2e";
const PEER_ENV: &str = "A2A_E2E_PEER_TOKEN";
/// The seed (base64) of the key the peer signs its card with.
const PEER_SEED: &str = "c2VlZC1vZi10aGUtcm9vbS1kZXNrLWtleS0wMDAwMDA=";
/// The adapter id of the import.
const ID: &str = "test.desk";
/// The key the peer calls back into the gateway with, and the auditor's token.
const PEER_KEY: &str = "room-desk-key-3f1a";
const AUDITOR: &str = "auditor-token-a2a-77c0";

/// Imports the peer as [`ID`] into `dir/out`, signed with a fresh key, with the peer's
/// credential: the exit code and what it printed, and the key.
fn import(
    peer: &Peer,
    dir: &std::path::Path,
    extra: &[&str],
) -> (i32, String, gatehouse_core::keys::SigningKey) {
    let (key, key_path) = key_file(dir);
    let out = dir.join("out");
    let header = format!("Authorization: Bearer ${{{PEER_ENV}}}");
    let mut args = vec![
        "import",
        "a2a",
        &peer.url,
        "--id",
        ID,
        "--header",
        &header,
        "--out",
        out.to_str().unwrap(),
        "--key",
        key_path.to_str().unwrap(),
    ];
    args.extend(extra);
    let (code, printed) = gatehouse_output(&args, &[(PEER_ENV, PEER_TOKEN)]);
    (code, printed, key)
}

/// The gateway's budgets for a call of the adapter: `ms` of time and of egress.
fn budgets(ms: u64) -> impl FnOnce(&mut gatehouse_host::HostConfig) {
    move |host| {
        host.egress.max_total_ms = ms;
        host.sandbox.plugins.push(PluginBudget {
            id: gatehouse_tests::glob(ID),
            fuel: None,
            timeout_ms: Some(ms),
            memory_mib: None,
        });
    }
}

/// Calls `tool` with `args`: the result's texts, its structured content and the gateway's
/// record of the call.
async fn call(client: &Client, tool: &str, args: Value) -> (Vec<String>, Value, Value) {
    let (result, record) = rmcp_call(client, tool, args, json!({})).await;
    let structured = result.structured_content.clone().unwrap_or(Value::Null);
    (texts(&result), structured, record)
}

/// The whole path: the import reads the signed card and the extended one, and the imported
/// skills run governed, as any adapter's tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_imported_a2a_agent_is_called_through_gatehouse_governed() {
    let peer = Peer::start(&["--sign-key", PEER_SEED, "--extended-token", PEER_TOKEN]);
    let dir = tempfile::tempdir().unwrap();
    let (code, printed, key) = import(&peer, dir.path(), &[]);
    assert_eq!(code, 0, "{printed}");
    // The table of choices (its columns' spaces collapsed), one row per skill.
    let rows: Vec<String> = printed
        .lines()
        .map(|line| line.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    for said in [
        "echo echo observe read_only tag read-only",
        "book book act network no read-only or destructive tag",
        // From the extended card, read with the credential.
        "audit audit observe read_only tag read-only",
        "note: the card is signed; its signature verified with key `room-desk-1`",
    ] {
        assert!(
            rows.iter().any(|row| row.starts_with(said)),
            "{said}\n{printed}"
        );
    }
    let extended = peer.requests("GetExtendedAgentCard");
    assert_eq!(extended.len(), 1, "{:#?}", peer.log());
    assert_eq!(extended[0]["authorization"], format!("Bearer {PEER_TOKEN}"));

    let grant = format!("[[caller.grant]]\nadapter = \"{ID}\"\nask = [\"elicitation\"]\n");
    let out = dir.path().join("out");
    let gateway = Imported::start_tuned(
        &out,
        ID,
        &key,
        (PEER_ENV, PEER_TOKEN),
        &grant,
        budgets(20_000),
    )
    .await;
    let client = gateway.client().await;

    // A read: the message names the skill, and carries the call's id and trace; the gateway,
    // not the adapter, adds the peer's credential.
    let (said, structured, record) = call(
        &client,
        "test.desk.echo",
        json!({ "text": "hi", "data": { "n": 1 } }),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{said:?} {record}");
    assert_eq!(said[0], "echo: hi", "{said:?}");
    assert_eq!(structured["state"], "completed", "{structured}");
    assert_eq!(
        structured["data"][0]["n"].as_f64(),
        Some(1.0),
        "{structured}"
    );
    let sent = peer.requests("SendStreamingMessage");
    let echo = sent.last().expect("the message reached the peer");
    assert_eq!(echo["skill"], "echo");
    assert_eq!(echo["messageId"], record["tool_call_id"]);
    assert_eq!(echo["authorization"], format!("Bearer {PEER_TOKEN}"));
    assert_eq!(echo["a2a_version"], "1.0");
    let trace = record["trace_id"].as_str().unwrap();
    assert!(
        echo["traceparent"]
            .as_str()
            .unwrap_or_default()
            .contains(trace),
        "{echo}"
    );

    // A write, sent twice with the same key: one message, one booking.
    for _ in 0..2 {
        let (said, _, record) = call(
            &client,
            "test.desk.book",
            json!({ "text": "room 4", "idempotency_key": "book-1" }),
        )
        .await;
        assert_eq!(record["outcome"], "OK", "{said:?} {record}");
        assert_eq!(said, ["booked room 4"]);
    }
    let effects = peer.effects();
    assert_eq!(effects.len(), 1, "{effects:?}");
    assert_eq!(effects[0]["messageId"], "book-1");

    // A task that fails is the call's error, quoting the peer.
    let (said, _, record) = call(
        &client,
        "test.desk.fail",
        json!({ "text": "x", "idempotency_key": "fail-1" }),
    )
    .await;
    assert_ne!(record["outcome"], "OK", "{record}");
    assert!(
        said.join(" ").contains("the room is gone"),
        "{said:?} {record}"
    );

    // A question, with nobody to ask (this client declares no elicitation): the result says
    // how to answer, and the answer is another call, through every gate again.
    let (said, asked, record) = call(
        &client,
        "test.desk.ask",
        json!({ "text": "a room", "idempotency_key": "ask-1" }),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{said:?} {record}");
    assert_eq!(asked["state"], "input_required", "{asked}");
    assert_eq!(asked["question"], "Which room?");
    let (said, _, record) = call(
        &client,
        "test.desk.ask",
        json!({
            "text": "Blue",
            "task_id": asked["task_id"],
            "context_id": asked["context_id"],
            "idempotency_key": "ask-2",
        }),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{said:?} {record}");
    assert_eq!(said, ["booked room Blue"]);
    let answer = peer.requests("SendStreamingMessage");
    let answer = answer.last().unwrap();
    assert_eq!(
        (&answer["taskId"], &answer["messageId"]),
        (&asked["task_id"], &json!("ask-2"))
    );

    // The same question, asked of a client that can answer (the TypeScript SDK's): an
    // elicitation, whose answer continues the task within the call.
    let lines = typescript_agent(
        gateway.mcp,
        "2025-11-25",
        "test.desk.ask",
        &json!({ "text": "a room", "idempotency_key": "ask-3" }),
        &["--answer", "Green"],
    )
    .await;
    let event = |kind: &'static str| lines.iter().filter(move |l| l["event"] == kind);
    let elicited: Vec<_> = event("elicitation").collect();
    assert_eq!(elicited.len(), 1, "{lines:#?}");
    assert_eq!(elicited[0]["params"]["message"], "Which room?");
    let result = event("result")
        .next()
        .unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        result["result"]["content"][0]["text"], "booked room Green",
        "{lines:#?}"
    );
    let booked: Vec<Value> = peer
        .effects()
        .into_iter()
        .map(|e| e["text"].clone())
        .collect();
    assert!(booked.contains(&json!("Green")), "{booked:?}");

    // Streaming: each status update reaches the caller as progress.
    let lines = typescript_agent(
        gateway.mcp,
        "2025-11-25",
        "test.desk.count",
        &json!({ "text": "go" }),
        &["--progress"],
    )
    .await;
    let steps: Vec<&str> = lines
        .iter()
        .filter(|l| l["event"] == "progress")
        .filter_map(|l| l["progress"]["message"].as_str())
        .collect();
    for step in ["step 1 of 3", "step 2 of 3", "step 3 of 3"] {
        assert!(steps.contains(&step), "{step}: {lines:#?}");
    }
    let result = lines.iter().find(|l| l["event"] == "result");
    let result = result.unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(result["result"]["content"][0]["text"], "counted to 3");

    // A long task, for a client that takes tasks: an MCP task, polled to the agent's result.
    let lines = typescript_agent(
        gateway.mcp,
        "2025-11-25",
        "test.desk.count",
        &json!({ "text": "go" }),
        &["--task-ttl", "60000"],
    )
    .await;
    let task = lines.iter().find(|l| l["event"] == "task");
    assert!(task.is_some(), "{lines:#?}");
    let result = lines.iter().find(|l| l["event"] == "result");
    let result = result.unwrap_or_else(|| panic!("{lines:#?}"));
    assert_eq!(
        result["result"]["content"][0]["text"], "counted to 3",
        "{lines:#?}"
    );
    drop(client);
    drop(gateway);

    // The card as pinned: no drift; changed: drift, naming the skill and the card.
    let check = ["import", "a2a", "--check", out.to_str().unwrap()];
    let (code, printed) = gatehouse_output(&check, &[(PEER_ENV, PEER_TOKEN)]);
    assert_eq!(code, 0, "{printed}");
    assert!(
        printed.contains("no drift: the 8 imported skills are as pinned"),
        "{printed}"
    );
    peer.drift();
    let (code, printed) = gatehouse_output(&check, &[(PEER_ENV, PEER_TOKEN)]);
    assert_eq!(code, 1, "{printed}");
    for said in ["changed: card", "changed: echo", "drift: "] {
        assert!(printed.contains(said), "{said}\n{printed}");
    }
}

/// An agent on https, with a certificate a private CA issued: the import trusts the CA with
/// `--ca-file`, the gateway with `[egress] extra_root_certificates`. Without the CA, the import
/// refuses in the handshake and writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_on_https_is_imported_and_called_trusting_the_operators_ca() {
    let ca = TestCa::new();
    let dir = tempfile::tempdir().unwrap();
    let (cert, cert_key) = ca.server_pem_files(&["localhost"], dir.path());
    let peer = Peer::start(&["--tls", cert.to_str().unwrap(), cert_key.to_str().unwrap()]);
    assert!(peer.url.starts_with("https://localhost:"), "{}", peer.url);
    let out = dir.path().join("out");

    let (code, printed, _) = import(&peer, dir.path(), &["--include", "echo"]);
    assert_eq!(code, 2, "{printed}");
    assert!(printed.contains("TLS"), "{printed}");
    assert!(!out.exists());

    let ca_file = ca.pem_file();
    let trusted = ["--include", "echo", "--ca-file", ca_file.to_str().unwrap()];
    let (code, printed, key) = import(&peer, dir.path(), &trusted);
    assert_eq!(code, 0, "{printed}");
    let gateway = Imported::start_tuned(&out, ID, &key, (PEER_ENV, PEER_TOKEN), "", |host| {
        budgets(20_000)(host);
        host.egress.extra_root_certificates = vec![ca.pem_file()];
    })
    .await;
    let client = gateway.client().await;
    let (said, _, record) = call(&client, "test.desk.echo", json!({ "text": "over tls" })).await;
    assert_eq!(record["outcome"], "OK", "{said:?} {record}");
    assert_eq!(said[0], "echo: over tls");
}

/// An agent whose card says it does not stream: a message is sent with `SendMessage`, and its
/// task, which the SDK answers at once (`returnImmediately`), is polled to its end with
/// `GetTask`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_that_does_not_stream_has_its_task_polled_to_its_end() {
    let peer = Peer::start(&["--no-streaming"]);
    let dir = tempfile::tempdir().unwrap();
    let (code, printed, key) = import(&peer, dir.path(), &["--include", "count"]);
    assert_eq!(code, 0, "{printed}");
    let manifest = std::fs::read_to_string(dir.path().join("out/manifest.toml")).unwrap();
    assert!(manifest.contains("streaming = false"), "{manifest}");
    let out = dir.path().join("out");
    let gateway =
        Imported::start_tuned(&out, ID, &key, (PEER_ENV, PEER_TOKEN), "", budgets(20_000)).await;
    let client = gateway.client().await;
    let (said, structured, record) =
        call(&client, "test.desk.count", json!({ "text": "go" })).await;
    assert_eq!(record["outcome"], "OK", "{said:?} {record}");
    assert_eq!(said, ["counted to 3"]);
    assert_eq!(structured["state"], "completed");
    assert_eq!(peer.requests("SendMessage").len(), 1, "{:#?}", peer.log());
    assert!(peer.requests("SendStreamingMessage").is_empty());
    assert!(!peer.requests("GetTask").is_empty(), "{:#?}", peer.log());
}

/// A card signed by a key other than the one given is not imported, and nothing is written;
/// an unsigned card with a key given is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_whose_signature_does_not_verify_is_not_imported() {
    let peer = Peer::start(&["--sign-key", PEER_SEED]);
    let dir = tempfile::tempdir().unwrap();
    let other = gatehouse_core::keys::SigningKey::generate("other").unwrap();
    let other = other.public_key().to_base64();
    let (code, printed, _) = import(&peer, dir.path(), &["--card-key", &other]);
    assert_eq!(code, 2, "{printed}");
    assert!(
        printed.contains("does not verify with key `room-desk-1`"),
        "{printed}"
    );
    assert!(!dir.path().join("out").exists());

    let unsigned = Peer::start(&[]);
    let (code, printed, _) = import(&unsigned, dir.path(), &["--card-key", &other]);
    assert_eq!(code, 2, "{printed}");
    assert!(printed.contains("it is not signed"), "{printed}");
    assert!(!dir.path().join("out").exists());
}

/// A peer that never answers ends the call when the operator's time budget runs out, and the
/// gateway records it; a call its caller cancels cancels the peer's task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_peer_times_out_and_a_cancelled_call_cancels_the_peers_task() {
    let peer = Peer::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let (code, printed, key) = import(&peer, dir.path(), &["--include", "hang"]);
    assert_eq!(code, 0, "{printed}");
    let out = dir.path().join("out");

    let gateway =
        Imported::start_tuned(&out, ID, &key, (PEER_ENV, PEER_TOKEN), "", budgets(3_000)).await;
    let client = gateway.client().await;
    let started = Instant::now();
    let (said, _, record) = call(&client, "test.desk.hang", json!({ "text": "wait" })).await;
    assert!(
        matches!(
            record["outcome"].as_str(),
            Some("TOOL_TIMEOUT" | "UPSTREAM_ERROR")
        ),
        "{said:?} {record}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(peer.requests("SendStreamingMessage").len(), 1);
    drop(client);
    drop(gateway);

    // Budgets past the client's patience: the client gives up, and the gateway tells the peer.
    let gateway =
        Imported::start_tuned(&out, ID, &key, (PEER_ENV, PEER_TOKEN), "", budgets(30_000)).await;
    let started = Instant::now();
    let lines = typescript_agent(
        gateway.mcp,
        "2025-11-25",
        "test.desk.hang",
        &json!({ "text": "wait" }),
        &["--timeout", "5000", "--linger", "1000"],
    )
    .await;
    assert!(lines.iter().any(|l| l["event"] == "error"), "{lines:#?}");
    let cancelled = loop {
        let cancelled = peer.cancelled();
        if !cancelled.is_empty() || started.elapsed() > Duration::from_secs(20) {
            break cancelled;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let tasks = peer.requests("CancelTask");
    assert_eq!(cancelled.len(), 1, "{:#?}", peer.log());
    assert_eq!(tasks.len(), 1, "{:#?}", peer.log());
    assert_eq!(tasks[0]["taskId"], json!(cancelled[0]));
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "{:?}",
        started.elapsed()
    );
}

/// Two hops, one trail: an MCP client calls the peer's `callback` skill through gatehouse; the
/// peer calls back into gatehouse over MCP (the official Python SDK, with a key of its own,
/// and the delegation the gateway sent it) for `echo`, its own skill, which gatehouse sends
/// to it again. Each hop passes the gateway's pipeline; the audit log has both calls in one
/// trace, the second on the first one's behalf: its principal chain the first one's, then the
/// peer's. A delegated call above the delegating call's mode, and a forged delegation, run
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_calling_back_into_gatehouse_is_governed_at_each_hop_in_one_trace() {
    let mcp = free_port();
    let gateway_url = format!("http://127.0.0.1:{mcp}/mcp");
    let peer = Peer::start(&["--gateway", &gateway_url, "--gateway-key", PEER_KEY]);
    let dir = tempfile::tempdir().unwrap();
    let (code, printed, key) = import(
        &peer,
        dir.path(),
        &[
            "--include",
            "callback",
            "--include",
            "echo",
            "--include",
            "book",
        ],
    );
    assert_eq!(code, 0, "{printed}");
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    let extra = format!(
        "[[mcp.api_key]]\ntenant = \"default\"\nprincipal = \"agent:room-desk\"\nfile = {:?}\n\n\
         [[admin.token]]\nprincipal = \"usr_audit\"\nroles = [\"auditor\"]\nfile = {:?}\n",
        file("peer.key", PEER_KEY),
        file("auditor.token", AUDITOR),
    );
    let gateway = Imported::start_at(
        mcp,
        &dir.path().join("out"),
        ID,
        &key,
        (PEER_ENV, PEER_TOKEN),
        &extra,
        budgets(30_000),
    )
    .await;
    let client = gateway.client().await;
    let (said, _, record) = call(
        &client,
        "test.desk.callback",
        json!({ "data": { "tool": "test.desk.echo", "arguments": { "text": "from the desk" } } }),
    )
    .await;
    assert_eq!(record["outcome"], "OK", "{said:?} {record}");
    assert!(said.join(" ").contains("echo: from the desk"), "{said:?}");

    // What reached the peer: the callback, then its own echo, sent by the gateway on the
    // peer's call, in the same trace.
    let sent = peer.requests("SendStreamingMessage");
    let skills: Vec<&Value> = sent.iter().map(|m| &m["skill"]).collect();
    assert_eq!(skills, [&json!("callback"), &json!("echo")], "{sent:#?}");
    let trace = record["trace_id"].as_str().unwrap();
    for message in &sent {
        assert!(
            message["traceparent"]
                .as_str()
                .unwrap_or_default()
                .contains(trace),
            "{message}"
        );
    }

    // Both requests carried the delegation of the call that made them.
    assert!(
        sent.iter().all(|m| m["delegation"].is_string()),
        "{sent:#?}"
    );

    // The audit log: both calls, one trace; the second on the first one's behalf. (A read's
    // entry is written once its result is delivered: read until both are there.)
    let mut calls = Vec::new();
    for _ in 0..50 {
        let (status, body) = request(gateway.admin, "GET", "/v1/audit", Some(AUDITOR), None).await;
        assert_eq!(status, 200, "{body:?}");
        let audit: Value = serde_json::from_slice(&body).unwrap();
        calls = (audit["entries"].as_array().into_iter().flatten())
            .map(|entry| entry["record"]["call"].clone())
            .filter(|call| call["trace_id"] == trace)
            .collect();
        if calls.len() >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let chain = |call: &Value| -> Vec<Value> {
        (call["principal_chain"].as_array().into_iter().flatten())
            .map(|p| p["id"].clone())
            .collect()
    };
    let of = |tool: &str| {
        (calls.iter())
            .find(|call| call["capability_id"] == tool)
            .unwrap_or_else(|| panic!("no call of {tool}: {calls:#?}"))
    };
    let (outer, inner) = (of("test.desk.callback"), of("test.desk.echo"));
    assert_eq!(chain(outer), [json!("agent:bot")]);
    assert_eq!(chain(inner), [json!("agent:bot"), json!("agent:room-desk")]);
    assert_eq!(
        inner["delegated_by"],
        json!({ "tool_call_id": record["tool_call_id"], "approval_mode": "read_only" }),
        "{inner:#}"
    );

    // On behalf of a read-only call, the peer cannot book: its call back is refused, and the
    // booking never reaches it.
    let (said, _, record) = call(
        &client,
        "test.desk.callback",
        json!({ "data": { "tool": "test.desk.book",
                          "arguments": { "text": "room 9", "idempotency_key": "cb-book-1" } } }),
    )
    .await;
    assert_ne!(record["outcome"], "OK", "{said:?} {record}");
    assert!(
        said.join(" ")
            .contains("a delegated call cannot run above it"),
        "{said:?} {record}"
    );
    assert!(peer.effects().is_empty(), "{:#?}", peer.effects());
    let skills: Vec<Value> = (peer.requests("SendStreamingMessage").iter())
        .map(|m| m["skill"].clone())
        .collect();
    assert_eq!(
        skills,
        [json!("callback"), json!("echo"), json!("callback")]
    );

    // A forged delegation is refused at the door: nothing runs, nothing reaches the peer.
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": { "name": "test.desk.echo", "arguments": { "text": "x" } } });
    let bearer = format!("Bearer {PEER_KEY}");
    let headers = [
        ("authorization", bearer.as_str()),
        ("gatehouse-delegation", "eyJ0ZW5hbnQiOiJkZWZhdWx0In0.AAAA"),
    ];
    let (status, _, answer) = mcp_post(mcp, "/mcp", &headers, body.to_string()).await;
    assert_eq!(status, 403, "{answer}");
    assert!(answer.contains("DELEGATION_INVALID"), "{answer}");
    assert_eq!(peer.requests("SendStreamingMessage").len(), 3);
}

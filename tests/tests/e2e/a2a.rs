//! gatehouse as an A2A agent (issue 59, part 2), driven by the official A2A SDK (`a2a-sdk`,
//! pinned in `tests/clients`), as a peer agent would: it resolves the agent card, makes its
//! client from it, and sends messages naming a skill.
//!
//! - The card lists the caller's tools as skills, and one JSON-RPC interface.
//! - A read-only tool answers at once: a completed task holding the upstream's answer.
//! - A write the policy sends to approval waits in `AUTH_REQUIRED`, naming where an approver
//!   decides; nothing reaches the upstream. Approved through the admin API, the task runner
//!   runs it: `COMPLETED`, one POST upstream; the same message again is that one effect.
//! - Another principal, of this tenant or another, cannot read or list the task.
//! - A cancelled task withdraws its approval, and nothing runs.
//! - Streamed, a message's task is one event; a subscriber follows a task from its waiting
//!   state to its end, and an ended task has nothing to follow.
//! - A webhook on loopback is refused; one the operator allows there hears each state, with
//!   its token. A tenant's open tasks are bounded: a message beyond the bound runs nothing.
//! - What is malformed (no version header, a message without a data part, a forged key) is
//!   refused with the protocol's error.

use std::time::Duration;

use gatehouse_host::config::PolicyDefault;
use gatehouse_tests::agent::a2a;
use gatehouse_tests::artifacts::{POLICY_PROBE, REST};
use gatehouse_tests::gateway::{Gateway, Serve};
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{bind, free_port, grant, http};
use serde_json::{Value, json};

/// The peer agent's API key: principal `agent:alice`, tenant `default`.
const ALICE: &str = "alice-a2a-key-3b9e";
/// Another agent of the same tenant: principal `agent:bob`.
const BOB: &str = "bob-a2a-key-71c2";
/// An agent of another tenant: principal `agent:eve`, tenant `other`.
const EVE: &str = "eve-a2a-key-c8d4";
/// An approver's admin token.
const APPROVER: &str = "approver-a2a-token-5e60";

/// A gateway serving `gatehouse.rest` over MCP and A2A (`[mcp.a2a]`), its writes sent to
/// approval by the policy probe, with the admin API and three agents' keys.
struct Peer {
    _gateway: Gateway,
    /// The public key of the card's signer, base64.
    card_key: String,
    upstream: Upstream,
    mcp: u16,
    admin: u16,
    _dir: tempfile::TempDir,
}

impl Peer {
    async fn start() -> Self {
        Self::start_with("").await
    }

    /// [`Peer::start`], with `a2a` added to the `[mcp.a2a]` table.
    async fn start_with(a2a: &str) -> Self {
        let upstream = Upstream::start().await;
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            path.display().to_string()
        };
        let mut host = gatehouse_tests::host::rest_config(&upstream);
        host.pipeline.tools = vec![grant("gatehouse.rest.*", &["default", "other"])];
        host.pipeline.policy_default = PolicyDefault::Allow;
        host.pipeline.policies.push(bind(
            "test.policy-probe",
            "gatehouse.rest.send",
            0,
            json!({ "verdict": "require_approval" }),
        ));
        // Policies see how a call came (contract 0.8.0).
        host.pipeline.policies.push(bind(
            "test.policy-probe",
            "gatehouse.rest.get",
            1,
            json!({ "report_origin": true }),
        ));
        host.store.path = Some(dir.path().join("gatehouse.db"));
        let signer = gatehouse_host::plugin::signature::SigningKey::generate("acme-card").unwrap();
        let card_key = signer.public_key().to_base64();
        let signer = file("card.secret.toml", signer.to_toml().as_bytes());
        // Results carry receipts, signed with a key of their own.
        let receipts = gatehouse_host::plugin::signature::SigningKey::generate("acme-receipts")
            .unwrap()
            .to_toml();
        host.receipts.key = Some(file("receipts.secret.toml", receipts.as_bytes()).into());
        let (mcp, admin) = (free_port(), free_port());
        let key = |tenant: &str, principal: &str, value: &str| {
            gatehouse_tests::gateway::api_key(dir.path(), tenant, principal, value)
        };
        let text = format!(
            "{}\n[mcp]\nlisten = \"127.0.0.1:{mcp}\"\n\n[mcp.a2a]\nname = \"acme-tools\"\nkey = {signer:?}\n{a2a}\n\n{}{}{}[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n[[admin.token]]\nprincipal = \"usr_ops_ana\"\nroles = [\"approver\", \"auditor\"]\nfile = {:?}\n",
            toml::to_string(&host).unwrap(),
            key("default", "agent:alice", ALICE),
            key("default", "agent:bob", BOB),
            key("other", "agent:eve", EVE),
            file("approver.token", APPROVER.as_bytes()),
        );
        let gateway = Serve::config(file("gatehouse.toml", text.as_bytes()))
            .adapter(file("rest.wasm", &REST.signed()))
            .policy(file("probe.wasm", &POLICY_PROBE.signed()))
            .wait_for(mcp)
            .wait_for(admin)
            .start()
            .await;
        Self {
            _gateway: gateway,
            card_key,
            upstream,
            mcp,
            admin,
            _dir: dir,
        }
    }

    fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.mcp)
    }

    /// The SDK's agent doing `action` as `key`: its one answer.
    async fn one(&self, key: &str, action: &[&str]) -> Value {
        let mut lines = a2a(&self.base(), Some(key), action).await;
        assert_eq!(lines.len(), 1, "{lines:?}");
        lines.remove(0)
    }

    /// `ListTasks` of `request`'s fields, as `key`: the answer.
    async fn list(&self, key: &str, request: Value) -> Value {
        self.one(key, &["list", &request.to_string()]).await
    }

    /// `SendMessage` of `tool` with `args` as message `id`, as `key`: the task answered.
    async fn send(&self, key: &str, tool: &str, args: &Value, id: &str) -> Value {
        let answer = self.one(key, &["send", tool, &args.to_string(), id]).await;
        answer["task"].clone()
    }

    /// `SendMessage` of a write of `amount` as alice, message `id`: its task, which must wait
    /// for an approval.
    async fn waiting(&self, amount: u32, id: &str) -> Value {
        let task = self
            .send(ALICE, "gatehouse.rest.send", &write(self, amount), id)
            .await;
        assert_eq!(
            task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
            "{task}"
        );
        task
    }

    /// The POSTs the upstream received.
    fn posts(&self) -> usize {
        (self.upstream.seen().iter())
            .filter(|seen| seen.method == "POST")
            .count()
    }

    /// Approves approval `id` through the admin API.
    async fn approve(&self, id: &str) {
        let (status, body) = gatehouse_tests::admin::request(
            self.admin,
            "POST",
            &format!("/v1/approvals/{id}/approve"),
            Some(APPROVER),
            Some(String::new().into()),
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    }

    /// Polls task `id` (as alice) until its state is `state`: the task.
    async fn until(&self, id: &str, state: &str) -> Value {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let task = self.one(ALICE, &["get", id]).await;
            if task["status"]["state"] == state {
                return task;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "task {id} is not {state}: {task}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// One raw JSON-RPC request to the A2A endpoint, with `headers`: the HTTP status and the
    /// answer.
    async fn raw(&self, headers: &[(&str, &str)], body: &Value) -> (u16, Value) {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        let (status, _, bytes) = http(self.mcp, "POST", "/a2a", &all, body.to_string()).await;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }
}

/// What `look` finds, looking again until it finds something (30 s at most).
async fn heard<T>(look: impl Fn() -> Option<T>) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(found) = look() {
            return found;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no notification in 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The message of the reason `code` a policy module gave in the audit `entry`'s decision.
fn reason(entry: &Value, code: &str) -> String {
    let modules = entry["record"]["result"]["policy_decision"]["modules"].as_array();
    (modules.into_iter().flatten())
        .flat_map(|module| module["reasons"].as_array().into_iter().flatten())
        .find(|reason| reason["code"] == code)
        .and_then(|reason| reason["message"].as_str())
        .unwrap_or_else(|| panic!("no reason {code}: {entry}"))
        .to_owned()
}

/// The upstream's `/orders` as a read, and as a write.
fn read(peer: &Peer) -> Value {
    json!({ "url": peer.upstream.url("/orders/7") })
}

fn write(peer: &Peer, amount: u32) -> Value {
    json!({ "url": peer.upstream.url("/refunds"), "method": "POST", "body": { "amount": amount } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_agent_calls_governed_tools_over_a2a_with_approval_as_in_task_authorization() {
    let peer = Peer::start().await;

    // The card: the caller's tools as skills, one JSON-RPC interface at this listener, signed:
    // the SDK's verifier accepts it, and refuses it changed.
    let answer = peer.one(ALICE, &["card", &peer.card_key]).await;
    assert_eq!(answer["verified"], true, "{answer}");
    let tampered = answer["tampered_verified"].as_str().unwrap_or_default();
    assert!(tampered.starts_with("InvalidSignaturesError"), "{answer}");
    let card = answer["card"].clone();
    assert_eq!(card["name"], "acme-tools");
    assert_eq!(
        card["supportedInterfaces"],
        json!([{ "url": format!("{}/a2a", peer.base()), "protocolBinding": "JSONRPC", "protocolVersion": "1.0" }])
    );
    let skills: Vec<&str> = (card["skills"].as_array().unwrap().iter())
        .map(|skill| skill["id"].as_str().unwrap())
        .collect();
    assert!(skills.contains(&"gatehouse.rest.get"), "{card}");
    assert!(skills.contains(&"gatehouse.rest.send"), "{card}");
    // The extended card is the card as the identified caller sees it.
    let extended = peer.one(ALICE, &["extended"]).await;
    assert_eq!(extended["skills"], card["skills"], "{extended}");

    // A read-only tool answers at once: the upstream's answer is the task's artifact.
    let task = peer
        .send(ALICE, "gatehouse.rest.get", &read(&peer), "msg-read-1")
        .await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    assert_eq!(
        task["metadata"]["gatehouse/result"]["outcome"], "OK",
        "{task}"
    );
    let first = task.clone();
    let artifact = task["artifacts"][0]["parts"].to_string();
    assert!(artifact.contains("/orders/7"), "{task}");
    assert!(
        task["contextId"]
            .as_str()
            .is_some_and(|c| c.starts_with("ctx_")),
        "{task}"
    );
    // Streamed, the message's task is one event.
    let events = a2a(
        &peer.base(),
        Some(ALICE),
        &[
            "stream",
            "gatehouse.rest.get",
            &read(&peer).to_string(),
            "msg-read-2",
        ],
    )
    .await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(
        events[0]["task"]["status"]["state"], "TASK_STATE_COMPLETED",
        "{events:?}"
    );
    // One trail: the audit record keeps the A2A context as the call's session, and the
    // message as its idempotency key.
    let call_id = task["metadata"]["gatehouse/result"]["tool_call_id"]
        .as_str()
        .unwrap();
    let (status, body) = gatehouse_tests::admin::request(
        peer.admin,
        "GET",
        &format!("/v1/audit?tool_call_id={call_id}"),
        Some(APPROVER),
        None,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let audit: Value = serde_json::from_slice(&body).unwrap();
    let call = &audit["entries"][0]["record"]["call"];
    assert_eq!(call["session_id"], task["contextId"], "{audit}");
    assert_eq!(call["idempotency_key"], "a2a:msg-read-1", "{audit}");
    // The policy saw the call come by A2A; the same tool called over MCP, by MCP.
    assert_eq!(call["protocol"], "a2a", "{audit}");
    assert_eq!(reason(&audit["entries"][0], "PROTOCOL"), "a2a", "{audit}");
    let bearer = format!("Bearer {ALICE}");
    let over_mcp = gatehouse_tests::mcp::call(
        peer.mcp,
        &[("authorization", bearer.as_str())],
        "gatehouse.rest.get",
        read(&peer),
        Value::Null,
    )
    .await;
    assert_eq!(
        gatehouse_tests::mcp::outcome_of(&over_mcp),
        "OK",
        "{over_mcp}"
    );
    let over_mcp = gatehouse_tests::mcp::record(&over_mcp)["tool_call_id"].clone();
    // A read's entry is written once its result is delivered: read until it is there.
    let mut entry = Value::Null;
    for _ in 0..50 {
        let (_, body) = gatehouse_tests::admin::request(
            peer.admin,
            "GET",
            &format!("/v1/audit?tool_call_id={}", over_mcp.as_str().unwrap()),
            Some(APPROVER),
            None,
        )
        .await;
        let audit: Value = serde_json::from_slice(&body).unwrap();
        entry = audit["entries"][0].clone();
        if !entry.is_null() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reason(&entry, "PROTOCOL"), "mcp", "{entry}");
    assert_eq!(reason(&entry, "CHAIN"), "agent:alice", "{entry}");

    // A write the policy sends to approval waits for a person; nothing is sent.
    let task = peer.waiting(40, "msg-refund-1").await;
    let said = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap();
    assert!(
        said.contains("waiting for approval") && said.contains("/console/"),
        "{said}"
    );
    let id = task["id"].as_str().unwrap().to_owned();
    let approval = task["metadata"]["gatehouse/approval_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(peer.posts(), 0);

    // Nobody else reads it: another principal of the tenant, or another tenant.
    for other in [BOB, EVE] {
        let answer = peer.one(other, &["get", &id]).await;
        assert_eq!(answer["error"]["type"], "TaskNotFoundError", "{answer}");
        let listed = peer.one(other, &["list"]).await;
        assert!(!listed.to_string().contains(&id), "{listed}");
    }

    // Approved through the admin API, the task runs: completed, one effect upstream.
    peer.approve(&approval).await;
    let done = peer.until(&id, "TASK_STATE_COMPLETED").await;
    assert_eq!(
        done["metadata"]["gatehouse/result"]["outcome"], "OK",
        "{done}"
    );
    assert_eq!(peer.posts(), 1);
    // The same message again is the same effect: replayed, not sent.
    let again = peer
        .send(
            ALICE,
            "gatehouse.rest.send",
            &write(&peer, 40),
            "msg-refund-1",
        )
        .await;
    assert_eq!(again["status"]["state"], "TASK_STATE_COMPLETED", "{again}");
    assert!(
        again["metadata"]["gatehouse/result"]["replay_of"].is_string(),
        "a replay: {again}"
    );
    assert_eq!(peer.posts(), 1, "{again}");
    let listed = peer.one(ALICE, &["list"]).await;
    assert!(listed.to_string().contains(&id), "{listed}");

    // A cancelled task withdraws its approval: nothing runs.
    let task = peer.waiting(90, "msg-refund-2").await;
    let id = task["id"].as_str().unwrap().to_owned();
    let cancelled = peer.one(ALICE, &["cancel", &id]).await;
    assert_eq!(
        cancelled["status"]["state"], "TASK_STATE_CANCELED",
        "{cancelled}"
    );
    let again = peer.one(ALICE, &["cancel", &id]).await;
    assert_eq!(again["error"]["type"], "TaskNotCancelableError", "{again}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(peer.posts(), 1);

    // A webhook on a loopback address is refused: it would reach the gateway's own network.
    let push = peer
        .one(ALICE, &["push", &id, "http://127.0.0.1:9/hook"])
        .await;
    assert_eq!(push["error"]["type"], "InvalidParamsError", "{push}");
    let said = push["error"]["message"].as_str().unwrap();
    assert!(
        said.contains("127.0.0.1 is a loopback address") && said.contains("push_allow_private"),
        "{said}"
    );

    // ListTasks narrows before it pages: alice's completed tasks a page of one at a time, each
    // page full, each task once, all of them counted; the cancelled one in none.
    let list = |request: Value| peer.list(ALICE, request);
    let mut completed = Vec::new();
    let mut token = String::new();
    loop {
        let page = list(json!({ "status": "TASK_STATE_COMPLETED", "pageSize": 1,
                                "pageToken": token }))
        .await;
        let tasks = page["tasks"].as_array().unwrap();
        assert_eq!(tasks.len(), 1, "{page}");
        assert_eq!(
            tasks[0]["status"]["state"], "TASK_STATE_COMPLETED",
            "{page}"
        );
        // Artifacts only when asked for.
        assert!(tasks[0].get("artifacts").is_none(), "{page}");
        assert_eq!(page["pageSize"], 1, "{page}");
        completed.push(tasks[0]["id"].as_str().unwrap().to_owned());
        match page["nextPageToken"].as_str() {
            Some(next) if !next.is_empty() => token = next.to_owned(),
            _ => {
                assert_eq!(page["totalSize"], completed.len(), "{page}");
                break;
            }
        }
    }
    let mut distinct = completed.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), completed.len(), "{completed:?}");
    assert!(completed.len() >= 3, "{completed:?}");
    assert!(completed.contains(&first["id"].as_str().unwrap().to_owned()));
    assert!(!completed.contains(&id), "{completed:?}");
    let cancelled = list(json!({ "status": "TASK_STATE_CANCELED" })).await;
    assert_eq!(
        cancelled["tasks"].as_array().unwrap().len(),
        1,
        "{cancelled}"
    );
    assert_eq!(cancelled["tasks"][0]["id"], id.as_str(), "{cancelled}");
    // One context's tasks, with their artifacts; those whose status changed since a time.
    let context = list(json!({ "contextId": first["contextId"], "includeArtifacts": true })).await;
    assert_eq!(context["totalSize"], 1, "{context}");
    assert_eq!(context["tasks"][0]["id"], first["id"], "{context}");
    assert_eq!(
        context["tasks"][0]["artifacts"], first["artifacts"],
        "{context}"
    );
    let since =
        list(json!({ "statusTimestampAfter": cancelled["tasks"][0]["status"]["timestamp"] })).await;
    let since: Vec<&Value> = (since["tasks"].as_array().unwrap().iter())
        .map(|task| &task["id"])
        .collect();
    assert!(since.contains(&&json!(id)), "{since:?}");
    assert!(!since.contains(&&first["id"]), "{since:?}");
    // A page size A2A does not allow, or a token that is no page of alice's, is refused.
    let refused = list(json!({ "pageSize": 500 })).await;
    assert_eq!(refused["error"]["type"], "InvalidParamsError", "{refused}");
    assert!(refused.to_string().contains("from 1 to 100"), "{refused}");
    let bobs = peer.list(BOB, json!({ "pageToken": id })).await;
    assert_eq!(bobs["error"]["type"], "InvalidParamsError", "{bobs}");
}

/// The gateway publishes its keys at `/.well-known/jwks.json`: the card's, which its
/// signature names as `jku`, and the receipts'. So `gatehouse import a2a` of this gateway
/// verifies its card with no key handed over (gatehouse behind gatehouse), and a receipt
/// verifies offline against a saved copy of the key set.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gateways_published_keys_verify_its_card_and_its_receipts() {
    let peer = Peer::start().await;
    let (status, _, body) = http(peer.mcp, "GET", "/.well-known/jwks.json", &[], "").await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let set: Value = serde_json::from_slice(&body).unwrap();
    let ids: Vec<&Value> = (set["keys"].as_array().unwrap().iter())
        .map(|key| &key["kid"])
        .collect();
    assert_eq!(ids, [&json!("acme-receipts"), &json!("acme-card")], "{set}");
    let (status, headers, _) = http(peer.mcp, "POST", "/.well-known/jwks.json", &[], "{}").await;
    assert_eq!((status, headers["allow"].to_str().unwrap()), (405, "GET"));

    // The card's signature names the key set; the import trusts the key it serves there.
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, printed) = gatehouse_tests::cli::gatehouse_output(
        &[
            "import",
            "a2a",
            &format!("{}/", peer.base()),
            "--id",
            "test.acme",
            "--header",
            "Authorization: Bearer ${ACME_KEY}",
            "--out",
            out.to_str().unwrap(),
        ],
        &[("ACME_KEY", ALICE)],
    );
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("/.well-known/jwks.json"), "{printed}");
    let manifest = std::fs::read_to_string(out.join("manifest.toml")).unwrap();
    assert!(
        manifest.contains(&peer.card_key),
        "the card's key is pinned: {manifest}"
    );
    assert!(manifest.contains("gatehouse.rest.get"), "{manifest}");

    // A receipt, checked offline with the saved key set.
    let task = peer
        .send(ALICE, "gatehouse.rest.get", &read(&peer), "msg-receipt-1")
        .await;
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED", "{task}");
    let result = &task["metadata"]["gatehouse/result"];
    assert_eq!(result["receipt"]["key_id"], "acme-receipts", "{result}");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let (keys, receipt) = (
        write("jwks.json", &String::from_utf8_lossy(&body)),
        write("result.json", &result.to_string()),
    );
    let verify = |receipt: &str, keys: &str| {
        gatehouse_tests::cli::gatehouse_output(&["receipt", "verify", receipt, "--key", keys], &[])
    };
    let (code, printed) = verify(&receipt, &keys);
    assert_eq!(code, 0, "{printed}");
    assert!(printed.contains("signed by `acme-receipts`"), "{printed}");
    // A key set without the receipt's key says so.
    let card_only = json!({ "keys": [set["keys"][1]] }).to_string();
    let (code, printed) = verify(&receipt, &write("card-only.json", &card_only));
    assert_eq!(code, 2, "{printed}");
    assert!(printed.contains("has no key `acme-receipts`"), "{printed}");
}

/// Webhooks the operator allows on loopback hear of each state, with their token; a tenant's
/// open tasks are bounded, and a message beyond the bound runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhooks_hear_each_state_and_open_tasks_are_bounded() {
    let peer = Peer::start_with("max_open_tasks = 1\npush_allow_private = [\"127.0.0.0/8\"]").await;
    let hook = Upstream::start().await;
    let notified = |state: &str| {
        (hook.seen().into_iter())
            .filter(|seen| seen.path == "/hook")
            .filter_map(|seen| {
                let body = serde_json::from_slice::<Value>(&seen.body).ok()?;
                Some((body, seen.headers))
            })
            .find(|(body, _)| body["task"]["status"]["state"] == state)
    };

    let task = peer.waiting(12, "msg-hook-1").await;
    let id = task["id"].as_str().unwrap().to_owned();
    let config = peer
        .one(ALICE, &["push", &id, &hook.url("/hook"), "hook-token-9d"])
        .await;
    assert_eq!(config["taskId"], id.as_str(), "{config}");

    // The bound: one open task; a second message runs nothing.
    let second = write(&peer, 13).to_string();
    let refused = peer
        .one(
            ALICE,
            &["send", "gatehouse.rest.send", &second, "msg-hook-2"],
        )
        .await;
    let said = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(
        said.contains("max_open_tasks") && said.contains("nothing ran"),
        "{refused}"
    );

    // The webhook hears the waiting state, then, once approved, the completed one.
    heard(|| notified("TASK_STATE_AUTH_REQUIRED")).await;
    // A subscriber follows the task from its waiting state to its end.
    let subscriber = {
        let (base, id) = (peer.base(), id.clone());
        tokio::spawn(async move { a2a(&base, Some(ALICE), &["subscribe", &id]).await })
    };
    tokio::time::sleep(Duration::from_secs(2)).await;
    let approval = task["metadata"]["gatehouse/approval_id"].as_str().unwrap();
    peer.approve(approval).await;
    peer.until(&id, "TASK_STATE_COMPLETED").await;
    let followed: Vec<Value> = (subscriber.await.unwrap().iter())
        .map(|event| event["task"]["status"]["state"].clone())
        .collect();
    assert_eq!(
        followed,
        [
            json!("TASK_STATE_AUTH_REQUIRED"),
            json!("TASK_STATE_COMPLETED")
        ]
    );
    // An ended task has nothing to follow.
    let ended = peer.one(ALICE, &["subscribe", &id]).await;
    assert_eq!(
        ended["error"]["type"], "UnsupportedOperationError",
        "{ended}"
    );
    let (body, headers) = heard(|| notified("TASK_STATE_COMPLETED")).await;
    assert_eq!(body["task"]["id"], id.as_str(), "{body}");
    assert_eq!(headers["x-a2a-notification-token"], "hook-token-9d");
    assert_eq!(peer.posts(), 1);

    // With the first task ended, there is room again.
    peer.waiting(13, "msg-hook-3").await;
    assert_eq!(peer.posts(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_a2a_requests_get_the_protocols_errors_and_run_nothing() {
    let peer = Peer::start().await;
    let bearer = format!("Bearer {ALICE}");
    let auth = ("authorization", bearer.as_str());
    let version = ("a2a-version", "1.0");
    let send = |parts: Value| {
        json!({ "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
                "params": { "message": { "messageId": "m-1", "role": "ROLE_USER", "parts": parts } } })
    };
    let call = json!([{ "data": { "tool": "gatehouse.rest.send", "arguments": write(&peer, 5) } }]);

    // No version header: a 0.3 request, not served.
    let (status, answer) = peer.raw(&[auth], &send(call.clone())).await;
    assert_eq!(status, 200);
    assert_eq!(answer["error"]["code"], -32009, "{answer}");
    // A model's free text is not a call.
    let (_, answer) = peer
        .raw(
            &[auth, version],
            &send(json!([{ "text": "refund 5 please" }])),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("one data part"),
        "{answer}"
    );
    // A message id too long to keep.
    let mut long = send(call.clone());
    long["params"]["message"]["messageId"] = json!("m".repeat(300));
    let (_, answer) = peer.raw(&[auth, version], &long).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // An unknown skill, and one continuing a task.
    let unknown = json!([{ "data": { "tool": "gatehouse.rest.nope", "arguments": {} } }]);
    let (_, answer) = peer.raw(&[auth, version], &send(unknown)).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    let mut continuing = send(call.clone());
    continuing["params"]["message"]["taskId"] = json!("task_0123");
    let (_, answer) = peer.raw(&[auth, version], &continuing).await;
    assert_eq!(answer["error"]["code"], -32004, "{answer}");
    // Not JSON; no such method.
    let json = ("content-type", "application/json");
    let (_, _, text) = http(peer.mcp, "POST", "/a2a", &[auth, version, json], "{").await;
    assert!(
        String::from_utf8_lossy(&text).contains("-32700"),
        "{text:?}"
    );
    let (_, answer) = peer
        .raw(
            &[auth, version],
            &json!({ "jsonrpc": "2.0", "id": 2, "method": "message/send" }),
        )
        .await;
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    // A forged key: 401 before anything is read.
    let (status, _) = peer
        .raw(
            &[("authorization", "Bearer forged"), version],
            &send(call.clone()),
        )
        .await;
    assert_eq!(status, 401);
    // The card without credentials lists no skill.
    let (status, _, card) = http(peer.mcp, "GET", "/.well-known/agent-card.json", &[], "").await;
    assert_eq!(status, 200, "{card:?}");
    let card: Value = serde_json::from_slice(&card).unwrap();
    assert_eq!(card["skills"], json!([]), "{card}");

    assert_eq!(peer.posts(), 0, "nothing ran");
}

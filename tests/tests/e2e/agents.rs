//! Every agent can use the governed path: the official MCP SDKs, pinned in `tests/clients` and
//! installed by `build-support/toolchains` (the Python SDK `mcp`, the TypeScript SDKs
//! `@modelcontextprotocol/sdk` and `@modelcontextprotocol/client`), call a real `gatehouse serve`
//! the way agent hosts do, with a tool's name and arguments, in both protocol versions:
//!
//! - a write with the `idempotency_key` argument runs once, and its retry replays;
//! - a call that needs approval reaches the client's elicitation handler with the console's
//!   page, is approved (or rejected) through the admin API, and the same `call_tool` returns
//!   the tool's result;
//! - a task waits for its approval, survives a restart, is cancelled before it;
//! - a `requestState` altered, expired or replayed by another principal, and a task read by
//!   another tenant, are refused;
//! - the calling user's consent runs a call, a decline does not, and `destructive` is never
//!   consented to.
//!
//! Every effect is counted where it happens: the POSTs a loopback upstream received from
//! `gatehouse.rest.send` (a write-class tool whose calls the policy probe sends to approval).

use std::time::Duration;

use gatehouse_host::config::PolicyDefault;
use gatehouse_tests::agent::{self, Agent as Client};
use gatehouse_tests::artifacts::{LEDGER, POLICY_PROBE, REST};
use gatehouse_tests::gateway::{Gateway, Serve};
use gatehouse_tests::mcp::mcp_post;
use gatehouse_tests::upstream::Upstream;
use gatehouse_tests::{bind, free_port, grant, unique};
use serde_json::{Value, json};

/// The agent's API key: principal `agent:alice`, tenant `default`.
const ALICE: &str = "alice-key-5d1c";
/// Another agent of the same tenant: principal `agent:bob`.
const BOB: &str = "bob-key-8e02";
/// An agent of another tenant: principal `agent:eve`, tenant `other`.
const EVE: &str = "eve-key-c4a7";
/// An approver's admin token (`usr_ops_ana`).
const APPROVER: &str = "approver-token-1f6b";

/// How a test's gateway is set up.
#[derive(Clone)]
struct Setup {
    /// Whether the policy probe sends `gatehouse.rest.send` to approval.
    approval: bool,
    /// `[mcp] approval_hold_ms`.
    hold_ms: u64,
    /// `[store] approval_ttl_seconds`.
    ttl_seconds: u64,
    /// `[mcp] consent_modes`, as TOML.
    consent: &'static str,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            approval: true,
            hold_ms: 30_000,
            ttl_seconds: 3_600,
            consent: "[]",
        }
    }
}

/// A gateway serving `gatehouse.rest` (granted a recording loopback upstream) and the ledger,
/// with the policy probe, the admin API and the console, and three agents' API keys.
struct Agents {
    gateway: Gateway,
    upstream: Upstream,
    mcp: u16,
    admin: u16,
    dir: tempfile::TempDir,
}

impl Agents {
    async fn start(setup: Setup) -> Self {
        let upstream = Upstream::start().await;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let file = |name: &str, bytes: &[u8]| {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).expect("the test's directory is writable");
            path.display().to_string()
        };
        let mut host = gatehouse_tests::host::rest_config(&upstream);
        host.pipeline.tools = vec![
            grant("gatehouse.rest.*", &["default", "other"]),
            grant("test.ledger.*", &["default"]),
        ];
        host.pipeline.policy_default = PolicyDefault::Allow;
        let verdict = if setup.approval {
            "require_approval"
        } else {
            "allow"
        };
        host.pipeline.policies.push(bind(
            "test.policy-probe",
            "{gatehouse.rest.send,test.ledger.*}",
            0,
            json!({ "verdict": verdict }),
        ));
        host.store.path = Some(dir.path().join("gatehouse.db"));
        host.store.approval_ttl_seconds = setup.ttl_seconds;
        let (mcp, admin) = (free_port(), free_port());
        let key = |tenant: &str, principal: &str, value: &str| {
            gatehouse_tests::gateway::api_key(dir.path(), tenant, principal, value)
        };
        let text = format!(
            "{}\n[mcp]\nlisten = \"127.0.0.1:{mcp}\"\napproval_hold_ms = {}\nconsent_modes = {}\n\n{}{}{}[admin]\nlisten = \"127.0.0.1:{admin}\"\n\n[[admin.token]]\nprincipal = \"usr_ops_ana\"\nroles = [\"approver\"]\nfile = {:?}\n",
            toml::to_string(&host).expect("the host config serializes"),
            setup.hold_ms,
            setup.consent,
            key("default", "agent:alice", ALICE),
            key("default", "agent:bob", BOB),
            key("other", "agent:eve", EVE),
            file("approver.token", APPROVER.as_bytes()),
        );
        let gateway = Serve::config(file("gatehouse.toml", text.as_bytes()))
            .adapter(file("rest.wasm", &REST.signed()))
            .adapter(file("ledger.wasm", &LEDGER.signed()))
            .policy(file("probe.wasm", &POLICY_PROBE.signed()))
            .log(dir.path().join("stderr.log"))
            .wait_for(mcp)
            .wait_for(admin)
            .start()
            .await;
        Self {
            gateway,
            upstream,
            mcp,
            admin,
            dir,
        }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.mcp)
    }

    /// One JSON-RPC message to the endpoint as `agent:alice` (2025-11-25): the answer.
    async fn post(&self, message: Value) -> Value {
        let bearer = format!("Bearer {ALICE}");
        let (status, _, text) = mcp_post(
            self.mcp,
            "/mcp",
            &[("authorization", bearer.as_str())],
            message.to_string(),
        )
        .await;
        assert_eq!(status, 200, "{text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
    }

    /// The arguments of a POST of `body` to the upstream's `/refunds`, keyed `key`.
    fn refund(&self, key: &str, amount: u32) -> Value {
        json!({
            "url": self.upstream.url("/refunds"),
            "method": "POST",
            "body": { "amount": amount },
            "idempotency_key": key,
        })
    }

    /// The POSTs the upstream received, with their `Idempotency-Key` headers.
    fn posts(&self) -> Vec<String> {
        self.upstream
            .seen()
            .into_iter()
            .filter(|seen| seen.method == "POST")
            .map(|seen| {
                seen.headers
                    .get("idempotency-key")
                    .and_then(|value| value.to_str().ok())
                    .unwrap_or_default()
                    .to_owned()
            })
            .collect()
    }

    /// The Python SDK's agent (`tests/clients/agent.py`) calling `tool` with `args` as `token`.
    fn python(
        &self,
        version: &str,
        token: &str,
        tool: &str,
        args: &Value,
        options: &[&str],
    ) -> Client {
        agent::python(&self.url(), version, token, tool, args, options)
    }

    /// The TypeScript SDKs' agent (`tests/clients/agent.mjs`), `sdk` v1 or v2.
    fn typescript(
        &self,
        sdk: &str,
        version: &str,
        token: &str,
        tool: &str,
        args: &Value,
        options: &[&str],
    ) -> Client {
        agent::typescript(sdk, &self.url(), version, token, tool, args, options)
    }

    /// Approves (`reason` None) or rejects approval `id` through the admin API, as an approver.
    async fn decide(&self, id: &str, reject: Option<&str>) {
        let (verb, body) = match reject {
            None => ("approve", String::new()),
            Some(reason) => ("reject", json!({ "reason": reason }).to_string()),
        };
        let (status, body) = gatehouse_tests::admin::request(
            self.admin,
            "POST",
            &format!("/v1/approvals/{id}/{verb}"),
            Some(APPROVER),
            Some(body.into()),
        )
        .await;
        assert_eq!(
            status,
            200,
            "{verb} {id}: {}",
            String::from_utf8_lossy(&body)
        );
    }

    /// Approves `id` from the command line (`gatehouse admin approvals approve`) as the
    /// approver: what it printed, after checking it succeeded.
    async fn approve_by_cli(&self, id: &str) -> String {
        let server = format!("http://127.0.0.1:{}", self.admin);
        let token = self.dir.path().join("approver.token");
        let (code, out) = gatehouse_tests::cli::gatehouse_async(&[
            "admin",
            "approvals",
            "approve",
            id,
            "--server",
            &server,
            "--token-file",
            gatehouse_tests::cli::s(&token),
        ])
        .await;
        assert_eq!(code, 0, "{out}");
        out
    }

    /// Waits until approval `id` shows a held request waiting for it, as approvers see it.
    async fn held(&self, id: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let approval = self.approval(id).await;
            if approval["waiting_on"] == "held" {
                assert!(
                    approval["waiting_until_ms"].as_u64().is_some(),
                    "{approval}"
                );
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no held request shows for {id}: {approval}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Approval `id` as the admin API shows it.
    async fn approval(&self, id: &str) -> Value {
        let (status, body) = gatehouse_tests::admin::request(
            self.admin,
            "GET",
            &format!("/v1/approvals/{id}"),
            Some(APPROVER),
            None,
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        serde_json::from_slice(&body).expect("JSON")
    }

    /// The pending approval proposed under idempotency key `key`.
    async fn pending_under(&self, key: &str) -> String {
        let (status, body) = gatehouse_tests::admin::request(
            self.admin,
            "GET",
            "/v1/approvals",
            Some(APPROVER),
            None,
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        let list: Value = serde_json::from_slice(&body).expect("JSON");
        list["approvals"]
            .as_array()
            .and_then(|all| all.iter().find(|a| a["idempotency_key"] == key))
            .and_then(|approval| approval["id"].as_str())
            .unwrap_or_else(|| panic!("no pending approval under `{key}`: {list}"))
            .to_owned()
    }

    /// The approval a console URL names.
    fn approval_of(url: &str) -> String {
        url.rsplit_once("/#/approvals/")
            .map(|(_, id)| id.to_owned())
            .unwrap_or_else(|| panic!("not a console approval URL: {url}"))
    }
}

/// The approval a working task's status message names.
fn waited_on(task: &Value) -> String {
    let message = task["task"]["statusMessage"].as_str().unwrap_or_default();
    message
        .split_whitespace()
        .find(|word| word.starts_with("apr_"))
        .map(|word| word.trim_end_matches(':').to_owned())
        .unwrap_or_else(|| panic!("the status message names the approval: {task}"))
}

/// The gateway's record of a result a client printed.
fn record(result: &Value) -> &Value {
    &result["result"]["_meta"]["gatehouse/result"]
}

/// Each client that speaks `version`: (name, how to start it).
fn clients_of(version: &'static str) -> Vec<&'static str> {
    match version {
        "2025-11-25" => vec!["python", "ts-v1", "ts-v2"],
        _ => vec!["python", "ts-v2"],
    }
}

fn start(
    agents: &Agents,
    client: &str,
    version: &str,
    token: &str,
    tool: &str,
    args: &Value,
    options: &[&str],
) -> Client {
    match client {
        "python" => agents.python(version, token, tool, args, options),
        "ts-v1" => agents.typescript("v1", version, token, tool, args, options),
        _ => agents.typescript("v2", version, token, tool, args, options),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_with_the_key_argument_runs_once_and_its_retry_replays_in_every_client() {
    let agents = Agents::start(Setup {
        approval: false,
        ..Setup::default()
    })
    .await;
    let mut expected = Vec::new();
    for version in ["2025-11-25", "2026-07-28"] {
        for client in clients_of(version) {
            let key = format!("refund-{}", unique());
            let args = agents.refund(&key, 10);
            for round in 0..2 {
                let mut run = start(
                    &agents,
                    client,
                    version,
                    ALICE,
                    "gatehouse.rest.send",
                    &args,
                    &[],
                );
                let result = run.next("result").await;
                assert_eq!(
                    record(&result)["outcome"],
                    "OK",
                    "{client} {version}: {result}"
                );
                let replayed = result["result"]["_meta"]
                    .get("gatehouse/replay_of")
                    .is_some();
                assert_eq!(
                    replayed,
                    round == 1,
                    "{client} {version} round {round}: {result}"
                );
                assert_eq!(run.exit().await, 0);
            }
            expected.push(key);
            assert_eq!(
                agents.posts(),
                expected,
                "{client} {version}: each key reached the upstream once, as its Idempotency-Key"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_the_key_argument_and_a_key_the_argument_and_meta_disagree_on_runs_nothing() {
    let agents = Agents::start(Setup {
        approval: false,
        ..Setup::default()
    })
    .await;
    let listed = agents
        .post(json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/list" }))
        .await;
    let tools = listed["result"]["tools"].as_array().expect("tools");
    let send = tools
        .iter()
        .find(|tool| tool["name"] == "gatehouse.rest.send")
        .expect("send is listed");
    let key = &send["inputSchema"]["properties"]["idempotency_key"];
    assert_eq!(key["type"], "string", "{send}");
    assert!(
        key["description"].as_str().unwrap().contains("every retry"),
        "{key}"
    );
    assert!(
        send["inputSchema"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("idempotency_key")),
        "the key is required where the call needs one: {send}"
    );
    let get = tools
        .iter()
        .find(|tool| tool["name"] == "gatehouse.rest.get")
        .expect("get is listed");
    assert!(
        get["inputSchema"]["properties"]
            .get("idempotency_key")
            .is_none(),
        "a read lists no key: {get}"
    );

    let mut args = agents.refund("from-argument", 5);
    let call = json!({
        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "gatehouse.rest.send", "arguments": args.clone(),
                    "_meta": { "gatehouse/idempotency_key": "from-meta" } },
    });
    let answer = agents.post(call).await;
    let result = &answer["result"];
    assert_eq!(result["isError"], true, "{answer}");
    assert_eq!(
        result["_meta"]["gatehouse/result"]["outcome"],
        "IDEMPOTENCY_KEY_INVALID"
    );
    let text = result["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("from-argument") && text.contains("from-meta"),
        "{text}"
    );
    args["idempotency_key"] = json!(7);
    let call = json!({
        "jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": { "name": "gatehouse.rest.send", "arguments": args },
    });
    let answer = agents.post(call).await;
    assert_eq!(
        answer["result"]["_meta"]["gatehouse/result"]["outcome"], "IDEMPOTENCY_KEY_INVALID",
        "{answer}"
    );
    assert!(agents.posts().is_empty(), "nothing reached the upstream");

    // Without a key at all: the remediation names the argument.
    let mut args = agents.refund("unused", 5);
    args.as_object_mut().unwrap().remove("idempotency_key");
    let call = json!({
        "jsonrpc": "2.0", "id": 4, "method": "tools/call",
        "params": { "name": "gatehouse.rest.send", "arguments": args },
    });
    let answer = agents.post(call).await;
    let error = &answer["result"]["_meta"]["gatehouse/result"]["error"];
    assert_eq!(error["code"], "IDEMPOTENCY_KEY_REQUIRED", "{answer}");
    assert!(
        error["remediation"]
            .as_str()
            .unwrap()
            .contains("`idempotency_key` argument"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_reaches_every_client_and_the_same_call_returns_the_result_once() {
    let agents = Agents::start(Setup::default()).await;
    let mut expected = Vec::new();
    for version in ["2025-11-25", "2026-07-28"] {
        for client in clients_of(version) {
            let key = format!("approved-{}", unique());
            let args = agents.refund(&key, 20);
            let mut run = start(
                &agents,
                client,
                version,
                ALICE,
                "gatehouse.rest.send",
                &args,
                &[],
            );
            let elicitation = run.next("elicitation").await;
            let params = &elicitation["params"];
            assert_eq!(params["mode"], "url", "{client} {version}: {elicitation}");
            let url = params["url"].as_str().unwrap();
            // Named by the approval's id, never empty. The 2026-07-28 draft dropped the field,
            // and so does the TypeScript v2 client's schema there; other clients keep it.
            if (client, version) == ("ts-v2", "2026-07-28") {
                assert_eq!(params.get("elicitationId"), None, "{elicitation}");
            } else {
                assert_eq!(
                    params["elicitationId"].as_str(),
                    Some(Agents::approval_of(url).as_str()),
                    "{client} {version}: {elicitation}"
                );
            }
            assert!(
                url.starts_with(&format!(
                    "http://127.0.0.1:{}/console/#/approvals/apr_",
                    agents.admin
                )),
                "{client} {version}: the console's page of the approval: {url}"
            );
            assert!(
                agents.posts().len() == expected.len(),
                "nothing ran before approval"
            );
            // What an approver sees meanwhile: the caller's request is held for the decision.
            let id = Agents::approval_of(url);
            agents.held(&id).await;
            if expected.is_empty() {
                // From the command line, the approver is told the held request runs it now.
                let said = agents.approve_by_cli(&id).await;
                assert!(
                    said.contains(
                        "its caller's request, held open for this decision, runs it now, once"
                    ),
                    "{said}"
                );
            } else {
                agents.decide(&id, None).await;
            }
            let result = run.next("result").await;
            assert_eq!(
                record(&result)["outcome"],
                "OK",
                "{client} {version}: {result}"
            );
            assert_eq!(run.exit().await, 0);
            expected.push(key);
            assert_eq!(agents.posts(), expected, "{client} {version}: one effect");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_or_expired_approval_ends_the_call_without_an_effect() {
    let agents = Agents::start(Setup {
        ttl_seconds: 4,
        hold_ms: 20_000,
        ..Setup::default()
    })
    .await;
    for version in ["2025-11-25", "2026-07-28"] {
        let args = agents.refund(&format!("rejected-{}", unique()), 30);
        let mut run = start(
            &agents,
            "python",
            version,
            ALICE,
            "gatehouse.rest.send",
            &args,
            &[],
        );
        let elicitation = run.next("elicitation").await;
        let id = Agents::approval_of(elicitation["params"]["url"].as_str().unwrap());
        agents.decide(&id, Some("not this refund")).await;
        let result = run.next("result").await;
        assert_eq!(result["result"]["isError"], true, "{version}: {result}");
        assert_eq!(
            record(&result)["outcome"],
            "APPROVAL_REJECTED",
            "{version}: {result}"
        );

        // Nobody decides: the approval expires while the call waits.
        let args = agents.refund(&format!("expired-{}", unique()), 31);
        let mut run = start(
            &agents,
            "ts-v2",
            version,
            ALICE,
            "gatehouse.rest.send",
            &args,
            &[],
        );
        run.next("elicitation").await;
        let result = run.next("result").await;
        assert_eq!(
            record(&result)["outcome"],
            "APPROVAL_EXPIRED",
            "{version}: {result}"
        );
    }
    assert!(agents.posts().is_empty(), "no effect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn past_its_hold_a_2025_call_ends_with_the_url_elicitation_error_and_a_retry_runs_it_once() {
    let agents = Agents::start(Setup {
        hold_ms: 1_500,
        ..Setup::default()
    })
    .await;
    let args = agents.refund(&format!("held-{}", unique()), 40);
    let mut run = agents.python("2025-11-25", ALICE, "gatehouse.rest.send", &args, &[]);
    run.next("elicitation").await;
    let error = run.next("error").await;
    assert_eq!(error["code"], -32042, "{error}");
    let url = error["data"]["elicitations"][0]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(url.contains("/#/approvals/apr_"), "{error}");
    agents.decide(&Agents::approval_of(&url), None).await;
    // The agent's retry, with the same arguments and key, runs it: once.
    for _ in 0..2 {
        let mut retry = agents.python("2025-11-25", ALICE, "gatehouse.rest.send", &args, &[]);
        let result = retry.next("result").await;
        assert_eq!(record(&result)["outcome"], "OK", "{result}");
    }
    assert_eq!(agents.posts().len(), 1, "one effect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_completes_after_approval_survives_a_restart_and_cancelled_runs_nothing() {
    let mut agents = Agents::start(Setup::default()).await;
    // 2025-11-25, the TypeScript SDK's task API: created, polled, completed after approval.
    let key = format!("task-{}", unique());
    let args = agents.refund(&key, 50);
    let mut run = agents.typescript(
        "v1",
        "2025-11-25",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--task-ttl", "60000"],
    );
    let task = run.next("task").await;
    assert_eq!(task["task"]["status"], "working", "{task}");
    // Kept as long as the client asked (the approval would keep it an hour).
    assert_eq!(task["task"]["ttl"], 60000, "{task}");
    let id = waited_on(&task);
    assert!(agents.posts().is_empty());
    let said = agents.approve_by_cli(&id).await;
    let task_id = task["task"]["taskId"].as_str().unwrap();
    assert!(
        said.contains(&format!(
            "task {task_id}, which its caller polls, runs it now, once"
        )),
        "{said}"
    );
    let result = run.next("result").await;
    assert_eq!(record(&result)["outcome"], "OK", "{result}");
    assert_eq!(agents.posts(), vec![key.clone()]);
    // The same key from another client, and a second decision (a double click): still one
    // effect; the retry gets the task's result as a replay, the second decision a 409.
    let mut retry = agents.python("2025-11-25", ALICE, "gatehouse.rest.send", &args, &[]);
    let replayed = retry.next("result").await;
    assert!(
        replayed["result"]["_meta"]
            .get("gatehouse/replay_of")
            .is_some(),
        "{replayed}"
    );
    let (status, _) = gatehouse_tests::admin::request(
        agents.admin,
        "POST",
        &format!("/v1/approvals/{id}/approve"),
        Some(APPROVER),
        None,
    )
    .await;
    assert_eq!(status, 409, "a second decision is refused");
    assert_eq!(agents.posts(), vec![key.clone()], "one effect in all");

    // 2026-07-28, the tasks extension: created, the gateway restarted, approved, completed.
    let key = format!("restart-{}", unique());
    let args = agents.refund(&key, 51);
    let mut run = agents.python(
        "2026-07-28",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--task", "--task-create"],
    );
    let task = run.next("task").await;
    let task_id = task["task"]["taskId"].as_str().unwrap().to_owned();
    let approval = waited_on(&task);
    run.exit().await;
    let stdout = agents.dir.path().join("restarted.out");
    agents.gateway.restart(&stdout).await;
    assert_eq!(agents.approval(&approval).await["waiting_on"], "task");
    agents.decide(&approval, None).await;
    let mut poll = agents.python(
        "2026-07-28",
        ALICE,
        "gatehouse.rest.send",
        &json!({}),
        &["--task-get", &task_id],
    );
    let result = poll.next("result").await;
    assert_eq!(result["result"]["isError"], false, "{result}");
    assert_eq!(agents.posts().len(), 2, "one effect for each task");

    // Cancelled before approval: the proposal is withdrawn and nothing runs.
    let key = format!("cancelled-{}", unique());
    let args = agents.refund(&key, 52);
    let mut run = agents.typescript(
        "v2",
        "2025-11-25",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--task-ttl", "60000", "--task-create"],
    );
    let task = run.next("task").await;
    let task_id = task["task"]["taskId"].as_str().unwrap().to_owned();
    let approval = waited_on(&task);
    let mut cancel = agents.typescript(
        "v2",
        "2025-11-25",
        ALICE,
        "gatehouse.rest.send",
        &json!({}),
        &["--task-cancel", &task_id],
    );
    let cancelled = cancel.next("cancelled").await;
    assert_eq!(cancelled["answer"]["status"], "cancelled", "{cancelled}");
    let withdrawn = agents.approval(&approval).await;
    assert_eq!(withdrawn["status"], "rejected", "{withdrawn}");
    assert_eq!(withdrawn["decided_as"], "caller", "{withdrawn}");
    // The runner never runs it: an approver can no longer approve it either.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(agents.posts().len(), 2, "the cancelled task had no effect");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forged_expired_or_borrowed_request_state_and_another_tenants_task_are_refused() {
    let agents = Agents::start(Setup {
        ttl_seconds: 3,
        ..Setup::default()
    })
    .await;
    // Altered in one byte.
    let args = agents.refund(&format!("tamper-{}", unique()), 60);
    let mut run = agents.python(
        "2026-07-28",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--print-state", "--tamper"],
    );
    run.next("state").await;
    let error = run.next("error").await;
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("does not verify"),
        "{error}"
    );

    // Sent by another principal of the same tenant, with the same arguments.
    let mut run = agents.python(
        "2026-07-28",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--print-state"],
    );
    let state = run.next("state").await["state"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut stolen = agents.python(
        "2026-07-28",
        BOB,
        "gatehouse.rest.send",
        &args,
        &["--use-state", &state],
    );
    let error = stolen.next("error").await;
    assert_eq!(error["code"], -32602, "{error}");

    // Expired with its approval.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let mut late = agents.python(
        "2026-07-28",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--use-state", &state],
    );
    let error = late.next("error").await;
    assert_eq!(error["code"], -32602, "{error}");
    assert!(
        error["message"].as_str().unwrap().contains("expired"),
        "{error}"
    );

    // A task read by another tenant: it does not exist for them.
    let args = agents.refund(&format!("owned-{}", unique()), 61);
    let mut run = agents.typescript(
        "v2",
        "2025-11-25",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--task-ttl", "60000", "--task-create"],
    );
    let task_id = run.next("task").await["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut snoop = agents.typescript(
        "v2",
        "2025-11-25",
        EVE,
        "gatehouse.rest.send",
        &json!({}),
        &["--task-get", &task_id],
    );
    let error = snoop.next("error").await;
    assert!(
        error["message"].as_str().unwrap().contains("no task"),
        "{error}"
    );
    assert!(agents.posts().is_empty(), "nothing ran");
}

/// Hardening round 4, item 1: an approval belongs to one proposal, one principal chain and one
/// idempotency key. Before, anyone in the tenant who knew an approval's id and arguments ran the
/// approved call once per fresh key (its `requestState` too), and a task made with another's
/// approval id ran the proposer's call and handed its result over.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_approval_runs_its_call_once_for_its_proposer_alone_in_every_version_and_task() {
    let agents = Agents::start(Setup::default()).await;
    let tool = "gatehouse.rest.send";
    // Alice's call, approved while her request is held: one effect.
    let key = format!("once-{}", unique());
    let args = agents.refund(&key, 70);
    let mut run = agents.python("2025-11-25", ALICE, tool, &args, &[]);
    let elicitation = run.next("elicitation").await;
    let id = Agents::approval_of(elicitation["params"]["url"].as_str().unwrap());
    agents.held(&id).await;
    agents.decide(&id, None).await;
    let ran = run.next("result").await;
    assert_eq!(record(&ran)["outcome"], "OK", "{ran}");
    let mut expected = vec![key.clone()];
    assert_eq!(agents.posts(), expected);

    // Its id under a fresh key, from Alice and from Bob, in both versions: refused, no effect.
    let named = json!({ "gatehouse/approval_id": id }).to_string();
    for version in ["2025-11-25", "2026-07-28"] {
        for token in [ALICE, BOB] {
            let fresh = agents.refund(&format!("fresh-{}", unique()), 70);
            let mut again = agents.python(version, token, tool, &fresh, &["--meta", &named]);
            let result = again.next("result").await;
            assert_eq!(result["result"]["isError"], true, "{version}: {result}");
            assert_eq!(
                record(&result)["outcome"],
                "APPROVAL_MISMATCH",
                "{version}, {token}: {result}"
            );
        }
    }
    // Bob under Alice's own key and arguments: not his approval, not his result.
    let mut borrowed = agents.python("2025-11-25", BOB, tool, &args, &[]);
    let result = borrowed.next("result").await;
    assert_eq!(record(&result)["outcome"], "APPROVAL_MISMATCH", "{result}");
    assert!(result["result"]["structuredContent"].is_null(), "{result}");
    // Alice's retry replays her result.
    let mut retry = agents.python("2025-11-25", ALICE, tool, &args, &[]);
    let replayed = retry.next("result").await;
    assert_eq!(
        replayed["result"]["_meta"]["gatehouse/replay_of"],
        record(&ran)["tool_call_id"],
        "{replayed}"
    );
    assert_eq!(agents.posts(), expected, "still one effect");

    // 2026-07-28: the key in `_meta`, so the arguments' digest does not cover it. The signed
    // state resumes the call under its own key only.
    let key = format!("state-{}", unique());
    let mut bare = agents.refund(&key, 71);
    bare.as_object_mut().unwrap().remove("idempotency_key");
    let keyed = json!({ "gatehouse/idempotency_key": key }).to_string();
    let mut run = agents.python(
        "2026-07-28",
        ALICE,
        tool,
        &bare,
        &["--print-state", "--meta", &keyed],
    );
    let state = run.next("state").await["state"]
        .as_str()
        .unwrap()
        .to_owned();
    agents.decide(&agents.pending_under(&key).await, None).await;
    let other = json!({ "gatehouse/idempotency_key": format!("other-{}", unique()) }).to_string();
    let mut replayed = agents.python(
        "2026-07-28",
        ALICE,
        tool,
        &bare,
        &["--use-state", &state, "--meta", &other],
    );
    let error = replayed.next("error").await;
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(
        agents.posts(),
        expected,
        "the state under another key runs nothing"
    );
    let mut resumed = agents.python(
        "2026-07-28",
        ALICE,
        tool,
        &bare,
        &["--use-state", &state, "--meta", &keyed],
    );
    let result = resumed.next("result").await;
    assert_eq!(record(&result)["outcome"], "OK", "{result}");
    expected.push(key);
    assert_eq!(agents.posts(), expected);

    // A task Bob makes with Alice's pending approval id: it never runs her call for him.
    let key = format!("task-{}", unique());
    let args = agents.refund(&key, 72);
    let mut proposed = agents.python(
        "2025-11-25",
        ALICE,
        tool,
        &args,
        &["--task-ttl", "60000", "--task-create"],
    );
    let pending = waited_on(&proposed.next("task").await);
    let named = json!({ "gatehouse/approval_id": pending }).to_string();
    let fresh = agents.refund(&format!("bobs-{}", unique()), 72);
    let mut task = agents.python(
        "2025-11-25",
        BOB,
        tool,
        &fresh,
        &["--task-ttl", "60000", "--meta", &named],
    );
    let result = task.next("result").await;
    assert_eq!(record(&result)["outcome"], "APPROVAL_MISMATCH", "{result}");
    agents.decide(&pending, None).await;
    // Alice's own task runs her call once approved; Bob's got nothing of it.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    expected.push(key);
    while agents.posts() != expected {
        assert!(
            std::time::Instant::now() < deadline,
            "alice's task ran: {:?}",
            agents.posts()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(agents.posts(), expected, "one effect per approval");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_consent_runs_the_call_a_decline_does_not_and_destructive_is_never_consented() {
    let agents = Agents::start(Setup {
        consent: "[\"network\"]",
        ..Setup::default()
    })
    .await;
    let args = agents.refund(&format!("consent-{}", unique()), 70);
    let mut run = agents.python("2026-07-28", ALICE, "gatehouse.rest.send", &args, &[]);
    let form = run.next("elicitation").await;
    assert_eq!(form["params"]["mode"], "form", "{form}");
    let message = form["params"]["message"].as_str().unwrap();
    assert!(
        message.contains("gatehouse.rest.send") && message.contains("network"),
        "the form shows the tool and the mode: {message}"
    );
    let result = run.next("result").await;
    assert_eq!(record(&result)["outcome"], "OK", "{result}");
    assert_eq!(agents.posts().len(), 1);
    let id = record(&result)["approval_id"].as_str().unwrap().to_owned();
    let approval = agents.approval(&id).await;
    assert_eq!(approval["decided_as"], "consent", "{approval}");
    assert_eq!(approval["decided_by"], "agent:alice", "{approval}");

    let args = agents.refund(&format!("declined-{}", unique()), 71);
    let mut run = agents.python(
        "2026-07-28",
        ALICE,
        "gatehouse.rest.send",
        &args,
        &["--approve", "false"],
    );
    run.next("elicitation").await;
    let result = run.next("result").await;
    assert_eq!(record(&result)["outcome"], "APPROVAL_REJECTED", "{result}");
    assert_eq!(agents.posts().len(), 1, "a decline has no effect");

    // A destructive call is never offered the form: its page goes to an approver.
    let mut run = agents.python(
        "2026-07-28",
        ALICE,
        "test.ledger.close_account",
        &json!({ "idempotency_key": format!("close-{}", unique()) }),
        &[],
    );
    let elicitation = run.next("elicitation").await;
    assert_eq!(elicitation["params"]["mode"], "url", "{elicitation}");

    // And an operator cannot allow it.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("gatehouse.toml");
    let store = agents.dir.path().join("gatehouse.db").display().to_string();
    let text = std::fs::read_to_string(agents.dir.path().join("gatehouse.toml"))
        .unwrap()
        .replace(
            &store,
            &dir.path().join("gatehouse.db").display().to_string(),
        )
        .replace(
            &format!("127.0.0.1:{}", agents.mcp),
            &format!("127.0.0.1:{}", free_port()),
        )
        .replace(
            &format!("127.0.0.1:{}", agents.admin),
            &format!("127.0.0.1:{}", free_port()),
        )
        .replace(
            "consent_modes = [\"network\"]",
            "consent_modes = [\"network\", \"destructive\"]",
        );
    std::fs::write(&config, text).unwrap();
    let (code, log) = Serve::config(&config).exit(Duration::from_secs(30));
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("consent_modes") && log.contains("destructive"),
        "{log}"
    );
}

//! The web console end to end: a `gatehouse serve` process with its admin listener, a real
//! headless Chromium (through chromedriver) signing in with admin tokens, and calls made over
//! MCP by an agent meanwhile.
//!
//! - An approver sees a paused call arrive in the queue without reloading, reads it (arguments
//!   with the policy's redaction applied, modes, each module's decision, time left), approves
//!   it, and the caller's retry runs once; the audit view shows who approved it and why.
//! - A rejection needs a reason; an expired approval is found by searching.
//! - Roles and safety: an auditor gets no approve button and a hand-made POST gets 403; the
//!   proposer cannot approve their own call; a cross-site POST is refused; a hostile argument
//!   renders as text; the session cookie and the pages carry their protections.
//! - "Verify chain" names the entry tampered with in the store file.
//! - An operator rolls a policy back through a confirmation step.
//! - An operator reads a session's timeline (each label with the call that brought it) and
//!   ends it; an auditor reads it only.
//!
//! The queue refreshes every second; the tests allow a few seconds more, for a loaded machine.

use std::path::PathBuf;
use std::time::Duration;

use fantoccini::Locator;
use gatehouse_host::config::PolicyDefault;
use gatehouse_tests::admin::{APPROVER, AUDITOR, AdminGateway, OPERATOR, SELF_APPROVER, request};
use gatehouse_tests::bind;
use gatehouse_tests::browser::Browser;
use gatehouse_tests::mcp::record;
use serde_json::{Value, json};

const SOON: Duration = Duration::from_secs(10);
/// How long a new paused call may take to show in an open queue (it polls every second).
const LIVE: Duration = Duration::from_secs(5);

const HOSTILE: &str = "<img src=x onerror=alert(1)>";

/// A gateway whose ledger transfers need approval (the probe asks for it) and whose results
/// have personal data masked (`gatehouse.redact`), approvals valid `ttl_seconds`.
async fn gateway(ttl_seconds: u64) -> AdminGateway {
    AdminGateway::start_with(
        "test.ledger.*",
        json!({ "verdict": "require_approval" }),
        "1.0.0",
        "",
        |host| {
            host.pipeline.policy_default = PolicyDefault::Allow;
            host.store.approval_ttl_seconds = ttl_seconds;
            host.pipeline
                .policies
                .push(bind("gatehouse.redact", "test.ledger.*", 1, json!({})));
        },
    )
    .await
}

fn console(gateway: &AdminGateway) -> String {
    format!("http://127.0.0.1:{}/console/", gateway.admin)
}

/// A browser window of `size` signed in to the console with `token`.
async fn signed_in(gateway: &AdminGateway, token: &str, size: (u32, u32)) -> Browser {
    let browser = Browser::start(size.0, size.1).await;
    browser.client.goto(&console(gateway)).await.unwrap();
    browser.type_into("#token", token).await;
    browser.click("#signin-submit").await;
    browser.wait("#who:not([hidden])", SOON).await;
    browser
}

/// Opens the console page `fragment` (`#/audit`).
async fn visit(browser: &Browser, gateway: &AdminGateway, fragment: &str) {
    let url = format!("{}{fragment}", console(gateway));
    browser.client.goto(&url).await.unwrap();
}

/// A transfer over MCP under idempotency key `key`: the JSON-RPC result.
async fn transfer(gateway: &AdminGateway, key: &str, note: &str) -> Value {
    gateway
        .call(
            "test.ledger.transfer",
            json!({ "amount": 1200, "currency": "EUR", "note": note }),
            json!({ "gatehouse/idempotency_key": key }),
        )
        .await
}

fn approval_id(paused: &Value) -> String {
    assert_eq!(record(paused)["outcome"], "APPROVAL_REQUIRED", "{paused}");
    record(paused)["approval_id"].as_str().unwrap().to_owned()
}

/// Where the screenshots go: the README's own (`docs/console/`) when
/// `GATEHOUSE_UPDATE_SCREENSHOTS` is set, else a directory under the build's target, so a test
/// run leaves the tracked files alone.
fn screenshots() -> PathBuf {
    if std::env::var_os("GATEHOUSE_UPDATE_SCREENSHOTS").is_some() {
        return PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/console");
    }
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("console");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Approves `id` with a `fetch` from the signed-in page (with the CSRF token if `csrf`): the
/// status and the JSON body.
async fn approve_from_page(browser: &Browser, id: &str, csrf: bool) -> (u16, Value) {
    page_fetch(
        browser,
        "POST",
        &format!("../v1/approvals/{id}/approve"),
        csrf,
    )
    .await
}

/// `fetch` from the signed-in page: the status and the JSON body.
async fn page_fetch(browser: &Browser, method: &str, path: &str, csrf: bool) -> (u16, Value) {
    let script = format!(
        r#"const done = arguments[arguments.length - 1];
        (async () => {{
          const session = await (await fetch("session")).json();
          const headers = {{ "Content-Type": "application/json" }};
          if ({csrf}) headers["X-CSRF-Token"] = session.csrf_token;
          const body = {method:?} === "GET" ? undefined : "{{}}";
          const response = await fetch({path:?}, {{ method: {method:?}, headers, body }});
          done([response.status, await response.json()]);
        }})().catch((e) => done([0, String(e)]));"#
    );
    let value = browser.run_async(&script).await;
    (value[0].as_u64().unwrap() as u16, value[1].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approver_sees_a_paused_call_live_approves_it_and_the_retry_runs_once() {
    let gateway = gateway(3600).await;
    let browser = signed_in(&gateway, APPROVER, (1280, 900)).await;
    browser
        .wait_text("#principal", "usr_ops_ana (approver)", SOON)
        .await;
    browser.wait("#queue", SOON).await;
    // Marks this page: a reload would lose the mark.
    browser
        .client
        .execute("window.gatehouseTestMark = 7;", vec![])
        .await
        .unwrap();

    let note = format!("refund to ana@example.com {HOSTILE}");
    let paused = transfer(&gateway, "refund-1", &note).await;
    let id = approval_id(&paused);
    // The paused result names the console page where an approver decides.
    let remediation = record(&paused)["error"]["remediation"].as_str().unwrap();
    let url = format!("{}#/approvals/{id}", console(&gateway));
    assert!(remediation.contains(&url), "{remediation}");

    let row = format!("#queue tr[data-approval='{id}']");
    browser.wait(&row, LIVE).await;
    let mark = browser
        .client
        .execute("return window.gatehouseTestMark;", vec![])
        .await
        .unwrap();
    assert_eq!(mark, json!(7), "the queue updated without a reload");
    browser.screenshot(&screenshots().join("queue.png")).await;

    browser.click(&format!("{row} a")).await;
    browser
        .wait_text("#tool", "test.ledger.transfer", SOON)
        .await;
    assert_eq!(browser.text("#tenant").await, "default");
    assert!(browser.text("#principals").await.contains("agent:bot"));
    assert_eq!(browser.text("#declared-mode").await, "delegated");
    assert_eq!(browser.text("#effective-mode").await, "delegated");
    assert!(browser.text("#time-left").await.contains("left"));
    let decisions = browser.text("#decisions").await;
    assert!(
        decisions.contains("test.policy-probe") && decisions.contains("PROBE_APPROVAL"),
        "{decisions}"
    );
    assert!(decisions.contains("gatehouse.redact"), "{decisions}");
    // The ledger's transfer is sensitive: its arguments show as their hashes at first.
    let args = browser.text("#args").await;
    assert!(
        args.contains("sha256:") && !args.contains("ana@example.com") && !args.contains("1200"),
        "{args}"
    );
    // An approver may reveal them (the config allows it; the audit log records it), and the
    // redact policy's obligation still applies to what the approver sees.
    browser.click("#reveal").await;
    browser.wait_text("#args", "[REDACTED]", SOON).await;
    let args = browser.text("#args").await;
    assert!(
        !args.contains("ana@example.com") && args.contains("[REDACTED]") && args.contains("1200"),
        "{args}"
    );
    // A hostile argument is text, not markup.
    assert!(args.contains(HOSTILE), "{args}");
    assert!(
        browser
            .client
            .find_all(Locator::Css("#args img, main img"))
            .await
            .unwrap()
            .is_empty()
    );
    browser
        .screenshot(&screenshots().join("approval.png"))
        .await;

    browser.type_into("#reason", "checked with finance").await;
    browser.click("#approve").await;
    browser.wait("h1 [data-state='approved']", SOON).await;
    assert!(browser.text("#decided-by").await.contains("usr_ops_ana"));

    // The caller's retry runs, once; a second retry replays it.
    let done = transfer(&gateway, "refund-1", &note).await;
    assert_eq!(record(&done)["outcome"], "OK", "{done}");
    let again = transfer(&gateway, "refund-1", &note).await;
    assert_eq!(
        record(&again)["replay_of"],
        record(&done)["tool_call_id"],
        "{again}"
    );

    // The audit view shows the approver and the reason, and the one run with its replay.
    visit(&browser, &gateway, "#/audit").await;
    let (status, _) = page_fetch(&browser, "GET", "../v1/audit", false).await;
    assert_eq!(status, 403, "an approver is not an auditor");
    drop(browser);

    let browser = signed_in(&gateway, AUDITOR, (1280, 900)).await;
    visit(&browser, &gateway, "#/audit").await;
    browser
        .type_into("#audit-tool", "test.ledger.transfer")
        .await;
    browser.click("#audit-filters button[type='submit']").await;
    browser
        .wait_text(
            "#audit-table",
            "approved by usr_ops_ana: checked with finance",
            SOON,
        )
        .await;
    let (status, body) = request(
        gateway.admin,
        "GET",
        "/v1/audit?tool=test.ledger.transfer&outcome=OK",
        Some(AUDITOR),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let entries: Value = serde_json::from_slice(&body).unwrap();
    let runs: Vec<&Value> = entries["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["record"]["result"]["replay_of"].is_null())
        .collect();
    assert_eq!(runs.len(), 1, "the approved transfer ran once: {entries}");
    let run = record(&done)["tool_call_id"].as_str().unwrap().to_owned();
    visit(&browser, &gateway, &format!("#/audit/call/{run}")).await;
    browser
        .wait_text(
            "#replays",
            record(&again)["tool_call_id"].as_str().unwrap(),
            SOON,
        )
        .await;
    let decided = browser.text("#decisions").await;
    assert!(
        decided.contains("sha256:"),
        "the deciding digests: {decided}; the page reads {}",
        browser.text("main").await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejection_needs_a_reason_and_an_expired_approval_is_found_by_search() {
    let gateway = gateway(2).await;
    let browser = signed_in(&gateway, APPROVER, (1280, 900)).await;

    let paused = transfer(&gateway, "reject-me", "no").await;
    let id = approval_id(&paused);
    visit(&browser, &gateway, &format!("#/approvals/{id}")).await;
    browser.click("#reject").await;
    browser
        .wait_text("#decide-problem", "A rejection needs a reason", SOON)
        .await;
    browser.type_into("#reason", "not this customer").await;
    browser.click("#reject").await;
    browser.wait("h1 [data-state='rejected']", SOON).await;
    let refused = transfer(&gateway, "reject-me", "no").await;
    assert_eq!(
        record(&refused)["outcome"],
        "APPROVAL_REJECTED",
        "{refused}"
    );
    assert!(
        record(&refused)["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not this customer"),
        "{refused}"
    );

    let late = approval_id(&transfer(&gateway, "too-late", "wait").await);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    visit(&browser, &gateway, "#/approvals").await;
    browser.wait("#search-status", SOON).await;
    browser
        .client
        .find(Locator::Css("#search-status"))
        .await
        .unwrap()
        .select_by_value("expired")
        .await
        .unwrap();
    browser.click("#search button[type='submit']").await;
    browser
        .wait(
            &format!("#search-table tr[data-approval='{late}'] [data-state='expired']"),
            SOON,
        )
        .await;
    assert!(
        !browser
            .has(&format!("#queue tr[data-approval='{late}']"))
            .await,
        "an expired approval leaves the queue"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roles_separation_of_duties_and_cross_site_requests_are_enforced_by_the_server() {
    let gateway = gateway(3600).await;
    let id = approval_id(&transfer(&gateway, "roles", "r").await);
    let page = format!("{}#/approvals/{id}", console(&gateway));

    // The pages carry a strict policy; the session cookie its protections.
    let (status, headers, html) =
        gatehouse_tests::http(gateway.admin, "GET", "/console/", &[], "").await;
    let html = String::from_utf8(html.to_vec()).unwrap();
    assert_eq!(status, 200);
    assert!(!html.contains("<script>"), "no inline script");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'")
            && csp.contains("frame-ancestors 'none'")
            && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    let (status, headers, _) = gatehouse_tests::mcp::mcp_post(
        gateway.admin,
        "/console/session",
        &[],
        json!({ "token": AUDITOR }).to_string(),
    )
    .await;
    assert_eq!(status, 200);
    let cookie = headers["set-cookie"].to_str().unwrap().to_owned();
    for part in ["HttpOnly", "SameSite=Strict", "Max-Age=28800", "Path=/"] {
        assert!(cookie.contains(part), "{cookie}");
    }
    let session = cookie.split(';').next().unwrap().to_owned();

    // A cross-site POST riding the cookie, without the CSRF token or from another origin.
    let approve = format!("/v1/approvals/{id}/approve");
    // Without the token: the CSRF check refuses it. From another site's page: the listener's
    // origin check refuses it first, whatever it carries.
    for (headers, refusal) in [
        (vec![("cookie", session.as_str())], "\"csrf\""),
        (
            vec![
                ("cookie", session.as_str()),
                ("origin", "http://evil.example"),
            ],
            "\"forbidden_origin\"",
        ),
    ] {
        let (status, _, body) =
            gatehouse_tests::mcp::mcp_post(gateway.admin, &approve, &headers, "{}").await;
        assert_eq!(status, 403, "{body}");
        assert!(body.contains(refusal), "{body}");
    }

    // An auditor sees the approval but no control to decide it, and the server refuses one.
    let browser = signed_in(&gateway, AUDITOR, (1280, 900)).await;
    browser.client.goto(&page).await.unwrap();
    browser
        .wait_text("#tool", "test.ledger.transfer", SOON)
        .await;
    assert!(!browser.has("#approve").await && !browser.has("#reject").await);
    let (status, body) = approve_from_page(&browser, &id, true).await;
    assert_eq!(
        (status, &body["error"]),
        (403, &json!("forbidden")),
        "{body}"
    );
    // Without the CSRF token, even from the page itself.
    let (status, body) = approve_from_page(&browser, &id, false).await;
    assert_eq!((status, &body["error"]), (403, &json!("csrf")), "{body}");
    // The auditor has no Plugins rollback, no approvals decisions; sign out ends the session.
    browser.click("#sign-out").await;
    browser.wait("#signin", SOON).await;
    let (status, _) = page_fetch(&browser, "GET", "../v1/approvals", false).await;
    assert_eq!(status, 401);
    drop(browser);

    // The proposer (the agent's own principal) is told why they cannot decide, and the server
    // refuses them anyway.
    let browser = signed_in(&gateway, SELF_APPROVER, (390, 844)).await;
    browser.client.goto(&page).await.unwrap();
    browser
        .wait_text("#self-approval", "requesting chain", SOON)
        .await;
    let approve_button = browser.wait("#approve", SOON).await;
    assert_eq!(
        approve_button.attr("disabled").await.unwrap(),
        Some("true".to_owned())
    );
    let (status, body) = approve_from_page(&browser, &id, true).await;
    assert_eq!(
        (status, &body["error"]),
        (409, &json!("conflict")),
        "{body}"
    );
    drop(browser);

    // An operator rolls a policy back, after confirming.
    let bearer = format!("Bearer {OPERATOR}");
    let (status, _, body) = gatehouse_tests::mcp::mcp_post(
        gateway.admin,
        "/v1/plugins",
        &[
            ("authorization", bearer.as_str()),
            ("content-type", "application/wasm"),
        ],
        gatehouse_tests::artifacts::POLICY_PROBE.signed_as_version("2.0.0"),
    )
    .await;
    assert_eq!(status, 201, "{body}");
    let browser = signed_in(&gateway, OPERATOR, (1280, 900)).await;
    visit(&browser, &gateway, "#/plugins").await;
    let row = "#policies tr[data-policy='test.policy-probe']";
    browser.wait_text(row, "2.0.0", SOON).await;
    browser.click(&format!("{row} button.rollback")).await;
    browser
        .wait_text("#confirm", "in place of 2.0.0", SOON)
        .await;
    browser.click("#cancel-rollback").await;
    assert!(
        browser.text(row).await.contains("2.0.0"),
        "cancel changes nothing"
    );
    browser.click(&format!("{row} button.rollback")).await;
    browser.click("#confirm-rollback").await;
    browser.wait_text(row, "1.0.0", SOON).await;
    assert!(
        !browser.has("#history").await,
        "the change history is for auditors"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_chain_names_the_entry_edited_in_the_store_file() {
    let gateway = gateway(3600).await;
    for key in ["a", "b", "c"] {
        transfer(&gateway, key, key).await;
    }
    let browser = signed_in(&gateway, AUDITOR, (1280, 900)).await;
    visit(&browser, &gateway, "#/audit").await;
    browser.click("#verify").await;
    browser.wait("#verify-message[data-ok='true']", SOON).await;

    // The export link downloads what the filters select, as JSON lines.
    let (status, body) = request(
        gateway.admin,
        "GET",
        "/v1/audit/export?tool=test.ledger.transfer&kind=call",
        Some(AUDITOR),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let lines: Vec<Value> = String::from_utf8(body.to_vec())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines
            .iter()
            .all(|e| e["kind"] == "call" && e["outcome"] == "APPROVAL_REQUIRED")
    );

    let db = rusqlite::Connection::open(&gateway.store).unwrap();
    db.busy_timeout(Duration::from_secs(5)).unwrap();
    db.execute("UPDATE audit SET outcome = 'OK' WHERE seq = 2", [])
        .unwrap();
    drop(db);
    browser.click("#verify").await;
    let message = browser
        .wait_text("#verify-message[data-ok='false']", "entry 2", SOON)
        .await;
    assert!(message.contains("BROKEN after 1 good entries"), "{message}");
    assert!(message.contains("edited"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_live_queue_keeps_its_rows_and_shows_each_calls_arguments_in_one_line() {
    let gateway = gateway(3600).await;
    let browser = signed_in(&gateway, APPROVER, (1280, 900)).await;
    visit(&browser, &gateway, "#/approvals").await;
    let first = approval_id(&transfer(&gateway, "queue-1", "first").await);
    let row = format!("#queue tr[data-approval='{first}']");
    browser.wait(&row, LIVE).await;
    let element = browser.client.find(Locator::Css(&row)).await.unwrap();
    // New work arrives and the queue polls on: the row stays the same element, so a click
    // aimed at it lands (replaced rows went stale within a second).
    let second = approval_id(&transfer(&gateway, "queue-2", "second").await);
    browser
        .wait(&format!("#queue tr[data-approval='{second}']"), LIVE)
        .await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let text = element
        .text()
        .await
        .expect("the row is the element it was, not a replacement");
    assert!(text.contains("test.ledger.transfer"), "{text}");
    // One line of its arguments, for triage: a sensitive tool's masked.
    let summary = browser.text(&format!("{row} [data-field='summary']")).await;
    assert!(
        summary.contains("amount=sha256:") && !summary.contains("first"),
        "{summary}"
    );
    element
        .find(Locator::Css("a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_text("#tool", "test.ledger.transfer", SOON)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_to_one_approval_lands_there_after_sign_in_and_says_how_the_caller_waits() {
    let gateway = gateway(3600).await;
    let id = approval_id(&transfer(&gateway, "deep-1", "linked").await);
    // The link a paused result names, opened by an approver who is not signed in yet.
    let browser = Browser::start(1280, 900).await;
    let link = format!("{}#/approvals/{id}", console(&gateway));
    browser.client.goto(&link).await.unwrap();
    browser.type_into("#token", APPROVER).await;
    browser.click("#signin-submit").await;
    browser
        .wait_text("#tool", "test.ledger.transfer", SOON)
        .await;
    assert!(browser.text("h1").await.contains(&id));
    // This caller did not wait: its next call runs it once approved.
    let waiting = browser.text("#waiting").await;
    assert!(waiting.contains("for a retry"), "{waiting}");
    assert!(browser.text("#time-left").await.contains("left"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_promotes_a_shadow_binding_after_confirming() {
    // A code module in shadow: the console shows it, and promotes it on confirmation.
    let gateway = AdminGateway::start_with("test.ledger.*", json!({}), "1.0.0", "", |host| {
        host.pipeline.policy_default = PolicyDefault::Allow;
        let mut redact = bind("gatehouse.redact", "test.ledger.*", 1, json!({}));
        redact.mode = gatehouse_host::config::BindingMode::Shadow;
        host.pipeline.policies.push(redact);
    })
    .await;
    let browser = signed_in(&gateway, OPERATOR, (1280, 900)).await;
    visit(&browser, &gateway, "#/plugins").await;
    let row = "#policies tr[data-policy='gatehouse.redact']";
    browser
        .wait_text(&format!("{row} td.mode"), "shadow (1)", SOON)
        .await;
    browser.click(&format!("{row} button.promote")).await;
    browser
        .wait_text("#confirm", "shadow binding(s) of gatehouse.redact", SOON)
        .await;
    browser.click("#cancel-promote").await;
    assert!(
        browser.text(row).await.contains("shadow (1)"),
        "cancel changes nothing"
    );
    browser.click(&format!("{row} button.promote")).await;
    browser.click("#confirm-promote").await;
    browser
        .wait_text(&format!("{row} td.mode"), "enforcing", SOON)
        .await;
    assert!(!browser.has(&format!("{row} button.promote")).await);
    let (status, body) = request(
        gateway.admin,
        "GET",
        "/v1/audit?kind=plugin",
        Some(AUDITOR),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let entries: Value = serde_json::from_slice(&body).unwrap();
    assert!(
        entries["entries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["record"]["action"] == "promote"
                && e["record"]["module"] == "gatehouse.redact"
                && e["principal"] == "usr_ops_olaf"),
        "{entries}"
    );
}

/// An operator reads a session's timeline (the labels each call brought, and which call) and
/// ends it; an auditor reads it but gets no end button (issue 58).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_reads_a_sessions_timeline_and_ends_it() {
    let gateway = AdminGateway::start_with("test.ledger.*", json!({}), "1.0.0", "", |host| {
        host.pipeline.policy_default = PolicyDefault::Allow;
        host.sessions
            .labels
            .push(gatehouse_host::config::LabelRule {
                tools: gatehouse_tests::glob("gatehouse.echo.*"),
                produces: vec!["untrusted".to_owned()],
                sends: Vec::new(),
            });
    })
    .await;
    let echoed = gateway
        .call(
            "gatehouse.echo.echo",
            json!({ "message": "write to ada@example.com" }),
            json!({}),
        )
        .await;
    let call = record(&echoed)["tool_call_id"].as_str().unwrap().to_owned();

    let auditor = signed_in(&gateway, AUDITOR, (1280, 900)).await;
    visit(&auditor, &gateway, "#/sessions").await;
    auditor
        .wait_text("#sessions-table", "agent:bot", SOON)
        .await;
    auditor.click("#sessions-table a").await;
    auditor
        .wait_text("#session-actions", "gatehouse.echo.echo", SOON)
        .await;
    assert!(
        !auditor.has("#end-session").await,
        "an auditor cannot end it"
    );
    drop(auditor);

    let operator = signed_in(&gateway, OPERATOR, (1280, 900)).await;
    visit(&operator, &gateway, "#/sessions").await;
    operator
        .wait_text("#sessions-table", "untrusted", SOON)
        .await;
    operator.click("#sessions-table a").await;
    let labels = operator.wait_text("#session-labels", &call, SOON).await;
    assert!(
        labels.contains("pii:email") && labels.contains("untrusted"),
        "each label with the call that brought it: {labels}"
    );
    let actions = operator.text("#session-actions").await;
    assert!(actions.contains("pii:email"), "{actions}");
    operator.click("#end-session").await;
    operator.wait_text("#session-state", "ended", SOON).await;
    let (status, body) = request(
        gateway.admin,
        "GET",
        "/v1/audit?kind=session",
        Some(AUDITOR),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let entries: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        entries["entries"][0]["principal"], "usr_ops_olaf",
        "the end is audited, by whom: {entries}"
    );
}

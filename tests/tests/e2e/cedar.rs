//! Policies written as Cedar rules (issue 45): `gatehouse policy pack` checks them against the
//! served tools and signs them inside the generic Cedar module; the module decides real calls
//! over MCP (each verdict, a lowered mode, a mode above the maximum, obligations, abstain); a
//! rule file with mistakes is refused with places; rule sets hot-swap under load, roll back and
//! replay; a binding in shadow mode changes nothing, is recorded and counted, and its
//! promotion is audited; rules on the caller's roles and groups (from a JWT or an API key) and
//! the call's skills decide real calls.

use std::path::PathBuf;
use std::sync::Arc;

use gatehouse_host::Host;
use gatehouse_host::config::BindingMode;
use gatehouse_host::config::PolicyDefault;
use gatehouse_server::mcp::{ApiKeyConfig, McpConfig};
use gatehouse_tests::admin::{AdminGateway, OPERATOR};
use gatehouse_tests::artifacts::{ECHO, LEDGER, REST};
use gatehouse_tests::cli::{gatehouse, gatehouse_async, gatehouse_output, s};
use gatehouse_tests::host::{HostBuilder, rest_config};
use gatehouse_tests::upstream::Upstream;
use serde_json::{Value, json};

/// The rules of the verdict test, over `gatehouse.rest`, `test.ledger` and `gatehouse.echo`.
const RULES: &str = r#"// Transfers: above 100 a person approves; up to 100 they run at local_write.
@id("big-transfers")
@reason("transfers above 100 need a person")
@approval("required")
permit (principal, action == Action::"test.ledger.transfer", resource)
when { context.args.amount.greaterThan(decimal("100.0")) };

@id("small-transfers")
@approval("local_write")
permit (principal, action == Action::"test.ledger.transfer", resource)
when { context.args.amount.lessThanOrEqual(decimal("100.0")) };

// A mode above the tool's declared maximum (delegated) is refused when the rule applies.
@id("reverse-destructive")
@approval("destructive")
permit (principal, action in Action::"call", resource)
when { resource.capability == "reverse" };

@id("trial-no-writes")
@reason("tenant trial may not write upstream")
forbid (principal in Tenant::"trial", action == Action::"gatehouse.rest.send", resource);

@id("writes")
@evidence("rules-v1")
permit (principal, action == Action::"gatehouse.rest.send", resource)
when { context.args.method == "POST" };

@id("reads")
@redact("/body/path")
permit (principal, action == Action::"gatehouse.rest.get", resource);
"#;

/// A directory with the three adapters signed into it, a key file of the test publisher, and
/// `rules` written as `rules.cedar`.
struct Workspace {
    dir: tempfile::TempDir,
}

impl Workspace {
    fn new(rules: &str) -> Self {
        let dir = tempfile::tempdir().expect("a temporary directory");
        for (name, artifact) in [("rest", REST), ("ledger", LEDGER), ("echo", ECHO)] {
            std::fs::write(dir.path().join(format!("{name}.wasm")), artifact.signed())
                .expect("writable");
        }
        std::fs::write(
            dir.path().join("publisher.secret.toml"),
            gatehouse_tests::publisher().to_toml(),
        )
        .expect("writable");
        std::fs::write(dir.path().join("rules.cedar"), rules).expect("writable");
        Self { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// `gatehouse policy pack` arguments for `rules` (a file here) as module `id`.
    fn pack_args(&self, rules: &str, id: &str, version: &str) -> Vec<String> {
        let mut args: Vec<String> = [
            "policy",
            "pack",
            s(&self.path(rules)),
            "--id",
            id,
            "--module-version",
            version,
            "--key",
            s(&self.path("publisher.secret.toml")),
            "-o",
            s(&self.path(&format!("{id}-{version}.wasm"))),
        ]
        .map(str::to_owned)
        .to_vec();
        for adapter in ["rest", "ledger", "echo"] {
            args.push("--adapter".to_owned());
            args.push(s(&self.path(&format!("{adapter}.wasm"))).to_owned());
        }
        args
    }

    /// Packs `rules` (a file here) as `id` `version`: the signed module.
    fn pack(&self, rules: &str, id: &str, version: &str) -> Vec<u8> {
        let (code, out) = gatehouse(&self.pack_args(rules, id, version));
        assert_eq!(code, 0, "{out}");
        assert!(
            out.contains(&format!("packed policy {id} {version}")),
            "{out}"
        );
        std::fs::read(self.path(&format!("{id}-{version}.wasm"))).expect("pack wrote the module")
    }
}

/// An MCP key per tenant (`default`, `trial`), read from files in the returned directory.
fn keys() -> (McpConfig, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut config = McpConfig::default();
    for tenant in ["default", "trial"] {
        let file = dir.path().join(tenant);
        std::fs::write(&file, format!("{tenant}-key-5e2c")).expect("writable");
        config.api_keys.push(ApiKeyConfig {
            tenant: tenant.to_owned(),
            principal: None,
            env: None,
            file: Some(file),
            roles: Vec::new(),
            groups: Vec::new(),
        });
    }
    (config, dir)
}

/// `tools/call` over MCP as `tenant`, with an idempotency key when `key` is given.
async fn call(port: u16, tenant: &str, tool: &str, args: Value, key: Option<&str>) -> Value {
    let bearer = format!("Bearer {tenant}-key-5e2c");
    let meta = key.map_or(Value::Null, |k| json!({ "gatehouse/idempotency_key": k }));
    gatehouse_tests::mcp::call(
        port,
        &[("authorization", bearer.as_str())],
        tool,
        args,
        meta,
    )
    .await
}

fn outcome(result: &Value) -> &str {
    gatehouse_tests::mcp::outcome_of(result)
}

/// The rule ids the Cedar module's reasons name, from the host's own record of the call.
async fn decided(host: &Host, result: &Value) -> (String, Vec<String>) {
    let id = gatehouse_tests::mcp::record(result)["tool_call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a call id: {result}"))
        .to_owned();
    let record = gatehouse_tests::audit_record(host, &id).await;
    let decision = &record["result"]["policy_decision"];
    let module = &decision["modules"][0];
    let codes = module["reasons"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| r["code"].as_str().unwrap_or_default().to_owned())
        .collect();
    (module["verdict"].as_str().unwrap_or("?").to_owned(), codes)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cedar_rules_decide_real_calls_over_mcp() {
    let work = Workspace::new(RULES);
    let module = work.pack("rules.cedar", "test.rules", "1.0.0");
    // The signed module carries its rules' text for a reviewer.
    let (code, shown) = gatehouse_async(&["inspect", s(&work.path("test.rules-1.0.0.wasm"))]).await;
    assert_eq!(code, 0, "{shown}");
    let shown: Value = serde_json::from_str(&shown).expect("inspect prints JSON");
    assert_eq!(shown["cedar_rules"], RULES, "{shown}");
    assert_eq!(shown["manifest"]["kind"], "policy", "{shown}");
    let upstream = Upstream::start().await;
    let mut config = rest_config(&upstream);
    config.pipeline.policy_default = PolicyDefault::Deny;
    config.pipeline.tools = vec![gatehouse_tests::grant("*", &["default", "trial"])];
    config.pipeline.policies = vec![gatehouse_tests::bind("test.rules", "*", 0, json!({}))];
    let config = HostBuilder::on(config)
        .with(|c| {
            c.trust.publishers[0].policies = vec![gatehouse_tests::glob("test.*")];
        })
        .into_config();
    let host = HostBuilder::on(config)
        .adapters(&[REST, LEDGER, ECHO])
        .build();
    host.install_policy(&module)
        .expect("the packed rules install");
    let host = Arc::new(host);
    let (mcp, _keys) = keys();
    let port = gatehouse_tests::mcp::serve(Arc::clone(&host), &mcp).await;
    let url = upstream.url("/orders");

    // allow, with the rule's evidence: the upstream sees the POST.
    let sent = call(
        port,
        "default",
        "gatehouse.rest.send",
        json!({ "url": url, "method": "POST", "body": { "n": 1 } }),
        Some("k-send-1"),
    )
    .await;
    assert_eq!(outcome(&sent), "OK", "{sent}");
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(
        decided(&host, &sent).await,
        ("allow".into(), vec!["writes".into()])
    );

    // deny, by tenant: POLICY_BLOCKED naming the rule's reason, and the upstream sees nothing.
    let blocked = call(
        port,
        "trial",
        "gatehouse.rest.send",
        json!({ "url": url, "method": "POST", "body": { "n": 2 } }),
        Some("k-send-2"),
    )
    .await;
    assert_eq!(outcome(&blocked), "POLICY_BLOCKED", "{blocked}");
    assert!(
        blocked
            .to_string()
            .contains("tenant trial may not write upstream"),
        "{blocked}"
    );
    assert_eq!(upstream.seen().len(), 1, "the upstream saw the denied call");
    assert_eq!(
        decided(&host, &blocked).await,
        ("deny".into(), vec!["trial-no-writes".into()])
    );

    // approval required above the threshold (a number typed as a Cedar decimal).
    let big = call(
        port,
        "default",
        "test.ledger.transfer",
        json!({ "amount": 100.5, "currency": "EUR" }),
        Some("k-big"),
    )
    .await;
    assert_eq!(outcome(&big), "APPROVAL_REQUIRED", "{big}");

    // a lowered mode at or below it: the call runs at local_write.
    let small = call(
        port,
        "default",
        "test.ledger.transfer",
        json!({ "amount": 100, "currency": "EUR" }),
        Some("k-small"),
    )
    .await;
    assert_eq!(outcome(&small), "OK", "{small}");
    assert_eq!(
        gatehouse_tests::mcp::record(&small)["approval_mode_effective"],
        "local_write",
        "{small}"
    );

    // a mode above the declared maximum: refused, and nothing runs.
    let reverse = call(
        port,
        "default",
        "test.ledger.reverse",
        json!({ "transfer_id": "t1" }),
        Some("k-reverse"),
    )
    .await;
    assert_eq!(outcome(&reverse), "POLICY_BLOCKED", "{reverse}");
    assert_eq!(
        decided(&host, &reverse).await,
        ("deny".into(), vec!["APPROVAL_ABOVE_MAXIMUM".into()])
    );

    // an obligation: the pointer the rule names is redacted in the delivered result.
    let read = call(
        port,
        "default",
        "gatehouse.rest.get",
        json!({ "url": url }),
        None,
    )
    .await;
    assert_eq!(outcome(&read), "OK", "{read}");
    let structured = &read["structuredContent"];
    assert_eq!(structured["body"]["path"], "[REDACTED]", "{read}");
    assert_eq!(structured["body"]["method"], "GET", "{read}");
    assert_eq!(upstream.seen().len(), 2, "the read reached the upstream");

    // abstain: no rule names echo, so the operator default (deny) decides.
    let echo = call(
        port,
        "default",
        "gatehouse.echo.echo",
        json!({ "message": "hi" }),
        None,
    )
    .await;
    assert_eq!(outcome(&echo), "POLICY_BLOCKED", "{echo}");
    assert_eq!(decided(&host, &echo).await, ("abstain".into(), Vec::new()));
}

/// Rules on the caller's claims and the call's skills (issue 45, item 1).
const CLAIMS_RULES: &str = r#"@id("refunds-role")
@reason("only the refunds role may write upstream")
forbid (principal, action == Action::"gatehouse.rest.send", resource)
unless { principal.roles.contains("refunds") };

@id("eu-writes")
permit (principal, action == Action::"gatehouse.rest.send", resource)
when { principal.groups.contains("eu") && context.skills.contains("write-tone") };
"#;

/// An HS256 JWT from the test's identity provider for `tenant`, with `extra` claims.
fn jwt(tenant: &str, extra: &Value) -> String {
    let now = i64::try_from(jsonwebtoken::get_current_timestamp()).expect("a sane clock");
    let mut claims = json!({
        "iss": "https://idp.test/", "aud": "https://gatehouse.test/mcp",
        "sub": format!("user:{tenant}-1"), "tenant": tenant, "exp": now + 600,
    });
    claims
        .as_object_mut()
        .expect("an object")
        .extend(extra.as_object().expect("an object").clone());
    jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(JWT_SECRET.as_bytes()),
    )
    .expect("the token signs")
}

const JWT_SECRET: &str = "an-hmac-secret-for-the-claims-test";

/// The JWT's roles and groups claims (as `[mcp.jwt]` verifies them), an API key's roles and
/// groups, and the skills the config resolves for the call reach the rules, over MCP: each
/// call's outcome is what the rules say, the upstream sees only the allowed writes, and the
/// audit entry keeps the claims and skills the rules saw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_callers_claims_and_the_calls_skills_decide_over_mcp() {
    use gatehouse_host::config::{Skill, SkillScope};
    let work = Workspace::new(CLAIMS_RULES);
    let module = work.pack("rules.cedar", "test.claims", "1.0.0");
    let upstream = Upstream::start().await;
    let mut config = rest_config(&upstream);
    config.pipeline.policy_default = PolicyDefault::Deny;
    config.pipeline.tools = vec![gatehouse_tests::grant("*", &["default", "trial"])];
    config.pipeline.policies = vec![gatehouse_tests::bind("test.claims", "*", 0, json!({}))];
    // The skill resolves for tenant `default` only.
    config.pipeline.skills = vec![Skill {
        name: "write-tone".to_owned(),
        scope: SkillScope::Tenant,
        matches: "default".to_owned(),
        priority: 0,
        text: "Say what the write changes.".to_owned(),
    }];
    let config = HostBuilder::on(config)
        .with(|c| {
            c.trust.publishers[0].policies = vec![gatehouse_tests::glob("test.*")];
        })
        .into_config();
    let host = HostBuilder::on(config).adapters(&[REST]).build();
    host.install_policy(&module).expect("the rules install");
    let host = Arc::new(host);
    let (mut mcp, keys) = keys();
    mcp.api_keys[0].roles = vec!["refunds".to_owned()];
    mcp.api_keys[0].groups = vec!["eu".to_owned()];
    std::fs::write(keys.path().join("jwt-secret"), JWT_SECRET).expect("writable");
    mcp.jwt = Some(
        toml::from_str(&format!(
            "issuer = \"https://idp.test/\"\naudience = \"https://gatehouse.test/mcp\"\nalgorithms = [\"HS256\"]\nsecret_file = {:?}",
            keys.path().join("jwt-secret").display().to_string()
        ))
        .expect("a valid [mcp.jwt]"),
    );
    let port = gatehouse_tests::mcp::serve(Arc::clone(&host), &mcp).await;
    let url = upstream.url("/orders");
    let send = async |bearer: &str, n: u32| {
        let authorization = format!("Bearer {bearer}");
        let meta = json!({ "gatehouse/idempotency_key": format!("k-claims-{n}") });
        gatehouse_tests::mcp::call(
            port,
            &[("authorization", authorization.as_str())],
            "gatehouse.rest.send",
            json!({ "url": url, "method": "POST", "body": { "n": n } }),
            meta,
        )
        .await
    };

    // The refunds role, group eu, and the tenant's skill: allowed, and the upstream sees it.
    let token = jwt(
        "default",
        &json!({ "roles": ["support", "refunds"], "groups": ["eu"] }),
    );
    let allowed = send(&token, 1).await;
    assert_eq!(outcome(&allowed), "OK", "{allowed}");
    assert_eq!(upstream.seen().len(), 1);
    assert_eq!(
        decided(&host, &allowed).await,
        ("allow".into(), vec!["eu-writes".into()])
    );
    let id = gatehouse_tests::mcp::record(&allowed)["tool_call_id"]
        .as_str()
        .expect("a call id")
        .to_owned();
    let record = gatehouse_tests::audit_record(&host, &id).await;
    assert_eq!(
        record["action"]["claims"],
        json!({ "roles": ["support", "refunds"], "groups": ["eu"] }),
        "{record}"
    );
    assert_eq!(
        record["action"]["skills"],
        json!(["write-tone"]),
        "{record}"
    );

    // Without the role: denied by the forbid, and the upstream sees nothing.
    let token = jwt(
        "default",
        &json!({ "roles": ["support"], "groups": ["eu"] }),
    );
    let denied = send(&token, 2).await;
    assert_eq!(outcome(&denied), "POLICY_BLOCKED", "{denied}");
    assert!(
        denied
            .to_string()
            .contains("only the refunds role may write upstream"),
        "{denied}"
    );
    assert_eq!(
        decided(&host, &denied).await,
        ("deny".into(), vec!["refunds-role".into()])
    );

    // The role as a single string, but no group: no permit matches, so the default denies.
    let token = jwt("default", &json!({ "roles": "refunds" }));
    let no_group = send(&token, 3).await;
    assert_eq!(outcome(&no_group), "POLICY_BLOCKED", "{no_group}");
    assert_eq!(
        decided(&host, &no_group).await,
        ("abstain".into(), Vec::new())
    );

    // Role and group, in tenant trial, where the skill does not resolve: no permit matches.
    let token = jwt("trial", &json!({ "roles": ["refunds"], "groups": ["eu"] }));
    let no_skill = send(&token, 4).await;
    assert_eq!(outcome(&no_skill), "POLICY_BLOCKED", "{no_skill}");
    assert_eq!(
        decided(&host, &no_skill).await,
        ("abstain".into(), Vec::new())
    );
    assert_eq!(upstream.seen().len(), 1, "the upstream saw a refused call");

    // A roles claim of another type refuses the token at the door (401): nothing runs.
    let token = jwt(
        "default",
        &json!({ "roles": { "refunds": true }, "groups": ["eu"] }),
    );
    let (status, _, body) = gatehouse_tests::mcp::mcp_post(
        port,
        "/mcp",
        &[("authorization", format!("Bearer {token}").as_str())],
        gatehouse_tests::mcp::tools_call(
            "gatehouse.rest.send",
            json!({ "url": url, "method": "POST", "body": { "n": 6 } }),
            json!({ "gatehouse/idempotency_key": "k-claims-6" }),
        ),
    )
    .await;
    assert_eq!(status, 401, "{body}");
    assert!(
        body.contains("the token's claim `roles` must be a string or an array of strings"),
        "{body}"
    );
    assert_eq!(
        upstream.seen().len(),
        1,
        "the upstream saw a refused token's call"
    );

    // An API key's roles and groups count as a JWT's do.
    let by_key = send("default-key-5e2c", 5).await;
    assert_eq!(outcome(&by_key), "OK", "{by_key}");
    assert_eq!(upstream.seen().len(), 2);
}

#[test]
fn a_rule_file_with_mistakes_is_refused_with_places_and_nothing_is_written() {
    let work = Workspace::new("");
    for (name, text, expected) in [
        (
            "tool.cedar",
            "permit (principal,\n  action == Action::\"test.ledger.transfr\", resource);\n",
            "tool.cedar:2:13: for policy `policy0`, unrecognized action `Action::\"test.ledger.transfr\"`; did you mean `Action::\"test.ledger.transfer\"`?",
        ),
        (
            "argument.cedar",
            "permit (principal, action == Action::\"test.ledger.transfer\", resource)\nwhen { context.args.amont.greaterThan(decimal(\"1.0\")) };\n",
            "argument.cedar:2:8:",
        ),
        (
            "type.cedar",
            "forbid (principal, action == Action::\"test.ledger.transfer\", resource)\nwhen { context.args.currency > 3 };\n",
            "type.cedar:2:8:",
        ),
        // A session's labels are a set of strings (issue 58).
        (
            "session.cedar",
            "forbid (principal, action, resource)\nwhen { context.session.labels == \"private\" };\n",
            "session.cedar:2:8:",
        ),
    ] {
        std::fs::write(work.path(name), text).unwrap();
        let args = work.pack_args(name, "test.bad", "1.0.0");
        let (code, out) = gatehouse_output(&args, &[]);
        assert_eq!(code, 2, "{name}: {out}");
        assert!(out.contains(expected), "{name}: {out}");
        assert!(out.contains("nothing written"), "{name}: {out}");
        assert!(
            !work.path("test.bad-1.0.0.wasm").exists(),
            "{name}: a module was written"
        );
    }
    // The argument and type problems say what is wrong.
    std::fs::write(
        work.path("both.cedar"),
        "permit (principal, action == Action::\"test.ledger.transfer\", resource)\nwhen { context.args.amont.greaterThan(decimal(\"1.0\")) };\nforbid (principal, action == Action::\"test.ledger.transfer\", resource)\nwhen { context.args.currency > 3 };\n",
    )
    .unwrap();
    let (_, out) = gatehouse_output(&work.pack_args("both.cedar", "test.bad", "1.0.0"), &[]);
    assert!(out.contains("amont"), "{out}");
    assert!(out.contains("2 problems"), "{out}");
}

#[test]
fn policy_test_runs_table_tests_and_fails_on_a_wrong_expectation() {
    let work = Workspace::new(RULES);
    let cases = r#"
[[case]]
name = "a big transfer needs a person"
tool = "test.ledger.transfer"
args = { amount = 250.0, currency = "EUR" }
expect = "require_approval"
rule = "big-transfers"

[[case]]
name = "a small one runs at local_write"
tool = "test.ledger.transfer"
args = { amount = 20, currency = "EUR" }
expect = "allow"
effective_mode = "local_write"

[[case]]
name = "trial may not write"
tool = "gatehouse.rest.send"
tenant = "trial"
args = { url = "http://x/", method = "POST" }
expect = "deny"
rule = "trial-no-writes"

[[case]]
name = "echo is not ruled"
tool = "gatehouse.echo.echo"
args = { message = "hi" }
expect = "abstain"
"#;
    std::fs::write(work.path("cases.toml"), cases).unwrap();
    let mut args = vec![
        "policy".to_owned(),
        "test".to_owned(),
        s(&work.path("rules.cedar")).to_owned(),
        s(&work.path("cases.toml")).to_owned(),
    ];
    for adapter in ["rest", "ledger", "echo"] {
        args.push("--adapter".to_owned());
        args.push(s(&work.path(&format!("{adapter}.wasm"))).to_owned());
    }
    let (code, out) = gatehouse(&args);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("4 passed, 0 failed"), "{out}");

    std::fs::write(
        work.path("cases.toml"),
        cases.replace("expect = \"deny\"", "expect = \"allow\""),
    )
    .unwrap();
    let (code, out) = gatehouse(&args);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "FAIL  trial may not write: expected allow, got deny (rules: trial-no-writes)"
        ),
        "{out}"
    );

    // A case states the caller's roles and groups and the call's skills.
    std::fs::write(work.path("claims.cedar"), CLAIMS_RULES).unwrap();
    let claims = r#"
[[case]]
name = "the refunds role, group eu and the skill"
tool = "gatehouse.rest.send"
args = { url = "http://x/", method = "POST" }
roles = ["support", "refunds"]
groups = ["eu"]
skills = ["write-tone"]
expect = "allow"
rule = "eu-writes"

[[case]]
name = "without the role"
tool = "gatehouse.rest.send"
args = { url = "http://x/", method = "POST" }
roles = ["support"]
groups = ["eu"]
skills = ["write-tone"]
expect = "deny"
rule = "refunds-role"

[[case]]
name = "without the skill"
tool = "gatehouse.rest.send"
args = { url = "http://x/", method = "POST" }
roles = ["refunds"]
groups = ["eu"]
expect = "abstain"
"#;
    std::fs::write(work.path("claims.toml"), claims).unwrap();
    args[2] = s(&work.path("claims.cedar")).to_owned();
    args[3] = s(&work.path("claims.toml")).to_owned();
    let (code, out) = gatehouse(&args);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 passed, 0 failed"), "{out}");

    // A case states the session: its labels and the tools it called before.
    std::fs::write(work.path("session.cedar"), SESSION_RULES).unwrap();
    let session = r#"
[[case]]
name = "a send after private data and untrusted content waits for a person"
tool = "gatehouse.rest.send"
args = { url = "http://x/", method = "POST" }
labels = ["private", "untrusted"]
prior = ["gatehouse.rest.get", "gatehouse.echo.echo"]
expect = "require_approval"
rule = "trifecta"

[[case]]
name = "after private data alone it runs"
tool = "gatehouse.rest.send"
args = { url = "http://x/", method = "POST" }
labels = ["private"]
prior = ["gatehouse.rest.get"]
expect = "allow"
rule = "sends"

[[case]]
name = "the labels without the fetch"
tool = "gatehouse.rest.send"
args = { url = "http://x/", method = "POST" }
labels = ["private", "untrusted"]
expect = "allow"
rule = "sends"
"#;
    std::fs::write(work.path("session.toml"), session).unwrap();
    args[2] = s(&work.path("session.cedar")).to_owned();
    args[3] = s(&work.path("session.toml")).to_owned();
    let (code, out) = gatehouse(&args);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("3 passed, 0 failed"), "{out}");
}

/// Rules over the caller's session: a send after private data and untrusted content fetched
/// by echo waits for a person; any other send runs.
const SESSION_RULES: &str = r#"@id("trifecta")
@reason("private data and untrusted content in this session; sending out needs a person")
@approval("required")
permit (principal, action == Action::"gatehouse.rest.send", resource)
when {
    context.session.labels.contains("private") &&
    context.session.labels.contains("untrusted") &&
    context.session.tools.contains("gatehouse.echo.echo")
};

@id("sends")
permit (principal, action == Action::"gatehouse.rest.send", resource)
unless {
    context.session.labels.contains("untrusted") &&
    context.session.tools.contains("gatehouse.echo.echo")
};
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rule_sets_swap_under_load_roll_back_and_replay() {
    let work = Workspace::new(
        "@id(\"echo-ok\") permit (principal, action == Action::\"gatehouse.echo.echo\", resource);\n",
    );
    std::fs::write(
        work.path("v2.cedar"),
        "@id(\"echo-closed\") @reason(\"echo is closed\")\nforbid (principal, action == Action::\"gatehouse.echo.echo\", resource);\n",
    )
    .unwrap();
    let v1 = work.pack("rules.cedar", "test.rules", "1.0.0");
    let v2 = work.pack("v2.cedar", "test.rules", "2.0.0");
    let store = gatehouse_tests::store_path();
    let host = HostBuilder::trusting(&["gatehouse.*", "test.*"], &["test.*"])
        .with(|c| {
            c.store.path = Some(store.clone());
            c.pipeline.policy_default = PolicyDefault::Deny;
            c.pipeline.policies = vec![gatehouse_tests::bind("test.rules", "*", 0, json!({}))];
        })
        .adapters(&[ECHO])
        .build();
    host.install_policy(&v1).expect("v1 installs");
    let host = Arc::new(host);
    let recorded = gatehouse_tests::echo(&host, "before").await;
    assert!(recorded.is_ok(), "{recorded:#?}");

    // 4 callers while v1 is swapped for v2: every call is decided by one version or the other.
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let callers: Vec<_> = (0..4)
        .map(|_| {
            let (host, stop) = (Arc::clone(&host), Arc::clone(&stop));
            tokio::spawn(async move {
                let mut seen = Vec::new();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let result = gatehouse_tests::echo(&host, "m").await;
                    let version = result
                        .policy_decision
                        .as_ref()
                        .and_then(|d| d.modules[0].module.as_ref().map(|m| m.version.clone()));
                    seen.push((result.outcome.to_string(), version));
                }
                seen
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    host.install_policy(&v2).expect("v2 installs");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut total = 0;
    for caller in callers {
        for (outcome, version) in caller.await.expect("a caller finishes") {
            total += 1;
            match version.as_deref() {
                Some("1.0.0") => assert_eq!(outcome, "OK"),
                Some("2.0.0") => assert_eq!(outcome, "POLICY_BLOCKED"),
                other => panic!("a call decided by {other:?}: {outcome}"),
            }
        }
    }
    assert!(total > 8, "only {total} calls ran");
    assert_eq!(
        gatehouse_tests::echo(&host, "after")
            .await
            .outcome
            .to_string(),
        "POLICY_BLOCKED"
    );
    host.rollback_policy("test.rules").expect("rolls back");
    assert!(gatehouse_tests::echo(&host, "rolled back").await.is_ok());
    drop(host);

    // Replay the call recorded under v1 with v2: the decision would change.
    let config = work.path("gatehouse.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\npath = {:?}\n\n[[trust.publisher]]\nkey_id = \"test-publisher\"\npublic_key = \"{}\"\npolicies = [\"test.*\"]\n\n[[pipeline.policy]]\nmodule = \"test.rules\"\ntools = [\"*\"]\n",
            store.display().to_string(),
            gatehouse_tests::publisher().public_key().to_base64()
        ),
    )
    .unwrap();
    let (code, out) = gatehouse_async(&[
        "replay",
        &recorded.tool_call_id,
        "--policy",
        s(&work.path("test.rules-2.0.0.wasm")),
        "--config",
        s(&config),
    ])
    .await;
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("the decision WOULD CHANGE"), "{out}");
    assert!(out.contains("echo-closed"), "{out}");
}

#[tokio::test]
async fn a_shadow_binding_changes_nothing_is_recorded_and_counted_and_its_promotion_audited() {
    let work = Workspace::new(
        "@id(\"no-transfers\") @reason(\"transfers are frozen\")\nforbid (principal, action == Action::\"test.ledger.transfer\", resource);\n",
    );
    work.pack("rules.cedar", "test.rules", "1.0.0");
    let rules = work.path("test.rules-1.0.0.wasm");
    let extra = format!("\n[plugins]\npolicies = [{:?}]\n", s(&rules));
    let gw = AdminGateway::start_with(
        "*",
        json!({ "verdict": "allow" }),
        "1.0.0",
        &extra,
        |host| {
            let mut binding = gatehouse_tests::bind("test.rules", "*", 1, json!({}));
            binding.mode = BindingMode::Shadow;
            host.pipeline.policies.push(binding);
        },
    )
    .await;

    // In shadow, a deny rule changes no outcome.
    let echo = gw
        .call(
            "gatehouse.echo.echo",
            json!({ "message": "hi" }),
            Value::Null,
        )
        .await;
    assert_eq!(outcome(&echo), "OK", "{echo}");
    let transfer = gw
        .call(
            "test.ledger.transfer",
            json!({ "amount": 5, "currency": "EUR" }),
            json!({ "gatehouse/idempotency_key": "shadow-1" }),
        )
        .await;
    assert_eq!(outcome(&transfer), "OK", "{transfer}");

    // Its would-be decision is in the audit entry, beside the real one.
    let id = gatehouse_tests::mcp::record(&transfer)["tool_call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, audit) = gw
        .admin(
            "GET",
            &format!("/v1/audit?tool_call_id={id}"),
            Some(gatehouse_tests::admin::AUDITOR),
            None,
        )
        .await;
    assert_eq!(status, 200, "{audit}");
    let entry = &audit["entries"][0]["record"];
    let decision = &entry["result"]["policy_decision"];
    assert_eq!(decision["verdict"], "allow", "{entry}");
    let shadow = &decision["shadow"][0];
    assert_eq!(shadow["module_id"], "test.rules", "{entry}");
    assert_eq!(shadow["verdict"], "deny", "{entry}");
    assert_eq!(shadow["would_be"], "deny", "{entry}");
    assert_eq!(shadow["changes"], true, "{entry}");
    assert_eq!(shadow["reasons"][0]["code"], "no-transfers", "{entry}");

    // ... and counted: one call it would change, one it would not.
    let (_, metrics) = gw
        .admin(
            "GET",
            "/metrics",
            Some(gatehouse_tests::admin::AUDITOR),
            None,
        )
        .await;
    let metrics = metrics.as_str().unwrap_or_default().to_owned();
    for (verdict, changes) in [("deny", "true"), ("abstain", "false")] {
        let line = format!(
            "gatehouse_policy_shadow_decisions_total{{module=\"test.rules\",version=\"1.0.0\",verdict=\"{verdict}\",changes=\"{changes}\"}} 1"
        );
        assert!(metrics.contains(&line), "{line} in:\n{metrics}");
    }

    // Promotion: an operator's audited act; the rule then decides.
    let (code, out) = gw
        .cli("usr_ops_olaf.token", &["policy", "promote", "test.rules"])
        .await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("promoted `test.rules`: 1 shadow binding(s) now enforcing"),
        "{out}"
    );
    let (status, plugins) = gw
        .admin(
            "GET",
            "/v1/audit?kind=plugin",
            Some(gatehouse_tests::admin::AUDITOR),
            None,
        )
        .await;
    assert_eq!(status, 200);
    let promoted = plugins["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["record"]["action"] == "promote")
        .unwrap_or_else(|| panic!("no promote entry: {plugins}"));
    assert_eq!(promoted["principal"], "usr_ops_olaf", "{promoted}");
    assert_eq!(promoted["record"]["module"], "test.rules", "{promoted}");
    let (status, again) = gw
        .admin(
            "POST",
            "/v1/policies/test.rules/promote",
            Some(OPERATOR),
            None,
        )
        .await;
    assert_eq!(status, 409, "{again}");

    let frozen = gw
        .call(
            "test.ledger.transfer",
            json!({ "amount": 5, "currency": "EUR" }),
            json!({ "gatehouse/idempotency_key": "shadow-2" }),
        )
        .await;
    assert_eq!(outcome(&frozen), "POLICY_BLOCKED", "{frozen}");
    assert!(
        frozen.to_string().contains("transfers are frozen"),
        "{frozen}"
    );
}

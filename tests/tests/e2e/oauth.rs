//! Each user's own upstream account (issue 60), end to end: a certified OpenID provider
//! (`oidc-provider`) and an MCP server written with the official Python SDK that checks every
//! bearer token against the provider's keys and records who called, on loopback; the server
//! imported (with the operator's own token) and served by `gatehouse serve`, its grant then
//! sending each caller's own token (`oauth = "idp"`); a headless Chromium following the link a
//! paused call gives, signing in and consenting. What the upstream, the provider and the store
//! saw is asserted, not only what the gateway says.

use std::path::Path;
use std::time::Duration;

use gatehouse_tests::artifacts::MCP_UPSTREAM;
use gatehouse_tests::browser::Browser;
use gatehouse_tests::cli::gatehouse_output;
use gatehouse_tests::free_port;
use gatehouse_tests::gateway::{Gateway, Serve};
use gatehouse_tests::mcp::{Client, client, next_event, rmcp_call, texts};
use gatehouse_tests::oauth::{Provider, Upstream};
use serde_json::{Value, json};

use super::import::{key_file, serve_config};

const CLIENT: (&str, &str) = ("gatehouse", "gatehouse-client-secret-5d2e");
const TRUST: &str = "oauth-e2e-exchange-trust-secret-of-32-bytes";
const ALICE: &str = "alice-key-oauth-71c3";
const BOB: &str = "bob-key-oauth-2a9f";
const OPERATOR: &str = "operator-token-oauth-9b0d";
const TOOL_WHOAMI: &str = "test.issues.whoami";
const TOOL_CREATE: &str = "test.issues.create_issue";

/// The gateway serving the import, its store's file and the MCP URL.
struct Served {
    gateway: Gateway,
    store: std::path::PathBuf,
    mcp: u16,
    admin: u16,
    /// Its config file, and the signed adapter it serves.
    config: std::path::PathBuf,
    adapter: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Served {
    /// A second gateway with this one's config on other ports: the same store (where it is
    /// shared), vault key, provider and adapter; and its MCP port.
    async fn beside(&self) -> (Gateway, u16) {
        let (mcp, admin) = (free_port(), free_port());
        let text = std::fs::read_to_string(&self.config)
            .unwrap()
            .replace(
                &format!("127.0.0.1:{}", self.mcp),
                &format!("127.0.0.1:{mcp}"),
            )
            .replace(
                &format!("127.0.0.1:{}", self.admin),
                &format!("127.0.0.1:{admin}"),
            );
        let config = self.config.with_file_name("beside.toml");
        std::fs::write(&config, text).unwrap();
        let gateway = Serve::config(&config)
            .adapter(&self.adapter)
            .wait_for(mcp)
            .wait_for(admin)
            .start()
            .await;
        (gateway, mcp)
    }

    async fn client(&self, key: &str) -> Client {
        client(&format!("http://127.0.0.1:{}/mcp", self.mcp), Some(key)).await
    }

    /// `SELECT` one column of the store's `connections` rows, by principal.
    fn connections(&self) -> Vec<(String, String, String)> {
        let db = rusqlite::Connection::open(&self.store).unwrap();
        let mut statement = db
            .prepare("SELECT principal, sealed, token_hash FROM connections ORDER BY principal")
            .unwrap();
        statement
            .query_map([], |row| Ok((row.get(0)?, row.get(1)?, row.get(2)?)))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    }
}

/// Imports `upstream` as `test.issues` with the operator's own token, then serves it with the
/// grant sending each caller's token for provider `idp`, alice and bob as API-key callers;
/// `extra` ends the config (more keys of the provider's table first, then tables).
async fn serve(provider: &Provider, upstream: &Upstream, dir: &Path, extra: &str) -> Served {
    serve_on(provider, upstream, dir, extra, None).await
}

/// [`serve`], its state in the PostgreSQL database at `database` if given (else a SQLite file).
async fn serve_on(
    provider: &Provider,
    upstream: &Upstream,
    dir: &Path,
    extra: &str,
    database: Option<String>,
) -> Served {
    let (key, key_path) = key_file(dir);
    let out = dir.join("out");
    let operator = provider.exchange(CLIENT, TRUST, "operator", upstream.url());
    let (code, text) = gatehouse_output(
        &[
            "import",
            "mcp",
            upstream.url(),
            "--id",
            "test.issues",
            "--header",
            "Authorization: Bearer ${OPERATOR_TOKEN}",
            "--out",
            out.to_str().unwrap(),
            "--key",
            key_path.to_str().unwrap(),
            "--component",
            MCP_UPSTREAM.wasm,
        ],
        &[("OPERATOR_TOKEN", &operator)],
    );
    assert_eq!(code, 0, "{text}");
    let state = tempfile::tempdir().unwrap();
    let store = state.path().join("state.db");
    let file = |name: &str, text: &str| {
        let path = state.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let extra = format!(
        "[oauth]\nvault_key_file = {vault:?}\nrefresh_before_seconds = 1\n\n\
         [[oauth.provider]]\nid = \"idp\"\nissuer = \"{issuer}\"\nclient_id = \"{id}\"\n\
         client_secret_file = {secret:?}\nscopes = [\"openid\"]\nresource = \"{resource}\"\n{extra}\n\n\
         [[mcp.api_key]]\ntenant = \"default\"\nprincipal = \"user:alice\"\nfile = {alice:?}\n\n\
         [[mcp.api_key]]\ntenant = \"default\"\nprincipal = \"user:bob\"\nfile = {bob:?}\n\n\
         [[admin.token]]\nprincipal = \"usr_ops_olu\"\nroles = [\"operator\"]\nfile = {operator:?}\n",
        vault = state.path().join("vault.key").display().to_string(),
        issuer = provider.issuer(),
        id = CLIENT.0,
        secret = file("client.secret", CLIENT.1),
        resource = upstream.url(),
        alice = file("alice.key", ALICE),
        bob = file("bob.key", BOB),
        operator = file("operator.token", OPERATOR),
    );
    let (mcp, admin) = (free_port(), free_port());
    let store_path = store.clone();
    let config = serve_config(
        state.path(),
        &out,
        &key,
        mcp,
        admin,
        &extra,
        |host| match database {
            Some(url) => host.store.url = Some(url),
            None => host.store.path = Some(store_path),
        },
    );
    // The import bound the operator's token; each caller's own is sent instead.
    let text = std::fs::read_to_string(&config).unwrap();
    let text = text.replace("env = \"OPERATOR_TOKEN\"", "oauth = \"idp\"");
    assert!(text.contains("oauth = \"idp\""), "{text}");
    std::fs::write(&config, &text).unwrap();
    let adapter = out.join("test.issues.wasm");
    let gateway = Serve::config(&config)
        .adapter(&adapter)
        .wait_for(mcp)
        .wait_for(admin)
        .start()
        .await;
    Served {
        gateway,
        store,
        mcp,
        admin,
        config: config.into(),
        adapter,
        _dir: state,
    }
}

/// Calls `tool` as `client`: the record (`_meta["gatehouse/result"]`) and the text.
async fn call(client: &Client, tool: &str, args: Value, meta: Value) -> (Value, String) {
    let (result, record) = rmcp_call(client, tool, args, meta).await;
    (record, texts(&result).join("\n"))
}

/// A GET of `url` on loopback, with no cookie (not the browser that opened a flow): the status
/// and the body.
async fn get(url: &str) -> (u16, String) {
    let url = url::Url::parse(url).unwrap();
    let path = &url[url::Position::BeforePath..];
    let (status, _, body) =
        gatehouse_tests::http(url.port().unwrap(), "GET", path, &[], bytes::Bytes::new()).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// One JSON-RPC request to the MCP endpoint as alice, speaking `version`: the answer.
async fn raw(port: u16, version: &str, method: &str, params: Value) -> Value {
    let auth = format!("Bearer {ALICE}");
    let name = params["name"].as_str().unwrap_or_default().to_owned();
    let body = json!({ "jsonrpc": "2.0", "id": 7, "method": method, "params": params });
    let mut headers = vec![
        ("authorization", auth.as_str()),
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", version),
    ];
    if version == "2026-07-28" {
        headers.extend([("mcp-method", method), ("mcp-name", name.as_str())]);
    }
    let (_, _, body) =
        gatehouse_tests::http(port, "POST", "/mcp", &headers, body.to_string()).await;
    let text = String::from_utf8_lossy(&body);
    // An event stream's last `data:` line, or the JSON itself.
    let json = text
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .next_back()
        .unwrap_or(&text);
    serde_json::from_str(json.trim()).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// Alice's 2025-11-25 `whoami`, which must end with the URL elicitation error (-32042): the
/// answer.
async fn paused_2025(port: u16) -> Value {
    let call = json!({ "name": TOOL_WHOAMI, "arguments": {} });
    let answer = raw(port, "2025-11-25", "tools/call", call).await;
    assert_eq!(answer["error"]["code"], -32042, "{answer}");
    answer
}

/// A 2025-11-25 `GET` stream of the MCP endpoint as alice: its reader, past the status line.
async fn listen(port: u16) -> tokio::io::BufReader<tokio::net::TcpStream> {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let head = format!(
        "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {ALICE}\r\n\
         Accept: text/event-stream\r\nMCP-Protocol-Version: 2025-11-25\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut reader = tokio::io::BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).await.unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    reader
}

/// The start URL a paused call's message names.
fn start_url(text: &str) -> String {
    let at = text
        .find("http://")
        .unwrap_or_else(|| panic!("no URL in: {text}"));
    text[at..]
        .split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches([';', '.', ','])
        .to_owned()
}

/// A person opens `url` in a fresh browser, signs in to the provider as `user` and consents:
/// the gateway's last page's text, and the URL it ended at.
async fn connect(provider: &Provider, url: &str, user: &str) -> (String, String) {
    let browser = Browser::start(1000, 800).await;
    browser.client.goto(url).await.unwrap();
    browser
        .wait("input[name=login]", Duration::from_secs(20))
        .await;
    browser.type_into("input[name=login]", user).await;
    browser.type_into("input[name=password]", "any").await;
    browser.click("button.login-submit").await;
    for _ in 0..200 {
        if browser.text("body").await.contains("Authorize") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let consent = browser.text("body").await;
    assert!(
        consent.contains("Authorize"),
        "no consent page: {consent}\nat {:?}\nthe provider said: {}",
        browser.client.current_url().await,
        provider.stderr()
    );
    browser.click("button.login-submit").await;
    browser.wait("#outcome", Duration::from_secs(20)).await;
    let text = browser.text("body").await;
    let at = browser.client.current_url().await.unwrap().to_string();
    (text, at)
}

/// Two gateways on one PostgreSQL database, alice's token due for refresh: her calls through
/// both at once refresh it once. The provider rotates refresh tokens and takes each once, so it
/// sees one refresh grant and no refused one, and both calls reach the upstream as alice.
#[tokio::test]
async fn two_gateways_on_one_database_refresh_a_connection_once() {
    let pg = gatehouse_tests::postgres::Postgres::start();
    let provider = Provider::start(
        CLIENT.0,
        CLIENT.1,
        &["--access-ttl", "5", "--exchange-trust-secret", TRUST],
    );
    let upstream = Upstream::start(provider.issuer());
    let dir = tempfile::tempdir().unwrap();
    let first = serve_on(&provider, &upstream, dir.path(), "", Some(pg.url())).await;
    let (_second, second_port) = first.beside().await;
    let on_first = first.client(ALICE).await;
    let (record, text) = call(&on_first, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["outcome"], "CONNECTION_REQUIRED", "{record}");
    let (page, _) = connect(&provider, &start_url(&text), "alice").await;
    assert!(page.contains("Connected"), "{page}");
    // The second gateway reads her connection from the one database.
    let on_second = client(&format!("http://127.0.0.1:{second_port}/mcp"), Some(ALICE)).await;
    let (record, text) = call(&on_second, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["status"], "ok", "{record}");
    assert!(text.contains("alice"), "{text}");

    // Her access token expires (5 s); then a call through each gateway at once.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let ((one, one_text), (two, two_text)) = tokio::join!(
        call(&on_first, TOOL_WHOAMI, json!({}), json!({})),
        call(&on_second, TOOL_WHOAMI, json!({}), json!({})),
    );
    assert_eq!(
        (&one["status"], &two["status"]),
        (&json!("ok"), &json!("ok")),
        "{one} {two}"
    );
    assert!(
        one_text.contains("alice") && two_text.contains("alice"),
        "{one_text} {two_text}"
    );
    let events = provider.events();
    let refreshes = |event: &str| {
        (events.iter())
            .filter(|e| e["event"] == event && e["grant_type"] == "refresh_token")
            .count()
    };
    assert_eq!(
        (refreshes("token"), refreshes("error")),
        (1, 0),
        "{events:#?}"
    );
}

#[tokio::test]
async fn each_user_acts_upstream_as_themselves_once_connected() {
    let mut provider = Provider::start(
        CLIENT.0,
        CLIENT.1,
        &["--access-ttl", "5", "--exchange-trust-secret", TRUST],
    );
    let upstream = Upstream::start(provider.issuer());
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&provider, &upstream, dir.path(), "").await;
    let alice = served.client(ALICE).await;

    // Not connected: the call pauses, names where to connect, and nothing reached upstream.
    let (record, text) = call(&alice, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["status"], "paused", "{record}");
    assert_eq!(record["outcome"], "CONNECTION_REQUIRED", "{record}");
    let link = start_url(&text);
    assert!(link.contains("/oauth/start?state="), "{text}");
    assert!(upstream.calls().is_empty(), "{:?}", upstream.calls());
    assert!(served.connections().is_empty());

    // A forged state is refused, and nothing is stored.
    let forged = link.replace("/oauth/start?state=", "/oauth/callback?code=x&state=forged");
    let (status, body) = get(&forged).await;
    assert_eq!(status, 400, "{body}");
    assert!(served.connections().is_empty());

    // Alice connects in her browser; the provider's consent, then the gateway's page.
    let (page, ended_at) = connect(&provider, &link, "alice").await;
    assert!(page.contains("Connected"), "{page}");
    assert!(ended_at.contains("/oauth/callback"), "{ended_at}");
    let rows = served.connections();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].0, "user:alice");
    assert!(
        !rows[0].1.contains("eyJ"),
        "the row holds the token sealed only"
    );

    // The same link cannot be opened again, nor its callback (code and state) replayed.
    let (status, _) = get(&link).await;
    assert_eq!(status, 400);
    let (status, body) = get(&ended_at).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(served.connections().len(), 1);

    // The retry runs as alice, once; a write runs once under its key and replays after.
    let (record, text) = call(&alice, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["status"], "ok", "{record}");
    assert!(text.contains("alice"), "{text}");
    let key = json!({ "gatehouse/idempotency_key": "issue-1" });
    let title = json!({ "title": "broken build" });
    let (first, _) = call(&alice, TOOL_CREATE, title.clone(), key.clone()).await;
    let (again, _) = call(&alice, TOOL_CREATE, title, key).await;
    assert_eq!(first["status"], "ok", "{first}");
    assert_eq!(again["status"], "ok", "{again}");
    assert_eq!(
        upstream.calls(),
        [
            ("whoami".to_owned(), "alice".to_owned()),
            ("create_issue".to_owned(), "alice".to_owned())
        ]
    );

    // Bob gets a flow of his own; alice's token is never used for him.
    let bob = served.client(BOB).await;
    let (record, text) = call(&bob, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["outcome"], "CONNECTION_REQUIRED", "{record}");
    let bobs = start_url(&text);
    assert_ne!(bobs, link);
    let (page, _) = connect(&provider, &bobs, "bob").await;
    assert!(page.contains("Connected"), "{page}");
    let (_, text) = call(&bob, TOOL_WHOAMI, json!({}), json!({})).await;
    assert!(text.contains("bob"), "{text}");

    // Bob, signed in to the console with his own credential, sees his connection (not
    // alice's), no operator's page, and revokes it: the provider is told.
    {
        let browser = Browser::start(1000, 800).await;
        let console = format!("http://127.0.0.1:{}/console/", served.admin);
        browser.client.goto(&console).await.unwrap();
        browser.type_into("#token", BOB).await;
        browser.click("#signin-submit").await;
        browser.wait("#connections", Duration::from_secs(20)).await;
        let table = browser.text("#connections").await;
        assert!(table.contains("idp"), "{table}");
        let script = "const done = arguments[0]; \
            Promise.all(['../v1/me/connections', '../v1/connections', '../v1/approvals'] \
              .map((p) => fetch(p, { credentials: 'same-origin' }).then(async (r) => [r.status, await r.json()]))) \
            .then(done);";
        let answers = browser.run_async(script).await;
        assert_eq!(answers[0][0], 200, "{answers}");
        let mine = answers[0][1]["connections"].as_array().unwrap();
        assert_eq!(mine.len(), 1, "{answers}");
        assert_eq!(mine[0]["principal"], "user:bob", "{answers}");
        assert_eq!(answers[1][0], 403, "{answers}");
        assert_eq!(answers[2][0], 403, "{answers}");
        browser.click("#revoke-idp").await;
        browser
            .wait("#no-connections", Duration::from_secs(20))
            .await;
    }
    assert!(
        provider
            .events()
            .iter()
            .any(|e| e["event"] == "revocation" && e["sub"] == "bob"),
        "{:?}",
        provider.events()
    );
    let (record, _) = call(&bob, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["outcome"], "CONNECTION_REQUIRED", "{record}");

    // Alice's sealed tokens copied into a row of bob's do not open for him: he must connect
    // again, and the upstream never sees alice for bob's call.
    let db = rusqlite::Connection::open(&served.store).unwrap();
    let copied = db
        .execute(
            "INSERT INTO connections (tenant, principal, provider, resource, sealed, token_hash, \
             scope, expires_at, created_at, updated_at) SELECT tenant, 'user:bob', provider, \
             resource, sealed, token_hash, scope, expires_at, created_at, updated_at \
             FROM connections WHERE principal = 'user:alice'",
            [],
        )
        .unwrap();
    assert_eq!(copied, 1);
    let (record, _) = call(&bob, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["outcome"], "CONNECTION_REQUIRED", "{record}");
    let calls = upstream.calls();
    assert_eq!(
        calls.last().unwrap(),
        &("whoami".to_owned(), "bob".to_owned())
    );
    assert_eq!(calls.iter().filter(|(_, sub)| sub == "alice").count(), 2);

    // Alice's access token expires (5 s): the next call refreshes it, without her.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let (record, text) = call(&alice, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["status"], "ok", "{record}");
    assert!(text.contains("alice"), "{text}");
    assert!(
        provider.events().iter().any(|e| e["event"] == "token"
            && e["grant_type"] == "refresh_token"
            && e["sub"] == "alice"),
        "{:?}",
        provider.events()
    );

    // Each call's record names whose connection its request carried, by the token's hash.
    let audit_text = |store: &Path| -> Vec<String> {
        rusqlite::Connection::open(store)
            .unwrap()
            .prepare("SELECT record FROM audit")
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .map(Result::unwrap)
            .collect()
    };
    assert!(
        audit_text(&served.store)
            .iter()
            .any(|r| r.contains("user:alice@idp#")),
        "no call record names alice's connection"
    );

    // An operator lists the connections (never a token) and revokes alice's: the provider is
    // told, and her next call asks her to connect again.
    let (status, body) = gatehouse_tests::admin::request(
        served.admin,
        "GET",
        "/v1/connections?tenant=default",
        Some(OPERATOR),
        None,
    )
    .await;
    assert_eq!(status, 200);
    let listed: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(
        listed["connections"].as_array().unwrap().len(),
        2,
        "{listed}"
    );
    assert!(!String::from_utf8_lossy(&body).contains("eyJ"));
    let (status, body) = gatehouse_tests::admin::request(
        served.admin,
        "POST",
        "/v1/connections/revoke?tenant=default&principal=user:alice&provider=idp",
        Some(OPERATOR),
        None,
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        provider
            .events()
            .iter()
            .any(|e| e["event"] == "revocation" && e["sub"] == "alice"),
        "{:?}\n{}",
        provider.events(),
        served
            .gateway
            .log()
            .lines()
            .filter(|l| l.contains("revoke"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let (record, _) = call(&alice, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["outcome"], "CONNECTION_REQUIRED", "{record}");

    // A 2026-07-28 client that declared URL elicitation gets an `InputRequiredResult`.
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": { "elicitation": { "url": {} } },
    });
    let params = json!({ "name": TOOL_WHOAMI, "arguments": {}, "_meta": meta });
    let first = raw(served.mcp, "2026-07-28", "tools/call", params.clone()).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let request = &first["result"]["inputRequests"]["gatehouse_connect"];
    assert_eq!(request["method"], "elicitation/create", "{first}");
    assert_eq!(request["params"]["mode"], "url", "{first}");
    assert!(
        request["params"]["url"]
            .as_str()
            .unwrap()
            .contains("/oauth/start?state="),
        "{first}"
    );

    // A 2025-11-25 client that declared URL elicitation gets the URL elicitation error; once
    // the user connects there, its `GET` stream hears `notifications/elicitation/complete`.
    let mut stream = listen(served.mcp).await;
    let initialize = json!({ "protocolVersion": "2025-11-25", "capabilities": { "elicitation": { "url": {} } },
        "clientInfo": { "name": "t", "version": "1" } });
    raw(served.mcp, "2025-11-25", "initialize", initialize).await;
    let answer = paused_2025(served.mcp).await;
    let elicitation = &answer["error"]["data"]["elicitations"][0];
    assert_eq!(elicitation["mode"], "url", "{answer}");
    let link = elicitation["url"].as_str().unwrap().to_owned();
    let (page, _) = connect(&provider, &link, "alice").await;
    assert!(page.contains("Connected"), "{page}");
    let heard = next_event(&mut stream, Duration::from_secs(10))
        .await
        .expect("the stream tells the client");
    assert_eq!(
        heard["method"], "notifications/elicitation/complete",
        "{heard}"
    );
    assert_eq!(
        heard["params"]["elicitationId"], elicitation["elicitationId"],
        "{heard}"
    );

    // The 2026-07-28 client's retry (the same call, its answer given) runs as alice.
    let mut retry = params;
    retry["inputResponses"] = json!({ "gatehouse_connect": { "action": "accept" } });
    let answer = raw(served.mcp, "2026-07-28", "tools/call", retry).await;
    assert_eq!(
        answer["result"]["_meta"]["gatehouse/result"]["status"], "ok",
        "{answer}"
    );
    assert_eq!(
        upstream.calls().last().unwrap(),
        &("whoami".to_owned(), "alice".to_owned())
    );

    // No token in the gateway's log, the audit log or the results: every access token is a
    // JWT (`eyJ...`), so none may appear anywhere.
    let log = served.gateway.log();
    assert!(!log.contains("eyJ"), "a token in the gateway's log");
    let audit = audit_text(&served.store);
    assert!(audit.len() >= 6, "{}", audit.len());
    assert!(
        audit.iter().all(|r| !r.contains("eyJ")),
        "a token in the audit log"
    );
    // The provider saw the gateway's own client only, with PKCE-bound codes.
    assert!(provider.events().iter().all(|e| e["client_id"] == CLIENT.0));

    // The provider forgets every grant (restarted: its store is in memory). Once alice's
    // token expires, its refresh is refused: her connection is forgotten, her next call asks
    // her to connect again, and nothing reaches the upstream.
    provider.restart();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let before = upstream.calls().len();
    // (Alice's client declared URL elicitation above: the pause is the -32042 error.)
    paused_2025(served.mcp).await;
    assert!(
        !served
            .connections()
            .iter()
            .any(|(p, _, _)| p == "user:alice"),
        "the refused connection is forgotten"
    );
    assert_eq!(upstream.calls().len(), before);
    assert!(
        provider
            .events()
            .iter()
            .any(|e| e["event"] == "error" && e["grant_type"] == "refresh_token"),
        "{:?}",
        provider.events()
    );
}

/// Token exchange (RFC 8693): a caller identified by its organisation's JWT acts upstream as
/// itself with no browser and no flow; the exchanged token is kept until it expires; a caller
/// with an API key is refused, and reaches nothing.
#[tokio::test]
async fn a_callers_own_jwt_is_exchanged_for_their_upstream_token() {
    let provider = Provider::start(CLIENT.0, CLIENT.1, &["--exchange-trust-secret", TRUST]);
    let upstream = Upstream::start(provider.issuer());
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("jwt.secret");
    std::fs::write(&secret, TRUST).unwrap();
    let extra = format!(
        "exchange = true\n\n[mcp.jwt]\nissuer = \"https://id.example\"\naudience = \"gatehouse\"\n\
         algorithms = [\"HS256\"]\nsecret_file = {:?}\ntenant = \"default\"\n",
        secret.display().to_string()
    );
    let served = serve(&provider, &upstream, dir.path(), &extra).await;
    let exp = gatehouse_store::now_ms() / 1000 + 300;
    let carol = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
        &json!({ "sub": "carol", "iss": "https://id.example", "aud": "gatehouse", "exp": exp }),
        &jsonwebtoken::EncodingKey::from_secret(TRUST.as_bytes()),
    )
    .unwrap();
    let carols = served.client(&carol).await;
    for _ in 0..2 {
        let (record, text) = call(&carols, TOOL_WHOAMI, json!({}), json!({})).await;
        assert_eq!(record["status"], "ok", "{record}");
        assert!(text.contains("carol"), "{text}");
    }
    let exchanges: Vec<Value> = (provider.events().into_iter())
        .filter(|e| e["sub"] == "carol")
        .collect();
    assert_eq!(
        exchanges.len(),
        1,
        "kept, not exchanged again: {exchanges:?}"
    );
    assert_eq!(
        exchanges[0]["grant_type"],
        "urn:ietf:params:oauth:grant-type:token-exchange"
    );
    assert_eq!(
        upstream.calls(),
        [
            ("whoami".to_owned(), "carol".to_owned()),
            ("whoami".to_owned(), "carol".to_owned())
        ]
    );

    // An API key names nobody the provider knows: refused, nothing reaches the upstream.
    let alice = served.client(ALICE).await;
    let (record, text) = call(&alice, TOOL_WHOAMI, json!({}), json!({})).await;
    assert_eq!(record["status"], "rejected", "{record}");
    assert_eq!(record["outcome"], "IDENTITY_INVALID", "{record}");
    assert!(text.contains("bearer token"), "{text}");
    assert_eq!(upstream.calls().len(), 2);
    assert!(
        !served.gateway.log().contains(&carol),
        "the caller's JWT in the log"
    );
}

/// A peer agent's A2A task (issue 59's in-task authorization) waits in `AUTH_REQUIRED` while
/// its user's account is not connected, its status naming the link; once the user connects,
/// the task runner runs the call, once, as that user: `COMPLETED`.
#[tokio::test]
async fn an_a2a_task_waits_in_auth_required_until_its_user_connects() {
    let provider = Provider::start(CLIENT.0, CLIENT.1, &["--exchange-trust-secret", TRUST]);
    let upstream = Upstream::start(provider.issuer());
    let dir = tempfile::tempdir().unwrap();
    let served = serve(
        &provider,
        &upstream,
        dir.path(),
        "\n[mcp.a2a]\nname = \"issues\"\n",
    )
    .await;
    let base = format!("http://127.0.0.1:{}", served.mcp);
    let sent = gatehouse_tests::agent::a2a(
        &base,
        Some(ALICE),
        &["send", TOOL_WHOAMI, "{}", "msg-whoami-1"],
    )
    .await;
    let task = &sent[0]["task"];
    assert_eq!(
        task["status"]["state"], "TASK_STATE_AUTH_REQUIRED",
        "{task}"
    );
    let said = task["status"]["message"]["parts"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let link = start_url(&said);
    assert!(upstream.calls().is_empty());

    let (page, _) = connect(&provider, &link, "alice").await;
    assert!(page.contains("Connected"), "{page}");
    let id = task["id"].as_str().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let done = loop {
        let got = gatehouse_tests::agent::a2a(&base, Some(ALICE), &["get", id]).await;
        let task = got[0].clone();
        if task["status"]["state"] == "TASK_STATE_COMPLETED" {
            break task;
        }
        assert!(std::time::Instant::now() < deadline, "{task}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(done.to_string().contains("alice"), "{done}");
    assert_eq!(
        upstream.calls(),
        [("whoami".to_owned(), "alice".to_owned())]
    );
}

/// An MCP task waits for its user's connection in both protocol versions (the official Python
/// SDK's agent, as a task-aware agent host calls): the 2026-07-28 tasks extension's task and a
/// 2025-11-25 task-augmented call are `working`, naming the link; once the user connects, the
/// gateway runs each call, once, as that user, and the task ends with its result.
#[tokio::test]
async fn an_mcp_task_waits_until_its_user_connects_in_both_versions() {
    let provider = Provider::start(CLIENT.0, CLIENT.1, &["--exchange-trust-secret", TRUST]);
    let upstream = Upstream::start(provider.issuer());
    let dir = tempfile::tempdir().unwrap();
    let served = serve(&provider, &upstream, dir.path(), "").await;
    let url = format!("http://127.0.0.1:{}/mcp", served.mcp);
    let mut made = Vec::new();
    for (version, options) in [
        ("2026-07-28", ["--task", "--task-create"]),
        ("2025-11-25", ["--task-ttl", "600000"]),
    ] {
        let mut options = options.to_vec();
        if version == "2025-11-25" {
            options.push("--task-create");
        }
        let mut run =
            gatehouse_tests::agent::python(&url, version, ALICE, TOOL_WHOAMI, &json!({}), &options);
        let task = run.next("task").await;
        run.exit().await;
        let said = task.to_string();
        assert!(said.contains("/oauth/start?state="), "{version}: {task}");
        made.push((version, task));
    }
    assert!(upstream.calls().is_empty());

    // Alice connects once, through the first task's link.
    let first = made[0].1.to_string();
    let link = start_url(&first.replace("\\\"", " ").replace('"', " "));
    let (page, _) = connect(&provider, &link, "alice").await;
    assert!(page.contains("Connected"), "{page}");
    for (version, task) in &made {
        let id = task["task"]["taskId"]
            .as_str()
            .unwrap_or_else(|| panic!("{task}"));
        let mut poll = gatehouse_tests::agent::python(
            &url,
            version,
            ALICE,
            TOOL_WHOAMI,
            &json!({}),
            &["--task-get", id],
        );
        let result = poll.next("result").await;
        assert_eq!(result["result"]["isError"], false, "{version}: {result}");
        assert!(result.to_string().contains("alice"), "{version}: {result}");
    }
    assert_eq!(
        upstream.calls(),
        [
            ("whoami".to_owned(), "alice".to_owned()),
            ("whoami".to_owned(), "alice".to_owned())
        ],
        "each task's call once"
    );
}

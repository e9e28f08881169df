//! The web console: pages for approvers, auditors and operators, served by the admin listener
//! at `/console` (`[admin] console`, on by default).
//!
//! - **Assets** (`console/index.html`, `app.js`, `app.css`) are compiled into the binary: no
//!   build step, no request to any other origin. Every page is sent with a strict
//!   Content-Security-Policy (scripts and styles from this origin only, no inline script,
//!   `frame-ancestors 'none'`), `nosniff` and `no-referrer`.
//! - **Sign-in** (`POST /console/session` with `{"token": ...}`) checks an `[[admin.token]]`
//!   exactly like the API's bearer check (or, where users have connections to manage,
//!   `[oauth]`, a user's own MCP credential: their session sees their connections only,
//!   `/v1/me/connections`) and opens a session: a random id in an `HttpOnly`,
//!   `SameSite=Strict` cookie (`Secure` when `[admin] console_url` is `https`), expiring after
//!   `[admin] session_ttl_seconds`; `DELETE /console/session` signs out. Only the SHA-256 of a
//!   session id is kept, in memory: a restart signs everyone out.
//! - **The API, from the page.** The page calls the same `/v1` endpoints as every other client,
//!   with the session cookie instead of a bearer token, so the same role checks apply (403) and
//!   the same store rules (an approver cannot approve their own call). A request that changes
//!   state must also carry the session's CSRF token in `X-CSRF-Token`, and an `Origin`, when
//!   sent, must be this listener's: a cross-site form or script gets 403 `csrf`.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{
    CACHE_CONTROL, CONTENT_TYPE, COOKIE, HOST, LOCATION, ORIGIN, SET_COOKIE,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use http::{HeaderMap, HeaderValue, Method, Response, StatusCode};
use http_body_util::Full;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::auth::{Operator, Tokens};
use super::config::AdminConfig;
use super::reply::{ApiError, Reply, json_reply};

/// The session cookie's name.
pub const COOKIE_NAME: &str = "gatehouse_session";
/// The header carrying a session's CSRF token on requests that change state.
pub const CSRF_HEADER: &str = "x-csrf-token";

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const INDEX: &str = include_str!("../../console/index.html");
const APP_JS: &str = include_str!("../../console/app.js");
const APP_CSS: &str = include_str!("../../console/app.css");

/// Sessions one principal may hold at once (browsers and devices); a sign-in past it ends that
/// principal's oldest, never anyone else's.
const MAX_SESSIONS_PER_PRINCIPAL: usize = 16;
/// Refused sign-ins a source address may make within [`SIGN_IN_WINDOW`] before it is answered
/// 429 until the window ends: a person mistypes a few times; a script guessing tokens is slowed
/// to five guesses a minute.
const SIGN_IN_FAILURES: u32 = 5;
/// The window [`SIGN_IN_FAILURES`] counts in.
const SIGN_IN_WINDOW: Duration = Duration::from_secs(60);
/// Source addresses whose failures are remembered at once; past it the oldest windows go.
const REMEMBERED_SOURCES: usize = 10_000;

struct Session {
    operator: Operator,
    csrf: String,
    expires: Instant,
    expires_at_ms: u64,
}

/// The console's sessions and settings.
pub struct Console {
    url: String,
    secure: bool,
    ttl: Duration,
    /// Keyed by the SHA-256 of the session id.
    sessions: Mutex<HashMap<[u8; 32], Session>>,
    /// Refused sign-ins per source address: how many, since when.
    failures: Mutex<HashMap<std::net::IpAddr, (u32, Instant)>>,
    /// Who may sign in as a user, with the credential their agent uses: the MCP endpoint's
    /// identity gate (only where users have connections to manage, `[oauth]`).
    users: Option<std::sync::Arc<crate::mcp::identity::Identity>>,
}

impl std::fmt::Debug for Console {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Console")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

fn digest(id: &str) -> [u8; 32] {
    Sha256::digest(id.as_bytes()).into()
}

/// The value of cookie `name` in the request, if sent.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

/// Equal, in time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0, |acc, (x, y)| acc | (x ^ y))
            == 0
}

impl Console {
    /// The console for `config`, or none when `[admin] console = false`.
    pub fn new(config: &AdminConfig) -> Option<Self> {
        config.console.then(|| {
            let url = config.console_url();
            Self {
                secure: url.starts_with("https://"),
                url,
                ttl: Duration::from_secs(config.session_ttl_seconds.max(1)),
                sessions: Mutex::new(HashMap::new()),
                failures: Mutex::new(HashMap::new()),
                users: None,
            }
        })
    }

    /// Lets users sign in with their own MCP credential (an API key or a bearer JWT), which
    /// `users` checks: their session may list and revoke their own connections only.
    pub fn admit_users(&mut self, users: std::sync::Arc<crate::mcp::identity::Identity>) {
        self.users = Some(users);
    }

    /// Where people reach the console.
    pub fn url(&self) -> &str {
        &self.url
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Whether the request carries a session cookie at all.
    pub fn has_cookie(headers: &HeaderMap) -> bool {
        cookie(headers, COOKIE_NAME).is_some()
    }

    /// `f` of the request's live session; an expired one is forgotten.
    fn with_session<T>(
        &self,
        headers: &HeaderMap,
        f: impl FnOnce(&Session) -> T,
    ) -> Result<T, ApiError> {
        let none = || {
            ApiError::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "no console session (never signed in, or it has ended): sign in again",
            )
        };
        let key = digest(cookie(headers, COOKIE_NAME).ok_or_else(none)?);
        let mut sessions = self.sessions();
        let session = sessions.get(&key).ok_or_else(none)?;
        if session.expires <= Instant::now() {
            sessions.remove(&key);
            return Err(none());
        }
        Ok(f(session))
    }

    /// The operator of the request's session. A request that may change state (not GET or
    /// HEAD) must carry the session's CSRF token and, if it says where it comes from, come
    /// from this listener's origin.
    pub fn identify(&self, method: &Method, headers: &HeaderMap) -> Result<Operator, ApiError> {
        let (operator, expected) =
            self.with_session(headers, |s| (s.operator.clone(), s.csrf.clone()))?;
        if method != Method::GET && method != Method::HEAD {
            let token = headers
                .get(CSRF_HEADER)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if !same(token, &expected) {
                return Err(csrf(
                    "a request that changes state needs the session's CSRF token in `X-CSRF-Token`",
                ));
            }
            same_origin(headers)?;
        }
        Ok(operator)
    }

    /// `/console...`: the pages and the session endpoints, for a request from `peer`.
    #[expect(
        clippy::too_many_arguments,
        reason = "one request's parts, as the listener split them"
    )]
    pub async fn route(
        &self,
        method: &Method,
        rest: &[&str],
        trailing_slash: bool,
        headers: &HeaderMap,
        tokens: &Tokens,
        body: &[u8],
        peer: std::net::IpAddr,
    ) -> Result<Reply, ApiError> {
        match rest {
            [] if !trailing_slash => {
                allow_get(method)?;
                // The assets are linked relative to the page: it must be `/console/`.
                let mut reply = text(StatusCode::PERMANENT_REDIRECT, "text/plain", "");
                reply
                    .headers_mut()
                    .insert(LOCATION, HeaderValue::from_static("console/"));
                Ok(reply)
            }
            [] | ["index.html"] => {
                allow_get(method)?;
                Ok(text(StatusCode::OK, "text/html; charset=utf-8", INDEX))
            }
            ["app.js"] => {
                allow_get(method)?;
                Ok(text(
                    StatusCode::OK,
                    "text/javascript; charset=utf-8",
                    APP_JS,
                ))
            }
            ["app.css"] => {
                allow_get(method)?;
                Ok(text(StatusCode::OK, "text/css; charset=utf-8", APP_CSS))
            }
            ["session"] => match *method {
                Method::GET => Ok(json_reply(
                    StatusCode::OK,
                    &self.with_session(headers, session_json)?,
                )),
                Method::POST => self.sign_in(headers, tokens, body, peer).await,
                Method::DELETE => {
                    self.identify(method, headers)?;
                    if let Some(id) = cookie(headers, COOKIE_NAME) {
                        self.sessions().remove(&digest(id));
                    }
                    let mut reply = json_reply(StatusCode::OK, &json!({ "signed_out": true }));
                    self.set_cookie(&mut reply, "", 0);
                    Ok(reply)
                }
                _ => Err(ApiError::new(
                    StatusCode::METHOD_NOT_ALLOWED,
                    "method_not_allowed",
                    "this endpoint takes GET, POST, DELETE",
                )),
            },
            _ => Err(ApiError::not_found("no such console page")),
        }
    }

    async fn sign_in(
        &self,
        headers: &HeaderMap,
        tokens: &Tokens,
        body: &[u8],
        peer: std::net::IpAddr,
    ) -> Result<Reply, ApiError> {
        self.throttled(peer)?;
        // A cross-site page cannot send JSON without the browser asking first (CORS), which
        // this listener never allows: with the origin check, no other site signs anyone in.
        let json_body = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !json_body {
            return Err(ApiError::bad_request(
                r#"sign in with a JSON body, content-type application/json: {"token": "..."}"#,
            ));
        }
        same_origin(headers)?;
        let body: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("the body is not valid JSON: {e}")))?;
        let token = body
            .get("token")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| ApiError::bad_request(r#"the body must be {"token": "..."}"#))?;
        let mut bearer = HeaderMap::new();
        let value = HeaderValue::from_str(&format!("Bearer {token}"))
            .map_err(|_| ApiError::bad_request("the token has characters a token never has"))?;
        bearer.insert(http::header::AUTHORIZATION, value);
        let operator = match (tokens.identify(&bearer), &self.users) {
            (Ok(operator), _) => Ok(operator),
            // Not an operator's: a user's own credential, where users may sign in.
            (Err(_), Some(users)) => match users.identify(&bearer).await {
                Ok(caller) => Ok(Operator {
                    principal: caller.principal.id,
                    roles: Vec::new(),
                    tenant: Some(caller.tenant),
                }),
                Err(_) => Err(
                    "the token is neither an admin token nor a caller's credential of this gateway"
                        .to_owned(),
                ),
            },
            (Err(e), None) => Err(e.to_string()),
        }
        .map_err(|e| {
            tracing::info!(%peer, "console: a sign-in was refused: {e}");
            self.failed(peer);
            ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", e)
        })?;
        let id = gatehouse_core::ids::random_hex(32);
        let now_ms = gatehouse_store::now_ms();
        let session = Session {
            operator,
            csrf: gatehouse_core::ids::random_hex(32),
            expires: Instant::now() + self.ttl,
            expires_at_ms: now_ms
                .saturating_add(u64::try_from(self.ttl.as_millis()).unwrap_or(u64::MAX)),
        };
        tracing::info!(principal = %session.operator.principal, "console: signed in");
        let mut reply = json_reply(StatusCode::OK, &session_json(&session));
        self.set_cookie(&mut reply, &id, self.ttl.as_secs());
        let mut sessions = self.sessions();
        let now = Instant::now();
        sessions.retain(|_, s| s.expires > now);
        let principal = &session.operator.principal;
        let mine = sessions
            .values()
            .filter(|s| s.operator.principal == *principal)
            .count();
        if mine >= MAX_SESSIONS_PER_PRINCIPAL {
            let oldest = sessions
                .iter()
                .filter(|(_, s)| s.operator.principal == *principal)
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| *k);
            if let Some(oldest) = oldest {
                sessions.remove(&oldest);
            }
        }
        sessions.insert(digest(&id), session);
        Ok(reply)
    }

    /// 429 while `peer` is past its refused sign-ins in the current window.
    fn throttled(&self, peer: std::net::IpAddr) -> Result<(), ApiError> {
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match failures.get(&peer) {
            Some((count, since))
                if *count >= SIGN_IN_FAILURES && since.elapsed() < SIGN_IN_WINDOW =>
            {
                let wait = SIGN_IN_WINDOW.saturating_sub(since.elapsed()).as_secs() + 1;
                let mut error = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_sign_ins",
                    format!("too many refused sign-ins from your address; try again in {wait} s"),
                );
                error.retry_after = Some(wait);
                Err(error)
            }
            _ => Ok(()),
        }
    }

    /// Counts a refused sign-in from `peer`.
    fn failed(&self, peer: std::net::IpAddr) {
        let mut failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if failures.len() >= REMEMBERED_SOURCES {
            failures.retain(|_, (_, since)| since.elapsed() < SIGN_IN_WINDOW);
        }
        let entry = failures.entry(peer).or_insert((0, Instant::now()));
        if entry.1.elapsed() >= SIGN_IN_WINDOW {
            *entry = (0, Instant::now());
        }
        entry.0 += 1;
    }

    fn set_cookie(&self, reply: &mut Reply, id: &str, max_age: u64) {
        let secure = if self.secure { "; Secure" } else { "" };
        let value = format!(
            "{COOKIE_NAME}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}"
        );
        if let Ok(value) = HeaderValue::from_str(&value) {
            reply.headers_mut().insert(SET_COOKIE, value);
        }
    }
}

fn session_json(session: &Session) -> Value {
    json!({
        "principal": session.operator.principal,
        "roles": session.operator.roles,
        "tenant": session.operator.tenant,
        "csrf_token": session.csrf,
        "expires_at_ms": session.expires_at_ms,
    })
}

fn csrf(message: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, "csrf", message)
}

/// 403 when the request's `Origin` is another site than the one it was sent to.
fn same_origin(headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(origin) = headers.get(ORIGIN) else {
        return Ok(());
    };
    let origin = origin.to_str().unwrap_or("");
    let host = headers
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let authority = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    if !host.is_empty() && authority == host {
        Ok(())
    } else {
        Err(csrf(&format!(
            "a request from origin `{origin}` may not change state here"
        )))
    }
}

fn allow_get(method: &Method) -> Result<(), ApiError> {
    if method == Method::GET || method == Method::HEAD {
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "this endpoint takes GET",
        ))
    }
}

/// A page or asset, with the headers every console response carries.
fn text(status: StatusCode, content_type: &'static str, body: &'static str) -> Reply {
    let mut reply = Response::new(Full::new(Bytes::from_static(body.as_bytes())));
    *reply.status_mut() = status;
    let headers = reply.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    secure_headers(headers);
    reply
}

/// The headers every page and asset of the console carries.
fn secure_headers(headers: &mut HeaderMap) {
    headers.insert(
        http::header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        http::header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOOPBACK: std::net::IpAddr = std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

    #[test]
    fn cookies_are_found_by_name_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            COOKIE,
            HeaderValue::from_static("a=1; gatehouse_session=abc; b=2"),
        );
        assert_eq!(cookie(&headers, COOKIE_NAME), Some("abc"));
        assert_eq!(cookie(&headers, "c"), None);
    }

    #[tokio::test]
    async fn a_session_ends_at_its_expiry_and_its_cookie_is_secure_behind_https() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "tok-ana").unwrap();
        let tokens = Tokens::load(&[crate::admin::AdminTokenConfig {
            principal: "usr_ana".to_owned(),
            roles: vec![crate::admin::Role::Approver],
            env: None,
            file: Some(file),
        }])
        .unwrap();
        let console = Console::new(&AdminConfig {
            session_ttl_seconds: 1,
            ..AdminConfig::default()
        })
        .unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let refused = console
            .sign_in(&headers, &tokens, br#"{"token": "tok-bob"}"#, LOOPBACK)
            .await;
        assert_eq!(refused.unwrap_err().status, StatusCode::UNAUTHORIZED);
        let reply = console
            .sign_in(&headers, &tokens, br#"{"token": "tok-ana"}"#, LOOPBACK)
            .await
            .unwrap();
        let set = reply.headers()[SET_COOKIE].to_str().unwrap().to_owned();
        assert!(
            set.contains("Max-Age=1") && !set.contains("Secure"),
            "{set}"
        );
        let mut request = HeaderMap::new();
        let pair = set.split(';').next().unwrap().to_owned();
        request.insert(COOKIE, HeaderValue::from_str(&pair).unwrap());
        let operator = console.identify(&Method::GET, &request).unwrap();
        assert_eq!(operator.principal, "usr_ana");
        std::thread::sleep(Duration::from_millis(1100));
        let ended = console.identify(&Method::GET, &request).unwrap_err();
        assert_eq!(ended.status, StatusCode::UNAUTHORIZED);
        assert!(ended.message.contains("sign in again"), "{}", ended.message);

        let behind_tls = Console::new(&AdminConfig {
            console_url: Some("https://gatehouse.example.com/console/".to_owned()),
            ..AdminConfig::default()
        })
        .unwrap();
        assert_eq!(behind_tls.url(), "https://gatehouse.example.com/console");
        let reply = behind_tls
            .sign_in(&headers, &tokens, br#"{"token": "tok-ana"}"#, LOOPBACK)
            .await
            .unwrap();
        let set = reply.headers()[SET_COOKIE].to_str().unwrap();
        assert!(set.ends_with("; Secure"), "{set}");
    }

    #[test]
    fn only_the_listeners_own_origin_may_change_state() {
        let mut headers = HeaderMap::new();
        headers.insert(HOST, HeaderValue::from_static("127.0.0.1:8788"));
        assert!(
            same_origin(&headers).is_ok(),
            "no Origin: not a browser's cross-site request"
        );
        headers.insert(ORIGIN, HeaderValue::from_static("http://127.0.0.1:8788"));
        assert!(same_origin(&headers).is_ok());
        headers.insert(ORIGIN, HeaderValue::from_static("http://evil.example"));
        assert_eq!(same_origin(&headers).unwrap_err().code, "csrf");
        headers.insert(ORIGIN, HeaderValue::from_static("null"));
        assert_eq!(same_origin(&headers).unwrap_err().code, "csrf");
    }
}

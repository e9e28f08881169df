//! `gatehouse admin ...`: the operator's commands against a running gateway's admin API
//! (`[admin]` in its config), over HTTP. The token comes from `$GATEHOUSE_ADMIN_TOKEN` (or
//! `--token-file`), never from the command line, where other users could read it.

use std::io::Write;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use clap::Subcommand;
use gatehouse_store::Approval;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};

use gatehouse_host::plugin::read_file;

use crate::approvals::{self, ApprovalsCommand, Desk};
use crate::exit::{Failure, refused, usage};

/// Environment variable holding the operator's admin token.
pub const TOKEN_ENV: &str = "GATEHOUSE_ADMIN_TOKEN";

/// Where the admin API is and who is asking.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    /// The admin API's address (`[admin] listen` of the gateway).
    #[arg(
        long,
        global = true,
        env = "GATEHOUSE_ADMIN_SERVER",
        default_value = "http://127.0.0.1:8788"
    )]
    server: String,
    /// Read the token from this file instead of $GATEHOUSE_ADMIN_TOKEN.
    #[arg(long, global = true, value_name = "FILE")]
    token_file: Option<PathBuf>,
}

/// `gatehouse admin ...`
#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Pending calls and their decisions (role `approver`; `auditor` may list and show).
    Approvals {
        #[command(subcommand)]
        command: ApprovalsCommand,
    },
    /// Policy modules on the running gateway (role `operator`).
    Policy {
        #[command(subcommand)]
        command: PolicyCommand,
    },
    /// The adapters and policy modules the gateway serves, with digest, version and key id
    /// (role `operator` or `auditor`).
    Plugins,
    /// Sessions: each principal's calls under one key, with the labels they brought (roles
    /// `operator` or `auditor`; ending one takes `operator`).
    Sessions {
        #[command(subcommand)]
        command: Option<SessionsCommand>,
        /// Only this tenant's sessions.
        #[arg(long)]
        tenant: Option<String>,
        /// Only this principal's sessions.
        #[arg(long)]
        principal: Option<String>,
    },
    /// Users' connections to OAuth providers, their own upstream accounts (roles `operator`
    /// or `auditor`; revoking one takes `operator`). Never their tokens.
    Connections {
        #[command(subcommand)]
        command: Option<ConnectionsCommand>,
        /// Only this tenant's connections.
        #[arg(long)]
        tenant: Option<String>,
        /// Only this principal's connections.
        #[arg(long)]
        principal: Option<String>,
        /// Only connections to this `[[oauth.provider]]`.
        #[arg(long)]
        provider: Option<String>,
    },
    /// Check the audit log's hash chain (role `auditor`); exit code 1 if it is broken.
    Verify {
        /// A head an earlier verify printed, `SEQ:HASH` (a bare hash is looked up): the log
        /// must still hold it at its position; entries appended since are fine.
        #[arg(long)]
        head: Option<String>,
    },
}

/// One session, named by its tenant, principal and key.
#[derive(Debug, Clone, clap::Args)]
pub struct SessionArgs {
    /// The session's tenant.
    #[arg(long)]
    tenant: String,
    /// The principal whose session it is.
    #[arg(long)]
    principal: String,
    /// The session's key: an MCP session id or a trace id (absent: the principal's window).
    #[arg(long, default_value = "")]
    key: String,
}

/// `gatehouse admin sessions ...`
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// A session's timeline: its actions since it started, newest first, with the labels each
    /// brought.
    Show {
        #[command(flatten)]
        session: SessionArgs,
        /// At most this many actions (1 to 1000).
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// End a session: its next call starts a new one, with no labels. Audited.
    End {
        #[command(flatten)]
        session: SessionArgs,
    },
}

/// `gatehouse admin connections ...`
#[derive(Debug, Subcommand)]
pub enum ConnectionsCommand {
    /// Revoke a user's connection: its tokens revoked at the provider (where it has a
    /// revocation endpoint) and forgotten; their next call that needs it asks them to connect
    /// again. Audited.
    Revoke {
        /// The connection's tenant.
        #[arg(long)]
        tenant: String,
        /// The principal whose connection it is.
        #[arg(long)]
        principal: String,
        /// The `[[oauth.provider]]` it is to.
        #[arg(long)]
        provider: String,
    },
}

/// `gatehouse admin policy ...`
#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Upload a signed policy module (or adapter): the gateway verifies it exactly as a file at
    /// start-up and swaps it in; calls in flight finish on the version they started with.
    /// Given an `oci://` reference, the gateway pulls it itself, with its `[oci]` settings
    /// (credentials, cache, `allow_tags`), and records the digest it pulled.
    Push {
        /// The signed component: a file, or `oci://REGISTRY/REPO@sha256:...` (or `:TAG` where
        /// the gateway's config allows tags).
        #[arg(value_name = "FILE|oci://...")]
        source: String,
    },
    /// Put back the version the last install of a policy module replaced.
    Rollback {
        /// The policy module id, e.g. `gatehouse.baseline`.
        id: String,
    },
    /// Make every shadow binding (`mode = "shadow"`) of a policy module enforcing, on the
    /// running gateway; audited. Change the binding in the config too, or a restart from a
    /// fresh state store puts it back in shadow.
    Promote {
        /// The policy module id, e.g. `acme.refund-rules`.
        id: String,
    },
}

/// Runs `gatehouse admin ...`.
pub(super) fn admin(
    args: &AdminArgs,
    command: AdminCommand,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let client = Client::new(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| usage(format!("cannot start the async runtime: {e}")))?;
    let send = |method: http::Method, path: &str, body: Option<(&'static str, Bytes)>| {
        runtime.block_on(client.send(method, path, body))
    };
    let json_body = |value: Value| Some(("application/json", Bytes::from(value.to_string())));
    match command {
        AdminCommand::Approvals { command } => {
            let desk = ApiDesk {
                client: &client,
                runtime: &runtime,
            };
            return approvals::run(command, &desk, out);
        }
        AdminCommand::Policy { command } => match command {
            PolicyCommand::Push { source } => {
                let body = if gatehouse_host::oci::OciRef::is_oci(&source) {
                    // Checked here for a clear message; the gateway pulls it.
                    source
                        .parse::<gatehouse_host::oci::OciRef>()
                        .map_err(usage)?;
                    json_body(json!({ "source": source }))
                } else {
                    let bytes = read_file(Path::new(&source)).map_err(usage)?;
                    Some(("application/wasm", Bytes::from(bytes)))
                };
                let reply = send(http::Method::POST, "/v1/plugins", body)?;
                say!(out, "installed {}", change(&reply));
            }
            PolicyCommand::Rollback { id } => {
                let reply = send(
                    http::Method::POST,
                    &format!("/v1/policies/{}/rollback", segment(&id)),
                    None,
                )?;
                say!(out, "rolled back: serving {}", change(&reply));
            }
            PolicyCommand::Promote { id } => {
                let reply = send(
                    http::Method::POST,
                    &format!("/v1/policies/{}/promote", segment(&id)),
                    None,
                )?;
                let bindings = reply.get("bindings").and_then(Value::as_u64).unwrap_or(0);
                say!(
                    out,
                    "promoted `{id}`: {bindings} shadow binding(s) now enforcing"
                );
            }
        },
        AdminCommand::Sessions {
            command,
            tenant,
            principal,
        } => match command {
            None => {
                let mut query = url::form_urlencoded::Serializer::new(String::new());
                if let Some(tenant) = &tenant {
                    query.append_pair("tenant", tenant);
                }
                if let Some(principal) = &principal {
                    query.append_pair("principal", principal);
                }
                let reply = send(
                    http::Method::GET,
                    &format!("/v1/sessions?{}", query.finish()),
                    None,
                )?;
                let sessions = reply["sessions"].as_array().cloned().unwrap_or_default();
                if sessions.is_empty() {
                    say!(out, "no sessions");
                }
                for session in &sessions {
                    say!(out, "{}", session_line(session));
                }
            }
            Some(SessionsCommand::Show { session, limit }) => {
                let path = format!(
                    "/v1/sessions/timeline?{}&limit={limit}",
                    session_query(&session)
                );
                let reply = send(http::Method::GET, &path, None)?;
                say!(out, "{}", session_line(&reply["session"]));
                for label in reply["session"]["labels"].as_array().into_iter().flatten() {
                    say!(
                        out,
                        "  label {:<12} from {} (call {})",
                        label["label"].as_str().unwrap_or("?"),
                        label["tool"].as_str().unwrap_or("?"),
                        label["tool_call_id"].as_str().unwrap_or("?"),
                    );
                }
                for action in reply["actions"].as_array().into_iter().flatten() {
                    let labels: Vec<&str> = (action["labels"].as_array().into_iter().flatten())
                        .filter_map(Value::as_str)
                        .collect();
                    say!(
                        out,
                        "  #{:<6} {} {:<28} {:<18} {}{}",
                        action["seq"],
                        action["at_ms"],
                        action["tool"].as_str().unwrap_or("?"),
                        action["outcome"].as_str().unwrap_or("?"),
                        action["tool_call_id"].as_str().unwrap_or("?"),
                        if labels.is_empty() {
                            String::new()
                        } else {
                            format!("  +{}", labels.join(" +"))
                        },
                    );
                }
            }
            Some(SessionsCommand::End { session }) => {
                let path = format!("/v1/sessions/end?{}", session_query(&session));
                let reply = send(http::Method::POST, &path, None)?;
                say!(
                    out,
                    "ended: {}",
                    reply["message"].as_str().unwrap_or("the session ended")
                );
            }
        },
        AdminCommand::Connections {
            command,
            tenant,
            principal,
            provider,
        } => match command {
            None => {
                let mut query = url::form_urlencoded::Serializer::new(String::new());
                for (name, value) in [
                    ("tenant", &tenant),
                    ("principal", &principal),
                    ("provider", &provider),
                ] {
                    if let Some(value) = value {
                        query.append_pair(name, value);
                    }
                }
                let reply = send(
                    http::Method::GET,
                    &format!("/v1/connections?{}", query.finish()),
                    None,
                )?;
                let connections = reply["connections"].as_array().cloned().unwrap_or_default();
                if connections.is_empty() {
                    say!(out, "no connections");
                }
                for c in &connections {
                    say!(
                        out,
                        "{:<12} {:<24} {:<12} token {} updated {} expires {}",
                        c["tenant"].as_str().unwrap_or("?"),
                        c["principal"].as_str().unwrap_or("?"),
                        c["provider"].as_str().unwrap_or("?"),
                        c["token_hash"].as_str().unwrap_or("?"),
                        c["updated_at_ms"],
                        c["expires_at_ms"],
                    );
                }
            }
            Some(ConnectionsCommand::Revoke {
                tenant,
                principal,
                provider,
            }) => {
                let mut query = url::form_urlencoded::Serializer::new(String::new());
                query
                    .append_pair("tenant", &tenant)
                    .append_pair("principal", &principal)
                    .append_pair("provider", &provider);
                let path = format!("/v1/connections/revoke?{}", query.finish());
                let reply = send(http::Method::POST, &path, None)?;
                say!(
                    out,
                    "revoked: {}",
                    reply["message"]
                        .as_str()
                        .unwrap_or("the connection is revoked")
                );
            }
        },
        AdminCommand::Plugins => {
            let reply = send(http::Method::GET, "/v1/plugins", None)?;
            say!(out, "{}", pretty(&reply));
        }
        AdminCommand::Verify { head } => {
            let path = match &head {
                Some(head) => format!(
                    "/v1/audit/verify?{}",
                    url::form_urlencoded::Serializer::new(String::new())
                        .append_pair("head", head)
                        .finish()
                ),
                None => "/v1/audit/verify".to_owned(),
            };
            let reply = send(http::Method::GET, &path, None)?;
            say!(
                out,
                "audit log: {}",
                reply["message"].as_str().unwrap_or("?")
            );
            if reply["ok"] != Value::Bool(true) {
                return Ok(1);
            }
        }
    }
    Ok(0)
}

/// The query naming one session.
fn session_query(session: &SessionArgs) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("tenant", &session.tenant)
        .append_pair("principal", &session.principal)
        .append_pair("key", &session.key)
        .finish()
}

/// One line about a session: whose, which key, since when, whether live, its labels.
fn session_line(session: &Value) -> String {
    let key = session["key"].as_str().unwrap_or_default();
    let labels: Vec<&str> = (session["labels"].as_array().into_iter().flatten())
        .filter_map(|l| l["label"].as_str())
        .collect();
    let state = if session["ended_ms"].is_u64() {
        "ended"
    } else if session["live"] == Value::Bool(false) {
        "expired"
    } else {
        "live"
    };
    format!(
        "{}/{} {} started {} {state} labels [{}]",
        session["tenant"].as_str().unwrap_or("?"),
        session["principal"].as_str().unwrap_or("?"),
        if key.is_empty() { "(window)" } else { key },
        session["started_ms"],
        labels.join(", ")
    )
}

fn pretty(value: &Value) -> String {
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// A gateway's approvals, read and decided through its admin API as the token's principal.
struct ApiDesk<'a> {
    client: &'a Client,
    runtime: &'a tokio::runtime::Runtime,
}

impl ApiDesk<'_> {
    fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<(&'static str, Bytes)>,
    ) -> Result<Value, Failure> {
        self.runtime.block_on(self.client.send(method, path, body))
    }
}

impl Desk for ApiDesk<'_> {
    fn list(&self, status: &str, tenant: Option<&str>) -> Result<(Vec<Approval>, Value), Failure> {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        query.append_pair("status", status);
        if let Some(tenant) = tenant {
            query.append_pair("tenant", tenant);
        }
        let reply = self.send(
            http::Method::GET,
            &format!("/v1/approvals?{}", query.finish()),
            None,
        )?;
        let list = reply["approvals"].clone();
        let approvals: Vec<Approval> = serde_json::from_value(list.clone()).map_err(|e| {
            refused(format!(
                "the server's answer does not read as approvals: {e}"
            ))
        })?;
        Ok((approvals, list))
    }

    fn show(&self, id: &str) -> Result<Value, Failure> {
        self.send(
            http::Method::GET,
            &format!("/v1/approvals/{}", segment(id)),
            None,
        )
    }

    fn decide(
        &self,
        id: &str,
        approve: bool,
        by: Option<&str>,
        reason: &str,
    ) -> Result<Approval, Failure> {
        approvals::token_approver(by)?;
        let verb = if approve { "approve" } else { "reject" };
        let body = json!({ "reason": reason }).to_string();
        let reply = self.send(
            http::Method::POST,
            &format!("/v1/approvals/{}/{verb}", segment(id)),
            Some(("application/json", Bytes::from(body))),
        )?;
        approvals::from_json(reply)
    }
}

/// `kind id version (digest), replacing version` of an install or rollback answer.
fn change(reply: &Value) -> String {
    let plugin = &reply["plugin"];
    let text = |v: &Value| v.as_str().unwrap_or("?").to_owned();
    let mut line = format!(
        "{} {} {} ({}, key `{}`)",
        text(&reply["kind"]),
        text(&plugin["id"]),
        text(&plugin["version"]),
        text(&plugin["digest"]),
        text(&plugin["key_id"]),
    );
    if let Some(source) = plugin["source"].as_str() {
        line.push_str(&format!(" from {source}"));
    }
    if let Some(replaced) = reply["replaced"].as_object() {
        line.push_str(&format!(
            "; replaced {} ({})",
            text(&replaced["version"]),
            text(&replaced["digest"])
        ));
    }
    line
}

/// `text` as one path segment.
fn segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

/// A small HTTP/1.1 client for the admin API: one connection per request.
struct Client {
    authority: String,
    host: String,
    port: u16,
    token: gatehouse_core::secret::Secret,
}

impl Client {
    fn new(args: &AdminArgs) -> Result<Self, Failure> {
        let url = url::Url::parse(&args.server).map_err(|e| {
            usage(format!(
                "--server `{}`: {e}; e.g. http://127.0.0.1:8788",
                args.server
            ))
        })?;
        if url.scheme() != "http" {
            return Err(usage(format!(
                "--server `{}`: the admin API speaks plain HTTP (`http://`); reach a remote one through a TLS-terminating proxy or an SSH tunnel",
                args.server
            )));
        }
        let host = url
            .host_str()
            .ok_or_else(|| usage(format!("--server `{}` names no host", args.server)))?
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_owned();
        let port = url.port_or_known_default().unwrap_or(80);
        let token = match &args.token_file {
            Some(file) => gatehouse_core::secret::read(None, Some(Path::new(file))),
            None => gatehouse_core::secret::read(Some(TOKEN_ENV), None),
        }
        .map_err(|e| usage(format!("no admin token: {e}")))?;
        Ok(Self {
            authority: url[url::Position::BeforeHost..url::Position::AfterPort].to_owned(),
            host,
            port,
            token,
        })
    }

    /// Sends one request; the answer's JSON if it is a success, else a failure with the
    /// server's message (exit code 1), or exit code 2 when the server cannot be reached.
    async fn send(
        &self,
        method: http::Method,
        path: &str,
        body: Option<(&'static str, Bytes)>,
    ) -> Result<Value, Failure> {
        let unreachable = |e: &dyn std::fmt::Display| {
            usage(format!(
                "cannot reach the admin API at http://{}: {e}",
                self.authority
            ))
        };
        let stream = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| unreachable(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(&e))?;
        tokio::spawn(connection);
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(http::header::HOST, &self.authority)
            .header(
                http::header::AUTHORIZATION,
                format!("Bearer {}", self.token.expose()),
            );
        let body = match body {
            Some((content_type, bytes)) => {
                request = request.header(http::header::CONTENT_TYPE, content_type);
                bytes
            }
            None => Bytes::new(),
        };
        let request = request
            .body(Full::new(body))
            .map_err(|e| usage(format!("cannot build the request: {e}")))?;
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| unreachable(&e))?;
        let status = response.status();
        let bytes = response
            .into_body()
            .collect()
            .await
            .map_err(|e| unreachable(&e))?
            .to_bytes();
        let reply: Value = serde_json::from_slice(&bytes).unwrap_or_else(
            |_| json!({ "error": "?", "message": String::from_utf8_lossy(&bytes) }),
        );
        if status.is_success() {
            Ok(reply)
        } else {
            Err(refused(format!(
                "{} {}: {}",
                status.as_u16(),
                reply["error"].as_str().unwrap_or("?"),
                reply["message"].as_str().unwrap_or("")
            )))
        }
    }
}

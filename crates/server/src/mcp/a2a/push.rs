//! A2A push notifications: webhooks a peer registers for its task, each sent the task when its
//! state changes, so a peer that cannot hold a connection open learns when an approval let its
//! call run.
//!
//! A webhook is a request the gateway makes on a peer's say-so, so it passes the same address
//! checks as an adapter's egress ([`AddressPolicy`]): its URL is resolved when it is
//! registered, and every address must be public unicast, or within a range the operator lists
//! in `[mcp.a2a] push_allow_private`; loopback, private, link-local and metadata addresses are
//! refused, as A2A's security considerations ask. The addresses found then are the ones
//! connected to (a name that resolves elsewhere later is not followed), without redirects.
//!
//! A notification is the task as `GetTask` shows it, wrapped as A2A's `StreamResponse`
//! (`{"task": ...}`), POSTed with the webhook's token (`X-A2A-Notification-Token`) and
//! credentials (`Authorization`), if it has them. Each state is sent once; a failed send is
//! tried again each round, [`TRIES`] times at most. Webhooks are kept in this gateway's memory:
//! a restart or a reload forgets them, and a peer registers again.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use gatehouse_host::{AddressPolicy, Host, TlsClient};
use http_body_util::Full;
use ipnet::IpNet;
use serde_json::{Map, Value, json};
use tokio::net::TcpStream;

use super::{RpcError, wire};

/// How often the sender looks at the tasks that have webhooks.
const POLL: Duration = Duration::from_secs(1);
/// How long resolving a webhook's name, or one send, may take.
const TIMEOUT: Duration = Duration::from_secs(10);
/// Sends of one state tried at most.
pub const TRIES: u32 = 5;
/// Webhooks one task may have.
pub const PER_TASK: usize = 8;
/// The header carrying a webhook's token.
const TOKEN_HEADER: &str = "x-a2a-notification-token";

/// The webhooks of every task, and the one sender.
#[derive(Debug)]
pub struct Webhooks {
    addresses: AddressPolicy,
    hooks: Mutex<HashMap<String, Vec<Webhook>>>,
    sending: AtomicBool,
}

/// One registered webhook.
#[derive(Debug, Clone)]
pub struct Webhook {
    id: String,
    url: url::Url,
    token: Option<String>,
    /// `Authorization`'s value, from the config's `authentication`.
    authorization: Option<String>,
    /// Where it is sent: the addresses its name resolved to when it was registered.
    addrs: Vec<SocketAddr>,
    /// The state last sent.
    sent: Option<String>,
    /// The state being tried, and how many times.
    trying: Option<(String, u32)>,
}

impl Webhook {
    /// As A2A's `TaskPushNotificationConfig` has it (without its credentials).
    fn wire(&self, task: &str) -> Value {
        let mut wire = json!({ "id": self.id, "taskId": task, "url": self.url.as_str() });
        if let Some(token) = &self.token {
            wire["token"] = json!(token);
        }
        wire
    }
}

impl Webhooks {
    /// Webhooks may reach public addresses, and the special-purpose ones in `allow_private`.
    pub fn new(allow_private: Vec<IpNet>) -> Self {
        Self {
            addresses: AddressPolicy::new(allow_private),
            hooks: Mutex::default(),
            sending: AtomicBool::new(false),
        }
    }

    fn hooks(&self) -> MutexGuard<'_, HashMap<String, Vec<Webhook>>> {
        self.hooks.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A webhook as `config` (A2A's `TaskPushNotificationConfig`) asks: its URL http(s),
    /// resolved now, every address allowed.
    pub async fn check(&self, config: &Map<String, Value>) -> Result<Webhook, RpcError> {
        let text = config
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("the push notification config has no `url`"))?;
        let refused = |why: String| RpcError::invalid_params(format!("webhook `{text}`: {why}"));
        let url = url::Url::parse(text).map_err(|e| refused(e.to_string()))?;
        let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
            return Err(refused("it names no host".to_owned()));
        };
        if !matches!(url.scheme(), "http" | "https") || url.password().is_some() {
            return Err(refused(
                "it must be an http(s) URL without credentials in it".to_owned(),
            ));
        }
        let host = host.trim_matches(['[', ']']).to_owned();
        let addrs: Vec<SocketAddr> =
            tokio::time::timeout(TIMEOUT, tokio::net::lookup_host((host.as_str(), port)))
                .await
                .map_err(|_| refused(format!("resolving {host} took over {TIMEOUT:?}")))?
                .map_err(|e| refused(format!("{host} does not resolve: {e}")))?
                .collect();
        if addrs.is_empty() {
            return Err(refused(format!("{host} resolves to no address")));
        }
        for addr in &addrs {
            self.addresses.check(addr.ip()).map_err(|no| {
                refused(format!(
                    "{} is a {} address; push notifications go to public addresses only, unless \
                     the operator lists a range holding it in `[mcp.a2a] push_allow_private`",
                    no.ip, no.class
                ))
            })?;
        }
        let string = |key: &str| {
            config
                .get(key)
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
        };
        let authentication = config.get("authentication");
        let authorization = match (
            authentication.and_then(|a| a["scheme"].as_str()),
            authentication.and_then(|a| a["credentials"].as_str()),
        ) {
            (Some(scheme), Some(credentials)) => Some(format!("{scheme} {credentials}")),
            _ => None,
        };
        Ok(Webhook {
            id: string("id")
                .unwrap_or_else(|| format!("push_{}", gatehouse_core::ids::tool_call_id())),
            url,
            token: string("token"),
            authorization,
            addrs,
            sent: None,
            trying: None,
        })
    }

    /// Registers `hook` for `task` (replacing one of the same id): the config as the wire has
    /// it. At most [`PER_TASK`] per task.
    pub fn add(&self, task: &str, hook: Webhook) -> Result<Value, RpcError> {
        let mut hooks = self.hooks();
        let list = hooks.entry(task.to_owned()).or_default();
        list.retain(|h| h.id != hook.id);
        if list.len() >= PER_TASK {
            return Err(RpcError::invalid_params(format!(
                "task `{task}` has {PER_TASK} webhooks already, the most it may have; delete one"
            )));
        }
        let wire = hook.wire(task);
        list.push(hook);
        Ok(wire)
    }

    /// Webhook `id` of `task`.
    pub fn get(&self, task: &str, id: &str) -> Result<Value, RpcError> {
        self.hooks()
            .get(task)
            .and_then(|list| list.iter().find(|h| h.id == id))
            .map(|hook| hook.wire(task))
            .ok_or_else(|| unknown(task, id))
    }

    /// Every webhook of `task`.
    pub fn list(&self, task: &str) -> Value {
        let configs: Vec<Value> = self
            .hooks()
            .get(task)
            .map(|list| list.iter().map(|hook| hook.wire(task)).collect())
            .unwrap_or_default();
        json!({ "configs": configs })
    }

    /// Forgets webhook `id` of `task`.
    pub fn delete(&self, task: &str, id: &str) -> Result<(), RpcError> {
        let mut hooks = self.hooks();
        let list = hooks.get_mut(task).ok_or_else(|| unknown(task, id))?;
        let before = list.len();
        list.retain(|h| h.id != id);
        if list.len() == before {
            return Err(unknown(task, id));
        }
        Ok(())
    }

    /// Starts the sender over `host`'s tasks, once.
    pub fn start(self: &Arc<Self>, host: Arc<Host>) {
        if !self.sending.swap(true, Ordering::SeqCst) {
            tokio::spawn(send_all(Arc::clone(self), host));
        }
    }
}

fn unknown(task: &str, id: &str) -> RpcError {
    RpcError::invalid_params(format!("task `{task}` has no webhook `{id}`"))
}

/// Each round, each task with webhooks: its state sent to every webhook that has not had it.
/// A task that ended and whose webhooks all had (or gave up on) its last state, or that is no
/// more, is forgotten.
async fn send_all(webhooks: Arc<Webhooks>, host: Arc<Host>) {
    loop {
        tokio::time::sleep(POLL).await;
        let tasks: Vec<String> = webhooks.hooks().keys().cloned().collect();
        for id in tasks {
            let task = match host.store().task(id.clone()).await {
                Ok(Some(task)) => task,
                Ok(None) => {
                    webhooks.hooks().remove(&id);
                    continue;
                }
                Err(error) => {
                    tracing::warn!(task = %id, %error, "cannot read a task with webhooks");
                    continue;
                }
            };
            let wire = wire(&task);
            let state = wire["status"]["state"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            let due: Vec<Webhook> = (webhooks.hooks().get(&id).into_iter().flatten())
                .filter(|hook| hook.sent.as_deref() != Some(state.as_str()))
                .filter(|hook| match &hook.trying {
                    Some((trying, tries)) => trying != &state || *tries < TRIES,
                    None => true,
                })
                .cloned()
                .collect();
            let body = Bytes::from(json!({ "task": wire }).to_string());
            for hook in due {
                let sent = send(&hook, body.clone(), host.tls()).await;
                let mut hooks = webhooks.hooks();
                let Some(stored) =
                    (hooks.get_mut(&id).into_iter().flatten()).find(|h| h.id == hook.id)
                else {
                    continue;
                };
                match sent {
                    Ok(()) => {
                        stored.sent = Some(state.clone());
                        stored.trying = None;
                    }
                    Err(error) => {
                        let tries = match &stored.trying {
                            Some((trying, tries)) if trying == &state => tries + 1,
                            _ => 1,
                        };
                        stored.trying = Some((state.clone(), tries));
                        tracing::warn!(task = %id, webhook = %hook.id, url = %hook.url, tries, %error, "a push notification was not delivered");
                    }
                }
            }
            if task.status.is_terminal() {
                let mut hooks = webhooks.hooks();
                let done = hooks.get(&id).is_some_and(|list| {
                    list.iter().all(|hook| {
                        hook.sent.as_deref() == Some(state.as_str())
                            || hook
                                .trying
                                .as_ref()
                                .is_some_and(|(s, t)| s == &state && *t >= TRIES)
                    })
                });
                if done {
                    hooks.remove(&id);
                }
            }
        }
    }
}

/// One POST of `body` to `hook`, within [`TIMEOUT`]: an answer other than 2xx is a failure.
async fn send(hook: &Webhook, body: Bytes, tls: &TlsClient) -> Result<(), String> {
    let sent = async {
        let mut tcp = Err("no address".to_owned());
        for addr in &hook.addrs {
            tcp = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("cannot connect to {addr}: {e}"));
            if tcp.is_ok() {
                break;
            }
        }
        let tcp = tcp?;
        let mut request = http::Request::post(&hook.url[url::Position::BeforePath..])
            .header(http::header::HOST, hook.url.authority())
            .header(http::header::CONTENT_TYPE, "application/json");
        if let Some(token) = &hook.token {
            request = request.header(TOKEN_HEADER, token);
        }
        if let Some(authorization) = &hook.authorization {
            request = request.header(http::header::AUTHORIZATION, authorization);
        }
        let request = request.body(Full::new(body)).map_err(|e| e.to_string())?;
        let status = crate::outbound::send(&hook.url, tcp, tls, request)
            .await?
            .status();
        if status.is_success() {
            Ok(())
        } else {
            Err(format!("answered {status}"))
        }
    };
    tokio::time::timeout(TIMEOUT, sent)
        .await
        .map_err(|_| format!("no answer within {TIMEOUT:?}"))?
}

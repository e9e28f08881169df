//! What a client may watch outside any call, on a stream of its own: its tenant's tools,
//! resources and prompts changing (`notifications/tools/list_changed`, `.../resources/...`,
//! `.../prompts/...`), and a resource it subscribed to changing
//! (`notifications/resources/updated`). 2025-11-25 reads them on a `GET` of the endpoint, with
//! the resources `resources/subscribe` named; 2026-07-28 on a `subscriptions/listen` request's
//! event stream, with what its filter asks (acknowledged first, each notification carrying
//! the request's id as `subscriptionId`). A 2025-11-25 `GET` stream also tells its caller each
//! account it connected through the gateway (`notifications/elicitation/complete`, naming
//! the URL elicitation that gave the link: [`crate::oauth`]).
//!
//! The gateway learns of a change by looking: every [`LOOK`] a stream compares what the
//! caller's tenant is served with what it was served at the last look: each listing, and for a
//! subscribed resource, the adapter (its id, version and digest) and the manifest entry that
//! serve its URI. So an operator's hot swap, a push, an upgrade or a grant that changes what a
//! caller sees reaches the caller's streams within about a look; a reload (`SIGHUP`) ends
//! them, each with every list-changed notification it carries, and the client reconnects to
//! the new configuration. Contents an adapter changes on its own are not seen: nothing tells the
//! gateway (the contract has no host call for it yet).
//!
//! The listings a look compares are the tenant's, whoever looks: the streams of one tenant
//! share them, built at most once per [`FRESH`] however many streams look, so many agents
//! watching cost about what one does. A change reaches a stream within a look and
//! [`FRESH`].
//!
//! Bounds: [`MOST_STREAMS`] streams per caller at once (more: 429), and a comment every
//! [`KEEPALIVE`] so that a client that went away is noticed and its stream ends.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use serde_json::{Value, json};
use tokio::sync::{broadcast, watch};

use super::call::Gateway;
use super::caller::Caller;
use super::reply::{self, Body};

/// How often a stream looks for changes.
pub const LOOK: Duration = Duration::from_secs(2);
/// How long the listings one stream built serve the other streams of its tenant.
pub const FRESH: Duration = Duration::from_millis(500);
/// How long a stream stays silent at most: then a comment, which finds a client gone.
pub const KEEPALIVE: Duration = Duration::from_secs(20);
/// The most streams one caller (tenant and principal) holds open at once. Streams are counted
/// per caller, not per session (the gateway keeps no session state), so every agent process
/// that uses one key is the same caller, each SDK client with a stream of its own.
pub const MOST_STREAMS: usize = 16;

/// What a stream carries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// `notifications/tools/list_changed`.
    pub tools: bool,
    /// `notifications/resources/list_changed`.
    pub resources: bool,
    /// `notifications/prompts/list_changed`.
    pub prompts: bool,
}

/// Where a stream's subscribed resources come from.
pub enum Uris {
    /// A 2026-07-28 listen request's own, fixed.
    Fixed(BTreeSet<String>),
    /// A 2025-11-25 caller's, as it subscribes and unsubscribes meanwhile.
    Subscribed(Box<dyn Fn() -> BTreeSet<String> + Send + Sync>),
}

impl Uris {
    fn now(&self) -> BTreeSet<String> {
        match self {
            Self::Fixed(uris) => uris.clone(),
            Self::Subscribed(current) => current(),
        }
    }
}

/// The streams open in this gateway, per caller, and the signal that this configuration was
/// replaced (a reload).
#[derive(Debug)]
pub struct Watchers {
    open: Mutex<HashMap<(String, String), usize>>,
    /// Each watched tenant's listings at its last look, and when they were built.
    looked: Mutex<HashMap<String, (tokio::time::Instant, Listings)>>,
    retired: watch::Sender<bool>,
}

impl Default for Watchers {
    fn default() -> Self {
        Self {
            open: Mutex::default(),
            looked: Mutex::default(),
            retired: watch::Sender::new(false),
        }
    }
}

impl Watchers {
    /// This configuration is replaced: every stream sends what it carries of list changes, and
    /// ends.
    pub fn retire(&self) {
        self.retired.send_replace(true);
    }

    /// What `caller`'s tenant is served: as another stream of the tenant saw it within
    /// [`FRESH`], else built now. A tenant nobody watches any more is forgotten at the next
    /// build.
    fn listings(&self, gateway: &Gateway, caller: &Caller) -> Listings {
        let now = tokio::time::Instant::now();
        if let Some((at, listings)) =
            (self.looked.lock().unwrap_or_else(PoisonError::into_inner)).get(&caller.tenant)
            && now.duration_since(*at) < FRESH
        {
            return *listings;
        }
        let listings = Listings::of(gateway, caller);
        let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        let mut looked = self.looked.lock().unwrap_or_else(PoisonError::into_inner);
        looked.retain(|tenant, _| open.keys().any(|(watched, _)| watched == tenant));
        looked.insert(caller.tenant.clone(), (now, listings));
        listings
    }

    /// A stream for `caller` of `filter` and `uris`, `first` sent before anything (the
    /// 2026-07-28 acknowledgement), each notification tagged with `subscription` (the listen
    /// request's id) if given; with `connected` (a 2025-11-25 `GET`), each account the caller
    /// connects is told as `notifications/elicitation/complete`. 429 past [`MOST_STREAMS`].
    #[expect(
        clippy::too_many_arguments,
        reason = "what one stream carries, each handed on once"
    )]
    pub fn stream(
        self: &Arc<Self>,
        gateway: Gateway,
        caller: Caller,
        filter: Filter,
        uris: Uris,
        first: Option<Value>,
        subscription: Option<Value>,
        mut connected: Option<broadcast::Receiver<crate::oauth::Connected>>,
    ) -> Response<Body> {
        let who = (caller.tenant.clone(), caller.principal.id.clone());
        {
            let mut open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            let count = open.entry(who.clone()).or_default();
            if *count >= MOST_STREAMS {
                return reply::plain(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_streams",
                    format!(
                        "this caller holds {MOST_STREAMS} streams open already; close one first"
                    ),
                );
            }
            *count += 1;
        }
        let open = Open {
            watchers: Arc::clone(self),
            who,
        };
        let (sender, response) = reply::events();
        let mut retired = self.retired.subscribe();
        let watchers = Arc::clone(self);
        tokio::spawn(async move {
            let _open = open;
            // Opened as a reload replaced this configuration: the client reconnects to the new.
            if *retired.borrow_and_update() {
                return;
            }
            let send = |message: Value| {
                let sender = sender.clone();
                async move { sender.send(reply::event(&message)).await.is_ok() }
            };
            if let Some(first) = first
                && !send(first).await
            {
                return;
            }
            let notification = |method: &str, mut params: Value| {
                if let Some(id) = &subscription {
                    params["_meta"] = json!({ "io.modelcontextprotocol/subscriptionId": id });
                }
                let mut message = json!({ "jsonrpc": "2.0", "method": method });
                if params.as_object().is_some_and(|p| !p.is_empty()) {
                    message["params"] = params;
                }
                message
            };
            let look = || Seen {
                listings: watchers.listings(&gateway, &caller),
                uris: served(&gateway, &caller, &uris.now()),
            };
            let mut seen = look();
            let mut quiet = tokio::time::Instant::now();
            loop {
                tokio::select! {
                    () = sender.closed() => return,
                    made = next_connected(&mut connected) => {
                        if made.tenant == caller.tenant && made.principal == caller.principal.id {
                            let complete = notification(
                                "notifications/elicitation/complete",
                                json!({ "elicitationId": made.elicitation_id }),
                            );
                            if !send(complete).await {
                                return;
                            }
                            quiet = tokio::time::Instant::now();
                        }
                        continue;
                    }
                    _ = retired.changed() => {
                        for (wanted, method) in filter.methods() {
                            if wanted {
                                let _ = send(notification(method, json!({}))).await;
                            }
                        }
                        return;
                    }
                    () = tokio::time::sleep(LOOK) => {}
                }
                let now = look();
                let mut told = Vec::new();
                let (before, after) = (seen.listings, now.listings);
                for ((wanted, method), changed) in filter.methods().into_iter().zip([
                    before.tools != after.tools,
                    before.resources != after.resources,
                    before.prompts != after.prompts,
                ]) {
                    if wanted && changed {
                        told.push(notification(method, json!({})));
                    }
                }
                for (uri, served) in &now.uris {
                    // A resource subscribed since the last look is only noted.
                    if seen.uris.get(uri).is_some_and(|before| before != served) {
                        told.push(notification(
                            "notifications/resources/updated",
                            json!({ "uri": uri }),
                        ));
                    }
                }
                seen = now;
                for message in told {
                    if !send(message).await {
                        return;
                    }
                    quiet = tokio::time::Instant::now();
                }
                if quiet.elapsed() >= KEEPALIVE {
                    if sender
                        .send(Bytes::from_static(b": keepalive\n\n"))
                        .await
                        .is_err()
                    {
                        return;
                    }
                    quiet = tokio::time::Instant::now();
                }
            }
        });
        response
    }
}

/// The next account connected, from `connected`; never, without one (or once it closed).
async fn next_connected(
    connected: &mut Option<broadcast::Receiver<crate::oauth::Connected>>,
) -> crate::oauth::Connected {
    if let Some(receiver) = connected {
        loop {
            match receiver.recv().await {
                Ok(made) => return made,
                // Missed some (more than its capacity at once): the next ones still count.
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            }
        }
    }
    std::future::pending().await
}

impl Filter {
    /// Each kind of list change, whether wanted, and its notification.
    fn methods(&self) -> [(bool, &'static str); 3] {
        [
            (self.tools, "notifications/tools/list_changed"),
            (self.resources, "notifications/resources/list_changed"),
            (self.prompts, "notifications/prompts/list_changed"),
        ]
    }
}

/// A stream counted open until dropped.
struct Open {
    watchers: Arc<Watchers>,
    who: (String, String),
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut open = (self.watchers.open)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = open.get_mut(&self.who) {
            *count -= 1;
            if *count == 0 {
                open.remove(&self.who);
            }
        }
    }
}

/// What a caller was served at one look, as fingerprints.
struct Seen {
    listings: Listings,
    /// Each subscribed URI's: what serves it, or that nothing the caller may read does.
    uris: BTreeMap<String, u64>,
}

/// A tenant's listings at one look, as fingerprints.
#[derive(Debug, Clone, Copy)]
struct Listings {
    tools: u64,
    resources: u64,
    prompts: u64,
}

impl Listings {
    fn of(gateway: &Gateway, caller: &Caller) -> Self {
        let tools = gateway
            .tool_list(caller, None)
            .unwrap_or_else(|error| json!({ "error": error.message }));
        let resources = json!([gateway.resource_list(caller), gateway.template_list(caller)]);
        Self {
            tools: fingerprint(&tools),
            resources: fingerprint(&resources),
            prompts: fingerprint(&gateway.prompt_list(caller)),
        }
    }
}

/// What serves each of `uris` for `caller` (the adapter's id, version and digest, the entry
/// and its arguments), as fingerprints.
fn served(gateway: &Gateway, caller: &Caller, uris: &BTreeSet<String>) -> BTreeMap<String, u64> {
    if uris.is_empty() {
        return BTreeMap::new();
    }
    let adapters = gateway.host().adapters();
    uris.iter()
        .map(|uri| {
            let served = gateway
                .host()
                .resource_at(&caller.tenant, uri)
                .map(|(name, args)| {
                    let adapter = adapters.iter().find(|adapter| {
                        name.strip_prefix(adapter.id.as_str())
                            .is_some_and(|rest| rest.starts_with('.'))
                    });
                    json!([name, args, adapter])
                });
            (uri.clone(), fingerprint(&json!(served)))
        })
        .collect()
}

fn fingerprint(value: &Value) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.to_string().hash(&mut hasher);
    hasher.finish()
}

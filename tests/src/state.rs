//! Calls with effects and the state they leave, for the tests of idempotency, approvals and
//! the audit log (and of the stores that keep them):
//!
//! 1. a host serving `gatehouse.rest`, the ledger and echo on a config the test chose
//!    ([`host`], usually on [`crate::host::rest_config`]), or with the policy probe bound in
//!    front ([`probed`]), on a store of the test's ([`store_at`]);
//! 2. the calls: a POST to the upstream under a key ([`post`]), a ledger transfer by a user
//!    under a key ([`transfer`], [`user`]), and what the upstream saw ([`upstream_path`]);
//! 3. a store file holding five records ([`five_records`]), a config file naming it for the
//!    `gatehouse` commands ([`config_file`]), and SQL run on it behind the gateway's back
//!    ([`tamper`]).

use std::path::{Path, PathBuf};

use gatehouse_host::config::StoreConfig;
use gatehouse_host::{
    Host, HostConfig, OutcomeCode, Principal, PrincipalKind, ToolCallEnvelope, ToolResultEnvelope,
};
use serde_json::{Value, json};

use crate::artifacts::{ECHO, LEDGER, POLICY_PROBE, REST};
use crate::host::HostBuilder;
use crate::upstream::Upstream;

/// A host on `config` serving `gatehouse.rest`, the ledger and echo.
pub fn host(config: HostConfig) -> Host {
    HostBuilder::on(config)
        .adapters(&[REST, LEDGER, ECHO])
        .build()
}

/// A [`host`] trusting `gatehouse.*` and `test.*` adapters, where the policy probe (with
/// `probe_config`) is bound to `tools`, on `store`.
pub fn probed(tools: &str, probe_config: Value, store: StoreConfig) -> Host {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &["test.*"])
        .with(|config| {
            config.store = store;
            config
                .pipeline
                .policies
                .push(crate::bind("test.policy-probe", tools, 0, probe_config));
        })
        .adapters(&[REST, LEDGER, ECHO])
        .policies(&[POLICY_PROBE])
        .build()
}

/// The SQLite store at `path`, otherwise the defaults.
pub fn store_at(path: &Path) -> StoreConfig {
    StoreConfig {
        path: Some(path.to_owned()),
        ..StoreConfig::default()
    }
}

/// A user of tenant `default`.
pub fn user(id: &str) -> Principal {
    Principal {
        kind: PrincipalKind::User,
        id: id.to_owned(),
        tenant: "default".to_owned(),
    }
}

/// A POST of `body` to `path` on the upstream through `gatehouse.rest.send`, under `key`.
pub fn post(upstream: &Upstream, path: &str, body: &Value, key: &str) -> ToolCallEnvelope {
    ToolCallEnvelope::new(
        "default",
        "gatehouse.rest.send",
        json!({ "url": upstream.url(path), "method": "POST", "body": body }),
    )
    .with_idempotency_key(key)
}

/// A ledger transfer of `amount` EUR by `usr_alice`, under `key`.
pub fn transfer(key: &str, amount: u32) -> ToolCallEnvelope {
    ToolCallEnvelope::new(
        "default",
        "test.ledger.transfer",
        json!({ "amount": amount, "currency": "EUR", "note": "rent" }),
    )
    .with_principal(user("usr_alice"))
    .with_idempotency_key(key)
}

/// The path the upstream saw, as `gatehouse.rest` returned its answer.
///
/// # Panics
/// If the result has no upstream answer.
pub fn upstream_path(result: &ToolResultEnvelope) -> &str {
    result
        .structured_content
        .as_ref()
        .unwrap_or_else(|| panic!("no structured content: {result:#?}"))["body"]["path"]
        .as_str()
        .unwrap_or_else(|| panic!("no upstream path: {result:#?}"))
}

/// A config file in `dir` naming `store` (for the `gatehouse` commands), one per store, with
/// `extra` appended.
pub fn config_file(dir: &Path, store: &Path, extra: &str) -> PathBuf {
    let name = store
        .file_stem()
        .expect("a store file has a name")
        .to_string_lossy();
    let path = dir.join(format!("{name}.toml"));
    std::fs::write(
        &path,
        format!("[store]\npath = {:?}\n{extra}", store.display().to_string()),
    )
    .expect("the config file is writable");
    path
}

/// A store holding five call records: four transfers, then a refusal.
pub async fn five_records() -> PathBuf {
    let path = crate::store_path();
    let mut config = crate::config(&["gatehouse.*", "test.*"], &[]);
    config.store = store_at(&path);
    let host = host(config);
    for n in 0..4 {
        let result = host.call(transfer(&format!("a-{n}"), n)).await;
        assert!(result.is_ok(), "{result:#?}");
    }
    let refused = host
        .call(ToolCallEnvelope::new("default", "no.such.tool", json!({})))
        .await;
    assert_eq!(refused.outcome, OutcomeCode::UnknownCapability);
    path
}

/// Runs `sql` on the SQLite store file `store`, as someone who can write it would.
pub fn tamper(store: &Path, sql: &str) {
    let conn =
        rusqlite::Connection::open(store).unwrap_or_else(|e| panic!("{}: {e}", store.display()));
    conn.execute_batch(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

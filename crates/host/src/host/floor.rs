//! The no-downgrade rule and its floor: a plugin is never replaced by a lower version of
//! itself unless the operator forces it, and the version each plugin (by kind and id) last
//! served is kept in the store, so a restart or a reload cannot serve an older signed version
//! either: a registry tag moved back, an older file.
//!
//! 1. **install** (every install, live or at start): a version lower than the one serving
//!    under its id is refused ([`InstallError::Downgrade`]); once the floor is held (step 2),
//!    one lower than the recorded version is too, whether or not the id serves now.
//! 2. **hold** ([`Host::hold_floor`], once the start-up plugins are installed, at start and on
//!    each reload): what serves is compared with what the store recorded; a plugin below its
//!    record is refused unless the operator allowed its id (`gatehouse serve --allow-downgrade
//!    ID`), then audited; every serving version is recorded. Until then only step 1's serving
//!    check applies, so the admin API's stored changes still apply on top of the config's
//!    plugins, whatever their order.
//! 3. **record** ([`Host::record_served`]): each later change to what serves (the admin API, the
//!    watched policy directory, a followed tag) records its version.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use gatehouse_store::{ServedAs, ServedVersion, StoreError, now_ms};

use super::{Host, InstallError};
use crate::plugin::PluginRef;
use crate::plugin::manifest::PluginKind;

/// Why the plugins a host serves were refused against the versions its store recorded
/// ([`Host::hold_floor`]). Nothing was recorded or audited.
#[derive(Debug, thiserror::Error)]
pub enum FloorError {
    /// Plugins older than the version their kind and id last served, and not allowed: one
    /// [`InstallError::Downgrade`] each.
    #[error("{}", list(.0))]
    Downgrades(Vec<InstallError>),
    /// The store could not be read, or the record or its audit entry written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn list(errors: &[InstallError]) -> String {
    let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
    lines.join("; ")
}

/// A downgrade the operator allowed at start or on reload ([`Host::hold_floor`]): audited,
/// and recorded as the version its id last served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedDowngrade {
    /// Adapter or policy.
    pub kind: PluginKind,
    /// What serves now.
    pub plugin: PluginRef,
    /// The higher version the store recorded before.
    pub replaced: ServedVersion,
}

/// The version each plugin last served, by kind (the store's name of it) and id, once
/// [`Host::hold_floor`] read them from the store; `None` until then.
#[derive(Debug, Default)]
pub(super) struct Floors(RwLock<Option<HashMap<(String, String), String>>>);

impl Floors {
    /// The recorded version of `id`, if the floor is held and it has one.
    pub(super) fn get(&self, kind: PluginKind, id: &str) -> Option<String> {
        let floors = self.0.read().unwrap_or_else(PoisonError::into_inner);
        floors
            .as_ref()?
            .get(&(kind_name(kind), id.to_owned()))
            .cloned()
    }

    /// `plugin` now serves: its version is the floor of its id (once the floor is held).
    pub(super) fn served(&self, kind: PluginKind, plugin: &PluginRef) {
        let mut floors = self.0.write().unwrap_or_else(PoisonError::into_inner);
        if let Some(floors) = floors.as_mut() {
            floors.insert((kind_name(kind), plugin.id.clone()), plugin.version.clone());
        }
    }

    fn hold(&self, floors: HashMap<(String, String), String>) {
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = Some(floors);
    }
}

/// Refuses `offered` when it is lower than the highest of `guards` (the serving version, the
/// recorded one; semver, as manifests require).
pub(super) fn check_downgrade(
    id: &str,
    guards: impl IntoIterator<Item = Option<String>>,
    offered: &str,
) -> Result<(), InstallError> {
    let Ok(version) = semver::Version::parse(offered) else {
        return Ok(());
    };
    let highest = (guards.into_iter().flatten())
        .filter_map(|guard| Some((semver::Version::parse(&guard).ok()?, guard)))
        .max_by(|a, b| a.0.cmp(&b.0));
    match highest {
        Some((guard, serving)) if version < guard => Err(InstallError::Downgrade {
            id: id.to_owned(),
            serving,
            offered: offered.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// The store's name of a kind (`served_versions.kind`).
fn kind_name(kind: PluginKind) -> String {
    kind.to_string()
}

/// `plugin`, of `kind`, as the store records it, started now.
fn served_version(kind: PluginKind, plugin: &PluginRef) -> ServedVersion {
    ServedVersion {
        kind: kind_name(kind),
        plugin: plugin.id.clone(),
        version: plugin.version.clone(),
        digest: plugin.digest.clone(),
        source: plugin.source.clone(),
        at_ms: now_ms(),
    }
}

impl Host {
    /// Every plugin serving now, adapters first, each sorted by id.
    fn serving(&self) -> Vec<(PluginKind, PluginRef)> {
        let adapters = (self.adapters().into_iter()).map(|p| (PluginKind::Adapter, p));
        let policies = (self.policies().into_iter()).map(|p| (PluginKind::Policy, p.plugin));
        adapters.chain(policies).collect()
    }

    /// Holds what this host serves to the floor: the version each plugin (by kind and id) last
    /// served, as the store recorded it ([`Host::record_served`]). Call it once the start-up
    /// plugins are installed (the config's, then the admin API's stored changes:
    /// [`Host::restore_plugin_changes`]); `gatehouse serve` does, at start and on each reload.
    ///
    /// 1. A serving plugin older than its record is a downgrade (a registry tag moved back to
    ///    an older signed build, an older file): refused, each as [`InstallError::Downgrade`]
    ///    in [`FloorError::Downgrades`], and nothing is recorded, unless its id is in
    ///    `allow_downgrade` (the operator's explicit choice, e.g. back to a version without a
    ///    flaw of the newer one).
    /// 2. Each allowed downgrade is audited (kind `plugin`, action `downgrade`, principal
    ///    `by`, the version it replaced), then every serving version the store does not hold
    ///    yet is recorded, in one transaction: an allowed downgrade lowers its record
    ///    ([`ServedAs::Downgrade`]), so the next start needs no flag.
    /// 3. From then on, every install on this host is refused below the recorded version of
    ///    its id, as below the serving one, also for an id that does not serve now (a policy
    ///    a watched directory installs after start, say).
    ///
    /// Returns the allowed downgrades.
    pub async fn hold_floor(
        &self,
        allow_downgrade: &[String],
        by: &str,
    ) -> Result<Vec<AllowedDowngrade>, FloorError> {
        let recorded = self.pipeline.store.served_versions().await?;
        let serving = self.serving();
        let mut allowed = Vec::new();
        let mut refused = Vec::new();
        for (kind, plugin) in &serving {
            let Some(record) =
                (recorded.iter()).find(|r| r.kind == kind_name(*kind) && r.plugin == plugin.id)
            else {
                continue;
            };
            let Err(error) =
                check_downgrade(&plugin.id, [Some(record.version.clone())], &plugin.version)
            else {
                continue;
            };
            if allow_downgrade.contains(&plugin.id) {
                allowed.push(AllowedDowngrade {
                    kind: *kind,
                    plugin: plugin.clone(),
                    replaced: record.clone(),
                });
            } else {
                refused.push(error);
            }
        }
        if !refused.is_empty() {
            return Err(FloorError::Downgrades(refused));
        }
        for downgrade in &allowed {
            let change = serde_json::json!({
                "action": "downgrade", "kind": downgrade.kind.to_string(),
                "plugin": downgrade.plugin, "replaced": downgrade.replaced,
            });
            self.audit_plugin_change(by, &change).await?;
        }
        let mut floors: HashMap<(String, String), String> = (recorded.iter())
            .map(|r| ((r.kind.clone(), r.plugin.clone()), r.version.clone()))
            .collect();
        let mut changed = Vec::new();
        for (kind, plugin) in &serving {
            let served = served_version(*kind, plugin);
            floors.insert(
                (served.kind.clone(), plugin.id.clone()),
                served.version.clone(),
            );
            // A restart of what served before writes nothing.
            let same = |r: &ServedVersion| {
                *r == ServedVersion {
                    at_ms: r.at_ms,
                    ..served.clone()
                }
            };
            if recorded.iter().any(same) {
                continue;
            }
            let how = if allowed
                .iter()
                .any(|d| d.kind == *kind && d.plugin.id == plugin.id)
            {
                ServedAs::Downgrade
            } else {
                ServedAs::Install
            };
            changed.push((served, how));
        }
        if !changed.is_empty() {
            self.pipeline.store.record_served(changed).await?;
        }
        self.floors.hold(floors);
        Ok(allowed)
    }

    /// Records in the store that `plugin`, of `kind`, started serving: the floor a later start,
    /// reload or install of its id may not go below ([`Host::hold_floor`]). An install
    /// ([`ServedAs::Install`]) never lowers the record; a rollback or a forced downgrade
    /// ([`ServedAs::Downgrade`]) does. The admin API, the watched policy directory and a
    /// followed tag call it after each install (and rollback); the library's install methods
    /// record nothing by themselves.
    pub async fn record_served(
        &self,
        kind: PluginKind,
        plugin: &PluginRef,
        how: ServedAs,
    ) -> Result<(), StoreError> {
        (self.pipeline.store)
            .record_served(vec![(served_version(kind, plugin), how)])
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_below_the_highest_guard_is_a_downgrade_naming_it() {
        let guards = |serving: Option<&str>, recorded: Option<&str>| {
            [serving, recorded].map(|v| v.map(str::to_owned))
        };
        // Serving, recorded, offered: the version named as refused, or none.
        let cases = [
            (None, None, "0.1.0", None),
            (Some("1.0.0"), None, "1.0.0", None),
            (Some("1.0.0"), None, "0.9.0", Some("1.0.0")),
            (None, Some("1.2.0"), "1.1.0", Some("1.2.0")),
            (Some("1.1.0"), Some("1.2.0"), "1.0.0", Some("1.2.0")),
            (Some("1.3.0"), Some("1.2.0"), "1.2.5", Some("1.3.0")),
            (None, Some("1.9.0"), "1.10.0", None),
            (None, Some("1.0.0"), "1.0.0-rc.1", Some("1.0.0")),
        ];
        for (serving, recorded, offered, refused) in cases {
            let checked = check_downgrade("acme.orders", guards(serving, recorded), offered);
            let named = match &checked {
                Err(InstallError::Downgrade {
                    id,
                    serving,
                    offered: o,
                }) => {
                    assert_eq!((id.as_str(), o.as_str()), ("acme.orders", offered));
                    Some(serving.as_str())
                }
                Ok(()) => None,
                Err(other) => panic!("{other}"),
            };
            assert_eq!(named, refused, "{serving:?} {recorded:?} {offered}");
        }
    }
}

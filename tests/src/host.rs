//! Building a [`Host`] for a test, parameterised by what tests vary:
//!
//! 1. the operator config: [`HostBuilder::trusting`] starts from [`crate::config`] (the test
//!    publisher trusted for the given adapter and policy globs), [`HostBuilder::on`] from a
//!    config the test built;
//! 2. the egress grants ([`HostBuilder::egress`], JSON as in `gatehouse.toml`) and any other
//!    setting ([`HostBuilder::with`]);
//! 3. the plugins installed, signed by the test publisher: [`HostBuilder::adapters`], then
//!    [`HostBuilder::policies`];
//! 4. [`HostBuilder::build`], which fails the test naming what did not build or install.
//!
//! [`rest_config`] is the config of the tests of effects: `gatehouse.rest` writing to a
//! loopback upstream.

use gatehouse_host::config::EgressConfig;
use gatehouse_host::{Host, HostConfig};
use serde_json::{Value, json};

use crate::Artifact;
use crate::upstream::Upstream;

/// A host under construction; see the module docs.
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build`"]
pub struct HostBuilder {
    config: HostConfig,
    adapters: Vec<Artifact>,
    policies: Vec<Artifact>,
}

impl HostBuilder {
    /// On [`crate::config`]`(adapters, policies)`: the test publisher trusted for adapters
    /// matching `adapters` and policies matching `policies`.
    pub fn trusting(adapters: &[&str], policies: &[&str]) -> Self {
        Self::on(crate::config(adapters, policies))
    }

    /// On `config`, as the test built it.
    pub fn on(config: HostConfig) -> Self {
        Self {
            config,
            adapters: Vec::new(),
            policies: Vec::new(),
        }
    }

    /// `[egress]` as `egress` says (the JSON of the TOML table).
    ///
    /// # Panics
    /// If it is not a valid `[egress]` table.
    pub fn egress(mut self, egress: Value) -> Self {
        self.config.egress = serde_json::from_value::<EgressConfig>(egress)
            .unwrap_or_else(|e| panic!("a valid [egress] table: {e}"));
        self
    }

    /// Changes any other setting.
    pub fn with(mut self, tweak: impl FnOnce(&mut HostConfig)) -> Self {
        tweak(&mut self.config);
        self
    }

    /// Installs these adapters, in order, signed by the test publisher.
    pub fn adapters(mut self, adapters: &[Artifact]) -> Self {
        self.adapters.extend_from_slice(adapters);
        self
    }

    /// Installs these policy modules, in order, after the adapters, signed by the test
    /// publisher.
    pub fn policies(mut self, policies: &[Artifact]) -> Self {
        self.policies.extend_from_slice(policies);
        self
    }

    /// The config the host would be built on, for a test of `Host::new` itself.
    pub fn into_config(self) -> HostConfig {
        self.config
    }

    /// Builds the host and installs the plugins.
    ///
    /// # Panics
    /// If the host does not build or a plugin does not install, naming which and why.
    pub fn build(self) -> Host {
        let host = Host::new(self.config).unwrap_or_else(|e| panic!("the host builds: {e}"));
        for adapter in &self.adapters {
            host.install_adapter(&adapter.signed())
                .unwrap_or_else(|e| panic!("{} installs: {e}", adapter.name));
        }
        for policy in &self.policies {
            host.install_policy(&policy.signed())
                .unwrap_or_else(|e| panic!("{} installs: {e}", policy.name));
        }
        host
    }
}

/// A config for `gatehouse.rest` writing to `upstream` (GET and POST anywhere on it, the
/// test token bound as a bearer credential, loopback allowed), trusting the test publisher for
/// `gatehouse.*` and `test.*` adapters and `test.*` policies.
pub fn rest_config(upstream: &Upstream) -> HostConfig {
    HostBuilder::trusting(&["gatehouse.*", "test.*"], &["test.*"])
        .egress(json!({
            "grant": [{
                "allow_private": ["127.0.0.0/8"],
                "adapter": "gatehouse.rest",
                "url": format!("http://127.0.0.1:{}/", upstream.port),
                "methods": ["GET", "POST"],
                "credentials": { "api_token": { "file": crate::token_file(), "scheme": "Bearer" } },
            }],
        }))
        .into_config()
}

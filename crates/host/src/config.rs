//! The operator's config file (`gatehouse.toml`): the grant.
//!
//! Every table is optional and every default denies: with an empty file the host trusts no
//! publisher, so nothing loads. Unknown keys are errors, so a typo cannot silently fall back to
//! a default, and every error names the file, line and key.
//!
//! [`HostConfig`] holds the library's tables. A program that adds tables of its own to the
//! same file (`gatehouse serve` adds `[mcp]`) reads it as a [`Document`]: it takes out its
//! tables, and the rest must be the library's.
//!
//! ```toml
//! [sandbox]              # per-call budgets (see SandboxConfig for defaults)
//! fuel = 1_000_000_000
//! timeout_ms = 5000
//! memory_mib = 64
//! max_output_kib = 1024
//!
//! [cache]                # compiled-component cache (see CacheConfig)
//! enabled = true
//!
//! [pipeline]             # tools, policies, skills (see PipelineConfig)
//! policy_default = "deny"
//!
//! [store]                # idempotency, approvals, audit log (see StoreConfig)
//! path = "/var/lib/gatehouse/gatehouse.db"
//!
//! [[trust.publisher]]    # who may publish what (see TrustConfig)
//! key_id = "acme-2026"
//! public_key = "..."
//! adapters = ["acme.*"]
//!
//! [[egress.grant]]       # what adapters may reach (see EgressConfig)
//! adapter = "acme.orders"
//! url = "https://api.acme.example/v1/"
//! methods = ["GET", "POST"]
//! credentials = { api_token = { env = "ACME_TOKEN", scheme = "Bearer" } }
//! allow_private = []     # special-purpose ranges this grant may reach; default none
//!
//! [[stdio.server]]       # an imported stdio MCP server, in its sandbox (see StdioConfig)
//! adapter = "acme.fs"
//! dirs = ["/srv/docs:rw"]
//!
//! [[caller.grant]]       # what adapters may ask their callers (see CallerConfig)
//! adapter = "acme.forms"
//! ask = ["elicitation"]
//! ```

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use toml::Spanned;
use toml::de::{DeTable, Deserializer, ValueDeserializer};

pub use crate::caller::{AskGrant, CallerConfig, CallerConfigError};
pub use crate::egress::{
    CredentialConfig, EgressConfig, GrantConfig, MethodName, TUNNEL_METHODS, UrlPattern,
};
pub use crate::pipeline::config::{ArgConstraint, MetaTool, PipelineConfig, ToolGrant};
pub use crate::pipeline::rate::{MemoryRateBudget, RateBudget, RateFuture, RateLimit, RateScope};
pub use crate::pipeline::receipt::ReceiptsConfig;
pub use crate::pipeline::session::{LabelRule, SessionsConfig};
pub use crate::plugin::cache::CacheConfig;
pub use crate::plugin::trust::{PublisherConfig, TrustConfig};
pub use crate::policy::{BindingMode, PolicyBinding, PolicyDefault};
pub use crate::sandbox::{PluginBudget, SandboxConfig, SandboxConfigError};
pub use crate::skills::{Scope as SkillScope, Skill, SkillLimits};
pub use crate::stdio::{EnvBinding, ServerConfig as StdioServerConfig, Start, StdioConfig};
pub use gatehouse_core::model::{Glob, Tenants};
pub use gatehouse_store::StoreConfig;

/// The whole operator config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HostConfig {
    /// Per-call budgets. Default: see [`SandboxConfig`].
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// Compiled-component cache. Default: enabled, in the user's cache directory.
    #[serde(default)]
    pub cache: CacheConfig,
    /// Trusted publishers. Default: none.
    #[serde(default)]
    pub trust: TrustConfig,
    /// Egress grants, private-address allowances and per-call egress budgets. Default: no
    /// adapter may reach anything.
    #[serde(default)]
    pub egress: EgressConfig,
    /// The governed call: tool grants, meta-tools, policy bindings, skills. Default: no tool
    /// visible, no policy bound, policy default deny. See [`PipelineConfig`].
    #[serde(default)]
    pub pipeline: PipelineConfig,
    /// Idempotency records, approvals and the audit log. Default: a SQLite file in the user's
    /// data directory; approvals valid a day; no self-approval. See [`StoreConfig`].
    #[serde(default)]
    pub store: StoreConfig,
    /// Stdio MCP servers the gateway may start, each in a sandbox, and where their packages
    /// are installed. Default: none. See [`StdioConfig`].
    #[serde(default, skip_serializing_if = "is_default")]
    pub stdio: StdioConfig,
    /// What adapters may ask their callers during a call (contract 0.5.0: elicitation,
    /// sampling, roots), within which budgets. Default: nothing; every ask is refused. See
    /// [`CallerConfig`].
    #[serde(default, skip_serializing_if = "is_default")]
    pub caller: CallerConfig,
    /// Sessions: how long one lives, how many of its actions a policy sees, and the operator's
    /// labels for tools. Default: 30 minutes idle, a day at most, 16 actions, no labels. See
    /// [`SessionsConfig`].
    #[serde(default, skip_serializing_if = "is_default")]
    pub sessions: SessionsConfig,
    /// Signed receipts on every result: the key they are signed with. Default: none, no
    /// receipts. See [`ReceiptsConfig`].
    #[serde(default, skip_serializing_if = "is_default")]
    pub receipts: ReceiptsConfig,
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// Why the config cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not a valid config.
    #[error("invalid config {path}: {message}")]
    Invalid {
        /// The file.
        path: String,
        /// The parser's message, naming the key and line.
        message: String,
    },
}

impl ConfigError {
    /// `message` about the file at `path`.
    pub fn invalid(path: &Path, message: impl Into<String>) -> Self {
        Self::Invalid {
            path: path.display().to_string(),
            message: message.into(),
        }
    }
}

impl HostConfig {
    /// Reads a config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        Self::from_toml(&read(path)?).map_err(|message| ConfigError::invalid(path, message))
    }

    /// Parses config text.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}

/// Reads a config file's text, naming the file in the error.
pub fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.display().to_string(),
        source,
    })
}

/// A config file shared by the library and a program that adds tables of its own: parsed once,
/// the program [takes](Document::take) its tables out, and the rest is the library's
/// [`HostConfig`]. Errors keep TOML's line, column and key, like [`HostConfig::from_toml`].
pub struct Document<'a> {
    text: &'a str,
    root: Spanned<DeTable<'a>>,
    /// The tables the program asked for, in order: valid names too.
    taken: Vec<String>,
}

/// [`HostConfig`]'s tables, in the order serde lists them in an unknown-table error.
const HOST_TABLES: [&str; 8] = [
    "sandbox", "cache", "trust", "egress", "pipeline", "store", "stdio", "caller",
];

impl<'a> Document<'a> {
    /// Parses config text.
    pub fn parse(text: &'a str) -> Result<Self, String> {
        let root = DeTable::parse(text).map_err(|e| e.to_string())?;
        Ok(Self {
            text,
            root,
            taken: Vec::new(),
        })
    }

    /// Takes table `name` out of the document; absent, it is `T::default()`.
    pub fn take<T: DeserializeOwned + Default>(&mut self, name: &str) -> Result<T, String> {
        self.taken.push(name.to_owned());
        let key = self
            .root
            .get_ref()
            .keys()
            .find(|k| k.get_ref() == name)
            .cloned();
        let Some(value) = key.and_then(|k| self.root.get_mut().remove(&k)) else {
            return Ok(T::default());
        };
        T::deserialize(ValueDeserializer::from(value)).map_err(|mut e| {
            e.set_input(Some(self.text));
            // An error without a position names its key relative to the table: say which.
            match e.span() {
                Some(_) => e.to_string(),
                None => format!("in [{name}]: {e}"),
            }
        })
    }

    /// The library's tables: everything not taken. A table nobody took is an unknown key, and
    /// its error lists the tables the program took as valid too.
    pub fn into_host_config(self) -> Result<HostConfig, String> {
        let (text, root, taken) = (self.text, self.root, self.taken);
        HostConfig::deserialize(Deserializer::from(root)).map_err(|mut e| {
            e.set_input(Some(text));
            let quoted = |names: &mut dyn Iterator<Item = &str>| {
                names
                    .map(|n| format!("`{n}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let library = format!("expected one of {}", quoted(&mut HOST_TABLES.into_iter()));
            let all = format!(
                "expected one of {}",
                quoted(
                    &mut HOST_TABLES
                        .into_iter()
                        .chain(taken.iter().map(String::as_str))
                )
            );
            e.to_string().replacen(&library, &all, 1)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_config_denies_by_default() {
        let config = HostConfig::from_toml("").unwrap();
        assert!(config.trust.publishers.is_empty());
        assert_eq!(config.sandbox, SandboxConfig::default());
        assert!(config.cache.enabled);
    }

    #[test]
    fn unknown_keys_are_errors_naming_the_key() {
        let err = HostConfig::from_toml("[sandbox]\nfule = 5").unwrap_err();
        assert!(err.contains("unknown field `fule`"), "{err}");
        let err = HostConfig::from_toml("[[trust.publisher]]\nkey_id = \"a\"").unwrap_err();
        assert!(err.contains("missing field `public_key`"), "{err}");
    }

    #[test]
    fn an_unknown_table_lists_the_tables_the_program_takes_too() {
        let mut document = Document::parse("[mpc]\nlisten = \"x\"").unwrap();
        let () = document.take("mcp").unwrap();
        let () = document.take("watch").unwrap();
        let err = document.into_host_config().unwrap_err();
        assert!(
            err.contains(
                "unknown field `mpc`, expected one of `sandbox`, `cache`, `trust`, `egress`, \
                 `pipeline`, `store`, `stdio`, `caller`, `mcp`, `watch`"
            ),
            "{err}"
        );
    }

    #[test]
    fn wrong_types_are_errors() {
        let err = HostConfig::from_toml("[sandbox]\nmemory_mib = \"lots\"").unwrap_err();
        assert!(err.contains("memory_mib"), "{err}");
    }
}

//! The operator's config file (`gatehouse.toml`): the grant.
//!
//! Every table is optional and every default denies: with an empty file the host trusts no
//! publisher, so nothing loads. Unknown keys are errors, so a typo cannot silently fall back to
//! a default.
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
//! [[trust.publisher]]    # who may publish what (see TrustConfig)
//! key_id = "acme-2026"
//! public_key = "..."
//! adapters = ["acme.*"]
//!
//! [egress]               # what adapters may reach (see EgressConfig)
//! allow_private = []
//!
//! [[egress.grant]]
//! adapter = "acme.orders"
//! url = "https://api.acme.example/v1/"
//! methods = ["GET", "POST"]
//! credentials = { api_token = { env = "ACME_TOKEN", scheme = "Bearer" } }
//!
//! [mcp]                  # `gatehouse serve` (see McpConfig)
//! listen = "127.0.0.1:8787"
//!
//! [[mcp.api_key]]
//! tenant = "acme"
//! env = "ACME_AGENT_KEY"
//! ```

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::egress::EgressConfig;
use crate::mcp::McpConfig;
use crate::pipeline::config::PipelineConfig;
use crate::plugin::cache::CacheConfig;
use crate::plugin::trust::TrustConfig;
use crate::sandbox::SandboxConfig;

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
    /// The MCP endpoint of `gatehouse serve`: listen address, API keys, allowed hosts and
    /// origins. Default: loopback, nobody admitted. See [`McpConfig`]. (The library's
    /// [`Host`](crate::Host) ignores it.)
    #[serde(default)]
    pub mcp: McpConfig,
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

impl HostConfig {
    /// Reads a config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_toml(&text).map_err(|message| ConfigError::Invalid {
            path: path.display().to_string(),
            message,
        })
    }

    /// Parses config text.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|e| e.to_string())
    }
}

/// Reads a secret from exactly one of an environment variable and a file, trimmed. Errors name
/// the variable or file and the fix, never the value.
pub fn read_secret(env: Option<&str>, file: Option<&Path>) -> Result<String, String> {
    let raw = match (env, file) {
        (Some(var), None) => std::env::var(var).map_err(|_| {
            format!(
                "environment variable `{var}` is not set (or not UTF-8); set it in the host's environment"
            )
        })?,
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?,
        (Some(_), Some(_)) | (None, None) => {
            return Err("set exactly one of `env` and `file`".to_owned());
        }
    };
    let secret = raw.trim();
    if secret.is_empty() {
        return Err("the secret is empty".to_owned());
    }
    Ok(secret.to_owned())
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
    fn wrong_types_are_errors() {
        let err = HostConfig::from_toml("[sandbox]\nmemory_mib = \"lots\"").unwrap_err();
        assert!(err.contains("memory_mib"), "{err}");
    }
}

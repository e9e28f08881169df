//! The config file every command reads: [`ServeConfig`], the library's tables and the
//! server's, found by `--config`, `$GATEHOUSE_CONFIG` or `./gatehouse.toml` ([`ConfigArg`]).

use std::path::{Path, PathBuf};

use gatehouse_host::HostConfig;
use gatehouse_host::config::{self, ConfigError, Document};
use gatehouse_host::oci::OciConfig;
use gatehouse_host::watch::WatchConfig;
use gatehouse_server::admin::AdminConfig;
use gatehouse_server::mcp::McpConfig;
use gatehouse_server::oauth::OAuthConfig;
use serde::{Deserialize, Serialize};

use crate::exit::{Failure, usage};

/// The environment variable naming the config file.
pub(crate) const CONFIG_ENV: &str = "GATEHOUSE_CONFIG";
/// The config file read from the working directory when none is named.
pub(crate) const DEFAULT_CONFIG: &str = "gatehouse.toml";

/// `--config FILE`, the option of every command that reads the config.
#[derive(Debug, clap::Args)]
pub(crate) struct ConfigArg {
    /// Operator config file. Default: $GATEHOUSE_CONFIG, else ./gatehouse.toml if present,
    /// else built-in defaults (which trust no publisher).
    #[arg(long, global = true)]
    pub(crate) config: Option<PathBuf>,
}

/// The config file as `gatehouse serve` reads it: the library's tables ([`HostConfig`]) and
/// the server's own `[mcp]` table. Every other command reads the same file (ignoring `[mcp]`),
/// so one `gatehouse.toml` serves them all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeConfig {
    /// The library's tables.
    pub host: HostConfig,
    /// The MCP endpoint: listen address, API keys, allowed hosts and origins. Default:
    /// loopback, nobody admitted.
    pub mcp: McpConfig,
    /// The admin API (`[admin]`): runs only when the table is present.
    pub admin: Option<AdminConfig>,
    /// A directory of signed policy modules to install as they change (`[watch]`). Default:
    /// none.
    pub watch: Option<WatchConfig>,
    /// What start-up does about imported MCP adapters whose upstream changed (`[import]`).
    /// Default: nothing.
    pub import: ImportConfig,
    /// OCI registries: cache, size bound, transport, credentials, tag rule (`[oci]`). Read
    /// by `serve` (`oci://` sources), the admin API's policy push, `push` and `pull`.
    pub oci: OciConfig,
    /// What `serve` serves besides its `--adapter` and `--policy` arguments (`[plugins]`):
    /// files (relative to the config file) and `oci://` references, read again on SIGHUP.
    pub plugins: PluginSources,
    /// Each user's own upstream accounts (`[oauth]`): the providers they connect at and the
    /// vault their tokens are kept in. Default: none.
    pub oauth: Option<OAuthConfig>,
}

/// The `[plugins]` table: signed components `serve` installs, as files or `oci://` references.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginSources {
    /// Adapters to serve.
    #[serde(default)]
    pub adapters: Vec<String>,
    /// Policy modules to install (bind them in `[[pipeline.policy]]`).
    #[serde(default)]
    pub policies: Vec<String>,
}

impl PluginSources {
    /// `sources` as they are read: a file relative to the directory of the config file `file`
    /// (the working directory without one), an `oci://` reference as it is.
    pub(crate) fn resolve(sources: &[String], file: Option<&Path>) -> Vec<String> {
        let base = file.and_then(Path::parent).unwrap_or(Path::new(""));
        (sources.iter())
            .map(|source| match gatehouse_host::oci::OciRef::is_oci(source) {
                true => source.clone(),
                false => base.join(source).display().to_string(),
            })
            .collect()
    }
}

impl ServeConfig {
    /// Reads a config file.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        Self::from_toml(&config::read(path)?).map_err(|message| ConfigError::invalid(path, message))
    }

    /// Parses config text.
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let mut document = Document::parse(text)?;
        let mcp = document.take("mcp")?;
        let admin = document.take("admin")?;
        let watch = document.take("watch")?;
        let import = document.take("import")?;
        let oci = document.take("oci")?;
        let plugins = document.take("plugins")?;
        let oauth = document.take("oauth")?;
        Ok(Self {
            host: document.into_host_config()?,
            mcp,
            admin,
            watch,
            import,
            oci,
            plugins,
            oauth,
        })
    }
}

/// The `[import]` table of the config.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImportConfig {
    /// What `serve` does at start-up about an imported MCP adapter whose upstream changed or
    /// dropped a tool it pins. Default: `off` (no request to any upstream at start-up).
    #[serde(default)]
    pub drift_check: DriftCheck,
}

/// What to do about drift at start-up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DriftCheck {
    /// Do not check.
    #[default]
    Off,
    /// Log each drifted adapter and serve.
    Warn,
    /// Do not start (exit 1), naming the tools; an upstream that cannot be asked refuses too.
    Refuse,
}

/// The operator config named by `--config`, `$GATEHOUSE_CONFIG` or `./gatehouse.toml`, else the
/// built-in defaults.
pub(crate) fn load_config(arg: &ConfigArg) -> Result<ServeConfig, Failure> {
    read_config(config_path(arg).as_deref())
}

/// The config file `--config`, `$GATEHOUSE_CONFIG` or `./gatehouse.toml` names, if any.
pub(crate) fn config_path(arg: &ConfigArg) -> Option<PathBuf> {
    arg.config
        .clone()
        .or_else(|| std::env::var_os(CONFIG_ENV).map(PathBuf::from))
        .or_else(|| {
            Path::new(DEFAULT_CONFIG)
                .exists()
                .then(|| PathBuf::from(DEFAULT_CONFIG))
        })
}

/// Reads the config file at `path`, or the built-in defaults without one.
pub(crate) fn read_config(path: Option<&Path>) -> Result<ServeConfig, Failure> {
    match path {
        Some(path) => ServeConfig::from_file(path).map_err(usage),
        None => {
            tracing::warn!("no config file: using built-in defaults, which trust no publisher");
            Ok(ServeConfig::default())
        }
    }
}

/// A path as the inside of a TOML basic string, for configs written from templates
/// (`gatehouse new`, `gatehouse demo --export`).
pub(crate) fn toml_path(path: &Path) -> String {
    path.display()
        .to_string()
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
}

#[cfg(test)]
mod fuzz;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_file_holds_the_library_tables_and_mcp() {
        let config = ServeConfig::from_toml(
            "[sandbox]\nfuel = 5\n\n[mcp]\nlisten = \"127.0.0.1:9999\"\nanonymous_tenant = \"t\"\n",
        )
        .unwrap();
        assert_eq!(config.host.sandbox.fuel, 5);
        assert_eq!(config.mcp.listen.port(), 9999);
        assert_eq!(config.mcp.anonymous_tenant.as_deref(), Some("t"));
        assert_eq!((config.admin, config.watch), (None, None));
        let config = ServeConfig::from_toml(
            "[admin]\n[[admin.token]]\nprincipal = \"ana\"\nroles = [\"approver\"]\nenv = \"T\"\n\n[watch]\npolicy_dir = \"/p\"\n",
        )
        .unwrap();
        let admin = config.admin.unwrap();
        assert_eq!(admin.listen.to_string(), "127.0.0.1:8788");
        assert_eq!(
            admin.tokens[0].roles,
            [gatehouse_server::admin::Role::Approver]
        );
        assert_eq!(config.watch.unwrap().interval_ms, 2000);
        let err = ServeConfig::from_toml(
            "[admin]\n[[admin.token]]\nprincipal = \"a\"\nroles = [\"root\"]\n",
        )
        .unwrap_err();
        assert!(
            err.contains("line 4") && err.contains("unknown variant `root`"),
            "{err}"
        );
        // The library alone does not know `[mcp]`.
        let err = HostConfig::from_toml("[mcp]\nlisten = \"127.0.0.1:9999\"").unwrap_err();
        assert!(err.contains("unknown field `mcp`"), "{err}");
    }

    #[test]
    fn errors_name_the_line_and_key_in_either_part() {
        let err = ServeConfig::from_toml("[sandbox]\nfuel = 5\n\n[mcp]\nlisten = 7\n").unwrap_err();
        assert!(err.contains("line 5"), "{err}");
        let err = ServeConfig::from_toml("[mcp]\n\n[sandbox]\nfule = 5\n").unwrap_err();
        assert!(
            err.contains("line 4") && err.contains("unknown field `fule`"),
            "{err}"
        );
        let err = ServeConfig::from_toml("[sandbx]\n").unwrap_err();
        assert!(err.contains("unknown field `sandbx`"), "{err}");
    }
}

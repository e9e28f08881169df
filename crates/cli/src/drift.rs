//! `[import] drift_check`: at start-up, `serve` compares the tools each adapter written by
//! `gatehouse import mcp` pins (their definitions' digests) with what its MCP server offers
//! now, and warns or refuses to start.
//!
//! ```toml
//! [import]
//! drift_check = "refuse"   # default "off"; or "warn"
//! ```
//!
//! Drift here is a pinned tool whose definition changed or that the server no longer lists;
//! a tool the server added is not served, so it is no reason to refuse. The server is asked
//! with the credentials the adapter's `[[egress.grant]]` binds.

use gatehouse_host::config::GrantConfig;
use gatehouse_host::plugin::manifest::Manifest;

use crate::config::DriftCheck;
use crate::exit::{Failure, refused};
use crate::import::headers::from_grants;
use crate::import::{Options, mcp};

/// Runs the check over the adapters' `manifests`, with the credentials `grants` bind.
pub fn check(
    mode: DriftCheck,
    manifests: &[Manifest],
    grants: &[GrantConfig],
) -> Result<(), Failure> {
    if mode == DriftCheck::Off {
        return Ok(());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| refused(format!("cannot start the async runtime: {e}")))?;
    for manifest in manifests {
        let Manifest::Adapter(adapter) = manifest else {
            continue;
        };
        let Some(url) = mcp::upstream_url(adapter) else {
            continue;
        };
        let problem = match drift_of(&runtime, adapter, url, grants) {
            Ok(None) => continue,
            Ok(Some(drift)) => drift,
            Err(error) => format!("cannot check it: {error}"),
        };
        let message = format!(
            "adapter `{}`: the MCP server at {url} {problem}; run `gatehouse import mcp --check` \
             and import it again",
            adapter.id
        );
        match mode {
            DriftCheck::Refuse => {
                return Err(refused(format!(
                    "{message} (`[import] drift_check = \"refuse\"`)"
                )));
            }
            DriftCheck::Warn | DriftCheck::Off => tracing::warn!("{message}"),
        }
    }
    Ok(())
}

/// What changed for `adapter`, said for people, or `None`.
fn drift_of(
    runtime: &tokio::runtime::Runtime,
    adapter: &gatehouse_host::plugin::manifest::AdapterManifest,
    url: &str,
    grants: &[GrantConfig],
) -> Result<Option<String>, String> {
    let headers = from_grants(grants, &adapter.id).map_err(|e| e.to_string())?;
    let listing = runtime
        .block_on(mcp::list(url, &headers))
        .map_err(|e| e.to_string())?;
    let drift = mcp::drift(adapter, &Options::new(adapter.id.clone()), &listing)
        .map_err(|e| e.to_string())?;
    if drift.changed.is_empty() && drift.removed.is_empty() {
        return Ok(None);
    }
    let mut said = Vec::new();
    if !drift.changed.is_empty() {
        said.push(format!("changed {}", drift.changed.join(", ")));
    }
    if !drift.removed.is_empty() {
        said.push(format!("no longer lists {}", drift.removed.join(", ")));
    }
    Ok(Some(said.join(" and ")))
}

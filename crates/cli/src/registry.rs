//! `gatehouse push` and `gatehouse pull`: signed components to and from OCI registries
//! ([`gatehouse_host::oci`]), with the config's `[oci]` settings.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use gatehouse_host::oci::{OciRef, Registries, Tags};
use gatehouse_host::plugin;

use gatehouse_host::plugin::read_file;

use crate::config::{ConfigArg, load_config};
use crate::exit::{Failure, refused, usage};

/// Publishes a signed component at `reference` (a tag) and prints the digest to pin.
pub(super) fn push(
    component: &Path,
    reference: &str,
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let reference: OciRef = reference.parse().map_err(usage)?;
    let config = load_config(config)?;
    let bytes = read_file(component).map_err(usage)?;
    let label = component.display();
    // What would be refused at load is refused here, before it reaches a registry: a gateway
    // verifies the signature against its own trusted keys when it pulls.
    let inspection = plugin::inspect(&bytes).map_err(|e| refused(format!("{label}: {e}")))?;
    let Some(manifest) = inspection.manifest else {
        return Err(refused(format!(
            "{label}: no valid manifest ({}); embed one and sign with `gatehouse pack`",
            inspection.manifest_error.unwrap_or_default()
        )));
    };
    let Some(signature) = inspection.signature else {
        return Err(refused(format!(
            "{label}: not signed; sign it with `gatehouse pack` first (gateways load only signed components)"
        )));
    };
    let annotations = BTreeMap::from([
        (
            "org.opencontainers.image.title".to_owned(),
            manifest.id().to_owned(),
        ),
        (
            "org.opencontainers.image.version".to_owned(),
            manifest.version().to_owned(),
        ),
        ("dev.gatehouse.kind".to_owned(), manifest.kind().to_string()),
        ("dev.gatehouse.key_id".to_owned(), signature.key_id.clone()),
    ]);
    let registries = Registries::new(&config.oci, &config.host.cache.resolved_dir());
    let digest = registries
        .push_blocking(&reference, bytes, annotations)
        .map_err(refused)?;
    say!(
        out,
        "pushed {} {} {} (key `{}`) to {reference}",
        manifest.kind(),
        manifest.id(),
        manifest.version(),
        signature.key_id
    );
    say!(out, "digest {digest}");
    say!(out, "pinned {}", reference.pinned(&digest));
    Ok(0)
}

/// Fetches the component `reference` names (a tag or a digest) into `out_file`, and prints the
/// pinned reference to put in a config.
pub(super) fn pull(
    reference: &str,
    out_file: Option<&Path>,
    config: &ConfigArg,
    out: &mut dyn Write,
) -> Result<u8, Failure> {
    let reference: OciRef = reference.parse().map_err(usage)?;
    let config = load_config(config)?;
    let registries = Registries::new(&config.oci, &config.host.cache.resolved_dir());
    let pulled = registries
        .pull_blocking(&reference, Tags::Resolve)
        .map_err(refused)?;
    let file = out_file.map_or_else(|| default_file(&reference), Path::to_path_buf);
    std::fs::write(&file, &pulled.bytes)
        .map_err(|e| usage(format!("cannot write {}: {e}", file.display())))?;
    let what = plugin::inspect(&pulled.bytes)
        .ok()
        .and_then(|inspection| {
            let manifest = inspection.manifest?;
            let key = inspection
                .signature
                .map_or_else(|| "unsigned".to_owned(), |s| format!("key `{}`", s.key_id));
            Some(format!(
                "{} {} {} ({key})",
                manifest.kind(),
                manifest.id(),
                manifest.version()
            ))
        })
        .unwrap_or_else(|| "a component without a valid manifest".to_owned());
    let cached = if pulled.from_cache {
        ", from the cache"
    } else {
        ""
    };
    say!(
        out,
        "pulled {what}, {} bytes{cached}, to {}",
        pulled.bytes.len(),
        file.display()
    );
    say!(out, "pinned {}", pulled.pinned);
    say!(
        out,
        "check it as a gateway would: gatehouse verify {}",
        file.display()
    );
    Ok(0)
}

/// `orders.wasm` for `oci://registry/acme/orders:1.0`.
fn default_file(reference: &OciRef) -> PathBuf {
    let name = reference
        .repository()
        .rsplit('/')
        .next()
        .unwrap_or("component");
    PathBuf::from(format!("{name}.wasm"))
}

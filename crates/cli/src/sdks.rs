//! The SDKs the binary carries, so an author needs only `gatehouse`: `gatehouse new` and
//! `gatehouse build` find no checkout of gatehouse's source, and need none.
//!
//! - **Rust**: the `gatehouse-sdk` crate is vendored into the project (`vendor/gatehouse-sdk`),
//!   with a `Cargo.toml` of its own (the workspace's inherited fields and dependency versions
//!   written out), and the project depends on it by path. Its dependencies come from crates.io
//!   as any crate's.
//! - **JavaScript, Python**: the SDK and its pinned toolchain (componentize-js, jco and
//!   esbuild as `sdk-js/package-lock.json` locks them; componentize-py as
//!   `sdk-py/requirements.txt` pins it) are installed on first use into a per-user cache,
//!   `$XDG_CACHE_HOME/gatehouse/sdk/<version>-<digest>/<lang>` (default `~/.cache/...`), which
//!   `gatehouse build` then uses. The digest is of the SDK's files, so a binary with another
//!   SDK gets a directory of its own. An install holds a lock file while it runs, and marks
//!   the directory `.installed` only when it finished, so an interrupted one is never taken
//!   for done (the next build starts it over).
//!
//! The SDKs are pinned to the binary: the version written is the binary's own, and the WIT
//! contract carried is the one the binary's host implements.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::Digest as _;

use crate::exit::{Failure, usage};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/sdks.rs"));
}

/// The workspace manifest the Rust SDK inherits its fields and dependency versions from.
const WORKSPACE_MANIFEST: &str = include_str!("../../../Cargo.toml");

/// A language with an SDK in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cached {
    /// The JavaScript SDK (`sdk-js`).
    Js,
    /// The Python SDK (`sdk-py`).
    Python,
}

impl Cached {
    fn files(self) -> &'static [(&'static str, &'static [u8])] {
        match self {
            Self::Js => embedded::JS,
            Self::Python => embedded::PY,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Js => "js",
            Self::Python => "python",
        }
    }

    fn language(self) -> &'static str {
        match self {
            Self::Js => "JavaScript",
            Self::Python => "Python",
        }
    }

    /// What installing its toolchain installs, for the progress line.
    fn toolchain(self) -> &'static str {
        match self {
            Self::Js => "componentize-js, jco and esbuild, as locked",
            Self::Python => "componentize-py, as pinned",
        }
    }

    /// The file that marks an installed SDK directory as this language's.
    fn marker(self) -> &'static str {
        match self {
            Self::Js => "build.mjs",
            Self::Python => "build.py",
        }
    }
}

/// Writes the Rust SDK into `dir` (which must not exist), with a `Cargo.toml` of its own.
pub fn vendor_rust(dir: &Path) -> Result<(), Failure> {
    write_files(dir, embedded::RUST, |path| path == "Cargo.toml")?;
    let manifest = rust_manifest().map_err(usage)?;
    std::fs::write(dir.join("Cargo.toml"), manifest)
        .map_err(|e| usage(format!("{}: {e}", dir.display())))
}

/// Whether `dir` holds a checkout's SDK of `lang` (for `--sdk`).
pub fn is_checkout(lang: Cached, dir: &Path) -> bool {
    dir.join(lang.marker()).is_file()
}

/// The directory of the SDK of `lang` with its toolchain installed: the per-user cache's,
/// installed now if it is not there yet (saying so on `progress`).
pub fn installed(lang: Cached, progress: &mut dyn Write) -> Result<PathBuf, Failure> {
    let dir = cache_root()?
        .join(format!("{}-{}", env!("CARGO_PKG_VERSION"), digest()))
        .join(lang.name());
    if dir.join(".installed").is_file() {
        return Ok(dir);
    }
    let parent = dir.parent().expect("the cache directory has a parent");
    std::fs::create_dir_all(parent).map_err(|e| usage(format!("{}: {e}", parent.display())))?;
    // One install at a time (another build may be installing it now); the lock goes with the
    // file when this process ends, however it ends.
    let lock_path = parent.join(format!("{}.lock", lang.name()));
    let lock = std::fs::File::create(&lock_path)
        .map_err(|e| usage(format!("{}: {e}", lock_path.display())))?;
    lock.lock()
        .map_err(|e| usage(format!("{}: {e}", lock_path.display())))?;
    if dir.join(".installed").is_file() {
        return Ok(dir);
    }
    // A virtual environment cannot move, so the install is made in place; what an
    // interrupted one left is removed first.
    let _ = std::fs::remove_dir_all(&dir);
    let _ = writeln!(
        progress,
        "gatehouse: installing the {} SDK and its toolchain ({}) into {}; once, about a minute...",
        lang.language(),
        lang.toolchain(),
        dir.display()
    );
    let _ = progress.flush();
    write_files(&dir, lang.files(), |_| false)?;
    let installed = match lang {
        Cached::Js => install_js(&dir),
        Cached::Python => install_python(&dir),
    };
    if let Err(failure) = installed {
        let _ = std::fs::remove_dir_all(&dir);
        return Err(failure);
    }
    std::fs::write(dir.join(".installed"), env!("CARGO_PKG_VERSION"))
        .map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let _ = writeln!(
        progress,
        "gatehouse: installed the {} toolchain",
        lang.language()
    );
    Ok(dir)
}

/// `npm ci` in `dir`: exactly the locked packages.
fn install_js(dir: &Path) -> Result<(), Failure> {
    need(
        "node",
        "the JavaScript SDK needs Node.js 20 or later: install it (Debian: apt-get install \
         nodejs npm; or https://nodejs.org), then build again",
    )?;
    need(
        "npm",
        "install npm (Debian: apt-get install npm), then build again",
    )?;
    run(
        Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .env("npm_config_update_notifier", "false")
            .current_dir(dir),
        "npm ci",
    )
}

/// A virtual environment in `dir/.venv`, with the pinned componentize-py.
fn install_python(dir: &Path) -> Result<(), Failure> {
    need(
        "python3",
        "the Python SDK needs Python 3.10 or later with venv: install it (Debian: apt-get \
         install python3 python3-venv), then build again",
    )?;
    run(
        Command::new("python3")
            .args(["-m", "venv", ".venv"])
            .current_dir(dir),
        "python3 -m venv (Debian: apt-get install python3-venv)",
    )?;
    run(
        Command::new(dir.join(".venv/bin/pip"))
            .args([
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "-r",
                "requirements.txt",
            ])
            .current_dir(dir),
        "pip install -r requirements.txt",
    )
}

/// Fails, saying `what` to do, when `program` does not run.
pub fn need(program: &str, what: &str) -> Result<(), Failure> {
    match Command::new(program)
        .arg("--version")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
    {
        Ok(_) => Ok(()),
        Err(_) => Err(usage(format!("`{program}` is not installed: {what}"))),
    }
}

/// Runs `command`, its output passed through; fails naming `what` when it fails.
pub fn run(command: &mut Command, what: &str) -> Result<(), Failure> {
    let status = command
        .status()
        .map_err(|e| usage(format!("{what}: cannot run it: {e}")))?;
    if status.success() {
        Ok(())
    } else {
        Err(usage(format!(
            "{what} failed ({status}); its output is above"
        )))
    }
}

/// `$XDG_CACHE_HOME/gatehouse/sdk`, else `~/.cache/gatehouse/sdk`.
fn cache_root() -> Result<PathBuf, Failure> {
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .ok_or_else(|| {
            usage("neither XDG_CACHE_HOME nor HOME is set: set one, for the SDK's toolchain")
        })?;
    Ok(cache.join("gatehouse").join("sdk"))
}

/// 12 hex digits of SHA-256 over every carried SDK file, name and content.
fn digest() -> String {
    let mut hash = sha2::Sha256::new();
    for (path, bytes) in embedded::JS.iter().chain(embedded::PY) {
        hash.update(path.as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    }
    hex::encode(&hash.finalize()[..6])
}

/// Writes `files` under `dir`, but those `skip` names.
fn write_files(
    dir: &Path,
    files: &[(&str, &[u8])],
    skip: impl Fn(&str) -> bool,
) -> Result<(), Failure> {
    for (path, bytes) in files.iter().filter(|(path, _)| !skip(path)) {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| usage(format!("{}: {e}", parent.display())))?;
        }
        std::fs::write(&target, bytes).map_err(|e| usage(format!("{}: {e}", target.display())))?;
    }
    Ok(())
}

/// The Rust SDK's `Cargo.toml` on its own: each field and dependency it inherits from the
/// workspace written out, its lints (the workspace's) left out.
fn rust_manifest() -> Result<String, String> {
    let carried = embedded::RUST
        .iter()
        .find(|(path, _)| *path == "Cargo.toml")
        .map(|(_, bytes)| String::from_utf8_lossy(bytes).into_owned())
        .ok_or("the binary carries no Rust SDK manifest")?;
    let mut manifest: toml::Table = toml::from_str(&carried).map_err(|e| e.to_string())?;
    let workspace: toml::Table = toml::from_str(WORKSPACE_MANIFEST).map_err(|e| e.to_string())?;
    let inherited = |section: &str| {
        workspace
            .get("workspace")
            .and_then(|w| w.get(section))
            .and_then(toml::Value::as_table)
            .cloned()
            .unwrap_or_default()
    };
    let (package_fields, dependencies) = (inherited("package"), inherited("dependencies"));
    let is_inherited = |value: &toml::Value| {
        value
            .get("workspace")
            .and_then(toml::Value::as_bool)
            .unwrap_or(false)
    };
    if let Some(package) = manifest
        .get_mut("package")
        .and_then(toml::Value::as_table_mut)
    {
        for (key, value) in package.iter_mut() {
            if is_inherited(value) {
                *value = package_fields
                    .get(key)
                    .cloned()
                    .ok_or_else(|| format!("the workspace has no package.{key}"))?;
            }
        }
    }
    for section in ["dependencies", "dev-dependencies"] {
        let Some(table) = manifest
            .get_mut(section)
            .and_then(toml::Value::as_table_mut)
        else {
            continue;
        };
        for (name, value) in table.iter_mut() {
            if !is_inherited(value) {
                continue;
            }
            let mut resolved = match dependencies.get(name) {
                Some(toml::Value::String(version)) => {
                    let mut spec = toml::Table::new();
                    spec.insert("version".to_owned(), toml::Value::String(version.clone()));
                    spec
                }
                Some(toml::Value::Table(spec)) => spec.clone(),
                _ => return Err(format!("the workspace has no dependency `{name}`")),
            };
            let local = value.as_table().cloned().unwrap_or_default();
            for (key, extra) in local {
                if key == "workspace" {
                    continue;
                }
                if key == "features"
                    && let (Some(toml::Value::Array(have)), toml::Value::Array(more)) =
                        (resolved.get_mut("features"), &extra)
                {
                    have.extend(more.iter().cloned());
                    continue;
                }
                resolved.insert(key, extra);
            }
            *value = toml::Value::Table(resolved);
        }
    }
    manifest.remove("lints");
    // `[package]` first, as people write it.
    let mut package = toml::Table::new();
    if let Some(fields) = manifest.remove("package") {
        package.insert("package".to_owned(), fields);
    }
    let head = toml::to_string(&package).map_err(|e| e.to_string())?;
    let rest = toml::to_string(&manifest).map_err(|e| e.to_string())?;
    Ok(format!(
        "# The gatehouse Rust SDK {}, as the `gatehouse` binary carries it (`gatehouse new`).\n\n{head}\n{rest}",
        env!("CARGO_PKG_VERSION")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rust_sdk_manifest_stands_alone() {
        let text = rust_manifest().unwrap();
        let manifest: toml::Table = toml::from_str(&text).unwrap();
        assert!(!text.contains("workspace"), "{text}");
        assert_eq!(
            manifest["package"]["version"].as_str(),
            Some(env!("CARGO_PKG_VERSION"))
        );
        assert_eq!(manifest["package"]["edition"].as_str(), Some("2024"));
        let wit_bindgen = &manifest["dependencies"]["wit-bindgen"];
        assert!(wit_bindgen.get("version").is_some(), "{text}");
        assert_eq!(
            manifest["dependencies"]["jsonschema"]["optional"].as_bool(),
            Some(true)
        );
        assert!(manifest.get("lints").is_none());
    }

    #[test]
    fn every_sdk_carries_its_contract_and_licence() {
        for files in [embedded::RUST, embedded::JS, embedded::PY] {
            let names: Vec<&str> = files.iter().map(|(p, _)| *p).collect();
            assert!(names.contains(&"wit/gatehouse.wit"), "{names:?}");
            assert!(names.contains(&"LICENSE"), "{names:?}");
            assert!(names.contains(&"README.md"), "{names:?}");
            assert!(
                !names
                    .iter()
                    .any(|n| n.contains("node_modules") || n.contains(".venv"))
            );
        }
    }
}

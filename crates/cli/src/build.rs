//! `gatehouse build`: a plugin project, whatever its language, compiled to a component for
//! wasm32-wasip2, packed with its `manifest.toml` and signed with its development key.
//!
//! The language is the project's: `Cargo.toml` (Rust: `cargo build --release --target
//! wasm32-wasip2`), `src/app.py` (Python: the SDK's `build.py`, componentize-py), `index.ts`
//! or `index.js` (JavaScript: the SDK's `build.mjs`, componentize-js). The JavaScript and
//! Python SDKs and their toolchains come from the per-user cache ([`crate::sdks`]), installed
//! on first use, unless `--sdk` (or `GATEHOUSE_SDK_JS`, `GATEHOUSE_SDK_PY`) names a checkout's.
//! The toolchain's own output passes through as it comes. Then `gatehouse pack`'s checks and
//! signing run, and the command says what to run next.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use gatehouse_host::plugin::manifest::{Manifest, PluginKind};

use crate::exit::{Failure, usage};
use crate::sdks::{self, Cached};

// The command's `about` is the `Build` variant's doc comment.
#[derive(Debug, clap::Args)]
pub(super) struct BuildArgs {
    /// The project's directory (holding manifest.toml). Default: the current directory.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The secret key to sign with. Default: the one key in the project's keys/ (the
    /// development key `gatehouse new` wrote).
    #[arg(long)]
    key: Option<PathBuf>,
    /// JavaScript and Python: a gatehouse checkout's SDK (sdk-js/ or sdk-py/, its toolchain
    /// installed by build-support/toolchains) instead of the one this binary carries.
    #[arg(long, value_name = "PATH")]
    sdk: Option<PathBuf>,
    /// Where to write the signed component. Default: NAME.signed.wasm in the project.
    #[arg(short, long)]
    out: Option<PathBuf>,
}

/// A project's language, by the file that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Rust,
    Js(&'static str),
    Python,
}

pub(super) fn build(args: &BuildArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    let dir = &args.dir;
    let manifest_path = dir.join("manifest.toml");
    if !manifest_path.is_file() {
        return Err(usage(format!(
            "{} has no manifest.toml: run `gatehouse build` in a plugin project (`gatehouse \
             new` makes one), or pass --dir",
            dir.display()
        )));
    }
    let manifest = Manifest::from_file(&manifest_path).map_err(usage)?;
    let name = manifest
        .id()
        .split_once('.')
        .map_or(manifest.id(), |(_, name)| name)
        .to_owned();
    let language = if dir.join("Cargo.toml").is_file() {
        Language::Rust
    } else if dir.join("src/app.py").is_file() {
        Language::Python
    } else if let Some(source) = ["index.ts", "index.js"]
        .into_iter()
        .find(|s| dir.join(s).is_file())
    {
        Language::Js(source)
    } else {
        return Err(usage(format!(
            "{}: no Cargo.toml (Rust), src/app.py (Python) or index.js/index.ts \
             (JavaScript) says what to build",
            dir.display()
        )));
    };
    let key = match &args.key {
        Some(key) => key.clone(),
        None => development_key(dir)?,
    };
    let kind = manifest.kind();
    say!(out, "building {kind} `{}` ({language:?})...", manifest.id());
    let _ = out.flush();
    let wasm = match language {
        Language::Rust => build_rust(dir)?,
        Language::Js(source) => {
            let sdk = sdk_dir(args.sdk.as_deref(), Cached::Js, "GATEHOUSE_SDK_JS", out)?;
            let wasm = dir.join(format!("{name}.wasm"));
            sdks::run(
                Command::new("node")
                    .arg(sdk.join("build.mjs"))
                    .arg(dir.join(source))
                    .args(["--world", world(kind), "--out"])
                    .arg(&wasm),
                "the JavaScript build (componentize-js)",
            )?;
            wasm
        }
        Language::Python => {
            let sdk = sdk_dir(args.sdk.as_deref(), Cached::Python, "GATEHOUSE_SDK_PY", out)?;
            let wasm = dir.join(format!("{name}.wasm"));
            sdks::run(
                Command::new(sdk.join(".venv/bin/python"))
                    .arg(sdk.join("build.py"))
                    .arg(dir.join("src/app.py"))
                    .args(["--world", world(kind), "--out"])
                    .arg(&wasm)
                    .env("PYTHONDONTWRITEBYTECODE", "1"),
                "the Python build (componentize-py)",
            )?;
            wasm
        }
    };
    let signed = args
        .out
        .clone()
        .unwrap_or_else(|| dir.join(format!("{name}.signed.wasm")));
    crate::pack(&wasm, &manifest_path, &key, Some(signed.clone()), out)?;
    let shown = signed
        .strip_prefix(dir)
        .unwrap_or(&signed)
        .display()
        .to_string();
    say!(out, "next:");
    match &manifest {
        Manifest::Adapter(adapter) => {
            if let Some(capability) = adapter.capabilities.first() {
                say!(
                    out,
                    "  gatehouse call --config gatehouse.toml {shown} {} '{{...}}'",
                    capability.id
                );
            }
            say!(
                out,
                "  gatehouse serve --config gatehouse.toml --adapter {shown}"
            );
        }
        Manifest::Policy(_) => {
            say!(
                out,
                "  gatehouse call --config gatehouse.toml {shown} ADAPTER.CAPABILITY '{{...}}' --class act"
            );
            say!(
                out,
                "  gatehouse call --config gatehouse.toml --policy {shown} ADAPTER.signed.wasm CAPABILITY '{{...}}'"
            );
        }
    }
    Ok(0)
}

fn world(kind: PluginKind) -> &'static str {
    match kind {
        PluginKind::Adapter => "adapter",
        PluginKind::Policy => "policy",
    }
}

/// The one `*.secret.toml` in the project's `keys/`.
fn development_key(dir: &Path) -> Result<PathBuf, Failure> {
    let keys = dir.join("keys");
    let found: Vec<PathBuf> = std::fs::read_dir(&keys)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.to_string_lossy().ends_with(".secret.toml"))
                .collect()
        })
        .unwrap_or_default();
    match found.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(usage(format!(
            "no secret key in {} to sign with: pass --key (`gatehouse keygen` makes one)",
            keys.display()
        ))),
        _ => Err(usage(format!(
            "{} holds {} secret keys: pass --key to say which signs",
            keys.display(),
            found.len()
        ))),
    }
}

/// The SDK to build with: `--sdk`, the environment's, or the cache's (installed now if need
/// be).
fn sdk_dir(
    given: Option<&Path>,
    lang: Cached,
    env: &str,
    out: &mut dyn Write,
) -> Result<PathBuf, Failure> {
    let given = given
        .map(Path::to_owned)
        .or_else(|| std::env::var_os(env).map(PathBuf::from));
    match given {
        Some(dir) if sdks::is_checkout(lang, &dir) => Ok(dir),
        Some(dir) => Err(usage(format!(
            "{}: not a gatehouse SDK of this language (--sdk or {env})",
            dir.display()
        ))),
        None => sdks::installed(lang, out),
    }
}

/// `cargo build --release --target wasm32-wasip2` in `dir`: the component's path.
fn build_rust(dir: &Path) -> Result<PathBuf, Failure> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let cargo = cargo.to_string_lossy().into_owned();
    sdks::need(
        &cargo,
        "install Rust (https://rustup.rs), then `rustup target add wasm32-wasip2`",
    )?;
    if let Ok(listed) = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .current_dir(dir)
        .output()
        && listed.status.success()
        && !String::from_utf8_lossy(&listed.stdout)
            .lines()
            .any(|t| t.trim() == "wasm32-wasip2")
    {
        return Err(usage(
            "the wasm32-wasip2 target is not installed: run `rustup target add wasm32-wasip2`",
        ));
    }
    sdks::run(
        Command::new(&cargo)
            .args(["build", "--release", "--target", "wasm32-wasip2"])
            .current_dir(dir),
        "cargo build --release --target wasm32-wasip2",
    )?;
    let metadata = Command::new(&cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .current_dir(dir)
        .output()
        .map_err(|e| usage(format!("cargo metadata: {e}")))?;
    let metadata: serde_json::Value = serde_json::from_slice(&metadata.stdout)
        .map_err(|e| usage(format!("cargo metadata: {e}")))?;
    let manifest = std::path::absolute(dir.join("Cargo.toml"))
        .map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let package = metadata["packages"]
        .as_array()
        .and_then(|packages| {
            packages.iter().find(|p| {
                p["manifest_path"]
                    .as_str()
                    .is_some_and(|m| Path::new(m) == manifest)
            })
        })
        .ok_or_else(|| usage("cargo metadata names no package for this Cargo.toml"))?;
    let lib = package["targets"]
        .as_array()
        .and_then(|targets| {
            targets.iter().find(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "cdylib"))
            })
        })
        .and_then(|t| t["name"].as_str())
        .ok_or_else(|| {
            usage("Cargo.toml has no `cdylib` library: a plugin is `crate-type = [\"cdylib\"]`")
        })?;
    let target = metadata["target_directory"]
        .as_str()
        .ok_or_else(|| usage("cargo metadata names no target directory"))?;
    Ok(Path::new(target)
        .join("wasm32-wasip2/release")
        .join(format!("{}.wasm", lib.replace('-', "_"))))
}

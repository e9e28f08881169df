//! Builds gatehouse plugin components from source, for build scripts.
//!
//! Test and demo components are never checked in as binaries: a build script calls
//! [`build_components`], which runs a nested `cargo build --target wasm32-wasip2` for the
//! named workspace packages and returns the paths of the resulting `.wasm` components.
//!
//! The nested cargo gets its own target directory (sharing the outer one would deadlock on
//! its lock), runs the same `$CARGO` as the outer build, and does not inherit the outer
//! build's `RUSTFLAGS`/wrappers (they are for the host target).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The target plugins are built for.
pub const TARGET: &str = "wasm32-wasip2";
/// The cargo profile plugins are built with (defined in the workspace Cargo.toml).
pub const PROFILE: &str = "plugin";

/// A workspace package to build as a component.
#[derive(Debug, Clone, Copy)]
pub struct Package<'a> {
    /// Package name, e.g. `echo`.
    pub name: &'a str,
    /// Its directory relative to the workspace root, e.g. `plugins/echo`.
    pub dir: &'a str,
}

/// A built component.
#[derive(Debug, Clone)]
pub struct Built {
    /// Package name.
    pub name: String,
    /// The `.wasm` component.
    pub wasm: PathBuf,
    /// The package's `manifest.toml`.
    pub manifest: PathBuf,
}

/// A `cargo` command to run from a build script or a test: the same `$CARGO` as the outer
/// build, its own `target_dir` (sharing the outer one would deadlock on its lock), and none of
/// the outer build's `RUSTFLAGS` or wrappers (they are for the host target).
pub fn nested_cargo(target_dir: &Path) -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.env("CARGO_TARGET_DIR", target_dir);
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "CARGO_BUILD_TARGET",
    ] {
        command.env_remove(var);
    }
    command
}

/// Builds `packages` of the workspace at `workspace_root` for wasm32-wasip2 and tells cargo to
/// rerun the build script when their sources, the SDK or the WIT contract change.
///
/// # Panics
/// If the nested build fails: a build script has no better way to report it. The message
/// includes the fix for the most common cause (the wasm target not installed).
pub fn build_components(workspace_root: &Path, packages: &[Package<'_>]) -> Vec<Built> {
    // `crates/cedar` is compiled into `plugins/cedar`, `crates/guardrails` into `plugins/secrets`.
    for watched in [
        "wit",
        "sdk",
        "crates/cedar",
        "crates/guardrails",
        "Cargo.lock",
        "Cargo.toml",
    ] {
        println!(
            "cargo:rerun-if-changed={}",
            workspace_root.join(watched).display()
        );
    }
    for package in packages {
        println!(
            "cargo:rerun-if-changed={}",
            workspace_root.join(package.dir).display()
        );
    }
    let target_dir = workspace_root.join("target").join("components");
    let mut command = nested_cargo(&target_dir);
    command
        .arg("build")
        .arg("--manifest-path")
        .arg(workspace_root.join("Cargo.toml"))
        .args(["--target", TARGET, "--profile", PROFILE]);
    for package in packages {
        command.args(["-p", package.name]);
    }
    let status = command
        .status()
        .unwrap_or_else(|e| panic!("cannot run cargo to build plugin components: {e}"));
    assert!(
        status.success(),
        "building plugin components for {TARGET} failed (see the output above). If the target is \
         missing, install it with `rustup target add {TARGET}`."
    );
    packages
        .iter()
        .map(|package| {
            let wasm = target_dir
                .join(TARGET)
                .join(PROFILE)
                .join(format!("{}.wasm", package.name.replace('-', "_")));
            assert!(
                wasm.exists(),
                "cargo built {} but {} is missing",
                package.name,
                wasm.display()
            );
            Built {
                name: package.name.to_owned(),
                wasm,
                manifest: workspace_root.join(package.dir).join("manifest.toml"),
            }
        })
        .collect()
}

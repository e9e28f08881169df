//! `gatehouse new adapter|policy NAME`: a plugin project that builds, tests, packs and serves.
//!
//! The templates are files under `cli/new/`, filled in by plain `{{placeholder}}` replacement.
//! Every project gets its manifest, its code with unit tests that check the two agree, a build
//! script that packs and signs, a development key pair, and a `gatehouse.toml` trusting that
//! key for the plugin's id only.

use std::io::Write;
use std::path::{Path, PathBuf};

use super::{Failure, usage};
use crate::config::toml_path;
use crate::plugin::signature::SigningKey;
use crate::secret::write_private;

// The command's `about` is the `New` variant's doc comment.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes, into DIR (default ./NAME, which must be absent or empty):\n  \
    manifest.toml    the plugin's id (PUBLISHER.NAME), and its capabilities or config schema\n  \
    src/lib.rs       (Rust) the plugin, with unit tests checking the manifest against the code\n  \
    Cargo.toml       (Rust) a cdylib depending on gatehouse-sdk\n  \
    build.sh         build for wasm32-wasip2, then `gatehouse pack`: NAME.signed.wasm\n  \
    keys/            a development key pair, PUBLISHER-NAME-dev (the secret is git-ignored)\n  \
    gatehouse.toml   a config trusting that key for the plugin only, that serves it\n  \
    README.md        the commands to test, build, call and serve it"
)]
pub(super) struct NewArgs {
    /// What to make.
    #[arg(value_enum)]
    kind: Kind,
    /// The plugin's name: 1-40 of [a-z0-9-], starting with a letter. Its id is PUBLISHER.NAME.
    name: String,
    /// The language to write it in.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
    /// The directory to write the project to. Default: ./NAME.
    #[arg(long)]
    dir: Option<PathBuf>,
    /// The publisher segment of the plugin id, and of the development key's id.
    #[arg(long, default_value = "local")]
    publisher: String,
    /// (Rust) A checkout's `sdk/` directory to depend on by path. Without it, the project
    /// depends on gatehouse-sdk by version, which needs the crate published to your registry.
    #[arg(long, value_name = "PATH")]
    sdk: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    /// A tool provider (world `adapter`).
    Adapter,
    /// A policy module (world `policy`).
    Policy,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Adapter => "adapter",
            Kind::Policy => "policy",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Lang {
    /// Rust, with the gatehouse-sdk crate.
    Rust,
}

/// A project file: its path in the project and its template text.
type File = (&'static str, &'static str);

const RUST_COMMON: &[File] = &[
    ("Cargo.toml", include_str!("new/rust/Cargo.toml")),
    ("build.sh", include_str!("new/rust/build.sh")),
    ("README.md", include_str!("new/rust/README.md")),
    (".gitignore", include_str!("new/common/gitignore")),
];

const RUST_ADAPTER: &[File] = &[
    (
        "manifest.toml",
        include_str!("new/common/adapter.manifest.toml"),
    ),
    ("src/lib.rs", include_str!("new/rust/adapter/lib.rs")),
    (
        "gatehouse.toml",
        include_str!("new/common/adapter.gatehouse.toml"),
    ),
];

const RUST_POLICY: &[File] = &[
    (
        "manifest.toml",
        include_str!("new/common/policy.manifest.toml"),
    ),
    ("src/lib.rs", include_str!("new/rust/policy/lib.rs")),
    (
        "gatehouse.toml",
        include_str!("new/common/policy.gatehouse.toml"),
    ),
];

/// What a project's README says to run after building it.
fn try_it(kind: Kind) -> &'static str {
    match kind {
        Kind::Adapter => {
            "gatehouse call --config gatehouse.toml {{name}}.signed.wasm greet '{\"name\":\"Ada\"}'\n\
             gatehouse serve --config gatehouse.toml --adapter {{name}}.signed.wasm\n\
             # MCP clients: http://127.0.0.1:8787/mcp, tool `{{id}}.greet`"
        }
        Kind::Policy => {
            "# bind it to an adapter of yours: trust that adapter's key in gatehouse.toml, then\n\
             gatehouse serve --config gatehouse.toml --policy {{name}}.signed.wasm --adapter YOUR.signed.wasm"
        }
    }
}

/// Checks a plugin name or publisher: a segment of a plugin id that is also a crate name.
fn check_segment(what: &str, value: &str) -> Result<(), Failure> {
    let mut chars = value.chars();
    let ok = chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && value.len() <= 40;
    if ok {
        Ok(())
    } else {
        Err(usage(format!(
            "{what} `{value}` must be 1-40 of [a-z0-9-], starting with a letter, e.g. `orders`: \
             it becomes a segment of the plugin id and the crate name"
        )))
    }
}

pub(super) fn new(args: &NewArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    check_segment("NAME", &args.name)?;
    check_segment("--publisher", &args.publisher)?;
    let dir = args
        .dir
        .clone()
        .unwrap_or_else(|| PathBuf::from(&args.name));
    if std::fs::read_dir(&dir).is_ok_and(|mut entries| entries.next().is_some()) {
        return Err(usage(format!(
            "{} exists and is not empty; pass --dir with a new or empty directory",
            dir.display()
        )));
    }
    let sdk = match &args.sdk {
        Some(path) => Some(sdk_path(path)?),
        None => None,
    };
    let id = format!("{}.{}", args.publisher, args.name);
    let key = SigningKey::generate(&format!("{}-{}-dev", args.publisher, args.name))
        .map_err(|e| usage(format!("cannot create the development key: {e}")))?;
    let absolute =
        std::path::absolute(&dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let (dependency, dev_dependency) = sdk_dependencies(sdk.as_deref());
    let fill = |template: &str| {
        template
            .replace("{{try}}", try_it(args.kind))
            .replace("{{sdk_dependency}}", &dependency)
            .replace("{{sdk_dev_dependency}}", &dev_dependency)
            .replace("{{id}}", &id)
            .replace("{{name}}", &args.name)
            .replace("{{crate}}", &args.name.replace('-', "_"))
            .replace("{{kind}}", args.kind.as_str())
            .replace("{{publisher}}", &args.publisher)
            .replace("{{key_id}}", &key.key_id)
            .replace("{{public_key}}", &key.public_key().to_base64())
            .replace("{{store}}", &toml_path(&absolute.join("gatehouse.db")))
    };
    let files = match (args.lang, args.kind) {
        (Lang::Rust, Kind::Adapter) => [RUST_COMMON, RUST_ADAPTER],
        (Lang::Rust, Kind::Policy) => [RUST_COMMON, RUST_POLICY],
    };
    let io = |path: &Path, e: std::io::Error| usage(format!("{}: {e}", path.display()));
    for &(name, template) in files.into_iter().flatten() {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
        }
        std::fs::write(&path, fill(template)).map_err(|e| io(&path, e))?;
    }
    let keys = dir.join("keys");
    std::fs::create_dir_all(&keys).map_err(|e| io(&keys, e))?;
    let secret = keys.join(format!("{}.secret.toml", key.key_id));
    write_private(&secret, key.to_toml().as_bytes()).map_err(|e| io(&secret, e))?;
    let public = keys.join(format!("{}.pub.toml", key.key_id));
    std::fs::write(&public, key.public_key().to_toml()).map_err(|e| io(&public, e))?;

    say!(
        out,
        "wrote {} `{id}` (Rust) to {}",
        args.kind.as_str(),
        dir.display()
    );
    if sdk.is_none() {
        say!(
            out,
            "Cargo.toml depends on gatehouse-sdk {}, by version: pass --sdk PATH (a checkout's \
             sdk/) to depend on it by path instead",
            env!("CARGO_PKG_VERSION")
        );
    }
    say!(out, "next, in {}:", dir.display());
    say!(out, "  rustup target add wasm32-wasip2");
    say!(out, "  cargo test");
    say!(out, "  sh build.sh");
    for line in fill(try_it(args.kind)).lines() {
        say!(out, "  {line}");
    }
    Ok(0)
}

/// `--sdk PATH`, checked to be the gatehouse-sdk crate, as an absolute path.
fn sdk_path(path: &Path) -> Result<PathBuf, Failure> {
    let manifest = path.join("Cargo.toml");
    let is_sdk = std::fs::read_to_string(&manifest)
        .is_ok_and(|text| text.contains("name = \"gatehouse-sdk\""));
    if !is_sdk {
        return Err(usage(format!(
            "--sdk {}: not the gatehouse-sdk crate (no {} naming it); pass the `sdk/` directory \
             of a gatehouse checkout",
            path.display(),
            manifest.display()
        )));
    }
    std::path::absolute(path).map_err(|e| usage(format!("{}: {e}", path.display())))
}

/// The `[dependencies]` and `[dev-dependencies]` lines for the SDK: by path with `--sdk`,
/// else by this gatehouse's version.
fn sdk_dependencies(sdk: Option<&Path>) -> (String, String) {
    match sdk {
        Some(path) => {
            let path = toml_path(path);
            (
                format!("gatehouse-sdk = {{ path = \"{path}\" }}"),
                format!("gatehouse-sdk = {{ path = \"{path}\", features = [\"testing\"] }}"),
            )
        }
        None => {
            let version = env!("CARGO_PKG_VERSION");
            (
                format!(
                    "# By version: needs the crate in your registry. With a gatehouse checkout,\n\
                     # use `{{ path = \"<checkout>/sdk\" }}` here and below instead.\n\
                     gatehouse-sdk = \"{version}\""
                ),
                format!("gatehouse-sdk = {{ version = \"{version}\", features = [\"testing\"] }}"),
            )
        }
    }
}

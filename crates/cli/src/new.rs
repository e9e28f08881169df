//! `gatehouse new adapter|policy NAME`: a plugin project that builds, tests, packs and serves.
//!
//! The templates are files under `cli/new/`, filled in by plain `{{placeholder}}` replacement:
//! `common/` for every language (the manifests, the configs), `rust/`, `js/` and `py/` for the
//! code and its build. Every project gets its manifest, its code, a test (Rust: unit tests that
//! check the manifest against the code; JavaScript and Python: `test.sh`, which builds the
//! component and checks its answer through gatehouse), a build script that packs and signs, a
//! development key pair, and a `gatehouse.toml` trusting that key for the plugin's id only.

use std::io::Write;
use std::path::{Path, PathBuf};

use gatehouse_core::secret::write_private;
use gatehouse_host::plugin::signature::SigningKey;

use crate::config::toml_path;
use crate::exit::{Failure, usage};

// The command's `about` is the `New` variant's doc comment.
#[derive(Debug, clap::Args)]
#[command(
    after_help = "Writes, into DIR (default ./NAME, which must be absent or empty):\n  \
    manifest.toml    the plugin's id (PUBLISHER.NAME), and its capabilities or config schema\n  \
    src/lib.rs       (rust) the plugin, with unit tests checking the manifest against the code\n  \
    Cargo.toml       (rust) a cdylib depending on gatehouse-sdk, by path\n  \
    vendor/          (rust) the gatehouse-sdk crate this binary carries\n  \
    index.js         (js) the plugin, built with the JavaScript SDK (componentize-js)\n  \
    src/app.py       (python) the plugin, built with the Python SDK (componentize-py)\n  \
    test.sh          (js, python) `gatehouse build`, then verify and call it through gatehouse\n  \
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
    /// The SDK in a gatehouse checkout, instead of the one this binary carries: `sdk/`
    /// (rust: depend on it by path), `sdk-js/` or `sdk-py/` (js, python: `gatehouse build
    /// --sdk` builds with it and its installed toolchain).
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
    /// JavaScript, with the JavaScript SDK (sdk-js, componentize-js).
    Js,
    /// Python, with the Python SDK (sdk-py, componentize-py).
    Python,
}

/// What the templates and messages say about a language.
struct Facts {
    /// Its name, e.g. `JavaScript`.
    language: &'static str,
    /// The `--lang` value.
    lang: &'static str,
    /// The SDK's directory in a checkout.
    sdk_dir: &'static str,
    /// The file `--sdk` must hold.
    marker: &'static str,
    /// The variable `gatehouse build` reads a checkout SDK's path from (JavaScript, Python).
    sdk_env: &'static str,
    /// The plugin's source file.
    source: &'static str,
}

impl Lang {
    fn facts(self) -> Facts {
        let (language, lang, sdk_dir, marker, sdk_env, source) = match self {
            Lang::Rust => ("Rust", "rust", "sdk", "Cargo.toml", "", "src/lib.rs"),
            Lang::Js => (
                "JavaScript",
                "js",
                "sdk-js",
                "build.mjs",
                "GATEHOUSE_SDK_JS",
                "index.js",
            ),
            Lang::Python => (
                "Python",
                "python",
                "sdk-py",
                "build.py",
                "GATEHOUSE_SDK_PY",
                "src/app.py",
            ),
        };
        Facts {
            language,
            lang,
            sdk_dir,
            marker,
            sdk_env,
            source,
        }
    }
}

/// Where a Rust project gets the SDK this binary carries.
const VENDORED_SDK: &str = "vendor/gatehouse-sdk";

/// A project file: its path in the project and its template text.
type File = (&'static str, &'static str);

const RUST_COMMON: &[File] = &[
    ("Cargo.toml", include_str!("../templates/rust/Cargo.toml")),
    ("README.md", include_str!("../templates/rust/README.md")),
    (".gitignore", include_str!("../templates/common/gitignore")),
];

const INTERPRETED_COMMON: &[File] = &[
    ("README.md", include_str!("../templates/common/README.md")),
    ("test.sh", include_str!("../templates/common/test.sh")),
    (".gitignore", include_str!("../templates/common/gitignore")),
];

const ADAPTER: &[File] = &[
    (
        "manifest.toml",
        include_str!("../templates/common/adapter.manifest.toml"),
    ),
    (
        "gatehouse.toml",
        include_str!("../templates/common/adapter.gatehouse.toml"),
    ),
];

const POLICY: &[File] = &[
    (
        "manifest.toml",
        include_str!("../templates/common/policy.manifest.toml"),
    ),
    (
        "gatehouse.toml",
        include_str!("../templates/common/policy.gatehouse.toml"),
    ),
];

/// The project's files for `lang` and `kind`.
fn files(lang: Lang, kind: Kind) -> [&'static [File]; 3] {
    let common = match kind {
        Kind::Adapter => ADAPTER,
        Kind::Policy => POLICY,
    };
    match (lang, kind) {
        (Lang::Rust, Kind::Adapter) => [
            RUST_COMMON,
            common,
            &[(
                "src/lib.rs",
                include_str!("../templates/rust/adapter/lib.rs"),
            )],
        ],
        (Lang::Rust, Kind::Policy) => [
            RUST_COMMON,
            common,
            &[(
                "src/lib.rs",
                include_str!("../templates/rust/policy/lib.rs"),
            )],
        ],
        (Lang::Js, Kind::Adapter) => [
            INTERPRETED_COMMON,
            common,
            &[("index.js", include_str!("../templates/js/adapter/index.js"))],
        ],
        (Lang::Js, Kind::Policy) => [
            INTERPRETED_COMMON,
            common,
            &[("index.js", include_str!("../templates/js/policy/index.js"))],
        ],
        (Lang::Python, Kind::Adapter) => [
            INTERPRETED_COMMON,
            common,
            &[("src/app.py", include_str!("../templates/py/adapter/app.py"))],
        ],
        (Lang::Python, Kind::Policy) => [
            INTERPRETED_COMMON,
            common,
            &[("src/app.py", include_str!("../templates/py/policy/app.py"))],
        ],
    }
}

/// What `test.sh` checks after `gatehouse verify` (its `expect` prints the call's answer when
/// the text is not in it).
fn check(kind: Kind) -> &'static str {
    match kind {
        Kind::Adapter => {
            "expect 'Hello, Ada!' \\\n  \
             gatehouse call --config gatehouse.toml {{name}}.signed.wasm greet '{\"name\":\"Ada\"}'\n\
             echo \"ok: {{id}}.greet answers\""
        }
        Kind::Policy => {
            "expect '\"verdict\": \"allow\"' \\\n  \
             gatehouse call --config gatehouse.toml {{name}}.signed.wasm acme.orders.get_order '{}'\n\
             echo \"ok: {{id}} allows acme.orders.get_order\"\n\
             expect '\"verdict\": \"deny\"' \\\n  \
             gatehouse call --config gatehouse.toml {{name}}.signed.wasm acme.orders.delete_order '{}' --class act\n\
             echo \"ok: {{id}} denies acme.orders.delete_order\""
        }
    }
}

/// What a project's README says to run after building it.
fn try_it(kind: Kind) -> &'static str {
    match kind {
        Kind::Adapter => {
            "gatehouse call --config gatehouse.toml {{name}}.signed.wasm greet '{\"name\":\"Ada\"}'\n\
             gatehouse serve --config gatehouse.toml --adapter {{name}}.signed.wasm\n\
             # MCP clients: http://127.0.0.1:8787/mcp, tool `{{id}}.greet`"
        }
        Kind::Policy => {
            "gatehouse call --config gatehouse.toml {{name}}.signed.wasm acme.orders.delete_order '{}' --class act\n\
             # in front of an adapter of yours: trust that adapter's key in gatehouse.toml, then\n\
             gatehouse call --config gatehouse.toml --policy {{name}}.signed.wasm YOUR.signed.wasm CAPABILITY '{...}'\n\
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
        Some(path) => Some(sdk_path(args.lang, path)?),
        None => None,
    };
    let Facts {
        language,
        lang,
        sdk_env,
        source,
        ..
    } = args.lang.facts();
    let id = format!("{}.{}", args.publisher, args.name);
    let key = SigningKey::generate(&format!("{}-{}-dev", args.publisher, args.name))
        .map_err(|e| usage(format!("cannot create the development key: {e}")))?;
    let absolute =
        std::path::absolute(&dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    let (dependency, dev_dependency) = sdk_dependencies(sdk.as_deref());
    // A checkout's JavaScript or Python SDK is named at each build; a Rust one is in
    // Cargo.toml.
    let build = match (&sdk, args.lang) {
        (Some(path), Lang::Js | Lang::Python) => {
            format!("gatehouse build --sdk {}", path.display())
        }
        _ => "gatehouse build".to_owned(),
    };
    let fill = |template: &str| {
        template
            .replace("{{try}}", try_it(args.kind))
            .replace("{{check}}", check(args.kind))
            .replace("{{language}}", language)
            .replace("{{lang}}", lang)
            .replace("{{build}}", &build)
            .replace("{{sdk_env}}", sdk_env)
            .replace("{{source}}", source)
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
    let io = |path: &Path, e: std::io::Error| usage(format!("{}: {e}", path.display()));
    for &(name, template) in files(args.lang, args.kind).into_iter().flatten() {
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
    if args.lang == Lang::Rust && sdk.is_none() {
        crate::sdks::vendor_rust(&dir.join(VENDORED_SDK))?;
    }

    say!(
        out,
        "wrote {} `{id}` ({language}) to {}",
        args.kind.as_str(),
        dir.display()
    );
    match (args.lang, &sdk) {
        (Lang::Rust, None) => {
            say!(
                out,
                "Cargo.toml depends on gatehouse-sdk {}, vendored into {VENDORED_SDK}",
                env!("CARGO_PKG_VERSION")
            );
        }
        (_, None) => {
            say!(
                out,
                "the first `gatehouse build` installs the {language} SDK and its toolchain into \
                 ~/.cache/gatehouse (once)"
            );
        }
        (_, Some(_)) => {}
    }
    say!(out, "next, in {}:", dir.display());
    if args.lang == Lang::Rust {
        say!(out, "  rustup target add wasm32-wasip2");
        say!(out, "  cargo test");
        say!(out, "  {build}");
    } else {
        say!(
            out,
            "  sh test.sh                 # {build}, then verify and call it"
        );
    }
    for line in fill(try_it(args.kind)).lines() {
        say!(out, "  {line}");
    }
    Ok(0)
}

/// `--sdk PATH`, checked to be `lang`'s SDK, as an absolute path.
fn sdk_path(lang: Lang, path: &Path) -> Result<PathBuf, Failure> {
    let Facts {
        language,
        sdk_dir,
        marker,
        ..
    } = lang.facts();
    let file = path.join(marker);
    let is_sdk = match lang {
        Lang::Rust => std::fs::read_to_string(&file)
            .is_ok_and(|text| text.contains("name = \"gatehouse-sdk\"")),
        Lang::Js | Lang::Python => file.is_file(),
    };
    if !is_sdk {
        return Err(usage(format!(
            "--sdk {}: not the gatehouse {language} SDK (no {}); pass the `{sdk_dir}/` \
             directory of a gatehouse checkout",
            path.display(),
            file.display()
        )));
    }
    std::path::absolute(path).map_err(|e| usage(format!("{}: {e}", path.display())))
}

/// The `[dependencies]` and `[dev-dependencies]` lines for the SDK: by path, to `--sdk` or
/// to the vendored copy.
fn sdk_dependencies(sdk: Option<&Path>) -> (String, String) {
    match sdk {
        Some(path) => {
            let path = toml_path(path);
            (
                format!("gatehouse-sdk = {{ path = \"{path}\" }}"),
                format!("gatehouse-sdk = {{ path = \"{path}\", features = [\"testing\"] }}"),
            )
        }
        None => (
            format!(
                "# The SDK this gatehouse carries ({}), vendored by `gatehouse new`.\n\
                 gatehouse-sdk = {{ path = \"{VENDORED_SDK}\" }}",
                env!("CARGO_PKG_VERSION")
            ),
            format!("gatehouse-sdk = {{ path = \"{VENDORED_SDK}\", features = [\"testing\"] }}"),
        ),
    }
}

//! `gatehouse demo`: the host on its built-in defaults with the first-party plugins.
//!
//! 1. Signs the embedded `echo` and `textkit` components with a throwaway publisher key.
//! 2. Builds a host whose only trusted key is that one, scoped to `gatehouse.*`.
//! 3. Loads both plugins (verify, compile or cache hit, pre-instantiate).
//! 4. Runs a short tour of governed calls, failures included, and shows a tampered copy being
//!    refused.
//! 5. With `--export DIR`, writes the signed plugins, the key pair and a matching operator
//!    config, so `verify`, `inspect`, `call` and `serve` can be tried on them; and the
//!    `conformance` adapter with `conformance.toml`, a config serving it to the MCP
//!    conformance suite; and the governed set, exported and not toured: the write-class
//!    `notes` adapter, the `baseline` and `redact` policy modules (and baseline re-signed as
//!    0.2.0, to swap in), `governed.toml` serving them with approvals, idempotency and the
//!    admin API, its admin token, and a README saying what to run.
//!
//! The `conformance` adapter is signed and exported with the others but neither toured nor
//! served by `serve --demo`: its tools (`test_simple_text`, ...) exist for a test suite, and a
//! new user's tool list stays the useful demo tools.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use gatehouse_core::envelope::ToolCallEnvelope;
use gatehouse_core::envelope::ToolResultEnvelope;
use gatehouse_core::model::{Glob, Tenants};
use gatehouse_host::Host;
use gatehouse_host::HostConfig;
use gatehouse_host::config::AskGrant;
use gatehouse_host::config::PolicyDefault;
use gatehouse_host::config::PublisherConfig;
use gatehouse_host::config::ToolGrant;
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_host::plugin::signature::SigningKey;
use gatehouse_host::plugin::{self, sections};
use gatehouse_host::relay::AskKind;
use serde_json::{Value, json};

/// The first-party plugins, built from source by build.rs: (name, component, manifest).
const PLUGINS: &[(&str, &[u8], &str)] = include!(concat!(env!("OUT_DIR"), "/demo_plugins.rs"));

/// The plugin exported for the MCP conformance suite, not served by the demo.
const CONFORMANCE: &str = "conformance";

/// The plugins exported for `governed.toml`, neither toured nor served by `serve --demo`:
/// they pause calls for an approver, and deny and mask by policy, which a first tour of the
/// tools should not.
const GOVERNED: &[&str] = &["notes", "baseline", "redact"];

/// The version baseline is re-signed as, to show a policy swap on a running gateway.
const SWAP_VERSION: &str = "0.2.0";

/// The exported `governed.toml` and the README walking through it.
const GOVERNED_TOML: &str = include_str!("../demo/governed.toml");
const GOVERNED_README: &str = include_str!("../demo/README.md");

const DEMO_KEY_ID: &str = "gatehouse-demo";
const DEMO_SCOPE: &str = "gatehouse.*";

/// A demo step failed: the embedded plugins did not behave as built. Not a user error.
#[derive(Debug, thiserror::Error)]
#[error("demo: {0}")]
pub struct DemoError(String);

fn scope() -> Glob {
    Glob::new(DEMO_SCOPE).expect("the demo scope is a valid glob")
}

fn fail(e: impl std::fmt::Display) -> DemoError {
    DemoError(e.to_string())
}

/// The demo's parts: a throwaway publisher key, the first-party plugins signed with it, and
/// an operator config trusting that key for `gatehouse.*`, with every demo tool visible to
/// every tenant and no policy bound (the operator default decides: allow).
pub struct Demo {
    /// The throwaway key.
    pub key: SigningKey,
    /// (name, signed component) of each first-party plugin the demo serves.
    pub plugins: Vec<(&'static str, Vec<u8>)>,
    /// The signed `conformance` adapter and its capability ids (exported, not served).
    pub conformance: (Vec<u8>, Vec<String>),
    /// (file stem, signed component) of the plugins `governed.toml` serves and swaps in
    /// (exported, not served).
    pub governed: Vec<(String, Vec<u8>)>,
    /// The matching operator config.
    pub config: HostConfig,
}

/// Signs the embedded plugins with a fresh key and builds the matching config.
pub fn prepare() -> Result<Demo, DemoError> {
    let key = SigningKey::generate(DEMO_KEY_ID).map_err(fail)?;
    let mut plugins = Vec::new();
    let mut conformance = None;
    let mut governed = Vec::new();
    for (name, wasm, manifest) in PLUGINS {
        let mut manifest = Manifest::from_toml(manifest).map_err(fail)?;
        let signed = plugin::pack(wasm, &manifest, &key).map_err(fail)?;
        if GOVERNED.contains(name) {
            governed.push(((*name).to_owned(), signed));
            if let Manifest::Policy(policy) = &mut manifest
                && *name == "baseline"
            {
                policy.version = SWAP_VERSION.to_owned();
                let next = plugin::pack(wasm, &manifest, &key).map_err(fail)?;
                governed.push((format!("{name}-{SWAP_VERSION}"), next));
            }
        } else if *name == CONFORMANCE {
            let Manifest::Adapter(adapter) = &manifest else {
                return Err(DemoError(
                    "the conformance plugin is not an adapter".to_owned(),
                ));
            };
            // Its tools and its prompts, which the suite calls by their bare names.
            let tools = adapter.capabilities.iter().map(|c| c.id.clone());
            let ids = tools
                .chain(adapter.prompts.iter().map(|p| p.id.clone()))
                .collect();
            conformance = Some((signed, ids));
        } else {
            plugins.push((*name, signed));
        }
    }
    let conformance =
        conformance.ok_or_else(|| DemoError("the conformance adapter was not built".to_owned()))?;
    let mut config = HostConfig::default();
    // A real file, so approvals and the audit log survive a restart; apart from an operator's
    // own store.
    config.store.path = Some(config.store.resolved_path().with_file_name("demo.db"));
    config.trust.publishers.push(PublisherConfig {
        key_id: key.key_id.clone(),
        public_key: key.public_key().to_base64(),
        adapters: vec![scope()],
        policies: vec![scope()],
    });
    config.pipeline.policy_default = PolicyDefault::Allow;
    config.pipeline.tools.push(ToolGrant {
        tools: scope(),
        tenants: Tenants::all(),
        arg_constraints: Default::default(),
    });
    Ok(Demo {
        key,
        plugins,
        conformance,
        governed,
        config,
    })
}

/// Runs the demo tour, writing to `out`; with `export`, also writes the demo files there.
pub fn run(export: Option<&Path>, out: &mut dyn Write) -> Result<(), DemoError> {
    let Demo {
        key,
        plugins: signed,
        conformance,
        governed,
        config,
    } = prepare()?;
    let host = Host::new(config.clone()).map_err(fail)?;
    let mut w = Writer(out);
    w.line(format_args!(
        "gatehouse demo: trusting one throwaway key `{DEMO_KEY_ID}` for `{DEMO_SCOPE}`"
    ));

    for (_, bytes) in &signed {
        let started = Instant::now();
        let adapter = host.load_adapter(bytes).map_err(fail)?;
        let cache = adapter.cache().clone();
        let plugin = host.serve_adapter(adapter).map_err(fail)?;
        w.line(format_args!(
            "loaded {} {} ({}) in {} ms, compile cache: {cache:?}",
            plugin.id,
            plugin.version,
            plugin.digest,
            started.elapsed().as_millis(),
        ));
    }

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(fail)?;
    let tour: [(&str, Value); 7] = [
        (
            "gatehouse.echo.echo",
            json!({ "message": "hello from the demo" }),
        ),
        (
            "gatehouse.textkit.word_stats",
            json!({ "text": "Agents propose. Gatehouse decides." }),
        ),
        (
            "gatehouse.textkit.verify_iban",
            json!({ "iban": "DE89 3704 0044 0532 0130 00" }),
        ),
        (
            "gatehouse.textkit.verify_iban",
            json!({ "iban": "not an iban" }),
        ),
        (
            "gatehouse.textkit.render_badge",
            json!({ "label": "policy", "value": "enforced" }),
        ),
        ("gatehouse.echo.echo", json!({ "message": 42 })),
        ("gatehouse.echo.shout", json!({ "message": "no such tool" })),
    ];
    w.line(format_args!("\ngoverned calls (each in a fresh sandbox):"));
    for (index, (tool, args)) in tour.into_iter().enumerate() {
        let envelope =
            runtime.block_on(host.call(ToolCallEnvelope::new("demo", tool, args.clone())));
        w.line(format_args!("  {}", summary(tool, &args, &envelope)));
        if index == 0 {
            let json = serde_json::to_string_pretty(&envelope).map_err(fail)?;
            w.line(format_args!(
                "  full result envelope of the first call:\n{json}"
            ));
        }
    }

    let mut tampered = signed[0].1.clone();
    let list = sections::sections(&tampered).map_err(fail)?;
    let code = list
        .iter()
        .max_by_key(|s| s.range.len())
        .map(|s| s.range.clone())
        .unwrap_or(8..9);
    tampered[code.start + code.len() / 2] ^= 1;
    match host.load_adapter(&tampered) {
        Ok(_) => return Err(DemoError("a tampered component loaded".to_owned())),
        Err(e) => w.line(format_args!(
            "\none flipped bit in echo's code: refused: {e}"
        )),
    }

    if let Some(dir) = export {
        export_files(dir, &key, &signed, &conformance, &config).map_err(fail)?;
        export_governed(dir, &key, &governed).map_err(fail)?;
        w.line(format_args!(
            "\nwrote the signed plugins, the demo key pair, gatehouse.toml, governed.toml, \
             conformance.toml and a README to {}",
            dir.display()
        ));
        w.line(format_args!("try:"));
        w.line(format_args!(
            "  gatehouse inspect {}/echo.signed.wasm",
            dir.display()
        ));
        w.line(format_args!(
            "  gatehouse verify --config {0}/gatehouse.toml {0}/textkit.signed.wasm",
            dir.display()
        ));
        w.line(format_args!(
            "  gatehouse call --config {0}/gatehouse.toml {0}/textkit.signed.wasm word_stats '{{\"text\":\"one two\"}}'",
            dir.display()
        ));
        w.line(format_args!(
            "  gatehouse serve --config {0}/gatehouse.toml --adapter {0}/echo.signed.wasm --adapter {0}/textkit.signed.wasm",
            dir.display()
        ));
        w.line(format_args!(
            "  gatehouse serve --config {0}/governed.toml --adapter {0}/echo.signed.wasm --adapter {0}/textkit.signed.wasm --adapter {0}/notes.signed.wasm --policy {0}/baseline.signed.wasm --policy {0}/redact.signed.wasm   # approvals, idempotency, a policy swap: see README.md",
            dir.display()
        ));
        w.line(format_args!(
            "  gatehouse serve --config {0}/conformance.toml --adapter {0}/conformance.signed.wasm   # for the MCP conformance suite",
            dir.display()
        ));
    }
    Ok(())
}

fn summary(tool: &str, args: &Value, envelope: &ToolResultEnvelope) -> String {
    let status = serde_json::to_value(envelope.status).unwrap_or_default();
    let detail = match (&envelope.structured_content, &envelope.error) {
        (_, Some(error)) => format!("{}: {}", error.code, error.message),
        (Some(structured), None) => structured.to_string(),
        (None, None) => format!("{} content block(s)", envelope.content.len()),
    };
    let fuel = envelope.usage.as_ref().map_or(0, |u| u.fuel_consumed);
    format!(
        "{tool} {args} -> {} {} [{fuel} fuel] {detail}",
        status.as_str().unwrap_or("?"),
        envelope.outcome
    )
}

fn export_files(
    dir: &Path,
    key: &SigningKey,
    signed: &[(&str, Vec<u8>)],
    (conformance, conformance_tools): &(Vec<u8>, Vec<String>),
    config: &HostConfig,
) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (name, bytes) in signed {
        std::fs::write(dir.join(format!("{name}.signed.wasm")), bytes)?;
    }
    std::fs::write(dir.join(format!("{CONFORMANCE}.signed.wasm")), conformance)?;
    std::fs::write(
        dir.join(format!("{DEMO_KEY_ID}.secret.toml")),
        key.to_toml(),
    )?;
    std::fs::write(
        dir.join(format!("{DEMO_KEY_ID}.pub.toml")),
        key.public_key().to_toml(),
    )?;
    let text = toml::to_string_pretty(config).map_err(std::io::Error::other)?;
    std::fs::write(
        dir.join("gatehouse.toml"),
        format!("# gatehouse demo operator config\n{text}"),
    )?;
    std::fs::write(
        dir.join("conformance.toml"),
        conformance_config(dir, conformance_tools, config)?,
    )
}

/// Writes the governed set: its signed plugins, `governed.toml` (the demo key trusted, both
/// policies bound, the admin API admitting a fresh random token, written to `admin.token`),
/// and the README walking through it.
fn export_governed(
    dir: &Path,
    key: &SigningKey,
    governed: &[(String, Vec<u8>)],
) -> std::io::Result<()> {
    for (stem, bytes) in governed {
        std::fs::write(dir.join(format!("{stem}.signed.wasm")), bytes)?;
    }
    let mut token = [0u8; 24];
    getrandom::fill(&mut token).map_err(|e| std::io::Error::other(e.to_string()))?;
    let token_file = dir.join("admin.token");
    let _ = std::fs::remove_file(&token_file);
    gatehouse_core::secret::write_private(&token_file, hex::encode(token).as_bytes())?;
    let absolute = std::path::absolute(dir)?;
    let dir_text = crate::config::toml_path(&absolute);
    let config = GOVERNED_TOML
        .replace("{{dir}}", &dir_text)
        .replace("{{key_id}}", &key.key_id)
        .replace("{{public_key}}", &key.public_key().to_base64());
    std::fs::write(dir.join("governed.toml"), config)?;
    std::fs::write(dir.join("README.md"), GOVERNED_README)
}

/// `gatehouse serve`'s config for the MCP conformance suite: the demo's trust and tool grants,
/// a store of its own in `dir`, callers admitted without a key (the suite sends none), the
/// conformance adapter granted to ask its callers what its scenarios ask (elicitation,
/// sampling, roots: `[[caller.grant]]`), and `[mcp.aliases]` giving each conformance tool and
/// prompt the bare name the suite calls.
fn conformance_config(
    dir: &Path,
    tools: &[String],
    config: &HostConfig,
) -> std::io::Result<String> {
    let mut config = config.clone();
    config.store.path = Some(std::path::absolute(dir)?.join("conformance.db"));
    config.caller.grants.push(AskGrant {
        adapter: Glob::new(&format!("gatehouse.{CONFORMANCE}")).map_err(std::io::Error::other)?,
        ask: vec![AskKind::Elicitation, AskKind::Sampling, AskKind::Roots],
        max_asks: 3,
        max_sampling_tokens: 100,
        ask_timeout_seconds: 60,
    });
    let host = toml::to_string_pretty(&config).map_err(std::io::Error::other)?;
    let aliases: String = tools
        .iter()
        .map(|id| format!("{id} = \"gatehouse.{CONFORMANCE}.{id}\"\n"))
        .collect();
    Ok(format!(
        "# gatehouse serve config for the MCP conformance suite (@modelcontextprotocol/conformance):\n\
         # gatehouse serve --config conformance.toml --adapter conformance.signed.wasm\n\
         {host}\n\
         [mcp]\n\
         listen = \"127.0.0.1:8787\"\n\
         anonymous_tenant = \"default\"\n\n\
         [mcp.aliases]\n\
         {aliases}"
    ))
}

struct Writer<'a>(&'a mut dyn Write);

impl Writer<'_> {
    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        let _ = writeln!(self.0, "{args}");
    }
}

//! `gatehouse policy pack | test`: policies written as Cedar rules (`gatehouse_cedar`).
//!
//! `pack` checks the rules against the tools the config serves (their ids, their arguments'
//! types, annotations gatehouse can carry out) before anything is signed: each problem is
//! printed as `FILE:LINE:COLUMN: message`, the command exits 2 and writes nothing. Then it runs
//! the generic Cedar module this binary carries (`plugins/cedar`) once with the rules, snapshots
//! it with the rules parsed ([`plugin::pre_initialize`]), adds the rules' text as the
//! `gatehouse:cedar` section (what `gatehouse inspect` shows a reviewer), and signs it.
//!
//! `test` runs table tests: each case a call and the verdict it expects.

use std::io::Write;
use std::path::{Path, PathBuf};

use gatehouse_cedar::{Call, Packed, Principal, Rules, Tool, Verdict};
use gatehouse_core::keys::SigningKey;
use gatehouse_host::plugin::manifest::{Manifest, PolicyManifest};
use gatehouse_host::plugin::{self, sections};
use serde::Deserialize;

use crate::config::{ConfigArg, PluginSources, load_config};
use crate::exit::{Failure, refused, usage};
use crate::import::generic::Generic;

/// The custom section that carries the rules' text in a packed module.
pub const RULES_SECTION: &str = "gatehouse:cedar";

/// `gatehouse policy ...`.
#[derive(Debug, clap::Subcommand)]
pub enum PolicyCommand {
    /// Check Cedar rules against the tools the config serves and sign them as a policy module:
    /// the generic Cedar module this binary carries, initialized with the rules. A rule that
    /// names an unknown tool or argument, compares an argument as the wrong type, or can never
    /// apply is an error with its line and column (exit 2, nothing written).
    Pack(PackArgs),
    /// Run table tests of Cedar rules: each `[[case]]` of CASES.toml a call and the verdict
    /// (and optionally the rule, and the approval mode) expected. Exit 1 if any case fails.
    Test(TestArgs),
}

/// Where the tools come from.
#[derive(Debug, clap::Args)]
pub struct ToolArgs {
    /// A signed adapter whose tools the rules may name (repeatable), besides the adapters the
    /// config's `[plugins] adapters` lists.
    #[arg(long = "adapter", value_name = "FILE")]
    adapters: Vec<PathBuf>,
    #[command(flatten)]
    config: ConfigArg,
}

/// `gatehouse policy pack`.
#[derive(Debug, clap::Args)]
pub struct PackArgs {
    /// The rules, in Cedar.
    rules: PathBuf,
    /// The policy module's id, e.g. `acme.refund-rules` (what `[[pipeline.policy]] module`
    /// binds).
    #[arg(long)]
    id: String,
    /// Its version. Default: 0.1.0.
    #[arg(long, default_value = "0.1.0")]
    module_version: String,
    /// Secret key file from `gatehouse keygen`.
    #[arg(long)]
    key: PathBuf,
    /// Output file. Default: <id>.signed.wasm next to the rules.
    #[arg(short, long)]
    output: Option<PathBuf>,
    #[command(flatten)]
    tools: ToolArgs,
}

/// `gatehouse policy test`.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The rules, in Cedar.
    rules: PathBuf,
    /// The cases, in TOML: `[[case]]` tables with `tool`, `args`, `expect` and optionally
    /// `name`, `tenant`, `principal`, `mode`, `now_unix_ms`, `rule`, `effective_mode`.
    cases: PathBuf,
    #[command(flatten)]
    tools: ToolArgs,
}

/// Runs `gatehouse policy`.
pub(crate) fn policy(command: PolicyCommand, out: &mut dyn Write) -> Result<u8, Failure> {
    match command {
        PolicyCommand::Pack(args) => pack(&args, out),
        PolicyCommand::Test(args) => test(&args, out),
    }
}

fn pack(args: &PackArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    let key = SigningKey::from_file(&args.key).map_err(usage)?;
    let (text, tools) = checked(&args.rules, &args.tools)?;
    let count = rules_in(&text);
    let packed = Packed {
        rules: text.clone(),
        tools,
    };
    let file = args.rules.display();
    let manifest = Manifest::Policy(PolicyManifest {
        id: args.id.clone(),
        version: args.module_version.clone(),
        publisher: key.key_id.clone(),
        description: format!(
            "Cedar rules ({count}) from {}, packed with the generic Cedar module",
            args.rules
                .file_name()
                .map_or_else(|| file.to_string(), |n| n.to_string_lossy().into_owned())
        ),
        config_schema: serde_json::json!({ "type": "object", "additionalProperties": false }),
    });
    // A bad id or version is said before the module is initialized.
    manifest.validate().map_err(usage)?;
    let input = serde_json::to_string(&packed).expect("the packed rules serialize");
    say!(
        out,
        "checked {count} rules against {} tools; initializing the Cedar module",
        packed.tools.len()
    );
    let mut component = plugin::pre_initialize(Generic::Cedar.component(), &input)
        .map_err(|e| refused(format!("cannot initialize the Cedar module: {e}")))?;
    sections::append_custom(&mut component, RULES_SECTION, text.as_bytes());
    let signed = plugin::pack(&component, &manifest, &key).map_err(refused)?;
    let output = args.output.clone().unwrap_or_else(|| {
        args.rules
            .with_file_name(format!("{}.signed.wasm", args.id))
    });
    std::fs::write(&output, &signed).map_err(|e| usage(format!("{}: {e}", output.display())))?;
    let digest = plugin::inspect(&signed).map_err(refused)?.digest;
    say!(
        out,
        "packed policy {} {} signed by `{}` -> {} ({digest})",
        args.id,
        args.module_version,
        key.key_id,
        output.display()
    );
    say!(
        out,
        "next: bind it in [[pipeline.policy]] (module = \"{}\"; mode = \"shadow\" to try it \
         on live traffic first) and serve it with --policy {}",
        args.id,
        output.display()
    );
    Ok(0)
}

/// The rules' text and the tools, after [`gatehouse_cedar::check::check`]: every problem as
/// `FILE:LINE:COLUMN: message`, exit 2.
fn checked(path: &Path, args: &ToolArgs) -> Result<(String, Vec<Tool>), Failure> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read {}: {e}", path.display())))?;
    let tools = tools(args)?;
    if let Err(problems) = gatehouse_cedar::check::check(&text, &tools) {
        let mut message = String::new();
        for problem in &problems {
            message.push_str(&format!(
                "{}:{}:{}: {}\n",
                path.display(),
                problem.line,
                problem.column,
                problem.message
            ));
        }
        message.push_str(&format!(
            "{} problem{} in {}; nothing written",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" },
            path.display()
        ));
        return Err(usage(message));
    }
    Ok((text, tools))
}

/// The tools of every adapter `--adapter` names and the config's `[plugins] adapters` lists
/// (files; an `oci://` reference is skipped with a note). Read from their signed manifests.
fn tools(args: &ToolArgs) -> Result<Vec<Tool>, Failure> {
    let config = load_config(&args.config)?;
    let mut files: Vec<PathBuf> = args.adapters.clone();
    for source in PluginSources::resolve(&config.plugins.adapters, args.config.config.as_deref()) {
        if gatehouse_host::oci::OciRef::is_oci(&source) {
            tracing::warn!(
                "`{source}` in [plugins] adapters is not read for its tools; pull it and pass --adapter FILE"
            );
            continue;
        }
        files.push(PathBuf::from(source));
    }
    let mut tools = Vec::new();
    for file in &files {
        let bytes = std::fs::read(file)
            .map_err(|e| usage(format!("cannot read adapter {}: {e}", file.display())))?;
        let manifest = plugin::inspect(&bytes)
            .map_err(|e| usage(format!("{}: {e}", file.display())))?
            .manifest;
        let Some(Manifest::Adapter(adapter)) = manifest else {
            return Err(usage(format!(
                "{} is not a signed adapter (no adapter manifest in it)",
                file.display()
            )));
        };
        for capability in &adapter.capabilities {
            let hints = capability.annotations.as_ref();
            let annotations = [
                ("read_only", hints.and_then(|a| a.read_only_hint)),
                ("destructive", hints.and_then(|a| a.destructive_hint)),
                ("idempotent", hints.and_then(|a| a.idempotent_hint)),
                ("open_world", hints.and_then(|a| a.open_world_hint)),
            ]
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_owned(), v?)))
            .collect();
            let name = format!("{}.{}", adapter.id, capability.id);
            tools.push(Tool {
                adapter: adapter.id.clone(),
                capability: capability.id.clone(),
                class: capability.capability_class.to_string(),
                max_mode: capability.approval_mode.to_string(),
                input_schema: capability.input_schema.clone(),
                annotations,
                produces: config.host.sessions.produces(&name, capability),
                sends: config.host.sessions.sends(&name, capability),
                name,
            });
        }
    }
    if tools.is_empty() {
        return Err(usage(
            "no tools to check the rules against: name the adapters with --adapter FILE, or \
             list them in the config's [plugins] adapters (--config)",
        ));
    }
    Ok(tools)
}

/// How many rules `text` holds (its statements).
fn rules_in(text: &str) -> usize {
    std::str::FromStr::from_str(text)
        .map_or(0, |set: cedar_policy::PolicySet| set.policies().count())
}

/// One `[[case]]` of a test file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Case {
    /// What it checks. Default: `case N`.
    name: Option<String>,
    /// `<adapter id>.<capability id>`.
    tool: String,
    /// The arguments. Default: `{}`.
    #[serde(default = "empty_object")]
    args: toml::Value,
    /// The tenant. Default: `default`.
    #[serde(default = "default_tenant")]
    tenant: String,
    /// The caller's id. Default: `user:test`.
    #[serde(default = "default_principal")]
    principal: String,
    /// The caller's roles (`principal.roles`). Default: none.
    #[serde(default)]
    roles: Vec<String>,
    /// The caller's groups (`principal.groups`). Default: none.
    #[serde(default)]
    groups: Vec<String>,
    /// The skills resolved for the call (`context.skills`). Default: none.
    #[serde(default)]
    skills: Vec<String>,
    /// The labels the caller's session holds (`context.session.labels`, and
    /// `context.data_classification`). Default: none.
    #[serde(default)]
    labels: Vec<String>,
    /// The tools the session called before, oldest first (`context.session.tools`, and
    /// `context.prior_actions`). Default: none.
    #[serde(default)]
    prior: Vec<String>,
    /// The call's approval mode. Default: the tool's declared maximum.
    mode: Option<String>,
    /// How the call came (`context.protocol`): `mcp`, `a2a` or `direct`. Default: `mcp`.
    #[serde(default = "default_protocol")]
    protocol: String,
    /// The id of the call this one was made on behalf of (`context.delegated_by`); the
    /// principal chain is then `delegator`, then `principal`. Default: none.
    delegated_by: Option<String>,
    /// With `delegated_by`: the delegating call's caller (the chain's first link). Default:
    /// `user:delegator`.
    #[serde(default = "default_delegator")]
    delegator: String,
    /// Host time. Default: 2026-01-05 (a Monday) 12:00 UTC.
    #[serde(default = "default_now")]
    now_unix_ms: u64,
    /// `allow`, `deny`, `require_approval` or `abstain`.
    expect: Verdict,
    /// A rule (`@id`) expected among those that matched.
    rule: Option<String>,
    /// The approval mode a permit is expected to lower the call to.
    effective_mode: Option<String>,
}

fn empty_object() -> toml::Value {
    toml::Value::Table(toml::Table::new())
}
fn default_tenant() -> String {
    "default".to_owned()
}
fn default_protocol() -> String {
    "mcp".to_owned()
}

fn default_delegator() -> String {
    "user:delegator".to_owned()
}

fn default_principal() -> String {
    "user:test".to_owned()
}
fn default_now() -> u64 {
    1_767_614_400_000
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Cases {
    case: Vec<Case>,
}

fn test(args: &TestArgs, out: &mut dyn Write) -> Result<u8, Failure> {
    let (text, tools) = checked(&args.rules, &args.tools)?;
    let cases_text = std::fs::read_to_string(&args.cases)
        .map_err(|e| usage(format!("cannot read {}: {e}", args.cases.display())))?;
    let cases: Cases =
        toml::from_str(&cases_text).map_err(|e| usage(format!("{}: {e}", args.cases.display())))?;
    let rules = Rules::new(&Packed {
        rules: text,
        tools: tools.clone(),
    })
    .map_err(refused)?;
    let mut failed = 0;
    for (n, case) in cases.case.iter().enumerate() {
        let name = case
            .name
            .clone()
            .unwrap_or_else(|| format!("case {}", n + 1));
        let Some(tool) = tools.iter().find(|t| t.name == case.tool) else {
            return Err(usage(format!(
                "{}: case `{name}` calls `{}`, which is not a tool the config serves",
                args.cases.display(),
                case.tool
            )));
        };
        let call = Call {
            tool: tool.name.clone(),
            adapter: tool.adapter.clone(),
            capability: tool.capability.clone(),
            class: tool.class.clone(),
            max_mode: tool.max_mode.clone(),
            mode: case.mode.clone().unwrap_or_else(|| tool.max_mode.clone()),
            args: serde_json::to_value(&case.args).map_err(usage)?,
            tenant: case.tenant.clone(),
            principals: (case.delegated_by.as_ref())
                .map(|_| Principal {
                    kind: "user".to_owned(),
                    id: case.delegator.clone(),
                })
                .into_iter()
                .chain([Principal {
                    kind: if case.delegated_by.is_some() {
                        "agent"
                    } else {
                        "user"
                    }
                    .to_owned(),
                    id: case.principal.clone(),
                }])
                .collect(),
            now_unix_ms: case.now_unix_ms,
            prior_actions: case.prior.clone(),
            data_classification: case.labels.clone(),
            roles: case.roles.clone(),
            groups: case.groups.clone(),
            skills: case.skills.clone(),
            protocol: case.protocol.clone(),
            delegated_by: case.delegated_by.clone(),
        };
        let outcome = rules.decide(&call);
        let matched: Vec<&str> = outcome.reasons.iter().map(|r| r.code.as_str()).collect();
        let mut wrong = Vec::new();
        if outcome.verdict != case.expect {
            wrong.push(format!(
                "expected {}, got {}",
                verdict(case.expect),
                verdict(outcome.verdict)
            ));
        }
        if let Some(rule) = &case.rule
            && !matched.contains(&rule.as_str())
        {
            wrong.push(format!("expected rule `{rule}` to match"));
        }
        if case.effective_mode.is_some() && case.effective_mode != outcome.effective_mode {
            wrong.push(format!(
                "expected approval mode {}, got {}",
                case.effective_mode.as_deref().unwrap_or("-"),
                outcome.effective_mode.as_deref().unwrap_or("none")
            ));
        }
        let rules = if matched.is_empty() {
            "no rule matched".to_owned()
        } else {
            format!("rules: {}", matched.join(", "))
        };
        if wrong.is_empty() {
            say!(out, "ok    {name}: {} ({rules})", verdict(outcome.verdict));
        } else {
            failed += 1;
            say!(out, "FAIL  {name}: {} ({rules})", wrong.join("; "));
        }
    }
    say!(out, "{} passed, {failed} failed", cases.case.len() - failed);
    Ok(u8::from(failed > 0))
}

fn verdict(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Allow => "allow",
        Verdict::Deny => "deny",
        Verdict::RequireApproval => "require_approval",
        Verdict::Abstain => "abstain",
    }
}

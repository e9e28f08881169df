//! `gatehouse import ... --config FILE`: the import merged into the operator's config, so the
//! file serves as it is (`gatehouse serve --config FILE`).
//!
//! What one import adds, each in its own table, so a second import merges beside the first
//! and an import run again replaces its own entries:
//! - `[[trust.publisher]]`: the key that signed the adapter may publish its id (an entry with
//!   the same key id gains the id; one with the same key id but another key is refused);
//! - `[plugins] adapters`: the signed component, relative to the config's folder;
//! - `[[egress.grant]]` and `[[stdio.server]]`: the import's own, replacing earlier ones of the
//!   same adapter; `[stdio] packages_dir` when the import named one (another one already set
//!   is refused);
//! - `[[pipeline.tool]]`: every tenant sees the tools, under a comment listing each tool's
//!   class, approval mode and approval gate.
//!
//! A config the import creates also gets the two choices a fresh gateway needs to answer a
//! call: anonymous callers, on its loopback listener only (`[mcp] anonymous_tenant`), and
//! `[pipeline] policy_default = "allow"`, so each call runs as its reviewed manifest says. An
//! existing config keeps its own: the import adds anonymous callers only when the config admits
//! nobody and listens on loopback, and never changes its policy default; it says what each
//! means for the imported tools instead.
//!
//! The merge is [`toml_edit`]'s, so the operator's comments and layout stay as they are; the
//! merged text must read back as a config before anything is written.

use std::net::SocketAddr;

use gatehouse_core::model::ApprovalMode;
use gatehouse_server::mcp::McpConfig;
use serde::Serialize;
use toml_edit::{ArrayOfTables, DocumentMut, Item, Table, value};

use super::output::asks_comment;
use super::{Import, ImportError};
use crate::config::ServeConfig;

/// The tenant anonymous callers run as in a config an import creates.
pub const ANONYMOUS_TENANT: &str = "default";

/// What to merge besides the import: who signed it and where its component is.
#[derive(Debug, Clone)]
pub struct Addition<'a> {
    /// The import.
    pub import: &'a Import,
    /// The source it was imported from, as the command line named it.
    pub source: &'a str,
    /// The signing key's id.
    pub key_id: &'a str,
    /// Its public key, base64.
    pub public_key: String,
    /// The signed component, as `[plugins] adapters` names it (relative to the config's folder
    /// when it lies within it).
    pub component: String,
}

/// The merged config and, line by line, what the merge chose for the operator.
#[derive(Debug, Clone)]
pub struct Merged {
    /// The config's new text.
    pub text: String,
    /// What was added or chosen, and what it means, one sentence each.
    pub said: Vec<String>,
}

/// Merges `addition` into `existing` (the config's text; `None`: the file does not exist yet).
/// `path` names the config in errors.
pub fn merge(
    existing: Option<&str>,
    addition: &Addition<'_>,
    path: &std::path::Path,
) -> Result<Merged, ImportError> {
    let fail = |reason: String| ImportError::Read {
        path: path.to_owned(),
        reason,
    };
    let mut doc = match existing {
        Some(text) => text
            .parse::<DocumentMut>()
            .map_err(|e| fail(e.to_string()))?,
        None => {
            let mut doc = DocumentMut::new();
            doc.decor_mut().set_prefix(
                "# The gateway's config, written by `gatehouse import --config`; each import into it\n\
                 # merges beside the others. Serve it with `gatehouse serve --config FILE`; every\n\
                 # table and key: docs/configuration.md.\n",
            );
            doc
        }
    };
    let mut said = Vec::new();
    let import = addition.import;
    let id = import.manifest.id.as_str();
    let root = doc.as_table_mut();

    // Who may publish it.
    let publishers = array(table(root, "trust").map_err(&fail)?, "publisher").map_err(&fail)?;
    let listed = publishers
        .iter()
        .position(|t| t.get("key_id").and_then(Item::as_str) == Some(addition.key_id));
    match listed.and_then(|at| publishers.get_mut(at)) {
        Some(entry) => {
            if entry.get("public_key").and_then(Item::as_str) != Some(&addition.public_key) {
                return Err(fail(format!(
                    "[[trust.publisher]] `{}` holds another public key than the key signing \
                     this import; sign with that entry's key (--key), or name another key",
                    addition.key_id
                )));
            }
            let adapters = entry
                .entry("adapters")
                .or_insert(value(toml_edit::Array::new()))
                .as_array_mut()
                .ok_or_else(|| fail("[[trust.publisher]] `adapters` is not a list".into()))?;
            if !adapters.iter().any(|a| a.as_str() == Some(id)) {
                adapters.push(id);
            }
        }
        None => {
            let mut entry = Table::new();
            entry.insert("key_id", value(addition.key_id));
            entry.insert("public_key", value(&addition.public_key));
            entry.insert("adapters", value(toml_edit::Array::from_iter([id])));
            entry.decor_mut().set_prefix(
                "\n# Written by `gatehouse import`: the key that signs the imported adapters.\n",
            );
            publishers.push(entry);
        }
    }
    said.push(format!(
        "trust: key `{}` may publish `{id}` ([[trust.publisher]])",
        addition.key_id
    ));

    // What serves it.
    let adapters = table(root, "plugins")
        .map_err(&fail)?
        .entry("adapters")
        .or_insert(value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| fail("[plugins] `adapters` is not a list".into()))?;
    if !adapters
        .iter()
        .any(|a| a.as_str() == Some(&addition.component))
    {
        adapters.push(addition.component.as_str());
    }
    said.push(format!(
        "serves: {} ([plugins] adapters)",
        addition.component
    ));

    // What it reaches.
    let grants = array(table(root, "egress").map_err(&fail)?, "grant").map_err(&fail)?;
    grants.retain(|t| t.get("adapter").and_then(Item::as_str) != Some(id));
    for grant in &import.grants {
        grants.push(item(grant).map_err(&fail)?);
        said.push(format!(
            "egress: `{id}` may reach {} ([[egress.grant]])",
            grant.url
        ));
    }
    if let Some(stdio) = &import.stdio {
        let table = table(root, "stdio").map_err(&fail)?;
        if let Some(dir) = &stdio.packages_dir {
            let dir = dir.display().to_string();
            match table.get("packages_dir").map(Item::as_str) {
                Some(Some(set)) if set != dir => {
                    return Err(fail(format!(
                        "[stdio] packages_dir is {set}, and this import installed into {dir}: \
                         import again without --packages-dir (the config's is used)"
                    )));
                }
                Some(Some(_)) => {}
                _ => {
                    table.insert("packages_dir", value(dir));
                }
            }
        }
        let servers = array(table, "server").map_err(&fail)?;
        servers.retain(|t| t.get("adapter").and_then(Item::as_str) != Some(id));
        for server in &stdio.servers {
            servers.push(item(server).map_err(&fail)?);
        }
        said.push(format!(
            "stdio: the server of `{id}` runs in its sandbox ([[stdio.server]])"
        ));
    }

    // Who sees it, and what the import chose for each tool.
    let tools = array(table(root, "pipeline").map_err(&fail)?, "tool").map_err(&fail)?;
    let glob = format!("{id}.*");
    let position = tools
        .iter()
        .position(|t| t.get("tools").and_then(Item::as_str) == Some(glob.as_str()));
    let entry = match position {
        Some(at) => tools.get_mut(at).expect("found above"),
        None => {
            let mut entry = Table::new();
            entry.insert("tools", value(&glob));
            entry.insert("tenants", value(toml_edit::Array::from_iter(["*"])));
            tools.push(entry);
            tools.get_mut(tools.len() - 1).expect("pushed")
        }
    };
    entry
        .decor_mut()
        .set_prefix(asks_comment(import) + &choices_comment(addition));
    said.push(format!(
        "tools: {glob} seen by every tenant ([[pipeline.tool]]; narrow `tenants` as needed)"
    ));

    // Who may call, and what decides.
    if existing.is_none() {
        let mcp = table(root, "mcp").map_err(&fail)?;
        mcp.set_implicit(false);
        mcp.decor_mut().set_prefix(
            "\n# Written by `gatehouse import`: callers without a key run as tenant `default`, on this\n\
             # loopback listener only. Before listening beyond loopback, admit callers with\n\
             # [[mcp.api_key]] or [mcp.jwt] instead (docs/operations.md, \"Identity\").\n",
        );
        mcp.insert("listen", value(default_listen().to_string()));
        mcp.insert("anonymous_tenant", value(ANONYMOUS_TENANT));
        let pipeline = table(root, "pipeline").map_err(&fail)?;
        pipeline.set_implicit(false);
        pipeline.decor_mut().set_prefix(
            "\n# Written by `gatehouse import`: with no policy bound, each call runs as its tool's\n\
             # signed manifest says. A read_only tool runs; any other runs once per idempotency key;\n\
             # one with an approval gate waits for a person (`gatehouse approvals approve ID --as\n\
             # YOU --config FILE`). Bind a policy ([[pipeline.policy]]) or Cedar rules to decide\n\
             # more (docs/policies-as-rules.md), or set \"deny\" to deny what no policy allows.\n",
        );
        pipeline.insert("policy_default", value("allow"));
        said.push(format!(
            "callers: anonymous, as tenant `{ANONYMOUS_TENANT}`, on the loopback listener {} \
             only ([mcp] anonymous_tenant)",
            default_listen()
        ));
        said.push(
            "policy default: allow ([pipeline] policy_default): with no policy bound, read_only \
             tools run, others run once per idempotency key, and tools with an approval gate \
             wait for an approval; bind a policy to decide more"
                .to_owned(),
        );
    } else {
        said.extend(existing_choices(root, &fail)?);
    }

    let text = doc.to_string();
    ServeConfig::from_toml(&text).map_err(|e| {
        fail(format!(
            "merged with the import, it would not read back: {e}"
        ))
    })?;
    Ok(Merged { text, said })
}

/// What an existing config's own identity and policy default mean for the imported tools: and
/// anonymous callers added when it admits nobody and listens on loopback.
fn existing_choices(
    root: &mut Table,
    fail: &impl Fn(String) -> ImportError,
) -> Result<Vec<String>, ImportError> {
    let mut said = Vec::new();
    let mcp = table(root, "mcp").map_err(fail)?;
    let admits = ["anonymous_tenant", "api_key", "jwt"]
        .iter()
        .any(|key| mcp.contains_key(key));
    let listen = match mcp.get("listen").map(Item::as_str) {
        Some(Some(listen)) => listen
            .parse::<SocketAddr>()
            .map_err(|e| fail(format!("[mcp] listen `{listen}`: {e}")))?,
        Some(None) => return Err(fail("[mcp] listen is not a string".into())),
        None => default_listen(),
    };
    if admits {
        said.push("callers: as the config's [mcp] table admits them (unchanged)".to_owned());
    } else if listen.ip().is_loopback() {
        mcp.insert("anonymous_tenant", value(ANONYMOUS_TENANT));
        mcp.key_mut("anonymous_tenant")
            .expect("inserted")
            .leaf_decor_mut()
            .set_prefix(
                "# Written by `gatehouse import`: the config admitted no caller. On this loopback\n\
                 # listener only; beyond it, admit callers with [[mcp.api_key]] or [mcp.jwt].\n",
            );
        said.push(format!(
            "callers: anonymous, as tenant `{ANONYMOUS_TENANT}`, on the loopback listener \
             {listen} only ([mcp] anonymous_tenant; the config admitted nobody)"
        ));
    } else {
        said.push(format!(
            "callers: none is admitted yet, and {listen} is not loopback: add [[mcp.api_key]] or \
             [mcp.jwt] (docs/operations.md, \"Identity\")"
        ));
    }
    let pipeline = table(root, "pipeline").map_err(fail)?;
    let default = pipeline
        .get("policy_default")
        .and_then(Item::as_str)
        .unwrap_or("deny");
    let bound = pipeline
        .get("policy")
        .and_then(Item::as_array_of_tables)
        .is_some_and(|policies| !policies.is_empty());
    said.push(match (default, bound) {
        ("allow", _) => "policy default: allow (unchanged): what no policy decides runs as its \
                         manifest says"
            .to_owned(),
        (_, true) => "policy default: deny (unchanged): the imported tools run where a bound \
                      policy allows them ([[pipeline.policy]])"
            .to_owned(),
        _ => "policy default: deny (unchanged), and no policy is bound: every call of the \
              imported tools is denied until you bind one ([[pipeline.policy]]), write Cedar \
              rules (docs/policies-as-rules.md) or set [pipeline] policy_default = \"allow\""
            .to_owned(),
    });
    Ok(said)
}

/// The comment above an import's `[[pipeline.tool]]` entry: where the tools came from, and
/// each one's class, approval mode and approval gate, as the signed manifest has them.
fn choices_comment(addition: &Addition<'_>) -> String {
    let manifest = &addition.import.manifest;
    let id = &manifest.id;
    let rows: Vec<[String; 4]> = manifest
        .capabilities
        .iter()
        .map(|c| {
            [
                format!("{id}.{}", c.id),
                c.capability_class.to_string(),
                c.approval_mode.to_string(),
                match &c.approval_gate {
                    Some(gate) if c.approval_mode >= ApprovalMode::Network => {
                        format!("approval gate `{gate}`")
                    }
                    _ => String::new(),
                },
            ]
        })
        .collect();
    let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0);
    let (tool, class, mode) = (width(0), width(1), width(2));
    let mut out = format!(
        "\n# `{id}`, imported by `gatehouse import` from {}.\n\
         # Its tools as the signed manifest has them (`gatehouse inspect` shows it):\n",
        super::output::comment(addition.source)
    );
    for row in &rows {
        let line = format!(
            "#   {:tool$}  {:class$}  {:mode$}  {}",
            row[0], row[1], row[2], row[3]
        );
        out.push_str(line.trim_end());
        out.push('\n');
    }
    let served = manifest.resources.len() + manifest.resource_templates.len();
    if served + manifest.prompts.len() > 0 {
        out.push_str(&format!(
            "#   and {served} resources and resource templates, {} prompts\n",
            manifest.prompts.len()
        ));
    }
    out
}

/// Where `gatehouse serve` listens when `[mcp] listen` is not set.
fn default_listen() -> SocketAddr {
    McpConfig::default().listen
}

/// The table `key` of `parent`, made (implicit, so it has no header of its own until it holds
/// a value) if missing.
fn table<'a>(parent: &'a mut Table, key: &str) -> Result<&'a mut Table, String> {
    parent
        .entry(key)
        .or_insert_with(|| {
            let mut table = Table::new();
            table.set_implicit(true);
            Item::Table(table)
        })
        .as_table_mut()
        .ok_or_else(|| format!("`{key}` is not a table ([{key}])"))
}

/// The array of tables `key` of `parent`, made if missing.
fn array<'a>(parent: &'a mut Table, key: &str) -> Result<&'a mut ArrayOfTables, String> {
    parent
        .entry(key)
        .or_insert(Item::ArrayOfTables(ArrayOfTables::new()))
        .as_array_of_tables_mut()
        .ok_or_else(|| format!("`{key}` is not a list of tables ([[...{key}]])"))
}

/// `entry` (a config table's struct) as a table to insert where it is inserted (not where it
/// stood in the text it was parsed from), its own tables written inline, as the docs write
/// `credentials = { ... }`.
fn item(entry: &impl Serialize) -> Result<Table, String> {
    let text = toml::to_string(entry).map_err(|e| e.to_string())?;
    let doc = text.parse::<DocumentMut>().map_err(|e| e.to_string())?;
    let mut out = Table::new();
    for (key, item) in doc.as_table() {
        let item = match item {
            Item::Table(table) => {
                let mut inline = table.clone().into_inline_table();
                inline.fmt();
                Item::Value(toml_edit::Value::InlineTable(inline))
            }
            other => other.clone(),
        };
        out.insert(key, item);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use gatehouse_host::stdio::{ServerConfig, StdioConfig};

    use super::*;
    use crate::import::{Options, openapi};

    /// A small service: a read and a delete (which gets an approval gate).
    const SPEC: &str = r#"{
      "openapi": "3.0.3", "info": { "title": "Shop", "version": "1" },
      "servers": [{ "url": "http://127.0.0.1:9/v1" }],
      "components": { "securitySchemes": { "bearer": { "type": "http", "scheme": "bearer" } } },
      "security": [{ "bearer": [] }],
      "paths": { "/orders/{id}": {
        "parameters": [{ "name": "id", "in": "path", "required": true, "schema": { "type": "integer" } }],
        "get": { "operationId": "getOrder" }, "delete": { "operationId": "deleteOrder" } } }
    }"#;

    const PATH: &str = "/srv/gatehouse.toml";

    fn imported(id: &str) -> Import {
        openapi::import(SPEC, None, &Options::new(id)).unwrap()
    }

    fn stdio(id: &str) -> Import {
        let mut import = imported(id);
        import.grants.clear();
        import.stdio = Some(StdioConfig {
            servers: vec![ServerConfig::new(id.to_owned())],
            ..StdioConfig::default()
        });
        import
    }

    fn merged(existing: Option<&str>, import: &Import, key_id: &str, key: &str) -> Merged {
        try_merge(existing, import, key_id, key).unwrap()
    }

    fn try_merge(
        existing: Option<&str>,
        import: &Import,
        key_id: &str,
        key: &str,
    ) -> Result<Merged, ImportError> {
        let id = &import.manifest.id;
        let addition = Addition {
            import,
            source: "shop.json",
            key_id,
            public_key: key.to_owned(),
            component: format!("{id}/{id}.wasm"),
        };
        merge(existing, &addition, Path::new(PATH))
    }

    fn config(text: &str) -> ServeConfig {
        ServeConfig::from_toml(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    }

    /// A fresh public key, as `[[trust.publisher]]` holds it.
    fn key() -> String {
        gatehouse_host::plugin::signature::SigningKey::generate("k")
            .unwrap()
            .public_key()
            .to_base64()
    }

    #[test]
    fn a_new_config_serves_the_import_as_it_is() {
        let out = merged(None, &imported("acme.shop"), "publisher", &key());
        let served = config(&out.text);
        let publishers = &served.host.trust.publishers;
        assert_eq!(publishers.len(), 1, "{}", out.text);
        assert_eq!(publishers[0].key_id, "publisher");
        assert_eq!(publishers[0].adapters[0].as_str(), "acme.shop");
        assert_eq!(served.plugins.adapters, ["acme.shop/acme.shop.wasm"]);
        assert_eq!(served.host.egress.grants.len(), 1);
        assert_eq!(
            served.host.egress.grants[0].credentials.len(),
            1,
            "{}",
            out.text
        );
        assert_eq!(served.host.pipeline.tools.len(), 1);
        assert_eq!(
            served.mcp.anonymous_tenant.as_deref(),
            Some(ANONYMOUS_TENANT)
        );
        assert!(served.mcp.listen.ip().is_loopback());
        assert_eq!(
            served.host.pipeline.policy_default,
            gatehouse_host::config::PolicyDefault::Allow
        );
        // What the import chose, commented in the file and said.
        for line in [
            "#   acme.shop.getorder     observe  read_only",
            "#   acme.shop.deleteorder  act      destructive  approval gate `IMPORTED_DESTRUCTIVE`",
            "on this\n# loopback listener only",
            "policy_default = \"allow\"",
            "credentials = { bearer = { env = \"ACME_SHOP_BEARER\"",
        ] {
            assert!(out.text.contains(line), "{line}\n{}", out.text);
        }
        let said = out.said.join("\n");
        for words in [
            "key `publisher` may publish `acme.shop`",
            "anonymous",
            "policy default: allow",
        ] {
            assert!(said.contains(words), "{words}\n{said}");
        }
    }

    #[test]
    fn a_second_import_merges_beside_the_first_and_a_third_replaces_its_own() {
        let k = key();
        let first = merged(None, &stdio("acme.files"), "publisher", &k);
        let second = merged(Some(&first.text), &stdio("acme.notes"), "publisher", &k);
        let served = config(&second.text);
        assert_eq!(served.host.trust.publishers.len(), 1, "{}", second.text);
        let adapters: Vec<&str> = served.host.trust.publishers[0]
            .adapters
            .iter()
            .map(gatehouse_host::config::Glob::as_str)
            .collect();
        assert_eq!(adapters, ["acme.files", "acme.notes"]);
        assert_eq!(served.host.stdio.servers.len(), 2);
        assert_eq!(served.plugins.adapters.len(), 2);
        assert_eq!(served.host.pipeline.tools.len(), 2);
        assert!(
            second
                .said
                .iter()
                .any(|s| s.contains("admits them (unchanged)")),
            "{:?}",
            second.said
        );
        assert!(
            second
                .said
                .iter()
                .any(|s| s.contains("policy default: allow (unchanged)"))
        );

        // The same import again replaces its own entries rather than adding to them.
        let again = merged(Some(&second.text), &stdio("acme.notes"), "publisher", &k);
        let served = config(&again.text);
        assert_eq!(served.host.stdio.servers.len(), 2, "{}", again.text);
        assert_eq!(served.plugins.adapters.len(), 2);
        assert_eq!(served.host.pipeline.tools.len(), 2);
        assert_eq!(served.host.trust.publishers[0].adapters.len(), 2);
        assert_eq!(again.text.matches("[[pipeline.tool]]").count(), 2);
    }

    #[test]
    fn an_operators_config_keeps_its_comments_and_its_choices() {
        let existing = "# our gateway\n[mcp]\nlisten = \"127.0.0.1:9000\" # local\n\n\
                        [[mcp.api_key]]\ntenant = \"acme\"\nenv = \"KEY\"\n\n\
                        [pipeline]\npolicy_default = \"deny\"\n";
        let out = merged(Some(existing), &imported("acme.shop"), "ops", &key());
        assert!(out.text.starts_with("# our gateway\n"), "{}", out.text);
        assert!(
            out.text.contains("listen = \"127.0.0.1:9000\" # local"),
            "{}",
            out.text
        );
        let served = config(&out.text);
        assert_eq!(served.mcp.anonymous_tenant, None, "{}", out.text);
        assert_eq!(
            served.host.pipeline.policy_default,
            gatehouse_host::config::PolicyDefault::Deny
        );
        let said = out.said.join("\n");
        assert!(
            said.contains("every call of the imported tools is denied until you bind one"),
            "{said}"
        );
    }

    #[test]
    fn a_config_admitting_nobody_gets_anonymous_callers_only_on_loopback() {
        let out = merged(
            Some("[mcp]\nlisten = \"127.0.0.1:9000\"\n"),
            &imported("a.b"),
            "k",
            &key(),
        );
        assert_eq!(
            config(&out.text).mcp.anonymous_tenant.as_deref(),
            Some("default")
        );
        let out = merged(
            Some("[mcp]\nlisten = \"0.0.0.0:9000\"\n"),
            &imported("a.b"),
            "k",
            &key(),
        );
        assert_eq!(config(&out.text).mcp.anonymous_tenant, None, "{}", out.text);
        let said = out.said.join("\n");
        assert!(
            said.contains("none is admitted yet, and 0.0.0.0:9000 is not loopback"),
            "{said}"
        );
    }

    #[test]
    fn conflicts_are_refused_with_the_fix() {
        let k = key();
        let first = merged(None, &imported("a.b"), "publisher", &k);
        let err = try_merge(Some(&first.text), &imported("a.c"), "publisher", &key())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(PATH) && err.contains("holds another public key"),
            "{err}"
        );

        let mut other = stdio("a.d");
        other.stdio.as_mut().unwrap().packages_dir = Some("/var/one".into());
        let with_dir = merged(None, &other, "publisher", &k);
        let mut again = stdio("a.e");
        again.stdio.as_mut().unwrap().packages_dir = Some("/var/two".into());
        let err = try_merge(Some(&with_dir.text), &again, "publisher", &k)
            .unwrap_err()
            .to_string();
        assert!(err.contains("[stdio] packages_dir is /var/one"), "{err}");

        for bad in ["trust = 1\n", "[pipeline]\ntool = 3\n", "not toml ["] {
            let err = try_merge(Some(bad), &imported("a.b"), "k", &k)
                .unwrap_err()
                .to_string();
            assert!(err.starts_with(PATH), "{bad}: {err}");
        }
    }
}

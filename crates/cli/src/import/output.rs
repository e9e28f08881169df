//! What an import writes: `manifest.toml` (reviewed, then signed), `config.toml` (the snippet an
//! operator appends to their config), the table of choices, and the all-or-nothing write.

use std::path::Path;

use gatehouse_host::config::GrantConfig;
use gatehouse_host::plugin::manifest::Manifest;
use gatehouse_host::stdio::{DirGrant, StdioConfig};
use serde::Serialize;

use super::{Import, ImportError};

/// The manifest file an import writes.
pub const MANIFEST_FILE: &str = "manifest.toml";
/// The config snippet file an import writes.
pub const CONFIG_FILE: &str = "config.toml";

/// `manifest.toml`: a header saying where it came from, then the manifest.
pub fn manifest_toml(import: &Import, source: &str) -> Result<String, ImportError> {
    // A schema TOML cannot hold (a JSON null) is written as JSON text, read back the same.
    let body = Manifest::Adapter(import.manifest.clone())
        .to_toml()
        .map_err(|e| ImportError::Manifest(format!("it cannot be written as TOML: {e}")))?;
    let source = comment(source);
    Ok(format!(
        "# Written by `gatehouse import` from {source}.\n\
         # Review every capability (class, approval mode, schemas) and the egress request before\n\
         # signing: what is signed is what runs. The `upstream` tables pin each tool's, resource's\n\
         # and prompt's definition (review each resource's `classification`, `unreviewed` as imported);\n\
         # `gatehouse import mcp --check DIR` reports what changed upstream since.\n\n{body}"
    ))
}

/// `text` as it may stand in a `#` comment: each control character (a newline would end the
/// comment, and what follows it would be read as TOML into the manifest that is signed) as
/// its Rust escape, `\n`, `\u{1b}`.
pub(crate) fn comment(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[derive(Serialize)]
struct Egress<'a> {
    grant: &'a [GrantConfig],
}

#[derive(Serialize)]
struct Snippet<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    egress: Option<Egress<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stdio: Option<&'a StdioConfig>,
}

/// `config.toml`: the egress grant with its credential bindings (or, for a stdio server, its
/// `[[stdio.server]]` entry), and the tool entry making the tools visible (to every tenant:
/// narrow `tenants` as needed).
pub fn config_toml(import: &Import) -> String {
    let grant = toml::to_string(&Snippet {
        egress: (!import.grants.is_empty()).then_some(Egress {
            grant: &import.grants,
        }),
        stdio: import.stdio.as_ref(),
    })
    .expect("grants serialize as TOML");
    let id = &import.manifest.id;
    let what = if import.stdio.is_some() && import.grants.is_empty() {
        "# gatehouse.toml, set the environment variables its `env` names, and trust the key\n\
         # that signs the adapter for `{id}` in a [[trust.publisher]] entry. The server runs in\n\
         # a sandbox: it sees only the `dirs` listed, and has no network.\n"
    } else if import.stdio.is_some() {
        "# gatehouse.toml, set the environment variables its `env` and credentials name, and\n\
         # trust the key that signs the adapter for `{id}` in a [[trust.publisher]] entry. The\n\
         # server runs in a sandbox: it sees only the `dirs` listed, and reaches only the\n\
         # [[egress.grant]] destinations, through the gateway's egress proxy.\n"
    } else {
        "# gatehouse.toml, set the environment variables its credentials name, and trust the key\n\
         # that signs the adapter for `{id}` in a [[trust.publisher]] entry.\n"
    }
    .replace("{id}", id);
    let asks = asks_comment(import);
    format!(
        "# Operator config for adapter `{id}`, written by `gatehouse import`. Append it to your\n\
         {what}\n{grant}\n\
         # Who sees the imported tools: every tenant. Narrow `tenants` as needed.\n\
         [[pipeline.tool]]\ntools = \"{id}.*\"\ntenants = [\"*\"]\n{asks}"
    )
}

/// What the server may ask the caller through the gateway, as a commented `[[caller.grant]]`
/// (nothing reaches the caller until the operator grants it); empty when its manifest asks
/// nothing.
pub fn asks_comment(import: &Import) -> String {
    if import.manifest.caller.ask.is_empty() {
        return String::new();
    }
    let id = &import.manifest.id;
    format!(
        "\n# The server may ask the calling user (elicitation), the caller's model (sampling)\n\
         # and its roots during a call: nothing reaches the caller until you grant it here.\n\
         # [[caller.grant]]\n\
         # adapter = \"{id}\"\n\
         # ask = [\"elicitation\", \"sampling\", \"roots\"]\n\
         # max_asks = 4\n\
         # max_sampling_tokens = 1000\n"
    )
}

/// The table of choices an operator reads before signing, and the items left out.
pub fn table(import: &Import) -> String {
    let header = ["SOURCE", "CAPABILITY", "CLASS", "MODE", "WHY"];
    let rows: Vec<[String; 5]> = import
        .choices
        .iter()
        .map(|c| {
            [
                c.source.clone(),
                c.capability.clone(),
                c.class.to_string(),
                c.mode.to_string(),
                {
                    let gate = (import.manifest.capabilities.iter())
                        .find(|capability| capability.id == c.capability)
                        .and_then(|capability| capability.approval_gate.as_deref())
                        .map(|gate| format!("; approval gate {gate}"))
                        .unwrap_or_default();
                    let labels = match c.labels.is_empty() {
                        true => String::new(),
                        false => format!("; {}", c.labels),
                    };
                    format!("{}{gate}{labels}", c.reason)
                },
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: [&str; 5]| {
        let mut out = String::new();
        for (i, (cell, width)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  "));
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(header);
    for row in &rows {
        out.push_str(&line(row.each_ref().map(String::as_str)));
    }
    for choice in import.choices.iter().filter(|c| c.shortened) {
        out.push_str(&format!(
            "shortened {}: its name is longer than a capability id may be; `{}` ends in the \
             first {} hex digits of the name's SHA-256, the same at every import\n",
            choice.source,
            choice.capability,
            super::names::SUFFIX_LEN
        ));
    }
    let manifest = &import.manifest;
    for resource in &manifest.resources {
        out.push_str(&format!(
            "resource {} as `{}`: classification `{}`; review it (policies see it)\n",
            resource.uri,
            resource.id,
            resource.classification.as_deref().unwrap_or("none")
        ));
    }
    for template in &manifest.resource_templates {
        out.push_str(&format!(
            "resource template {} as `{}`: classification `{}`; constrain its parameters in \
             `parameters` (any string until you do)\n",
            template.uri_template,
            template.id,
            template.classification.as_deref().unwrap_or("none")
        ));
    }
    for prompt in &manifest.prompts {
        out.push_str(&format!(
            "prompt `{}`: pinned; a change upstream is drift\n",
            prompt.id
        ));
    }
    for server in import.stdio.iter().flat_map(|stdio| &stdio.servers) {
        let uid = server.run_as();
        let writable = DirGrant::writable(&server.dirs)
            .unwrap_or_else(|| "none: grant one with `--dir PATH:rw`".to_owned());
        out.push_str(&format!(
            "stdio server of `{}`: under a root gateway it runs as uid {uid} (gid {uid}, \
             `[[stdio.server]] uid`); it writes only in the directories granted `rw` \
             ({writable}), which uid {uid} must be able to write\n",
            server.adapter
        ));
    }
    for skipped in &import.skipped {
        out.push_str(&format!("skipped {}: {}\n", skipped.source, skipped.reason));
    }
    for note in &import.notes {
        out.push_str(&format!("note: {note}\n"));
    }
    out
}

/// Writes `files` into `dir` (created if missing) all or nothing: each is written as a hidden
/// `.NAME.partial` beside its final name first; only when all are written are they renamed
/// into place. On a failure the partial files are removed and no file of `dir` has changed.
pub fn write_all(dir: &Path, files: &[(&str, &[u8])]) -> Result<(), ImportError> {
    let fail = |path: &Path, source| ImportError::Write {
        path: path.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    let mut partials = Vec::new();
    for (name, bytes) in files {
        let partial = dir.join(format!(".{name}.partial"));
        if let Err(e) = std::fs::write(&partial, bytes) {
            let _ = std::fs::remove_file(&partial);
            for written in &partials {
                let _ = std::fs::remove_file(written);
            }
            return Err(fail(&partial, e));
        }
        partials.push(partial);
    }
    for ((name, _), partial) in files.iter().zip(&partials) {
        let target = dir.join(name);
        std::fs::rename(partial, &target).map_err(|e| fail(&target, e))?;
    }
    Ok(())
}

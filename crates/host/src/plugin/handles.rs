//! Manifest/code drift: which capability ids an adapter's code handles, recorded at pack and
//! checked against its manifest at pack, verify and load.
//!
//! A manifest capability the code does not handle would be advertised in `tools/list` and
//! fail only when called (`UNKNOWN_CAPABILITY`). So:
//! 1. **The code says.** The SDKs' dispatch answers the reserved capability id [`PROBE`] (a
//!    `:` is in no capability id, so the pipeline never sends it) with the ids it handles,
//!    before any handler runs: the JavaScript SDK's `adapter({...})` its keys, the Python
//!    SDK's `Adapter` its methods, the Rust SDK's `Adapter::CAPABILITIES`. Code that does not
//!    say (an older SDK, a dispatch of its own) answers as for any unknown id, and is not
//!    checked.
//! 2. **Pack records it**: `gatehouse pack` (and `build`) runs the component once, in a
//!    throwaway sandbox with no egress, and asks [`PROBE`] ([`examine`], in a child process
//!    within bounds of time and memory), then writes the answer into the signed component as
//!    the [`SECTION`] custom section, a JSON list ([`record`]).
//! 3. **Pack, verify and load compare** ([`check`]): a manifest capability the code does not
//!    handle is refused, naming the id and the nearest id the code handles; an id the code
//!    handles that the manifest lacks is a warning. Ids compare with `-` read as `_` (the
//!    Python SDK's method names).

use std::collections::BTreeSet;

use super::manifest::{AdapterManifest, PluginKind};
use crate::sandbox::{PreparedAdapter, Sandbox};

/// The custom section that holds the ids, as a JSON list of strings.
pub const SECTION: &str = "gatehouse:handles";
/// The capability id the SDKs answer with the ids they handle.
pub const PROBE: &str = "gatehouse:handles";

/// Compares what `manifest` declares with what the code `handles`: the warnings (ids handled
/// and not declared), or the refusal of a declared id the code does not handle. `file` names
/// the manifest in messages.
pub fn check(
    manifest: &AdapterManifest,
    handles: &[String],
    file: &str,
) -> Result<Vec<String>, String> {
    let normal = |id: &str| id.replace('-', "_");
    let handled: BTreeSet<String> = handles.iter().map(|id| normal(id)).collect();
    let declared: BTreeSet<String> = manifest
        .capabilities
        .iter()
        .map(|c| normal(&c.id))
        .collect();
    if let Some(missing) = manifest
        .capabilities
        .iter()
        .find(|c| !handled.contains(&normal(&c.id)))
    {
        let listed: Vec<&str> = handles.iter().map(String::as_str).collect();
        let mut message = format!(
            "capability `{}` in {file} is not handled by the code, which handles {}",
            missing.id,
            if listed.is_empty() {
                "none".to_owned()
            } else {
                listed.join(", ")
            }
        );
        match super::manifest::nearest(&missing.id, &listed) {
            // Either side may hold the typo: the manifest is what operators reviewed, so the
            // code's name comes first, the manifest's after.
            Some(near) => message.push_str(&format!(
                ": the code's `{near}` is not declared. Rename it to `{}` in the code, or, if the \
                 manifest is misspelled, rename the capability to `{near}` in {file}",
                missing.id
            )),
            None => message.push_str(&format!(
                "; handle `{}` in the code, or remove it from {file}",
                missing.id
            )),
        }
        return Err(message);
    }
    Ok(handles
        .iter()
        .filter(|id| !declared.contains(&normal(id)))
        .map(|id| {
            format!(
                "the code handles `{id}`, which {file} does not declare: no caller can reach it"
            )
        })
        .collect())
}

/// The ids recorded in a component's [`SECTION`], if it has one.
pub fn recorded(list: &[super::sections::Section<'_>]) -> Option<Vec<String>> {
    super::sections::custom(list, SECTION)
        .first()
        .and_then(|data| serde_json::from_slice(data).ok())
}

/// Compiles `component` once, in a throwaway sandbox with no egress: it must implement the
/// world of `kind` ([`super::check_world`]); an adapter is then asked [`PROBE`]. The ids its
/// code handles, or `None` for a policy module or code that does not say. Compiling is not
/// bounded here: `gatehouse pack` runs this in a child process that is (gatehouse-cli's
/// `examine`).
pub fn examine(component: &[u8], kind: PluginKind) -> Result<Option<Vec<String>>, String> {
    match super::compile_checked(component, kind)? {
        (sandbox, Some(prepared)) => probe(&sandbox, &prepared),
        (_, None) => Ok(None),
    }
}

/// Checks `component` against `manifest` before it is signed (`gatehouse pack`), given the ids
/// [`examine`] found its code handles: for an adapter whose code says, the manifest declares
/// none it does not. Returns the component with those ids recorded ([`SECTION`], replacing
/// any) and the warnings of [`check`]; a policy module, or code that does not say, unchanged.
/// `file` names the manifest in messages.
pub fn record(
    component: &[u8],
    manifest: &super::manifest::Manifest,
    handles: Option<Vec<String>>,
    file: &str,
) -> Result<(Vec<u8>, Vec<String>), String> {
    let (super::manifest::Manifest::Adapter(adapter), Some(handles)) = (manifest, handles) else {
        return Ok((component.to_vec(), Vec::new()));
    };
    let warnings = check(adapter, &handles, file)?;
    let list = super::sections::sections(component).map_err(|e| e.to_string())?;
    let mut bytes = super::sections::without(component, &list, &[SECTION]);
    let json = serde_json::to_vec(&handles).expect("a list of strings serializes");
    super::sections::append_custom(&mut bytes, SECTION, &json);
    Ok((bytes, warnings))
}

/// Runs the prepared adapter once, with no egress, and asks it [`PROBE`]: the ids its code
/// handles, or `None` when it does not say. On a thread of its own, so it runs from any
/// context.
fn probe(sandbox: &Sandbox, pre: &PreparedAdapter) -> Result<Option<Vec<String>>, String> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start a runtime: {e}"))?;
                Ok(runtime.block_on(ask(sandbox, pre)))
            })
            .join()
            .unwrap_or_else(
                |_| Err("asking the component which ids it handles panicked".to_owned()),
            )
    })
}

async fn ask(sandbox: &Sandbox, pre: &PreparedAdapter) -> Option<Vec<String>> {
    let ctx = crate::bindings::types::CallContext {
        tool_call_id: "call_probe".to_owned(),
        trace_id: "0".repeat(32),
        tenant: "probe".to_owned(),
        principals: Vec::new(),
        approval_mode: gatehouse_core::model::ApprovalMode::ReadOnly.into(),
        idempotency_key: None,
        skill_context: None,
        upstream: None,
    };
    let report = sandbox
        .run_adapter(
            pre,
            sandbox.limits(),
            crate::egress::EgressGate::deny_all(),
            crate::caller::CallerGate::none(),
            &ctx,
            crate::sandbox::Export::Invoke {
                capability: PROBE,
                args: "{}",
            },
        )
        .await;
    let Ok(Ok(crate::sandbox::Served::Output(output))) = report.outcome else {
        return None;
    };
    output
        .structured
        .as_deref()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(text).ok())
        .and_then(|value| serde_json::from_value::<Vec<String>>(value["handles"].clone()).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plugin::manifest::Manifest;

    fn adapter(ids: &[&str]) -> AdapterManifest {
        let capabilities: String = ids
            .iter()
            .map(|id| {
                format!(
                    "[[capability]]\nid = \"{id}\"\ncapability_class = \"observe\"\napproval_mode = \"read_only\"\ninput_schema = {{ type = \"object\" }}\n"
                )
            })
            .collect();
        let text = format!(
            "kind = \"adapter\"\nid = \"a.b\"\nversion = \"1.0.0\"\npublisher = \"a\"\n{capabilities}"
        );
        let Manifest::Adapter(manifest) = Manifest::from_toml(&text).unwrap() else {
            unreachable!("an adapter")
        };
        manifest
    }

    #[test]
    fn a_declared_id_the_code_lacks_is_refused_and_an_extra_one_warned() {
        let handles = |ids: &[&str]| ids.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        // `-` and `_` are one (the Python SDK's method names).
        let warnings = check(
            &adapter(&["get-order"]),
            &handles(&["get_order", "ping"]),
            "m.toml",
        );
        assert_eq!(
            warnings.unwrap(),
            ["the code handles `ping`, which m.toml does not declare: no caller can reach it"]
        );
        let err = check(&adapter(&["refund"]), &handles(&["refnd"]), "m.toml").unwrap_err();
        assert_eq!(
            err,
            "capability `refund` in m.toml is not handled by the code, which handles refnd: the \
             code's `refnd` is not declared. Rename it to `refund` in the code, or, if the \
             manifest is misspelled, rename the capability to `refnd` in m.toml"
        );
        let err = check(&adapter(&["refund"]), &[], "m.toml").unwrap_err();
        assert!(
            err.ends_with("handles none; handle `refund` in the code, or remove it from m.toml"),
            "{err}"
        );
    }
}

//! `[mcp.aliases]`: MCP names for gatehouse tools and prompts, for clients that call fixed names.
//!
//! A gatehouse tool is named `<adapter id>.<capability id>`. Some clients (test suites, agents
//! with hard-wired tool names) call a name of their own, such as `test_simple_text`. An alias
//! maps such a name to one tool (or prompt: `prompts/list` and `prompts/get` use the same table):
//!
//! ```toml
//! [mcp.aliases]
//! test_simple_text = "gatehouse.conformance.test_simple_text"
//! ```
//!
//! `tools/list` shows an aliased tool under its alias; `tools/call` of the alias runs the tool
//! (the pipeline, its policies and the audit log see the real name). The alias gives no access:
//! a tool the caller's tenant may not see stays unknown under either name. An alias has no dot,
//! so it never shadows a real tool name.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The `[mcp.aliases]` table, checked: each alias is 1-64 of `[A-Za-z0-9_-]` and names a
/// tool (`<adapter id>.<capability id>`), and no tool has two aliases. Default: none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, String>",
    into = "BTreeMap<String, String>"
)]
pub struct ToolAliases {
    /// alias -> tool.
    tools: BTreeMap<String, String>,
    /// tool -> alias.
    aliases: BTreeMap<String, String>,
}

impl ToolAliases {
    /// No aliases.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The tool `name` stands for, if it is an alias.
    pub fn tool(&self, name: &str) -> Option<&str> {
        self.tools.get(name).map(String::as_str)
    }

    /// The name `tools/list` shows for `tool`: its alias if it has one.
    pub fn listed_name(&self, tool: String) -> String {
        self.aliases.get(&tool).cloned().unwrap_or(tool)
    }
}

impl TryFrom<BTreeMap<String, String>> for ToolAliases {
    type Error = String;

    fn try_from(tools: BTreeMap<String, String>) -> Result<Self, String> {
        let mut aliases = BTreeMap::new();
        for (alias, tool) in &tools {
            let name_ok = (1..=64).contains(&alias.len())
                && alias
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if !name_ok {
                return Err(format!(
                    "alias `{alias}` must be 1-64 of [A-Za-z0-9_-] (no dot, so it cannot shadow a tool name)"
                ));
            }
            if !tool.contains('.') {
                return Err(format!(
                    "alias `{alias}`: `{tool}` is not a tool name; write `<adapter id>.<capability id>`"
                ));
            }
            if let Some(other) = aliases.insert(tool.clone(), alias.clone()) {
                return Err(format!(
                    "`{tool}` has two aliases, `{other}` and `{alias}`; keep one"
                ));
            }
        }
        Ok(Self { tools, aliases })
    }
}

impl From<ToolAliases> for BTreeMap<String, String> {
    fn from(aliases: ToolAliases) -> Self {
        aliases.tools
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(entries: &[(&str, &str)]) -> Result<ToolAliases, String> {
        ToolAliases::try_from(
            entries
                .iter()
                .map(|(a, t)| ((*a).to_owned(), (*t).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn an_alias_maps_both_ways() {
        let aliases = parse(&[("shout", "acme.text.upper")]).unwrap();
        assert_eq!(aliases.tool("shout"), Some("acme.text.upper"));
        assert_eq!(aliases.tool("acme.text.upper"), None);
        assert_eq!(aliases.listed_name("acme.text.upper".to_owned()), "shout");
        assert_eq!(
            aliases.listed_name("acme.text.lower".to_owned()),
            "acme.text.lower"
        );
    }

    #[test]
    fn rejects_dotted_empty_or_long_aliases_bad_targets_and_doubles() {
        let long = "a".repeat(65);
        for (entries, expected) in [
            (vec![("a.b", "acme.x.y")], "alias `a.b` must be 1-64"),
            (vec![("", "acme.x.y")], "alias `` must be 1-64"),
            (vec![(long.as_str(), "acme.x.y")], "must be 1-64"),
            (vec![("x", "nodot")], "`nodot` is not a tool name"),
            (
                vec![("x", "acme.x.y"), ("y", "acme.x.y")],
                "`acme.x.y` has two aliases, `x` and `y`",
            ),
        ] {
            let err = parse(&entries).unwrap_err();
            assert!(err.contains(expected), "{err}");
        }
    }
}

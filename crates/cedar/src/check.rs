//! Checks rules against the tools a config serves, before they are signed: Cedar's parser,
//! Cedar's validator in strict mode over the generated schema ([`crate::schema`]), and
//! gatehouse's own checks (tools and adapters named, annotations). Every problem names its line
//! and column.

use std::str::FromStr;

use cedar_policy::{PolicySet, Schema, ValidationMode, ValidationWarning, Validator};
use miette::Diagnostic;

use crate::{MODES, OBLIGATIONS, Tool, mode_rank};

/// One problem in a rule file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong, and what to do.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line, self.column, self.message
        )
    }
}

/// Parses and validates `text` against `tools`. On success, the parsed rules.
pub fn check(text: &str, tools: &[Tool]) -> Result<PolicySet, Vec<Problem>> {
    let policies = match PolicySet::from_str(text) {
        Ok(policies) => policies,
        Err(errors) => return Err(errors.iter().map(|e| diagnosed(text, e, "")).collect()),
    };
    let schema = Schema::from_json_value(crate::schema::schema(tools)).map_err(|e| {
        vec![Problem {
            line: 1,
            column: 1,
            message: format!("the schema generated from the tools does not load: {e}"),
        }]
    })?;
    let result = Validator::new(schema).validate(&policies, ValidationMode::Strict);
    let mut problems: Vec<Problem> = result
        .validation_errors()
        .map(|e| diagnosed(text, e, ""))
        .collect();
    // A rule that can never apply: at the rule, unless an error in it already says why.
    let starts = policy_starts(text);
    let erring: Vec<&cedar_policy::PolicyId> = result
        .validation_errors()
        .map(cedar_policy::ValidationError::policy_id)
        .collect();
    problems.extend(result.validation_warnings().filter_map(|w| match w {
        ValidationWarning::ImpossiblePolicy(_) | ValidationWarning::InvalidActionApplication(_)
            if !erring.contains(&w.policy_id()) =>
        {
            let mut problem = diagnosed(text, w, "the rule can never apply: ");
            let index = w.policy_id().to_string();
            if let Some(&start) = index
                .strip_prefix("policy")
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| starts.get(n))
                && (problem.line, problem.column) == (1, 1)
            {
                (problem.line, problem.column) = place(text, start);
            }
            Some(problem)
        }
        _ => None,
    }));
    problems.extend(references(text, tools));
    for policy in policies.policies() {
        problems.extend(annotations(text, policy, tools));
    }
    problems.sort_by_key(|p| (p.line, p.column));
    problems.dedup();
    if problems.is_empty() {
        Ok(policies)
    } else {
        Err(problems)
    }
}

/// A Cedar diagnostic at its first label (else the start of the text), with its help.
fn diagnosed(text: &str, error: &(impl Diagnostic + ?Sized), prefix: &str) -> Problem {
    let offset = error
        .labels()
        .and_then(|mut labels| labels.next())
        .map_or(0, |label| label.offset());
    let (line, column) = place(text, offset);
    let mut message = format!("{prefix}{error}");
    if let Some(help) = error.help() {
        message.push_str(&format!("; {help}"));
    }
    Problem {
        line,
        column,
        message,
    }
}

/// The 1-based line and column of byte `offset`.
pub fn place(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Where each rule begins (Cedar names them `policy0`, `policy1`... in this order): the first
/// character of code after the previous rule's `;`.
fn policy_starts(text: &str) -> Vec<usize> {
    let mut starts = Vec::new();
    let bytes = text.as_bytes();
    let (mut i, mut in_string, mut expecting) = (0, false, true);
    while i < bytes.len() {
        if in_string {
            match bytes[i] {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if text[i..].starts_with("//") {
            i += text[i..].find('\n').unwrap_or(text.len() - i);
            continue;
        } else if !bytes[i].is_ascii_whitespace() {
            if expecting {
                starts.push(i);
                expecting = false;
            }
            match bytes[i] {
                b'"' => in_string = true,
                b';' => expecting = true,
                _ => {}
            }
        }
        i += 1;
    }
    starts
}

/// Every `Tool::"..."` and `Adapter::"..."` outside comments that names no tool or adapter the
/// config serves (Cedar's validator checks the actions, not other entities' ids).
fn references(text: &str, tools: &[Tool]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (offset, kind, id) in entity_literals(text) {
        let known: Vec<&str> = match kind {
            "Tool" => tools.iter().map(|t| t.name.as_str()).collect(),
            _ => tools.iter().map(|t| t.adapter.as_str()).collect(),
        };
        if known.contains(&id.as_str()) {
            continue;
        }
        let noun = if kind == "Tool" { "tool" } else { "adapter" };
        let mut message = format!("{kind}::\"{id}\" is not a {noun} the config serves");
        match nearest(&id, &known) {
            Some(near) => message.push_str(&format!("; did you mean `{kind}::\"{near}\"`?")),
            None if known.is_empty() => message.push_str("; the config serves no tools"),
            None => {}
        }
        let (line, column) = place(text, offset);
        problems.push(Problem {
            line,
            column,
            message,
        });
    }
    problems
}

/// `(offset, "Tool" | "Adapter", id)` of each entity literal of those types, outside comments
/// and strings.
fn entity_literals(text: &str) -> Vec<(usize, &'static str, String)> {
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut in_string = false;
    while i < bytes.len() {
        let rest = &text[i..];
        if in_string {
            match bytes[i] {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if rest.starts_with("//") {
            i += rest.find('\n').unwrap_or(rest.len());
            continue;
        } else if bytes[i] == b'"' {
            in_string = true;
        } else if i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_') {
            for kind in ["Tool", "Adapter"] {
                let Some(after) = rest
                    .strip_prefix(kind)
                    .and_then(|r| r.trim_start().strip_prefix("::"))
                    .map(str::trim_start)
                    .and_then(|r| r.strip_prefix('"'))
                else {
                    continue;
                };
                let end = after.find('"').unwrap_or(after.len());
                found.push((i, kind, after[..end].replace("\\\"", "\"")));
                // Skip past the literal: its closing quote is not an opening one.
                i = text.len() - after.len() + end;
                break;
            }
        }
        i += 1;
    }
    found
}

/// The annotations of `policy` gatehouse reads, checked: values it can carry out, on a permit,
/// and an approval mode no higher than the maximum of the tool the rule names.
fn annotations(text: &str, policy: &cedar_policy::Policy, tools: &[Tool]) -> Vec<Problem> {
    let at = |key: &str, value: &str, message: String| {
        let needle = format!("@{key}(\"{value}\")");
        let (line, column) = place(text, text.find(&needle).unwrap_or(0));
        Problem {
            line,
            column,
            message,
        }
    };
    let mut problems = Vec::new();
    if let Err(message) = crate::Annotations::of(policy) {
        let (key, value) = policy
            .annotations()
            .find(|(k, _)| OBLIGATIONS.contains(k))
            .unwrap_or(("id", ""));
        let key = OBLIGATIONS
            .iter()
            .find(|k| message.contains(&format!("@{k}")))
            .copied()
            .unwrap_or(key);
        let value = crate::note(policy, key).unwrap_or(value);
        problems.push(at(key, value, message));
        return problems;
    }
    if let (Some(asked), cedar_policy::ActionConstraint::Eq(action)) =
        (crate::note(policy, "approval"), policy.action_constraint())
        && let Some(rank) = mode_rank(asked)
        && let Some(tool) = tools.iter().find(|t| t.name == action.id().unescaped())
        && mode_rank(&tool.max_mode).is_some_and(|max| rank > max)
    {
        problems.push(at(
            "approval",
            asked,
            format!(
                "@approval(\"{asked}\") is above the declared maximum `{}` of `{}`; a rule may only lower a call's mode ({})",
                tool.max_mode,
                tool.name,
                MODES.join(" < ")
            ),
        ));
    }
    problems
}

/// The candidate closest to `word`, if one is close.
fn nearest<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::damerau_levenshtein(word, c), *c))
        .filter(|(d, c)| *d <= 2.max(c.len() / 4))
        .min()
        .map(|(_, c)| c)
}

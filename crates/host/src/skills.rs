//! Skills (spec 001): operator-declared context text passed to adapters as `skill-context`;
//! policies see the resolved skills' names (the action's `context.skills`).
//!
//! 1. **load** (once, [`Skills::new`]): every skill is checked; a skill whose text looks like
//!    a secret (private keys, bearer tokens, API keys) is refused with an error naming it;
//! 2. **resolve** (per call, [`Skills::resolve`]): the cascade global -> tenant -> tool
//!    pattern -> user; within a level, higher `priority` first, then `name` ascending, so the
//!    order is deterministic; the texts are joined with a blank line and capped at
//!    `max_bytes` (skills that would overflow are left out and marked so in the trace).
//!
//! Skills never change which tools are listed, and by themselves not which are callable: they
//! add context, which a policy's rules may read.

use std::sync::LazyLock;

use gatehouse_core::envelope::ToolCallEnvelope;
use gatehouse_core::model::{Glob, GlobError, PrincipalKind};
use regex::Regex;
use serde::{Deserialize, Serialize};

/// Why the skills config was refused.
#[derive(Debug, thiserror::Error)]
pub enum SkillError {
    /// A skill's text looks like it contains a secret.
    #[error(
        "skill `{name}` looks like it contains a secret ({what}); skills are shown to models, so keep credentials in the egress config instead"
    )]
    Secret {
        /// The skill.
        name: String,
        /// Which pattern matched.
        what: &'static str,
    },
    /// A tool-scope pattern is invalid.
    #[error("skill `{name}`: tool pattern {source}")]
    Pattern {
        /// The skill.
        name: String,
        /// What is wrong with the pattern.
        source: GlobError,
    },
    /// Two skills share a name.
    #[error("two skills are named `{0}`; names must be unique (they break priority ties)")]
    Duplicate(String),
}

/// Where a skill applies: one level of the cascade.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Every call.
    Global,
    /// Calls for the tenant named by `match`.
    Tenant,
    /// Calls to tools matching the glob in `match`.
    Tool,
    /// Calls by the user principal named by `match`.
    User,
}

/// One `[[pipeline.skill]]`.
///
/// ```toml
/// [[pipeline.skill]]
/// name = "refund-tone"
/// scope = "tool"
/// match = "acme.payments.*"
/// priority = 10
/// text = "Refunds above 100 EUR need the order id in the note."
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Skill {
    /// Unique name; breaks priority ties.
    pub name: String,
    /// Which cascade level it belongs to.
    pub scope: Scope,
    /// Tenant id, tool glob or user id for the `tenant`, `tool` and `user` scopes; ignored for
    /// `global`.
    #[serde(default, rename = "match")]
    pub matches: String,
    /// Higher first within a level. Default: 0.
    #[serde(default)]
    pub priority: i32,
    /// The context text.
    pub text: String,
}

/// Resolution limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillLimits {
    /// Largest resolved text in bytes. Default: 8192: a few paragraphs, small beside a model's
    /// context and cheap to pass into every call.
    #[serde(default = "default_max_bytes")]
    pub max_bytes: usize,
}

impl Default for SkillLimits {
    fn default() -> Self {
        Self {
            max_bytes: default_max_bytes(),
        }
    }
}

fn default_max_bytes() -> usize {
    8192
}

/// The cascade levels, in resolution order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Global skills.
    Global,
    /// Tenant skills.
    Tenant,
    /// Tool-pattern skills.
    Tool,
    /// User skills.
    User,
}

/// The text one call receives and how it was resolved: the trace of ADR-047's resolution
/// endpoint (`GET /v1/skills/resolve` on the admin API).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Resolution {
    /// The resolved text (`None` when nothing matched).
    pub text: Option<String>,
    /// One entry per matched skill, in the order they were considered (level, then priority,
    /// then name); a level where nothing matched has one entry with no skill.
    pub trace: Vec<Traced>,
}

/// One line of a [`Resolution`]'s trace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Traced {
    /// The cascade level.
    pub level: Level,
    /// The skill that matched (`None`: nothing matched at this level).
    pub skill: Option<String>,
    /// Its priority.
    pub priority: Option<i32>,
    /// Whether a skill matched at this level (false only on a level's empty entry).
    pub matched: bool,
    /// Whether its text is in the resolved text; false when it would overflow `max_bytes`.
    pub included: bool,
}

impl Resolution {
    /// The names of the skills whose text was joined, in order.
    pub fn included(&self) -> impl Iterator<Item = &str> {
        self.trace
            .iter()
            .filter(|t| t.included)
            .filter_map(|t| t.skill.as_deref())
    }

    /// The names of the skills that matched but did not fit under the size cap.
    pub fn dropped(&self) -> impl Iterator<Item = &str> {
        self.trace
            .iter()
            .filter(|t| t.matched && !t.included)
            .filter_map(|t| t.skill.as_deref())
    }
}

static SECRETS: LazyLock<Vec<(&'static str, Regex)>> = LazyLock::new(|| {
    [
        ("a private key block", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
        ("an AWS access key id", r"\bAKIA[0-9A-Z]{16}\b"),
        ("a bearer token", r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{20,}"),
        ("a GitHub token", r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
        (
            "an API key assignment",
            r"(?i)\b(api[_-]?key|secret|password|token)\s*[:=]\s*\S{8,}",
        ),
        ("a Slack token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    ]
    .into_iter()
    .map(|(what, re)| (what, Regex::new(re).expect("valid regex")))
    .collect()
});

/// The checked skills.
#[derive(Debug)]
pub struct Skills {
    skills: Vec<(Skill, Option<Glob>)>,
    limits: SkillLimits,
}

impl Skills {
    /// Checks every skill (secrets, patterns, unique names).
    pub fn new(skills: &[Skill], limits: SkillLimits) -> Result<Self, SkillError> {
        let mut out: Vec<(Skill, Option<Glob>)> = Vec::with_capacity(skills.len());
        for skill in skills {
            if out.iter().any(|(s, _)| s.name == skill.name) {
                return Err(SkillError::Duplicate(skill.name.clone()));
            }
            if let Some((what, _)) = SECRETS.iter().find(|(_, re)| re.is_match(&skill.text)) {
                return Err(SkillError::Secret {
                    name: skill.name.clone(),
                    what,
                });
            }
            let glob = match skill.scope {
                Scope::Tool => {
                    Some(
                        Glob::new(&skill.matches).map_err(|source| SkillError::Pattern {
                            name: skill.name.clone(),
                            source,
                        })?,
                    )
                }
                Scope::Global | Scope::Tenant | Scope::User => None,
            };
            out.push((skill.clone(), glob));
        }
        Ok(Self {
            skills: out,
            limits,
        })
    }

    /// Resolves the cascade for `call` to `tool`: its tenant, and its user principals' ids.
    pub fn resolve_call(&self, call: &ToolCallEnvelope, tool: &str) -> Resolution {
        let users: Vec<&str> = (call.principal_chain.iter())
            .filter(|p| p.kind == PrincipalKind::User)
            .map(|p| p.id.as_str())
            .collect();
        self.resolve(&call.tenant_id, tool, &users)
    }

    /// Resolves the cascade for one call; `users` are the user principals' ids.
    pub fn resolve(&self, tenant: &str, tool: &str, users: &[&str]) -> Resolution {
        let mut trace = Vec::new();
        let mut text = String::new();
        for level in [Level::Global, Level::Tenant, Level::Tool, Level::User] {
            let mut matched: Vec<&Skill> = self
                .skills
                .iter()
                .filter(|(skill, glob)| match (skill.scope, level) {
                    (Scope::Global, Level::Global) => true,
                    (Scope::Tenant, Level::Tenant) => skill.matches == tenant,
                    (Scope::Tool, Level::Tool) => glob.as_ref().is_some_and(|g| g.is_match(tool)),
                    (Scope::User, Level::User) => users.contains(&skill.matches.as_str()),
                    (Scope::Global | Scope::Tenant | Scope::Tool | Scope::User, _) => false,
                })
                .map(|(skill, _)| skill)
                .collect();
            matched.sort_by(|a, b| b.priority.cmp(&a.priority).then(a.name.cmp(&b.name)));
            if matched.is_empty() {
                trace.push(Traced {
                    level,
                    skill: None,
                    priority: None,
                    matched: false,
                    included: false,
                });
            }
            for skill in matched {
                let separator = if text.is_empty() { 0 } else { 2 };
                let included = text.len() + separator + skill.text.len() <= self.limits.max_bytes;
                if included {
                    if separator > 0 {
                        text.push_str("\n\n");
                    }
                    text.push_str(&skill.text);
                }
                trace.push(Traced {
                    level,
                    skill: Some(skill.name.clone()),
                    priority: Some(skill.priority),
                    matched: true,
                    included,
                });
            }
        }
        Resolution {
            text: (!text.is_empty()).then_some(text),
            trace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(name: &str, scope: (Scope, &str), priority: i32, text: &str) -> Skill {
        Skill {
            name: name.to_owned(),
            scope: scope.0,
            matches: scope.1.to_owned(),
            priority,
            text: text.to_owned(),
        }
    }

    const GLOBAL: (Scope, &str) = (Scope::Global, "");

    #[test]
    fn parses_from_toml() {
        let skill: Skill =
            toml::from_str("name = \"n\"\nscope = \"tool\"\nmatch = \"acme.*\"\ntext = \"t\"")
                .unwrap();
        assert_eq!(skill, self::skill("n", (Scope::Tool, "acme.*"), 0, "t"));
    }

    #[test]
    fn cascade_order_priority_then_name_and_size_cap() {
        let skills = Skills::new(
            &[
                skill("u", (Scope::User, "usr_1"), 0, "user"),
                skill("t", (Scope::Tool, "acme.*"), 0, "tool"),
                skill("b", GLOBAL, 1, "global-b"),
                skill("a", GLOBAL, 1, "global-a"),
                skill("z", GLOBAL, 5, "global-z"),
                skill("ten", (Scope::Tenant, "acme"), 0, "tenant"),
                skill("other", (Scope::Tenant, "globex"), 0, "nope"),
            ],
            SkillLimits { max_bytes: 58 },
        )
        .unwrap();
        let r = skills.resolve("acme", "acme.orders.lookup", &["usr_1"]);
        assert_eq!(
            r.text.as_deref(),
            Some("global-z\n\nglobal-a\n\nglobal-b\n\ntenant\n\ntool\n\nuser")
        );
        assert_eq!(
            r.included().collect::<Vec<_>>(),
            ["z", "a", "b", "ten", "t", "u"]
        );
        assert_eq!(
            r.trace[0],
            Traced {
                level: Level::Global,
                skill: Some("z".into()),
                priority: Some(5),
                matched: true,
                included: true
            }
        );
        assert_eq!(r.dropped().count(), 0);
        let nothing = skills.resolve("initech", "other.tool", &[]);
        assert_eq!(nothing.trace.len(), 6, "{nothing:?}");
        assert_eq!(
            nothing.trace[3],
            Traced {
                level: Level::Tenant,
                skill: None,
                priority: None,
                matched: false,
                included: false
            }
        );
        let capped = Skills::new(
            &[skill("a", GLOBAL, 0, "aaaa"), skill("b", GLOBAL, 0, "bbbb")],
            SkillLimits { max_bytes: 6 },
        )
        .unwrap()
        .resolve("x", "y.z", &[]);
        assert_eq!(capped.text.as_deref(), Some("aaaa"));
        assert_eq!(capped.dropped().collect::<Vec<_>>(), ["b"]);
        assert!(!capped.trace[1].included && capped.trace[1].matched);
    }

    #[test]
    fn refuses_secret_looking_text_and_duplicates() {
        let err = Skills::new(
            &[skill("k", GLOBAL, 0, "use api_key=sk_live_abcdefgh1234")],
            SkillLimits::default(),
        )
        .unwrap_err();
        assert!(
            matches!(err, SkillError::Secret { ref name, .. } if name == "k"),
            "{err}"
        );
        let err = Skills::new(
            &[skill("d", GLOBAL, 0, "x"), skill("d", GLOBAL, 0, "y")],
            SkillLimits::default(),
        )
        .unwrap_err();
        assert!(matches!(err, SkillError::Duplicate(_)));
    }
}

//! Capability ids from source names, and the `--include`/`--exclude` filter over those names.
//!
//! A name longer than a capability id may be (64 characters once made valid) is cut, and the
//! cut name ends in `_` and a [`SUFFIX_LEN`]-digit suffix from the SHA-256 of the whole source
//! name: two long names that share their first 55 characters (GitHub's operationIds do) stay
//! two capabilities, and each keeps its id from one import to the next, whatever else the
//! source holds. The review table says which names were shortened.

use std::collections::BTreeMap;

use globset::{Glob, GlobSet, GlobSetBuilder};
use sha2::{Digest, Sha256};

use super::error::ImportError;

/// The longest capability id a manifest accepts.
const MAX_ID: usize = 64;
/// Hex digits of a shortened name's suffix: 32 bits, so two long names of one source meet
/// by chance about once in four billion pairs (and [`Ids::assign`] refuses them if they do).
pub const SUFFIX_LEN: usize = 8;

/// A capability id for source name `name`: lowercase ASCII letters, digits, `_` and `-`,
/// every other run of characters one `_`, starting with a letter or digit, at most 64 long
/// (a longer one cut and given its suffix: see the module docs). `None` if nothing usable is
/// left.
pub fn capability_id(name: &str) -> Option<String> {
    let id = sanitized(name)?;
    if id.len() <= MAX_ID {
        return Some(id);
    }
    let digest = hex::encode(Sha256::digest(name.as_bytes()));
    let mut cut = id[..MAX_ID - 1 - SUFFIX_LEN].to_owned();
    while cut.ends_with(['_', '-']) {
        cut.pop();
    }
    Some(format!("{cut}_{}", &digest[..SUFFIX_LEN]))
}

/// `name` made of capability-id characters, uncut; `None` if nothing usable is left.
fn sanitized(name: &str) -> Option<String> {
    let mut id = String::with_capacity(name.len());
    let mut gap = false;
    for c in name.chars() {
        let c = c.to_ascii_lowercase();
        if c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_' {
            if gap && !id.is_empty() {
                id.push('_');
            }
            gap = false;
            id.push(c);
        } else {
            gap = true;
        }
    }
    let mut id = id.trim_start_matches(['_', '-']).to_owned();
    while id.ends_with(['_', '-']) {
        id.pop();
    }
    (!id.is_empty()).then_some(id)
}

/// Whether `name`'s capability id was cut to fit and carries the suffix.
pub fn shortened(name: &str) -> bool {
    sanitized(name).is_some_and(|id| id.len() > MAX_ID)
}

/// Assigns capability ids to source names in order, refusing two names that meet.
#[derive(Debug, Default)]
pub struct Ids {
    taken: BTreeMap<String, String>,
}

impl Ids {
    /// The id for `name`, or why there is none.
    pub fn assign(&mut self, name: &str) -> Result<String, ImportError> {
        let id = capability_id(name).ok_or_else(|| ImportError::Unnamable {
            source_name: name.to_owned(),
        })?;
        if let Some(first) = self.taken.get(&id) {
            return Err(ImportError::Collision {
                capability: id,
                first: first.clone(),
                second: name.to_owned(),
            });
        }
        self.taken.insert(id.clone(), name.to_owned());
        Ok(id)
    }

    /// The id for `name`, a `kind` of item (`prompt`, `resource`, `resource-template`) that
    /// shares one set of ids with the adapter's tools: its own, or, where an item named alike
    /// took it first (mcp-server-fetch serves a tool and a prompt both named `fetch`),
    /// `<id>-<kind>`. Two items of one kind that meet are refused as two tools are.
    pub fn assign_kind(&mut self, name: &str, kind: &str) -> Result<String, ImportError> {
        let Some(id) = capability_id(name) else {
            return self.assign(name);
        };
        if !self.taken.contains_key(&id) {
            return self.assign(name);
        }
        let suffixed = format!("{id}-{kind}");
        if suffixed.len() > MAX_ID || self.taken.contains_key(&suffixed) {
            return self.assign(name);
        }
        self.taken.insert(suffixed.clone(), name.to_owned());
        Ok(suffixed)
    }
}

/// `--include` and `--exclude`: globs over source names.
#[derive(Debug)]
pub struct Filter {
    include: Option<GlobSet>,
    exclude: GlobSet,
}

impl Filter {
    /// The filter; no `include` globs means everything is included.
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, ImportError> {
        let include = if include.is_empty() {
            None
        } else {
            Some(set(include)?)
        };
        Ok(Self {
            include,
            exclude: set(exclude)?,
        })
    }

    /// Why `name` is left out, if it is.
    pub fn refuses(&self, name: &str) -> Option<&'static str> {
        if self.include.as_ref().is_some_and(|set| !set.is_match(name)) {
            Some("not matched by --include")
        } else if self.exclude.is_match(name) {
            Some("matched by --exclude")
        } else {
            None
        }
    }
}

fn set(globs: &[String]) -> Result<GlobSet, ImportError> {
    let mut builder = GlobSetBuilder::new();
    for glob in globs {
        builder.add(Glob::new(glob).map_err(|e| ImportError::Glob {
            glob: glob.clone(),
            reason: e.kind().to_string(),
        })?);
    }
    builder.build().map_err(|e| ImportError::Glob {
        glob: globs.join(", "),
        reason: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_capability_ids() {
        for (name, id) in [
            ("get_forecast", "get_forecast"),
            ("Get Forecast", "get_forecast"),
            ("repo.search/code", "repo_search_code"),
            ("__private", "private"),
            ("GET /pets/{petId}", "get_pets_petid"),
            ("créer-note", "cr_er-note"),
        ] {
            assert_eq!(capability_id(name).as_deref(), Some(id), "{name}");
        }
        assert_eq!(capability_id("!!!"), None);
        assert!(!shortened("get_forecast") && !shortened(&"a".repeat(64)));
    }

    /// Two names that agree on their first 64 characters (GitHub's
    /// `enterprise-admin/list-self-hosted-runner-groups-for-enterprise...` operations do) stay
    /// two capabilities; each id is the same at every import and depends on its name alone.
    #[test]
    fn long_names_are_cut_with_a_stable_suffix() {
        let stem = "actions/list-selected-repositories-enabled-github-actions-for-an-organization";
        let (a, b) = (format!("{stem}-a"), format!("{stem}-b"));
        let (id_a, id_b) = (capability_id(&a).unwrap(), capability_id(&b).unwrap());
        assert_eq!(
            id_a,
            format!(
                "actions_list-selected-repositories-enabled-github-actio_{}",
                &hex::encode(Sha256::digest(a.as_bytes()))[..8]
            )
        );
        assert_eq!((id_a.len(), id_b.len()), (64, 64));
        assert_ne!(id_a, id_b);
        assert!(shortened(&a) && shortened(&b));
        let mut ids = Ids::default();
        assert_eq!(ids.assign(&b).unwrap(), id_b);
        assert_eq!(ids.assign(&a).unwrap(), id_a);
        // A cut that ends at a separator drops it before the suffix.
        let id = capability_id(&format!("{}_{}", "x".repeat(54), "y".repeat(20))).unwrap();
        assert_eq!(&id[..55], format!("{}_", "x".repeat(54)));
        assert_eq!(id.len(), 54 + 1 + 8);
    }

    #[test]
    fn a_prompt_named_like_a_tool_gets_an_id_of_its_own() {
        let mut ids = Ids::default();
        assert_eq!(ids.assign("fetch").unwrap(), "fetch");
        assert_eq!(ids.assign_kind("fetch", "prompt").unwrap(), "fetch-prompt");
        assert_eq!(ids.assign_kind("notes", "resource").unwrap(), "notes");
        // Two prompts that meet are still refused.
        assert!(ids.assign_kind("fetch", "prompt").is_err());
    }

    #[test]
    fn refuses_names_that_collide_after_sanitizing() {
        let mut ids = Ids::default();
        assert_eq!(ids.assign("Get Forecast").unwrap(), "get_forecast");
        let err = ids.assign("get.forecast").unwrap_err();
        assert_eq!(
            err.to_string(),
            "`Get Forecast` and `get.forecast` both become capability `get_forecast`; leave one \
             out with --exclude, or rename it upstream"
        );
        assert!(matches!(
            ids.assign("???"),
            Err(ImportError::Unnamable { .. })
        ));
    }

    #[test]
    fn filters_by_include_then_exclude() {
        let filter = Filter::new(&["get_*".into()], &["get_secret*".into()]).unwrap();
        assert_eq!(filter.refuses("get_forecast"), None);
        assert_eq!(
            filter.refuses("delete_all"),
            Some("not matched by --include")
        );
        assert_eq!(filter.refuses("get_secrets"), Some("matched by --exclude"));
        let err = Filter::new(&["[".into()], &[]).unwrap_err();
        assert!(err.to_string().starts_with("glob `[`: "), "{err}");
    }
}

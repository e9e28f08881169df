//! The signed request: the `[stdio]` table of an adapter manifest that `gatehouse import mcp
//! --stdio` writes. It pins what runs (the program, its arguments and, for a package from npm
//! or PyPI, the exact version, the registry's integrity digest and a digest of the installed
//! files) and names what the server asks for (environment variable names, directories).
//! Nothing here is granted: the operator's `[[stdio.server]]` entry is the grant
//! ([`super::config`]).
//!
//! ```toml
//! [stdio]
//! command = "/usr/bin/node"
//! args = ["{package}/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/srv/docs"]
//! env = ["LOG_LEVEL"]
//! dirs = ["/srv/docs:rw"]
//!
//! [stdio.package]
//! registry = "npm"
//! name = "@modelcontextprotocol/server-filesystem"
//! version = "2026.8.31"
//! integrity = "sha512-..."
//! digest = "sha256:..."
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The placeholder in `command` and `args` that stands for the package's install directory.
pub const PACKAGE_PLACEHOLDER: &str = "{package}";

/// What a stdio MCP server is and asks for, as signed in its adapter's manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StdioSpec {
    /// The program, an absolute path (resolved at import), or under `{package}`.
    pub command: String,
    /// Its arguments, in order; `{package}` stands for the package's install directory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Names of the environment variables the server is given; the operator binds each one's
    /// value in `[[stdio.server]] env`. Nothing else of any environment reaches it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Directories the server asks to see, as `PATH:ro` or `PATH:rw` (absolute paths).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dirs: Vec<DirGrant>,
    /// The package it runs, when it came from npm or PyPI.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackagePin>,
}

/// A package from a registry, pinned.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PackagePin {
    /// Which registry.
    pub registry: Registry,
    /// The package's name there, e.g. `@modelcontextprotocol/server-filesystem`.
    pub name: String,
    /// The exact version installed.
    pub version: String,
    /// The registry's digest of the package's archive: npm's `dist.integrity` (`sha512-...`),
    /// or for PyPI `sha256:` of the distribution file pip installed.
    pub integrity: String,
    /// `sha256:` over the installed directory (every file's path, mode and contents, every
    /// link's target; see [`super::pin::tree_digest`]): what the gateway checks before it
    /// starts the server.
    pub digest: String,
}

/// The registries a package may come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Registry {
    /// npm, installed with `npm install` into `node_modules`.
    Npm,
    /// PyPI, installed with pip into a virtual environment.
    Pypi,
}

impl Registry {
    /// `npm` or `pypi`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Npm => "npm",
            Self::Pypi => "pypi",
        }
    }
}

impl PackagePin {
    /// The directory the package is installed in under `packages_dir`:
    /// `<registry>/<name with / as +>@<version>`.
    pub fn install_dir(&self, packages_dir: &Path) -> PathBuf {
        packages_dir.join(self.registry.as_str()).join(format!(
            "{}@{}",
            self.name.replace('/', "+"),
            self.version
        ))
    }
}

/// How a directory is shown to the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DirMode {
    /// Read-only.
    Ro,
    /// Read-write.
    Rw,
}

/// A directory and how the server sees it, written `PATH:ro` or `PATH:rw` (`PATH` alone is
/// read-only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DirGrant {
    /// An absolute path without `..` segments.
    pub path: PathBuf,
    /// Read-only or read-write.
    pub mode: DirMode,
}

impl DirGrant {
    /// Parses `PATH[:ro|:rw]`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let (path, mode) = match text.rsplit_once(':') {
            Some((path, "ro")) => (path, DirMode::Ro),
            Some((path, "rw")) => (path, DirMode::Rw),
            _ => (text, DirMode::Ro),
        };
        let path = PathBuf::from(path);
        let problem = |what: &str| {
            format!("directory `{text}`: {what}; write an absolute path, then `:ro` or `:rw`")
        };
        if !path.is_absolute() {
            return Err(problem("the path is not absolute"));
        }
        if path
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir))
        {
            return Err(problem("the path holds `..`"));
        }
        if path == Path::new("/") {
            return Err(problem("the whole file system cannot be granted"));
        }
        Ok(Self { path, mode })
    }

    /// Whether `self` lies within `other`, with no wider mode.
    pub fn within(&self, other: &Self) -> bool {
        self.path.starts_with(&other.path) && self.mode <= other.mode
    }
}

impl TryFrom<String> for DirGrant {
    type Error = String;
    fn try_from(text: String) -> Result<Self, String> {
        Self::parse(&text)
    }
}

impl From<DirGrant> for String {
    fn from(dir: DirGrant) -> Self {
        let mode = match dir.mode {
            DirMode::Ro => "ro",
            DirMode::Rw => "rw",
        };
        format!("{}:{mode}", dir.path.display())
    }
}

impl StdioSpec {
    /// Checks what can be checked without the host: an absolute command, environment variable
    /// names, a package whose fields are set.
    pub fn validate(&self) -> Result<(), String> {
        let command = self.command.replace(PACKAGE_PLACEHOLDER, "/package");
        if !Path::new(&command).is_absolute() {
            return Err(format!(
                "[stdio] command `{}` is not an absolute path; import again, which resolves it",
                self.command
            ));
        }
        if self.uses_package() && self.package.is_none() {
            return Err(
                "[stdio] uses `{package}` but has no [stdio.package] pin; import again".to_owned(),
            );
        }
        if let Some(name) = self.env.iter().find(|name| !is_env_name(name)) {
            return Err(format!(
                "[stdio] env `{name}` is not a variable name (letters, digits and `_`, not \
                 starting with a digit)"
            ));
        }
        if let Some(package) = &self.package
            && (package.name.is_empty()
                || package.version.is_empty()
                || !package.digest.starts_with("sha256:"))
        {
            return Err(format!(
                "[stdio.package] `{}` needs a name, a version and a `sha256:` digest",
                package.name
            ));
        }
        Ok(())
    }

    /// Whether the command or an argument names the package directory.
    pub fn uses_package(&self) -> bool {
        self.command.contains(PACKAGE_PLACEHOLDER)
            || self.args.iter().any(|a| a.contains(PACKAGE_PLACEHOLDER))
    }
}

/// Whether `name` is an environment variable name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_directories_with_modes() {
        for (text, path, mode) in [
            ("/srv/docs", "/srv/docs", DirMode::Ro),
            ("/srv/docs:ro", "/srv/docs", DirMode::Ro),
            ("/srv/docs:rw", "/srv/docs", DirMode::Rw),
            ("/srv/a:b:rw", "/srv/a:b", DirMode::Rw),
        ] {
            let dir = DirGrant::parse(text).unwrap();
            assert_eq!((dir.path.as_path(), dir.mode), (Path::new(path), mode));
        }
    }

    #[test]
    fn rejects_relative_parent_and_root_directories() {
        for (text, problem) in [
            ("srv/docs", "not absolute"),
            ("/srv/../etc:ro", "`..`"),
            ("/:rw", "whole file system"),
        ] {
            let err = DirGrant::parse(text).unwrap_err();
            assert!(err.contains(problem), "{text}: {err}");
        }
    }

    #[test]
    fn a_grant_lies_within_a_request_with_no_wider_mode() {
        let rw = DirGrant::parse("/srv:rw").unwrap();
        let ro = DirGrant::parse("/srv:ro").unwrap();
        assert!(DirGrant::parse("/srv/docs:ro").unwrap().within(&rw));
        assert!(!DirGrant::parse("/srv/docs:rw").unwrap().within(&ro));
        assert!(!DirGrant::parse("/srvx:ro").unwrap().within(&ro));
    }

    #[test]
    fn rejects_relative_commands_and_bad_env_names() {
        let spec = StdioSpec {
            command: "node".to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            dirs: Vec::new(),
            package: None,
        };
        assert!(
            spec.validate()
                .unwrap_err()
                .contains("not an absolute path")
        );
        let spec = StdioSpec {
            command: "/usr/bin/node".to_owned(),
            env: vec!["1BAD".to_owned()],
            ..spec
        };
        assert!(spec.validate().unwrap_err().contains("`1BAD`"));
    }
}

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
use std::sync::LazyLock;

use regex::Regex;
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

    /// The registry's own name, for messages: `npm` or `PyPI`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Npm => "npm",
            Self::Pypi => "PyPI",
        }
    }

    /// Checks that `name` is a package name of this registry: npm's (`name` or
    /// `@scope/name`, each part of the characters a URL keeps as they are, not starting with
    /// `.` or `_`, at most 214 characters) or PyPI's (PEP 508: letters, digits, `.`, `_` and
    /// `-`, starting and ending with a letter or digit). Either way it holds no path separator
    /// but a scope's one `/`, and is never `.` or `..`: the name is part of the install
    /// directory's name, so a name that is not one could move it out of `packages_dir`.
    pub fn check_name(self, name: &str) -> Result<(), String> {
        static NPM: LazyLock<Regex> = LazyLock::new(|| {
            let part = r"[A-Za-z0-9\-~!*'()][A-Za-z0-9._\-~!*'()]*";
            Regex::new(&format!("^(@{part}/)?{part}$")).expect("a valid pattern")
        });
        static PYPI: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new("^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$").expect("a valid pattern")
        });
        let (valid, rule) = match self {
            Self::Npm => (
                NPM.is_match(name) && name.len() <= 214,
                "npm's rules: `name` or `@scope/name`, letters, digits and `-._~!*'()`, not \
                 starting with `.` or `_`",
            ),
            Self::Pypi => (
                PYPI.is_match(name),
                "PEP 508: letters, digits, `.`, `_` and `-`, starting and ending with a letter \
                 or digit",
            ),
        };
        if valid {
            return Ok(());
        }
        Err(format!(
            "{} package name `{name}` is not a package name ({rule}); name the package as the \
             registry does",
            self.label()
        ))
    }

    /// Checks that `version` is a version of this registry: a semantic version for npm
    /// (`1.2.3`, `1.2.3-rc.1+build.5`), a PEP 440 version for PyPI (`2026.10.19`, `1.0rc1`,
    /// `1!2.0.post1+local.7`). Neither holds a path separator or `..`: the version is part
    /// of the install directory's name.
    pub fn check_version(self, name: &str, version: &str) -> Result<(), String> {
        // PEP 440's appendix B, anchored.
        static PEP_440: LazyLock<Regex> = LazyLock::new(|| {
            Regex::new(
                r"(?i)^v?([0-9]+!)?[0-9]+(\.[0-9]+)*([-_.]?(a|b|c|rc|alpha|beta|pre|preview)[-_.]?[0-9]*)?((-[0-9]+)|([-_.]?(post|rev|r)[-_.]?[0-9]*))?([-_.]?dev[-_.]?[0-9]*)?(\+[a-z0-9]+([-_.][a-z0-9]+)*)?$",
            )
            .expect("a valid pattern")
        });
        let (valid, kind) = match self {
            Self::Npm => (
                semver::Version::parse(version).is_ok(),
                "a semantic version (MAJOR.MINOR.PATCH, e.g. `1.2.3`)",
            ),
            Self::Pypi => (
                PEP_440.is_match(version),
                "a PEP 440 version (e.g. `1.2.3`)",
            ),
        };
        if valid {
            return Ok(());
        }
        Err(format!(
            "{} package `{name}`: version `{version}` is not {kind}; the version names its \
             install directory under `packages_dir`, so the package is refused: pin a \
             published version",
            self.label()
        ))
    }
}

impl PackagePin {
    /// Checks the name and version as [`Registry::check_name`] and
    /// [`Registry::check_version`] do: what [`Self::install_dir`] joins must stay one
    /// directory under `packages_dir`.
    pub fn check(&self) -> Result<(), String> {
        self.registry.check_name(&self.name)?;
        self.registry.check_version(&self.name, &self.version)
    }

    /// The directory the package is installed in under `packages_dir`:
    /// `<registry>/<name with / as +>@<version>`; a pin that passes [`Self::check`] names
    /// one directory there.
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

    /// The paths of `dirs` granted read-write, `, ` between them; `None` when none is.
    pub fn writable(dirs: &[Self]) -> Option<String> {
        let writable: Vec<String> = (dirs.iter())
            .filter(|dir| dir.mode == DirMode::Rw)
            .map(|dir| dir.path.display().to_string())
            .collect();
        (!writable.is_empty()).then(|| writable.join(", "))
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
    /// names, a package whose fields are set, with a name and version of its registry.
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
        if let Some(package) = &self.package {
            if package.name.is_empty()
                || package.version.is_empty()
                || !package.digest.starts_with("sha256:")
            {
                return Err(format!(
                    "[stdio.package] `{}` needs a name, a version and a `sha256:` digest",
                    package.name
                ));
            }
            package
                .check()
                .map_err(|e| format!("[stdio.package]: {e}"))?;
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
    fn accepts_package_names_and_versions_of_each_registry() {
        for (registry, name, version) in [
            (
                Registry::Npm,
                "@modelcontextprotocol/server-filesystem",
                "2026.8.31",
            ),
            (Registry::Npm, "left-pad", "1.3.0"),
            (Registry::Npm, "JSONStream", "1.3.5-rc.1+build.7"),
            (Registry::Pypi, "mcp-server-time", "2026.10.19"),
            (
                Registry::Pypi,
                "Zope.Interface_x",
                "1!2.0rc1.post3.dev4+local.7",
            ),
            (Registry::Pypi, "a", "v1.0"),
        ] {
            let pin = PackagePin {
                registry,
                name: name.to_owned(),
                version: version.to_owned(),
                integrity: String::new(),
                digest: String::new(),
            };
            assert_eq!(pin.check(), Ok(()), "{name} {version}");
            let dir = pin.install_dir(Path::new("/p"));
            assert_eq!(dir.parent().unwrap().parent(), Some(Path::new("/p")));
        }
    }

    #[test]
    fn rejects_names_and_versions_that_are_no_one_directory() {
        for (registry, name, problem) in [
            (
                Registry::Npm,
                "..",
                "npm package name `..` is not a package name",
            ),
            (Registry::Npm, ".hidden", "not a package name"),
            (Registry::Npm, "a/b", "not a package name"),
            (Registry::Npm, "@s/a/b", "not a package name"),
            (Registry::Npm, "@s/..", "not a package name"),
            (Registry::Npm, "", "not a package name"),
            (Registry::Pypi, "../victim", "PyPI package name `../victim`"),
            (Registry::Pypi, "a b", "not a package name"),
            (Registry::Pypi, "-a", "not a package name"),
        ] {
            let err = registry.check_name(name).unwrap_err();
            assert!(err.contains(problem), "{name}: {err}");
        }
        for (registry, version) in [
            (Registry::Npm, "1.0.0/../../../victim"),
            (Registry::Npm, ".."),
            (Registry::Npm, "1.0"),
            (Registry::Npm, "1.0.0\\..\\x"),
            (Registry::Pypi, "1.0/../../../victim"),
            (Registry::Pypi, "1..0"),
            (Registry::Pypi, ".."),
            (Registry::Pypi, ""),
        ] {
            let err = registry.check_version("p", version).unwrap_err();
            assert!(
                err.contains(&format!("version `{version}` is not")),
                "{version}: {err}"
            );
        }
        let spec = StdioSpec {
            command: "/usr/bin/node".to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            dirs: Vec::new(),
            package: Some(PackagePin {
                registry: Registry::Npm,
                name: "echo-server".to_owned(),
                version: "1.0.0/../../../victim".to_owned(),
                integrity: "sha512-x".to_owned(),
                digest: "sha256:x".to_owned(),
            }),
        };
        let err = spec.validate().unwrap_err();
        assert!(
            err.starts_with("[stdio.package]: npm package `echo-server`"),
            "{err}"
        );
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

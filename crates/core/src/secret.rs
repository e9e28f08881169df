//! Secrets the operator hands the host (egress credentials, API keys): read once, at load,
//! from an environment variable or a file, and never printed.

use std::path::Path;

/// A secret value. Its `Debug` output is redacted and it has no `Display`, so it cannot end up
/// in a log line or an error message by accident; [`Secret::expose`] is the one way to read it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the one place that must send or compare it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Reads a secret from exactly one of an environment variable and a file, trimmed. Errors name
/// the variable or file and the fix, never the value.
pub fn read(env: Option<&str>, file: Option<&Path>) -> Result<Secret, String> {
    let raw = match (env, file) {
        (Some(var), None) => std::env::var(var).map_err(|_| {
            format!(
                "environment variable `{var}` is not set (or not UTF-8); set it in the host's environment"
            )
        })?,
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?,
        (Some(_), Some(_)) | (None, None) => {
            return Err("set exactly one of `env` and `file`".to_owned());
        }
    };
    let secret = raw.trim();
    if secret.is_empty() {
        return Err("the secret is empty".to_owned());
    }
    Ok(Secret(secret.to_owned()))
}

/// Writes a new file readable by its owner only (mode 0600 on Unix), such as a signing key or
/// a token; an existing file is an error, never overwritten.
pub fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(bytes)
}

/// A key of at least 32 bytes the gateway keeps (one that seals `requestState`s, one that
/// seals delegations): read from `path` (64 or more hex digits, or 32 or more raw bytes), or
/// made there (random, mode 0600, its folder made) if the file does not exist; without a
/// path, made for this process alone. `setting` names the config key in errors, e.g.
/// ``"`[mcp] request_state_key_file`"``.
pub fn key_file(path: Option<&Path>, setting: &str) -> Result<Vec<u8>, String> {
    let fresh = || {
        let mut key = vec![0_u8; 32];
        getrandom::fill(&mut key).map_err(|e| format!("the system gives no random bytes: {e}"))?;
        Ok::<_, String>(key)
    };
    let Some(path) = path else {
        return fresh();
    };
    let shown = path.display();
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let trimmed = text.trim();
            let key = match hex::decode(trimmed) {
                Ok(key) if trimmed.len() >= 64 => key,
                _ => bytes,
            };
            if key.len() < 32 {
                return Err(format!(
                    "{setting} `{shown}` holds {} bytes; a key needs at least 32 (64 hex digits): \
                     delete the file and the gateway makes one",
                    key.len()
                ));
            }
            Ok(key)
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            let key = fresh()?;
            if let Some(dir) = path.parent().filter(|dir| !dir.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {setting} `{shown}`: {e}"))?;
            }
            write_private(path, hex::encode(&key).as_bytes())
                .map_err(|e| format!("cannot create {setting} `{shown}`: {e}"))?;
            Ok(key)
        }
        Err(error) => Err(format!("cannot read {setting} `{shown}`: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_file_is_made_once_then_read_and_a_short_one_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys/state.key");
        let made = key_file(Some(&path), "`[x] key_file`").unwrap();
        assert_eq!(made.len(), 32);
        assert_eq!(key_file(Some(&path), "`[x] key_file`").unwrap(), made);
        std::fs::write(&path, "abcd").unwrap();
        let error = key_file(Some(&path), "`[x] key_file`").unwrap_err();
        assert!(error.starts_with("`[x] key_file` `"), "{error}");
        assert!(error.contains("holds 4 bytes"), "{error}");
        assert_ne!(key_file(None, "x").unwrap(), key_file(None, "x").unwrap());
    }

    #[test]
    fn reads_a_trimmed_file_and_never_prints_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "  s3cr3t-value\n").unwrap();
        let secret = read(None, Some(&path)).unwrap();
        assert_eq!(secret.expose(), "s3cr3t-value");
        assert_eq!(format!("{secret:?}"), "Secret(<redacted>)");
    }

    #[test]
    fn refuses_missing_empty_and_ambiguous_sources() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        assert_eq!(
            read(None, Some(&empty)),
            Err("the secret is empty".to_owned())
        );
        assert_eq!(
            read(None, None),
            Err("set exactly one of `env` and `file`".to_owned())
        );
        assert_eq!(
            read(Some("X"), Some(&empty)),
            Err("set exactly one of `env` and `file`".to_owned())
        );
        let unset = read(Some("GATEHOUSE_TEST_UNSET_SECRET_VAR"), None).unwrap_err();
        assert!(
            unset.contains("`GATEHOUSE_TEST_UNSET_SECRET_VAR` is not set"),
            "{unset}"
        );
        let missing = read(None, Some(&dir.path().join("nope"))).unwrap_err();
        assert!(missing.starts_with("cannot read `"), "{missing}");
    }
}

//! What a stdio server's failed file access means in its sandbox (issue 61). A server that
//! writes beside its own code, or to a directory it was not granted, fails with the operating
//! system's words (`EROFS: read-only file system, open '/…'`, `[Errno 13] Permission denied:
//! '/…'`), which name neither the sandbox nor the fix. When a tool's result is an error whose
//! text names such a failure and a path, the gateway adds a text block after the server's own
//! (which is kept) saying why, by where the path lies:
//! - outside every directory granted read-write: the sandbox lets the server write only
//!   there; grant one and point the server at it;
//! - in a directory granted read-only: grant it `rw`;
//! - in a directory granted `rw` that the server's user cannot write: which uid, and the
//!   `chown` that lets it.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Value, json};

use super::spec::{DirGrant, DirMode};

/// What the hint block starts with, so a reader tells it from the server's own text.
pub const PREFIX: &str = "gatehouse: ";

/// Node's `CODE: description, syscall '/path'` and Python's `[Errno N] description: '/path'`.
static FAILURE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r#"(?:\b(EROFS|EACCES|EPERM|ENOENT)\b[^'"\n]*|\[Errno (30|13|1|2)\][^'"\n]*)['"](/[^'"\n]+)['"]"#,
    )
    .expect("the pattern compiles")
});

/// Adds the hint to `answer` (a server's JSON-RPC answer to `tools/call`) when its result is
/// an error that names a failed access to a path; `dirs` are the server's granted directories
/// and `uid` the user it runs as (`None`: the gateway's own).
pub fn explain(answer: &mut Value, dirs: &[DirGrant], uid: Option<u32>) {
    let Some(result) = answer.get_mut("result") else {
        return;
    };
    if result["isError"] != Value::Bool(true) {
        return;
    }
    let Some(content) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return;
    };
    let hint = content
        .iter()
        .filter_map(|block| block["text"].as_str())
        .find_map(|text| {
            let found = FAILURE.captures(text)?;
            let code = match (found.get(1), found.get(2).map(|n| n.as_str())) {
                (Some(code), _) => code.as_str(),
                (None, Some("30")) => "EROFS",
                (None, Some("13")) => "EACCES",
                (None, Some("1")) => "EPERM",
                (None, _) => "ENOENT",
            };
            hint(code, Path::new(&found[3]), dirs, uid)
        });
    if let Some(hint) = hint {
        content.push(json!({ "type": "text", "text": format!("{PREFIX}{hint}") }));
    }
}

/// Why `code` at `path` happened in the sandbox, if the sandbox explains it.
fn hint(code: &str, path: &Path, dirs: &[DirGrant], uid: Option<u32>) -> Option<String> {
    let shown = path.display();
    let grant = dirs
        .iter()
        .filter(|dir| path.starts_with(&dir.path))
        .max_by_key(|dir| dir.path.components().count());
    let user = uid.map_or_else(
        || "the gateway's user".to_owned(),
        |uid| format!("uid {uid}"),
    );
    match grant {
        None => {
            let granted = DirGrant::writable(dirs).unwrap_or_else(|| "none".to_owned());
            Some(format!(
                "the sandbox lets the server write only in the directories granted to it \
                 read-write ({granted}); `{shown}` is outside them. Grant one that {user} can \
                 write (`--dir PATH:rw` at import, `dirs` of its [[stdio.server]] entry) and \
                 point the server at it (often an environment variable: `--env`)"
            ))
        }
        Some(dir) if dir.mode == DirMode::Ro && code != "ENOENT" => Some(format!(
            "`{}` is granted to the server read-only, so `{shown}` cannot be written; grant it \
             read-write (`{}:rw` in `dirs` of its [[stdio.server]] entry, `--dir` at import)",
            dir.path.display(),
            dir.path.display()
        )),
        Some(dir) if dir.mode == DirMode::Rw && matches!(code, "EACCES" | "EPERM") => {
            let fix = uid.map_or_else(
                || "make it writable by the gateway's user".to_owned(),
                |uid| format!("`chown -R {uid}:{uid} {}`", dir.path.display()),
            );
            Some(format!(
                "the server runs as {user}, which may not write `{shown}` in `{}` (granted \
                 read-write): {fix}",
                dir.path.display()
            ))
        }
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failed(text: &str) -> Value {
        json!({
            "jsonrpc": "2.0", "id": 1,
            "result": { "isError": true, "content": [{ "type": "text", "text": text }] },
        })
    }

    fn grant(text: &str) -> DirGrant {
        DirGrant::parse(text).unwrap()
    }

    /// The hint `explain` adds to a failed result of `text`, if any.
    fn hint_for(text: &str, dirs: &[DirGrant], uid: Option<u32>) -> Option<String> {
        let mut answer = failed(text);
        explain(&mut answer, dirs, uid);
        let content = answer["result"]["content"].as_array().unwrap();
        assert_eq!(content[0]["text"], text, "the server's own text is kept");
        content
            .get(1)
            .map(|b| b["text"].as_str().unwrap().to_owned())
    }

    #[test]
    fn a_write_outside_the_granted_directories_says_to_grant_one() {
        let node = "Error: EROFS: read-only file system, open \
                    '/opt/packages/server-memory/dist/memory.json'";
        let granted = [grant("/srv/docs:ro"), grant("/srv/data:rw")];
        let hint = hint_for(node, &granted, Some(64_948)).unwrap();
        assert!(hint.starts_with(PREFIX), "{hint}");
        for said in [
            "read-write (/srv/data)",
            "`/opt/packages/server-memory/dist/memory.json` is outside them",
            "`--dir PATH:rw`",
            "that uid 64948 can write",
            "`--env`",
        ] {
            assert!(hint.contains(said), "{said} in {hint}");
        }
        let python = "[Errno 30] Read-only file system: '/usr/lib/python3/x.db'";
        let hint = hint_for(python, &[], None).unwrap();
        assert!(
            hint.contains("read-write (none)") && hint.contains("the gateway's user"),
            "{hint}"
        );
    }

    #[test]
    fn a_read_only_grant_and_a_user_that_may_not_write_are_named() {
        let hint = hint_for(
            "EACCES: permission denied, open '/srv/data/m.json'",
            &[grant("/srv/data:ro")],
            Some(60_001),
        )
        .unwrap();
        assert!(
            hint.contains("`/srv/data` is granted to the server read-only")
                && hint.contains("`/srv/data:rw`"),
            "{hint}"
        );
        let hint = hint_for(
            "[Errno 13] Permission denied: '/srv/data/sub/m.json'",
            &[grant("/srv:ro"), grant("/srv/data:rw")],
            Some(60_001),
        )
        .unwrap();
        assert!(
            hint.contains("runs as uid 60001, which may not write `/srv/data/sub/m.json`")
                && hint.contains("`chown -R 60001:60001 /srv/data`"),
            "the innermost grant decides: {hint}"
        );
    }

    #[test]
    fn anything_else_is_left_as_it_is() {
        // A missing file in a granted directory, a result that is not an error, an error
        // naming no path.
        let granted = [grant("/srv/data:rw")];
        let missing = "ENOENT: no such file or directory, open '/srv/data/none.json'";
        assert_eq!(hint_for(missing, &granted, Some(1)), None);
        assert_eq!(hint_for("EACCES somewhere", &granted, Some(1)), None);
        let mut ok = failed("EROFS: read-only file system, open '/x'");
        ok["result"]["isError"] = json!(false);
        let before = ok.clone();
        explain(&mut ok, &granted, Some(1));
        assert_eq!(ok, before);
        let mut error =
            json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -1, "message": "EROFS '/x'" } });
        let before = error.clone();
        explain(&mut error, &granted, Some(1));
        assert_eq!(error, before);
    }
}

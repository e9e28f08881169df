//! Whether the user a stdio server runs as can reach what its sandbox shows it. Under a root
//! gateway the server runs as a user of its own ([`super::ServerConfig::run_as`]), started by
//! `setpriv` with that uid as its gid and no supplementary groups: a directory under a parent
//! only root may enter (a 0700 temporary directory, `/root`) is bound into the sandbox by
//! bubblewrap, which then fails with `Can't find source path …: Permission denied`, a message
//! that names neither the user nor the fix. This module checks first, from the permission bits
//! (ACLs are not read), and says which uid needs which path, and how to let it through.

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};

use super::sandbox::Launch;
use super::spec::DirMode;

/// What the server's user must be able to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read a directory (list and open what is in it), or a file.
    Read,
    /// Read and write a directory.
    Write,
    /// Run a program.
    Run,
}

impl Access {
    fn verb(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Run => "run",
        }
    }
}

/// Checks that uid `uid` (its gid the same, no other groups) can reach `path` for `access`:
/// enter each directory above it, and read (write, run) it. A path that does not exist passes:
/// what needs it says so in its own words. The error names the path, the uid, the directory
/// or file in the way with its mode and owner, and the fix.
pub fn check(uid: u32, path: &Path, access: Access) -> Result<(), String> {
    let Ok(real) = std::fs::canonicalize(path) else {
        return Ok(());
    };
    let blocked = |at: &Path, meta: &std::fs::Metadata, lacks: &str, fix: String| {
        Err(format!(
            "uid {uid} cannot {} {}: {} (mode {:04o}, owner uid {}, gid {}) does not let it \
             {lacks}; {fix}, or move it where uid {uid} can reach it",
            access.verb(),
            path.display(),
            at.display(),
            meta.mode() & 0o7777,
            meta.uid(),
            meta.gid()
        ))
    };
    let mut at = PathBuf::from("/");
    for part in real.parent().into_iter().flat_map(Path::components).skip(1) {
        at.push(part);
        let Ok(meta) = std::fs::metadata(&at) else {
            return Ok(());
        };
        if !allows(uid, &meta, 0o1) {
            return blocked(
                &at,
                &meta,
                "through",
                format!("`chmod o+x {}`", at.display()),
            );
        }
    }
    let Ok(meta) = std::fs::metadata(&real) else {
        return Ok(());
    };
    let dir = meta.is_dir();
    let (bits, lacks, fix) = match access {
        Access::Read if dir => (0o5, "read", format!("`chmod -R o+rX {}`", real.display())),
        Access::Read => (0o4, "read", format!("`chmod o+r {}`", real.display())),
        Access::Write => (
            0o7,
            "write",
            format!("`chown -R {uid}:{uid} {}`", real.display()),
        ),
        Access::Run => (0o5, "run", format!("`chmod o+rx {}`", real.display())),
    };
    if !allows(uid, &meta, bits) {
        return blocked(&real, &meta, lacks, fix);
    }
    Ok(())
}

/// Checks that the user `launch` runs as reaches what its sandbox binds: its program (when
/// neither the system's nor the package's), the package's install directory, and each
/// granted directory, read-only or read-write.
pub fn check_launch(launch: &Launch) -> Result<(), String> {
    let uid = launch.run_as;
    let in_package = launch
        .package_dir
        .as_ref()
        .is_some_and(|dir| launch.program.starts_with(dir));
    if !launch.program.starts_with("/usr") && !in_package {
        check(uid, &launch.program, Access::Run)?;
    }
    if let Some(dir) = &launch.package_dir {
        check(uid, dir, Access::Read).map_err(|e| {
            format!(
                "{e} (the package is installed under `[stdio] packages_dir`, `--packages-dir` \
                 at import: one uid {uid} can read)"
            )
        })?;
    }
    for grant in &launch.dirs {
        let access = match grant.mode {
            DirMode::Ro => Access::Read,
            DirMode::Rw => Access::Write,
        };
        check(uid, &grant.path, access)?;
    }
    Ok(())
}

/// Whether the permission bits of `meta` grant uid `uid` (gid `uid`, no other groups) every
/// bit of `wanted` (`0o4` read, `0o2` write, `0o1` execute or enter).
fn allows(uid: u32, meta: &std::fs::Metadata, wanted: u32) -> bool {
    let mode = meta.mode();
    let granted = if meta.uid() == uid {
        mode >> 6
    } else if meta.gid() == uid {
        mode >> 3
    } else {
        mode
    } & 0o7;
    granted & wanted == wanted
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    fn mode(path: &Path, mode: u32) {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    /// A uid that owns nothing here (the tests run as one user; the check reads bits only).
    const OTHER: u32 = 61_234;

    #[test]
    fn a_private_parent_is_named_with_its_mode_and_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("private");
        let docs = private.join("docs");
        std::fs::create_dir_all(&docs).unwrap();
        mode(dir.path(), 0o755);
        mode(&private, 0o700);
        mode(&docs, 0o755);
        let err = check(OTHER, &docs, Access::Read).unwrap_err();
        let owner = std::fs::metadata(&private).unwrap().uid();
        assert_eq!(
            err,
            format!(
                "uid {OTHER} cannot read {docs}: {private} (mode 0700, owner uid {owner}, gid \
                 {gid}) does not let it through; `chmod o+x {private}`, or move it where uid \
                 {OTHER} can reach it",
                docs = docs.display(),
                private = private.display(),
                gid = std::fs::metadata(&private).unwrap().gid(),
            )
        );
        mode(&private, 0o711);
        assert_eq!(check(OTHER, &docs, Access::Read), Ok(()));
        let write = check(OTHER, &docs, Access::Write).unwrap_err();
        assert!(
            write.contains(&format!("`chown -R {OTHER}:{OTHER} {}`", docs.display())),
            "{write}"
        );
        // Its owner may; a missing path is for its user to report.
        assert_eq!(check(owner, &docs, Access::Write), Ok(()));
        assert_eq!(check(OTHER, &docs.join("none"), Access::Read), Ok(()));
        let script = docs.join("run.sh");
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        mode(&script, 0o700);
        let run = check(OTHER, &script, Access::Run).unwrap_err();
        assert!(run.contains("does not let it run; `chmod o+rx"), "{run}");
        assert!(run.starts_with(&format!("uid {OTHER} cannot run {}", script.display())));
    }
}

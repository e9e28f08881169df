//! The digest of an installed package: what the gateway compares with the signed pin before
//! it starts a server, so a package changed on disk after the import is refused.

use std::io::Read;
use std::path::Path;

use sha2::{Digest, Sha256};

/// Entries one installed package may hold, at most: a directory past it is no package this
/// check should spend minutes on (the filesystem server's install holds about 4,000 files).
const MAX_ENTRIES: usize = 200_000;

/// `sha256:` over the tree at `root`: each entry in path order (bytes of the path relative to
/// `root`), with its kind; a file's executable bit and contents; a link's target (links are
/// not followed). Other kinds (sockets, devices) are refused.
pub fn tree_digest(root: &Path) -> Result<String, String> {
    let mut hasher = Sha256::new();
    let mut entries = 0usize;
    walk(root, root, &mut hasher, &mut entries)?;
    Ok(format!("sha256:{}", hex::encode(hasher.finalize())))
}

fn walk(root: &Path, dir: &Path, hasher: &mut Sha256, entries: &mut usize) -> Result<(), String> {
    let read = |e: std::io::Error, path: &Path| format!("cannot read {}: {e}", path.display());
    let mut children: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| read(e, dir))?
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .map_err(|e| read(e, dir))?;
    children.sort();
    for path in children {
        *entries += 1;
        if *entries > MAX_ENTRIES {
            return Err(format!(
                "{} holds more than {MAX_ENTRIES} entries",
                root.display()
            ));
        }
        let relative = path.strip_prefix(root).unwrap_or(&path);
        let name = relative.as_os_str().as_encoded_bytes();
        let meta = std::fs::symlink_metadata(&path).map_err(|e| read(e, &path))?;
        let kind = meta.file_type();
        hasher.update((name.len() as u64).to_le_bytes());
        hasher.update(name);
        if kind.is_symlink() {
            let target = std::fs::read_link(&path).map_err(|e| read(e, &path))?;
            let target = target.as_os_str().as_encoded_bytes();
            hasher.update(b"l");
            hasher.update((target.len() as u64).to_le_bytes());
            hasher.update(target);
        } else if kind.is_dir() {
            hasher.update(b"d");
            walk(root, &path, hasher, entries)?;
        } else if kind.is_file() {
            use std::os::unix::fs::PermissionsExt as _;
            let executable = meta.permissions().mode() & 0o111 != 0;
            hasher.update(if executable { b"x" } else { b"f" });
            hasher.update(meta.len().to_le_bytes());
            let mut file = std::fs::File::open(&path).map_err(|e| read(e, &path))?;
            let mut buf = [0u8; 64 * 1024];
            loop {
                let n = file.read(&mut buf).map_err(|e| read(e, &path))?;
                if n == 0 {
                    break;
                }
                hasher.update(&buf[..n]);
            }
        } else {
            return Err(format!(
                "{} is neither a file, a directory nor a link",
                path.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_byte_a_new_file_or_a_mode_changes_the_digest() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("lib")).unwrap();
        std::fs::write(dir.path().join("lib/index.js"), "console.log(1)").unwrap();
        std::os::unix::fs::symlink("lib/index.js", dir.path().join("bin")).unwrap();
        let first = tree_digest(dir.path()).unwrap();
        assert_eq!(tree_digest(dir.path()).unwrap(), first);
        assert!(first.starts_with("sha256:") && first.len() == 7 + 64);

        std::fs::write(dir.path().join("lib/index.js"), "console.log(2)").unwrap();
        let edited = tree_digest(dir.path()).unwrap();
        assert_ne!(edited, first);

        std::fs::set_permissions(
            dir.path().join("lib/index.js"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let executable = tree_digest(dir.path()).unwrap();
        assert_ne!(executable, edited);

        std::fs::write(dir.path().join("lib/extra.js"), "").unwrap();
        assert_ne!(tree_digest(dir.path()).unwrap(), executable);
    }
}

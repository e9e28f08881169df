//! Files replaced whole: written beside their final name, synced, then renamed over it, so a
//! reader (another thread, another process, the next start after a crash) finds the old file
//! or the new one, never part of one.

use std::io::Write as _;
use std::path::Path;

/// Writes `parts`, one after another, as the file at `path`, replacing any file there. The
/// bytes go first to `<path>.partial-<random>` in the same directory (so two writers of one
/// path never share it), which is removed when anything fails.
pub(crate) fn write(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let partial = path.with_extension(format!("partial-{:016x}", rand::random::<u64>()));
    let written = std::fs::File::create(&partial)
        .and_then(|mut file| {
            for part in parts {
                file.write_all(part)?;
            }
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&partial, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&partial);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("entry.b3.cwasm");
        write(&path, &[b"old"]).unwrap();
        write(&path, &[b"tag:", b"new"]).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"tag:new");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");

        let missing = dir.path().join("no-such-dir").join("entry");
        assert!(write(&missing, &[b"x"]).is_err());
        assert!(!dir.path().join("no-such-dir").exists());
    }
}

//! The stdio MCP servers the tests import, pinned (the import installs them from npm and PyPI),
//! and a directory their sandboxed user can reach.

use std::os::unix::fs::PermissionsExt as _;

/// npm's filesystem server.
pub const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";
/// npm's memory server: it keeps its graph in a file beside its code, unless
/// `MEMORY_FILE_PATH` names another.
pub const MEMORY: &str = "@modelcontextprotocol/server-memory@2026.8.31";
/// PyPI's time server.
pub const TIME: &str = "mcp-server-time==2026.10.19";

/// A temporary directory the sandboxed server's own user can reach (a root gateway runs it as
/// a user of its own).
///
/// # Panics
/// If the directory cannot be made.
pub fn open_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("a temporary directory");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("its mode");
    dir
}

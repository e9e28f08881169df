//! Why an import failed: each says what, where and the fix.

use std::path::PathBuf;

/// Why an import did not happen. Each says what to fix; the command line exits 2 on all.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The upstream URL is not an `http(s)://host[:port]/path` URL.
    #[error("`{url}` is not an http(s) URL, e.g. `https://tools.example.com/mcp`")]
    Url {
        /// The URL as given.
        url: String,
    },
    /// Nothing answered at the upstream's address.
    #[error("cannot reach {url}: {reason}; check the URL and that the server is running")]
    Unreachable {
        /// The upstream.
        url: String,
        /// The connection error.
        reason: String,
    },
    /// Something answered, but not as an A2A agent: no card, or no interface the adapter
    /// speaks.
    #[error("{url} did not answer as an A2A agent: {reason}")]
    NotA2a {
        /// The card's URL, or the agent's endpoint.
        url: String,
        /// What went wrong, bounded.
        reason: String,
    },
    /// The agent's card is signed, and its signature cannot be checked or does not verify.
    #[error("the agent card at {url}: {reason}")]
    Signature {
        /// The card's URL.
        url: String,
        /// Why, and the fix.
        reason: String,
    },
    /// Something answered, but not as an MCP server.
    #[error("{url} did not answer as an MCP server: {reason}")]
    NotMcp {
        /// The upstream.
        url: String,
        /// What went wrong, bounded.
        reason: String,
    },
    /// A `--header` is not `Name: [scheme ]${ENV}`.
    #[error("--header `{header}`: {problem}")]
    Header {
        /// The argument as given.
        header: String,
        /// What is wrong and the expected form.
        problem: String,
    },
    /// A stdio server could not be pinned, installed, started or listed.
    #[error("{0}")]
    Stdio(String),
    /// An `--include` or `--exclude` glob does not parse.
    #[error("glob `{glob}`: {reason}")]
    Glob {
        /// The glob.
        glob: String,
        /// The parser's message.
        reason: String,
    },
    /// The OpenAPI document does not parse.
    #[error("the spec is not valid {format} at line {line}, column {column}: {message}")]
    Syntax {
        /// `JSON` or `YAML`.
        format: &'static str,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        message: String,
    },
    /// The OpenAPI document parses but cannot be imported (its version, its server, a `$ref`
    /// that does not resolve).
    #[error("the spec: {0}")]
    Spec(String),
    /// Two source items map to the same capability id.
    #[error(
        "`{first}` and `{second}` both become capability `{capability}`; leave one out with \
         --exclude, or rename it upstream"
    )]
    Collision {
        /// The capability id.
        capability: String,
        /// The first item.
        first: String,
        /// The second item.
        second: String,
    },
    /// A source item's name has nothing a capability id can be made of.
    #[error(
        "`{source_name}` has no letter or digit to make a capability id of; leave it out with --exclude"
    )]
    Unnamable {
        /// The item.
        source_name: String,
    },
    /// The filters left nothing to import.
    #[error("nothing to import: {reason}")]
    Empty {
        /// What the source offered and what the filters left.
        reason: String,
    },
    /// More capabilities than one adapter may declare (`MAX_CAPABILITIES`).
    #[error(
        "{count} capabilities is more than one adapter may declare ({max}); import a part with \
         --include or --exclude"
    )]
    TooMany {
        /// How many the source yields after filtering.
        count: usize,
        /// The most one adapter may declare.
        max: usize,
    },
    /// The result would not be a valid manifest (a bad `--id`, a schema TOML cannot hold).
    #[error("the imported manifest is not valid: {0}")]
    Manifest(String),
    /// An existing import directory could not be read (`--check`), or the config `--config`
    /// merges into cannot take the import.
    #[error("{path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The output could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

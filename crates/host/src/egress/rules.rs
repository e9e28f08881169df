//! Destination patterns and method sets: the typed form of every egress request and grant.
//!
//! 1. A pattern is written `scheme://host[:port][/path-prefix]` and parsed once by
//!    [`UrlPattern::parse`]; the error shows the expected form.
//! 2. `scheme` is `http` or `https`. `host` is a DNS name (case-folded, internationalized names
//!    converted to punycode, one trailing dot dropped), `*.suffix` (any name *below* `suffix`,
//!    not `suffix` itself), `*` (any host), an IPv4 literal or a bracketed IPv6 literal.
//!    `port` is a number or `*`; without one, the scheme's default (80 / 443).
//! 3. A path prefix matches on segment boundaries: `/v1` matches `/v1` and `/v1/x`, not
//!    `/v1beta`; `/v1/` matches `/v1/x` only. No path (or `/`) matches every path. Paths are
//!    compared percent-decoded ([`decode_path`]), and a path an upstream server could read
//!    differently from the gate is refused outright: encoded slashes, backslashes and percent
//!    signs (`%2F`, `%5C`, `%25`), `;` path parameters (raw or `%3B`), control characters,
//!    bytes that are not UTF-8, and dot segments left after decoding, in any encoding.
//! 4. Userinfo, queries and fragments are refused in patterns; request URLs with userinfo are
//!    refused by the matcher (a credential in a URL would bypass credential injection).
//! 5. [`UrlPattern::covers`] says whether one pattern is at least as broad as another: an
//!    operator grant must be covered by something the manifest requested.
//! 6. Patterns and methods deserialize from their text, so a manifest's [`EgressRequest`] and
//!    an operator's grant are typed from the moment they are read; they serialize back to the
//!    text as written.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;

use http::Method;
use serde::{Deserialize, Serialize};
use url::{Host, Url};

/// Why a pattern or method list cannot be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// The text is not of the form `scheme://host[:port][/path-prefix]`.
    #[error(
        "`{pattern}` is not an egress pattern: {problem}; write `scheme://host[:port][/path-prefix]`, \
         e.g. `https://api.example.com/v1/` or `http://*.internal.example:8080`"
    )]
    Url {
        /// The pattern as written.
        pattern: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A method is not an uppercase HTTP method token.
    #[error("`{0}` is not an HTTP method; write uppercase methods such as \"GET\" or \"POST\"")]
    Method(String),
}

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTP over TLS.
    Https,
}

impl Scheme {
    fn parse(text: &str) -> Option<Self> {
        match text {
            "http" => Some(Self::Http),
            "https" => Some(Self::Https),
            _ => None,
        }
    }

    /// The scheme's default port.
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// The host part of a pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Any host (`*`).
    Any,
    /// Exactly this DNS name (lowercase ASCII, punycode).
    Name(String),
    /// Any name strictly below this suffix (`*.example.com` is stored as `example.com`).
    Below(String),
    /// Exactly this address.
    Ip(IpAddr),
}

/// The port part of a pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortPattern {
    /// Any port (`*`).
    Any,
    /// This port (the scheme's default when none was written).
    Is(u16),
}

/// A parsed `scheme://host[:port][/path-prefix]`. `Display` shows the normalized form;
/// [`UrlPattern::as_written`] and serialization give the text it was parsed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct UrlPattern {
    /// Scheme.
    pub scheme: Scheme,
    /// Host.
    pub host: HostPattern,
    /// Port.
    pub port: PortPattern,
    /// Path prefix, always starting with `/`.
    pub path: String,
    text: String,
}

/// A request destination, normalized by the WHATWG URL parser (dot segments resolved, host
/// case-folded and punycoded, default port filled in).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    /// Scheme.
    pub scheme: Scheme,
    /// Host as parsed.
    pub host: DestHost,
    /// Port (default filled in).
    pub port: u16,
    /// Normalized path, as sent (still percent-encoded).
    pub path: String,
    /// The path percent-decoded, as grants are matched against it.
    pub decoded_path: String,
    /// Query, without `?`.
    pub query: Option<String>,
}

/// Why a request URL is refused before any grant is consulted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DestinationError {
    /// Not an absolute `http`/`https` URL with a host, or it carries userinfo.
    Invalid,
    /// The path holds something upstream servers decode or treat specially (what, in words).
    AmbiguousPath(&'static str),
}

/// The host of a request destination.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DestHost {
    /// A DNS name, lowercase ASCII, no trailing dot.
    Name(String),
    /// An address literal.
    Ip(IpAddr),
}

impl fmt::Display for DestHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Name(name) => f.write_str(name),
            Self::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Self::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

impl Destination {
    /// Parses a request URL: [`DestinationError::Invalid`] for anything that is not an
    /// absolute `http`/`https` URL with a host and no userinfo,
    /// [`DestinationError::AmbiguousPath`] for a path [`decode_path`] refuses.
    pub fn parse(text: &str) -> Result<Self, DestinationError> {
        let invalid = DestinationError::Invalid;
        let url = Url::parse(text).map_err(|_| invalid)?;
        let scheme = Scheme::parse(url.scheme()).ok_or(invalid)?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid);
        }
        let host = match url.host().ok_or(invalid)? {
            Host::Domain(name) => DestHost::Name(trim_dot(name).ok_or(invalid)?.to_owned()),
            Host::Ipv4(ip) => DestHost::Ip(IpAddr::V4(ip)),
            Host::Ipv6(ip) => DestHost::Ip(IpAddr::V6(ip)),
        };
        let decoded_path = decode_path(url.path()).map_err(DestinationError::AmbiguousPath)?;
        Ok(Self {
            scheme,
            host,
            port: url.port().unwrap_or(scheme.default_port()),
            path: url.path().to_owned(),
            decoded_path,
            query: url.query().map(str::to_owned),
        })
    }

    /// `scheme://host:port/path`, without the query (which may carry data not meant for logs).
    pub fn without_query(&self) -> String {
        format!(
            "{}://{}:{}{}",
            self.scheme.as_str(),
            self.host,
            self.port,
            self.path
        )
    }

    /// The `Host` header value: the host, and the port unless it is the scheme's default.
    pub fn authority(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Path and query, for the request line.
    pub fn path_and_query(&self) -> String {
        match &self.query {
            Some(query) => format!("{}?{query}", self.path),
            None => self.path.clone(),
        }
    }
}

fn trim_dot(name: &str) -> Option<&str> {
    let name = name.strip_suffix('.').unwrap_or(name);
    (!name.is_empty() && !name.ends_with('.')).then_some(name)
}

impl UrlPattern {
    /// Parses `scheme://host[:port][/path-prefix]`.
    pub fn parse(pattern: &str) -> Result<Self, PatternError> {
        let fail = |problem: &str| PatternError::Url {
            pattern: pattern.to_owned(),
            problem: problem.to_owned(),
        };
        let (scheme_text, rest) = pattern
            .split_once("://")
            .ok_or_else(|| fail("it has no `scheme://`"))?;
        let scheme = Scheme::parse(scheme_text)
            .ok_or_else(|| fail("the scheme must be `http` or `https`"))?;
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let authority = &rest[..authority_end];
        if authority.contains('@') {
            return Err(fail(
                "userinfo (`user@`) is not allowed; bind credentials in the operator config",
            ));
        }
        if rest[authority_end..].contains(['?', '#']) {
            return Err(fail("a pattern cannot have a query or fragment"));
        }
        let (host_text, port) = split_port(authority)
            .ok_or_else(|| fail("the port must be a number from 1 to 65535, or `*`"))?;
        let (any, below, host_text) = match host_text {
            "*" => (true, false, "placeholder.invalid"),
            _ => match host_text.strip_prefix("*.") {
                Some(suffix) => (false, true, suffix),
                None => (false, false, host_text),
            },
        };
        if host_text.is_empty() {
            return Err(fail("the host is empty"));
        }
        if host_text.contains('*') {
            return Err(fail(
                "`*` may only be the whole host or its leftmost label, as in `*.example.com`",
            ));
        }
        let port_for_url = match port {
            PortPattern::Is(p) if p != 0 => format!(":{p}"),
            PortPattern::Is(_) | PortPattern::Any => String::new(),
        };
        let url = Url::parse(&format!(
            "{}://{host_text}{port_for_url}{}",
            scheme.as_str(),
            &rest[authority_end..]
        ))
        .map_err(|e| fail(&format!("{e}")))?;
        let host = match (any, url.host()) {
            (true, _) => HostPattern::Any,
            (false, Some(Host::Domain(name))) => {
                let name = trim_dot(name)
                    .ok_or_else(|| fail("the host is empty"))?
                    .to_owned();
                if below {
                    HostPattern::Below(name)
                } else {
                    HostPattern::Name(name)
                }
            }
            (false, Some(Host::Ipv4(ip))) if !below => HostPattern::Ip(IpAddr::V4(ip)),
            (false, Some(Host::Ipv6(ip))) if !below => HostPattern::Ip(IpAddr::V6(ip)),
            (false, Some(_)) => return Err(fail("`*.` cannot prefix an IP address")),
            (false, None) => return Err(fail("the host is empty")),
        };
        let port = match port {
            PortPattern::Is(_) => {
                PortPattern::Is(url.port_or_known_default().unwrap_or(scheme.default_port()))
            }
            PortPattern::Any => PortPattern::Any,
        };
        let path = decode_path(url.path()).map_err(|what| {
            fail(&format!(
                "the path holds {what}, which servers read differently"
            ))
        })?;
        Ok(Self {
            scheme,
            host,
            port,
            path,
            text: pattern.to_owned(),
        })
    }

    /// The pattern as it was written.
    pub fn as_written(&self) -> &str {
        &self.text
    }

    /// Whether `dest` is inside this pattern.
    pub fn matches(&self, dest: &Destination) -> bool {
        self.scheme == dest.scheme
            && self.host_matches(&dest.host)
            && match self.port {
                PortPattern::Any => true,
                PortPattern::Is(port) => port == dest.port,
            }
            && path_within(&dest.decoded_path, &self.path)
    }

    fn host_matches(&self, host: &DestHost) -> bool {
        match (&self.host, host) {
            (HostPattern::Any, _) => true,
            (HostPattern::Name(want), DestHost::Name(have)) => want == have,
            (HostPattern::Below(suffix), DestHost::Name(have)) => have
                .strip_suffix(suffix.as_str())
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            (HostPattern::Ip(want), DestHost::Ip(have)) => want == have,
            (HostPattern::Name(_) | HostPattern::Below(_), DestHost::Ip(_))
            | (HostPattern::Ip(_), DestHost::Name(_)) => false,
        }
    }

    /// Whether every destination `other` matches also matches `self`.
    pub fn covers(&self, other: &Self) -> bool {
        let host = match (&self.host, &other.host) {
            (HostPattern::Any, _) => true,
            (_, HostPattern::Any) => false,
            (HostPattern::Name(a), HostPattern::Name(b)) => a == b,
            (HostPattern::Below(a), HostPattern::Below(b)) => {
                a == b || self.host_matches(&DestHost::Name(b.clone()))
            }
            (HostPattern::Below(_), HostPattern::Name(b)) => {
                self.host_matches(&DestHost::Name(b.clone()))
            }
            (HostPattern::Ip(a), HostPattern::Ip(b)) => a == b,
            (HostPattern::Name(_) | HostPattern::Ip(_), HostPattern::Below(_))
            | (HostPattern::Name(_) | HostPattern::Below(_), HostPattern::Ip(_))
            | (HostPattern::Ip(_), HostPattern::Name(_)) => false,
        };
        let port = match (self.port, other.port) {
            (PortPattern::Any, _) => true,
            (PortPattern::Is(_), PortPattern::Any) => false,
            (PortPattern::Is(a), PortPattern::Is(b)) => a == b,
        };
        self.scheme == other.scheme && host && port && path_within(&other.path, &self.path)
    }
}

impl fmt::Display for UrlPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://", self.scheme.as_str())?;
        match &self.host {
            HostPattern::Any => f.write_str("*")?,
            HostPattern::Name(name) => f.write_str(name)?,
            HostPattern::Below(suffix) => write!(f, "*.{suffix}")?,
            HostPattern::Ip(IpAddr::V4(ip)) => write!(f, "{ip}")?,
            HostPattern::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]")?,
        }
        match self.port {
            PortPattern::Any => f.write_str(":*")?,
            PortPattern::Is(port) => write!(f, ":{port}")?,
        }
        f.write_str(&self.path)
    }
}

impl std::str::FromStr for UrlPattern {
    type Err = PatternError;

    fn from_str(text: &str) -> Result<Self, PatternError> {
        Self::parse(text)
    }
}

impl TryFrom<String> for UrlPattern {
    type Error = PatternError;

    fn try_from(text: String) -> Result<Self, PatternError> {
        Self::parse(&text)
    }
}

impl From<UrlPattern> for String {
    fn from(pattern: UrlPattern) -> Self {
        pattern.text
    }
}

/// Splits `host[:port]` (IPv6 in brackets). `None` when the port is not a valid port or `*`.
fn split_port(authority: &str) -> Option<(&str, PortPattern)> {
    let colon = match authority.rfind(':') {
        Some(i) if !authority[i..].contains(']') => i,
        _ => return Some((authority, PortPattern::Is(0))),
    };
    let (host, port) = (&authority[..colon], &authority[colon + 1..]);
    match port {
        "*" => Some((host, PortPattern::Any)),
        _ if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => {
            match port.parse::<u16>() {
                Ok(0) | Err(_) => None,
                Ok(p) => Some((host, PortPattern::Is(p))),
            }
        }
        _ => None,
    }
}

/// Percent-decodes a path (already normalized by the WHATWG parser) for matching. Refuses, in
/// words for the record, whatever an upstream server could read differently from the gate:
/// an encoded `/`, `\` or `%` (double encoding), a `;` path parameter (raw or encoded), a
/// backslash, a control character, bytes that are not UTF-8, a `%` not followed by two hex
/// digits, and a `.` or `..` segment left after decoding.
pub fn decode_path(path: &str) -> Result<String, &'static str> {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let byte = if bytes[i] == b'%' {
            let decoded = bytes
                .get(i + 1..i + 3)
                .and_then(|hex| std::str::from_utf8(hex).ok())
                .and_then(|hex| u8::from_str_radix(hex, 16).ok())
                .ok_or("a `%` not followed by two hex digits")?;
            i += 3;
            match decoded {
                b'/' => return Err("an encoded slash (`%2F`)"),
                b'\\' => return Err("an encoded backslash (`%5C`)"),
                b'%' => return Err("an encoded percent sign (`%25`: double encoding)"),
                other => other,
            }
        } else {
            i += 1;
            bytes[i - 1]
        };
        match byte {
            b';' => return Err("a `;` path parameter"),
            b'\\' => return Err("a backslash"),
            0..0x20 | 0x7f => return Err("a control character"),
            _ => out.push(byte),
        }
    }
    let decoded = String::from_utf8(out).map_err(|_| "bytes that are not UTF-8")?;
    if decoded
        .split('/')
        .any(|segment| segment == "." || segment == "..")
    {
        return Err("a dot segment (`.` or `..`, encoded)");
    }
    Ok(decoded)
}

/// Whether `path` lies under `prefix`, on segment boundaries.
fn path_within(path: &str, prefix: &str) -> bool {
    if prefix == "/" || prefix.ends_with('/') {
        return path.starts_with(prefix);
    }
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// An HTTP method, written uppercase as HTTP spells it, ordered by name so method sets print
/// stably.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct MethodName(pub Method);

impl MethodName {
    /// Parses one method: an uppercase token.
    pub fn parse(text: &str) -> Result<Self, PatternError> {
        let valid = !text.is_empty() && text.bytes().all(|b| b.is_ascii_uppercase());
        match (valid, Method::from_bytes(text.as_bytes())) {
            (true, Ok(method)) => Ok(Self(method)),
            _ => Err(PatternError::Method(text.to_owned())),
        }
    }
}

impl std::str::FromStr for MethodName {
    type Err = PatternError;

    fn from_str(text: &str) -> Result<Self, PatternError> {
        Self::parse(text)
    }
}

impl TryFrom<String> for MethodName {
    type Error = PatternError;

    fn try_from(text: String) -> Result<Self, PatternError> {
        Self::parse(&text)
    }
}

impl From<MethodName> for String {
    fn from(method: MethodName) -> Self {
        method.0.to_string()
    }
}

impl fmt::Display for MethodName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.0.as_str())
    }
}

impl PartialOrd for MethodName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for MethodName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.as_str().cmp(other.0.as_str())
    }
}

/// One outbound destination an adapter asks to reach, as its manifest declares it (the
/// manifest is a request: nothing here is granted until the operator's config grants it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EgressRequest {
    /// `scheme://host[:port][/path-prefix]`, e.g. `https://api.example.com/v1/`.
    pub url: UrlPattern,
    /// HTTP methods it needs there, e.g. `["GET", "POST"]`; at least one.
    pub methods: BTreeSet<MethodName>,
    /// Named credential slots the operator may bind for this destination, e.g. `["api_token"]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub credentials: Vec<String>,
}

/// GET, HEAD and OPTIONS: the methods a read-only call may use.
pub fn is_safe(method: &Method) -> bool {
    matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// The methods a stdio server's tunnel (`CONNECT`) can carry unseen, all of HTTP's that read
/// or change a resource: a tunnel opens only where a grant of the whole host allows every one
/// of them (and only in a call whose approval mode allows writes).
pub const TUNNEL_METHODS: [&str; 7] = ["GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"];

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(text: &str) -> UrlPattern {
        UrlPattern::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn matches(pattern_text: &str, url: &str) -> bool {
        let dest =
            Destination::parse(url).unwrap_or_else(|e| panic!("{url} does not parse: {e:?}"));
        pattern(pattern_text).matches(&dest)
    }

    #[test]
    fn accepts_patterns_and_normalizes_them() {
        let table = [
            ("https://api.example.com", "https://api.example.com:443/"),
            (
                "https://API.Example.COM/v1",
                "https://api.example.com:443/v1",
            ),
            (
                "https://api.example.com./v1/",
                "https://api.example.com:443/v1/",
            ),
            ("http://api.example.com:80/", "http://api.example.com:80/"),
            (
                "http://api.example.com:8080",
                "http://api.example.com:8080/",
            ),
            ("https://*.example.com", "https://*.example.com:443/"),
            ("http://*:*", "http://*:*/"),
            ("http://localhost:*/api", "http://localhost:*/api"),
            ("http://127.0.0.1:8080/api/", "http://127.0.0.1:8080/api/"),
            ("http://[::1]:8080", "http://[::1]:8080/"),
            ("http://[::FFFF:127.0.0.1]", "http://[::ffff:127.0.0.1]:80/"),
            (
                "https://bücher.example",
                "https://xn--bcher-kva.example:443/",
            ),
            (
                "https://*.bücher.example",
                "https://*.xn--bcher-kva.example:443/",
            ),
            (
                "https://api.example.com/a/./b/../c",
                "https://api.example.com:443/a/c",
            ),
        ];
        for (text, want) in table {
            assert_eq!(pattern(text).to_string(), want, "{text}");
            // Serialized as written; parsing that again gives the same pattern.
            let json = serde_json::to_value(pattern(text)).unwrap();
            assert_eq!(json, serde_json::json!(text));
            assert_eq!(
                serde_json::from_value::<UrlPattern>(json).unwrap(),
                pattern(text)
            );
        }
    }

    #[test]
    fn rejects_malformed_patterns_with_the_expected_form() {
        let table = [
            ("api.example.com", "no `scheme://`"),
            ("ftp://example.com", "scheme must be"),
            ("file:///etc/passwd", "scheme must be"),
            ("https://", "host is empty"),
            ("https:///path", "host is empty"),
            ("https://user:pw@example.com", "userinfo"),
            ("https://user@example.com", "userinfo"),
            ("https://example.com/?q=1", "query or fragment"),
            ("https://example.com/#x", "query or fragment"),
            ("https://example.com:0", "port must be"),
            ("https://example.com:65536", "port must be"),
            ("https://example.com:http", "port must be"),
            ("https://example.com:", "port must be"),
            ("https://api.*.example.com", "leftmost label"),
            ("https://*example.com", "leftmost label"),
            ("https://**.example.com", "leftmost label"),
            ("https://*.10.0.0.1", "cannot prefix an IP"),
            ("https://*.[::1]", "cannot prefix an IP"),
            ("https://exa mple.com", "not an egress pattern"),
        ];
        for (text, problem) in table {
            let err = UrlPattern::parse(text).unwrap_err().to_string();
            assert!(err.contains(problem), "{text}: {err}");
            assert!(
                err.contains("scheme://host[:port][/path-prefix]"),
                "{text}: {err}"
            );
        }
    }

    #[test]
    fn accepts_matching_destinations() {
        let table = [
            (
                "https://api.example.com",
                "https://api.example.com/anything?x=1",
            ),
            ("https://api.example.com", "https://API.EXAMPLE.COM/"),
            ("https://api.example.com", "https://api.example.com./x"),
            ("https://api.example.com", "https://api.example.com:443/"),
            ("http://api.example.com", "http://api.example.com:80/"),
            (
                "https://api.example.com:8443",
                "https://api.example.com:8443/",
            ),
            ("https://*.example.com", "https://a.example.com/"),
            ("https://*.example.com", "https://a.b.example.com/"),
            ("http://*:*", "http://10.0.0.1:1234/"),
            ("http://localhost:*", "http://localhost:9/"),
            ("https://api.example.com/v1", "https://api.example.com/v1"),
            (
                "https://api.example.com/v1",
                "https://api.example.com/v1/users",
            ),
            (
                "https://api.example.com/v1/",
                "https://api.example.com/v1/users",
            ),
            ("https://api.example.com/v1/", "https://api.example.com/v1/"),
            (
                "https://api.example.com/v1/",
                "https://api.example.com/x/../v1/y",
            ),
            ("http://[::1]:8080", "http://[0:0:0:0:0:0:0:1]:8080/"),
            ("https://bücher.example", "https://xn--bcher-kva.example/"),
            ("https://xn--bcher-kva.example", "https://BÜCHER.example/"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080/"),
        ];
        for (p, url) in table {
            assert!(matches(p, url), "{p} should match {url}");
        }
    }

    #[test]
    fn rejects_non_matching_destinations() {
        let table = [
            ("https://api.example.com", "http://api.example.com/"),
            ("http://api.example.com", "https://api.example.com/"),
            ("https://api.example.com", "https://api.example.com:8443/"),
            ("https://api.example.com:8443", "https://api.example.com/"),
            (
                "https://api.example.com",
                "https://api.example.com.evil.com/",
            ),
            ("https://api.example.com", "https://evilapi.example.com/"),
            ("https://*.example.com", "https://example.com/"),
            ("https://*.example.com", "https://badexample.com/"),
            ("https://*.example.com", "https://example.com.evil/"),
            (
                "https://api.example.com/v1",
                "https://api.example.com/v1beta",
            ),
            ("https://api.example.com/v1", "https://api.example.com/"),
            ("https://api.example.com/v1/", "https://api.example.com/v1"),
            (
                "https://api.example.com/v1/",
                "https://api.example.com/v1/../admin",
            ),
            (
                "https://api.example.com/v1/",
                "https://api.example.com/v1/%2e%2e/admin",
            ),
            (
                "https://api.example.com/v1/",
                "https://api.example.com/V1/x",
            ),
            ("http://127.0.0.1:8080", "http://localhost:8080/"),
            ("http://localhost:8080", "http://127.0.0.1:8080/"),
            ("http://127.0.0.1:8080", "http://[::ffff:127.0.0.1]:8080/"),
            ("http://[::1]:8080", "http://127.0.0.1:8080/"),
        ];
        for (p, url) in table {
            assert!(!matches(p, url), "{p} should not match {url}");
        }
    }

    #[test]
    fn decimal_and_hex_ipv4_forms_are_the_address_they_spell() {
        // WHATWG parsing turns these into 127.0.0.1, so a grant for 127.0.0.1 covers them and
        // the address check sees loopback, not a name.
        for url in [
            "http://2130706433:8080/",
            "http://0x7f.0.0.1:8080/",
            "http://127.1:8080/",
        ] {
            assert!(matches("http://127.0.0.1:8080", url), "{url}");
        }
    }

    #[test]
    fn rejects_request_urls_with_userinfo_or_other_schemes() {
        for url in [
            "https://user:pw@api.example.com/",
            "https://user@api.example.com/",
            "ftp://api.example.com/",
            "/relative/path",
            "data:text/plain,x",
        ] {
            let parsed = Destination::parse(url);
            assert_eq!(parsed, Err(DestinationError::Invalid), "{url}");
        }
    }

    #[test]
    fn refuses_paths_servers_read_differently() {
        let table = [
            ("/v1/..%2fadmin", "an encoded slash (`%2F`)"),
            ("/v1/%2F../admin", "an encoded slash (`%2F`)"),
            ("/v1/..%5cadmin", "an encoded backslash (`%5C`)"),
            ("/v1/%5C..%5Cadmin", "an encoded backslash (`%5C`)"),
            (
                "/v1/%252e%252e/admin",
                "an encoded percent sign (`%25`: double encoding)",
            ),
            ("/v1/..;/admin", "a `;` path parameter"),
            ("/v1;jsessionid=x/items", "a `;` path parameter"),
            ("/v1/%3b/x", "a `;` path parameter"),
            ("/v1/%00/x", "a control character"),
            ("/v1/%0d%0aX:1", "a control character"),
            ("/v1/%ff", "bytes that are not UTF-8"),
            ("/v1/%zz", "a `%` not followed by two hex digits"),
            ("/v1/%2", "a `%` not followed by two hex digits"),
        ];
        for (path, why) in table {
            let url = format!("https://api.example.com{path}");
            assert_eq!(
                Destination::parse(&url),
                Err(DestinationError::AmbiguousPath(why)),
                "{url}"
            );
        }
        // Dot segments in any encoding the WHATWG parser resolves are resolved, not refused:
        // they then fail the prefix instead.
        for path in [
            "/v1/%2e%2e/admin",
            "/v1/.%2E/admin",
            "/v1/%2E./admin",
            "/v1/..\\admin",
        ] {
            let dest = Destination::parse(&format!("https://api.example.com{path}")).unwrap();
            assert!(!dest.decoded_path.starts_with("/v1"), "{path}: {dest:?}");
        }
        // Decoded paths match what the server will see.
        assert!(matches(
            "https://api.example.com/v1/",
            "https://api.example.com/%76%31/x"
        ));
        assert!(matches(
            "https://api.example.com/v1/",
            "https://api.example.com/v1/a%20b"
        ));
        // A grant cannot itself hold an ambiguous path.
        let err = UrlPattern::parse("https://api.example.com/v1%2f").unwrap_err();
        assert!(err.to_string().contains("an encoded slash"), "{err}");
    }

    #[test]
    fn covers_only_narrower_or_equal_patterns() {
        let yes = [
            ("https://*.example.com", "https://api.example.com/v1"),
            ("https://*.example.com", "https://*.api.example.com"),
            ("http://*:*", "http://127.0.0.1:8080/api/"),
            ("http://localhost:*", "http://localhost:8080"),
            ("https://api.example.com/", "https://api.example.com/v1/"),
            (
                "https://api.example.com/v1",
                "https://api.example.com/v1/users",
            ),
            ("https://api.example.com", "https://api.example.com:443"),
        ];
        for (broad, narrow) in yes {
            assert!(
                pattern(broad).covers(&pattern(narrow)),
                "{broad} covers {narrow}"
            );
        }
        let no = [
            ("https://api.example.com/v1/", "https://api.example.com/"),
            (
                "https://api.example.com/v1",
                "https://api.example.com/v1beta",
            ),
            ("https://*.example.com", "https://example.com"),
            ("https://api.example.com", "https://*.example.com"),
            ("http://localhost:8080", "http://localhost:*"),
            ("http://*:8080", "http://*:*"),
            ("https://api.example.com", "http://api.example.com"),
            ("https://api.example.com", "https://*"),
        ];
        for (broad, narrow) in no {
            assert!(
                !pattern(broad).covers(&pattern(narrow)),
                "{broad} must not cover {narrow}"
            );
        }
    }

    #[test]
    fn parses_methods_as_uppercase_tokens() {
        let ok: BTreeSet<MethodName> =
            serde_json::from_str(r#"["GET", "POST", "PROPFIND", "GET"]"#).unwrap();
        assert_eq!(
            ok.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["GET", "POST", "PROPFIND"]
        );
        for bad in ["get", "", "GET ", "G/T", "*"] {
            assert_eq!(
                MethodName::parse(bad),
                Err(PatternError::Method(bad.to_owned())),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn safe_methods_are_get_head_options() {
        for m in [Method::GET, Method::HEAD, Method::OPTIONS] {
            assert!(is_safe(&m), "{m}");
        }
        for m in [
            Method::POST,
            Method::PUT,
            Method::PATCH,
            Method::DELETE,
            Method::TRACE,
            Method::CONNECT,
        ] {
            assert!(!is_safe(&m), "{m}");
        }
    }
}

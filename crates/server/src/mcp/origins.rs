//! The browser origins the MCP listener answers (`[mcp] allowed_origins`, and on a loopback
//! listener the loopback origins): a request with an `Origin` header is refused (403) unless
//! the origin is listed; a request without one passes (it is not a browser's cross-site
//! request). What keeps a page of another site from calling the tools from a user's browser.
//!
//! An entry is `scheme://host[:port]`, `scheme://host:*` (any port) or `null`. An entry
//! without a port matches any port too (as rmcp's origin check did, which configs written for
//! it rely on); a port is compared with the scheme's default filled in (RFC 6454: `https://a`
//! is `https://a:443`). Scheme and host are compared without case, an IPv6 host without its
//! brackets. An entry that does not read matches nothing.

/// A parsed origin: `null`, or scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Origin {
    Null,
    Tuple {
        scheme: String,
        host: String,
        port: Option<u16>,
    },
}

/// Which ports an entry allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    Any,
    Exact(u16),
}

/// The origins a listener answers.
#[derive(Debug, Clone, Default)]
pub struct AllowedOrigins {
    allowed: Vec<(Origin, Port)>,
}

impl AllowedOrigins {
    /// The list as configured.
    pub fn new(entries: &[String]) -> Self {
        let allowed = entries
            .iter()
            .filter_map(|entry| {
                let entry = entry.trim();
                if let Some(base) = entry.strip_suffix(":*") {
                    return match parse(base)? {
                        origin @ Origin::Tuple { port: None, .. } => Some((origin, Port::Any)),
                        _ => None,
                    };
                }
                match parse(entry)? {
                    Origin::Null => Some((Origin::Null, Port::Any)),
                    Origin::Tuple { scheme, host, port } => {
                        let allowed = port.map_or(Port::Any, Port::Exact);
                        let origin = Origin::Tuple {
                            scheme,
                            host,
                            port: None,
                        };
                        Some((origin, allowed))
                    }
                }
            })
            .collect();
        Self { allowed }
    }

    /// Whether a request with these headers may be answered: no `Origin`, or an allowed one.
    pub fn allows(&self, headers: &http::HeaderMap) -> bool {
        let mut values = headers.get_all(http::header::ORIGIN).iter();
        let value = match (values.next(), values.next()) {
            (None, _) => return true,
            (Some(value), None) => value,
            (Some(_), Some(_)) => return false,
        };
        let Some(origin) = value.to_str().ok().and_then(parse) else {
            return false;
        };
        self.allowed
            .iter()
            .any(|(allowed, port)| match (allowed, &origin) {
                (Origin::Null, Origin::Null) => true,
                (
                    Origin::Tuple { scheme, host, .. },
                    Origin::Tuple {
                        scheme: s,
                        host: h,
                        port: p,
                    },
                ) => {
                    scheme == s
                        && host == h
                        && match port {
                            Port::Any => true,
                            Port::Exact(allowed) => p.or_else(|| default_port(s)) == Some(*allowed),
                        }
                }
                _ => false,
            })
    }
}

fn parse(value: &str) -> Option<Origin> {
    let value = value.trim();
    if value.eq_ignore_ascii_case("null") {
        return Some(Origin::Null);
    }
    let uri = http::Uri::try_from(value).ok()?;
    let authority = uri.authority()?;
    Some(Origin::Tuple {
        scheme: uri.scheme_str()?.to_ascii_lowercase(),
        host: authority
            .host()
            .trim_matches(['[', ']'])
            .to_ascii_lowercase(),
        port: authority.port_u16(),
    })
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allows(list: &[&str], origin: Option<&str>) -> bool {
        let list: Vec<String> = list.iter().map(|s| (*s).to_owned()).collect();
        let mut headers = http::HeaderMap::new();
        if let Some(origin) = origin {
            headers.insert(http::header::ORIGIN, origin.parse().unwrap());
        }
        AllowedOrigins::new(&list).allows(&headers)
    }

    #[test]
    fn accepts_and_rejects_origins_by_the_table() {
        let loopback = ["http://localhost:*", "http://127.0.0.1:*", "http://[::1]:*"];
        let cases: &[(&[&str], Option<&str>, bool)] = &[
            (&[], None, true),
            (&[], Some("https://evil.example"), false),
            (&loopback, Some("http://localhost:3000"), true),
            (&loopback, Some("http://LOCALHOST:1"), true),
            (&loopback, Some("http://[::1]:5173"), true),
            (&loopback, Some("https://localhost:3000"), false),
            (&loopback, Some("http://localhost.evil.example:3000"), false),
            (&loopback, Some("http://evil.example.com"), false),
            (&["https://app.example"], Some("https://app.example"), true),
            (
                &["https://app.example"],
                Some("https://app.example:8443"),
                true,
            ),
            (
                &["https://app.example:443"],
                Some("https://app.example"),
                true,
            ),
            (
                &["https://app.example:443"],
                Some("https://app.example:8443"),
                false,
            ),
            (&["https://app.example"], Some("http://app.example"), false),
            (&["null"], Some("null"), true),
            (&["https://app.example"], Some("null"), false),
            (&["https://app.example"], Some("not an origin"), false),
            (&["not an entry"], Some("https://app.example"), false),
        ];
        for (list, origin, allowed) in cases {
            assert_eq!(allows(list, *origin), *allowed, "{list:?} {origin:?}");
        }
    }
}

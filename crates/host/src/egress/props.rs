//! Fuzz targets for the egress gate's parsers and matchers (run by [`crate::fuzz`]): request
//! URLs, grant patterns, path-prefix matching and the address classifier.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use proptest::collection::vec;
use proptest::prelude::{Just, Strategy, any, prop_assert, prop_assert_eq, prop_oneof};

use super::addr::{AddressPolicy, classify};
use super::rules::{Destination, UrlPattern};
use crate::fuzz;

/// Path pieces an attacker would try against a prefix: plain segments, the prefix's own name,
/// and every encoding of `/`, `\`, `.`, `%` and `;` upstream servers may decode.
const PIECES: &[&str] = &[
    "/",
    "v1",
    "v2",
    "admin",
    "a",
    ".",
    "..",
    "%2e",
    "%2E",
    "%2e%2e",
    ".%2e",
    "%2F",
    "%2f",
    "%5C",
    "%5c",
    "\\",
    ";",
    "%3B",
    "%3b",
    "%25",
    "%252F",
    "%",
    "%0",
    "%00",
    "%0a",
    "%61",
    "%76%31",
    "%C0%AF",
    "%E2%80%AE",
    "?",
    "#",
    "//",
    " ",
    "\t",
    "é",
];

/// Request URLs: mostly built from [`PIECES`] under `https://api.example.com`, some arbitrary.
fn urls() -> impl Strategy<Value = String> {
    let path = vec(proptest::sample::select(PIECES), 0..10).prop_map(|pieces| pieces.concat());
    let host = prop_oneof![
        Just("api.example.com"),
        Just("API.Example.com."),
        Just("api.example.com:443"),
        Just("api.example.com:8443"),
        Just("evil.com#@api.example.com"),
        Just("api.example.com@evil.com"),
        Just("[::ffff:127.0.0.1]"),
        Just("0x7f.1"),
    ];
    prop_oneof![
        4 => (host, path).prop_map(|(host, path)| format!("https://{host}/{path}")),
        1 => ".{0,80}",
    ]
}

/// Percent-decodes every `%XX` (what a lenient upstream does), leaving the rest.
fn lenient_decode(path: &str) -> Vec<u8> {
    let bytes = path.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    out
}

#[test]
fn a_url_accepted_under_a_path_prefix_really_lies_under_it() {
    let grant = UrlPattern::parse("https://api.example.com/v1/").unwrap();
    fuzz::run("egress url under /v1/", urls(), |url| {
        let Ok(dest) = Destination::parse(&url) else {
            return Ok(());
        };
        if !grant.matches(&dest) {
            return Ok(());
        }
        // Every reading of the wire path an upstream could make lies under the prefix:
        // decoded once, twice, with `\` as `/`, dot segments resolved.
        // (The wire path itself may spell unreserved characters encoded, `/%76%31/` for
        // `/v1/`: RFC 3986 makes them equivalent, so it is checked decoded, below.)
        prop_assert!(dest.decoded_path.starts_with("/v1/"), "{url}");
        for reading in [
            lenient_decode(&dest.path),
            lenient_decode(&String::from_utf8_lossy(&lenient_decode(&dest.path))),
        ] {
            let reading = String::from_utf8_lossy(&reading).replace('\\', "/");
            prop_assert!(reading.starts_with("/v1/"), "{url} reads as {reading}");
            prop_assert!(
                !reading.split('/').any(|s| s == ".." || s == "."),
                "{url} reads as {reading}"
            );
            prop_assert!(!reading.contains(';'), "{url} reads as {reading}");
        }
        prop_assert_eq!(&dest.authority(), "api.example.com");
        Ok(())
    });
}

#[test]
fn any_pattern_parses_or_is_refused_and_matching_never_panics() {
    let patterns = prop_oneof![
        ".{0,60}",
        (
            proptest::sample::select(&["http", "https", "ftp", ""][..]),
            proptest::sample::select(
                &[
                    "*",
                    "*.example.com",
                    "api.example.com",
                    "[::1]",
                    "10.0.0.1",
                    "*.",
                    "a..b",
                    ""
                ][..]
            ),
            proptest::sample::select(&["", ":*", ":443", ":0", ":65536", ":x"][..]),
            urls(),
        )
            .prop_map(|(scheme, host, port, path)| format!(
                "{scheme}://{host}{port}{}",
                path.get(8..).unwrap_or("")
            )),
    ];
    fuzz::run("egress pattern", (patterns, urls()), |(pattern, url)| {
        if let (Ok(pattern), Ok(dest)) = (UrlPattern::parse(&pattern), Destination::parse(&url)) {
            let _ = pattern.matches(&dest);
            prop_assert!(pattern.covers(&pattern), "{pattern} does not cover itself");
        }
        Ok(())
    });
}

/// IPv4 addresses in blocks that are not public.
fn private_v4() -> impl Strategy<Value = Ipv4Addr> {
    let block = proptest::sample::select(
        &[
            ([10, 0, 0, 0], 8),
            ([127, 0, 0, 0], 8),
            ([172, 16, 0, 0], 12),
            ([192, 168, 0, 0], 16),
            ([169, 254, 0, 0], 16),
            ([100, 64, 0, 0], 10),
            ([0, 0, 0, 0], 8),
        ][..],
    );
    (block, any::<u32>()).prop_map(|((net, len), host): (([u8; 4], u32), u32)| {
        let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
        Ipv4Addr::from((u32::from_be_bytes(net) & mask) | (host & !mask))
    })
}

#[test]
fn any_address_classifies_without_panic() {
    let ips = prop_oneof![
        any::<[u8; 4]>().prop_map(IpAddr::from),
        any::<[u8; 16]>().prop_map(IpAddr::from),
    ];
    fuzz::run("address", ips, |ip| {
        let class = classify(ip);
        prop_assert_eq!(AddressPolicy::default().check(ip).is_ok(), class.is_none());
        Ok(())
    });
}

#[test]
fn every_ipv6_form_of_a_private_v4_address_is_not_public() {
    fuzz::run(
        "private v4 in v6 forms",
        (private_v4(), any::<u16>()),
        |(v4, subnet)| {
            let [a, b, c, d] = v4.octets();
            let (hi, lo) = (u16::from_be_bytes([a, b]), u16::from_be_bytes([c, d]));
            let forms = [
                ("v4 itself", IpAddr::V4(v4)),
                ("v4-mapped", IpAddr::V6(v4.to_ipv6_mapped())),
                (
                    "v4-compatible",
                    IpAddr::V6(Ipv6Addr::new(0, 0, 0, 0, 0, 0, hi, lo)),
                ),
                (
                    "NAT64",
                    IpAddr::V6(Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, hi, lo)),
                ),
                (
                    "local NAT64",
                    IpAddr::V6(Ipv6Addr::new(0x64, 0xff9b, 1, subnet, 0, 0, hi, lo)),
                ),
                (
                    "6to4",
                    IpAddr::V6(Ipv6Addr::new(0x2002, hi, lo, subnet, 0, 0, 0, 1)),
                ),
                (
                    "Teredo",
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0, 0, 0, 0, 0, !hi, !lo)),
                ),
            ];
            for (form, ip) in forms {
                prop_assert!(
                    classify(ip).is_some(),
                    "{} ({}) of {} classifies as public",
                    ip,
                    form,
                    v4
                );
                prop_assert!(AddressPolicy::default().check(ip).is_err(), "{ip} passes");
            }
            Ok(())
        },
    );
}

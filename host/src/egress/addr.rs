//! Address classification: which resolved addresses an adapter may connect to.
//!
//! 1. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is judged as the IPv4 address it carries,
//!    so `[::ffff:127.0.0.1]` is loopback.
//! 2. [`classify`] names the special-purpose block an address is in (loopback, private,
//!    link-local, unique-local, CGNAT, multicast, unspecified, broadcast/reserved, cloud
//!    metadata); `None` means a public unicast address.
//! 3. [`AddressPolicy::check`] allows public addresses, and special ones only inside a range
//!    the operator listed in `[egress] allow_private`. The default list is empty: no loopback,
//!    no private network, no metadata endpoint.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The special-purpose block an address belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum AddrClass {
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10.0.0.0/8`, `172.16.0.0/12`, `192.168.0.0/16`.
    Private,
    /// `169.254.0.0/16`, `fe80::/10` (except the metadata addresses).
    LinkLocal,
    /// `fc00::/7` (except the metadata addresses).
    UniqueLocal,
    /// Carrier-grade NAT, `100.64.0.0/10` (except the metadata addresses).
    SharedCgnat,
    /// `224.0.0.0/4`, `ff00::/8`.
    Multicast,
    /// `0.0.0.0/8`, `::`.
    Unspecified,
    /// `240.0.0.0/4` including broadcast; not routable.
    Reserved,
    /// Cloud instance metadata: `169.254.169.254`, `169.254.170.2`, `100.100.100.200`,
    /// `fd00:ec2::254`.
    Metadata,
}

impl fmt::Display for AddrClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Loopback => "loopback",
            Self::Private => "private",
            Self::LinkLocal => "link-local",
            Self::UniqueLocal => "unique-local",
            Self::SharedCgnat => "shared (CGNAT)",
            Self::Multicast => "multicast",
            Self::Unspecified => "unspecified",
            Self::Reserved => "reserved",
            Self::Metadata => "cloud metadata",
        })
    }
}

/// The address an IPv4-mapped IPv6 address stands for; every other address unchanged.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// The special-purpose block of `ip` (after [`canonical`]); `None` for public unicast.
pub fn classify(ip: IpAddr) -> Option<AddrClass> {
    match canonical(ip) {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

const METADATA_V4: [Ipv4Addr; 3] = [
    Ipv4Addr::new(169, 254, 169, 254),
    Ipv4Addr::new(169, 254, 170, 2),
    Ipv4Addr::new(100, 100, 100, 200),
];
const METADATA_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254);

fn classify_v4(ip: Ipv4Addr) -> Option<AddrClass> {
    let [a, b, ..] = ip.octets();
    if METADATA_V4.contains(&ip) {
        Some(AddrClass::Metadata)
    } else if ip.is_loopback() {
        Some(AddrClass::Loopback)
    } else if ip.is_private() {
        Some(AddrClass::Private)
    } else if ip.is_link_local() {
        Some(AddrClass::LinkLocal)
    } else if a == 100 && (64..128).contains(&b) {
        Some(AddrClass::SharedCgnat)
    } else if ip.is_multicast() {
        Some(AddrClass::Multicast)
    } else if a == 0 {
        Some(AddrClass::Unspecified)
    } else if a >= 240 {
        Some(AddrClass::Reserved)
    } else {
        None
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<AddrClass> {
    let first = ip.segments()[0];
    if ip == METADATA_V6 {
        Some(AddrClass::Metadata)
    } else if ip.is_loopback() {
        Some(AddrClass::Loopback)
    } else if ip.is_unspecified() {
        Some(AddrClass::Unspecified)
    } else if ip.is_multicast() {
        Some(AddrClass::Multicast)
    } else if first & 0xffc0 == 0xfe80 {
        Some(AddrClass::LinkLocal)
    } else if first & 0xfe00 == 0xfc00 {
        Some(AddrClass::UniqueLocal)
    } else {
        None
    }
}

/// Which special-purpose addresses the operator allows (`[egress] allow_private`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    allowed: Vec<IpNet>,
}

/// An address the policy refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "{ip} is a {class} address; the operator allows it only by listing a range containing it \
     in `[egress] allow_private`"
)]
pub struct AddressRefused {
    /// The address (as resolved, before canonicalization).
    pub ip: IpAddr,
    /// Its block.
    pub class: AddrClass,
}

impl AddressPolicy {
    /// Allows the special-purpose addresses inside `allowed` (and nothing else special).
    pub fn new(allowed: Vec<IpNet>) -> Self {
        Self { allowed }
    }

    /// Public addresses pass; special ones pass only inside an allowed range.
    pub fn check(&self, ip: IpAddr) -> Result<(), AddressRefused> {
        let Some(class) = classify(ip) else {
            return Ok(());
        };
        let judged = canonical(ip);
        if self.allowed.iter().any(|net| net.contains(&judged)) {
            Ok(())
        } else {
            Err(AddressRefused { ip, class })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn classifies_special_blocks() {
        let table = [
            ("127.0.0.1", Some(AddrClass::Loopback)),
            ("127.255.0.9", Some(AddrClass::Loopback)),
            ("::1", Some(AddrClass::Loopback)),
            ("::ffff:127.0.0.1", Some(AddrClass::Loopback)),
            ("10.1.2.3", Some(AddrClass::Private)),
            ("172.16.0.1", Some(AddrClass::Private)),
            ("172.31.255.255", Some(AddrClass::Private)),
            ("192.168.1.1", Some(AddrClass::Private)),
            ("::ffff:192.168.1.1", Some(AddrClass::Private)),
            ("169.254.1.1", Some(AddrClass::LinkLocal)),
            ("fe80::1", Some(AddrClass::LinkLocal)),
            ("fd12:3456::1", Some(AddrClass::UniqueLocal)),
            ("fc00::1", Some(AddrClass::UniqueLocal)),
            ("100.64.0.1", Some(AddrClass::SharedCgnat)),
            ("100.127.255.255", Some(AddrClass::SharedCgnat)),
            ("224.0.0.1", Some(AddrClass::Multicast)),
            ("ff02::1", Some(AddrClass::Multicast)),
            ("0.0.0.0", Some(AddrClass::Unspecified)),
            ("::", Some(AddrClass::Unspecified)),
            ("255.255.255.255", Some(AddrClass::Reserved)),
            ("240.0.0.1", Some(AddrClass::Reserved)),
            ("169.254.169.254", Some(AddrClass::Metadata)),
            ("::ffff:169.254.169.254", Some(AddrClass::Metadata)),
            ("100.100.100.200", Some(AddrClass::Metadata)),
            ("fd00:ec2::254", Some(AddrClass::Metadata)),
            ("93.184.215.14", None),
            ("172.32.0.1", None),
            ("100.128.0.1", None),
            ("2606:4700::1111", None),
            ("::ffff:8.8.8.8", None),
        ];
        for (text, want) in table {
            assert_eq!(classify(ip(text)), want, "{text}");
        }
    }

    #[test]
    fn default_policy_refuses_every_special_address() {
        let policy = AddressPolicy::default();
        assert_eq!(policy.check(ip("8.8.8.8")), Ok(()));
        assert_eq!(
            policy.check(ip("::ffff:127.0.0.1")),
            Err(AddressRefused {
                ip: ip("::ffff:127.0.0.1"),
                class: AddrClass::Loopback
            })
        );
        assert_eq!(
            policy.check(ip("169.254.169.254")).unwrap_err().class,
            AddrClass::Metadata
        );
    }

    #[test]
    fn allowed_ranges_open_exactly_themselves() {
        let policy = AddressPolicy::new(vec!["127.0.0.0/8".parse().unwrap()]);
        assert_eq!(policy.check(ip("127.0.0.1")), Ok(()));
        assert_eq!(policy.check(ip("::ffff:127.0.0.1")), Ok(()));
        assert_eq!(
            policy.check(ip("::1")).unwrap_err().class,
            AddrClass::Loopback
        );
        assert_eq!(
            policy.check(ip("10.0.0.1")).unwrap_err().class,
            AddrClass::Private
        );
        assert_eq!(
            policy.check(ip("169.254.169.254")).unwrap_err().class,
            AddrClass::Metadata
        );
    }
}

//! Address classification: which resolved addresses an adapter may connect to.
//!
//! 1. An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) is judged as the IPv4 address it carries,
//!    so `[::ffff:127.0.0.1]` is loopback.
//! 2. [`classify`] names the special-purpose block an address is in: every entry of the IANA
//!    IPv4 and IPv6 Special-Purpose Address Registries ([`IPV4_SPECIAL`], [`IPV6_SPECIAL`]:
//!    loopback, private, link-local, unique-local, CGNAT, translation, tunnelling,
//!    benchmarking, documentation, protocol assignments...), plus multicast, cloud metadata
//!    endpoints and IPv6 outside global unicast (`2000::/3`). Entries the registry marks
//!    globally reachable (anycast services such as AS112 or TURN) are refused too: an adapter
//!    has no business with them, and an operator who disagrees lists them. `None` means an
//!    ordinary public unicast address.
//! 3. [`AddressPolicy::check`] allows public addresses, and special ones only inside a range
//!    the grant lists in `allow_private`. The default list is empty: no loopback, no private
//!    network, no metadata endpoint.

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
    /// `0.0.0.0/8` ("this network"), `::`.
    Unspecified,
    /// `240.0.0.0/4` including broadcast, IPv6 outside `2000::/3`: not routable.
    Reserved,
    /// Cloud instance metadata: `169.254.169.254`, `169.254.170.2`, `100.100.100.200`,
    /// `fd00:ec2::254`.
    Metadata,
    /// Documentation: `192.0.2.0/24`, `198.51.100.0/24`, `203.0.113.0/24`, `2001:db8::/32`,
    /// `3fff::/20`.
    Documentation,
    /// Benchmarking: `198.18.0.0/15`, `2001:2::/48`.
    Benchmarking,
    /// Address translation: NAT64 (`64:ff9b::/96`, `64:ff9b:1::/48`), DS-Lite and NAT64
    /// discovery in `192.0.0.0/24`.
    Translation,
    /// Tunnelling: 6to4 (`2002::/16`, `192.88.99.0/24`), Teredo (`2001::/32`).
    Tunnelling,
    /// IETF protocol assignments and other registry entries (`192.0.0.0/24`, `2001::/23`,
    /// ORCHID, AMT, AS112, discard-only, SRv6 SIDs...).
    Protocol,
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
            Self::Documentation => "documentation",
            Self::Benchmarking => "benchmarking",
            Self::Translation => "translation",
            Self::Tunnelling => "tunnelling",
            Self::Protocol => "special-purpose (IETF protocol assignment)",
        })
    }
}

/// The IANA IPv4 Special-Purpose Address Registry (every entry, as of 2025), then multicast
/// and the cloud metadata endpoints: `(network, prefix length, class)`. The longest matching
/// prefix decides.
pub const IPV4_SPECIAL: &[(Ipv4Addr, u8, AddrClass)] = {
    use AddrClass::*;
    &[
        (Ipv4Addr::new(0, 0, 0, 0), 8, Unspecified),
        (Ipv4Addr::new(0, 0, 0, 0), 32, Unspecified),
        (Ipv4Addr::new(10, 0, 0, 0), 8, Private),
        (Ipv4Addr::new(100, 64, 0, 0), 10, SharedCgnat),
        (Ipv4Addr::new(127, 0, 0, 0), 8, Loopback),
        (Ipv4Addr::new(169, 254, 0, 0), 16, LinkLocal),
        (Ipv4Addr::new(172, 16, 0, 0), 12, Private),
        (Ipv4Addr::new(192, 0, 0, 0), 24, Protocol),
        (Ipv4Addr::new(192, 0, 0, 0), 29, Translation),
        (Ipv4Addr::new(192, 0, 0, 8), 32, Protocol),
        (Ipv4Addr::new(192, 0, 0, 9), 32, Protocol),
        (Ipv4Addr::new(192, 0, 0, 10), 32, Protocol),
        (Ipv4Addr::new(192, 0, 0, 170), 32, Translation),
        (Ipv4Addr::new(192, 0, 0, 171), 32, Translation),
        (Ipv4Addr::new(192, 0, 2, 0), 24, Documentation),
        (Ipv4Addr::new(192, 31, 196, 0), 24, Protocol),
        (Ipv4Addr::new(192, 52, 193, 0), 24, Protocol),
        (Ipv4Addr::new(192, 88, 99, 0), 24, Tunnelling),
        (Ipv4Addr::new(192, 88, 99, 2), 32, Tunnelling),
        (Ipv4Addr::new(192, 168, 0, 0), 16, Private),
        (Ipv4Addr::new(192, 175, 48, 0), 24, Protocol),
        (Ipv4Addr::new(198, 18, 0, 0), 15, Benchmarking),
        (Ipv4Addr::new(198, 51, 100, 0), 24, Documentation),
        (Ipv4Addr::new(203, 0, 113, 0), 24, Documentation),
        (Ipv4Addr::new(240, 0, 0, 0), 4, Reserved),
        (Ipv4Addr::new(255, 255, 255, 255), 32, Reserved),
        // Not in the special-purpose registry, refused all the same.
        (Ipv4Addr::new(224, 0, 0, 0), 4, Multicast),
        (Ipv4Addr::new(169, 254, 169, 254), 32, Metadata),
        (Ipv4Addr::new(169, 254, 170, 2), 32, Metadata),
        (Ipv4Addr::new(100, 100, 100, 200), 32, Metadata),
    ]
};

/// The IANA IPv6 Special-Purpose Address Registry (every entry, as of 2025; `::ffff:0:0/96`
/// is judged as the IPv4 address it maps), then multicast and the metadata endpoint. Anything
/// outside `2000::/3` that no entry names is [`AddrClass::Reserved`].
pub const IPV6_SPECIAL: &[(Ipv6Addr, u8, AddrClass)] = {
    use AddrClass::*;
    const fn v6(s: [u16; 8]) -> Ipv6Addr {
        Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7])
    }
    &[
        (v6([0, 0, 0, 0, 0, 0, 0, 1]), 128, Loopback),
        (v6([0, 0, 0, 0, 0, 0, 0, 0]), 128, Unspecified),
        (v6([0x64, 0xff9b, 0, 0, 0, 0, 0, 0]), 96, Translation),
        (v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0]), 48, Translation),
        (v6([0x100, 0, 0, 0, 0, 0, 0, 0]), 64, Protocol),
        (v6([0x100, 0, 0, 1, 0, 0, 0, 0]), 64, Protocol),
        (v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 23, Protocol),
        (v6([0x2001, 0, 0, 0, 0, 0, 0, 0]), 32, Tunnelling),
        (v6([0x2001, 1, 0, 0, 0, 0, 0, 1]), 128, Protocol),
        (v6([0x2001, 1, 0, 0, 0, 0, 0, 2]), 128, Protocol),
        (v6([0x2001, 1, 0, 0, 0, 0, 0, 3]), 128, Protocol),
        (v6([0x2001, 2, 0, 0, 0, 0, 0, 0]), 48, Benchmarking),
        (v6([0x2001, 3, 0, 0, 0, 0, 0, 0]), 32, Protocol),
        (v6([0x2001, 4, 0x112, 0, 0, 0, 0, 0]), 48, Protocol),
        (v6([0x2001, 0x10, 0, 0, 0, 0, 0, 0]), 28, Protocol),
        (v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0]), 28, Protocol),
        (v6([0x2001, 0x30, 0, 0, 0, 0, 0, 0]), 28, Protocol),
        (v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0]), 32, Documentation),
        (v6([0x2002, 0, 0, 0, 0, 0, 0, 0]), 16, Tunnelling),
        (v6([0x2620, 0x4f, 0x8000, 0, 0, 0, 0, 0]), 48, Protocol),
        (v6([0x3fff, 0, 0, 0, 0, 0, 0, 0]), 20, Documentation),
        (v6([0x5f00, 0, 0, 0, 0, 0, 0, 0]), 16, Protocol),
        (v6([0xfc00, 0, 0, 0, 0, 0, 0, 0]), 7, UniqueLocal),
        (v6([0xfe80, 0, 0, 0, 0, 0, 0, 0]), 10, LinkLocal),
        // Not in the special-purpose registry, refused all the same.
        (v6([0xff00, 0, 0, 0, 0, 0, 0, 0]), 8, Multicast),
        (v6([0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254]), 128, Metadata),
    ]
};

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
        IpAddr::V4(v4) => longest(IPV4_SPECIAL, u32::from(v4).into(), 32),
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            longest(IPV6_SPECIAL, bits, 128).or_else(|| {
                // Global unicast is 2000::/3; the rest of the space is unassigned or reserved.
                (bits >> 125 != 0b001).then_some(AddrClass::Reserved)
            })
        }
    }
}

/// The class of the longest prefix in `table` containing `bits` (an address `width` bits wide).
fn longest<A: Copy + Into<IpAddr>>(
    table: &[(A, u8, AddrClass)],
    bits: u128,
    width: u8,
) -> Option<AddrClass> {
    table
        .iter()
        .filter(|(net, len, _)| {
            let net = match (*net).into() {
                IpAddr::V4(v4) => u128::from(u32::from(v4)),
                IpAddr::V6(v6) => u128::from(v6),
            };
            let shift = u32::from(width - len);
            shift >= 128 || (net >> shift) == (bits >> shift)
        })
        .max_by_key(|(_, len, _)| *len)
        .map(|(_, _, class)| *class)
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
     in the grant's `allow_private`"
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

    /// The IANA IPv4 and IPv6 Special-Purpose Address Registries, entry by entry, as written
    /// in the registries (https://www.iana.org/assignments/iana-ipv4-special-registry,
    /// .../iana-ipv6-special-registry), with the class each must get. The first and last
    /// address of every entry must be refused; the last one (never inside a more specific
    /// entry) must carry the entry's class.
    const REGISTRY: &[(&str, AddrClass)] = &[
        ("0.0.0.0/8", AddrClass::Unspecified),
        ("0.0.0.0/32", AddrClass::Unspecified),
        ("10.0.0.0/8", AddrClass::Private),
        ("100.64.0.0/10", AddrClass::SharedCgnat),
        ("127.0.0.0/8", AddrClass::Loopback),
        ("169.254.0.0/16", AddrClass::LinkLocal),
        ("172.16.0.0/12", AddrClass::Private),
        ("192.0.0.0/24", AddrClass::Protocol),
        ("192.0.0.0/29", AddrClass::Translation),
        ("192.0.0.8/32", AddrClass::Protocol),
        ("192.0.0.9/32", AddrClass::Protocol),
        ("192.0.0.10/32", AddrClass::Protocol),
        ("192.0.0.170/32", AddrClass::Translation),
        ("192.0.0.171/32", AddrClass::Translation),
        ("192.0.2.0/24", AddrClass::Documentation),
        ("192.31.196.0/24", AddrClass::Protocol),
        ("192.52.193.0/24", AddrClass::Protocol),
        ("192.88.99.0/24", AddrClass::Tunnelling),
        ("192.88.99.2/32", AddrClass::Tunnelling),
        ("192.168.0.0/16", AddrClass::Private),
        ("192.175.48.0/24", AddrClass::Protocol),
        ("198.18.0.0/15", AddrClass::Benchmarking),
        ("198.51.100.0/24", AddrClass::Documentation),
        ("203.0.113.0/24", AddrClass::Documentation),
        ("240.0.0.0/4", AddrClass::Reserved),
        ("255.255.255.255/32", AddrClass::Reserved),
        ("::1/128", AddrClass::Loopback),
        ("::/128", AddrClass::Unspecified),
        ("64:ff9b::/96", AddrClass::Translation),
        ("64:ff9b:1::/48", AddrClass::Translation),
        ("100::/64", AddrClass::Protocol),
        ("100:0:0:1::/64", AddrClass::Protocol),
        ("2001::/23", AddrClass::Protocol),
        ("2001::/32", AddrClass::Tunnelling),
        ("2001:1::1/128", AddrClass::Protocol),
        ("2001:1::2/128", AddrClass::Protocol),
        ("2001:1::3/128", AddrClass::Protocol),
        ("2001:2::/48", AddrClass::Benchmarking),
        ("2001:3::/32", AddrClass::Protocol),
        ("2001:4:112::/48", AddrClass::Protocol),
        ("2001:10::/28", AddrClass::Protocol),
        ("2001:20::/28", AddrClass::Protocol),
        ("2001:30::/28", AddrClass::Protocol),
        ("2001:db8::/32", AddrClass::Documentation),
        ("2002::/16", AddrClass::Tunnelling),
        ("2620:4f:8000::/48", AddrClass::Protocol),
        ("3fff::/20", AddrClass::Documentation),
        ("5f00::/16", AddrClass::Protocol),
        ("fc00::/7", AddrClass::UniqueLocal),
        ("fe80::/10", AddrClass::LinkLocal),
        // The IPv4-mapped entry is judged as the IPv4 address it maps.
        ("::ffff:127.0.0.1/128", AddrClass::Loopback),
        ("::ffff:10.0.0.0/104", AddrClass::Private),
    ];

    #[test]
    fn every_registry_entry_is_refused_with_its_class() {
        for (cidr, class) in REGISTRY {
            let net: IpNet = cidr.parse().unwrap();
            assert!(
                classify(net.network()).is_some(),
                "{cidr}: first address {} passes",
                net.network()
            );
            assert_eq!(
                classify(net.broadcast()),
                Some(*class),
                "{cidr}: last address {}",
                net.broadcast()
            );
            let refused = AddressPolicy::default().check(net.broadcast());
            assert_eq!(refused.map_err(|e| e.class), Err(*class), "{cidr}");
        }
        // Every table entry is in the registry fixture (or is a named addition).
        let listed = |ip: IpAddr, len: u8| {
            REGISTRY
                .iter()
                .any(|(cidr, _)| *cidr == IpNet::new(ip, len).unwrap().to_string())
        };
        let additions = [AddrClass::Multicast, AddrClass::Metadata];
        for (ip, len, class) in IPV4_SPECIAL {
            assert!(
                listed(IpAddr::V4(*ip), *len) || additions.contains(class),
                "{ip}/{len}"
            );
        }
        for (ip, len, class) in IPV6_SPECIAL {
            assert!(
                listed(IpAddr::V6(*ip), *len) || additions.contains(class),
                "{ip}/{len}"
            );
        }
    }

    #[test]
    fn neighbours_of_special_blocks_are_public() {
        for text in [
            "1.1.1.1",
            "8.8.8.8",
            "9.255.255.255",
            "11.0.0.0",
            "100.63.255.255",
            "126.255.255.255",
            "128.0.0.0",
            "172.15.255.255",
            "191.255.255.255",
            "192.0.1.0",
            "192.0.3.0",
            "192.88.98.255",
            "192.167.255.255",
            "198.17.255.255",
            "198.20.0.0",
            "223.255.255.255",
            "2001:200::1",
            "2001:4860:4860::8888",
            "2001:db9::1",
            "2003::1",
            "2606:4700::1111",
            "3ffe:ffff::1",
            "3fff:1000::1",
        ] {
            assert_eq!(classify(ip(text)), None, "{text}");
        }
        for (text, class) in [
            ("fec0::1", AddrClass::Reserved),
            ("::127.0.0.1", AddrClass::Reserved),
            ("4000::1", AddrClass::Reserved),
        ] {
            assert_eq!(classify(ip(text)), Some(class), "{text}");
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

//! `[network]`: which hosts a command may reach through the egress proxy
//! (`--network proxy`). The proxy asks [`NetworkRules::decide`] about each
//! host and port a command names, and [`NetworkRules::check_address`] about
//! each address a name resolved to, so a name that points at a private
//! address (DNS rebinding, a hostile resolver) is refused like the address
//! itself.
//!
//! Deny beats ask beats allow. A host without a port means any port; `*.x`
//! matches the subdomains of `x`, not `x` itself; `*` matches every name but
//! never an IP literal, a private, loopback, link-local or metadata address,
//! or `localhost`: those are reached only when a rule names them (an
//! address or a CIDR block).

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::glob::glob_match;

/// Why a `[network]` entry was refused at load.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HostRuleError {
    /// The entry is empty or has characters no host name has.
    #[error("`{0}` is not a host, a host glob, an address or a CIDR block")]
    NotAHost(String),
    /// The port is not a number from 1 to 65535.
    #[error("`{0}` has a port that is not a number from 1 to 65535")]
    BadPort(String),
    /// A CIDR prefix longer than the address.
    #[error("`{0}` has a prefix length longer than its address")]
    BadPrefix(String),
    /// A `resolve` entry maps a name to an address that is not loopback.
    #[error(
        "`resolve` maps `{name}` to `{address}`: only loopback addresses (127.0.0.0/8, ::1) may be named there"
    )]
    ResolveNotLoopback {
        /// The name.
        name: String,
        /// The address as written.
        address: String,
    },
}

/// What a host rule matches by host.
#[derive(Debug, Clone, PartialEq, Eq)]
enum HostPattern {
    /// One name, in lower case without a trailing dot.
    Name(String),
    /// A glob over names (`*.pypi.org`, `registry-*.example.com`, `*`).
    Glob(String),
    /// An address or a block of addresses.
    Block { network: IpAddr, prefix: u8 },
}

/// One entry of `[network] allow`, `deny` or `ask`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    text: String,
    host: HostPattern,
    port: Option<u16>,
}

impl HostRule {
    /// Reads an entry: `host`, `host:port`, `*.domain`, `1.2.3.4`,
    /// `10.0.0.0/8`, `[::1]:8080`, `fd00::/8`.
    pub fn parse(text: &str) -> Result<Self, HostRuleError> {
        let trimmed = text.trim();
        let not_a_host = || HostRuleError::NotAHost(text.to_owned());
        let (host, port) = split_port(trimmed).ok_or_else(not_a_host)?;
        let port = match port {
            None => None,
            Some(port) => Some(
                port.parse::<u16>()
                    .ok()
                    .filter(|&port| port != 0)
                    .ok_or_else(|| HostRuleError::BadPort(text.to_owned()))?,
            ),
        };
        let host = if let Some((address, prefix)) = host.split_once('/') {
            let network: IpAddr = address.parse().map_err(|_| not_a_host())?;
            let prefix: u8 = prefix.parse().map_err(|_| not_a_host())?;
            if prefix > max_prefix(network) {
                return Err(HostRuleError::BadPrefix(text.to_owned()));
            }
            HostPattern::Block { network, prefix }
        } else if let Ok(address) = host.parse::<IpAddr>() {
            HostPattern::Block {
                network: address,
                prefix: max_prefix(address),
            }
        } else {
            let name = normal_name(host);
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_' | '*'))
            {
                return Err(not_a_host());
            }
            if name.contains('*') {
                HostPattern::Glob(name)
            } else {
                HostPattern::Name(name)
            }
        };
        Ok(Self {
            text: trimmed.to_owned(),
            host,
            port,
        })
    }

    /// The entry as written.
    pub fn text(&self) -> &str {
        &self.text
    }

    fn matches(&self, host: &Host, port: u16) -> bool {
        if self.port.is_some_and(|own| own != port) {
            return false;
        }
        match (&self.host, host) {
            (HostPattern::Name(own), Host::Name(name)) => own == name,
            (HostPattern::Glob(glob), Host::Name(name)) => {
                // `*` alone and globs that could match `localhost` never do:
                // only a rule naming it reaches the machine itself.
                if name == "localhost" || name.ends_with(".localhost") {
                    return false;
                }
                match glob.strip_prefix("*.") {
                    // `*.x` is x's subdomains: at least one label before `.x`.
                    Some(domain) if !domain.contains('*') => {
                        name.len() > domain.len() + 1
                            && name.ends_with(domain)
                            && name.as_bytes()[name.len() - domain.len() - 1] == b'.'
                    }
                    _ => glob_match(glob, name),
                }
            }
            (HostPattern::Block { network, prefix }, Host::Address(address)) => {
                in_block(*address, *network, *prefix)
            }
            _ => false,
        }
    }

    fn matches_address(&self, address: IpAddr, port: u16) -> bool {
        self.matches(&Host::Address(address), port)
    }
}

/// What the proxy does with a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkVerdict {
    /// Connect; `rule` is the allow entry that let it through.
    Allow {
        /// The entry as written.
        rule: String,
    },
    /// Ask the person first (through approvals); `rule` is the ask entry.
    Ask {
        /// The entry as written.
        rule: String,
    },
    /// Refuse, for this reason.
    Deny(NetworkRefusal),
}

/// Why a connection was refused, as the answer's
/// `[network: refused HOST:PORT (REASON)]` line and the proxy's 403 body
/// say it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkRefusal {
    /// A deny entry matched.
    Denied {
        /// The entry as written.
        rule: String,
    },
    /// No allow entry matched a name.
    NotAllowed,
    /// An address was named (or a name resolved to one) that only an
    /// entry naming it may reach.
    Address {
        /// The address.
        address: IpAddr,
        /// What kind of address it is.
        kind: AddressKind,
        /// The name that resolved to it, when a name was asked for.
        resolved_from: Option<String>,
    },
}

impl fmt::Display for NetworkRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Denied { rule } => write!(f, "denied by [network] deny \"{rule}\""),
            Self::NotAllowed => f.write_str("not in [network] allow"),
            Self::Address {
                address,
                kind,
                resolved_from: None,
            } => write!(f, "{kind} {address} not in [network] allow"),
            Self::Address {
                address,
                kind,
                resolved_from: Some(name),
            } => write!(
                f,
                "{name} resolves to {kind} {address}, not in [network] allow"
            ),
        }
    }
}

impl NetworkRefusal {
    /// How to allow what was refused, for the proxy's 403 body.
    pub fn remedy(&self, host: &str, port: u16) -> String {
        match self {
            Self::Denied { rule } => format!(
                "remove \"{rule}\" from [network] deny in the policy file to allow {host}:{port}"
            ),
            Self::NotAllowed => format!(
                "add \"{host}\" (or \"{host}:{port}\") to [network] allow in the policy file"
            ),
            Self::Address { address, .. } => format!(
                "add \"{}\" to [network] allow in the policy file to reach it",
                match address {
                    IpAddr::V4(_) => address.to_string(),
                    IpAddr::V6(_) => format!("[{address}]"),
                }
            ),
        }
    }
}

/// The kinds of address that `*` never covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressKind {
    /// An ordinary public address, written as a literal.
    Public,
    /// `127.0.0.0/8`, `::1`.
    Loopback,
    /// `10/8`, `172.16/12`, `192.168/16`, `100.64/10` (carrier-grade NAT), `fc00::/7`.
    Private,
    /// `169.254/16` (but see `Metadata`), `fe80::/10`.
    LinkLocal,
    /// A cloud metadata service: `169.254.169.254`, `fd00:ec2::254`, `100.100.100.200`.
    Metadata,
    /// `0.0.0.0/8`, `::`, multicast, broadcast, reserved and documentation blocks.
    Reserved,
}

impl fmt::Display for AddressKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Public => "IP literal",
            Self::Loopback => "loopback address",
            Self::Private => "private address",
            Self::LinkLocal => "link-local address",
            Self::Metadata => "metadata address",
            Self::Reserved => "reserved address",
        })
    }
}

/// What kind of address `address` is (IPv4-mapped IPv6 addresses are
/// judged as the IPv4 address they carry).
pub fn address_kind(address: IpAddr) -> AddressKind {
    match address {
        IpAddr::V4(v4) => v4_kind(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return v4_kind(v4);
            }
            v6_kind(v6)
        }
    }
}

fn v4_kind(address: Ipv4Addr) -> AddressKind {
    let [a, b, c, d] = address.octets();
    if address == Ipv4Addr::new(169, 254, 169, 254) || address == Ipv4Addr::new(100, 100, 100, 200)
    {
        AddressKind::Metadata
    } else if a == 127 {
        AddressKind::Loopback
    } else if a == 10
        || (a == 172 && (16..32).contains(&b))
        || (a == 192 && b == 168)
        || (a == 100 && (64..128).contains(&b))
    {
        AddressKind::Private
    } else if a == 169 && b == 254 {
        AddressKind::LinkLocal
    } else if a == 0
        || a >= 224
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || (a, b, c, d) == (255, 255, 255, 255)
    {
        AddressKind::Reserved
    } else {
        AddressKind::Public
    }
}

fn v6_kind(address: Ipv6Addr) -> AddressKind {
    let segments = address.segments();
    if address == Ipv6Addr::new(0xfd00, 0x0ec2, 0, 0, 0, 0, 0, 0x0254) {
        AddressKind::Metadata
    } else if address == Ipv6Addr::LOCALHOST {
        AddressKind::Loopback
    } else if segments[0] & 0xfe00 == 0xfc00 {
        AddressKind::Private
    } else if segments[0] & 0xffc0 == 0xfe80 {
        AddressKind::LinkLocal
    } else if address.is_unspecified()
        || address.is_multicast()
        || segments[0] == 0x2001 && segments[1] == 0x0db8
        || segments[0] == 0
    {
        // `::/16` holds the unspecified address, IPv4-compatible and other
        // transition forms: none is a public destination.
        AddressKind::Reserved
    } else {
        AddressKind::Public
    }
}

/// A destination as a command names it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    Name(String),
    Address(IpAddr),
}

impl Host {
    fn read(host: &str) -> Self {
        let bare = host
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
            .unwrap_or(host);
        match bare.parse::<IpAddr>() {
            Ok(address) => Self::Address(address),
            Err(_) => Self::Name(normal_name(bare)),
        }
    }
}

/// `[network]`: the host rules, the test resolver and the credentials.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetworkRules {
    /// Hosts a command may reach.
    pub allow: Vec<HostRule>,
    /// Hosts it may never reach.
    pub deny: Vec<HostRule>,
    /// Hosts the person is asked about.
    pub ask: Vec<HostRule>,
    /// Names the proxy resolves to a loopback address of its own choosing
    /// (local mirrors and tests), in lower case.
    pub resolve: BTreeMap<String, IpAddr>,
    /// Headers the proxy adds for a host.
    pub credentials: Vec<Credential>,
}

/// `[[network.credential]]`: a header the proxy adds to requests for one
/// host, its value taken from a variable of the server's environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The host, in lower case (no globs: a credential goes to one host).
    pub host: String,
    /// The header's name.
    pub header: String,
    /// The header's value as written, `${NAME}` naming variables of the
    /// server's environment.
    pub value: String,
}

impl NetworkRules {
    /// Rules from the entries of `allow`, `deny` and `ask` and the
    /// `resolve` map (name to address), each checked.
    pub fn new(
        allow: &[String],
        deny: &[String],
        ask: &[String],
        resolve: &BTreeMap<String, String>,
    ) -> Result<Self, HostRuleError> {
        let parse_all = |list: &[String]| {
            list.iter()
                .map(|entry| HostRule::parse(entry))
                .collect::<Result<Vec<_>, _>>()
        };
        let mut names = BTreeMap::new();
        for (name, address) in resolve {
            let parsed: Option<IpAddr> = address.trim().parse().ok();
            match parsed {
                Some(parsed) if parsed.is_loopback() => {
                    let normal = normal_name(name);
                    if normal.is_empty() || normal.parse::<IpAddr>().is_ok() {
                        return Err(HostRuleError::NotAHost(name.clone()));
                    }
                    names.insert(normal, parsed);
                }
                _ => {
                    return Err(HostRuleError::ResolveNotLoopback {
                        name: name.clone(),
                        address: address.clone(),
                    });
                }
            }
        }
        Ok(Self {
            allow: parse_all(allow)?,
            deny: parse_all(deny)?,
            ask: parse_all(ask)?,
            resolve: names,
            credentials: Vec::new(),
        })
    }

    /// The decision for a connection to `host` (a name, an address, or a
    /// bracketed IPv6 address) on `port`, before any name is resolved.
    pub fn decide(&self, host: &str, port: u16) -> NetworkVerdict {
        let host = Host::read(host);
        let first = |rules: &[HostRule]| {
            rules
                .iter()
                .find(|rule| rule.matches(&host, port))
                .map(|rule| rule.text.clone())
        };
        if let Some(rule) = first(&self.deny) {
            return NetworkVerdict::Deny(NetworkRefusal::Denied { rule });
        }
        if let Some(rule) = first(&self.ask) {
            return NetworkVerdict::Ask { rule };
        }
        if let Some(rule) = first(&self.allow) {
            return NetworkVerdict::Allow { rule };
        }
        NetworkVerdict::Deny(match host {
            Host::Name(_) => NetworkRefusal::NotAllowed,
            Host::Address(address) => NetworkRefusal::Address {
                address,
                kind: address_kind(address),
                resolved_from: None,
            },
        })
    }

    /// The address the proxy must use for `name` instead of asking DNS:
    /// the `resolve` map's entry.
    pub fn resolved(&self, name: &str) -> Option<IpAddr> {
        self.resolve.get(&normal_name(name)).copied()
    }

    /// Whether `address`, which the name `name` resolved to, may be
    /// connected to on `port` once the name itself was allowed: a public
    /// address may; any other kind only when an allow entry names it (and
    /// no deny entry does), or when `name` is in the `resolve` map.
    pub fn check_address(
        &self,
        name: &str,
        address: IpAddr,
        port: u16,
    ) -> Result<(), NetworkRefusal> {
        if let Some(rule) = self
            .deny
            .iter()
            .find(|rule| rule.matches_address(address, port))
        {
            return Err(NetworkRefusal::Denied {
                rule: rule.text.clone(),
            });
        }
        if self.resolved(name) == Some(address) {
            return Ok(());
        }
        let kind = address_kind(address);
        if kind == AddressKind::Public
            || self
                .allow
                .iter()
                .chain(&self.ask)
                .any(|rule| rule.matches_address(address, port))
        {
            return Ok(());
        }
        Err(NetworkRefusal::Address {
            address,
            kind,
            resolved_from: Some(normal_name(name)),
        })
    }

    /// The credentials for `host`.
    pub fn credentials_for<'a>(&'a self, host: &str) -> impl Iterator<Item = &'a Credential> {
        let host = normal_name(host);
        self.credentials
            .iter()
            .filter(move |credential| credential.host == host)
    }
}

/// Splits `host[:port]`, `[v6][:port]` and bare IPv6 (no port).
fn split_port(text: &str) -> Option<(&str, Option<&str>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (inner, after) = rest.split_once(']')?;
        return match after {
            "" => Some((inner, None)),
            _ => Some((inner, Some(after.strip_prefix(':')?))),
        };
    }
    // More than one colon without brackets: an IPv6 address or block, no port.
    match text.split_once(':') {
        Some((host, port)) if !port.contains(':') => Some((host, Some(port))),
        _ => Some((text, None)),
    }
}

fn normal_name(name: &str) -> String {
    name.trim().trim_end_matches('.').to_ascii_lowercase()
}

fn max_prefix(address: IpAddr) -> u8 {
    match address {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn in_block(address: IpAddr, network: IpAddr, prefix: u8) -> bool {
    let address = match (address, network) {
        (IpAddr::V6(v6), IpAddr::V4(_)) => v6.to_ipv4_mapped().map_or(address, IpAddr::V4),
        _ => address,
    };
    match (address, network) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let mask = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(allow: &[&str], deny: &[&str], ask: &[&str]) -> NetworkRules {
        let owned = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        NetworkRules::new(&owned(allow), &owned(deny), &owned(ask), &BTreeMap::new()).unwrap()
    }

    fn allowed(rules: &NetworkRules, host: &str, port: u16) -> bool {
        matches!(rules.decide(host, port), NetworkVerdict::Allow { .. })
    }

    #[test]
    fn the_contract_examples_decide_as_written() {
        let rules = rules(
            &["registry.npmjs.org", "*.pypi.org", "github.com:443"],
            &[],
            &[],
        );
        assert!(allowed(&rules, "registry.npmjs.org", 443));
        assert!(
            allowed(&rules, "registry.npmjs.org", 80),
            "no port: any port"
        );
        assert!(allowed(&rules, "files.pypi.org", 443));
        assert!(allowed(&rules, "a.b.pypi.org", 443));
        assert!(!allowed(&rules, "pypi.org", 443), "*.x is not x");
        assert!(!allowed(&rules, "evilpypi.org", 443));
        assert!(allowed(&rules, "github.com", 443));
        assert!(!allowed(&rules, "github.com", 22));
        assert!(allowed(&rules, "GitHub.COM.", 443), "case and the root dot");
        assert_eq!(
            rules.decide("evil.example", 443),
            NetworkVerdict::Deny(NetworkRefusal::NotAllowed)
        );
        assert_eq!(
            NetworkRefusal::NotAllowed.to_string(),
            "not in [network] allow"
        );
    }

    #[test]
    fn deny_beats_ask_beats_allow() {
        let rules = rules(&["*"], &["bad.example"], &["*.corp.example"]);
        assert_eq!(
            rules.decide("bad.example", 443),
            NetworkVerdict::Deny(NetworkRefusal::Denied {
                rule: "bad.example".into()
            })
        );
        assert_eq!(
            rules.decide("git.corp.example", 443),
            NetworkVerdict::Ask {
                rule: "*.corp.example".into()
            }
        );
        assert!(allowed(&rules, "crates.io", 443));
        let both = self::rules(&["x.example"], &[], &["x.example"]);
        assert!(matches!(
            both.decide("x.example", 1),
            NetworkVerdict::Ask { .. }
        ));
    }

    #[test]
    fn a_star_never_reaches_addresses_or_the_machine_itself() {
        let rules = rules(&["*", "*:443"], &[], &[]);
        for host in [
            "169.254.169.254",
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.4",
            "100.64.0.1",
            "[::1]",
            "::1",
            "[fd00::1]",
            "[fe80::1]",
            "[::ffff:127.0.0.1]",
            "[::ffff:169.254.169.254]",
            "0.0.0.0",
            "8.8.8.8",
            "localhost",
            "LOCALHOST.",
            "foo.localhost",
        ] {
            assert!(!allowed(&rules, host, 443), "{host}");
        }
        assert!(allowed(&rules, "example.com", 443));
    }

    #[test]
    fn addresses_and_blocks_are_reached_when_named() {
        let rules = rules(
            &[
                "10.0.0.0/8",
                "127.0.0.1:8080",
                "[::1]:9000",
                "fd00::/8",
                "localhost:3000",
            ],
            &["10.9.0.0/16"],
            &[],
        );
        assert!(allowed(&rules, "10.1.2.3", 80));
        assert!(!allowed(&rules, "10.9.1.1", 80), "the deny block wins");
        assert!(allowed(&rules, "127.0.0.1", 8080));
        assert!(!allowed(&rules, "127.0.0.1", 8081));
        assert!(allowed(&rules, "[::1]", 9000));
        assert!(allowed(&rules, "[fd12::1]", 1));
        assert!(allowed(&rules, "[::ffff:10.0.0.1]", 1), "mapped v4");
        assert!(allowed(&rules, "localhost", 3000));
        assert!(!allowed(&rules, "localhost", 3001));
        assert_eq!(
            rules.decide("169.254.169.254", 80),
            NetworkVerdict::Deny(NetworkRefusal::Address {
                address: "169.254.169.254".parse().unwrap(),
                kind: AddressKind::Metadata,
                resolved_from: None,
            })
        );
    }

    #[test]
    fn a_name_that_resolves_to_a_private_address_is_refused() {
        let rules = rules(&["*.example.com", "10.0.0.5"], &["203.0.113.0/24"], &[]);
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        assert_eq!(rules.check_address("www.example.com", public, 443), Ok(()));
        for (address, kind) in [
            ("127.0.0.1", AddressKind::Loopback),
            ("169.254.169.254", AddressKind::Metadata),
            ("192.168.1.1", AddressKind::Private),
            ("::ffff:127.0.0.1", AddressKind::Loopback),
            ("fe80::1", AddressKind::LinkLocal),
        ] {
            let address: IpAddr = address.parse().unwrap();
            let refusal = rules
                .check_address("www.example.com", address, 443)
                .unwrap_err();
            assert_eq!(
                refusal,
                NetworkRefusal::Address {
                    address,
                    kind,
                    resolved_from: Some("www.example.com".into())
                }
            );
            assert!(refusal.to_string().contains("www.example.com resolves to"));
        }
        let listed: IpAddr = "10.0.0.5".parse().unwrap();
        assert_eq!(rules.check_address("db.example.com", listed, 5432), Ok(()));
        let denied: IpAddr = "203.0.113.9".parse().unwrap();
        assert!(matches!(
            rules.check_address("www.example.com", denied, 443),
            Err(NetworkRefusal::Denied { .. })
        ));
    }

    #[test]
    fn the_test_resolver_takes_loopback_only_and_its_names_follow_the_host_rules() {
        let mut map = BTreeMap::new();
        map.insert("pkg.test".to_owned(), "127.0.0.1".to_owned());
        let rules = NetworkRules::new(&["pkg.test".to_owned()], &[], &[], &map).unwrap();
        assert!(allowed(&rules, "pkg.test", 4873));
        assert!(!allowed(&rules, "other.test", 4873));
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert_eq!(rules.resolved("PKG.test"), Some(loopback));
        assert_eq!(rules.check_address("pkg.test", loopback, 4873), Ok(()));
        assert!(rules.check_address("other.test", loopback, 4873).is_err());
        for address in ["10.0.0.1", "8.8.8.8", "not an address"] {
            let mut map = BTreeMap::new();
            map.insert("pkg.test".to_owned(), address.to_owned());
            assert!(matches!(
                NetworkRules::new(&[], &[], &[], &map),
                Err(HostRuleError::ResolveNotLoopback { .. })
            ));
        }
    }

    #[test]
    fn bad_entries_are_refused_at_load() {
        for entry in [
            "",
            "a b",
            "x.example:0",
            "x.example:99999",
            "x:y",
            "10.0.0.0/33",
            "[::1",
            "http://x",
        ] {
            assert!(HostRule::parse(entry).is_err(), "{entry:?} was taken");
        }
        for entry in [
            "x.example",
            "*.x",
            "x.example:443",
            "[::1]:80",
            "::1",
            "fd00::/8",
            "1.2.3.4",
        ] {
            assert!(HostRule::parse(entry).is_ok(), "{entry:?} was refused");
        }
    }

    #[test]
    fn refusals_say_how_to_allow() {
        let refusal = NetworkRefusal::NotAllowed;
        assert!(
            refusal
                .remedy("evil.example", 443)
                .contains("\"evil.example\"")
        );
        let refusal = NetworkRefusal::Address {
            address: "::1".parse().unwrap(),
            kind: AddressKind::Loopback,
            resolved_from: None,
        };
        assert_eq!(
            refusal.to_string(),
            "loopback address ::1 not in [network] allow"
        );
        assert!(refusal.remedy("::1", 80).contains("\"[::1]\""));
    }

    proptest::proptest! {
        #[test]
        fn no_address_is_ever_allowed_by_a_star(raw in proptest::prelude::any::<u128>(), v4 in proptest::prelude::any::<u32>(), port in 1u16..) {
            let rules = rules(&["*", "*.*", "*:443"], &[], &[]);
            let v6 = IpAddr::V6(Ipv6Addr::from(raw));
            let v4 = IpAddr::V4(Ipv4Addr::from(v4));
            let bracketed = format!("[{v6}]");
            proptest::prop_assert!(!allowed(&rules, &bracketed, port));
            proptest::prop_assert!(!allowed(&rules, &v4.to_string(), port));
        }
    }
}

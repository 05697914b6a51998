//! What the Action's egress restriction decides without touching the network (issue 35; the
//! proxy and the firewall are `edge::egress`): the list of hosts the agent may reach (the
//! `egress` input: [`EgressSetting::parse`], the package registries by default), whether the
//! egress proxy lets a request through ([`Hosts::admit`] for its name and port, [`public`]
//! for every address the name resolved to), the proxy's request line read and rewritten
//! ([`ProxyRequest::parse`]), and the firewall's rules as `iptables-restore` reads them
//! ([`rules`], [`removal`]).
//!
//! The design: the firewall lets the agent's user reach loopback only (no DNS either), so a
//! process that ignores the proxy variables reaches nothing; the proxy (on 127.0.0.1, inside
//! dagexec, which the firewall does not restrict) resolves a listed name itself and connects
//! only to public addresses, so a listed name cannot be pointed at a service of the runner.

use core::net::IpAddr;
use std::collections::BTreeSet;

/// The hosts the agent reaches by default: the package registries of the common ecosystems
/// (downloads only need these; none of them is a code host or a paste site).
pub const DEFAULT_HOSTS: [&str; 21] = [
    // npm, Yarn
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    // PyPI
    "pypi.org",
    "files.pythonhosted.org",
    // crates.io
    "crates.io",
    "index.crates.io",
    "static.crates.io",
    // Go modules
    "proxy.golang.org",
    "sum.golang.org",
    // RubyGems
    "rubygems.org",
    "index.rubygems.org",
    // Maven Central
    "repo.maven.apache.org",
    "repo1.maven.org",
    // NuGet
    "api.nuget.org",
    // Debian and Ubuntu packages
    "deb.debian.org",
    "security.debian.org",
    "archive.ubuntu.com",
    "security.ubuntu.com",
    "ports.ubuntu.com",
    // Packagist (PHP), Hex (Elixir)
    "repo.packagist.org",
    "repo.hex.pm",
];

/// The ports the proxy connects to: HTTPS (through `CONNECT`) and plain HTTP.
pub const PORTS: [u16; 2] = [443, 80];

/// A mistake in the `egress` input.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingError {
    /// An entry that is not a host name, a `*.` wildcard or an IP address.
    #[error(
        "the egress input: {0:?} is not a host name (write one per line or comma-separated: pypi.org, *.example.com, or defaults for the package registries)"
    )]
    NotAHost(String),
}

/// The `egress` input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EgressSetting {
    /// Not restricted (`false`, empty: the default).
    Off,
    /// The agent reaches loopback and these hosts only.
    On(Hosts),
}

impl EgressSetting {
    /// Reads the input: empty, `false` or `off` is [`EgressSetting::Off`]; `true`, `on` or
    /// `defaults` the package registries ([`DEFAULT_HOSTS`]); anything else a list of hosts,
    /// one per line or comma-separated, where the word `defaults` adds the registries.
    pub fn parse(input: &str) -> Result<EgressSetting, SettingError> {
        let words: Vec<&str> = input
            .split(|c: char| c == ',' || c.is_whitespace())
            .filter(|w| !w.is_empty())
            .collect();
        // Nothing, or one word that says off.
        let off = |w: &&str| ["false", "off"].contains(&w.to_ascii_lowercase().as_str());
        if words.len() <= 1 && words.iter().all(off) {
            return Ok(EgressSetting::Off);
        }
        let mut hosts = Hosts::default();
        for w in words {
            let lower = w.to_ascii_lowercase();
            if ["true", "on", "defaults"].contains(&lower.as_str()) {
                hosts.names.extend(DEFAULT_HOSTS.map(String::from));
                continue;
            }
            hosts.add(w)?;
        }
        Ok(EgressSetting::On(hosts))
    }
}

/// The hosts the proxy admits: exact names (and IP addresses), and `*.domain` wildcards (any
/// name below the domain, not the domain itself).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hosts {
    names: BTreeSet<String>,
    below: BTreeSet<String>,
}

/// Why the proxy refused a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The host is not on the list.
    #[error("not on the egress list")]
    NotListed,
    /// The port is not 443 or 80.
    #[error("port {0} (only 443 and 80 pass)")]
    Port(u16),
    /// The name resolved to an address of this machine or a private network.
    #[error("it resolves to {0}, an address of this machine or a private network")]
    Private(IpAddr),
    /// The name did not resolve.
    #[error("its name does not resolve")]
    Unresolved,
}

impl Hosts {
    /// Adds one entry of the input.
    fn add(&mut self, entry: &str) -> Result<(), SettingError> {
        let bad = || SettingError::NotAHost(entry.to_string());
        if let Some(domain) = entry.strip_prefix("*.") {
            let d = host_name(domain).ok_or_else(bad)?;
            if d.parse::<IpAddr>().is_ok() || !d.contains('.') {
                return Err(bad());
            }
            self.below.insert(d);
            return Ok(());
        }
        self.names.insert(host_name(entry).ok_or_else(bad)?);
        Ok(())
    }

    /// How many entries the list has.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.names.len() + self.below.len()
    }

    /// Whether the list is empty (nothing but loopback is reachable).
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the proxy may connect to `host` (as a request names it) on `port`, before its
    /// name is resolved: the host's normalised name (the one to resolve and record) or why not.
    pub fn admit(&self, host: &str, port: u16) -> Result<String, (String, Refusal)> {
        let Some(name) = host_name(host) else {
            return Err((crate::pure::sanitize::line(host), Refusal::NotListed));
        };
        let listed = self.names.contains(&name)
            || self
                .below
                .iter()
                .any(|d| name.len() > d.len() + 1 && name.ends_with(&format!(".{d}")));
        if !listed {
            return Err((name, Refusal::NotListed));
        }
        if !PORTS.contains(&port) {
            return Err((name, Refusal::Port(port)));
        }
        Ok(name)
    }

    /// The entries, wildcards as `*.domain`, sorted.
    pub fn entries(&self) -> Vec<String> {
        let mut all: Vec<String> = self.names.iter().cloned().collect();
        all.extend(self.below.iter().map(|d| format!("*.{d}")));
        all.sort();
        all
    }
}

/// A host as a request or the input names it, normalised (lower case, no trailing dot, an IP
/// address in its canonical form, IPv6 without brackets); `None` for anything else.
pub fn host_name(host: &str) -> Option<String> {
    let h = host.trim();
    let h = h
        .strip_prefix('[')
        .and_then(|x| x.strip_suffix(']'))
        .unwrap_or(h);
    if let Ok(ip) = h.parse::<IpAddr>() {
        return Some(ip.to_string());
    }
    let h = h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    };
    (!h.is_empty() && h.len() <= 253 && h.split('.').all(label_ok)).then_some(h)
}

/// Whether the proxy may connect to `ip`: a unicast address, not loopback or unspecified, not
/// of a private or shared network (RFC 1918, 100.64/10, IPv6 unique local), not link-local
/// (the cloud's metadata service), multicast, broadcast, NAT64 or reserved; an IPv4 address
/// mapped into IPv6 is judged as IPv4. The documentation ranges pass (the internet routes
/// none of them, and a sandbox may resolve its registries into one); an address of this
/// machine's own interfaces is refused by the proxy itself (`edge::egress`).
pub fn public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_unspecified()
                || v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_multicast()
                || v4.is_broadcast()
                || o[0] == 0
                || o[0] >= 240
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || (o[0] == 198 && (o[1] & 0xfe) == 18))
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_unspecified()
                || v6.is_loopback()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x0064 && s[1] == 0xff9b)
                || s[0] == 0)
        }
    }
}

/// What a client asked the proxy for: a tunnel (`CONNECT host:port`) or one plain HTTP
/// request (`GET http://host/path`), whose head goes on rewritten for the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyRequest {
    pub tunnel: bool,
    pub host: String,
    pub port: u16,
    /// A plain request's head as the server gets it: its target in origin form
    /// (`GET /path HTTP/1.1`), the proxy's own headers left out, `Connection: close` (one
    /// request per connection: a second one on it cannot name another host).
    pub forward: Vec<u8>,
}

impl ProxyRequest {
    /// Reads a request head (up to its blank line).
    pub fn parse(head: &[u8]) -> Result<ProxyRequest, String> {
        let text = std::str::from_utf8(head).map_err(|_| "a request head that is not text")?;
        let mut lines = text.split("\r\n");
        let first = lines.next().unwrap_or_default();
        let mut parts = first.split(' ');
        let (Some(method), Some(target), Some(version), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err("a malformed request line".into());
        };
        if !version.starts_with("HTTP/1.") {
            return Err("not an HTTP/1 request".into());
        }
        if method == "CONNECT" {
            let (host, port) = authority(target, None)?;
            return Ok(ProxyRequest {
                tunnel: true,
                host,
                port,
                forward: Vec::new(),
            });
        }
        let rest = target
            .strip_prefix("http://")
            .ok_or("only http:// requests and CONNECT tunnels pass the proxy")?;
        let (auth, path) = match rest.find(['/', '?']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let auth = auth.rsplit('@').next().unwrap_or(auth);
        let (host, port) = authority(auth, Some(80))?;
        let path = if path.starts_with('?') {
            format!("/{path}")
        } else {
            path.to_string()
        };
        // The server is told the host the target names (RFC 9112 §3.2.2), never the
        // client's own `Host`: on servers shared by many names (a CDN) that one would reach
        // a host nobody listed.
        let mut forward = format!("{method} {path} {version}\r\nHost: {auth}\r\n");
        const DROPPED: [&str; 5] = [
            "host",
            "connection",
            "proxy-connection",
            "proxy-authorization",
            "keep-alive",
        ];
        for line in lines.filter(|l| !l.is_empty()) {
            if line.starts_with([' ', '\t']) {
                return Err("a folded header line (obsolete line folding)".into());
            }
            let name = line.split(':').next().unwrap_or_default().trim();
            if !DROPPED.iter().any(|d| name.eq_ignore_ascii_case(d)) {
                forward.push_str(line);
                forward.push_str("\r\n");
            }
        }
        forward.push_str("Connection: close\r\n\r\n");
        Ok(ProxyRequest {
            tunnel: false,
            host,
            port,
            forward: forward.into_bytes(),
        })
    }
}

/// `host:port` (`[v6]:port`); `default` when the port may be left out.
fn authority(s: &str, default: Option<u16>) -> Result<(String, u16), String> {
    let bad = || {
        format!(
            "a malformed host and port: {}",
            crate::pure::sanitize::line(s)
        )
    };
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, after) = rest.split_once(']').ok_or_else(bad)?;
        (h, after.strip_prefix(':'))
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let port = match (port, default) {
        (Some(p), _) => p.parse().map_err(|_| bad())?,
        (None, Some(d)) => d,
        (None, None) => return Err(bad()),
    };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host.to_string(), port))
}

/// The prefix of the firewall chains dagexec makes, one per job: `DAGEXEC-EGRESS-<pid>`.
pub const CHAIN_PREFIX: &str = "DAGEXEC-EGRESS-";

/// The `iptables-restore --noflush` input that restricts user `uid` (IPv6: `v6`) to
/// loopback through chain `chain`: DNS to loopback refused too (names are the proxy's to
/// resolve), everything else off loopback refused; the jump from `OUTPUT` first, for that
/// user only. All or nothing: the input is one transaction.
pub fn rules(chain: &str, uid: u32, v6: bool) -> String {
    let lo = if v6 { "::1/128" } else { "127.0.0.0/8" };
    format!(
        "*filter\n:{chain} - [0:0]\n\
         -A {chain} -d {lo} -p udp --dport 53 -j REJECT\n\
         -A {chain} -d {lo} -p tcp --dport 53 -j REJECT\n\
         -A {chain} -d {lo} -j ACCEPT\n\
         -A {chain} -j REJECT\n\
         -I OUTPUT 1 -m owner --uid-owner {uid} -j {chain}\n\
         COMMIT\n"
    )
}

/// The input that removes the chains of `listing` (`iptables -S`'s output) whose job is
/// over (`gone`: by the pid in the chain's name) and the jumps to them; `None` when there
/// are none.
pub fn removal(listing: &str, gone: &dyn Fn(&str) -> bool) -> Option<String> {
    let chains: Vec<&str> = listing
        .lines()
        .filter_map(|l| l.strip_prefix("-N "))
        .map(str::trim)
        .filter(|c| c.strip_prefix(CHAIN_PREFIX).is_some_and(gone))
        .collect();
    if chains.is_empty() {
        return None;
    }
    let mut s = String::from("*filter\n");
    for line in listing.lines() {
        let Some(rule) = line.strip_prefix("-A ") else {
            continue;
        };
        let into = rule.split(' ').next().unwrap_or_default();
        if !chains.contains(&into) && chains.iter().any(|c| rule.ends_with(&format!("-j {c}"))) {
            s.push_str(&format!("-D {rule}\n"));
        }
    }
    for c in &chains {
        s.push_str(&format!("-F {c}\n-X {c}\n"));
    }
    s.push_str("COMMIT\n");
    Some(s)
}

/// How many packets the chain's `REJECT` rules refused (DNS and everything off loopback),
/// from `iptables -L CHAIN -n -v -x`'s listing.
pub fn refused_packets(listing: &str) -> Option<u64> {
    let counts: Vec<u64> = listing
        .lines()
        .filter(|l| l.contains("REJECT"))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    (!counts.is_empty()).then(|| counts.iter().sum())
}

#[cfg(test)]
mod tests;

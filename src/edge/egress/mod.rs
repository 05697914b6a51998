//! Egress in the Action's work job (issue 35, the `egress` input, off by default): the
//! agent's user reaches loopback (the model gateway, the egress proxy) and, through the
//! proxy, the listed hosts — nothing else. Two parts, both set up before task code runs and
//! taken down after it ended:
//! - the firewall ([`firewall`]): `iptables` rules for the agent's user alone, so a process
//!   that ignores the proxy variables reaches nothing off loopback, DNS included;
//! - the proxy ([`proxy`]): on 127.0.0.1 inside dagexec (root, so not restricted), admitting
//!   the listed hosts on ports 443 and 80 at public addresses, recording every host it
//!   refused; task code gets its URL in `HTTPS_PROXY` and the like
//!   ([`drop_to`](crate::edge::agent_user::drop_to) of `edge::agent_user` adds them to every
//!   process started as the agent's user).
//!
//! It needs the agent's user (the uid the firewall restricts) and root; where the runner
//! has no iptables or refuses the rules (no `CAP_NET_ADMIN`), nothing is restricted and the
//! job's summary says why.

pub mod firewall;
pub mod proxy;

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::edge::agent_user::AgentUser;
use crate::pure::egress::{EgressSetting, SettingError};

/// The variable the action hands the `egress` input in.
pub const VAR: &str = "DAGEXEC_EGRESS";

/// The proxy's record while egress is restricted (the agent's user gets the proxy's
/// variables: `agent_user::route_through`).
static ACTIVE: OnceLock<std::sync::Arc<std::sync::Mutex<proxy::ProxyLog>>> = OnceLock::new();

/// The hosts the proxy refused so far, by name (the attempt's record carries them).
pub fn blocked() -> Vec<String> {
    let refused = ACTIVE
        .get()
        .map(|r| crate::edge::lock::held(r).refused.clone());
    refused.unwrap_or_default().into_keys().collect()
}

/// Restricted egress while it lasts: the proxy and the firewall.
#[derive(Debug)]
pub struct Egress {
    proxy: proxy::Proxy,
    firewall: firewall::Firewall,
    hosts: Vec<String>,
    took: Duration,
}

/// What the summary says about egress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Egressed {
    /// Not asked for (the default).
    Off,
    /// Asked for, but not possible here: why.
    Unavailable(String),
    /// Restricted: what happened.
    On(EgressReport),
}

/// What restricted egress saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EgressReport {
    /// The listed hosts.
    pub hosts: Vec<String>,
    /// Whether IPv6 was restricted too (false: the runner has none beyond loopback).
    pub v6: bool,
    pub record: proxy::ProxyLog,
    /// Packets the firewall refused (connections that went around the proxy, DNS).
    pub refused_packets: Option<u64>,
    /// How long setting it up and taking it down took, in milliseconds.
    pub cost_ms: u64,
}

/// Starts restricted egress as `input` (the `egress` input) asks, for the agent's user
/// `agent`; an input that is no list of hosts is an error (nothing runs unrestricted by
/// mistake).
pub async fn start(
    input: &str,
    agent: &AgentUser,
) -> Result<Result<Egress, Egressed>, SettingError> {
    let hosts = match EgressSetting::parse(input)? {
        EgressSetting::Off => return Ok(Err(Egressed::Off)),
        EgressSetting::On(h) => h,
    };
    let began = Instant::now();
    let account = match agent {
        AgentUser::On(a) => a,
        AgentUser::Off => {
            return Ok(Err(Egressed::Unavailable(
                "it restricts the agent's user, and the agent-user input is off".into(),
            )));
        }
        AgentUser::Unavailable(why) => {
            return Ok(Err(Egressed::Unavailable(format!(
                "it restricts the agent's user, which is not available ({why})"
            ))));
        }
    };
    let entries = hosts.entries();
    let proxy = match proxy::Proxy::start(hosts).await {
        Ok(p) => p,
        Err(e) => {
            return Ok(Err(Egressed::Unavailable(format!(
                "cannot start the egress proxy on 127.0.0.1: {e}"
            ))));
        }
    };
    let firewall = match firewall::Firewall::apply(account.uid) {
        Ok(f) => f,
        Err(why) => return Ok(Err(Egressed::Unavailable(why))),
    };
    crate::edge::agent_user::route_through(proxy.env());
    let _ = ACTIVE.set(proxy.record.clone());
    Ok(Ok(Egress {
        proxy,
        firewall,
        hosts: entries,
        took: began.elapsed(),
    }))
}

impl Egress {
    /// The proxy's URL and the firewall's chain, for the job's log.
    pub fn describe(&self) -> String {
        format!(
            "dagexec's egress proxy: {} ({} hosts listed); the firewall's chain {} holds {} to loopback{} (set up in {:.1} ms)",
            self.proxy.url(),
            self.hosts.len(),
            self.firewall.chain(),
            crate::edge::agent_user::current().map_or("the agent's user", |a| a.name.as_str()),
            if self.firewall.v6 {
                ", IPv4 and IPv6"
            } else {
                " (IPv4; this runner has no IPv6 beyond loopback)"
            },
            self.took.as_secs_f64() * 1000.0
        )
    }

    /// Takes the firewall down and stops the proxy: what they saw.
    pub fn finish(mut self) -> Egressed {
        let began = Instant::now();
        let refused_packets = self.firewall.refused_packets();
        let removed = self.firewall.remove();
        let record = self.proxy.record();
        let cost = self.took + began.elapsed();
        if let Err(e) = removed {
            println!(
                "warning: cannot remove the egress firewall's chain {}: {e}",
                self.firewall.chain()
            );
        }
        for (host, why) in &record.refused {
            println!("egress: blocked {host} ({why})");
        }
        Egressed::On(EgressReport {
            hosts: self.hosts.clone(),
            v6: self.firewall.v6,
            record,
            refused_packets,
            cost_ms: u64::try_from(cost.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

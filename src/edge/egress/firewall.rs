//! The runner's firewall for the agent's user: a chain of dagexec's own per job
//! (`DAGEXEC-EGRESS-<pid>`, IPv4 and IPv6), jumped to from `OUTPUT` for that user only,
//! letting it reach loopback and nothing else ([`crate::pure::egress::rules`]). Each family's
//! rules go in as one `iptables-restore --noflush` transaction (all or nothing) and come out
//! the same way when the [`Firewall`] is dropped; chains a dead job left behind are removed
//! first.

use std::io::Write;
use std::process::{Command, Stdio};

use crate::pure::egress::{CHAIN_PREFIX, refused_packets, removal, rules};

/// The two families: the restore tool and the listing tool.
const FAMILIES: [(&str, &str); 2] = [
    ("iptables-restore", "iptables"),
    ("ip6tables-restore", "ip6tables"),
];

/// This job's rules; dropping it removes them.
#[derive(Debug)]
pub struct Firewall {
    chain: String,
    uid: u32,
    /// Whether the IPv6 rules are in (false where the runner has no IPv6 beyond loopback and
    /// no ip6tables).
    pub v6: bool,
    removed: bool,
}

/// Feeds `input` to `tool` (`iptables-restore`), waiting for the lock other jobs hold.
fn restore(tool: &str, input: &str) -> Result<(), String> {
    let mut child = Command::new(tool)
        .args(["-w", "--noflush"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                format!("{tool} is not installed on this runner (Debian and Ubuntu: apt-get install iptables)")
            }
            _ => format!("cannot start {tool}: {e}"),
        })?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{tool} failed: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("no message");
    Err(format!(
        "{tool} refused the rules ({}): {}",
        out.status,
        crate::pure::sanitize::line(first)
    ))
}

/// `tool args…`'s output, when it ran.
fn listing(tool: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(tool)
        .args(args)
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Removes the chains of jobs whose dagexec is gone (its pid no longer runs).
pub fn sweep() {
    let gone = |pid: &str| {
        pid.parse::<u32>().is_ok_and(|p| p != std::process::id())
            && !std::path::Path::new(&format!("/proc/{pid}")).exists()
    };
    for (restore_tool, list_tool) in FAMILIES {
        if let Some(input) = listing(list_tool, &["-w", "-S"]).and_then(|l| removal(&l, &gone)) {
            let _ = restore(restore_tool, &input);
        }
    }
}

/// Whether this machine has IPv6 beyond loopback (an address on another interface).
fn ipv6_off_loopback() -> bool {
    std::fs::read_to_string("/proc/net/if_inet6")
        .is_ok_and(|t| t.lines().any(|l| l.split_whitespace().last() != Some("lo")))
}

impl Firewall {
    /// Restricts user `uid` to loopback; why not where the runner does not allow it.
    pub fn apply(uid: u32) -> Result<Firewall, String> {
        sweep();
        let chain = format!("{CHAIN_PREFIX}{}", std::process::id());
        restore(FAMILIES[0].0, &rules(&chain, uid, false))?;
        let mut fw = Firewall {
            chain,
            uid,
            v6: true,
            removed: false,
        };
        if let Err(why) = restore(FAMILIES[1].0, &rules(&fw.chain, uid, true)) {
            fw.v6 = false;
            if ipv6_off_loopback() {
                // Half a firewall is none: the agent would go out over IPv6.
                let _ = fw.remove();
                return Err(format!(
                    "{why} (IPv6 would stay open, so IPv4 is not restricted either)"
                ));
            }
        }
        Ok(fw)
    }

    /// The chain's name.
    pub fn chain(&self) -> &str {
        &self.chain
    }

    /// How many packets the rules refused so far (both families).
    pub fn refused_packets(&self) -> Option<u64> {
        let families = if self.v6 { 2 } else { 1 };
        FAMILIES[..families]
            .iter()
            .map(|(_, tool)| {
                listing(tool, &["-w", "-L", &self.chain, "-n", "-v", "-x"])
                    .and_then(|l| refused_packets(&l))
            })
            .sum()
    }

    /// Takes the rules out (once).
    pub fn remove(&mut self) -> Result<(), String> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let ours = format!(
            "-N {c}\n-A OUTPUT -m owner --uid-owner {u} -j {c}\n",
            c = self.chain,
            u = self.uid
        );
        let own = std::process::id().to_string();
        let input = removal(&ours, &|pid| pid == own).unwrap_or_default();
        let families = if self.v6 { 2 } else { 1 };
        let mut result = Ok(());
        for (tool, _) in &FAMILIES[..families] {
            if let Err(e) = restore(tool, &input) {
                result = Err(e);
            }
        }
        result
    }
}

impl Drop for Firewall {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!(
                "warning: cannot remove the egress firewall's chain {}: {e}",
                self.chain
            );
        }
    }
}

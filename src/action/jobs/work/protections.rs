//! What the work job's summary says about the protections its attempt ran under (issue 35):
//! the model gateway, the provider key withheld from the worker, the unprivileged user, and
//! egress. Each line says whether it was on and, when it was not, why.

use crate::edge::agent_user::AgentUser;
use crate::edge::egress::Egressed;

/// The protections one work job ran its task code under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protections {
    /// Whether the worker reached its provider through the model gateway; `None` when no
    /// worker ran (a merge's re-check).
    pub gateway: Option<bool>,
    /// Whether task code ran as the agent's unprivileged user.
    pub agent: AgentUser,
    /// Whether the agent's user could reach only the listed hosts, and what it tried.
    pub egress: Egressed,
}

impl Protections {
    /// The job summary's section, Markdown.
    pub fn summary(&self) -> String {
        let mut s = String::from("#### Protections\n\n");
        s.push_str(match self.gateway {
            Some(true) => "- **model gateway: on** — the worker reached its provider through dagexec's gateway on 127.0.0.1, its tokens counted as they streamed\n- **provider key: withheld** — the worker held a token valid for this attempt only, no provider key of this job's environment\n",
            Some(false) => "- **model gateway: off** (the `gateway` input, or `gateway:` in .design/dagexec.yml) — the worker's spend is what it reported\n- **provider key: not withheld** — the worker had this job's environment, its provider keys included\n",
            None => "- **model gateway:** no worker ran (a re-check of a merged change)\n",
        });
        match &self.agent {
            AgentUser::On(a) => s.push_str(&format!(
                "- **unprivileged user: on** — the worker, the reviewer and the checks ran as `{}`, without sudo; they cannot read dagexec's environment or memory\n",
                a.name
            )),
            AgentUser::Off => s.push_str(
                "- **unprivileged user: off** (the `agent-user` input) — task code ran as the runner's user\n",
            ),
            AgentUser::Unavailable(why) => s.push_str(&format!(
                "- **unprivileged user: not available** — {}; task code ran as the runner's user\n",
                crate::pure::sanitize::line(why)
            )),
        }
        egress(&mut s, &self.egress);
        s
    }
}

/// How many blocked hosts the summary names.
const BLOCKED_SHOWN: usize = 20;

/// The summary's egress line: off, not possible here (why), or what the agent reached and
/// what was blocked.
fn egress(s: &mut String, egress: &Egressed) {
    let r = match egress {
        Egressed::Off => {
            s.push_str("- **egress: not restricted** (the `egress` input is off) — the agent could reach any host\n");
            return;
        }
        Egressed::Unavailable(why) => {
            s.push_str(&format!(
                "- **egress: not restricted** — {}; the agent could reach any host\n",
                crate::pure::sanitize::line(why)
            ));
            return;
        }
        Egressed::On(r) => r,
    };
    let code = |h: &str| format!("`{}`", h.replace('`', "'"));
    s.push_str(&format!(
        "- **egress: restricted** — task code reached loopback (the model gateway, the egress proxy) and, through the proxy, only the {} hosts of the `egress` input; the firewall refused everything else ({}); {} ms to set up and take down\n",
        r.hosts.len(),
        if r.v6 { "IPv4 and IPv6" } else { "IPv4; the runner has no IPv6 beyond loopback" },
        r.cost_ms
    ));
    if !r.record.reached.is_empty() {
        let reached: Vec<String> = r
            .record
            .reached
            .iter()
            .map(|(h, n)| format!("{} ({n})", code(h)))
            .collect();
        s.push_str(&format!("  - reached: {}\n", reached.join(", ")));
    }
    if !r.record.refused.is_empty() {
        let mut blocked: Vec<String> = r
            .record
            .refused
            .iter()
            .take(BLOCKED_SHOWN)
            .map(|(h, why)| format!("{} ({})", code(h), crate::pure::sanitize::line(why)))
            .collect();
        if r.record.refused.len() > BLOCKED_SHOWN {
            blocked.push(format!(
                "and {} more",
                r.record.refused.len() - BLOCKED_SHOWN
            ));
        }
        s.push_str(&format!("  - **blocked:** {}\n", blocked.join(", ")));
    }
    if let Some(n) = r.refused_packets.filter(|n| *n > 0) {
        s.push_str(&format!(
            "  - the firewall refused {n} packets that went around the proxy (direct connections, DNS)\n"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_says_which_protections_were_on_and_why_not() {
        let agent = crate::edge::agent_user::AgentAccount {
            name: "dagexec-agent".into(),
            uid: 1002,
            gid: 1002,
            home: "/home/dagexec-agent".into(),
        };
        let mut record = crate::edge::egress::proxy::ProxyLog::default();
        record.reached.insert("pypi.org".into(), 3);
        record
            .refused
            .insert("evil.example".into(), "not on the egress list".into());
        record.refused.insert(
            "localhost".into(),
            "it resolves to 127.0.0.1, an address of this machine or a private network".into(),
        );
        let all = Protections {
            gateway: Some(true),
            agent: AgentUser::On(agent),
            egress: Egressed::On(crate::edge::egress::EgressReport {
                hosts: vec!["pypi.org".into(), "localhost".into()],
                v6: true,
                record,
                refused_packets: Some(2),
                cost_ms: 14,
            }),
        };
        let none = Protections {
            gateway: Some(false),
            agent: AgentUser::Unavailable(
                "dagexec does not run as root here, so it cannot start the agent as dagexec-agent"
                    .into(),
            ),
            egress: Egressed::Unavailable(
                "iptables-restore is not installed on this runner (Debian and Ubuntu: apt-get install iptables)".into(),
            ),
        };
        let recheck = Protections {
            gateway: None,
            agent: AgentUser::Off,
            egress: Egressed::Off,
        };
        insta::assert_snapshot!(format!(
            "{}\n{}\n{}",
            all.summary(),
            none.summary(),
            recheck.summary()
        ));
    }
}

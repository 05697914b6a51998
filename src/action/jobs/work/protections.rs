//! What the work job's summary says about the protections its attempt ran under (issue 35):
//! the model gateway, the provider key withheld from the worker, the unprivileged user, and
//! egress. Each line says whether it was on and, when it was not, why.

use crate::edge::agent_user::AgentUser;

/// The protections one work job ran its task code under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protections {
    /// Whether the worker reached its provider through the model gateway; `None` when no
    /// worker ran (a merge's re-check).
    pub gateway: Option<bool>,
    /// Whether task code ran as the agent's unprivileged user.
    pub agent: AgentUser,
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
        s.push_str("- **egress: not restricted** — the agent could reach any host\n");
        s
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
        let all = Protections {
            gateway: Some(true),
            agent: AgentUser::On(agent),
        };
        let none = Protections {
            gateway: Some(false),
            agent: AgentUser::Unavailable(
                "dagexec does not run as root here, so it cannot start the agent as dagexec-agent"
                    .into(),
            ),
        };
        let recheck = Protections {
            gateway: None,
            agent: AgentUser::Off,
        };
        insta::assert_snapshot!(format!(
            "{}\n{}\n{}",
            all.summary(),
            none.summary(),
            recheck.summary()
        ));
    }
}

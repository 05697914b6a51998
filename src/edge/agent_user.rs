//! The unprivileged user task code runs as in the Action's work job (issue 35): the action
//! creates it (`scripts/install-action.sh agent-user`, no sudo, a home of its own) and names
//! it in `DAGEXEC_AGENT_USER`; dagexec, as root, starts the worker, the reviewer and the
//! acceptance checks as that user ([`drop_to`], called by every spawner of task code), so
//! they cannot read dagexec's environment (`/proc/<pid>/environ` is its owner's) or memory
//! (another user's processes cannot be traced), and cannot become root.
//!
//! The user must be able to work in the checkout: [`hand_over_tree`] gives it the work
//! tree's files (not `.git`, which stays readable and dagexec's; the top folder keeps its
//! owner, so git still trusts it, and gets the user's group with write access and the sticky
//! bit, so the user cannot rename `.git` away and put one of its own there), and
//! [`hand_over`] the attempt's scratch folder. What dagexec leaves for the runner's later
//! steps (the artifact, and the checkout the runner cleans up) goes back to the user `sudo`
//! ran it for ([`hand_back`]).
//!
//! The plan job of `schedule: eager`, which also conducts (the action's `conduct` input),
//! runs the plan's pre-flight checks as that user too, without handing it anything
//! ([`let_pass`]): the checkout stays dagexec's, so nothing a check does reaches the
//! conductor that runs after it in the same job.
//!
//! Nothing is set outside those jobs: every function here does nothing then.

use std::path::Path;
use std::sync::OnceLock;

/// The variable that names the user (set by the action's step that created it).
pub const USER_VAR: &str = "DAGEXEC_AGENT_USER";
/// Why the action could not create it (set instead of [`USER_VAR`]).
pub const WHY_VAR: &str = "DAGEXEC_AGENT_USER_WHY";

/// The user task code runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentAccount {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: String,
}

/// Whether task code runs as the agent's user, and if not why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentUser {
    /// Not asked for (the `agent-user` input is off, or this is not the Action's work job).
    Off,
    /// Task code runs as this user.
    On(AgentAccount),
    /// Asked for, but it cannot be: why (task code runs as dagexec's own user).
    Unavailable(String),
}

static AGENT: OnceLock<AgentAccount> = OnceLock::new();

/// The user task code runs as, once [`from_env`] set it.
pub fn current() -> Option<&'static AgentAccount> {
    AGENT.get()
}

/// The variables every process of the agent's user gets beside its names: the egress
/// proxy's, once `edge::egress` started it ([`route_through`]).
static ROUTE: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// From now on, every process started as the agent's user ([`drop_to`]) gets `env`: the
/// egress proxy's variables (`edge::egress::start`). Set once; a second call changes
/// nothing.
pub fn route_through(env: Vec<(String, String)>) {
    let _ = ROUTE.set(env);
}

/// Reads [`USER_VAR`] (and [`WHY_VAR`]) from dagexec's environment; a user found in
/// `/etc/passwd` while dagexec runs as root becomes the one task code runs as.
pub fn from_env() -> AgentUser {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    let Some(name) = var(USER_VAR) else {
        return match var(WHY_VAR) {
            Some(why) => AgentUser::Unavailable(why),
            None => AgentUser::Off,
        };
    };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let root = effective_uid() == Some(0);
    let state = decide(name.trim(), &passwd, root);
    if let AgentUser::On(agent) = &state {
        let _ = AGENT.set(agent.clone());
    }
    state
}

/// dagexec's effective user id, from `/proc/self/status` (`Uid:` real, effective, …).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find_map(|l| l.strip_prefix("Uid:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Whether task code can run as `name`: a user of `passwd` (the text of `/etc/passwd`), not
/// root, with dagexec running as root (`root`) so it can start processes as another user.
pub fn decide(name: &str, passwd: &str, root: bool) -> AgentUser {
    let Some(agent) = passwd.lines().find_map(|l| parse_line(l, name)) else {
        return AgentUser::Unavailable(format!(
            "no user {name} on this runner (/etc/passwd has none)"
        ));
    };
    if agent.uid == 0 {
        return AgentUser::Unavailable(format!("{name} is root"));
    }
    if !root {
        return AgentUser::Unavailable(format!(
            "dagexec does not run as root here, so it cannot start the agent as {name}"
        ));
    }
    AgentUser::On(agent)
}

/// `name`'s entry of a passwd line (`name:x:uid:gid:gecos:home:shell`).
fn parse_line(line: &str, name: &str) -> Option<AgentAccount> {
    let f: Vec<&str> = line.split(':').collect();
    if f.len() < 7 || f[0] != name {
        return None;
    }
    Some(AgentAccount {
        name: name.to_string(),
        uid: f[2].parse().ok()?,
        gid: f[3].parse().ok()?,
        home: f[5].to_string(),
    })
}

/// Starts `cmd` as the agent's user, when there is one (as root, std drops the
/// supplementary groups before `setuid`), with its home and names in the environment and,
/// while egress is restricted (`edge::egress`), the egress proxy's variables
/// ([`route_through`]). A tokio `Command` is given as its `as_std_mut()`.
pub fn drop_to(cmd: &mut std::process::Command) {
    use std::os::unix::process::CommandExt;
    if let Some(agent) = current() {
        cmd.uid(agent.uid)
            .gid(agent.gid)
            .env("HOME", &agent.home)
            .env("USER", &agent.name)
            .env("LOGNAME", &agent.name)
            .envs(ROUTE.get().into_iter().flatten().map(|(k, v)| (k, v)));
    }
}

/// Gives the agent's user the checkout at `root` to work in: every file and folder below it
/// but `.git` (links themselves, never followed); the top folder keeps its owner (git trusts
/// a repository by its owner) and gets the user's group, writable, and the sticky bit: the
/// user adds and removes its own entries there, never `.git` (renamed away, a `.git` of its
/// own in its place would be the one dagexec's later git calls obey, as root); a folder above
/// it that others cannot pass through gets the permission to pass (`o+x`: not to list).
pub fn hand_over_tree(root: &Path) -> std::io::Result<()> {
    let Some(agent) = current() else {
        return Ok(());
    };
    std::os::unix::fs::lchown(root, None, Some(agent.gid))?;
    use std::os::unix::fs::PermissionsExt;
    let mut p = std::fs::symlink_metadata(root)?.permissions();
    p.set_mode(p.mode() | 0o1070);
    std::fs::set_permissions(root, p)?;
    let_pass(root)?;
    for entry in std::fs::read_dir(root)? {
        let entry = entry?;
        if entry.file_name() == ".git" {
            continue;
        }
        chown_all(&entry.path(), agent.uid, agent.gid)?;
    }
    Ok(())
}

/// Lets the agent's user pass through the folders above `root` to work in it (`o+x` where
/// others could not pass: search, not list), giving it nothing to write: the plan job runs
/// the plan's pre-flight checks there as that user, in a checkout that stays dagexec's.
pub fn let_pass(root: &Path) -> std::io::Result<()> {
    if current().is_none() {
        return Ok(());
    }
    use std::os::unix::fs::PermissionsExt;
    for up in root.ancestors().skip(1) {
        let mut p = std::fs::metadata(up)?.permissions();
        if p.mode() & 0o001 == 0 {
            p.set_mode(p.mode() | 0o001);
            std::fs::set_permissions(up, p)?;
        }
    }
    Ok(())
}

/// Gives the agent's user `path` and everything below it.
pub fn hand_over(path: &Path) -> std::io::Result<()> {
    match current() {
        Some(agent) => chown_all(path, agent.uid, agent.gid),
        None => Ok(()),
    }
}

/// Gives `path` and everything below it back to the user `sudo` ran dagexec for
/// (`SUDO_UID`, `SUDO_GID`), so the runner's later steps (the upload) can read it; nothing
/// when dagexec was not started through sudo.
pub fn hand_back(path: &Path) -> std::io::Result<()> {
    let id = |k: &str| {
        std::env::var(k)
            .ok()
            .and_then(|v| v.trim().parse::<u32>().ok())
    };
    match (current(), id("SUDO_UID"), id("SUDO_GID")) {
        (Some(_), Some(uid), Some(gid)) => chown_all(path, uid, gid),
        _ => Ok(()),
    }
}

/// `lchown` of `path` and, for a folder (not a link to one), everything below it.
fn chown_all(path: &Path, uid: u32, gid: u32) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(gid))?;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        for entry in std::fs::read_dir(path)? {
            chown_all(&entry?.path(), uid, gid)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\n\
        runner:x:1001:118::/home/runner:/bin/bash\n\
        dagexec-agent:x:1002:1002::/home/dagexec-agent:/bin/sh\n";

    #[test]
    fn the_agent_runs_as_its_user_only_when_it_exists_and_dagexec_is_root() {
        let want = AgentAccount {
            name: "dagexec-agent".into(),
            uid: 1002,
            gid: 1002,
            home: "/home/dagexec-agent".into(),
        };
        assert_eq!(decide("dagexec-agent", PASSWD, true), AgentUser::On(want));
        let cases = [
            ("dagexec-agent", false, "dagexec does not run as root here"),
            ("nobody-here", true, "no user nobody-here on this runner"),
            ("root", true, "root is root"),
        ];
        for (name, root, why) in cases {
            match decide(name, PASSWD, root) {
                AgentUser::Unavailable(w) => assert!(w.contains(why), "{name}: {w}"),
                other => panic!("{name}: {other:?}"),
            }
        }
        // A prefix of a name is not the name; a short line is no entry.
        assert!(matches!(
            decide("dagexec", PASSWD, true),
            AgentUser::Unavailable(_)
        ));
        assert!(parse_line("dagexec-agent:x:1", "dagexec-agent").is_none());
    }
}

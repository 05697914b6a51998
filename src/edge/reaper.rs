//! Nothing task code starts outlives the Action's job step that ran it.
//!
//! The jobs that run task code on a runner (`action work`, and `action plan` for pre-flight
//! checks) make dagexec a *child subreaper* (Linux `PR_SET_CHILD_SUBREAPER`): a process that
//! leaves its group and session and clears its environment (`setsid env -i …`, a double fork)
//! is reparented to dagexec instead of to init, so it stays a descendant. Before the job puts
//! the runner's files back and writes its outputs, [`Reaper::finish`] (and, after each run of
//! task code, before the job reads what it left, [`sweep_now`]) SIGKILLs every
//! descendant, again while killing frees more (a killed process's orphans come back to
//! dagexec), and reaps them. The step then ends with nothing of task code left to append to
//! the runner's files or to read a later step's environment.
//!
//! The limit: a descendant running as another user (task code that used `sudo`, which
//! GitHub-hosted runners allow without a password) cannot be killed; it is named in a warning.
//! A process that was never a descendant (one a daemon such as `dockerd` or `systemd` started
//! at task code's request) is not found at all. Elsewhere than Linux this does nothing.

/// What [`Reaper::finish`] found.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Reaped {
    /// How many processes it killed.
    pub killed: usize,
    /// Descendants it could not kill (another user's): `pid name`.
    pub survivors: Vec<String>,
}

/// The subreaper of one job step (see the module docs).
#[derive(Debug)]
pub struct Reaper {
    active: bool,
}

impl Reaper {
    /// Makes this process the subreaper of everything it starts from now on. Inactive (and
    /// [`Reaper::finish`] a no-op) where the system does not allow it.
    pub fn start() -> Reaper {
        #[cfg(target_os = "linux")]
        let active = nix::sys::prctl::set_child_subreaper(true).is_ok();
        #[cfg(not(target_os = "linux"))]
        let active = false;
        Reaper { active }
    }

    /// SIGKILLs and reaps every live descendant of this process; call it once the commands
    /// it started are done.
    pub fn finish(&self) -> Reaped {
        if !self.active {
            return Reaped::default();
        }
        let mut out = sweep();
        out.killed += SWEPT.swap(0, std::sync::atomic::Ordering::Relaxed);
        out
    }
}

/// How many processes [`sweep_now`] killed in the job so far, for [`Reaper::finish`] to say.
static SWEPT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Kills what task code left running once it ended, now: the job that runs task code as
/// another user calls it after each run of it and before it reads or writes what that code
/// left (a process left behind could swap a folder for a link between dagexec's check and
/// its use); [`Reaper::finish`] says how many at the job's end.
pub fn sweep_now() {
    let swept = sweep().killed;
    SWEPT.fetch_add(swept, std::sync::atomic::Ordering::Relaxed);
}

/// SIGKILLs and reaps every live descendant of this process.
fn sweep() -> Reaped {
    let mut out = Reaped::default();
    #[cfg(target_os = "linux")]
    {
        use nix::sys::signal::{Signal, kill};
        let mut refused = std::collections::BTreeSet::new();
        // Each pass kills what it finds; a killed process's orphans are found by the next.
        for _ in 0..100 {
            let live: Vec<(i32, String)> = descendants()
                .into_iter()
                .filter(|(pid, _)| !refused.contains(pid))
                .collect();
            if live.is_empty() {
                break;
            }
            for (pid, name) in live {
                match kill(nix::unistd::Pid::from_raw(pid), Signal::SIGKILL) {
                    Ok(()) => out.killed += 1,
                    Err(nix::errno::Errno::ESRCH) => {}
                    Err(_) => {
                        refused.insert(pid);
                        out.survivors.push(format!("{pid} {name}"));
                    }
                }
            }
            reap();
        }
        reap();
    }
    out
}

/// Collects every child that has ended (ours, or adopted), without waiting.
#[cfg(target_os = "linux")]
fn reap() {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    while let Ok(status) = waitpid(None, Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
}

/// The live (not zombie) descendants of this process: pid and command name, from
/// `/proc/<pid>/stat`.
#[cfg(target_os = "linux")]
fn descendants() -> Vec<(i32, String)> {
    let me = std::process::id() as i32;
    let mut parent = std::collections::BTreeMap::new();
    for pid in crate::edge::procs::others().into_iter().flatten() {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let mut rest = stat[close + 1..].split_whitespace();
        let (Some(state), Some(ppid)) =
            (rest.next(), rest.next().and_then(|p| p.parse::<i32>().ok()))
        else {
            continue;
        };
        parent.insert(pid, (ppid, state != "Z", name));
    }
    let mut out = Vec::new();
    let mut frontier = vec![me];
    while let Some(p) = frontier.pop() {
        for (pid, (ppid, live, name)) in &parent {
            if *ppid == p && *pid != me {
                frontier.push(*pid);
                if *live {
                    out.push((*pid, name.clone()));
                }
            }
        }
    }
    out
}

//! The agent's user (`dagexec-agent`) is shared by every test whose jobs run task code as it,
//! and one test removes it and has the action make it again: a file lock (`flock`) in the
//! temporary folder orders them across every test process, as an in-process lock could not
//! (CI runs the act group and the other tests in two processes at once).

use std::fs::File;

use rustix::fs::FlockOperation;

/// A held share of the agent's user, or all of it; let go on drop.
#[must_use]
pub struct AgentUser(#[allow(dead_code)] File);

fn take(how: FlockOperation) -> AgentUser {
    let path = std::env::temp_dir().join("dagexec-tests-agent-user.lock");
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    rustix::fs::flock(&file, how).unwrap_or_else(|e| panic!("flock {}: {e}", path.display()));
    AgentUser(file)
}

/// A share: this test's jobs run task code as the agent's user (or make it as the action does).
pub fn shared() -> AgentUser {
    take(FlockOperation::LockShared)
}

/// The whole of it: no other test's job runs as the agent's user meanwhile.
pub fn alone() -> AgentUser {
    take(FlockOperation::LockExclusive)
}

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

/// The agent's user, made as the action's step makes it (`scripts/install-action.sh
/// agent-user`), for a test that runs a work job as root directly (no act); `None`, with the
/// test skipped and said once, where the tests do not run as root (`.ci/run` runs them as
/// root: there it fails instead).
pub fn made() -> Option<String> {
    let out = std::process::Command::new("id").arg("-u").output().unwrap();
    let root = String::from_utf8_lossy(&out.stdout).trim() == "0";
    let found = root.then(|| std::path::PathBuf::from("root"));
    super::tools::or_skip(
        found,
        "root",
        "the work job's tests of the agent's user without act",
        "run the tests as root (the work job starts task code as dagexec-agent only as root)",
    )?;
    let outputs = tempfile::NamedTempFile::new().unwrap();
    let made = std::process::Command::new("bash")
        .arg(super::manifest().join("scripts/install-action.sh"))
        .arg("agent-user")
        .env("GITHUB_OUTPUT", outputs.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let said = std::fs::read_to_string(outputs.path()).unwrap();
    let user = said.lines().find_map(|l| l.strip_prefix("user="));
    Some(
        user.unwrap_or_else(|| panic!("no agent user: {said}"))
            .to_string(),
    )
}

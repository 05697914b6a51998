//! What a child process dagexec starts (worker, reviewer, acceptance or pre-flight check)
//! must not inherit: the runner's file commands, every `ACTIONS_*` variable and the
//! credentials. Every spawner of task code calls [`scrub_child_env`] (through
//! [`crate::edge::procs::sh`]); locally the variables are not set and it costs nothing.

/// The runner's file commands: a line appended to any of them changes the step's outputs,
/// the next steps' environment or `PATH`, the post step's state or the job summary.
pub const FILE_COMMANDS: [&str; 5] = [
    "GITHUB_OUTPUT",
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
];

/// Variables that carry a credential, by exact name: the action's inputs as dagexec reads
/// them, the token variables of `gh`, git and the runner, and the GitHub App's key.
const SECRET_VARS: [&str; 9] = [
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "GH_ENTERPRISE_TOKEN",
    "GITHUB_ENTERPRISE_TOKEN",
    "DAGEXEC_TOKEN",
    "DAGEXEC_APP_PRIVATE_KEY",
    "INPUT_TOKEN",
    "INPUT_PRIVATE-KEY",
    "INPUT_PRIVATE_KEY",
];

/// Whether a child process dagexec starts (worker, reviewer, acceptance or pre-flight check)
/// must not see the variable `name`: the file commands, every `ACTIONS_*` variable (the
/// runtime token that uploads artifacts and reads the cache, the OIDC token request), and
/// the credentials of [`SECRET_VARS`].
pub fn hidden_from_children(name: &str) -> bool {
    FILE_COMMANDS.contains(&name)
        || name.starts_with("ACTIONS_")
        || SECRET_VARS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// Takes every variable [`hidden_from_children`] names (of dagexec's own environment) out of
/// `cmd`'s: task code never sees the runner's file commands or a token. Every spawner of
/// task code calls it (through [`crate::edge::procs::sh`]); locally it costs nothing (the
/// variables are not set).
pub fn scrub_child_env(cmd: &mut std::process::Command) {
    for (name, _) in std::env::vars_os() {
        if name.to_str().is_none_or(hidden_from_children) {
            cmd.env_remove(&name);
        }
    }
}

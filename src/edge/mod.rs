//! The edges: everything that touches the world outside the process. Files written without
//! following links (`fsx`), one command with a timeout (`shell`), process groups and the child
//! subreaper (`procs`, `reaper`), a worker process (`worker`), git (`git`), and the GitHub API
//! (`github`). Nothing here decides what a run does next: that is `pure` and `flow`.

pub mod agent_user;
pub mod child_env;
pub mod egress;
pub mod fsx;
pub mod gateway;
pub mod git;
pub mod github;
pub mod lock;
pub mod plan_file;
pub mod procs;
pub mod reaper;
pub mod shell;
pub mod worker;

//! The worker `init` writes into the workflow: a CLI of the one table of named agents
//! ([`crate::pure::agents`], the same names `dagexec run --worker` accepts), installed at its
//! pinned version with its secret and environment, or any command.

use super::InitError;
use crate::pure::agents::{self, AgentCli};

/// A worker `--worker` can name, or any command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Worker {
    /// A CLI of [`agents::AGENTS`].
    Named(&'static AgentCli),
    Command(String),
}

impl Worker {
    /// Claude Code, the default.
    pub fn claude() -> Worker {
        Worker::Named(&agents::AGENTS[0])
    }

    /// The known names (`claude`, `codex`, `gemini`, `aider`), else the text as a command line.
    pub fn parse(s: &str) -> Result<Worker, InitError> {
        let t = s.trim();
        if t.is_empty() || t.contains(['\n', '\r']) {
            return Err(InitError::BadWorker);
        }
        Ok(match agents::named(t) {
            Some(a) => Worker::Named(a),
            None => Worker::Command(t.to_string()),
        })
    }

    /// Said in prompts and step names.
    pub fn label(&self) -> &str {
        match self {
            Worker::Named(a) => a.label,
            Worker::Command(c) => c,
        }
    }

    /// The command line the work job runs (prompt on stdin).
    pub fn command(&self) -> String {
        match self {
            Worker::Named(a) => a.command.into(),
            Worker::Command(c) => c.clone(),
        }
    }

    /// The named CLI (`None` for a command).
    fn agent(&self) -> Option<&'static AgentCli> {
        match self {
            Worker::Named(a) => Some(a),
            Worker::Command(_) => None,
        }
    }

    /// The secret the worker reads its API key from, by default.
    pub fn default_secret(&self) -> Option<&'static str> {
        self.agent().map(|a| a.secret)
    }

    /// Variables the work job sets for the worker besides its secret.
    pub(super) fn env(&self) -> &'static [(&'static str, &'static str)] {
        self.agent().map_or(&[], |a| a.env)
    }

    /// The install step's name and command, for a known CLI.
    pub(super) fn install(&self) -> Option<(String, String)> {
        let a = self.agent()?;
        Some((
            format!("Install the worker ({} {})", a.label, a.version),
            a.install(),
        ))
    }

    /// The paths of this machine the command names (`/home/me/worker.sh`, `~/bin/w`): they do
    /// not exist on GitHub's runner. System places (`/usr`, `/bin`, `/dev`, …) are the same
    /// there and are not named.
    pub fn local_paths(&self) -> Vec<String> {
        let Worker::Command(c) = self else {
            return Vec::new();
        };
        const SYSTEM: [&str; 6] = ["/usr/", "/bin/", "/sbin/", "/dev/", "/etc/", "/proc/"];
        c.split_whitespace()
            .map(|w| w.trim_matches(|ch| ch == '\'' || ch == '"'))
            .filter(|w| {
                (w.starts_with('/') && !SYSTEM.iter().any(|s| w.starts_with(s)))
                    || w.starts_with("~/")
                    || w.starts_with("$HOME")
            })
            .map(str::to_string)
            .collect()
    }
}

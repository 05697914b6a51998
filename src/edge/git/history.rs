//! Reading the branch's history back: the commits reachable from `HEAD` whose message holds a
//! given string (`git log -F --grep`), with their full messages. The Action's steering keeps a
//! record of each applied `/execute` command in the message of the commit that applied it, so
//! the record lives as long as the branch's history does, whatever later happens to the files.

use super::cmd::{git, nul_fields};
use super::{GitError, Repo};

/// A commit found in the history: its full SHA and its whole message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Logged {
    pub sha: String,
    pub message: String,
}

impl Repo {
    /// The commits reachable from `HEAD` (and not from `since`, when given) whose message
    /// contains `needle` (a fixed string, case-sensitive), newest first; none before the first
    /// commit.
    pub fn commits_mentioning(
        &self,
        needle: &str,
        since: Option<&str>,
    ) -> Result<Vec<Logged>, GitError> {
        let mut log = git(self.root(), "log --grep")
            .args([
                "log",
                "--no-color",
                "--fixed-strings",
                "-z",
                "--format=%H%n%B",
            ])
            .arg(format!("--grep={needle}"))
            .arg(match since {
                Some(since) => format!("{since}..HEAD"),
                None => "HEAD".to_string(),
            })
            .arg("--");
        let found = log.output()?;
        // Before the first commit `HEAD` names nothing: asked only when the log failed.
        if !found.status.success() {
            return match self.rev_parse("HEAD^{commit}")? {
                None => Ok(Vec::new()),
                Some(_) => Err(log.error(&found)),
            };
        }
        let out = found.stdout;
        // `-z`: one commit per NUL-separated entry, its SHA on the first line.
        Ok(nul_fields(&out)
            .filter_map(|entry| {
                let (sha, message) = entry.trim_start().split_once('\n')?;
                Some(Logged {
                    sha: sha.trim().to_string(),
                    message: message.trim().to_string(),
                })
            })
            .collect())
    }
}

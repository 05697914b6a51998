//! `--issue N` (`run`, `validate`): the plan made of a GitHub issue's sub-issues
//! (`sources::Source::Issues`, read by `sources::issues::read`), put in the place of
//! `--plan` by `location::source_location` as every source's plan is.

use std::path::Path;

use crate::cli::args::{Command, IssueArgs};
use crate::cli::report::CliError;
use crate::sources::Source;
use crate::sources::issues::read::{self, Options};

/// For `run --issue N` / `validate --issue N`: the issues as the plan's source, and whether
/// the plan is written (and committed) in place. Other commands: `None`.
pub(crate) fn issue_source(
    command: &Command,
    root: &Path,
) -> Result<Option<(Source, bool)>, CliError> {
    let (args, write) = match command {
        Command::Run(a) => (&a.issue, !a.dry_run),
        Command::Validate(a) => (&a.issue, false),
        _ => return Ok(None),
    };
    let IssueArgs {
        issue: Some(number),
        reread,
        include,
        repo,
    } = args
    else {
        return Ok(None);
    };
    let repo = read::repo_from(repo.as_deref(), root).ok_or_else(|| {
        CliError::usage(
            "cannot tell which repository issue's sub-issues to read",
            "pass --repo OWNER/NAME (or set GITHUB_REPOSITORY, or add a GitHub `origin` remote)",
        )
    })?;
    let opts = Options {
        number: *number,
        repo,
        api_url: std::env::var("GITHUB_API_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| "https://api.github.com".into()),
        token: read::token_from_env(),
        include: include.clone(),
        // `validate` always reads the issues: it says what a run would start from.
        reread: *reread || matches!(command, Command::Validate(_)),
    };
    Ok(Some((Source::Issues(opts), write)))
}

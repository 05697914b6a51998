//! `--issue N` (`run`, `validate`): the plan made of a GitHub issue's sub-issues
//! (`sources::issues::read`), put in the place of `--plan`; what reading cost and noted goes
//! to stderr (the API requests, the sub-issues left out, the edges to issues outside the plan).

use crate::cli::args::{Command, IssueArgs};
use crate::cli::location::Location;
use crate::cli::report::CliError;
use crate::sources::issues::read::{self, Options, Prepared, ReadReport};

/// For `run --issue N` / `validate --issue N`: the location of the issues' plan (`None`:
/// every task of it completed, nothing to run). Other commands: `loc` unchanged.
pub(crate) fn issue_location(
    command: &Command,
    loc: Location,
) -> Result<Option<(Location, Option<Prepared>)>, CliError> {
    let (args, write) = match command {
        Command::Run(a) => (&a.issue, !a.dry_run),
        Command::Validate(a) => (&a.issue, false),
        _ => return Ok(Some((loc, None))),
    };
    let IssueArgs {
        issue: Some(number),
        reread,
        include,
        repo,
    } = args
    else {
        return Ok(Some((loc, None)));
    };
    let usage = |message: String, hint: &str| CliError::Usage {
        message,
        hint: hint.into(),
    };
    let repo = read::repo_from(repo.as_deref(), &loc.root).ok_or_else(|| {
        usage(
            "cannot tell which repository issue's sub-issues to read".into(),
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
        write,
    };
    let prepared = read::prepare(&loc.root, &opts).map_err(|e| CliError::Usage {
        hint: e.hint(),
        message: e.to_string(),
    })?;
    match &prepared.read {
        Some(r) => eprint!("{}", describe(*number, r)),
        None if prepared.archived => {
            eprintln!(
                "Every task of the plan read from issue #{number} is completed (archived as {}); \
                 `--reread` reads the issues again, new sub-issues becoming tasks.",
                prepared.plan.display()
            );
            return Ok(None);
        }
        None => eprintln!(
            "Using the plan read from issue #{number} at the start ({}); `--reread` reads the issues again.",
            prepared.plan_rel
        ),
    }
    let loc = Location {
        plan: prepared.plan.clone(),
        root: loc.root,
        plan_rel: Some(prepared.plan_rel.clone()),
    };
    Ok(Some((loc, Some(prepared))))
}

/// What reading issue `number` took and noted.
pub(crate) fn describe(number: u64, r: &ReadReport) -> String {
    let mut s = format!(
        "Read issue #{number}: {} tasks in {} API requests ({} GraphQL, {} REST).\n",
        r.tasks,
        r.graphql_calls + r.rest_calls,
        r.graphql_calls,
        r.rest_calls
    );
    for n in &r.left_out {
        s.push_str(&format!("  left out {}: {}\n", n.issue, n.text));
    }
    for n in &r.outside {
        s.push_str(&format!("  {}: {}\n", n.issue, n.text));
    }
    for d in &r.dropped {
        s.push_str(&format!("  dropped {d}: no longer a sub-issue\n"));
    }
    if let Some(c) = &r.commit {
        s.push_str(&format!("  committed as {}\n", &c[..c.len().min(12)]));
    }
    s
}

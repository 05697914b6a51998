//! An ended task run's result: its artifact found by its exact name, downloaded into a
//! temporary file and read; a GitHub that fails to list or serve it is asked again later.

use std::time::Duration;

use super::{MAX_ARTIFACT_BYTES, read_zip};
use crate::action::arrival;
use crate::action::matrix::Entry;
use crate::edge::github::Client;
use crate::edge::github::runs::WorkflowRun;
use crate::flow::Ui;

/// How long after its run ended an artifact that GitHub fails to list or serve is waited
/// for; past it the attempt is judged without its result. GitHub keeps artifacts for 90 days
/// by default and at least one day.
pub const RESULT_PATIENCE: Duration = Duration::from_secs(24 * 3600);

/// What a poll got of an ended run's result.
pub(super) enum Fetched {
    /// The artifact read (or why it could not be: `None` when the run left none — it failed
    /// before uploading, was cancelled, or the artifact expired), and its page for the logs
    /// link.
    Done(
        Option<Result<Box<crate::action::artifact::Collected>, String>>,
        Option<String>,
    ),
    /// GitHub failed to list or serve it (down, or rate limiting): the result is still
    /// there, to be read at a later poll.
    Later(crate::edge::github::ApiError),
}

/// The artifact of task `task` attempt `attempt` from its ended `run`: the exact name its job
/// uploads (the latest run attempt first, see [`arrival::accepted_names`]), downloaded into
/// an anonymous temporary file and read from it. A listing or download GitHub fails (after the retry policy's tries) is
/// [`Fetched::Later`] for [`RESULT_PATIENCE`] after the run ended.
pub(super) fn fetch(
    client: &Client,
    rt: &tokio::runtime::Runtime,
    run: &WorkflowRun,
    task: usize,
    attempt: u32,
    ui: &Ui,
) -> Fetched {
    let ended = run
        .updated_at
        .as_deref()
        .and_then(|t| t.parse::<jiff::Timestamp>().ok());
    let patient = ended.is_none_or(|e| {
        jiff::Timestamp::now().duration_since(e).as_secs() < RESULT_PATIENCE.as_secs() as i64
    });
    let entry = Entry {
        task,
        attempt,
        name: String::new(),
    };
    let names = arrival::accepted_names(&run.id.to_string(), run.run_attempt.max(1), &entry);
    let listed = match rt.block_on(client.artifacts_of(run.id, None)) {
        Ok(l) => l,
        Err(e) if e.transient() && patient => return Fetched::Later(e),
        Err(e) => {
            return Fetched::Done(
                Some(Err(format!("cannot list the run's artifacts: {e}"))),
                None,
            );
        }
    };
    for a in listed.iter().filter(|a| !names.contains(&a.name)) {
        ui.say(format!(
            "  ignored artifact {} of run {}: not task {task} attempt {attempt}'s",
            a.name, run.id
        ));
    }
    let Some(artifact) = names
        .iter()
        .find_map(|n| listed.iter().find(|a| &a.name == n && !a.expired))
    else {
        return Fetched::Done(None, None);
    };
    let url = (!run.html_url.is_empty()).then(|| {
        format!(
            "{}/artifacts/{}",
            run.html_url.trim_end_matches('/'),
            artifact.id
        )
    });
    let file = match rt.block_on(client.download_artifact(artifact.id, MAX_ARTIFACT_BYTES)) {
        Ok(f) => f,
        Err(e) if e.transient() && patient => return Fetched::Later(e),
        Err(e) => {
            return Fetched::Done(
                Some(Err(format!("cannot download {}: {e}", artifact.name))),
                url,
            );
        }
    };
    let read = read_zip(file).and_then(|c| {
        if (c.result.task, c.result.attempt) == (task, attempt) {
            Ok(c)
        } else {
            Err(format!(
                "{} holds the result of task {} attempt {}, not of task {task} attempt {attempt}",
                artifact.name, c.result.task, c.result.attempt
            ))
        }
    });
    Fetched::Done(Some(read.map(Box::new)), url)
}

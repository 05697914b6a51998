//! An ended task run's result: its artifact found by its exact name, downloaded into a
//! temporary file and read; a GitHub that fails to list or serve it is asked again later.

use super::{MAX_ARTIFACT_BYTES, read_zip};
use crate::action::arrival;
use crate::action::matrix::MatrixEntry;
use crate::edge::github::Client;
use crate::edge::github::runs::WorkflowRun;
use crate::flow::Ui;

/// What a poll got of an ended run's result: the artifact read (or why it could not be:
/// `None` when the run left none — it failed before uploading, was cancelled, or the artifact
/// expired), and its page for the logs link.
pub(super) type Fetched = (
    Option<Result<crate::action::artifact::Collected, String>>,
    Option<String>,
);

/// The artifact of task `task` attempt `attempt` from its ended `run`: the exact name its job
/// uploads (the latest run attempt first, see [`arrival::accepted_names`]), downloaded into
/// an anonymous temporary file and read from it. A listing or download GitHub fails (after
/// the retry policy's tries: 5xx, network, rate limit) is the error however long ago the run
/// ended: GitHub failed to list or serve it (down, or rate limiting), but the result is still
/// there (an artifact is kept for a day at least, 90 by default), to be read at a later poll —
/// by this conductor until its hand-over, then by its successor. An outage costs waiting,
/// never the attempt (issue 31).
pub(super) async fn fetch(
    client: &Client,
    run: &WorkflowRun,
    task: usize,
    attempt: u32,
    ui: &Ui,
) -> Result<Fetched, crate::edge::github::ApiError> {
    let entry = MatrixEntry {
        task,
        attempt,
        name: String::new(),
    };
    let names = arrival::accepted_names(&run.id.to_string(), run.run_attempt.max(1), &entry);
    let listed = match client.artifacts_of(run.id, None).await {
        Ok(l) => l,
        Err(e) if e.transient() => return Err(e),
        Err(e) => {
            return Ok((
                Some(Err(format!("cannot list the run's artifacts: {e}"))),
                None,
            ));
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
        return Ok((None, None));
    };
    let url = (!run.html_url.is_empty()).then(|| {
        format!(
            "{}/artifacts/{}",
            run.html_url.trim_end_matches('/'),
            artifact.id
        )
    });
    let file = match client
        .download_artifact(artifact.id, MAX_ARTIFACT_BYTES)
        .await
    {
        Ok(f) => f,
        Err(e) if e.transient() => return Err(e),
        Err(e) => {
            return Ok((
                Some(Err(format!("cannot download {}: {e}", artifact.name))),
                url,
            ));
        }
    };
    let read = read_zip(file).and_then(|c| arrival::of_entry(c, &artifact.name, &entry));
    Ok((Some(read), url))
}

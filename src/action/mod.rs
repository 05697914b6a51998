//! dagexec as a GitHub Action: each round is one workflow run of three jobs, and these are
//! the commands the composite `action.yml` runs in them.
//!
//! - [`plan`](jobs::plan) (job `plan`, read-only): finds or starts the execution branch, and
//!   writes the round's next part (a group of its unresolved tasks that share no file, see
//!   [`rounds`]) as a job matrix (never an empty one: "no work" instead).
//! - [`work`](jobs::work) (one matrix job per task, `contents: read`, no write token): runs
//!   the worker under the same contract as locally, the task's acceptance checks and, when
//!   the attempt completed and a reviewer is set, the reviewer; leaves `result.json`,
//!   `changes.patch` and `worker.log` for `actions/upload-artifact`.
//! - [`finalize`](jobs::finalize) (`if: always()`): reads the artifacts and runs the local
//!   runner's own verification, review rules, integration and plan update, commits and
//!   pushes the round, keeps the pull request current, reports stops as a `dagexec` check
//!   run, and dispatches the next round. It never runs code from a task: the checks ran in
//!   the worker's job.
//!
//! Pure pieces: [`matrix`] (chunking, names), [`artifact`] (the files), [`report`] (texts).

pub mod arrival;
pub mod artifact;
pub mod artifact_zip;
pub mod init;
pub mod jobs;
pub mod matrix;
pub mod protocol;
mod publish;
pub mod report;
pub mod rounds;
pub mod runtime;
pub mod steering;
pub mod writer;

use std::path::PathBuf;
use std::time::Duration;

use crate::edge::github::Token;

/// The action's inputs, as the commands receive them (flags or `DAGEXEC_*`/`INPUT_*` env).
#[derive(Debug, Clone)]
pub struct Inputs {
    /// The plan, relative to the repository root.
    pub plan_rel: String,
    pub worker: String,
    /// The run's reviewer command (work; a task's own `reviewer` field wins); `None`: none.
    pub reviewer: Option<String>,
    pub max_parallel: usize,
    pub timeout: Duration,
    /// The execution branch; empty: `dagexec/<goal slug>`.
    pub branch: String,
    pub allow_workflow_changes: bool,
    pub token: Token,
    /// The GitHub App finalize authenticates as (its comments are dagexec's own too).
    pub app_id: Option<u64>,
    /// The workflow file to dispatch the next round of (`dagexec.yml`).
    pub workflow: String,
    /// Where `work` leaves its files / where `finalize` finds the downloaded artifacts.
    pub artifacts: PathBuf,
    /// The `max-cost` budget (plan, finalize): no round is planned or dispatched once the
    /// plan's recorded spend reaches it.
    pub max_cost: Option<crate::pure::usage::Budget>,
    /// The SHA-256 of the running dagexec binary (`DAGEXEC_BUILD_SHA256`, from the action's
    /// install step; empty outside it): sent as the `build` input of every dispatch.
    pub build: String,
    /// The `overlap` input (plan): `None` leaves it to `.design/dagexec.yml`.
    pub overlap: Option<crate::pure::overlap::Policy>,
}

use crate::pure::timeline::Ran;

impl Inputs {
    /// Who dagexec is on GitHub in this job (the App of `app_id`, if any, besides Actions' bot).
    pub(crate) fn me(&self) -> steering::comment::Identity {
        steering::comment::Identity {
            app_id: self.app_id,
        }
    }

    /// How a run of `schedule` runs on Actions under these inputs (`merge`: under `overlap:
    /// merge`), for the timeline's prediction beside it.
    pub(crate) fn ran(&self, schedule: crate::pure::engine::Schedule, merge: bool) -> Ran {
        Ran {
            schedule,
            place: crate::pure::simulate::Place::Actions,
            slots: self.max_parallel,
            merge,
        }
    }
}

/// Why an Action command could not do its job (a task failing is not such a reason).
#[derive(Debug, thiserror::Error)]
pub enum ActionError {
    #[error(transparent)]
    Plan(#[from] crate::pure::plan::error::PlanErrors),
    #[error(transparent)]
    Git(#[from] crate::edge::git::GitError),
    #[error(transparent)]
    Api(#[from] crate::edge::github::ApiError),
    #[error(transparent)]
    Run(#[from] crate::flow::RunError),
    #[error("{0}")]
    Input(String),
    #[error("cannot write {}: {source}", path.display())]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl ActionError {
    /// [`ActionError::Write`] of `path`, for `map_err` on an I/O error or a safe write's
    /// ([`crate::edge::fsx`]).
    pub(crate) fn write<E: Into<std::io::Error>>(path: &std::path::Path) -> impl FnOnce(E) -> Self {
        let path = path.to_path_buf();
        move |e| ActionError::Write {
            path,
            source: e.into(),
        }
    }
}

impl From<crate::pure::plan::error::PlanError> for ActionError {
    fn from(e: crate::pure::plan::error::PlanError) -> Self {
        ActionError::Plan(e.into())
    }
}

/// The overlap policy: the `overlap` input, else `overlap:` in `.design/dagexec.yml` at the
/// checkout `root`, else `serial` (the plan job's and the conductor's).
pub(crate) fn overlap_policy(
    root: &std::path::Path,
    inputs: &Inputs,
) -> Result<crate::pure::overlap::Policy, ActionError> {
    use crate::pure::overlap::Policy;
    if let Some(p) = inputs.overlap {
        return Ok(p);
    }
    let file = crate::flow::settings::read_file_config(root)
        .map_err(|e| ActionError::Input(e.to_string()))?;
    match file.overlap {
        Some(o) => Policy::parse(&o)
            .map_err(|m| ActionError::Input(format!(".design/dagexec.yml: overlap: {m}"))),
        None => Ok(Policy::Serial),
    }
}

/// The checkout at `root` moved to the round's `base` (fetched first when the clone lacks
/// it), with the token's remote access and the inputs with the plan resolved there: how
/// every job that reads a round's plan starts.
pub(crate) fn check_out(
    root: &std::path::Path,
    inputs: &Inputs,
    base: &str,
) -> Result<(crate::edge::git::Repo, crate::edge::git::RemoteAuth, Inputs), ActionError> {
    let repo = crate::edge::git::Repo::discover(root)?;
    let auth = crate::edge::git::RemoteAuth::token(inputs.token.expose());
    if repo.head()? != base {
        repo.ensure_commit(base, &auth)?;
        repo.checkout_detached(base)?;
    }
    let inputs = with_plan(repo.root(), inputs)?;
    Ok((repo, auth, inputs))
}

/// The inputs with the plan resolved in the checkout at `root`: a source other than a
/// plan.json (`sources::Source::at`: a long-run folder of `NN-PLAN.md`, a task list — Spec
/// Kit, Kiro, Taskmaster) becomes the plan `Source::prepare` writes beside it.
/// Preparing is deterministic from the tree, so every job of a round derives the same plan,
/// carrying the state committed with it.
pub(crate) fn with_plan(root: &std::path::Path, inputs: &Inputs) -> Result<Inputs, ActionError> {
    let mut resolved = inputs.clone();
    if let Some(source) = crate::sources::Source::at(&root.join(&inputs.plan_rel)) {
        let prepared = source.prepare(root, true).map_err(|errors| {
            let (message, hint) = crate::sources::describe(&errors);
            ActionError::Input(format!("{message}\n  hint: {hint}"))
        })?;
        resolved.plan_rel = prepared.plan_rel;
    }
    Ok(resolved)
}

/// The plan at `plan_rel` in `repo`'s checkout, or — when it is gone because a completed run
/// archived it (`plan.done.json`, or `history/<stamp>-plan.json` beside it) — the archived
/// plan with its path, provided every task of it is completed. A job that dies after pushing
/// the archive but before publishing (PR ready, status, check run) leaves only the archive on
/// the branch; whichever job comes next finishes the run from it.
pub(crate) fn load_plan(
    repo: &crate::edge::git::Repo,
    plan_rel: &str,
) -> Result<(crate::pure::plan::model::Plan, Option<String>), ActionError> {
    use crate::pure::plan::error::PlanErrors;
    let path = repo.root().join(plan_rel);
    let e = match crate::edge::plan_file::load(&path) {
        Ok(plan) => return Ok((plan, None)),
        Err(e) => PlanErrors::from(e),
    };
    let Some(rel) = (!path.exists())
        .then(|| archived_plan(repo, plan_rel))
        .flatten()
    else {
        return Err(e.into());
    };
    let archived =
        crate::edge::plan_file::load(&repo.root().join(&rel)).map_err(PlanErrors::from)?;
    let completed = crate::pure::plan::model::Status::Completed;
    if !archived.tasks.iter().all(|t| t.status == completed) {
        return Err(e.into());
    }
    Ok((archived, Some(rel)))
}

/// Where a completed run archived the plan at `plan_rel`: the archive the commit that removed
/// the plan added (`plan.done.json` or `history/<stamp>-plan.json` beside it); in a history
/// that does not reach that commit, the newest `history/` entry, else `plan.done.json`.
fn archived_plan(repo: &crate::edge::git::Repo, plan_rel: &str) -> Option<String> {
    let rel = std::path::Path::new(plan_rel);
    let dir = rel.parent().unwrap_or(std::path::Path::new(""));
    let is_archive = |p: &str| {
        let p = std::path::Path::new(p);
        p == dir.join("plan.done.json")
            || (p.parent() == Some(&dir.join("history"))
                && p.to_string_lossy().ends_with("-plan.json"))
    };
    let present = |p: &str| repo.root().join(p).is_file();
    if let Ok(files) = repo.files_of_last_change(plan_rel)
        && let Some(f) = files.iter().find(|f| is_archive(f) && present(f))
    {
        return Some(f.clone());
    }
    let newest = std::fs::read_dir(repo.root().join(dir).join("history"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.ends_with("-plan.json"))
        .max()
        .map(|n| dir.join("history").join(n).to_string_lossy().to_string());
    let done = dir.join("plan.done.json").to_string_lossy().to_string();
    newest.or_else(|| present(&done).then_some(done))
}

/// `dagexec/<goal slug>`: lower-case ASCII letters, digits and dashes, at most 48 of them.
pub fn default_branch_name(goal: &str) -> String {
    let mut slug = String::new();
    for c in goal.chars() {
        if c.is_ascii_alphanumeric() {
            slug.push(c.to_ascii_lowercase());
        } else if !slug.ends_with('-') && !slug.is_empty() {
            slug.push('-');
        }
        if slug.len() >= 48 {
            break;
        }
    }
    let slug = slug.trim_end_matches('-');
    format!("dagexec/{}", if slug.is_empty() { "plan" } else { slug })
}

/// Pushes `HEAD` to `branch` on `origin`; a rejected push (the branch moved meanwhile) is
/// fetched, rebased onto and pushed again, up to five tries. `say` reports each rejection.
/// The record of the commands the push settles goes with it
/// ([`steering::beside_push`], after the branch's tip as last fetched).
/// For the `steer` job's one-commit plan change; finalize never rebases a round.
pub(crate) fn push_with_rebase(
    repo: &crate::edge::git::Repo,
    branch: &str,
    auth: &crate::edge::git::RemoteAuth,
    say: impl Fn(String),
) -> Result<(), ActionError> {
    let tracking = format!("refs/remotes/origin/{branch}");
    for attempt in 1..=5 {
        let with = match repo.rev_parse(&tracking)? {
            Some(tip) => steering::beside_push(repo, branch, auth, &tip)?,
            None => None,
        };
        match repo.push_head(branch, with.as_ref(), auth)? {
            crate::edge::git::Pushed::Done => return Ok(()),
            crate::edge::git::Pushed::Rejected(why) => {
                say(format!(
                    "The push to {branch} was rejected ({}); fetching and rebasing (try {attempt} of 5).",
                    why.lines().last().unwrap_or("")
                ));
                repo.fetch_branch(branch, auth)?;
                repo.rebase_onto(&format!("refs/remotes/origin/{branch}"))?;
            }
        }
    }
    Err(ActionError::Input(format!(
        "could not push to {branch}: rejected 5 times; someone keeps pushing to the execution branch"
    )))
}

/// The tokio runtime the commands' async edges (worker, API) run on.
pub(crate) fn runtime() -> Result<tokio::runtime::Runtime, ActionError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| ActionError::Input(format!("cannot start the async runtime: {e}")))
}

/// Runs blocking `work` (a plan source that reads GitHub on a runtime of its own) on the
/// runtime's blocking threads, so it neither starves nor nests in the job's runtime; a panic
/// in it stays a panic.
pub(crate) async fn blocking<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> T {
    match tokio::task::spawn_blocking(work).await {
        Ok(done) => done,
        Err(e) => std::panic::resume_unwind(e.into_panic()),
    }
}

/// Writes `plan` to its file at `path` (atomically, never through a link).
pub(crate) fn save_plan(
    plan: &crate::pure::plan::model::Plan,
    path: &std::path::Path,
) -> Result<(), ActionError> {
    crate::edge::plan_file::save(plan, path).map_err(ActionError::write(path))
}

/// The inputs of a `workflow_dispatch` that runs the plan of `inputs` on `branch` (a
/// conductor's task run adds `task`, `attempt` and `base`), with `build`, the SHA-256 of this
/// binary, when known: the pin the started run's jobs check a restored build against. Only
/// trusted jobs dispatch, so the pin travels only through channels task code cannot write. A
/// workflow written by an older `dagexec init` declares no `build` input; GitHub refuses such
/// a dispatch and [`crate::edge::github::Client::dispatch`] sends it again without the pin.
pub(crate) fn dispatch_inputs(
    inputs: &Inputs,
    branch: &str,
) -> serde_json::Map<String, serde_json::Value> {
    let mut map = serde_json::Map::new();
    map.insert("plan".into(), inputs.plan_rel.as_str().into());
    map.insert("branch".into(), branch.into());
    if !inputs.build.is_empty() {
        map.insert(BUILD_INPUT.into(), inputs.build.as_str().into());
    }
    map
}

/// Starts a round of the plan of `inputs` on `branch`: its workflow dispatched on `on` (the
/// branch, or the ref a redirected run started from) with [`dispatch_inputs`].
pub(crate) async fn dispatch_round(
    c: &crate::edge::github::Client,
    inputs: &Inputs,
    branch: &str,
    on: &str,
) -> Result<(), crate::edge::github::ApiError> {
    c.dispatch(&inputs.workflow, on, &dispatch_inputs(inputs, branch))
        .await
}

/// The dispatch input that carries the build pin (`templates/dagexec.yml`'s `build`).
pub const BUILD_INPUT: &str = "build";

#[cfg(test)]
mod tests {
    #[test]
    fn branch_names_are_slugs_of_the_goal() {
        use super::default_branch_name as b;
        assert_eq!(b("Add JWT auth (v2)!"), "dagexec/add-jwt-auth-v2");
        assert_eq!(b("  ☃ "), "dagexec/plan");
        assert_eq!(b(&"word ".repeat(30)).len(), "dagexec/".len() + 48);
    }
}

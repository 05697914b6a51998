//! The long-run executor's worker contract around an attempt: the checkpoint watched while
//! the worker runs and kept between attempts, the `OUTPUT_JSON` block read after it, and
//! the STATE.md files committed with the round.

use crate::edge::git::Worktree;
use crate::edge::lock::held;
use crate::flow::RunOptions;
use crate::flow::exec::Judged;
use crate::flow::pool::AttemptInput;
use crate::pure::outcome::Verdict;
use crate::pure::plan::model::{Plan, Status, Task};
use crate::pure::question::{self, Kind, Question};
use crate::sources::longrun::folder::LONG_RUN_FIELD;
use crate::sources::longrun::output::{self, Output};
use crate::sources::longrun::partial::{Partial, Store};
use crate::sources::longrun::prompt as lr_prompt;
use std::path::Path;
use std::sync::Mutex;

/// The long-run paths of a task, when it is one.
pub(crate) fn long_run(task: &Task) -> Option<&serde_json::Map<String, serde_json::Value>> {
    task.extra.get(LONG_RUN_FIELD).and_then(|v| v.as_object())
}

pub(crate) fn field<'a>(lr: &'a serde_json::Map<String, serde_json::Value>, key: &str) -> &'a str {
    lr.get(key).and_then(|v| v.as_str()).unwrap_or("")
}

/// The checkpoint file of a long-run task (`DIR/plans/NN-CHECKPOINT.json`).
pub(crate) fn checkpoint_rel(task: &Task) -> Option<&str> {
    long_run(task)
        .map(|lr| field(lr, "checkpoint"))
        .filter(|c| !c.is_empty())
}

/// Puts the partial work an earlier attempt of this long-run plan left (see
/// [`crate::sources::longrun::partial`]) into `wt`: its changes, then its checkpoint file. When the
/// changes no longer apply, the attempt starts from the base, without the checkpoint (it would
/// describe work that is not there).
pub(crate) fn restore_partial(input: &AttemptInput, wt: &Worktree, store: &Store) {
    let Some(rel) = checkpoint_rel(&input.task) else {
        return;
    };
    let Some(partial) = store.load(rel) else {
        return;
    };
    if !partial.patch.is_empty()
        && let Err(e) = wt.apply(&partial.patch)
    {
        tracing::warn!(
            "task {}: the work of its earlier attempt no longer applies ({e}); it starts from Task 1",
            input.index
        );
        return;
    }
    if let Some(text) = &partial.checkpoint {
        let path = wt.path().join(rel);
        let written = crate::edge::fsx::write(wt.path(), &path, text.as_bytes());
        if let Err(e) = written {
            tracing::warn!("task {}: cannot restore its checkpoint: {e}", input.index);
        }
    }
}

/// Longest checkpoint file read while a worker runs; a bigger one is not kept.
const MAX_CHECKPOINT_BYTES: usize = 1 << 20;

/// While a long-run worker works: each time its checkpoint file changes, keeps the tree the
/// checkpoint was written in — everything in it against `base`, committed or not, less
/// `excluded` (the plan file, the work log) — and the checkpoint
/// ([`crate::sources::longrun::partial`]), so that a crash of the runner (or of the machine) loses no
/// work the checkpoint describes: the next attempt is told to resume from it and starts from
/// that tree. Read-only on the worker's tree and index. Never returns (for other tasks it
/// waits forever): race it against the worker.
pub(crate) async fn watch_checkpoint(
    task: &Task,
    tree: std::path::PathBuf,
    base: String,
    repo: std::sync::Arc<crate::edge::git::Repo>,
    round: u32,
    excluded: Vec<String>,
) {
    let Some(rel) = checkpoint_rel(task).map(str::to_string) else {
        return std::future::pending().await;
    };
    let store = Store::new(repo.common_dir());
    // Closed when this watch is dropped (the worker ended): a snapshot still being taken then
    // is not kept, so it never replaces what the judged attempt keeps ([`keep_partial`]).
    let gate = Gate(std::sync::Arc::new(Mutex::new(false)));
    let path = tree.join(&rel);
    let mut seen = read_checkpoint(&path);
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let now = read_checkpoint(&path);
        if now.is_none() || now == seen {
            continue;
        }
        seen.clone_from(&now);
        let (repo, tree, base, rel, store, excluded, closed) = (
            repo.clone(),
            tree.clone(),
            base.clone(),
            rel.clone(),
            store.clone(),
            excluded.clone(),
            gate.0.clone(),
        );
        let checkpoint = now.map(|b| String::from_utf8_lossy(&b).into_owned());
        let kept = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let patch = repo
                .tree_changes(&tree, &base, &excluded)
                .map_err(|e| e.to_string())?;
            let closed = held(&closed);
            if *closed {
                return Err("the worker has ended".into());
            }
            store
                .save(
                    &rel,
                    &Partial {
                        base,
                        patch,
                        checkpoint,
                    },
                )
                .map_err(|e| e.to_string())
        })
        .await;
        match kept {
            Ok(Ok(())) => crate::flow::failpoint("checkpoint-saved", round),
            Ok(Err(e)) => tracing::debug!("the checkpoint could not be kept yet: {e}"),
            Err(e) => tracing::debug!("keeping the checkpoint panicked: {e}"),
        }
    }
}

/// The checkpoint file the worker is writing at `path`, when it is a regular file of at most
/// [`MAX_CHECKPOINT_BYTES`]: read as any file a worker leaves ([`crate::edge::worker::read_tail`]:
/// no link followed, no FIFO waited on, however it is swapped meanwhile).
fn read_checkpoint(p: &Path) -> Option<Vec<u8>> {
    crate::edge::worker::read_tail(p, MAX_CHECKPOINT_BYTES)?.whole()
}

/// Closes a checkpoint watch's snapshots when dropped (waiting for one being saved).
pub(crate) struct Gate(std::sync::Arc<Mutex<bool>>);

impl Drop for Gate {
    fn drop(&mut self) {
        *held(&self.0) = true;
    }
}

/// After a long-run attempt is judged: a failed one leaves its work (`patch`, checkpoint
/// included) for the next attempt; one that completed, or stopped with a question (its work
/// is committed with the round), leaves nothing.
pub(crate) fn keep_partial(
    task: &Task,
    store: &Store,
    base: &str,
    verdict: &Verdict,
    patch: &crate::edge::git::Patch,
    question: Option<&Question>,
) {
    let Some(rel) = checkpoint_rel(task) else {
        return;
    };
    let committed = verdict.status == Status::Completed
        || (verdict.status == Status::Blocked && question.is_some_and(|q| q.kind != Kind::Review));
    if committed || patch.is_empty() {
        if committed {
            store.remove(rel);
        }
        return;
    }
    let partial = Partial {
        base: base.to_string(),
        patch: patch.clone(),
        checkpoint: None,
    };
    if let Err(e) = store.save(rel, &partial) {
        tracing::warn!("cannot keep the partial work of {rel}: {e}");
    }
}

/// A long-run worker's `OUTPUT_JSON` block, turned into the status line the processor reads
/// (appended to its output): COMPLETED writes the plan's summary into `wt` first (its
/// declared file, committed with the round); `NEEDS_DECISION` and `NEEDS_ACTION` block the task
/// with a question; a missing or malformed block is a failure, the raw output kept in the
/// long-run folder's `logs/`. Returns the question, if any — also for any task whose last line
/// is `NEEDS_DECISION: …` or `NEEDS_ACTION: …` (the worker contract's form, left in the
/// output as it is; [`blocked_on`](super::questions::blocked_on) turns the verdict).
pub(crate) fn long_run_output(
    task: &Task,
    attempt: u32,
    stdout: &mut String,
    wt: &Path,
    root: &Path,
) -> Option<Question> {
    let Some(lr) = long_run(task) else {
        // Any task may stop with a `NEEDS_DECISION: …` / `NEEDS_ACTION: …` status line.
        return question::from_status_line(stdout);
    };
    let number = field(lr, "number");
    let line = match output::parse(stdout) {
        Ok(Output::Completed(c)) => {
            let summary = lr_prompt::summary_markdown(number, field(lr, "title"), &c);
            let path = wt.join(field(lr, "summary"));
            let written = crate::edge::fsx::write(wt, &path, summary.as_bytes());
            match written {
                Ok(()) if c.summary.is_empty() => format!("COMPLETED: plan {number} completed"),
                Ok(()) => format!("COMPLETED: {}", c.summary.lines().next().unwrap_or("")),
                Err(e) => format!("FAILED: cannot write {}: {e}", field(lr, "summary")),
            }
        }
        Ok(Output::NeedsDecision(q) | Output::NeedsAction(q)) => {
            let what = if q.kind == Kind::Decision {
                "needs a decision"
            } else {
                "needs an action"
            };
            let first = q.text.lines().next().unwrap_or("").to_string();
            stdout.push_str(&format!("\nBLOCKED: {what}: {first}\n"));
            return Some(q);
        }
        Ok(Output::Failed { reason }) => format!("FAILED: {reason}"),
        // No block, but the contract's status-line form of the same question.
        Err(_) if question::from_status_line(stdout).is_some() => {
            return question::from_status_line(stdout);
        }
        Err(e) => {
            let rel = format!("{}/{number}-attempt-{}.log", field(lr, "logs"), attempt);
            let path = root.join(&rel);
            let kept = crate::edge::fsx::write(root, &path, stdout.as_bytes());
            match kept {
                Ok(()) => format!("FAILED: {e}; the raw output is in {rel}"),
                Err(w) => format!("FAILED: {e} (the raw output could not be kept: {w})"),
            }
        }
    };
    stdout.push('\n');
    stdout.push_str(&line);
    stdout.push('\n');
    None
}

/// Long-run plans name their files inside PLAN.md, not in the plan: changes outside the
/// declared summary are expected, so those warnings go (an edit of the plan file stays).
pub(crate) fn quiet_long_run(task: &Task, verdict: &mut Verdict) {
    if long_run(task).is_some() {
        verdict
            .warnings
            .retain(|w| !w.starts_with("unexpected file changed"));
    }
}

/// Whether a blocked attempt's changes are committed with the round: a long-run worker that
/// stopped to ask (`NEEDS_DECISION`, `NEEDS_ACTION`) keeps what it did — its commits and its
/// checkpoint — so the attempt after the answer continues from there, as the seed's
/// "Continue from {`blocked_at`}" expects. A rejected review's changes are never kept.
pub(crate) fn keeps_partial(j: &Judged) -> bool {
    j.verdict.status == Status::Blocked
        && !j.patch.is_empty()
        && j.question.as_ref().is_some_and(|q| q.kind != Kind::Review)
}

/// For a long-run plan, the state files committed with the round: `DIR/STATE.md` with its Current
/// Position section rewritten (the seed's Step 5), `DIR/ISSUES.md` and the summaries of deferred
/// plans. Nothing for other plans (a Spec Kit plan's tasks.md is
/// [`tasks_md`](super::questions::tasks_md)).
pub(crate) fn state_md(
    plan: &Plan,
    opts: &RunOptions,
) -> Result<Vec<String>, crate::flow::RunError> {
    if !plan.extra.contains_key(LONG_RUN_FIELD) {
        return Ok(Vec::new());
    }
    let rel = match opts.plan_rel.rsplit_once('/') {
        Some((dir, _)) => format!("{dir}/STATE.md"),
        None => "STATE.md".to_string(),
    };
    let path = opts.root.join(&rel);
    let existing = std::fs::read_to_string(&path).ok();
    let text = crate::sources::longrun::state::with_position(
        existing.as_deref(),
        &crate::sources::longrun::state::current_position(plan),
    );
    crate::edge::fsx::write(&opts.root, &path, text.as_bytes())
        .map_err(crate::flow::cannot_write(&path))?;
    let mut paths = vec![rel.clone()];
    // What `dagexec answer N defer` wrote: the issue log and the skipped summaries.
    let issues = format!("{}ISSUES.md", rel.trim_end_matches("STATE.md"));
    if opts.root.join(&issues).is_file() {
        paths.push(issues);
    }
    for t in plan.tasks.iter().filter(|t| question::deferred(t)) {
        for summary in t.creates() {
            if opts.root.join(summary).is_file() {
                paths.push(summary.clone());
            }
        }
    }
    Ok(paths)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A worker that swaps its checkpoint file for a FIFO again and again: a read that finds a
    /// regular file and then opens the FIFO waits for a writer that never comes, in the
    /// watch's thread of the runtime, and the attempt never ends. Each read returns.
    #[test]
    fn a_checkpoint_swapped_for_a_fifo_never_blocks_its_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("01-CHECKPOINT.json");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (path, stop) = (path.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = std::fs::remove_file(&path);
                    let _ = std::fs::write(&path, "{}");
                    let _ = std::fs::remove_file(&path);
                    let _ = rustix::fs::mknodat(
                        rustix::fs::CWD,
                        &path,
                        rustix::fs::FileType::Fifo,
                        rustix::fs::Mode::RWXU,
                        0,
                    );
                }
            })
        };
        let (done, reads) = std::sync::mpsc::channel();
        let reader = {
            let path = path.clone();
            std::thread::spawn(move || {
                let until = std::time::Instant::now() + std::time::Duration::from_secs(3);
                while std::time::Instant::now() < until {
                    read_checkpoint(&path);
                }
                let _ = done.send(());
            })
        };
        let ended = reads.recv_timeout(std::time::Duration::from_secs(15));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().expect("the swapper ends");
        // A stuck read waits on a FIFO no longer at the path: nothing can let it go.
        assert!(ended.is_ok(), "a read of the checkpoint waited on a FIFO");
        reader.join().expect("the reads end");
    }
}

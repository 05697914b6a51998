//! What an attempt spends through the model gateway, kept on disk while it runs, so that a
//! `kill -9` of dagexec itself (or a power loss) does not lose it.
//!
//! Every time the gateway's count for an attempt grows, the attempt's record as it would be
//! kept if the attempt ended now (outcome `interrupted`, no signal) is written, crash-safe
//! (a temporary file synced and renamed: [`crate::edge::fsx::write`]), to
//! `<git-common-dir>/dagexec/spend/task-N-attempt-K.json` ([`keep`]), with the task's identity
//! in its source ([`crate::sources::identities`]). The next `dagexec run` reads these files
//! before it resumes ([`left`]): each attempt a file holds gets its record — unless the plan
//! already holds it (an attempt that ended and was recorded, or stopped by Ctrl-C) — so the
//! plan's totals and `max-cost` count what it spent, also when the team marked its task done
//! since. A record follows its task by that identity, as the plan's records do when a task
//! list edited since is read again; of a task removed since, what it spent is still counted
//! against `max-cost` ([`crate::pure::usage::removed`]). An attempt
//! that ended without failing leaves its own record there too ([`ended`]), so that a crash
//! before its round's commit gives it back. Every file is removed once read.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::pure::plan::model::Plan;
use crate::pure::usage::{AttemptRecord, Measured, Outcome};

/// The folder of the live spend files, in the repository's git directory.
pub(crate) fn dir(common_dir: &Path) -> PathBuf {
    common_dir.join("dagexec").join("spend")
}

/// Which attempt a live file is for.
#[derive(Debug, Clone)]
pub(crate) struct Running {
    pub task: usize,
    /// The task's identity in its source ([`crate::sources::identities`]).
    pub id: String,
    pub attempt: u32,
    pub rebase: bool,
    pub start: jiff::Timestamp,
}

/// What a live file holds: the attempt's record, and its task's identity in its source (none
/// in a file an earlier dagexec left: there the record's plan index is taken).
#[derive(Debug, Serialize, Deserialize)]
struct LiveFile {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    #[serde(flatten)]
    record: AttemptRecord,
}

/// Writes `record` with its task's identity `id` to the attempt's live file (a rebase's
/// apart), crash-safe.
fn write(
    common_dir: &Path,
    id: &str,
    record: &AttemptRecord,
) -> Result<(), crate::edge::fsx::Error> {
    let (task, attempt) = (record.task, record.attempt);
    let rebase = if record.rebase { "-rebase" } else { "" };
    let path = dir(common_dir).join(format!("task-{task}-attempt-{attempt}{rebase}.json"));
    let live = LiveFile {
        id: Some(id.to_string()),
        record: record.clone(),
    };
    let bytes = serde_json::to_vec(&live).expect("a record serialises");
    crate::edge::fsx::write(common_dir, &path, &bytes)
}

/// Keeps the record of an attempt that ended without failing (completed, or asked a
/// question) in its live file until its round commits: a crash before that commit then
/// leaves the record by which the next run gives the attempt back
/// ([`crate::pure::update::prepare_resume`]) rather than count it as cut short. A small
/// file, not the plan: the plan is saved when attempts start, and saving it again at every
/// arrival cost a large plan its whole size each time. `id` is the task's identity in its
/// source.
pub(crate) fn ended(common_dir: &Path, id: &str, record: &AttemptRecord) {
    if let Err(e) = write(common_dir, id, record) {
        tracing::warn!(
            "task {}: cannot keep the attempt's record: {e}",
            record.task
        );
    }
}

impl Running {
    /// The attempt's record if it ended now, having spent `usage`: outcome `interrupted`, no
    /// signal. A live file holds it, and the pool keeps it for an attempt Ctrl-C stopped.
    pub(crate) fn record(&self, usage: crate::pure::usage::Usage) -> AttemptRecord {
        let measured = Measured::since(self.start, usage);
        let mut record =
            AttemptRecord::new(self.task, self.attempt, &measured, Outcome::Interrupted);
        record.rebase = self.rebase;
        record
    }
}

/// Follows the attempt's spend at the gateway (`spend`: its worker's, or its reviewer's
/// after the worker spent `before`) and writes its record to its live file whenever the
/// spend grew ([`on_growth`]), until the gateway forgets that pass (the pass and every
/// response streaming for it gone) or the returned task is aborted. A write that fails is
/// logged and tried again at the next change.
pub(crate) fn keep(
    common_dir: &Path,
    at: Running,
    before: crate::pure::usage::Usage,
    spend: tokio::sync::watch::Receiver<crate::edge::gateway::Spend>,
) -> tokio::task::JoinHandle<()> {
    let root = common_dir.to_path_buf();
    let task = at.task;
    tokio::spawn(on_growth(
        spend,
        move |now| {
            let usage = before.clone().plus(now.usage());
            write(&root, &at.id, &at.record(usage)).map_err(|e| e.to_string())
        },
        move |e| tracing::warn!("task {task}: cannot keep the attempt's spend so far: {e}"),
    ))
}

/// Calls `save` (on a blocking thread) with the attempt's spend each time its tokens grew or
/// a provider answered with a rate limit (which the work job's result carries), until the
/// gateway forgets the attempt; a save that fails is told to `warn` and tried again at the
/// next growth. A local run's live file and the work job's provisional result both follow
/// the spend this way.
pub(crate) async fn on_growth(
    mut spend: tokio::sync::watch::Receiver<crate::edge::gateway::Spend>,
    save: impl Fn(crate::edge::gateway::Spend) -> Result<(), String> + Send + Sync + 'static,
    warn: impl Fn(&str),
) {
    let save = std::sync::Arc::new(save);
    let mut written = (crate::pure::gateway::Tokens::default(), Vec::new());
    while spend.changed().await.is_ok() {
        let now = spend.borrow_and_update().clone();
        let total = (now.total(), now.rate_limits.clone());
        if total == written {
            continue;
        }
        let save = save.clone();
        match tokio::task::spawn_blocking(move || save(now)).await {
            Ok(Ok(())) => written = total,
            Ok(Err(e)) => warn(&e),
            Err(_) => {}
        }
    }
}

/// What a run that died left in live files ([`left`]).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Left {
    /// The records for the plan, each at the index its task has now.
    pub records: Vec<AttemptRecord>,
    /// Records of tasks no longer in the plan (by their identity in their source): what they
    /// spent is counted all the same ([`crate::pure::usage::add_removed`]).
    pub removed: Vec<(String, AttemptRecord)>,
}

/// The records a run that died left in live files (in `common_dir`), for `plan` as it was
/// saved (before resume puts its in-progress tasks back): every attempt the plan does not
/// record yet ([`unrecorded`]) — each at the index its task has now (by its identity), or,
/// of a task no longer in the plan, apart. Every live file is removed — call once the
/// records are in the plan and the plan is saved ([`clear`]).
pub(crate) fn left(common_dir: &Path, plan: &Plan) -> Left {
    let ids = crate::sources::identities(plan);
    let mut found: Vec<AttemptRecord> = Vec::new();
    let mut gone = Vec::new();
    let files = std::fs::read_dir(dir(common_dir))
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
        .filter_map(|e| {
            let meta = e.metadata().ok()?;
            (meta.len() <= 64 << 10)
                .then(|| std::fs::read(e.path()).ok())
                .flatten()
        })
        .filter_map(|bytes| serde_json::from_slice::<LiveFile>(&bytes).ok());
    for live in files {
        let Some(record) = live.record.checked() else {
            continue;
        };
        match &live.id {
            Some(id) => match ids.iter().position(|now| now == id) {
                Some(task) => found.push(AttemptRecord { task, ..record }),
                None => gone.push((id.clone(), interrupted(record))),
            },
            None if record.task < ids.len() => found.push(record),
            None => {}
        }
    }
    found.sort_by(|a, b| (&a.start, a.task, a.attempt).cmp(&(&b.start, b.task, b.attempt)));
    gone.sort_by(|(_, a), (_, b)| a.start.cmp(&b.start));
    Left {
        records: unrecorded(plan, found),
        removed: gone,
    }
}

/// Of `found` (records read from live files), those a crash kept from the plan: not recorded
/// yet (the same task, attempt, start and rebase), with the outcome `interrupted` and no
/// signal — unless it ended, completed or blocked ([`ended`]): that outcome is kept. A task
/// marked done (or reset) since keeps its record too: what the attempt spent was spent.
fn unrecorded(plan: &Plan, found: Vec<AttemptRecord>) -> Vec<AttemptRecord> {
    let recorded = crate::pure::usage::records(plan);
    found
        .into_iter()
        .filter(|r| {
            !recorded.iter().any(|k| {
                k.task == r.task
                    && k.attempt == r.attempt
                    && k.start == r.start
                    && k.rebase == r.rebase
            })
        })
        .map(|r| {
            if r.outcome.ended_well() {
                r
            } else {
                interrupted(r)
            }
        })
        .collect()
}

/// `r` as an attempt a crash cut short: outcome `interrupted`, no signal.
fn interrupted(r: AttemptRecord) -> AttemptRecord {
    AttemptRecord {
        outcome: Outcome::Interrupted,
        signal: None,
        ..r
    }
}

/// Removes every live file (their records are in the plan, or were not wanted).
pub(crate) fn clear(common_dir: &Path) {
    let _ = crate::edge::fsx::remove_all(common_dir, &dir(common_dir));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::usage::Usage;

    fn plan(status: &str, attempts: u32) -> Plan {
        let text = serde_json::json!({"schemaVersion": 2, "goal": "g", "tasks": [{
            "subject": "a", "description": "d", "status": status, "blockedBy": [],
            "attempts": attempts,
            "metadata": {"files": {"create": ["a.txt"], "modify": []}}}]})
        .to_string();
        crate::pure::plan::parse(&text, Path::new("plan.json")).unwrap()
    }

    fn record(attempt: u32, start: &str, cost: f64) -> AttemptRecord {
        let usage = Usage {
            cost_usd: Some(cost),
            input_tokens: Some(115),
            output_tokens: Some(1),
            model: Some("claude-sonnet-4-5".into()),
        };
        let at = |t: &str| t.parse().unwrap();
        let measured = Measured {
            start: at(start),
            end: at("2026-11-28T10:00:09Z"),
            usage,
        };
        AttemptRecord::new(0, attempt, &measured, Outcome::Interrupted)
    }

    /// Every attempt a live file holds that the plan does not record is taken: of a task in
    /// progress, and of one marked done (or reset) since — the money was spent all the same.
    #[test]
    fn every_attempt_the_plan_does_not_record_is_taken_whatever_its_task_became() {
        let s = "2026-11-28T10:00:00Z";
        let live = record(2, s, 0.5);
        for (status, attempts) in [
            ("in_progress", 2),
            ("in_progress", 3),
            ("pending", 2),
            ("completed", 2),
        ] {
            assert_eq!(
                unrecorded(&plan(status, attempts), vec![live.clone()]),
                vec![live.clone()],
                "{status} {attempts}"
            );
        }
        // Recorded already (Ctrl-C stopped it, or it ended): left out; another start is not it.
        let mut p = plan("in_progress", 2);
        let mut stopped = record(2, s, 0.5);
        stopped.signal = Some("SIGINT".into());
        crate::pure::usage::record(&mut p, &stopped);
        assert!(unrecorded(&p, vec![live.clone()]).is_empty());
        let other = record(2, "2026-11-28T11:00:00Z", 0.2);
        assert_eq!(unrecorded(&p, vec![other.clone()]), vec![other]);
    }

    /// A live file of a task no longer in the plan (its identity not found) is left apart,
    /// cut short, with that identity: what it spent is counted without charging a task.
    #[test]
    fn a_removed_tasks_file_is_left_apart_by_its_identity() {
        let dir = tempfile::tempdir().unwrap();
        let done = AttemptRecord {
            outcome: Outcome::Completed,
            ..record(1, "2026-11-28T10:00:00Z", 0.5)
        };
        ended(dir.path(), "id 7", &done);
        let left = left(dir.path(), &plan("in_progress", 1));
        assert!(left.records.is_empty(), "{left:?}");
        let cut = AttemptRecord {
            outcome: Outcome::Interrupted,
            ..done
        };
        assert_eq!(left.removed, vec![("id 7".to_string(), cut)]);
        // A file an earlier dagexec left (no identity) of an index the plan no longer has.
        clear(dir.path());
        std::fs::create_dir_all(super::dir(dir.path())).unwrap();
        let old = AttemptRecord {
            task: 5,
            ..record(1, "2026-11-28T10:00:00Z", 0.5)
        };
        let path = super::dir(dir.path()).join("task-5-attempt-1.json");
        std::fs::write(path, serde_json::to_vec(&old).unwrap()).unwrap();
        assert_eq!(
            super::left(dir.path(), &plan("in_progress", 1)),
            Left::default()
        );
    }

    /// An attempt that ended before the crash left its own record ([`ended`]): taken with its
    /// outcome, so resume gives the attempt back; any other outcome reads as cut short.
    #[test]
    fn an_attempt_that_ended_keeps_its_outcome_from_its_live_file() {
        let dir = tempfile::tempdir().unwrap();
        let s = "2026-11-28T10:00:00Z";
        for (outcome, kept) in [
            (Outcome::Completed, Outcome::Completed),
            (Outcome::Blocked, Outcome::Blocked),
            (Outcome::Failed, Outcome::Interrupted),
        ] {
            let done = AttemptRecord {
                outcome,
                ..record(2, s, 0.5)
            };
            ended(dir.path(), "index 0 of 1", &done);
            let left = left(dir.path(), &plan("in_progress", 2)).records;
            assert_eq!(left.len(), 1, "{outcome:?}");
            assert_eq!(left[0].outcome, kept, "{outcome:?}");
            clear(dir.path());
        }
    }

    /// A rebase attempt (`overlap: merge`) that Ctrl-C stopped is recorded by the pool, with
    /// its signal; its live file, left for the next run, is that record already: the next run
    /// neither counts it as an attempt a crash cut short nor counts its spend twice.
    #[test]
    fn a_rebase_attempt_ctrl_c_stopped_is_not_taken_again_from_its_live_file() {
        let s: jiff::Timestamp = "2026-11-28T10:00:00Z".parse().unwrap();
        let task = &plan("in_progress", 2).tasks[0];
        let input = crate::flow::pool::AttemptInput {
            index: 0,
            id: "index 0 of 1".into(),
            attempt: 2,
            round: 3,
            task: task.clone(),
            prompt: String::new(),
            base: String::new(),
            worker: String::new(),
            timeout: std::time::Duration::from_secs(1),
            scratch: PathBuf::new(),
            plan_rel: "plan.json".into(),
            tasks_md: None,
            reviewer: None,
            rebase: true,
        };
        let pool = crate::flow::pool::Pool::default();
        let usage = record(2, "2026-11-28T10:00:00Z", 0.5).usage;
        pool.interrupted(&input, s, usage.clone());
        let mut p = plan("in_progress", 2);
        for mut r in pool.take_interrupted() {
            assert!(r.rebase, "the pool's record says it was a rebase attempt");
            r.signal = Some("SIGINT".into());
            crate::pure::usage::record(&mut p, &r);
        }
        let running = Running {
            task: 0,
            id: "index 0 of 1".into(),
            attempt: 2,
            rebase: true,
            start: s,
        };
        assert!(unrecorded(&p, vec![running.record(usage)]).is_empty());
    }

    #[test]
    fn files_are_read_checked_and_cleared() {
        let git = tempfile::tempdir().unwrap();
        let d = dir(git.path());
        std::fs::create_dir_all(&d).unwrap();
        let good = record(1, "2026-11-28T10:00:00Z", 0.25);
        std::fs::write(
            d.join("task-0-attempt-1.json"),
            serde_json::to_vec(&good).unwrap(),
        )
        .unwrap();
        std::fs::write(d.join("task-0-attempt-9.json"), b"{not json").unwrap();
        let mut bad = record(1, "2026-11-28T10:00:00Z", -3.0);
        bad.end = "2026-11-28T09:00:00Z".into();
        std::fs::write(
            d.join("task-5-attempt-1.json"),
            serde_json::to_vec(&bad).unwrap(),
        )
        .unwrap();
        let found = left(git.path(), &plan("in_progress", 1));
        assert_eq!(found.records, vec![good]);
        clear(git.path());
        assert!(!d.exists());
    }
}

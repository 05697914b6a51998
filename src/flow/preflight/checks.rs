//! The setup facts that need the outside world: `git status --porcelain`, blocking
//! assumption checks (each distinct command run once, a few at a time, each with a timeout),
//! and context-file existence.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::{BlockingCheck, Validation};
use crate::edge::shell;
use crate::pure::plan::model::{Plan, Status, Task};

/// How many checks run at once.
pub const CHECK_PARALLELISM: usize = 4;

/// Options for [`gather`].
#[derive(Debug, Clone, Copy)]
pub struct CheckOptions {
    /// Skip the blocking assumption checks (`--no-checks`).
    pub skip_checks: bool,
    /// Per-check timeout.
    pub timeout: Duration,
}

/// `git status --porcelain` in `root`: (clean, output). Outside a repository, or without git,
/// the tree is reported as not clean with git's message.
pub fn git_status(root: &Path) -> (bool, String) {
    match crate::edge::git::status_in(root) {
        Ok(s) => {
            let s = s.trim_end().to_string();
            (s.is_empty(), s)
        }
        Err(e) => (false, e.to_string()),
    }
}

/// Whether `name` is the temporary file of one of dagexec's atomic writes
/// (`.<name>.dagexec-<16 hex digits>.tmp`, see `fsx`), left by a crash.
pub fn is_dagexec_temp(name: &str) -> bool {
    name.starts_with('.')
        && name
            .strip_suffix(".tmp")
            .and_then(|rest| rest.get(rest.len().saturating_sub(25)..))
            .and_then(|tail| tail.strip_prefix(".dagexec-"))
            .is_some_and(|hex| hex.len() == 16 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether `path` (repo-relative) is a file dagexec itself writes beside the plan at
/// `plan_rel`: the plan (for `--long-run DIR`, the generated `DIR/plan.json`) and its
/// temporary file, the processor batch files, worker logs and `tasks.json` of `.design/`.
pub fn is_own_file(path: &str, plan_rel: &str) -> bool {
    let path = path.trim_end_matches('/');
    if path == plan_rel
        || path == format!("{plan_rel}.tmp")
        || path.rsplit('/').next().is_some_and(is_dagexec_temp)
    {
        return true;
    }
    path.strip_prefix(".design/")
        .is_some_and(|name| !name.contains('/') && is_intermediate(name))
}

/// Whether `name`, in `.design/`, is one of a run's intermediate files there: a processor
/// batch, a worker's log, `tasks.json`.
pub fn is_intermediate(name: &str) -> bool {
    (name.starts_with("processor-batch-") && name.ends_with(".json"))
        || (name.starts_with("worker-") && name.ends_with(".log"))
        || name == "tasks.json"
}

/// Takes dagexec's own files (see [`is_own_file`]) out of `v.git_status` and recomputes
/// `v.git_clean`: they are not the user's uncommitted changes.
pub fn drop_own_files(v: &mut Validation, plan_rel: &str) {
    if v.git_clean {
        return;
    }
    let kept: Vec<&str> = v
        .git_status
        .lines()
        .filter(|line| {
            // `XY path` or `XY from -> to`; a line that is not of that shape is a message.
            let Some(path) = line.get(3..) else {
                return true;
            };
            let path = path.rsplit(" -> ").next().unwrap_or(path);
            !is_own_file(path.trim_matches('"'), plan_rel)
        })
        .collect();
    if kept.len() != v.git_status.lines().count() {
        let kept = kept.join("\n");
        v.git_clean = kept.is_empty();
        v.git_status = kept;
    }
}

/// Every path a pending or in-progress task declares (create and modify), each once.
pub fn declared_paths(plan: &Plan) -> Vec<String> {
    let mut paths: Vec<String> = Vec::new();
    for t in plan.tasks.iter().filter(|t| open(t)) {
        for f in t.files() {
            if !paths.contains(f) {
                paths.push(f.clone());
            }
        }
    }
    paths
}

/// Whether task `t` is still to run (pending or in progress): its declared paths are its own.
fn open(t: &Task) -> bool {
    matches!(t.status, Status::Pending | Status::InProgress)
}

/// A user's uncommitted change at a path pending tasks declare.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeclaredChange {
    pub path: String,
    /// `modified`, `untracked`, `ignored`, …
    pub how: String,
    /// The pending tasks that declare it (or a directory above it), in plan order.
    pub tasks: Vec<usize>,
}

impl DeclaredChange {
    /// `task 0 (Build app), task 2 (Docs)`.
    pub fn tasks_text(&self, plan: &Plan) -> String {
        self.tasks
            .iter()
            .map(|&t| format!("task {t} ({})", plan.tasks[t].subject))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Of `changes` (`(path, how)` as [`Repo::uncommitted`](crate::edge::git::Repo::uncommitted)
/// reports them), those at paths pending tasks declare, with the tasks; dagexec's own files
/// are left out. Sorted by path.
pub fn declared_changes(
    plan: &Plan,
    changes: &[(String, String)],
    plan_rel: &str,
) -> Vec<DeclaredChange> {
    let mut changes = changes.to_vec();
    changes.sort();
    let covers = |declared: &str, path: &str| {
        let declared = declared.trim_start_matches("./").trim_end_matches('/');
        path == declared
            || path
                .strip_prefix(declared)
                .is_some_and(|rest| rest.starts_with('/'))
    };
    changes
        .iter()
        .filter(|(path, _)| !is_own_file(path, plan_rel))
        .filter_map(|(path, how)| {
            let tasks: Vec<usize> = plan
                .tasks
                .iter()
                .enumerate()
                .filter(|(_, t)| open(t) && t.files().any(|f| covers(f, path)))
                .map(|(i, _)| i)
                .collect();
            (!tasks.is_empty()).then(|| DeclaredChange {
                path: path.clone(),
                how: how.clone(),
                tasks,
            })
        })
        .collect()
}

/// Runs the blocking assumption checks of every task, in plan order. Identical commands are
/// run once and share their result.
pub fn blocking_checks(plan: &Plan, root: &Path, timeout: Duration) -> Vec<BlockingCheck> {
    let mut wanted: Vec<(usize, String, String)> = Vec::new();
    for (i, t) in plan.tasks.iter().enumerate() {
        for a in t.assumptions().iter().filter(|a| a.is_blocking()) {
            wanted.push((i, a.claim.clone(), a.verify.clone()));
        }
    }
    let mut distinct: Vec<&str> = wanted.iter().map(|w| w.2.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let next = AtomicUsize::new(0);
    // Each thread takes the next distinct command until none is left.
    let run_next = || {
        let mut ran = Vec::new();
        while let Some(&cmd) = distinct.get(next.fetch_add(1, Ordering::Relaxed)) {
            ran.push((cmd, shell::run(cmd, root, timeout)));
        }
        ran
    };
    let results: BTreeMap<&str, shell::ShellOutcome> = std::thread::scope(|s| {
        let threads = CHECK_PARALLELISM.min(distinct.len());
        let running: Vec<_> = (0..threads).map(|_| s.spawn(run_next)).collect();
        running
            .into_iter()
            .flat_map(|t| t.join().expect("a check does not panic"))
            .collect()
    });
    let v3 = plan.schema_version >= 3;
    let names = crate::pure::plan::ids::TaskNames::of(plan);
    wanted
        .iter()
        .map(|(task, claim, verify)| {
            let o = &results[verify.as_str()];
            BlockingCheck {
                task_index: v3.then_some(*task),
                claim: claim.clone(),
                passed: o.passed,
                output: o.output.clone(),
                verify: verify.clone(),
                task: names.get(*task),
            }
        })
        .collect()
}

/// Context files that do not exist under `root`, in plan order, each once.
pub fn missing_context_files(plan: &Plan, root: &Path) -> Vec<String> {
    let mut missing: Vec<String> = Vec::new();
    for t in &plan.tasks {
        for c in t.context_files() {
            if !root.join(&c.path).exists() && !missing.contains(&c.path) {
                missing.push(c.path.clone());
            }
        }
    }
    missing
}

/// Gathers the seed's `validation` object.
pub fn gather(plan: &Plan, root: &Path, opts: CheckOptions) -> Validation {
    let (mut git_clean, mut git_status) = git_status(root);
    // A generated plan's state (Spec Kit, Kiro, Taskmaster) is dagexec's own change.
    if let Some(dir) = crate::sources::generated_dir_of(plan) {
        git_status = crate::sources::without_dir(&git_status, &dir);
        git_clean = git_clean || git_status.is_empty();
    }
    let blocking_checks = if opts.skip_checks {
        Vec::new()
    } else {
        blocking_checks(plan, root, opts.timeout)
    };
    let missing = missing_context_files(plan, root);
    Validation {
        git_clean,
        git_status,
        blocking_checks,
        context_files_valid: missing.is_empty(),
        missing_context_files: missing,
        checks_skipped: opts.skip_checks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dagexecs_own_files_are_told_apart_from_the_users() {
        let own = [
            ".design/plan.json",
            ".design/.plan.json.dagexec-0123456789abcdef.tmp",
            "src/.x.dagexec-0123456789abcdef.tmp",
            ".design/processor-batch-3.json",
            ".design/worker-2.log",
            ".long-run/plan.json",
        ];
        for p in own {
            let plan_rel = if p.starts_with(".long-run") {
                ".long-run/plan.json"
            } else {
                ".design/plan.json"
            };
            assert!(is_own_file(p, plan_rel), "{p}");
        }
        for p in [
            ".design/notes.md",
            ".design/sub/processor-batch-1.json",
            "plan.json",
            "x.dagexec-0123456789abcdef.tmp",
            ".x.dagexec-0123.tmp",
        ] {
            assert!(!is_own_file(p, ".design/plan.json"), "{p}");
        }
    }

    #[test]
    fn checks_run_once_per_command_and_report_in_plan_order() {
        let dir = tempfile::tempdir().unwrap();
        let text = r#"{"schemaVersion":3,"tasks":[
            {"agent":{"role":"r","assumptions":[
                {"claim":"counter","verify":"echo x >> count; echo ok","severity":"blocking"},
                {"claim":"warn only","verify":"exit 1","severity":"warning"}]}},
            {"agent":{"role":"r","assumptions":[
                {"claim":"counter again","verify":"echo x >> count; echo ok","severity":"blocking"},
                {"claim":"fails","verify":"echo broken >&2; exit 1","severity":"blocking"}],
             "contextFiles":[{"path":"here.txt","reason":""},{"path":"gone.txt","reason":""},{"path":"gone.txt","reason":""}]}}]}"#;
        let plan = crate::pure::plan::parse(text, Path::new("p")).unwrap();
        std::fs::write(dir.path().join("here.txt"), "").unwrap();
        let v = gather(
            &plan,
            dir.path(),
            CheckOptions {
                skip_checks: false,
                timeout: Duration::from_secs(10),
            },
        );
        let got: Vec<(Option<usize>, &str, bool, &str)> = v
            .blocking_checks
            .iter()
            .map(|c| (c.task_index, c.claim.as_str(), c.passed, c.output.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (Some(0), "counter", true, "ok"),
                (Some(1), "counter again", true, "ok"),
                (Some(1), "fails", false, "broken")
            ]
        );
        assert_eq!(
            std::fs::read_to_string(dir.path().join("count")).unwrap(),
            "x\n",
            "one run per distinct command"
        );
        assert_eq!(v.missing_context_files, ["gone.txt"]);
        assert!(!v.context_files_valid);
        assert!(!v.git_clean, "a temp dir is not a repository");
        let skipped = gather(
            &plan,
            dir.path(),
            CheckOptions {
                skip_checks: true,
                timeout: Duration::from_secs(1),
            },
        );
        assert!(skipped.blocking_checks.is_empty() && skipped.checks_skipped);
        // A task list's plan: the failed check's task is named as the list names it, in
        // `validate`'s report and `run`'s question alike.
        let mut listed = plan.clone();
        let ids = serde_json::json!({"tasks": [{"id": "T001"}, {"id": "T002"}]});
        listed
            .extra
            .insert(crate::pure::plan::fields::SOURCE.into(), ids);
        let checks = blocking_checks(&listed, dir.path(), Duration::from_secs(10));
        let failed: Vec<&str> = checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| c.task.as_str())
            .collect();
        assert_eq!(failed, ["T002"]);
    }
}

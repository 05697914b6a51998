//! The result processor (seed section B): turns what a worker left behind into a verdict —
//! status line, spot-checks, acceptance checks — and the verdict into a decision: completed,
//! blocked, retry (with the seed's retry prompt) or failed.
//!
//! Pure: the runner gathers the facts (output, exit, log, files present and changed, check
//! results) and hands them over in an [`AttemptReport`].

use std::collections::BTreeSet;
use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::Serialize;

use crate::pure::paths::Link;
use crate::pure::plan::model::{Plan, Status, Task};
use crate::pure::prompt::{self, FailedCheck, Unit};
use crate::pure::said::{Halt, Said};

mod judge;

#[cfg(test)]
pub use judge::judge;
pub use judge::judge_among;

/// A task gets at most this many attempts.
pub const MAX_ATTEMPTS: u32 = 3;

/// The reason used when a worker left neither a status line nor a log (seed B.3 step 1).
pub const NO_STATUS_NO_LOG: &str = "No status line returned and no log file found";

static STATUS_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(COMPLETED|FAILED|BLOCKED): .+").expect("valid regex"));

/// What the worker said about itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reported {
    Completed,
    Failed,
    Blocked,
}

/// A parsed status line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusLine {
    pub kind: Reported,
    /// The text after `KIND: `.
    pub message: String,
}

/// A result — a task's summary, the reason it failed, what blocks it — is at most this many
/// bytes wherever it goes (the plan's `result` and `completedTasks`, commit messages, the pull
/// request and status comment, the retry prompt): [`clip_result`].
pub const RESULT_MAX_BYTES: usize = 4096;

/// `text` when it fits [`RESULT_MAX_BYTES`]; else its start, cut at a character boundary, and a
/// marker saying it was clipped and where the whole text is (the attempt's kept stdout: locally
/// in `.git/dagexec/logs`, on Actions the work job's artifact), together at most
/// [`RESULT_MAX_BYTES`]. A clipped text is returned as it is.
pub fn clip_result(text: &str) -> String {
    let mark = format!(
        " … [clipped: {} bytes in all; the whole text is in the attempt's log]",
        text.len()
    );
    crate::pure::clip::bytes(text, RESULT_MAX_BYTES, &mark)
}

/// The last non-empty line of a worker's output, trimmed of surrounding whitespace.
pub fn last_nonempty_line(output: &str) -> Option<&str> {
    output.lines().map(str::trim).rev().find(|l| !l.is_empty())
}

/// Matches the seed's `^(COMPLETED|FAILED|BLOCKED): .+` against one line. The message is
/// worker output, on its way to the terminal, the plan and commit messages: it comes back
/// sanitised ([`crate::pure::sanitize::line`]: no escape sequences, no control characters) and
/// clipped ([`clip_result`]).
pub fn parse_status_line(line: &str) -> Option<StatusLine> {
    let caps = STATUS_RE.captures(line)?;
    let kind = match &caps[1] {
        "COMPLETED" => Reported::Completed,
        "FAILED" => Reported::Failed,
        _ => Reported::Blocked,
    };
    Some(StatusLine {
        kind,
        message: clip_result(crate::pure::sanitize::line(&line[caps[1].len() + 2..]).trim()),
    })
}

/// How the worker process ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Exit {
    /// Exit status 0.
    #[default]
    Success,
    /// A non-zero exit status.
    Code(i32),
    /// Killed by a signal (a crash).
    Signal(i32),
    /// Killed by dagexec after the per-task timeout.
    TimedOut(Duration),
    /// The worker command could not be started.
    SpawnFailed(String),
}

impl Exit {
    /// How a process (`who`: `worker`, `the reviewer`) that did not exit 0 ended; `None` when
    /// it did.
    pub fn failure(&self, who: &str) -> Option<String> {
        Some(match self {
            Exit::Success => return None,
            // A shell reports a child killed by signal N as exit status 128 + N.
            Exit::Code(c @ 129..=192) => format!(
                "{who} crashed: killed by signal {} (exit status {c})",
                c - 128
            ),
            Exit::Code(c) => format!("{who} exited with status {c}"),
            Exit::Signal(s) => format!("{who} crashed: killed by signal {s}"),
            Exit::TimedOut(d) => format!("{who} timed out after {}", human_duration(*d)),
            Exit::SpawnFailed(e) => format!("{who} could not be started: {e}"),
        })
    }
}

/// One acceptance check as it ran in the task's tree (and as the Action's work job writes it
/// in its `result.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct CheckRun {
    pub criterion: String,
    pub check: String,
    pub passed: bool,
    /// Combined stdout and stderr, possibly cut.
    pub output: String,
}

/// Everything the runner observed about one attempt. The default is an attempt with nothing
/// to show: no output, no log, no file, exit status 0.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AttemptReport {
    /// The worker's stdout; only its last non-empty line counts.
    pub output: String,
    pub exit: Exit,
    /// The work log's contents, `None` when the worker wrote none.
    pub log: Option<String>,
    /// Paths (repository-relative) that exist as files after the attempt.
    pub present: BTreeSet<String>,
    /// Paths the attempt changed or created (`git diff --name-only` plus new files).
    pub changed: BTreeSet<String>,
    /// Acceptance checks, when they were run (only after a COMPLETED that passed spot-checks).
    pub acceptance: Option<Vec<CheckRun>>,
}

/// The processor's verdict on one attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Completed, Failed or Blocked.
    pub status: Status,
    /// The summary (completed), the reason (failed) or what blocks it (blocked).
    pub result: String,
    /// Acceptance checks ran and all passed (or the task has none and completed).
    pub acceptance_passed: bool,
    /// The checks that failed, for the retry prompt.
    pub failed_checks: Vec<FailedCheck>,
    /// Unexpected files and other things the reviewer should know; never change the status.
    pub warnings: Vec<String>,
    /// Why no other attempt follows this failure, when a retry cannot help
    /// ([`heed`]).
    pub halt: Option<Halt>,
}

/// Human form of a duration: `45s`, `30m`, `1h30m`.
pub fn human_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s == 0 {
        return format!("{}ms", d.as_millis());
    }
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// Spot-check failures (seed B.3 step 2): files to create that do not exist, files to modify
/// that did not change.
pub fn spot_check(task: &Task, report: &AttemptReport) -> Vec<String> {
    let mut problems = Vec::new();
    use crate::pure::paths::key;
    for f in task.creates() {
        if !report.present.contains(&key(f)) {
            problems.push(format!("{f} (to create) does not exist"));
        }
    }
    for f in task.modifies() {
        if !report.changed.contains(&key(f)) {
            problems.push(format!("{f} (to modify) was not changed"));
        }
    }
    problems
}

/// dagexec's own files in an attempt's tree, which only dagexec writes: the plan file and,
/// for a plan generated from a task list (Spec Kit's tasks.md, Taskmaster's tasks.json …),
/// that list. A worker's edit of them is discarded, and a patch holding one refused.
#[derive(Debug, Clone, Copy)]
pub struct OwnFiles<'a> {
    /// The plan file, relative to the repository's root.
    pub plan: &'a str,
    /// The task list the plan was generated from, if it was.
    pub task_list: Option<&'a str>,
}

#[cfg(test)]
impl<'a> OwnFiles<'a> {
    /// A plan.json of its own, generated from no task list.
    pub fn plan(plan: &'a str) -> OwnFiles<'a> {
        OwnFiles {
            plan,
            task_list: None,
        }
    }
}

/// Changed files the task did not declare (its own work log excepted), with dagexec's own
/// files called out — the plan and the task list it was generated from: the runner discards
/// a worker's edit of them. The seed's rule is about undeclared files beside declared ones: a
/// task that declares none (a Taskmaster task, an issue) has no "unexpected" file, only
/// dagexec's own.
pub fn unexpected_files_among(
    index: usize,
    task: &Task,
    report: &AttemptReport,
    own: OwnFiles<'_>,
) -> Vec<String> {
    let declared: BTreeSet<String> = task.files().map(|f| crate::pure::paths::key(f)).collect();
    let own_log = format!(".design/worker-{index}.log");
    report
        .changed
        .iter()
        .filter(|f| !declared.contains(f.as_str()) && **f != own_log)
        .filter(|f| !declared.is_empty() || *f == own.plan || Some(f.as_str()) == own.task_list)
        .map(|f| {
            if f == own.plan {
                format!("edited {f} (the edit is discarded; only dagexec writes the plan)")
            } else if Some(f.as_str()) == own.task_list {
                // Named as its own kind: a checkbox list is ticked, a tasks.json gets statuses.
                let how = if f.to_ascii_lowercase().ends_with(".json") {
                    "writes the task's status"
                } else {
                    "ticks the task"
                };
                format!(
                    "edited {f} (the edit is discarded; dagexec {how} there when its work is committed)"
                )
            } else {
                format!("unexpected file changed: {f}")
            }
        })
        .collect()
}

/// Why an attempt's changes are refused whatever the worker reported, if they are: a path in
/// git's own directory under any case (`.GIT/hooks/x`), or a symlink the task did not declare,
/// or a declared one whose target leaves the repository or points into `.git/`, `.design/` or
/// the plan's directory. Such an attempt fails with this reason (it is not integrated).
pub fn refused_changes<'a>(
    task: &Task,
    changed: impl IntoIterator<Item = &'a String>,
    links: &[Link],
    plan_rel: &str,
) -> Option<String> {
    use crate::pure::paths::{git_dir_prefix, key, resolve_link, same_file, within};
    for p in changed {
        if git_dir_prefix(p).is_some() {
            return Some(format!(
                "refused: the change writes {p}, inside git's own directory (.git under any case); workers must not touch it"
            ));
        }
        // `.DESIGN/Plan.json` is the plan on a case-insensitive file system.
        if same_file(p, plan_rel) && key(p) != key(plan_rel) {
            return Some(format!(
                "refused: the change writes {p}, the plan file {plan_rel} under another case; only dagexec writes the plan"
            ));
        }
    }
    let declared: BTreeSet<String> = task.files().map(|f| key(f)).collect();
    let plan_dir = plan_rel.rsplit_once('/').map(|(dir, _)| dir);
    for link in links.iter().filter(|l| l.gitlink) {
        if !declared.contains(&key(&link.path)) {
            return Some(format!(
                "refused: the change adds {}, a nested git repository (a gitlink: a .git inside it), which the task does not declare",
                link.path
            ));
        }
    }
    for link in links.iter().filter(|l| !l.gitlink) {
        let shown = format!("{} -> {}", link.path, link.target);
        if !declared.contains(&key(&link.path)) {
            return Some(format!(
                "refused: the change adds the symbolic link {shown}, which the task does not declare"
            ));
        }
        let why = match resolve_link(&link.path, &link.target) {
            None => Some("outside the repository"),
            // The top holds `.git/`: `x -> .` makes `x/.git/config` a way in.
            Some(r) if r.is_empty() => Some("at the repository's top, which holds .git/"),
            Some(r) if git_dir_prefix(&r).is_some() => Some("into .git/"),
            Some(r) if within(&r, ".design") || within(".design", &r) => Some("into .design/"),
            Some(r) if plan_dir.is_some_and(|d| within(&r, d) || within(d, &r)) => {
                Some("into the plan's directory")
            }
            Some(_) => None,
        };
        if let Some(why) = why {
            return Some(format!(
                "refused: the symbolic link {shown} points {why}; dagexec never lets a task link there"
            ));
        }
    }
    None
}

impl Verdict {
    /// A failed attempt whose change was refused for `reason` (nothing of it is taken, no retry
    /// is ruled out), keeping the `warnings` found so far.
    pub fn refused(reason: String, warnings: Vec<String>) -> Verdict {
        Verdict {
            status: Status::Failed,
            result: reason,
            acceptance_passed: false,
            failed_checks: Vec::new(),
            warnings,
            halt: None,
        }
    }
}

/// Makes `verdict` a failure for `reason` (warnings kept).
pub fn refuse(verdict: &mut Verdict, reason: String) {
    verdict.status = Status::Failed;
    verdict.result = reason;
    verdict.acceptance_passed = false;
    verdict.failed_checks.clear();
}

/// Whether the runner should run the acceptance checks: the worker reported COMPLETED, exited
/// cleanly, and the spot-checks passed.
pub fn wants_acceptance(task: &Task, report: &AttemptReport) -> bool {
    report.exit == Exit::Success
        && last_nonempty_line(&report.output)
            .and_then(parse_status_line)
            .is_some_and(|s| s.kind == Reported::Completed)
        && spot_check(task, report).is_empty()
        && !task.acceptance_criteria().is_empty()
}

/// What happens to the task after a verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Completed,
    /// Never retried (seed B.3 step 5).
    Blocked,
    /// Another attempt with this prompt (placeholder still unresolved; the runner resolves it).
    Retry {
        attempt: u32,
        prompt: String,
    },
    /// Out of attempts.
    Failed,
}

/// Seed B.3 steps 6–7. `attempts` counts the attempts made so far, this one included.
pub fn decide(plan: &Plan, index: usize, verdict: &Verdict, attempts: u32, unit: Unit) -> Decision {
    match verdict.status {
        Status::Completed => Decision::Completed,
        Status::Blocked => Decision::Blocked,
        // A retry cannot help (a usage error, a missing command, refused credentials).
        _ if verdict.halt.is_some() => Decision::Failed,
        _ if attempts < MAX_ATTEMPTS => {
            let task = &plan.tasks[index];
            let original = prompt::original_prompt(plan, index, unit);
            Decision::Retry {
                attempt: attempts + 1,
                prompt: prompt::retry_prompt(
                    &original,
                    attempts + 1,
                    &verdict.result,
                    task.fallback(),
                    &verdict.failed_checks,
                ),
            }
        }
        _ => Decision::Failed,
    }
}

/// One entry of `.design/processor-batch-{N}.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BatchEntry {
    pub plan_index: usize,
    pub status: Status,
    pub result: String,
    pub attempts: u32,
    pub acceptance_passed: bool,
}

/// At most this many refused calls are named in a reason.
const REFUSED_SHOWN: usize = 3;

/// An attempt dagexec's model gateway stopped at a budget (`why`, what the agent was told):
/// whatever its worker said after, it is a budget stop — not a failure, its task pending
/// again, the run stopping as when `max-cost` is spent.
pub fn stopped_by_budget(verdict: &mut Verdict, why: &str) {
    verdict.status = Status::Failed;
    let said = Said {
        failure: Some(why.to_string()),
        halt: Some(Halt::Budget),
        refused: Vec::new(),
    };
    heed(verdict, &said);
}

/// Puts what the CLI said into a failed verdict: its failure text as the reason, the calls it
/// refused, and why no retry follows. A completed or blocked verdict is left alone.
pub fn heed(verdict: &mut Verdict, said: &Said) {
    if verdict.status != Status::Failed {
        return;
    }
    if let Some(f) = &said.failure {
        verdict.result.clone_from(f);
    }
    if !said.refused.is_empty() {
        let mut shown: Vec<String> = said
            .refused
            .iter()
            .take(REFUSED_SHOWN)
            .map(|r| format!("{r} (permission denied)"))
            .collect();
        if said.refused.len() > REFUSED_SHOWN {
            shown.push(format!("and {} more", said.refused.len() - REFUSED_SHOWN));
        }
        verdict
            .result
            .push_str(&format!("; the agent was refused: {}", shown.join(", ")));
    }
    match &said.halt {
        None => {}
        Some(Halt::Task { why }) => {
            verdict
                .result
                .push_str(&format!(" — not retried: {why}"));
        }
        Some(Halt::Run { secret }) => verdict.result.push_str(&format!(
            " — not retried, and the run stops: the API refused the credentials, so every task would fail the same way; set the secret {secret} (locally: export {secret}=…; on GitHub: gh secret set {secret})"
        )),
        Some(Halt::Budget) => verdict.result.push_str(
            " — the agent stopped at a spending limit (its own --max-budget-usd, or dagexec's max-cost at the model gateway): not counted as a failure; the run stops",
        ),
    }
    verdict.halt.clone_from(&said.halt);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn plan() -> Plan {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/auth-v2.json");
        crate::edge::plan_file::load(&path).unwrap()
    }

    /// Escape sequences in a status line never reach the terminal, the plan or a commit.
    #[test]
    fn status_line_messages_are_sanitised() {
        let line = "COMPLETED: \u{1b}]0;pwned\u{7}\u{1b}[2J done\u{0} \u{202e}x";
        let status = parse_status_line(line).expect("a status line");
        assert_eq!(status.kind, Reported::Completed);
        assert_eq!(status.message, "done\u{FFFD} \u{FFFD}x");
        let mut r = report("COMPLETED: ok");
        r.output = "noise\n\u{1b}[31mno status\u{1b}[0m".into();
        r.log = Some("last \u{1b}]0;t\u{7}line\n".into());
        let verdict = judge(1, &plan().tasks[1], &r, ".design/plan.json");
        assert_eq!(
            verdict.result,
            format!(
                "No status line returned; last log line: last line; {}",
                judge::EXPECTED_STATUS
            )
        );
    }

    #[test]
    fn a_workers_edit_of_the_task_list_is_named_as_its_kind() {
        let plan = plan();
        let mut r = report("COMPLETED: ok");
        r.changed.insert(".taskmaster/tasks/tasks.json".into());
        let said = unexpected_files_among(
            1,
            &plan.tasks[1],
            &r,
            OwnFiles {
                plan: ".taskmaster/tasks/.dagexec/plan.json",
                task_list: Some(".taskmaster/tasks/tasks.json"),
            },
        );
        assert_eq!(
            said,
            [
                "edited .taskmaster/tasks/tasks.json (the edit is discarded; dagexec writes the task's status there when its work is committed)"
            ]
        );
    }

    /// Task 1 of auth-v2 creates src/auth/password.ts + .test.ts and modifies package.json.
    fn report(output: &str) -> AttemptReport {
        AttemptReport {
            output: output.to_string(),
            exit: Exit::Success,
            log: Some("did the work\n".into()),
            present: [
                "src/auth/password.ts",
                "src/auth/password.test.ts",
                "package.json",
            ]
            .map(String::from)
            .into(),
            changed: [
                "src/auth/password.ts",
                "src/auth/password.test.ts",
                "package.json",
            ]
            .map(String::from)
            .into(),
            acceptance: None,
        }
    }

    /// Issue 20 §4: a 900 KB `COMPLETED:` line was the result whole (plan, completedTasks,
    /// commit message).
    #[test]
    fn results_are_clipped_at_a_character_boundary_with_a_marker() {
        let line = format!("COMPLETED: {}", "é".repeat(450_000));
        let message = parse_status_line(&line).expect("a status line").message;
        assert!(message.len() <= RESULT_MAX_BYTES, "{}", message.len());
        assert!(message.starts_with("éé"), "{message}");
        assert!(
            message.ends_with(
                " … [clipped: 900000 bytes in all; the whole text is in the attempt's log]"
            ),
            "{message}"
        );
        assert_eq!(
            clip_result(&message),
            message,
            "clipping twice changes nothing"
        );
        let short = "a".repeat(RESULT_MAX_BYTES);
        assert_eq!(clip_result(&short), short);
        let long = clip_result(&format!("{short}b"));
        assert!(
            long.len() <= RESULT_MAX_BYTES && long.starts_with("aaa"),
            "{long}"
        );
        assert!(long.contains("4097 bytes in all"), "{long}");
        let failed = report(&format!("FAILED: {}", "x".repeat(900_000)));
        let v = judge(1, &plan().tasks[1], &failed, ".design/plan.json");
        assert_eq!(v.status, Status::Failed);
        assert!(v.result.len() <= RESULT_MAX_BYTES && v.result.contains("clipped: 900000 bytes"));
    }

    #[test]
    fn status_line_regex() {
        let cases: &[(&str, Option<(Reported, &str)>)] = &[
            ("COMPLETED: done it", Some((Reported::Completed, "done it"))),
            ("FAILED: nope", Some((Reported::Failed, "nope"))),
            (
                "BLOCKED: pg missing",
                Some((Reported::Blocked, "pg missing")),
            ),
            ("COMPLETED:", None),
            ("COMPLETED: ", None),
            ("COMPLETED:done", None),
            ("completed: done", None),
            ("Task COMPLETED: done", None),
            ("NEEDS_DECISION: which db", None),
            ("SUCCESS: x", None),
        ];
        for (line, want) in cases {
            let got = parse_status_line(line).map(|s| (s.kind, s.message));
            assert_eq!(got, want.map(|(k, m)| (k, m.to_string())), "{line:?}");
        }
        assert_eq!(
            last_nonempty_line("a\nCOMPLETED: x\n\n  \n"),
            Some("COMPLETED: x")
        );
        assert_eq!(last_nonempty_line("COMPLETED: x\nbye\n"), Some("bye"));
        assert_eq!(last_nonempty_line("\n\n"), None);
    }

    #[test]
    fn declared_paths_are_checked_in_their_one_form() {
        let p = crate::pure::plan::load::parse(
            r#"{"schemaVersion":2,"tasks":[{"metadata":{"files":{"create":["src//a.txt","docs/"],"modify":["src/./b.txt"]}}}]}"#,
            Path::new("p.json"),
        )
        .unwrap();
        let mut r = report("COMPLETED: done");
        r.present = ["src/a.txt", "docs"].map(String::from).into();
        r.changed = ["src/a.txt", "docs", "src/b.txt"].map(String::from).into();
        assert!(
            spot_check(&p.tasks[0], &r).is_empty(),
            "{:?}",
            spot_check(&p.tasks[0], &r)
        );
        assert!(
            unexpected_files_among(0, &p.tasks[0], &r, OwnFiles::plan(".design/plan.json"))
                .is_empty()
        );
    }

    #[test]
    fn links_and_git_dirs_in_a_change_are_refused() {
        let p = crate::pure::plan::load::parse(
            r#"{"schemaVersion":2,"tasks":[{"metadata":{"files":{"create":["lib/link","./up","out","g","d","ok"],"modify":[]}}}]}"#,
            Path::new("p.json"),
        )
        .unwrap();
        let t = &p.tasks[0];
        let link = |path: &str, target: &str| Link {
            path: path.into(),
            target: target.into(),
            gitlink: false,
        };

        let refused = |changed: &[&str], links: &[Link]| {
            let changed: Vec<String> = changed
                .iter()
                .map(std::string::ToString::to_string)
                .collect();
            refused_changes(t, &changed, links, ".design/plan.json").unwrap_or_default()
        };
        let cases: &[(&[&str], Vec<Link>, &str)] = &[
            (&["a.txt"], vec![], ""),
            (&["lib/link"], vec![link("lib/link", "../src/x")], ""),
            (&["up"], vec![link("up", "lib")], ""),
            (&["ok"], vec![link("ok", ".designs/x")], ""),
            (
                &[".GIT/hooks/pre-commit"],
                vec![],
                "writes .GIT/hooks/pre-commit, inside git's own",
            ),
            (&["src/.Git"], vec![], "writes src/.Git, inside git's own"),
            (
                &[".DESIGN/Plan.json"],
                vec![],
                "the plan file .design/plan.json under another case",
            ),
            (
                &["x"],
                vec![link("x", "a")],
                "adds the symbolic link x -> a, which the task does not declare",
            ),
            (
                &["out"],
                vec![link("out", "/etc/passwd")],
                "out -> /etc/passwd points outside the repository",
            ),
            (
                &["out"],
                vec![link("out", "../../x")],
                "points outside the repository",
            ),
            (
                &["lib/link"],
                vec![link("lib/link", "../.GIT/config")],
                "points into .git/",
            ),
            (&["g"], vec![link("g", ".git")], "points into .git/"),
            (
                &["d"],
                vec![link("d", "./.Design/plan.json")],
                "points into .design/",
            ),
            (&["up"], vec![link("up", ".")], "at the repository's top"),
            (
                &["lib/link"],
                vec![link("lib/link", "..")],
                "at the repository's top",
            ),
        ];
        for (changed, links, want) in cases {
            let got = refused(changed, links);
            if want.is_empty() {
                assert_eq!(got, "", "{changed:?} {links:?}");
            } else {
                assert!(got.contains(want), "{changed:?} {links:?}: {got}");
            }
        }
    }

    /// A worker's `gf/.git` makes `gf` a gitlink (mode 160000): refused unless declared.
    #[test]
    fn an_undeclared_gitlink_is_refused() {
        let p = crate::pure::plan::load::parse(
            r#"{"schemaVersion":2,"tasks":[{"metadata":{"files":{"create":["ok"],"modify":[]}}}]}"#,
            Path::new("p.json"),
        )
        .unwrap();
        let gitlink = |path: &str| Link {
            path: path.into(),
            target: "0123456789abcdef0123456789abcdef01234567".into(),
            gitlink: true,
        };
        let refused = |path: &str| {
            refused_changes(
                &p.tasks[0],
                &[path.to_string()],
                &[gitlink(path)],
                ".design/plan.json",
            )
        };
        assert_eq!(
            refused("gf").as_deref(),
            Some(
                "refused: the change adds gf, a nested git repository (a gitlink: a .git inside it), which the task does not declare"
            )
        );
        assert_eq!(refused("ok"), None);
    }

    /// Attempts and the verdict each gets on task 1 of auth-v2.
    fn verdict_cases() -> Vec<(AttemptReport, Status, &'static str)> {
        vec![
            (
                report("all good, trust me"),
                Status::Failed,
                "No status line returned; last log line: did the work; the last non-empty line of stdout must be the status line: \"COMPLETED: <summary>\", \"FAILED: <reason>\" or \"BLOCKED: <question>\"",
            ),
            (
                AttemptReport {
                    log: None,
                    ..report("")
                },
                Status::Failed,
                "No status line returned and no log file found; the last non-empty line of stdout must be the status line: \"COMPLETED: <summary>\", \"FAILED: <reason>\" or \"BLOCKED: <question>\"",
            ),
            (
                report("FAILED: bcrypt would not build"),
                Status::Failed,
                "bcrypt would not build",
            ),
            (
                report("BLOCKED: Node 16 installed"),
                Status::Blocked,
                "Node 16 installed",
            ),
            (
                AttemptReport {
                    exit: Exit::Code(2),
                    ..report("COMPLETED: lies")
                },
                Status::Failed,
                "worker exited with status 2 (last output: \"COMPLETED: lies\")",
            ),
            (
                AttemptReport {
                    exit: Exit::Signal(9),
                    ..report("")
                },
                Status::Failed,
                "worker crashed: killed by signal 9",
            ),
            (
                AttemptReport {
                    exit: Exit::TimedOut(Duration::from_secs(1800)),
                    ..report("")
                },
                Status::Failed,
                "timed out after 30m",
            ),
            (
                AttemptReport {
                    exit: Exit::SpawnFailed("sh: not found".into()),
                    ..report("")
                },
                Status::Failed,
                "worker could not be started: sh: not found",
            ),
            (
                AttemptReport {
                    present: BTreeSet::new(),
                    changed: BTreeSet::new(),
                    ..report("COMPLETED: lie")
                },
                Status::Failed,
                "spot-check failed: src/auth/password.ts (to create) does not exist; src/auth/password.test.ts (to create) does not exist; package.json (to modify) was not changed",
            ),
            (
                AttemptReport {
                    acceptance: Some(vec![CheckRun {
                        criterion: "Password tests pass".into(),
                        check: "npm test -- password".into(),
                        passed: false,
                        output: "\nFAIL password.test.ts\nmore".into(),
                    }]),
                    ..report("COMPLETED: done")
                },
                Status::Failed,
                "acceptance check failed: `npm test -- password`: FAIL password.test.ts",
            ),
        ]
    }

    #[test]
    fn verdicts() {
        let p = plan();
        let t = &p.tasks[1];
        let judge1 = |r: &AttemptReport| judge(1, t, r, ".design/plan.json");
        let ok = judge1(&report("work\nCOMPLETED: helper added\n"));
        assert_eq!(
            (ok.status, ok.result.as_str()),
            (Status::Completed, "helper added")
        );
        assert!(!ok.acceptance_passed, "criteria exist but were not run");

        let mut r = report("COMPLETED: helper added");
        r.acceptance = Some(vec![CheckRun {
            criterion: "c".into(),
            check: "npm test -- password".into(),
            passed: true,
            output: String::new(),
        }]);
        assert!(judge1(&r).acceptance_passed);

        for (r, status, result) in verdict_cases() {
            let v = judge1(&r);
            assert_eq!((v.status, v.result.as_str()), (status, result), "{r:?}");
        }
    }

    #[test]
    fn blocked_is_not_spot_checked_and_warnings_are_exact() {
        let p = plan();
        let mut r = report("BLOCKED: need a decision");
        r.present.clear();
        r.changed = [
            "README.md",
            ".design/plan.json",
            ".design/worker-1.log",
            "package.json",
        ]
        .map(String::from)
        .into();
        let v = judge(1, &p.tasks[1], &r, ".design/plan.json");
        assert_eq!(v.status, Status::Blocked);
        assert_eq!(
            v.warnings,
            [
                "edited .design/plan.json (the edit is discarded; only dagexec writes the plan)",
                "unexpected file changed: README.md",
            ]
        );
    }

    /// A task that declares no files (a Taskmaster task, an issue) has no undeclared file
    /// beside declared ones: nothing it changes is "unexpected", its edit of the plan still is
    /// said. One that declares files keeps the warning (the test above).
    #[test]
    fn a_task_declaring_no_files_has_no_unexpected_file() {
        let p = plan();
        let mut task = p.tasks[1].clone();
        task.metadata = None;
        assert_eq!(task.files().count(), 0, "the task declares nothing");
        let mut r = report("COMPLETED: done");
        r.changed = ["README.md", ".design/plan.json", "src/x.ts"]
            .map(String::from)
            .into();
        let v = judge(1, &task, &r, ".design/plan.json");
        assert_eq!(
            v.warnings,
            ["edited .design/plan.json (the edit is discarded; only dagexec writes the plan)"]
        );
    }

    #[test]
    fn acceptance_runs_only_after_a_clean_completed() {
        let p = plan();
        let t = &p.tasks[1];
        assert!(wants_acceptance(t, &report("COMPLETED: x")));
        assert!(!wants_acceptance(t, &report("FAILED: x")));
        assert!(!wants_acceptance(
            t,
            &AttemptReport {
                exit: Exit::Code(1),
                ..report("COMPLETED: x")
            }
        ));
        assert!(!wants_acceptance(
            t,
            &AttemptReport {
                present: BTreeSet::new(),
                ..report("COMPLETED: x")
            }
        ));
        assert!(
            !wants_acceptance(&p.tasks[5], &report("COMPLETED: x")),
            "no criteria, nothing to run"
        );
    }

    #[test]
    fn decisions_and_retry_limit() {
        let p = plan();
        let failed = Verdict {
            status: Status::Failed,
            result: "boom".into(),
            acceptance_passed: false,
            failed_checks: vec![],
            warnings: vec![],
            halt: None,
        };
        match decide(&p, 1, &failed, 1, Unit::Batch) {
            Decision::Retry { attempt, prompt } => {
                assert_eq!(attempt, 2);
                assert!(prompt.contains("## Retry context\nThis is attempt 2 of 3. The previous attempt failed.\n\nPrevious failure reason:\nboom"));
                assert!(prompt.contains("IMPORTANT: The primary approach failed. Use this strategy instead: Use Node's crypto.scrypt instead of bcrypt."));
            }
            d => panic!("expected a retry, got {d:?}"),
        }
        match decide(&p, 0, &failed, 2, Unit::Batch) {
            Decision::Retry { attempt: 3, prompt } => {
                assert!(!prompt.contains("IMPORTANT"), "task 0 has no fallback");
            }
            d => panic!("expected attempt 3, got {d:?}"),
        }
        assert_eq!(decide(&p, 1, &failed, 3, Unit::Batch), Decision::Failed);
        let blocked = Verdict {
            status: Status::Blocked,
            ..failed.clone()
        };
        assert_eq!(decide(&p, 1, &blocked, 1, Unit::Batch), Decision::Blocked);
        let done = Verdict {
            status: Status::Completed,
            ..failed
        };
        assert_eq!(decide(&p, 1, &done, 1, Unit::Batch), Decision::Completed);
    }

    #[test]
    fn durations_and_summary() {
        for (s, want) in [
            (45, "45s"),
            (1800, "30m"),
            (90, "1m30s"),
            (3600, "1h"),
            (5400, "1h30m"),
        ] {
            assert_eq!(human_duration(Duration::from_secs(s)), want);
        }
        let e = |status| BatchEntry {
            plan_index: 0,
            status,
            result: String::new(),
            attempts: 1,
            acceptance_passed: true,
        };
        assert_eq!(
            serde_json::to_string(&e(Status::Completed)).unwrap(),
            r#"{"planIndex":0,"status":"completed","result":"","attempts":1,"acceptancePassed":true}"#
        );
    }

    use crate::pure::said::{Halt, Said};

    fn failed(reason: &str) -> Verdict {
        Verdict {
            status: Status::Failed,
            result: reason.into(),
            acceptance_passed: false,
            failed_checks: Vec::new(),
            warnings: Vec::new(),
            halt: None,
        }
    }

    #[test]
    fn a_failure_is_told_in_the_clis_words_with_what_it_refused() {
        let mut v = failed("spot-check failed: x.txt (to create) does not exist");
        let said = Said {
            failure: None,
            halt: None,
            refused: vec!["Write /work/repo/.git/x.txt".into()],
        };
        heed(&mut v, &said);
        assert_eq!(
            v.result,
            "spot-check failed: x.txt (to create) does not exist; the agent was refused: Write /work/repo/.git/x.txt (permission denied)"
        );
        assert_eq!(v.halt, None);
        let mut done = failed("x");
        done.status = Status::Completed;
        heed(&mut done, &said);
        assert_eq!(done.result, "x", "a completed verdict is left alone");
    }

    #[test]
    fn a_halt_says_why_there_is_no_retry() {
        let mut v = failed("worker exited with status 1");
        heed(
            &mut v,
            &Said {
                failure: Some(
                    "claude: Invalid API key · Fix external API key (API error 401)".into(),
                ),
                halt: Some(Halt::Run {
                    secret: "ANTHROPIC_API_KEY".into(),
                }),
                refused: Vec::new(),
            },
        );
        insta::assert_snapshot!(v.result, @"claude: Invalid API key · Fix external API key (API error 401) — not retried, and the run stops: the API refused the credentials, so every task would fail the same way; set the secret ANTHROPIC_API_KEY (locally: export ANTHROPIC_API_KEY=…; on GitHub: gh secret set ANTHROPIC_API_KEY)");
        assert!(matches!(v.halt, Some(Halt::Run { .. })));
    }

    /// Issue 33 §4: a failure says why. Output that has no status line names the line that
    /// was expected; a last line that is nearly one says what is wrong and how it should read;
    /// a status line that is not last says what came after it.
    #[test]
    fn a_missing_status_line_is_explained_precisely() {
        let cases = [
            "Starting the agent…",
            "completed: wrote b.txt",
            "Failed: the tests do not pass",
            "COMPLETED:done",
            "BLOCKED:",
            "COMPLETED: wrote c.txt\nbye\n\n",
            "FAILED: first try\nCOMPLETED: second try\nsummary follows",
            "Task COMPLETED: done",
            "",
        ];
        let shown: Vec<String> = cases
            .iter()
            .map(|out| {
                let r = AttemptReport {
                    log: None,
                    ..report(out)
                };
                let v = judge(1, &plan().tasks[1], &r, ".design/plan.json");
                assert_eq!(v.status, Status::Failed, "{out:?}");
                format!("{out:?}\n  → {}", v.result)
            })
            .collect();
        insta::assert_snapshot!(shown.join("\n"));
    }
}

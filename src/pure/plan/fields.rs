//! Every field dagexec reads or writes in a plan beyond the seeds' schema, in one place: the
//! names a person finds in `.design/plan.json` and what each holds. The model keeps them in
//! its `extra` maps (of the plan, `progress` and each task), so a plan written by dagexec is
//! still a seed plan.

// Task fields.

// `metadata.files.scope` (the model's `Files::scope`, written only when not empty): the files a
// task may change but need not — a task list's scope, such as cc-sdd's `_Boundary:_`.

/// The task field holding its question.
pub const QUESTION: &str = "question";
/// The task field (kept by the model's `extra` map) holding the review history.
pub const REVIEWS: &str = "reviews";
/// The task field naming a reviewer command for this task only (`false` turns the run's
/// reviewer off for it).
pub const REVIEWER: &str = "reviewer";
/// The task field that marks a long-run task and holds its paths.
pub const LONG_RUN: &str = "longRun";
/// The plan (and task) field that marks a Spec Kit plan.
pub const SPEC_KIT: &str = "specKit";
/// The plan (and task) field that marks a plan generated from another format's file
/// (`sources::Format`: Taskmaster, Kiro / cc-sdd): `{"format", "file", "tasks": [{"id", "text"}],
/// "warnings"}` on the plan, `{"id"}` on each task.
pub const SOURCE: &str = "dagexecSource";
/// The key under a task's fields where finalize keeps the prompt of its next attempt.
pub const RETRY_PROMPT: &str = "dagexecRetryPrompt";
/// The task field that records a started attempt's workflow run (eager on Actions).
pub const RUN: &str = "dagexecRun";
/// The task field where the conductor (`schedule: eager`, `overlap: merge`) keeps what the
/// task's next run continues: a merge's re-check or a rebase ([`crate::action::rounds::FollowUp`]).
pub const FOLLOW_UP: &str = "dagexecFollowUp";
/// Beside a re-check's [`FOLLOW_UP`]: the acceptance checks of the landed tasks it runs, by
/// task, as they were before the plan update trimmed those tasks.
pub const FOLLOW_UP_CHECKS: &str = "dagexecFollowUpChecks";

// `progress` fields.

/// The key under `progress` of the attempt records (time, tokens, cost, outcome).
pub const ATTEMPTS: &str = "dagexecAttempts";
/// The key under `progress` of what attempts of tasks no longer in the plan spent (a crash cut
/// them short and the task was removed before the run resumed): still counted against
/// `max-cost`.
pub const REMOVED_SPEND: &str = "dagexecRemovedSpend";
/// The field of a `progress.completedTasks` entry that keeps how many attempts the task took
/// (the task's own `attempts` is trimmed at completion).
pub const COMPLETED_ATTEMPTS: &str = "attempts";
/// In the plan's progress: the open round on Actions.
pub const ROUND: &str = "dagexecRound";
/// In the plan's progress: where finalize keeps the links to the attempts' logs on Actions.
pub const LOGS: &str = "dagexecLogs";
/// In the plan's progress: the workflow run and its attempt (`{"run": "123", "attempt": 1}`)
/// of the Action's job that committed the plan last (finalize, the conductor): a re-run of a
/// job killed after its push finds its own push by it.
pub const WRITER: &str = "dagexecWriter";
/// In the plan's progress: the user answered "proceed anyway" to failed pre-flight checks.
pub const PROCEED: &str = "dagexecPreflight";
/// In the plan's progress: the `/execute` comments whose plan change this plan saw settled
/// (a cache: the record that a command was settled is the commit that settled it).
pub const STEERED: &str = "dagexecSteered";

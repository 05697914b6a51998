//! The `.design/plan.json` data model (schemaVersion 2, its waves variant, and 3).
//!
//! Every object keeps the fields dagexec does not know in an `extra` map, so a plan read and
//! written back loses nothing (`serde_json` is built with `preserve_order`, so their order is
//! kept too). Optional lists are `Option<Vec<_>>` so that a field the plan never had is not
//! written back as `[]`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Fields of an object that dagexec does not model, kept verbatim for the next write.
pub type Extra = Map<String, Value>;

/// A whole plan file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    /// 2 or 3 (see [`SUPPORTED_SCHEMA_VERSIONS`]).
    pub schema_version: u64,
    /// What the plan achieves, shown as "Executing: {goal}".
    #[serde(default)]
    pub goal: String,
    /// Project context shared by every worker prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<Context>,
    /// Execution progress written by the updater.
    #[serde(default)]
    pub progress: Progress,
    /// The DAG; a task's plan index is its position here.
    pub tasks: Vec<Task>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The schema versions dagexec reads.
pub const SUPPORTED_SCHEMA_VERSIONS: [u64; 2] = [2, 3];

/// `context`: the project's stack and conventions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Context {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conventions: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test_command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lsp: Option<Lsp>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `context.lsp`: languages with a language server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lsp {
    #[serde(default)]
    pub available: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `progress`: what the updater has recorded so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Progress {
    #[serde(default)]
    pub completed_tasks: Vec<CompletedTask>,
    #[serde(default)]
    pub surprises: Vec<Value>,
    #[serde(default)]
    pub decisions: Vec<Value>,
    /// Waves variant only: the last wave the updater finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_wave: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// One `progress.completedTasks` entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletedTask {
    pub index: usize,
    #[serde(default)]
    pub summary: String,
    /// Waves variant only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<u64>,
    #[serde(flatten)]
    pub extra: Extra,
}

impl CompletedTask {
    /// The entry of task `index`, completed with `summary` (outside the waves variant).
    pub fn new(index: usize, summary: String) -> CompletedTask {
        CompletedTask {
            index,
            summary,
            wave: None,
            extra: Extra::default(),
        }
    }
}

/// A task's execution state.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    #[default]
    Pending,
    InProgress,
    Completed,
    Failed,
    Blocked,
    Skipped,
}

impl Status {
    /// All statuses, in display order, which is the order they are declared in: `status as
    /// usize` indexes a per-status array.
    pub const ALL: [Status; 6] = [
        Status::Pending,
        Status::InProgress,
        Status::Completed,
        Status::Failed,
        Status::Blocked,
        Status::Skipped,
    ];

    /// The word used in the plan file.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::InProgress => "in_progress",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Blocked => "blocked",
            Status::Skipped => "skipped",
        }
    }

    /// Failed or blocked: the statuses that make dependents skip.
    pub fn is_failure(self) -> bool {
        matches!(self, Status::Failed | Status::Blocked)
    }

    /// Nothing more will happen to the task in this run.
    pub fn is_resolved(self) -> bool {
        !matches!(self, Status::Pending | Status::InProgress)
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One task of the DAG.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Task {
    #[serde(default)]
    pub subject: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_form: Option<String>,
    #[serde(default)]
    pub status: Status,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Attempts made so far (absent = 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u32>,
    /// Plan indices that must complete first.
    #[serde(default)]
    pub blocked_by: Vec<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<Metadata>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<Agent>,
    /// Waves variant only: the wave this task belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wave: Option<u64>,
    /// v3 only: tasks that conflict with this one (precomputed by design).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_overlaps: Option<Vec<usize>>,
    /// v3 only: the complete worker prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// A join: no work of its own, done when its blockers are (dagexec's field, written only
    /// when true). Its dependents wait for it instead of for each of its blockers, so N tasks
    /// waiting for M take N + M edges, not N × M. It is never run, counted, shown as a task
    /// or ticked; [`crate::pure::join`] gives its semantics.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub join: bool,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `metadata`: the task's kind and the files it touches.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metadata {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default)]
    pub files: Files,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `metadata.files`: repository-relative paths the task creates or modifies.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Files {
    #[serde(default)]
    pub create: Vec<String>,
    #[serde(default)]
    pub modify: Vec<String>,
    /// Files the task may change but need not (a scope, such as cc-sdd's `_Boundary:_`): kept
    /// apart by the overlap rules and declared (a change to one is not unexpected), never
    /// spot-checked. Absent from seed plans; written only when not empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope: Vec<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `agent`: how the worker should approach the task.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    #[serde(default)]
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expertise: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approach: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior_art: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_files: Option<Vec<ContextFile>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assumptions: Option<Vec<Assumption>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub acceptance_criteria: Option<Vec<AcceptanceCriterion>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_triggers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub constraints: Option<Vec<String>>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `agent.contextFiles[]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ContextFile {
    pub path: String,
    #[serde(default)]
    pub reason: String,
    #[serde(flatten)]
    pub extra: Extra,
}

/// `agent.assumptions[]`: a claim and the shell command that verifies it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Assumption {
    #[serde(default)]
    pub claim: String,
    #[serde(default)]
    pub verify: String,
    /// `blocking` or `warning`.
    #[serde(default)]
    pub severity: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Assumption {
    /// Whether a failure of this check stops execution.
    pub fn is_blocking(&self) -> bool {
        self.severity.eq_ignore_ascii_case("blocking")
    }
}

/// `agent.acceptanceCriteria[]`: a criterion and the shell command that checks it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AcceptanceCriterion {
    #[serde(default)]
    pub criterion: String,
    #[serde(default)]
    pub check: String,
    #[serde(flatten)]
    pub extra: Extra,
}

impl Task {
    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts.unwrap_or(0)
    }

    /// Files the task will create.
    pub fn creates(&self) -> &[String] {
        self.metadata.as_ref().map_or(&[], |m| &m.files.create)
    }

    /// Files the task will modify.
    pub fn modifies(&self) -> &[String] {
        self.metadata.as_ref().map_or(&[], |m| &m.files.modify)
    }

    /// Files the task may change but need not (`metadata.files.scope`).
    pub fn scope(&self) -> &[String] {
        self.metadata.as_ref().map_or(&[], |m| &m.files.scope)
    }

    /// Every file the task declares (create, then modify, then its scope).
    pub fn files(&self) -> impl Iterator<Item = &String> {
        self.creates()
            .iter()
            .chain(self.modifies())
            .chain(self.scope())
    }

    /// `metadata.type`, if any.
    pub fn kind(&self) -> Option<&str> {
        self.metadata.as_ref().and_then(|m| m.kind.as_deref())
    }

    /// The agent section's assumptions.
    pub fn assumptions(&self) -> &[Assumption] {
        self.agent
            .as_ref()
            .map_or(&[], |a| a.assumptions.as_deref().unwrap_or_default())
    }

    /// The agent section's context files.
    pub fn context_files(&self) -> &[ContextFile] {
        self.agent
            .as_ref()
            .map_or(&[], |a| a.context_files.as_deref().unwrap_or_default())
    }

    /// The agent section's acceptance criteria.
    pub fn acceptance_criteria(&self) -> &[AcceptanceCriterion] {
        self.agent.as_ref().map_or(&[], |a| {
            a.acceptance_criteria.as_deref().unwrap_or_default()
        })
    }

    /// The agent section's fallback strategy, if any (empty counts as none).
    pub fn fallback(&self) -> Option<&str> {
        self.agent
            .as_ref()
            .and_then(|a| a.fallback.as_deref())
            .filter(|s| !s.trim().is_empty())
    }

    /// `agent.model`, if any.
    pub fn model(&self) -> Option<&str> {
        self.agent.as_ref().and_then(|a| a.model.as_deref())
    }
}

impl Agent {
    /// `rollbackTriggers`, or none.
    pub fn rollback_triggers(&self) -> &[String] {
        self.rollback_triggers.as_deref().unwrap_or_default()
    }

    /// `constraints`, or none.
    pub fn constraints(&self) -> &[String] {
        self.constraints.as_deref().unwrap_or_default()
    }
}

impl Plan {
    /// A schema 2 plan of `tasks` achieving `goal`, with no context and no progress yet (what
    /// a task list, a long-run folder or an issue's sub-issues become).
    pub fn new(goal: String, tasks: Vec<Task>) -> Plan {
        Plan {
            schema_version: 2,
            goal,
            context: None,
            progress: Progress::default(),
            tasks,
            extra: Extra::default(),
        }
    }

    /// True for the waves variant of v2 (`progress.currentWave` or a task with `wave`).
    pub fn is_waves(&self) -> bool {
        self.progress.current_wave.is_some() || self.tasks.iter().any(|t| t.wave.is_some())
    }

    /// Resume detection (seed Step 1): any task whose status is not pending, or, in the waves
    /// variant (seed 001), `progress.currentWave > 0`.
    pub fn is_resume(&self) -> bool {
        self.progress.current_wave.is_some_and(|w| w > 0)
            || self.tasks.iter().any(|t| t.status != Status::Pending)
    }

    /// Attempts task `index` took. Completion trims a task's `attempts` (the seed's keep-list),
    /// so for a completed task the count kept in its `progress.completedTasks` entry
    /// ([`super::fields::COMPLETED_ATTEMPTS`]) answers.
    pub fn attempts_of(&self, index: usize) -> u32 {
        let task = &self.tasks[index];
        if let Some(n) = task.attempts {
            return n;
        }
        self.progress
            .completed_tasks
            .iter()
            .find(|c| c.index == index)
            .and_then(|c| c.extra.get(super::fields::COMPLETED_ATTEMPTS))
            .and_then(serde_json::Value::as_u64)
            .map_or(0, |n| u32::try_from(n).unwrap_or(u32::MAX))
    }

    /// Number of tasks with the given status (joins are not tasks one counts).
    pub fn count(&self, status: Status) -> usize {
        self.tasks
            .iter()
            .filter(|t| t.status == status && !t.join)
            .count()
    }

    /// Number of tasks, joins not counted: the total a user is shown.
    pub fn total(&self) -> usize {
        self.tasks.iter().filter(|t| !t.join).count()
    }

    /// `Project: … | … | test: …` line of the setup output.
    pub fn context_summary(&self) -> String {
        let Some(c) = &self.context else {
            return String::new();
        };
        let mut parts: Vec<String> = Vec::new();
        if let Some(s) = c.stack.as_deref().filter(|s| !s.is_empty()) {
            parts.push(s.to_string());
        }
        if let Some(s) = c.conventions.as_deref().filter(|s| !s.is_empty()) {
            parts.push(s.to_string());
        }
        if let Some(s) = c.test_command.as_deref().filter(|s| !s.is_empty()) {
            parts.push(format!("test: {s}"));
        }
        parts.join(" | ")
    }
}

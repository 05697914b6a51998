//! Everything that can be wrong with a plan file, as typed errors that name the task and the
//! field, each with a one-line hint saying what to do. The CLI renders them; exit code 2.

use std::path::PathBuf;

/// A reason the plan cannot be executed.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// There is no plan file at the path.
    #[error("No plan found at {}", path.display())]
    NoPlan { path: PathBuf },

    /// The plan file exists but cannot be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The file is not JSON.
    #[error("{}:{line}:{column}: malformed JSON: {message}", path.display())]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },

    /// `schemaVersion` is missing or not one dagexec reads.
    #[error(
        "schemaVersion: unsupported schema version {found} (dagexec reads schemaVersion 2 and 3)"
    )]
    SchemaVersion { found: String },

    /// `tasks` is missing or empty.
    #[error("tasks: the plan contains no tasks")]
    NoTasks,

    /// A field has the wrong JSON type or an unknown value (`location` is empty for the
    /// document as a whole).
    #[error("{}{message}", if location.is_empty() { String::new() } else { format!("{location}: ") })]
    Shape { location: String, message: String },

    /// A `blockedBy` entry names a task that does not exist.
    #[error("task {task} blockedBy[{position}]: no task {dep} (the plan has {count} tasks)")]
    UnknownDependency {
        task: usize,
        position: usize,
        dep: usize,
        count: usize,
    },

    /// A task lists itself in `blockedBy`.
    #[error("task {task} blockedBy[{position}]: a task cannot block itself")]
    SelfDependency { task: usize, position: usize },

    /// `blockedBy` chains form a cycle; the path starts and ends at the same task.
    #[error("task {} blockedBy: cycle: {}", cycle[0], render_cycle(cycle))]
    Cycle { cycle: Vec<usize> },

    /// A file path would escape the repository or touch what workers must not touch.
    #[error("task {task} {field}: {path:?} {reason}")]
    UnsafePath {
        task: usize,
        field: String,
        path: String,
        reason: PathProblem,
    },

    /// A declared path goes through a directory that is a symbolic link in the repository.
    #[error("task {task} {field}: {path:?} goes through {link}, a symbolic link to {target}")]
    LinkedPath {
        task: usize,
        field: String,
        path: String,
        link: String,
        target: String,
    },

    /// A v3 `fileOverlaps` entry names a task that does not exist or the task itself.
    #[error("task {task} fileOverlaps[{position}]: {problem}")]
    BadOverlap {
        task: usize,
        position: usize,
        problem: String,
    },

    /// A one-line text field (shown on the terminal, put in commit messages) holds a control
    /// character: a NUL, an escape, a newline, a bidirectional override.
    #[error("task {task} {field}: {value:?} contains a control character (U+{code:04X})")]
    ControlChar {
        task: usize,
        field: String,
        value: String,
        code: u32,
    },

    /// A join (`"join": true`) that declares work: it is never run, so what it declares would
    /// never be done.
    #[error(
        "task {task} {field}: a join (\"join\": true) does no work of its own, so it cannot have {field}"
    )]
    JoinWithWork { task: usize, field: &'static str },
}

/// Why a declared path is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PathProblem {
    #[error("is empty")]
    Empty,
    #[error("is absolute")]
    Absolute,
    #[error("contains '..' and could leave the repository")]
    ParentDir,
    #[error("points into .git/")]
    GitDir,
    #[error("points at the plan file itself")]
    PlanItself,
}

/// How many tasks of a long cycle a message names at each end.
const CYCLE_SHOWN: usize = 10;

/// `0 → 4 → 2 → 0`; a long cycle by its ends: `0 → 1 → … → 99999 → 0 (100000 tasks)`.
pub fn render_cycle(cycle: &[usize]) -> String {
    let join = |part: &[usize]| {
        part.iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
            .join(" → ")
    };
    if cycle.len() <= 2 * CYCLE_SHOWN + 1 {
        return join(cycle);
    }
    format!(
        "{} → … → {} ({} tasks)",
        join(&cycle[..CYCLE_SHOWN]),
        join(&cycle[cycle.len() - CYCLE_SHOWN..]),
        cycle.len() - 1
    )
}

impl PlanError {
    /// One line telling the user how to fix it.
    pub fn hint(&self) -> String {
        match self {
            PlanError::NoPlan { .. } => {
                "Run /design <goal> first, or pass --plan PATH to use a plan elsewhere.".into()
            }
            PlanError::Read { .. } => "Check the file's permissions and that it is UTF-8 text.".into(),
            PlanError::Syntax { .. } => {
                "Fix the JSON at that position (a trailing comma or a missing quote is the usual cause), or re-run /design.".into()
            }
            PlanError::SchemaVersion { .. } => {
                "Set \"schemaVersion\" to 2 or 3, or re-run /design to produce a current plan.".into()
            }
            PlanError::NoTasks => "Re-run /design <goal>: a plan needs at least one task.".into(),
            PlanError::Shape { .. } => {
                "Fix the field to match the plan format (see docs/src/plan-format.md in dagexec's repository).".into()
            }
            PlanError::UnknownDependency { count, .. } => format!(
                "blockedBy holds plan indices (0 to {}); remove the entry or point it at an existing task.",
                count.saturating_sub(1)
            ),
            PlanError::SelfDependency { .. } => "Remove the task's own index from its blockedBy.".into(),
            PlanError::Cycle { cycle } => {
                let edges = cycle.len().saturating_sub(1);
                let shown: Vec<String> = cycle
                    .windows(2)
                    .take(CYCLE_SHOWN)
                    .map(|w| format!("task {} blockedBy {}", w[0], w[1]))
                    .collect();
                let more = if edges > CYCLE_SHOWN {
                    format!(", … ({edges} edges in all)")
                } else {
                    String::new()
                };
                format!(
                    "Tasks in a cycle can never start; remove one of these blockedBy edges: {}{more}.",
                    shown.join(", ")
                )
            }
            PlanError::UnsafePath { reason, .. } => match reason {
                PathProblem::PlanItself => {
                    "Only dagexec writes the plan; drop this path from the task.".into()
                }
                PathProblem::GitDir => "Workers must not touch git's own files; drop this path.".into(),
                _ => "Use a path relative to the repository root that stays inside it, e.g. src/app.ts.".into(),
            },
            PlanError::LinkedPath { .. } => {
                "dagexec never writes through a link: declare the path inside the directory the link points at, or replace the link with a real directory.".into()
            }
            PlanError::BadOverlap { .. } => {
                "fileOverlaps holds other tasks' plan indices; fix or remove the entry.".into()
            }
            PlanError::JoinWithWork { field, .. } => format!(
                "Remove {field} from the join, or remove \"join\": true to make it a task a worker runs."
            ),
            PlanError::ControlChar { .. } => {
                "Keep the field to one line of printable text: remove the character (it would reach commit messages and the terminal as it is).".into()
            }
        }
    }

    /// Whether the message already says which file it is about.
    pub fn names_file(&self) -> bool {
        matches!(
            self,
            PlanError::NoPlan { .. } | PlanError::Read { .. } | PlanError::Syntax { .. }
        )
    }

    /// The plan index this error is about, if it is about one task.
    pub fn task(&self) -> Option<usize> {
        match self {
            PlanError::UnknownDependency { task, .. }
            | PlanError::SelfDependency { task, .. }
            | PlanError::UnsafePath { task, .. }
            | PlanError::LinkedPath { task, .. }
            | PlanError::BadOverlap { task, .. }
            | PlanError::ControlChar { task, .. }
            | PlanError::JoinWithWork { task, .. } => Some(*task),
            PlanError::Cycle { cycle } => cycle.first().copied(),
            _ => None,
        }
    }
}

/// Every problem found in one plan, in plan order.
#[derive(Debug, thiserror::Error)]
#[error("{}", self.0.iter().map(std::string::ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct PlanErrors(pub Vec<PlanError>);

impl From<PlanError> for PlanErrors {
    fn from(e: PlanError) -> Self {
        PlanErrors(vec![e])
    }
}

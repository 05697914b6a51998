//! Setup (seed Step 1, the setup sub-agent) as `dagexec validate`: the seed's setup output
//! object and its human report. [`checks`] gathers the facts that need the outside world (git
//! status, assumption checks, context files); everything here is pure.

pub mod checks;
pub mod report;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::pure::graph::Dag;
use crate::pure::overlap::Rows;
use crate::pure::plan::model::Plan;

/// One blocking assumption check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockingCheck {
    /// v3's setup output names the task; v2's does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub task_index: Option<usize>,
    pub claim: String,
    pub passed: bool,
    pub output: String,
    /// The command, for the human report (not in the seed's object).
    #[serde(skip)]
    pub verify: String,
    /// The task as messages name it ([`crate::pure::plan::ids`]), for the human report.
    #[serde(skip)]
    pub task: String,
}

/// The seed's `validation` object.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Validation {
    pub git_clean: bool,
    pub git_status: String,
    pub blocking_checks: Vec<BlockingCheck>,
    pub context_files_valid: bool,
    pub missing_context_files: Vec<String>,
    /// Checks were not run (`--no-checks`); not in the seed's object.
    #[serde(skip)]
    pub checks_skipped: bool,
}

/// The seed's setup output object, field for field and in its order. Large parts are
/// borrowed or generated while serialising, so a 100k-task plan streams out without a copy,
/// and the overlap matrix is made row by row as it is written.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupOutput<'a> {
    pub goal: String,
    pub context_summary: String,
    pub is_resume: bool,
    pub validation: Validation,
    pub task_id_mapping: TaskIds,
    pub file_overlap_matrix: Rows<'a>,
    pub task_count: usize,
    pub max_depth: u32,
    /// Depth → plan indices at that depth (ascending); depths with no task are absent.
    pub depth_summary: BTreeMap<u32, Vec<usize>>,
}

/// `taskIdMapping` for `n` tasks: `{"0": "task-0", …}`, generated while serialising.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskIds(pub usize);

impl Serialize for TaskIds {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map((0..self.0).map(|i| (i, format!("task-{i}"))))
    }
}

pub use crate::pure::overlap::{Missed, Overlaps};

/// Builds the setup output from the plan, its DAG, overlaps and the gathered validation.
pub fn output<'a>(
    plan: &Plan,
    dag: &Dag,
    overlaps: &'a Overlaps,
    validation: Validation,
) -> SetupOutput<'a> {
    let mut depth_summary: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for i in (0..plan.tasks.len()).filter(|&i| !plan.tasks[i].join) {
        depth_summary.entry(dag.depth(i)).or_default().push(i);
    }
    SetupOutput {
        goal: plan.goal.clone(),
        context_summary: plan.context_summary(),
        is_resume: plan.is_resume(),
        validation,
        task_id_mapping: TaskIds(plan.tasks.len()),
        file_overlap_matrix: overlaps.reported(),
        task_count: plan.total(),
        max_depth: dag.max_depth(),
        depth_summary,
    }
}

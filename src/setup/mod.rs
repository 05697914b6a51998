//! Setup (seed Step 1, the setup sub-agent) as `dagexec validate`: the seed's setup output
//! object and its human report. [`checks`] gathers the facts that need the outside world (git
//! status, assumption checks, context files); everything here is pure.

pub mod checks;
pub mod report;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::graph::Dag;
use crate::overlap::OverlapMatrix;
use crate::plan::model::Plan;

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
    #[serde(skip)]
    pub task: usize,
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
/// borrowed or generated while serialising, so a 100k-task plan streams out without a copy.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SetupOutput<'a> {
    pub goal: String,
    pub context_summary: String,
    pub is_resume: bool,
    pub validation: Validation,
    pub task_id_mapping: TaskIds,
    pub file_overlap_matrix: &'a OverlapMatrix,
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
        serializer.collect_map((0..self.0).map(|i| (i, task_id(i))))
    }
}

/// The overlap matrices of a plan: what the plan declares (v3) and what dagexec computes.
#[derive(Debug, Clone)]
pub struct Overlaps {
    /// From the declared files and the DAG.
    pub computed: OverlapMatrix,
    /// v3: from the tasks' `fileOverlaps`; `None` for v2.
    pub declared: Option<OverlapMatrix>,
}

impl Overlaps {
    /// Computes (and for v3 reads) the matrices.
    pub fn of(plan: &Plan, dag: &Dag) -> Self {
        let computed = OverlapMatrix::compute(plan, dag);
        let declared = (plan.schema_version >= 3).then(|| OverlapMatrix::declared(plan));
        Overlaps { computed, declared }
    }

    /// The seed's `fileOverlapMatrix`: v3 honours the plan's `fileOverlaps` (as the v3 seed
    /// extracts them); v2 is computed.
    pub fn reported(&self) -> &OverlapMatrix {
        self.declared.as_ref().unwrap_or(&self.computed)
    }

    /// What scheduling respects: everything either side knows.
    pub fn for_scheduling(&self) -> OverlapMatrix {
        match &self.declared {
            Some(d) => d.union(&self.computed),
            None => self.computed.clone(),
        }
    }

    /// v3: conflicts dagexec found that the plan's `fileOverlaps` miss.
    pub fn missed_by_plan(&self) -> Vec<(usize, usize)> {
        match &self.declared {
            Some(d) => self.computed.missing_from(d),
            None => Vec::new(),
        }
    }
}

/// The id dagexec gives a task in `taskIdMapping`.
pub fn task_id(index: usize) -> String {
    format!("task-{index}")
}

/// Builds the setup output from the plan, its DAG, overlaps and the gathered validation.
pub fn output<'a>(
    plan: &Plan,
    dag: &Dag,
    overlaps: &'a Overlaps,
    validation: Validation,
) -> SetupOutput<'a> {
    let mut depth_summary: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for i in 0..plan.tasks.len() {
        depth_summary.entry(dag.depth(i)).or_default().push(i);
    }
    SetupOutput {
        goal: plan.goal.clone(),
        context_summary: plan.context_summary(),
        is_resume: plan.is_resume(),
        validation,
        task_id_mapping: TaskIds(plan.tasks.len()),
        file_overlap_matrix: overlaps.reported(),
        task_count: plan.tasks.len(),
        max_depth: dag.max_depth(),
        depth_summary,
    }
}

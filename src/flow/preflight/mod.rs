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

impl SetupOutput<'_> {
    /// Writes the same compact JSON as `serde_json::to_writer(out, self)`, with the overlap
    /// matrix written as its rows are made (`Rows` serialises them one by one).
    pub fn write_json(&self, out: &mut impl std::io::Write) -> std::io::Result<()> {
        fn field(
            out: &mut impl std::io::Write,
            name: &str,
            value: &impl Serialize,
        ) -> std::io::Result<()> {
            write!(out, "\"{name}\":")?;
            serde_json::to_writer(&mut *out, value).map_err(std::io::Error::other)
        }
        out.write_all(b"{")?;
        field(out, "goal", &self.goal)?;
        out.write_all(b",")?;
        field(out, "contextSummary", &self.context_summary)?;
        out.write_all(b",")?;
        field(out, "isResume", &self.is_resume)?;
        out.write_all(b",")?;
        field(out, "validation", &self.validation)?;
        out.write_all(b",")?;
        field(out, "taskIdMapping", &self.task_id_mapping)?;
        out.write_all(b",")?;
        field(out, "fileOverlapMatrix", &self.file_overlap_matrix)?;
        out.write_all(b",")?;
        field(out, "taskCount", &self.task_count)?;
        out.write_all(b",")?;
        field(out, "maxDepth", &self.max_depth)?;
        out.write_all(b",")?;
        field(out, "depthSummary", &self.depth_summary)?;
        out.write_all(b"}")
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_json_equals_serde() {
        for name in ["auth-v2.json", "auth-v3.json", "random-40-v2.json"] {
            let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .join(name);
            let plan = crate::edge::plan_file::load(&path).unwrap();
            let dag = Dag::build(&plan).unwrap();
            let overlaps = Overlaps::of(&plan, &dag);
            let validation = Validation {
                git_status: "?? \"odd\" name\n".into(),
                blocking_checks: vec![BlockingCheck {
                    task_index: Some(1),
                    claim: "c".into(),
                    passed: false,
                    output: "tab\tand ünïcode".into(),
                    verify: "v".into(),
                    task: 1,
                }],
                ..Default::default()
            };
            let setup = output(&plan, &dag, &overlaps, validation);
            let mut direct = Vec::new();
            setup.write_json(&mut direct).unwrap();
            assert_eq!(
                String::from_utf8(direct).unwrap(),
                serde_json::to_string(&setup).unwrap(),
                "{name}"
            );
        }
    }
}

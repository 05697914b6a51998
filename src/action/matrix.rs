//! A round as a job matrix: the batch the engine chose, cut to what one matrix may hold, each
//! entry named after its task; and the artifact name each worker job uploads under.

use serde::{Deserialize, Serialize};

use crate::pure::plan::model::Plan;

pub use crate::pure::pace::MAX_MATRIX_JOBS;

/// One job of the round's matrix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatrixEntry {
    pub task: usize,
    pub attempt: u32,
    /// The job's display name: `task 3: Add login form`.
    pub name: String,
}

/// The matrix (`{"include":[…]}`) and the tasks that wait for a later round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Matrix {
    pub include: Vec<MatrixEntry>,
    pub waiting: Vec<usize>,
    /// The round runs under `overlap: merge` (its tasks may share files): said in the JSON,
    /// so finalize integrates the matrix the way the plan job planned it — in each entry
    /// (`"overlap":"merge"`), since a matrix's other top-level keys are dimensions GitHub
    /// (and act) require to be lists.
    pub merge: bool,
}

impl Matrix {
    /// The first `limit` tasks of `batch` (in the engine's order); the rest wait.
    pub fn of(plan: &Plan, batch: &[usize], limit: usize) -> Matrix {
        let limit = limit.clamp(1, MAX_MATRIX_JOBS);
        let take = batch.len().min(limit);
        Matrix {
            include: batch[..take]
                .iter()
                .map(|&i| MatrixEntry {
                    task: i,
                    attempt: plan.tasks[i].attempts() + 1,
                    name: job_name(i, &plan.tasks[i].subject),
                })
                .collect(),
            waiting: batch[take..].to_vec(),
            merge: false,
        }
    }

    /// `{"include":[{"task":…,"attempt":…,"name":…}]}` on one line, as `$GITHUB_OUTPUT` wants.
    pub fn to_json(&self) -> String {
        let mut include = serde_json::json!(self.include);
        if self.merge
            && let Some(entries) = include.as_array_mut()
        {
            for e in entries {
                e["overlap"] = "merge".into();
            }
        }
        serde_json::json!({ "include": include }).to_string()
    }

    /// Whether the plan job planned the matrix `s` under `overlap: merge`.
    pub fn merges(s: &str) -> bool {
        serde_json::from_str::<serde_json::Value>(s).is_ok_and(|v| {
            v["include"]
                .as_array()
                .and_then(|entries| entries.first())
                .is_some_and(|e| e["overlap"] == "merge")
        })
    }

    /// Reads what [`Matrix::to_json`] wrote.
    pub fn parse(s: &str) -> Result<Vec<MatrixEntry>, String> {
        #[derive(Deserialize)]
        struct M {
            include: Vec<MatrixEntry>,
        }
        serde_json::from_str::<M>(s)
            .map(|m| m.include)
            .map_err(|e| format!("the matrix is not dagexec's {{\"include\":[…]}} JSON: {e}"))
    }
}

/// `task 3: Add login form`, cut to 100 characters (a job name shows in one line of the UI).
pub fn job_name(index: usize, subject: &str) -> String {
    let one_line = subject.split_whitespace().collect::<Vec<_>>().join(" ");
    let name = format!("task {index}: {one_line}");
    if name.chars().count() <= 100 {
        name
    } else {
        let mut s: String = name.chars().take(99).collect();
        s.push('…');
        s
    }
}

/// The artifact a worker job uploads: unique per workflow run, run attempt (a re-run job
/// uploads anew), task and attempt, and free of the characters artifact names refuse.
pub fn artifact_name(run_id: &str, run_attempt: &str, task: usize, attempt: u32) -> String {
    let clean = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect()
    };
    format!(
        "dagexec-{}-{}-task-{task}-attempt-{attempt}",
        clean(run_id),
        clean(run_attempt)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pure::plan::model::{Plan, Task};

    fn plan(n: usize) -> Plan {
        let mut p: Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "context": {}, "progress": {"completedTasks": []},
            "tasks": []
        }))
        .unwrap();
        for i in 0..n {
            let mut t: Task = serde_json::from_value(serde_json::json!({
                "subject": format!("Task  number\n{i}"), "status": "pending", "blockedBy": []
            }))
            .unwrap();
            if i == 1 {
                t.attempts = Some(2);
            }
            p.tasks.push(t);
        }
        p
    }

    #[test]
    fn a_batch_is_cut_to_the_matrix_limit_in_engine_order() {
        let p = plan(300);
        let batch: Vec<usize> = (0..300).rev().collect();
        let m = Matrix::of(&p, &batch, 1000);
        assert_eq!(m.include.len(), MAX_MATRIX_JOBS);
        assert_eq!(m.include[0].task, 299);
        assert_eq!(m.waiting.len(), 300 - MAX_MATRIX_JOBS);
        assert_eq!(m.waiting[0], 299 - MAX_MATRIX_JOBS);
        let small = Matrix::of(&p, &[1, 0], 1);
        assert_eq!(small.include.len(), 1);
        assert_eq!(small.waiting, vec![0]);
    }

    #[test]
    fn entries_carry_the_next_attempt_and_a_one_line_name() {
        let p = plan(3);
        let m = Matrix::of(&p, &[0, 1], 256);
        assert_eq!(
            m.to_json(),
            r#"{"include":[{"task":0,"attempt":1,"name":"task 0: Task number 0"},{"task":1,"attempt":3,"name":"task 1: Task number 1"}]}"#
        );
        assert_eq!(Matrix::parse(&m.to_json()).unwrap(), m.include);
        assert!(Matrix::parse("[]").unwrap_err().contains("include"));
        assert!(!Matrix::merges(&m.to_json()));
        let merged = Matrix { merge: true, ..m };
        assert!(Matrix::merges(&merged.to_json()));
        assert_eq!(Matrix::parse(&merged.to_json()).unwrap(), merged.include);
        // GitHub (and act) take a matrix's top-level keys besides `include` and `exclude` as
        // dimensions, each a list: the merge flag is in the entries.
        let v: serde_json::Value = serde_json::from_str(&merged.to_json()).unwrap();
        let keys: Vec<&String> = v.as_object().unwrap().keys().collect();
        assert_eq!(keys, ["include"], "{v}");
        assert_eq!(v["include"][1]["overlap"], "merge", "{v}");
    }

    #[test]
    fn long_names_are_cut() {
        let n = job_name(7, &"x".repeat(300));
        assert_eq!(n.chars().count(), 100);
        assert!(n.ends_with('…'));
    }

    #[test]
    fn artifact_names_are_safe() {
        let n = artifact_name("123", "2", 14, 3);
        assert_eq!(n, "dagexec-123-2-task-14-attempt-3");
        assert_eq!(
            artifact_name("1/2:3", "\"1", 0, 1),
            "dagexec-123-1-task-0-attempt-1"
        );
    }
}

//! Tasks indexed by file: each task's distinct file ids, and each file's tasks in ascending
//! plan order. Paths are compared in their one lexical form ([`crate::pure::paths::key`]), so
//! `src//./a` and `src/a` are one file. Linear in the plan's size; everything that asks "who
//! else touches this file" (the streamed matrix, the scheduler's locks) starts here.

use std::borrow::Cow;

use rustc_hash::FxHashMap;

use super::OverlapMatrix;
use crate::pure::plan::model::Plan;

/// Task → its distinct file ids; file id → the tasks touching it, ascending.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileIndex {
    task_files: OverlapMatrix,
    file_tasks: OverlapMatrix,
}

impl FileIndex {
    /// Indexes the create+modify files of every task.
    pub fn of(plan: &Plan) -> Self {
        let mut ids: FxHashMap<Cow<'_, str>, u32> = FxHashMap::default();
        let mut task_files = OverlapMatrix::empty(0);
        let mut counts: Vec<usize> = Vec::new();
        for task in &plan.tasks {
            let first = task_files.data.len();
            for f in task.files() {
                let key = if crate::pure::paths::is_clean(f) {
                    Cow::Borrowed(f.as_str())
                } else {
                    Cow::Owned(crate::pure::paths::key(f))
                };
                let next = ids.len() as u32;
                let id = *ids.entry(key).or_insert(next);
                if id as usize == counts.len() {
                    counts.push(0);
                }
                if !task_files.data[first..].contains(&id) {
                    task_files.data.push(id);
                    counts[id as usize] += 1;
                }
            }
            task_files.offsets.push(task_files.data.len());
        }
        let mut offsets = Vec::with_capacity(counts.len() + 1);
        let mut total = 0;
        for c in &counts {
            offsets.push(total);
            total += c;
        }
        offsets.push(total);
        let mut cursor = offsets.clone();
        let mut data = vec![0u32; total];
        for t in 0..plan.tasks.len() {
            for &f in task_files.row(t) {
                data[cursor[f as usize]] = t as u32;
                cursor[f as usize] += 1;
            }
        }
        FileIndex {
            task_files,
            file_tasks: OverlapMatrix { offsets, data },
        }
    }

    /// `n` tasks without files.
    pub fn empty(n: usize) -> Self {
        FileIndex {
            task_files: OverlapMatrix::empty(n),
            file_tasks: OverlapMatrix::empty(0),
        }
    }

    /// Number of tasks.
    pub fn tasks(&self) -> usize {
        self.task_files.len()
    }

    /// Number of distinct files.
    #[cfg(test)]
    pub fn files(&self) -> usize {
        self.file_tasks.len()
    }

    /// The task's distinct file ids.
    pub fn files_of(&self, task: usize) -> &[u32] {
        self.task_files.row(task)
    }

    /// The tasks touching a file, ascending.
    pub fn tasks_of(&self, file: u32) -> &[u32] {
        self.file_tasks.row(file as usize)
    }

    /// Whether the two tasks declare a common file.
    pub fn share(&self, a: usize, b: usize) -> bool {
        let fb = self.files_of(b);
        self.files_of(a).iter().any(|f| fb.contains(f))
    }
}

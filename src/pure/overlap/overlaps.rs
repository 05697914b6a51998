//! A plan's overlap matrices: what a v3 plan declares and what dagexec computes, for the
//! pre-flight report and for scheduling.

use crate::pure::graph::Dag;
use crate::pure::overlap::{Computed, Conflicts, FileIndex, OverlapMatrix, Rows};
use crate::pure::plan::model::Plan;

/// The overlap matrices of a plan: what the plan declares (v3) and what dagexec computes.
/// Linear in the plan: the computed matrix is made row by row when it is read
/// ([`Overlaps::reported`], [`Overlaps::missed_by_plan`]), and scheduling takes file locks
/// ([`Overlaps::for_scheduling`]).
#[derive(Debug, Clone)]
pub struct Overlaps {
    dag: Dag,
    index: FileIndex,
    /// v3: from the tasks' `fileOverlaps`; `None` for v2.
    pub declared: Option<OverlapMatrix>,
}

/// Conflicts dagexec found that a v3 plan's `fileOverlaps` miss: how many, and the first
/// ones (pairs `(i, j)`, `i < j`, ascending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Missed {
    pub count: usize,
    pub first: Vec<(usize, usize)>,
}

impl Missed {
    /// How many of the first pairs are kept.
    pub const KEPT: usize = 32;

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

impl Overlaps {
    /// Indexes the plan's files (and for v3 reads its declared matrix).
    pub fn of(plan: &Plan, dag: &Dag) -> Self {
        Overlaps {
            dag: dag.clone(),
            index: FileIndex::of(plan),
            declared: (plan.schema_version >= 3).then(|| OverlapMatrix::declared(plan)),
        }
    }

    /// The computed matrix, row by row.
    pub fn computed(&self) -> Computed<'_> {
        Computed::new(&self.index, &self.dag)
    }

    /// The seed's `fileOverlapMatrix`: v3 honours the plan's `fileOverlaps` (as the v3 seed
    /// extracts them); v2 is computed.
    pub fn reported(&self) -> Rows<'_> {
        match &self.declared {
            Some(d) => Rows::Held(d),
            None => Rows::Streamed(self.computed()),
        }
    }

    /// What scheduling respects: everything either side knows, as file locks.
    pub fn for_scheduling(&self) -> Conflicts {
        Conflicts::new(self.index.clone(), self.declared.clone())
    }

    /// v3: conflicts dagexec found that the plan's `fileOverlaps` miss.
    pub fn missed_by_plan(&self) -> Missed {
        let mut missed = Missed::default();
        let Some(d) = &self.declared else {
            return missed;
        };
        self.computed()
            .for_each_row(|i, row| {
                for &j in row {
                    if (j as usize) > i && !d.conflict(i, j as usize) {
                        missed.count += 1;
                        if missed.first.len() < Missed::KEPT {
                            missed.first.push((i, j as usize));
                        }
                    }
                }
                Ok::<(), std::convert::Infallible>(())
            })
            .unwrap_or_else(|e| match e {});
        missed
    }
}

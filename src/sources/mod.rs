//! Plan sources other than `.design/plan.json`: Spec Kit `tasks.md` (`speckit`), long-run
//! `PLAN.md` folders (`longrun`) and a GitHub issue's sub-issues (`issues`). Each reads its
//! format into the same plan model the engine runs; the files keep their source true as tasks
//! complete, the issues are closed by the pull request that completes them.

pub mod issues;
pub mod longrun;
pub mod speckit;

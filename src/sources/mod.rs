//! Plan sources other than `.design/plan.json`: Spec Kit `tasks.md` (`speckit`) and long-run
//! `PLAN.md` folders (`longrun`). Each reads its format into the same plan model the engine
//! runs, and keeps its source file true as tasks complete.

pub mod issues;
pub mod longrun;
pub mod speckit;

//! The jobs of the workflow `dagexec init` writes, one file each: `plan` (the round's matrix,
//! or the hand-over to the conductor), `work` (one attempt, task code inside), `finalize`
//! (commit the round, dispatch the next), `conduct` (eager: task runs dispatched and
//! committed as they arrive), `comment` and `steer` (`/execute` on the pull request; what they share with the
//! branch's other writers is [`crate::action::steering`]).

pub mod conduct;
pub mod finalize;
pub mod plan;
pub mod steer;
pub mod work;

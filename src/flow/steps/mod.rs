//! The steps around an attempt beyond the `/execute` seed, for the other two specifications: the
//! conductor's reviewer loop and the long-run executor's worker contract. Called from
//! [`super::attempt`] at three points — before the worker (the final prompt), after it (a
//! long-run worker's `OUTPUT_JSON` block), after judging (the reviewer) — and from the round
//! integration and the end of the run (the plan fields, the questions to the user).
//!
//! "Fresh tree": every attempt is a new worker process in a worktree reset to the base
//! (`git reset --hard` + `git clean -ffdx`). After a rejection of attempt 1 the rejected
//! changes are applied again in that tree, so attempt 2 fixes its predecessor's work (the
//! seed's "same implementer"); attempt 3, and the first attempt after the user's answer,
//! start from the clean tree with all the feedback (the seed's "fresh implementer"). Every
//! verdict is written to the plan file as soon as it is given, so a run killed between two
//! reviews resumes with all the feedback; a rejected attempt's changes are kept in memory
//! only: after an interruption the retry starts fresh. A long-run worker that stops to ask
//! keeps its work: it is committed with the round, and the attempt after the answer resumes
//! from its checkpoint. A long-run attempt that fails leaves its work and checkpoint for the
//! next attempt, and while a long-run worker runs, each checkpoint it writes is kept with the
//! tree it was written in (its commits and its uncommitted work), for a crash
//! ([`crate::sources::longrun::partial`]): the next attempt resumes "from the failed task", in that
//! tree, as the seed re-spawns it.
//!
//! One file per specification: `review` (the reviewer loop), `longrun` (the long-run worker
//! contract and checkpoints), `questions` (blocked tasks, the questions to the user, and the
//! plan fields recorded at integration). Here: the final prompt an attempt's worker gets.

pub(crate) mod longrun;
pub(crate) mod questions;
pub(crate) mod review;

use crate::edge::git::Worktree;
use crate::edge::lock::held;
use crate::flow::pool::{AttemptInput, Pool};
use crate::flow::steps::longrun::restore_partial;
use crate::flow::steps::review::with_feedback;
use crate::pure::review::NextTree;
use crate::sources::longrun::partial::Store;

/// The prompt the worker gets: the runner's prompt with a long-run task's resume state
/// filled in from the checkpoint in `wt`, then the reviewer feedback so far, then the user's
/// answer. Applies a rejected attempt's changes to `wt` when this attempt continues them, and
/// a long-run plan's kept partial work ([`restore_partial`]) otherwise.
pub(crate) fn prepare(input: &AttemptInput, wt: &Worktree, pool: &Pool, store: &Store) -> String {
    let mem = &pool.memory;
    let carry = held(&mem.carry).remove(&input.index);
    if carry.is_none() {
        restore_partial(input, wt, store);
    }
    let prompt = crate::sources::longrun::with_checkpoint(&input.task, wt.path(), &input.prompt);
    let history = mem.history(input.index, &input.task);
    let start = match carry {
        Some(patch) if crate::pure::review::start_for(input.attempt) == NextTree::Continue => {
            match wt.apply(&patch) {
                Ok(()) => NextTree::Continue,
                Err(e) => {
                    tracing::debug!(
                        "task {}: the rejected changes no longer apply ({e}); starting fresh",
                        input.index
                    );
                    NextTree::Fresh
                }
            }
        }
        _ => NextTree::Fresh,
    };
    with_feedback(&prompt, &input.task, &history, start)
}

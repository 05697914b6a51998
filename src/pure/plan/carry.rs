//! Carrying a run's state from an earlier generated plan to one read afresh from its source
//! (an edited `tasks.md`, a re-read parent issue): every source pairs its old and new tasks
//! by its own identity (ID and text, issue number), and the state moves the same way.

use super::model::{CompletedTask, Plan, Status, Task};

/// Carries the state of `old`'s tasks to `fresh` along `moved` (old task index → fresh task
/// index): a paired task that is not completed in `fresh` and not `held` keeps its status,
/// result, attempts and extra fields (reviews, questions), except the source's own field
/// `own`; a completed task keeps the summary it was completed with. Unpaired tasks start
/// afresh.
pub fn carry_state(
    fresh: &mut Plan,
    old: &Plan,
    moved: &[Option<usize>],
    own: &str,
    held: impl Fn(&Task) -> bool,
) {
    for (j, old_t) in old.tasks.iter().enumerate() {
        let Some(i) = moved.get(j).copied().flatten() else {
            continue;
        };
        let Some(new) = fresh.tasks.get_mut(i) else {
            continue;
        };
        if new.status == Status::Completed || held(old_t) {
            continue;
        }
        new.status = old_t.status;
        new.result.clone_from(&old_t.result);
        new.attempts = old_t.attempts;
        for (k, v) in &old_t.extra {
            if k != own {
                new.extra.insert(k.clone(), v.clone());
            }
        }
    }
    let mut progress = old.progress.clone();
    progress.completed_tasks = fresh
        .tasks
        .iter()
        .enumerate()
        .filter(|(_, t)| t.status == Status::Completed)
        .map(|(i, t)| {
            let kept = old
                .progress
                .completed_tasks
                .iter()
                .find(|c| moved.get(c.index).copied().flatten() == Some(i));
            let summary = kept.map_or_else(
                || t.result.clone().unwrap_or_default(),
                |c| c.summary.clone(),
            );
            CompletedTask {
                extra: kept.map(|c| c.extra.clone()).unwrap_or_default(),
                ..CompletedTask::new(i, summary)
            }
        })
        .collect();
    fresh.progress = progress;
}

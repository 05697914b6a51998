//! `overlap: merge` on Actions (issue 23): what a round's open record keeps between parts for
//! the tasks that ran in one matrix beside others on the same files.
//!
//! Under `merge` a round's unresolved tasks form one matrix (`Policy::Merge.for_scheduling`
//! keeps nothing apart; the matrix JSON's entries say `"overlap": "merge"`). Finalize, which holds the
//! write token and never runs task code, integrates the arrivals in plan order
//! (`jobs::finalize::merging`). An arrival whose paths (declared or changed) meet none of those
//! landed before it in this finalize, nor the chain below, lands as under `serial`; one that
//! meets them is merged three-way without landing (`git merge-tree`, trees only: no code
//! runs) onto the round's tree with the chain's earlier merged changes applied — a clean merge
//! joins the *chain* as a [`FollowUp::Recheck`] holding finalize's own merged patch, anything
//! else becomes a [`FollowUp::Rebase`].
//!
//! The chain is every `Recheck` of the record, in its order: each patch applies onto the
//! next part's base with the earlier ones applied, so k tasks on one file cost one follow-up
//! part, not k − 1. The next part's work job for a `Recheck` applies the earlier candidates'
//! patches and then its own on its base ([`FollowUp::before`]), judges its own change as an
//! attempt (the task's checks) and runs the checks of the tasks named. The next finalize lands
//! the longest prefix of the chain whose verdicts passed, in order, each as its own kept copy;
//! the first failure is rebased; the later ones were checked beside a change that does not
//! land, so their kept changes are merged again onto what landed and re-checked in the part
//! after. A `Rebase` runs the worker from the integrated tree with the local `## Rebase` prompt
//! section, uncounted; a rebase that cannot land either is a failed attempt. A `Rebase` sent
//! back beside candidates of the chain builds on them ([`FollowUp::built_on`]: the re-checks
//! recorded before it, up to the last one in its `onto`): its job applies their merged patches
//! first, and the next finalize reads its patch against that tree and lands it after them (or
//! merges it again onto what landed when one of them did not).

use serde::{Deserialize, Serialize};

use crate::pure::plan::model::Plan;

/// How large a merged patch the open-round record keeps (base64 in the plan file); a larger
/// clean merge is sent back as a rebase instead.
pub(crate) const MAX_KEPT_PATCH: usize = 256 << 10;

/// Candidates of the chain a rebase builds on, in order: (task, merged patch).
pub type BuiltOn = Vec<(usize, Vec<u8>)>;

/// What a task of the open round waits for besides an ordinary attempt (`merge` only).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase")]
pub enum FollowUp {
    /// Attempt `attempt` completed and merged cleanly onto the round's tree: the next part's
    /// work job re-checks `patch` (finalize's merge, a binary patch onto that part's base,
    /// base64) with the acceptance checks of `task` and of `checks`; no worker runs.
    #[serde(rename_all = "camelCase")]
    Recheck {
        task: usize,
        attempt: u32,
        patch: String,
        /// The landed tasks and earlier candidates of the chain whose files the merge touched
        /// (their checks run too).
        checks: Vec<usize>,
        /// The attempt was a rebase already: a failed re-check fails it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        rebased: bool,
    },
    /// Attempt `attempt` could not land (`why`: git's conflict, or the failed re-check): the
    /// next part runs the worker from the integrated tree, building on `onto`, as a rebase
    /// attempt that is not counted. At most one per task per integration.
    #[serde(rename_all = "camelCase")]
    Rebase {
        task: usize,
        attempt: u32,
        onto: Vec<usize>,
        why: String,
    },
}

impl FollowUp {
    pub fn task(&self) -> usize {
        match self {
            FollowUp::Recheck { task, .. } | FollowUp::Rebase { task, .. } => *task,
        }
    }

    /// The attempt it continues: a re-check or a rebase is not a new attempt, so the matrix
    /// entry (and the artifact's name) carries this number, not the task's attempts + 1.
    pub fn attempt(&self) -> u32 {
        match self {
            FollowUp::Recheck { attempt, .. } | FollowUp::Rebase { attempt, .. } => *attempt,
        }
    }

    /// The tasks it was sent back onto when it continues a rebase (a rebase, or the re-check
    /// of a rebase's merge), else `None`.
    pub fn rebase_onto(&self) -> Option<Vec<usize>> {
        match self {
            FollowUp::Recheck {
                checks,
                rebased: true,
                ..
            } => Some(checks.clone()),
            FollowUp::Rebase { onto, .. } => Some(onto.clone()),
            FollowUp::Recheck { .. } => None,
        }
    }

    /// A clean merge's record, or — when the patch is too large to keep in the plan — why
    /// it is rebased instead.
    pub fn recheck(
        task: usize,
        attempt: u32,
        patch: &[u8],
        checks: Vec<usize>,
        rebased: bool,
    ) -> Result<FollowUp, String> {
        if patch.len() > MAX_KEPT_PATCH {
            return Err(format!(
                "the merged change of task {task} is {} bytes, over the {MAX_KEPT_PATCH} a re-check keeps in the plan",
                patch.len()
            ));
        }
        use base64::Engine as _;
        Ok(FollowUp::Recheck {
            task,
            attempt,
            patch: base64::engine::general_purpose::STANDARD.encode(patch),
            checks,
            rebased,
        })
    }

    /// The follow-up the open round recorded in `plan` for `task`'s attempt `attempt`, or
    /// the one the conductor recorded on the task itself while it is in progress
    /// ([`FollowUp::on_task`]).
    pub fn of(plan: &Plan, task: usize, attempt: u32) -> Option<FollowUp> {
        if let Some(f) = plan
            .tasks
            .get(task)
            .and_then(Self::on_task)
            .filter(|f| f.task() == task && f.attempt() == attempt)
        {
            return Some(f);
        }
        let open: super::OpenRound =
            serde_json::from_value(plan.progress.extra.get(super::FIELD)?.clone()).ok()?;
        open.follow_up(task)
            .filter(|f| f.attempt() == attempt)
            .cloned()
    }

    /// What the conductor (`schedule: eager`) recorded on task `t` for its next run
    /// ([`crate::pure::plan::fields::FOLLOW_UP`]): only while the task is in progress, so a
    /// record left behind by a task put back to pending (`/execute retry`, an edit) is never
    /// taken for a later attempt's.
    pub fn on_task(t: &crate::pure::plan::model::Task) -> Option<FollowUp> {
        if t.status != crate::pure::plan::model::Status::InProgress {
            return None;
        }
        serde_json::from_value(t.extra.get(crate::pure::plan::fields::FOLLOW_UP)?.clone()).ok()
    }

    /// Records this follow-up on its task (the conductor's record, [`FollowUp::on_task`]).
    pub fn record_on(&self, plan: &mut Plan) {
        if let Some(t) = plan.tasks.get_mut(self.task()) {
            t.extra.insert(
                crate::pure::plan::fields::FOLLOW_UP.into(),
                serde_json::to_value(self).expect("a follow-up serialises"),
            );
        }
    }

    /// The merged patches of the chain's candidates before `task`'s re-check in the open
    /// round of `plan`, in order (what its job applies before its own; none without an open
    /// round, or for the conductor's follow-up on the task); `None` when one is unreadable.
    pub fn before(plan: &Plan, task: usize) -> Option<Vec<Vec<u8>>> {
        let Some(open) = Self::open_round(plan, task).ok()? else {
            return Some(Vec::new());
        };
        open.follow_ups
            .iter()
            .filter(|f| matches!(f, FollowUp::Recheck { .. }))
            .take_while(|f| f.task() != task)
            .map(FollowUp::patch)
            .collect()
    }

    /// The chain candidates a rebase of `task` builds on: the re-checks recorded before its
    /// `Rebase` in the open round of `plan`, up to the last one it was sent back beside (its
    /// `onto`), each with its merged patch — a prefix of the chain, as each patch applies onto
    /// the earlier ones. Empty without an open round, for the conductor's follow-up, or when
    /// it shares nothing with the chain; `None` when a patch is unreadable.
    pub fn built_on(plan: &Plan, task: usize) -> Option<BuiltOn> {
        let Some(open) = Self::open_round(plan, task).ok()? else {
            return Some(Vec::new());
        };
        Self::built_on_in(&open, task)
    }

    /// The open round's record in `plan` that `task`'s follow-up continues: `None` without
    /// one, or for the conductor's follow-up on the task; `Err` when unreadable.
    fn open_round(plan: &Plan, task: usize) -> Result<Option<super::OpenRound>, ()> {
        if plan.tasks.get(task).and_then(Self::on_task).is_some() {
            return Ok(None);
        }
        let Some(record) = plan.progress.extra.get(super::FIELD) else {
            return Ok(None);
        };
        serde_json::from_value::<super::OpenRound>(record.clone())
            .map(Some)
            .map_err(drop)
    }

    /// [`FollowUp::built_on`] in the open round's record `open`.
    pub fn built_on_in(open: &super::OpenRound, task: usize) -> Option<BuiltOn> {
        let Some(at) = open
            .follow_ups
            .iter()
            .position(|f| matches!(f, FollowUp::Rebase { task: t, .. } if *t == task))
        else {
            return Some(Vec::new());
        };
        let FollowUp::Rebase { onto, .. } = &open.follow_ups[at] else {
            return Some(Vec::new());
        };
        let chain: Vec<&FollowUp> = open.follow_ups[..at]
            .iter()
            .filter(|f| matches!(f, FollowUp::Recheck { .. }))
            .collect();
        let Some(last) = chain.iter().rposition(|f| onto.contains(&f.task())) else {
            return Some(Vec::new());
        };
        chain[..=last]
            .iter()
            .map(|f| Some((f.task(), f.patch()?)))
            .collect()
    }

    /// A `Recheck`'s patch bytes (`None` for a rebase, or a record that is not base64: the
    /// plan was edited by hand, and the task then runs an ordinary attempt).
    pub fn patch(&self) -> Option<Vec<u8>> {
        use base64::Engine as _;
        match self {
            FollowUp::Recheck { patch, .. } => base64::engine::general_purpose::STANDARD
                .decode(patch)
                .ok()
                .filter(|p| p.len() <= MAX_KEPT_PATCH),
            FollowUp::Rebase { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_follow_up_keeps_its_attempt_and_a_bounded_patch() {
        let r = FollowUp::recheck(2, 1, b"diff --git a/a b/a\n\xff\n", vec![0], false).unwrap();
        assert_eq!((r.task(), r.attempt()), (2, 1));
        assert_eq!(r.patch().unwrap(), b"diff --git a/a b/a\n\xff\n");
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(json["kind"], "recheck");
        assert_eq!(serde_json::from_value::<FollowUp>(json).unwrap(), r);
        let big = vec![b'x'; MAX_KEPT_PATCH + 1];
        assert!(
            FollowUp::recheck(2, 1, &big, vec![], false)
                .unwrap_err()
                .contains("over")
        );
        let hand_edited = FollowUp::Recheck {
            task: 2,
            attempt: 1,
            patch: "not base64!".into(),
            checks: vec![],
            rebased: false,
        };
        assert_eq!(hand_edited.patch(), None);
        let rebase = FollowUp::Rebase {
            task: 1,
            attempt: 2,
            onto: vec![0],
            why: "conflict in a.txt".into(),
        };
        assert_eq!(rebase.patch(), None);
        assert_eq!(rebase.attempt(), 2);
    }

    #[test]
    fn a_recheck_applies_the_chains_earlier_merges_first() {
        let mut plan: Plan = serde_json::from_value(serde_json::json!({
            "schemaVersion": 2, "goal": "g", "tasks": []
        }))
        .unwrap();
        // No open round: nothing before it.
        assert_eq!(FollowUp::before(&plan, 2), Some(Vec::new()));
        let open = super::super::OpenRound {
            round: 1,
            tasks: vec![0, 1, 2, 3],
            parts: 1,
            follow_ups: vec![
                FollowUp::recheck(1, 1, b"one", vec![0], false).unwrap(),
                FollowUp::Rebase {
                    task: 3,
                    attempt: 1,
                    onto: vec![0],
                    why: "conflict".into(),
                },
                FollowUp::recheck(2, 1, b"two", vec![0, 1], false).unwrap(),
            ],
        };
        open.write(&mut plan);
        assert_eq!(FollowUp::before(&plan, 1), Some(Vec::new()));
        assert_eq!(FollowUp::before(&plan, 2), Some(vec![b"one".to_vec()]));
        // Task 3's rebase was sent back beside task 0 (landed) only: it builds on no candidate.
        assert_eq!(FollowUp::built_on(&plan, 3), Some(Vec::new()));
    }

    #[test]
    fn a_rebase_sent_back_beside_a_candidate_builds_on_the_chain_up_to_it() {
        let rebase = |task, onto: Vec<usize>| FollowUp::Rebase {
            task,
            attempt: 1,
            onto,
            why: "conflict".into(),
        };
        let open = super::super::OpenRound {
            round: 1,
            tasks: vec![0, 1, 2, 3, 4, 5],
            parts: 1,
            follow_ups: vec![
                FollowUp::recheck(1, 1, b"one", vec![0], false).unwrap(),
                FollowUp::recheck(2, 1, b"two", vec![0, 1], false).unwrap(),
                rebase(3, vec![0, 1]),
                FollowUp::recheck(4, 1, b"four", vec![0, 1, 2], false).unwrap(),
                rebase(5, vec![2]),
            ],
        };
        // Task 3 met candidate 1 (not 2, recorded before it too): the chain up to 1.
        assert_eq!(
            FollowUp::built_on_in(&open, 3),
            Some(vec![(1, b"one".to_vec())])
        );
        // Task 5 met candidate 2: the chain up to 2; 4 came after the candidate it met.
        assert_eq!(
            FollowUp::built_on_in(&open, 5),
            Some(vec![(1, b"one".to_vec()), (2, b"two".to_vec())])
        );
        assert_eq!(FollowUp::built_on_in(&open, 4), Some(Vec::new()));
    }
}

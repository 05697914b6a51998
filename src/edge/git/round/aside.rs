//! `overlap: merge` on the Action: a merge tried beside the round, never landing. Finalize
//! merges a chain of candidates cumulatively (each onto the round's tree with the earlier
//! candidates' merged changes applied), and after a candidate of a chain is rejected merges
//! the later ones again from their kept changes (a cherry-pick: their merge base is the tree
//! their change was made on). Trees only, in a scratch index of its own
//! (`<git-common-dir>/dagexec/aside-index`), so the round's own index is never touched.

use super::super::{GitError, PatchRef, Repo};
use super::{Merged, RoundIndex};

impl Repo {
    /// `patch`, made on `base` (a commit or tree) with the patches `made_on` applied in order,
    /// merged three-way onto commit `onto` with the patches `chain` applied in order. A
    /// clean merge's patch applies onto that tree; a chain patch that does not apply is
    /// reported as a conflict (what it says is git's account), never as an error.
    pub fn merge_aside(
        &self,
        onto: &str,
        chain: &[PatchRef<'_>],
        base: &str,
        made_on: &[PatchRef<'_>],
        patch: PatchRef<'_>,
    ) -> Result<Merged, GitError> {
        let aside = RoundIndex::read(&self.root, &self.dagexec_dir(), "aside-index", base)?;
        let base_tree = match aside.apply_all(made_on) {
            Ok(()) => aside.write_tree()?,
            Err(c) => return Ok(c),
        };
        drop(aside);
        let aside = RoundIndex::read(&self.root, &self.dagexec_dir(), "aside-index", onto)?;
        if let Err(c) = aside.apply_all(chain) {
            return Ok(c);
        }
        aside.merge_patch(&base_tree, patch)
    }

    /// The tree of `at` (a commit or tree) with `patches` applied in order (`None`: one does
    /// not apply): what a job built on the chain's merged changes started from, so its patch
    /// is read against it.
    pub fn tree_with_chain(
        &self,
        at: &str,
        patches: &[PatchRef<'_>],
    ) -> Result<Option<String>, GitError> {
        let aside = RoundIndex::read(&self.root, &self.dagexec_dir(), "aside-index", at)?;
        if aside.apply_all(patches).is_err() {
            return Ok(None);
        }
        aside.write_tree().map(Some)
    }

    /// Of `landed`, applied onto `at` in order, the first after which `patch` no longer
    /// applies (`Some(n)`, its position); `None` when it does not apply to `at` itself, or
    /// applies after all of them. What a patch that failed on the round's index failed on,
    /// worked out in a scratch index of its own (`in-the-way-index`: the round's is kept).
    pub fn first_in_the_way(
        &self,
        at: &str,
        landed: &[PatchRef<'_>],
        patch: PatchRef<'_>,
    ) -> Result<Option<usize>, GitError> {
        let aside = RoundIndex::read(&self.root, &self.dagexec_dir(), "in-the-way-index", at)?;
        if aside.check_patch(patch).is_err() {
            return Ok(None);
        }
        for (n, p) in landed.iter().enumerate() {
            if aside.apply_patch(*p).is_err() {
                return Ok(None);
            }
            if aside.check_patch(patch).is_err() {
                return Ok(Some(n));
            }
        }
        Ok(None)
    }
}

impl RoundIndex {
    /// Applies `patches` in order; the first that does not apply, as a conflict.
    fn apply_all(&self, patches: &[PatchRef<'_>]) -> Result<(), Merged> {
        for (n, p) in patches.iter().enumerate() {
            self.apply_patch(*p).map_err(|e| Merged::Conflict {
                files: e.paths.clone(),
                account: format!(
                    "the merged change {} of the chain no longer applies: {}",
                    n + 1,
                    e.message
                ),
            })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::*;
    use super::*;

    const BASE: &str = "a\n1\n2\n3\n4\nb\n";

    /// The patch that turns `list.txt` at `base` into `content` (made in a worktree).
    fn change(f: &Fixture, base: &str, name: &str, content: &str) -> Vec<u8> {
        let wt = f.repo.add_worktree(base, name).unwrap();
        write(wt.path(), "list.txt", content);
        wt.changes().unwrap().patch.read_to_vec()
    }

    fn clean(m: Merged) -> Vec<u8> {
        match m {
            Merged::Clean { patch, .. } => patch,
            Merged::Conflict { account, .. } => panic!("conflict: {account}"),
        }
    }

    #[test]
    fn a_chain_merges_cumulatively_and_a_later_candidate_is_cherry_picked_without_a_rejected_one() {
        let f = Fixture::new();
        f.write("list.txt", BASE);
        let base = f.commit_all("list");
        let one = change(&f, &base, "w1", "a=1\n1\n2\n3\n4\nb\n");
        let two = change(&f, &base, "w2", "a\n1\n2\n3\n4\nb=2\n");
        let three = change(&f, &base, "w3", "a\n1\n2x\n3\n4\nb\n");
        // Two onto the base with one's change: the patch holds only two's line.
        let p2 = clean(
            f.repo
                .merge_aside(&base, &[(&one).into()], &base, &[], (&two).into())
                .unwrap(),
        );
        // Three onto that chain.
        let p3 = clean(
            f.repo
                .merge_aside(
                    &base,
                    &[(&one).into(), (&p2).into()],
                    &base,
                    &[],
                    (&three).into(),
                )
                .unwrap(),
        );
        // Two is rejected: three, kept as merged onto base+one+two, merged again onto
        // base+one alone holds no `b=2`.
        let again = clean(
            f.repo
                .merge_aside(
                    &base,
                    &[(&one).into()],
                    &base,
                    &[(&one).into(), (&p2).into()],
                    (&p3).into(),
                )
                .unwrap(),
        );
        let text = String::from_utf8_lossy(&again);
        assert!(text.contains("+2x") && !text.contains("b=2"), "{text}");
        // A chain patch that no longer applies is a conflict, not an error.
        let Merged::Conflict { account, .. } = f
            .repo
            .merge_aside(
                &base,
                &[(&p2).into(), (&p2).into()],
                &base,
                &[],
                (&three).into(),
            )
            .unwrap()
        else {
            panic!("a conflict")
        };
        assert!(account.contains("no longer applies"), "{account}");
        // The tree a rebase built on the chain started from; none when the chain breaks.
        let on = f
            .repo
            .tree_with_chain(&base, &[(&one).into(), (&p2).into()])
            .unwrap()
            .unwrap();
        let listed = f.git(&["show", &format!("{on}:list.txt")]);
        assert_eq!(listed.trim_end(), "a=1\n1\n2\n3\n4\nb=2");
        assert_eq!(
            f.repo
                .tree_with_chain(&base, &[(&p2).into(), (&p2).into()])
                .unwrap(),
            None
        );
    }
}

//! `overlap: merge`: a patch made at another base merged three-way into the round's index
//! (`git merge-tree --write-tree --merge-base`, trees only, nothing checked out, no ref
//! moved). The base with the patch is built in a scratch index of its own; a clean merge
//! leaves the merged tree in the round's index and returns the change it makes there as a
//! binary patch (what the round rebuilds from), a conflict returns git's own account of it.

use super::super::changed_between;
use super::super::cmd::git;
use super::super::{GitError, PatchRef};
use super::RoundIndex;

/// What came of merging a patch into the round's index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Merged {
    /// The index holds the merge now.
    Clean {
        /// Paths the merge changes in the index (sorted).
        changed: Vec<String>,
        /// That change as a binary patch that applies onto the index as it was.
        patch: Vec<u8>,
        /// Whether the index had moved past the patch's base in a path the merge changes
        /// (else the patch applied as it is, as under `serial`).
        combined: bool,
    },
    /// git could not merge it; the index is unchanged.
    Conflict {
        /// The conflicted paths (sorted).
        files: Vec<String>,
        /// git's messages (`CONFLICT (content): …`), and each conflicted text file as the
        /// merge left it, with its markers (bounded).
        account: String,
    },
}

/// How much of one conflicted file an account shows.
const SHOWN_PER_FILE: usize = 3000;
/// How many conflicted files an account shows.
const SHOWN_FILES: usize = 4;

impl RoundIndex {
    /// Merges `patch`, made at commit `base`, into the index (`base`'s tree as the merge base,
    /// the index's tree as ours, `base` with the patch as theirs).
    pub fn merge_patch(&self, base: &str, patch: PatchRef<'_>) -> Result<Merged, GitError> {
        let ours = self.write_tree()?;
        let base_tree = self.tree_of(base)?;
        let theirs = self.tree_with(base, patch)?;
        if ours == base_tree {
            return self.take(&ours, &theirs, false);
        }
        let (clean, out) = git(&self.root, "merge-tree")
            .config("merge.conflictStyle=merge")
            .args([
                "merge-tree",
                "--write-tree",
                "--name-only",
                "--messages",
                &format!("--merge-base={base_tree}"),
                &ours,
                &theirs,
            ])
            .answer()?;
        let out = String::from_utf8_lossy(&out);
        if !clean {
            return Ok(self.conflict(&out));
        }
        let merged = out.lines().next().unwrap_or_default();
        let mut taken = self.take(&ours, merged, true)?;
        // Combined only where the tree had moved in a path this merge changes: a merge into
        // paths nothing else changed since `base` is the patch as it is.
        if let Merged::Clean {
            changed, combined, ..
        } = &mut taken
        {
            let moved = changed_between(&self.root, &base_tree, &ours)?;
            *combined = changed.iter().any(|p| moved.contains(p));
        }
        Ok(taken)
    }

    /// The tree of commit `base` with `patch` applied, built in a scratch index.
    fn tree_with(&self, base: &str, patch: PatchRef<'_>) -> Result<String, GitError> {
        let scratch = RoundIndex::read(&self.root, &self.dir, "merge-index", base)?;
        if !patch.is_blank() {
            scratch.apply_cached(patch)?;
        }
        scratch.write_tree()
    }

    /// Puts `tree` in the index, returning what it changes against `ours`.
    fn take(&self, ours: &str, tree: &str, combined: bool) -> Result<Merged, GitError> {
        let changed = changed_between(&self.root, ours, tree)?;
        let patch = git(&self.root, "diff-tree -p")
            .args([
                "diff-tree",
                "-p",
                "-r",
                "--no-renames",
                "--binary",
                "--full-index",
                "--no-color",
                "--no-ext-diff",
                "--no-textconv",
                ours,
                tree,
            ])
            .run()?;
        self.git("read-tree").args(["read-tree", tree]).run()?;
        Ok(Merged::Clean {
            changed,
            patch,
            combined,
        })
    }

    /// A conflict from `git merge-tree --name-only --messages`' output: the tree, the
    /// conflicted paths, a blank line, the messages.
    fn conflict(&self, out: &str) -> Merged {
        let mut lines = out.lines();
        let tree = lines.next().unwrap_or_default().to_string();
        let mut files: Vec<String> = lines
            .by_ref()
            .take_while(|l| !l.is_empty())
            .map(String::from)
            .collect();
        files.sort();
        files.dedup();
        let mut account: String = lines.collect::<Vec<_>>().join("\n");
        for f in files.iter().take(SHOWN_FILES) {
            let shown = git(&self.root, "cat-file")
                .args(["cat-file", "-p", &format!("{tree}:{f}")])
                .run();
            let Ok(bytes) = shown else { continue };
            if bytes.contains(&0) {
                continue;
            }
            let body = String::from_utf8_lossy(&bytes);
            let cut: String = body.chars().take(SHOWN_PER_FILE).collect();
            account.push_str(&format!("\n\n{f} as the merge left it:\n{cut}"));
            if cut.len() < body.len() {
                account.push_str("\n[…]");
            }
        }
        Merged::Conflict { files, account }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::tests::*;
    use super::*;

    /// A change made at `base` in a worktree of its own: `list.txt` written as `content`.
    fn change(f: &Fixture, base: &str, name: &str, content: &str) -> Vec<u8> {
        let wt = f.repo.add_worktree(base, name).unwrap();
        write(wt.path(), "list.txt", content);
        wt.changes().unwrap().patch.read_to_vec()
    }

    const BASE: &str = "a\n1\n2\n3\n4\nb\n";

    #[test]
    fn a_patch_at_the_indexs_own_base_applies_as_it_is() {
        let f = Fixture::new();
        f.write("list.txt", BASE);
        let base = f.commit_all("list");
        let patch = change(&f, &base, "w0", "a=0\n1\n2\n3\n4\nb\n");
        let index = f.repo.round_index().unwrap();
        let Merged::Clean {
            changed, combined, ..
        } = index.merge_patch(&base, (&patch).into()).unwrap()
        else {
            panic!("clean")
        };
        assert_eq!((changed, combined), (vec!["list.txt".to_string()], false));
    }

    #[test]
    fn changes_to_different_lines_merge_and_the_returned_patch_rebuilds_the_merge() {
        let f = Fixture::new();
        f.write("list.txt", BASE);
        let base = f.commit_all("list");
        let top = change(&f, &base, "w0", "a=0\n1\n2\n3\n4\nb\n");
        let bottom = change(&f, &base, "w1", "a\n1\n2\n3\n4\nb=1\n");
        let index = f.repo.round_index().unwrap();
        index.apply_patch(&top).unwrap();
        let Merged::Clean {
            changed,
            patch,
            combined,
        } = index.merge_patch(&base, (&bottom).into()).unwrap()
        else {
            panic!("clean")
        };
        assert_eq!((changed, combined), (vec!["list.txt".to_string()], true));
        assert_eq!(
            index.read_entry("list.txt").unwrap().unwrap().1,
            b"a=0\n1\n2\n3\n4\nb=1\n"
        );
        // The patch goes from the index as it was to the merge.
        let again = f.repo.round_index().unwrap();
        again.apply_patch(&top).unwrap();
        again.apply_patch(&patch).unwrap();
        assert_eq!(
            again.read_entry("list.txt").unwrap().unwrap().1,
            b"a=0\n1\n2\n3\n4\nb=1\n"
        );
    }

    /// A tree that moved only in other paths since the patch's base combines nothing: the
    /// merge is the patch as it is (no second run of checks follows, as under `serial`).
    #[test]
    fn a_merge_into_paths_nothing_else_changed_is_not_combined() {
        let f = Fixture::new();
        f.write("list.txt", BASE);
        f.write("other.txt", "x\n");
        let base = f.commit_all("two files");
        let wt = f.repo.add_worktree(&base, "w0").unwrap();
        write(wt.path(), "other.txt", "y\n");
        let other = wt.changes().unwrap().patch.read_to_vec();
        let mine = change(&f, &base, "w1", "a=0\n1\n2\n3\n4\nb\n");
        let index = f.repo.round_index().unwrap();
        index.apply_patch(&other).unwrap();
        let Merged::Clean {
            changed, combined, ..
        } = index.merge_patch(&base, (&mine).into()).unwrap()
        else {
            panic!("clean")
        };
        assert_eq!((changed, combined), (vec!["list.txt".to_string()], false));
        assert_eq!(index.read_entry("other.txt").unwrap().unwrap().1, b"y\n");
    }

    #[test]
    fn the_same_line_changed_twice_is_a_conflict_that_leaves_the_index_alone() {
        let f = Fixture::new();
        f.write("list.txt", BASE);
        let base = f.commit_all("list");
        let one = change(&f, &base, "w0", "a=0\n1\n2\n3\n4\nb\n");
        let two = change(&f, &base, "w1", "a=1\n1\n2\n3\n4\nb\n");
        let index = f.repo.round_index().unwrap();
        index.apply_patch(&one).unwrap();
        let Merged::Conflict { files, account } = index.merge_patch(&base, (&two).into()).unwrap()
        else {
            panic!("a conflict")
        };
        assert_eq!(files, ["list.txt"]);
        assert!(
            account.contains("CONFLICT (content): Merge conflict in list.txt"),
            "{account}"
        );
        assert!(
            account.contains("<<<<<<<") && account.contains("a=1"),
            "{account}"
        );
        assert_eq!(
            index.read_entry("list.txt").unwrap().unwrap().1,
            b"a=0\n1\n2\n3\n4\nb\n"
        );
    }
}

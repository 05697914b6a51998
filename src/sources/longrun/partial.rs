//! A long-run plan's work between its attempts (the seed's "Re-spawn subagent from failed
//! task"): what an attempt left — its changes against the base and its checkpoint file — kept
//! in the repository's git directory (`<git-common-dir>/dagexec/checkpoints/`), outside every
//! worktree, so that the next attempt, in this run or after a crash, starts from it instead of
//! from Task 1. Written by dagexec only, each file replaced atomically.

use std::path::{Path, PathBuf};

/// What an attempt left for the next one.
#[derive(Debug, Clone)]
pub struct Partial {
    /// The commit `patch` applies to.
    pub base: String,
    /// The attempt's changes (its commits, and for a finished attempt everything in its tree),
    /// read from its file where it lies.
    pub patch: crate::edge::git::Patch,
    /// The checkpoint file's text when it is not in `patch` (written after the last commit).
    pub checkpoint: Option<String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Meta {
    base: String,
    #[serde(default)]
    checkpoint: Option<String>,
}

/// The store of one repository.
#[derive(Debug, Clone)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// The store under `common_dir` (the repository's common git directory).
    pub fn new(common_dir: &Path) -> Store {
        Store {
            dir: common_dir.join("dagexec").join("checkpoints"),
        }
    }

    /// The file name of a plan's entry: its checkpoint path with every character other than
    /// ASCII letters, digits and `-` replaced by `_` (no separator, no `.`, so no `..`).
    fn key(checkpoint_rel: &str) -> String {
        checkpoint_rel
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect()
    }

    fn paths(&self, checkpoint_rel: &str) -> (PathBuf, PathBuf) {
        let key = Self::key(checkpoint_rel);
        (
            self.dir.join(format!("{key}.patch")),
            self.dir.join(format!("{key}.json")),
        )
    }

    /// Keeps `partial` for the plan whose checkpoint file is `checkpoint_rel`, replacing what
    /// was kept before.
    pub fn save(&self, checkpoint_rel: &str, partial: &Partial) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let (patch, meta) = self.paths(checkpoint_rel);
        // The patch first: an entry is its `.json`, written last.
        let _ = std::fs::remove_file(&meta);
        let root = crate::edge::fsx::default_root(&patch);
        crate::edge::fsx::write_with(root, &patch, |f| partial.patch.borrowed().write_to(f))?;
        let m = Meta {
            base: partial.base.clone(),
            checkpoint: partial.checkpoint.clone(),
        };
        let text = serde_json::to_vec(&m).expect("the entry serialises");
        crate::edge::plan_file::write_atomic(&meta, &text)
    }

    /// What is kept for the plan, if anything (an unreadable entry counts as none).
    pub fn load(&self, checkpoint_rel: &str) -> Option<Partial> {
        let (patch, meta) = self.paths(checkpoint_rel);
        let m: Meta = serde_json::from_slice(&std::fs::read(meta).ok()?).ok()?;
        Some(Partial {
            base: m.base,
            patch: {
                let f = std::fs::File::open(patch).ok()?;
                let len = f.metadata().ok()?.len();
                crate::edge::git::PatchFile::new(f, len).into()
            },
            checkpoint: m.checkpoint,
        })
    }

    /// Forgets the plan's entry (its work was committed, or it completed).
    pub fn remove(&self, checkpoint_rel: &str) {
        let (patch, meta) = self.paths(checkpoint_rel);
        let _ = std::fs::remove_file(meta);
        let _ = std::fs::remove_file(patch);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn save_load_replace_remove() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let rel = ".long-run/plans/01-CHECKPOINT.json";
        // What is kept, in memory, to compare.
        let seen = |p: Option<Partial>| p.map(|p| (p.base, p.patch.read_to_vec(), p.checkpoint));
        assert_eq!(seen(store.load(rel)), None);
        let p = Partial {
            base: "abc".into(),
            patch: b"diff --git a/x b/x\n".to_vec().into(),
            checkpoint: Some("{\"last_completed_task\": 1}".into()),
        };
        store.save(rel, &p).unwrap();
        assert_eq!(seen(store.load(rel)), seen(Some(p.clone())));
        let q = Partial {
            checkpoint: None,
            ..p
        };
        store.save(rel, &q).unwrap();
        assert_eq!(seen(store.load(rel)), seen(Some(q)));
        assert_eq!(seen(store.load(".long-run/plans/02-CHECKPOINT.json")), None);
        store.remove(rel);
        assert_eq!(seen(store.load(rel)), None);
        assert_eq!(
            Store::key("../a/b.json"),
            "___a_b_json",
            "no separator or parent in a key"
        );
    }
}

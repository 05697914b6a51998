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

/// The longest entry name kept whole (all ASCII); a file name may hold 255 bytes.
const NAME_MAX: usize = 150;

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

    /// The file name of a plan's entry: its checkpoint path with every byte other than ASCII
    /// letters, digits, `-` and `_` written `.XX` (hex) — one name per path, no separator, and
    /// a `.` always before two digits, so no `..`. Past [`NAME_MAX`] bytes it is cut there and
    /// the whole path's hash follows a `~` (which no short name holds), so the name, its
    /// suffix and a temporary file's stay within what a file system takes.
    fn name(checkpoint_rel: &str) -> String {
        let name: String = checkpoint_rel
            .bytes()
            .map(|b| match b {
                b'-' | b'_' => char::from(b).to_string(),
                _ if b.is_ascii_alphanumeric() => char::from(b).to_string(),
                _ => format!(".{b:02x}"),
            })
            .collect();
        if name.len() <= NAME_MAX {
            return name;
        }
        let hash = crate::pure::hash::fnv1a(checkpoint_rel.as_bytes());
        format!("{}~{hash:016x}", &name[..NAME_MAX])
    }

    /// The name an earlier dagexec gave the entry, read when it is the only one (a run
    /// upgraded mid-way): every character other than ASCII letters, digits and `-` was `_`,
    /// which made `a.b` and `a_b` one entry. (No name of [`Store::name`]'s for a path with a
    /// character this replaces is one of these: they have no `.`.)
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

    /// The entry's patch and `.json` under the name `key`.
    fn paths(&self, key: &str) -> (PathBuf, PathBuf) {
        (
            self.dir.join(format!("{key}.patch")),
            self.dir.join(format!("{key}.json")),
        )
    }

    /// Keeps `partial` for the plan whose checkpoint file is `checkpoint_rel`, replacing what
    /// was kept before.
    pub fn save(&self, checkpoint_rel: &str, partial: &Partial) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        // The patch first: an entry is its `.json`, written last. What was kept goes first,
        // under either name: a crash half-way leaves no entry, never an older one.
        self.remove(checkpoint_rel);
        let (patch, meta) = self.paths(&Self::name(checkpoint_rel));
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
        let (patch, meta) = [Self::name(checkpoint_rel), Self::key(checkpoint_rel)]
            .into_iter()
            .map(|key| self.paths(&key))
            .find(|(_, meta)| meta.exists())?;
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
        for key in [Self::name(checkpoint_rel), Self::key(checkpoint_rel)] {
            let (patch, meta) = self.paths(&key);
            let _ = std::fs::remove_file(meta);
            let _ = std::fs::remove_file(patch);
        }
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

    /// A long checkpoint path (each byte but a letter or digit three in the name) is kept
    /// under a name the file system takes, and two that differ only past where the name is
    /// cut keep their own entries.
    #[test]
    fn a_long_checkpoint_path_is_kept_and_stays_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let deep = "a/".repeat(60);
        let rel = |n: u32| format!("{deep}{n}/plans/01-CHECKPOINT.json");
        for n in [1, 2] {
            let kept = Partial {
                base: format!("base {n}"),
                patch: Vec::new().into(),
                checkpoint: None,
            };
            store.save(&rel(n), &kept).unwrap();
        }
        for n in [1, 2] {
            let base = store.load(&rel(n)).map(|p| p.base);
            assert_eq!(base, Some(format!("base {n}")));
        }
        store.remove(&rel(1));
        assert!(store.load(&rel(1)).is_none());
        assert!(store.load(&rel(2)).is_some());
    }

    /// Two long-run folders whose checkpoint paths differ only by `.` and `_` keep two
    /// entries: one's progress never replaces the other's.
    #[test]
    fn paths_that_differ_by_a_dot_or_an_underscore_keep_their_own_entries() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::new(dir.path());
        let kept = |base: &str| Partial {
            base: base.into(),
            patch: Vec::new().into(),
            checkpoint: None,
        };
        store
            .save("a.b/plans/01-CHECKPOINT.json", &kept("dot"))
            .unwrap();
        store
            .save("a_b/plans/01-CHECKPOINT.json", &kept("underscore"))
            .unwrap();
        let base = |rel: &str| store.load(rel).map(|p| p.base);
        assert_eq!(base("a.b/plans/01-CHECKPOINT.json").as_deref(), Some("dot"));
        store.remove("a_b/plans/01-CHECKPOINT.json");
        assert_eq!(base("a.b/plans/01-CHECKPOINT.json").as_deref(), Some("dot"));
        // An entry an earlier dagexec kept, under its name then, is read and removed.
        let rel = ".long-run/plans/02-CHECKPOINT.json";
        let (patch, meta) = store.paths("_long-run_plans_02-CHECKPOINT_json");
        std::fs::write(patch, "").unwrap();
        std::fs::write(&meta, r#"{"base": "earlier"}"#).unwrap();
        assert_eq!(base(rel).as_deref(), Some("earlier"));
        // Kept again, under the name of now: the earlier one is gone, so a crash in a later
        // save never brings it back.
        store.save(rel, &kept("now")).unwrap();
        assert!(!meta.exists());
        assert_eq!(base(rel).as_deref(), Some("now"));
        store.remove(rel);
        assert_eq!(base(rel), None);
    }
}

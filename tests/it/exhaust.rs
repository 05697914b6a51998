//! What a worker can exhaust fails its own task, never the run: a change too large to
//! integrate is refused before git stores it, and a disk that fills while a task's change is
//! staged fails that attempt while the other tasks land.

use std::path::Path;
use std::time::Duration;

use crate::common;
use common::local::{local, plan_or_done, simple_plan};
use common::repo;

/// Task 0 writes `a.txt` and, on its attempts, whatever `$TASK0` says; task 1 writes `b.txt`.
const WORKER: &str = r#"case "$DAGEXEC_TASK_INDEX" in
  0) echo a > a.txt; sh -c "$TASK0" ;;
  1) echo b > b.txt ;;
esac
echo "COMPLETED: wrote it""#;

fn two_tasks() -> tempfile::TempDir {
    let p = simple_plan(&[("A", &[], &["a.txt"], &[]), ("B", &[], &["b.txt"], &[])]);
    repo(&p, &[])
}

fn result_of(dir: &Path, task: usize) -> String {
    plan_or_done(dir)["tasks"][task]["result"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_change_over_the_cap_is_refused_and_never_stored() {
    let dir = two_tasks();
    let ran = local(dir.path())
        .script(WORKER)
        .env("TASK0", "head -c 105000000 /dev/zero > big.bin")
        .timeout("60s")
        .run_within(Duration::from_secs(300));
    let text = ran.text();
    assert_eq!(ran.code(), Some(1), "{text}");
    let p = plan_or_done(dir.path());
    assert_eq!(p["tasks"][0]["status"], "failed", "{text}");
    assert_eq!(p["tasks"][1]["status"], "completed", "{text}");
    assert_eq!(
        result_of(dir.path(), 0),
        "refused: its added and changed files hold 100.1 MiB (big.bin 100.1 MiB, a.txt 0.0 MiB), over the 100 MiB a task's change may hold; nothing of it was integrated (keep large outputs out of the repository, or list them in .gitignore)"
    );
    // git never stored it: no object of that size in the repository.
    common::assert_no_large_object(dir.path());
}

/// A `git` in front of the real one that fails `git add` like a full disk in a tree where
/// the worker left `fill-disk`.
fn full_disk_git(dir: &Path) -> String {
    let bin = common::git_in_front(
        dir,
        "if [ -e fill-disk ]; then case \" $* \" in *' add '*) echo 'error: unable to create temporary file: No space left on device' >&2; echo 'fatal: adding files failed' >&2; exit 128 ;; esac; fi",
    );
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

#[test]
fn a_worker_that_fills_the_disk_fails_its_own_task_not_the_run() {
    let dir = two_tasks();
    let tools = tempfile::tempdir().unwrap();
    let ran = local(dir.path())
        .script(WORKER)
        .env("TASK0", "touch fill-disk")
        .env("PATH", full_disk_git(tools.path()))
        .run_within(Duration::from_secs(120));
    let text = ran.text();
    assert_eq!(ran.code(), Some(1), "{text}");
    let p = plan_or_done(dir.path());
    assert_eq!(p["tasks"][0]["status"], "failed", "{text}");
    assert_eq!(p["tasks"][0]["attempts"], 3, "{text}");
    assert_eq!(p["tasks"][1]["status"], "completed", "{text}");
    assert_eq!(
        result_of(dir.path(), 0),
        "the disk filled up while this attempt's changes were staged (error: unable to create temporary file: No space left on device); nothing of it was integrated, and its tree is discarded, which frees the space"
    );
    assert!(dir.path().join("b.txt").exists(), "{text}");
}

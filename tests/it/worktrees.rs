//! Where workers work, and what can reach their trees: worktrees outside `.git` (an agent
//! CLI refuses to edit under it) and outside the work tree, nothing of them left behind or
//! committed, a kill -9 resumed, and processes that escaped an attempt (`setsid env -i`) kept
//! away from later attempts' trees. Real repositories, real workers, real kill -9.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::common;
use common::{dagexec, git, repo, worker};

/// A plan whose tasks each create one file, `blockedBy` as given.
fn plan(tasks: &[(&str, &[usize])]) -> Value {
    let tasks: Vec<Value> = tasks
        .iter()
        .map(|(file, deps)| {
            json!({
                "subject": format!("write {file}"), "status": "pending", "blockedBy": deps,
                "metadata": {"files": {"create": [file], "modify": []}},
                "agent": {"role": "engineer"}
            })
        })
        .collect();
    json!({"schemaVersion": 2, "goal": "test", "tasks": tasks})
}

/// `dagexec run` with one slot, the worktrees under `cache` (as `$XDG_CACHE_HOME`).
fn run_cmd(dir: &Path, cache: &Path, cmd: &str) -> Command {
    let mut c = dagexec(dir);
    c.args(["run", "--worker", cmd, "--jobs", "1", "--timeout", "30s"])
        .env("XDG_CACHE_HOME", cache)
        .stdin(std::process::Stdio::null());
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Everything under `dir`, recursively (paths relative to it), sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            out.push(p.strip_prefix(dir).unwrap().display().to_string());
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            }
        }
    }
    out.sort();
    out
}

/// A shell loop waiting (at most 20 s) for `file` to exist.
fn wait_sh(file: &Path) -> String {
    format!(
        "i=0; while [ ! -e '{f}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        f = file.display()
    )
}

/// Waits (at most 30 s) until `file` exists.
fn wait_file(file: &Path) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !file.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {}",
            file.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

fn committed_files(dir: &Path) -> String {
    git(dir, &["ls-tree", "-r", "--name-only", "HEAD"])
}

#[test]
fn workers_work_outside_any_git_directory_and_outside_the_work_tree_and_leave_nothing() {
    let dir = repo(&plan(&[("a.txt", &[]), ("b.txt", &[0])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (_w, cmd) = worker(&format!(
        r#"pwd -P > '{out}/cwd-'"$DAGEXEC_TASK_INDEX"
git rev-parse --git-common-dir > '{out}/common-'"$DAGEXEC_TASK_INDEX"
f=$(sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE")
echo x > "$f"
echo "COMPLETED: wrote $f""#,
        out = out.path().display()
    ));
    let o = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let root = dir.path().canonicalize().unwrap();
    let cache_real = cache.path().canonicalize().unwrap();
    for i in 0..2 {
        let cwd = PathBuf::from(
            std::fs::read_to_string(out.path().join(format!("cwd-{i}")))
                .unwrap()
                .trim(),
        );
        assert!(
            !cwd.components().any(|c| c.as_os_str() == ".git"),
            "task {i} worked under a .git directory: {}",
            cwd.display()
        );
        assert!(
            !cwd.starts_with(&root),
            "task {i} worked inside the user's work tree: {}",
            cwd.display()
        );
        assert!(
            cwd.starts_with(cache_real.join("dagexec/worktrees")),
            "task {i} worked outside the cache: {}",
            cwd.display()
        );
        // Its own worktree of this repository.
        let common = std::fs::read_to_string(out.path().join(format!("common-{i}"))).unwrap();
        assert_eq!(
            Path::new(common.trim()).canonicalize().unwrap(),
            root.join(".git")
        );
    }
    assert_eq!(committed_files(dir.path()).matches(".txt").count(), 2);
    // Nothing left: no worktree registered, nothing in the cache, nothing in the work tree.
    let listed = git(dir.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    assert_eq!(
        tree(&cache.path().join("dagexec/worktrees")),
        Vec::<String>::new()
    );
    assert!(
        !dir.path().join(".git/worktrees").exists()
            || tree(&dir.path().join(".git/worktrees")).is_empty()
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain", "--ignored"]), "");
}

#[test]
fn a_location_inside_the_work_tree_is_refused_and_dagexec_yml_can_move_it() {
    let dir = repo(&plan(&[("a.txt", &[])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let (_w, cmd) = worker(r#"pwd -P > "$REC"; echo x > a.txt; echo "COMPLETED: ok""#);
    let rec = cache.path().join("cwd");
    let o = run_cmd(dir.path(), cache.path(), &cmd)
        .env("DAGEXEC_WORKTREES", dir.path().join("wt"))
        .env("REC", &rec)
        .output()
        .unwrap();
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(
        out.contains("DAGEXEC_WORKTREES") && out.contains("inside the repository's work tree"),
        "{out}"
    );
    assert!(!rec.exists(), "no worker ran");
    // `.design/dagexec.yml` names another place; the environment wins over it.
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join(".design/dagexec.yml"),
        format!("worktrees: {}\n", elsewhere.path().display()),
    )
    .unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "config"]);
    let o = run_cmd(dir.path(), cache.path(), &cmd)
        .env("REC", &rec)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let cwd = std::fs::read_to_string(&rec).unwrap();
    assert!(
        Path::new(cwd.trim()).starts_with(elsewhere.path().canonicalize().unwrap()),
        "{cwd}"
    );
    assert_eq!(tree(elsewhere.path()), Vec::<String>::new());
}

/// The issue's escaped process: a worker starts `setsid env -i sh -c '…'` (out of the group,
/// no tag) that writes into its tree later — while the next task works in a tree from the
/// pool. That next task's commit must not carry the file.
#[test]
fn a_process_that_escaped_an_attempt_never_writes_into_a_later_attempts_tree() {
    let dir = repo(&plan(&[("a.txt", &[]), ("b.txt", &[0])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (escaped, go, wrote) = (
        out.path().join("escaped"),
        out.path().join("go"),
        out.path().join("wrote"),
    );
    let escapee = out.path().join("escapee.sh");
    std::fs::write(
        &escapee,
        format!(
            "touch '{}'\n{}\necho stray > stray.txt\ntouch '{}'\n",
            escaped.display(),
            wait_sh(&go),
            wrote.display()
        ),
    )
    .unwrap();
    let (_w, cmd) = worker(&format!(
        r#"case "$DAGEXEC_TASK_INDEX" in
0) echo a > a.txt
   setsid env -i /bin/sh '{escapee}' </dev/null >/dev/null 2>&1 &
   {wait_escaped}
   echo "COMPLETED: a";;
1) touch '{go}'; {wait}; echo b > b.txt; echo "COMPLETED: b";;
esac"#,
        escapee = escapee.display(),
        wait_escaped = wait_sh(&escaped),
        go = go.display(),
        wait = wait_sh(&wrote),
    ));
    let o = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(wrote.exists(), "the escaped process ran to its end: {log}");
    let files = committed_files(dir.path());
    assert!(!files.contains("stray.txt"), "{files}\n{log}");
    assert!(!dir.path().join("stray.txt").exists());
    assert!(
        log.contains("still running in its worktree"),
        "the attempt that left it is warned about: {log}"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    assert_eq!(
        tree(&cache.path().join("dagexec/worktrees")),
        Vec::<String>::new()
    );
}

/// An escaped process that holds nothing in its tree (it left for `/`) but knows the tree's
/// path, and writes there later: the next attempt's tree is never at that path.
#[test]
fn a_process_that_only_knows_an_earlier_trees_path_cannot_write_into_a_later_attempts_tree() {
    let dir = repo(&plan(&[("a.txt", &[]), ("b.txt", &[0])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (path, escaped, go, wrote) = (
        out.path().join("path"),
        out.path().join("escaped"),
        out.path().join("go"),
        out.path().join("wrote"),
    );
    let escapee = out.path().join("escapee.sh");
    std::fs::write(
        &escapee,
        format!(
            "cd /\ntouch '{}'\n{}\np=$(cat '{}')\necho stray > \"$p/stray.txt\"\ntouch '{}'\n",
            escaped.display(),
            wait_sh(&go),
            path.display(),
            wrote.display()
        ),
    )
    .unwrap();
    let (_w, cmd) = worker(&format!(
        r#"case "$DAGEXEC_TASK_INDEX" in
0) echo a > a.txt; pwd -P > '{path}'
   setsid env -i /bin/sh '{escapee}' </dev/null >/dev/null 2>&1 &
   {wait_escaped}
   echo "COMPLETED: a";;
1) touch '{go}'; {wait}; echo b > b.txt; echo "COMPLETED: b";;
esac"#,
        path = path.display(),
        escapee = escapee.display(),
        wait_escaped = wait_sh(&escaped),
        go = go.display(),
        wait = wait_sh(&wrote),
    ));
    let o = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    let log = text(&o);
    assert_eq!(o.status.code(), Some(0), "{log}");
    assert!(wrote.exists(), "the escaped process ran to its end: {log}");
    let files = committed_files(dir.path());
    assert!(!files.contains("stray.txt"), "{files}\n{log}");
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

/// Whether process `pid` is still running (a zombie is not).
fn running(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit(')')
            .next()
            .is_some_and(|r| !r.trim_start().starts_with('Z'))
    })
}

/// kill -9 of dagexec while a worker runs. The next run takes over: it stops the worker the
/// dead run left (it carries the dead run's tag), and a process that escaped with a cleared
/// environment — which writes (by its absolute path, as agent CLIs do) into the tree it was
/// given after the next run started — reaches nothing: the old worktree is found and removed,
/// and no new one is made at its path.
#[test]
fn kill_9_mid_round_then_resume_in_the_cache_location() {
    let dir = repo(&plan(&[("a.txt", &[]), ("b.txt", &[])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = |name: &str| out.path().join(name);
    let escapee = o("escapee.sh");
    std::fs::write(
        &escapee,
        format!(
            "touch '{}'\n{}\necho late > \"$1/late.txt\"\ntouch '{}'\n",
            o("escaped").display(),
            wait_sh(&o("go")),
            o("wrote").display()
        ),
    )
    .unwrap();
    let (_w, cmd) = worker(&format!(
        r#"f=$(sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE")
if [ "$f" = a.txt ] && [ ! -e '{started}' ]; then
  pwd -P > '{out}/first-cwd'; echo $$ > '{out}/worker-pid'
  setsid env -i /bin/sh '{escapee}' "$(pwd -P)" </dev/null >/dev/null 2>&1 &
  {wait_escaped}
  exec >/dev/null 2>&1 # its runner is about to die: no SIGPIPE from a closed pipe
  touch '{started}'
  i=0; while [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; exit 1
fi
if [ "$f" = a.txt ]; then touch '{go}'; {wait_wrote}; fi
echo x > "$f"; echo "COMPLETED: $f""#,
        started = o("started").display(),
        go = o("go").display(),
        out = out.path().display(),
        escapee = escapee.display(),
        wait_escaped = wait_sh(&o("escaped")),
        wait_wrote = wait_sh(&o("wrote")),
    ));
    let mut child = run_cmd(dir.path(), cache.path(), &cmd)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_file(&o("started"));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    child.wait().unwrap();
    let first = PathBuf::from(std::fs::read_to_string(o("first-cwd")).unwrap().trim());
    assert!(
        first.starts_with(cache.path().canonicalize().unwrap()),
        "{}",
        first.display()
    );
    assert!(first.exists(), "the killed run's worktree is still there");
    let orphan: i32 = std::fs::read_to_string(o("worker-pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(running(orphan), "the killed run's worker lives on");
    let run = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    let log = text(&run);
    assert_eq!(run.status.code(), Some(0), "{log}");
    assert!(
        log.contains("Removed 1 worktree(s) left by an interrupted run."),
        "{log}"
    );
    // The worker, its `sh -c`, and a `sleep` when one is running.
    assert!(
        log.contains("Stopped ") && log.contains(" process(es) it left running"),
        "{log}"
    );
    assert!(!running(orphan), "the dead run's worker was stopped");
    assert!(
        o("wrote").exists(),
        "the escaped process wrote its late file: {log}"
    );
    let files = committed_files(dir.path());
    assert!(
        files.contains("a.txt") && files.contains("b.txt") && !files.contains("late.txt"),
        "{files}"
    );
    assert!(!dir.path().join("late.txt").exists());
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
    let listed = git(dir.path(), &["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    assert!(!first.exists(), "the old worktree was removed");
    assert_eq!(
        tree(&cache.path().join("dagexec/worktrees")),
        Vec::<String>::new()
    );
}

/// Someone deletes `.git/dagexec` while a round runs: the run says what happened and that
/// `dagexec run` resumes, and it does.
#[test]
fn dagexec_state_deleted_during_a_run_is_explained_and_the_run_resumes() {
    let dir = repo(&plan(&[("a.txt", &[]), ("b.txt", &[0])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let done = out.path().join("deleted");
    let (_w, cmd) = worker(&format!(
        r#"f=$(sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE")
if [ ! -e '{done}' ]; then rm -rf "$(git rev-parse --git-common-dir)/dagexec"; touch '{done}'; fi
echo x > "$f"; echo "COMPLETED: $f""#,
        done = done.display()
    ));
    let o = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    let log = text(&o);
    assert!(
        !log.contains("No such file or directory"),
        "no raw error: {log}"
    );
    // Its lock went with it: the run stops before another attempt, saying why and what next.
    assert_eq!(o.status.code(), Some(2), "{log}");
    assert!(
        log.contains(".git/dagexec was deleted while the run was going")
            && log.contains("run `dagexec run` again and it resumes"),
        "says what happened and how to go on: {log}"
    );
    assert!(
        committed_files(dir.path()).contains("a.txt"),
        "round 1 is kept"
    );
    let o = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let files = committed_files(dir.path());
    assert!(
        files.contains("a.txt") && files.contains("b.txt"),
        "{files}"
    );
    assert_eq!(git(dir.path(), &["status", "--porcelain"]), "");
}

/// Defect (issue 34): a worker whose tree is all it may write (an agent CLI's sandbox: its
/// tree and the temporary folder) rewrote its worktree's `.git` file to name a git directory
/// of its own, whose config has a `core.fsmonitor` command and a clean filter its
/// `.gitattributes` asks for; dagexec's git calls in that tree after the worker ended —
/// outside its timeout and its sandbox — obeyed that file and ran both. They use the git
/// directory dagexec made the worktree with, whatever the tree's `.git` says.
#[test]
fn a_worker_that_rewrites_its_worktrees_git_file_never_runs_code_in_dagexecs_git_calls() {
    let dir = repo(&plan(&[("a.txt", &[]), ("b.txt", &[0])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let ran = out.path().join("ran");
    let (_w, cmd) = worker(&format!(
        r#"evil='{out}/evil-'"$DAGEXEC_TASK_INDEX"'.git'
git init -q --bare "$evil"
git rev-parse --path-format=absolute --git-common-dir | sed 's|$|/objects|' > "$evil/objects/info/alternates"
git rev-parse HEAD > "$evil/HEAD"
git config -f "$evil/config" core.bare false
git config -f "$evil/config" core.fsmonitor "echo fsmonitor >> '{ran}'; false"
git config -f "$evil/config" filter.x.clean "echo filter >> '{ran}'; cat"
echo '* filter=x' > .gitattributes
echo "gitdir: $evil" > .git
f=$(sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE")
echo x > "$f"
echo "COMPLETED: wrote $f""#,
        out = out.path().display(),
        ran = ran.display()
    ));
    let o = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    let ran = std::fs::read_to_string(&ran).unwrap_or_default();
    assert_eq!(
        ran,
        "",
        "dagexec's git ran the worker's code:\n{}",
        text(&o)
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let committed = committed_files(dir.path());
    assert!(
        committed.contains("a.txt") && committed.contains("b.txt"),
        "{committed}"
    );
}

/// Defect (issue 34): a worker that removed its own worktree (or put a link to another folder
/// in its place) ended the whole run (exit 2) with "cannot run git ls-files --others in …":
/// its tree is the attempt's, so it is that attempt's failure, said as what happened, and the
/// retry goes on in a tree of its own.
#[test]
fn a_worker_that_removes_its_worktree_fails_its_attempt_not_the_run() {
    let dir = repo(&plan(&[("a.txt", &[]), ("b.txt", &[0])]), &[]);
    let cache = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join("secret.txt"), "not the task's").unwrap();
    let (_w, cmd) = worker(&format!(
        r#"f=$(sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE")
echo x > "$f"
tree=$PWD
cd /
if [ "$DAGEXEC_ATTEMPT" = 1 ]; then
  rm -rf "$tree"
  [ "$DAGEXEC_TASK_INDEX" = 1 ] && ln -s '{}' "$tree"
fi
echo "COMPLETED: wrote $f""#,
        elsewhere.path().display()
    ));
    let o = run_cmd(dir.path(), cache.path(), &cmd).output().unwrap();
    let said = text(&o);
    assert_eq!(o.status.code(), Some(0), "{said}");
    assert_eq!(
        said.matches("its worktree is gone: the worker removed it")
            .count(),
        2,
        "{said}"
    );
    let committed = committed_files(dir.path());
    assert!(
        committed.contains("a.txt") && committed.contains("b.txt"),
        "{committed}"
    );
    assert!(!committed.contains("secret.txt"), "{committed}");
}

/// Every git run is a process the round waits for. A round applies each accepted change to
/// its index once (`git apply` is all or nothing: no `--check` first, and the round's commit
/// starts from the tree written after the changes landed, not from `HEAD` with every change
/// applied again); a pooled worktree is checked after its reset with one `git status` (its
/// `HEAD` in the `--branch` header), not a `rev-parse` beside it; and a worker's change is
/// listed once (`diff --raw`), its untracked files once.
#[test]
fn a_round_applies_each_change_once_and_a_reused_tree_is_checked_with_one_status() {
    let dir = repo(
        &plan(&[
            ("a.txt", &[]),
            ("b.txt", &[]),
            ("c.txt", &[]),
            ("d.txt", &[]),
        ]),
        &[],
    );
    let cache = tempfile::tempdir().unwrap();
    let tools = tempfile::tempdir().unwrap();
    let seen = tools.path().join("calls");
    let bin = common::git_in_front(
        tools.path(),
        &format!("echo \"$PWD: $*\" >> '{}'", seen.display()),
    );
    let (_w, cmd) = worker(
        r#"f=$(sed -n 's/^Files to create: //p' "$DAGEXEC_PROMPT_FILE")
echo x > "$f"
echo "COMPLETED: wrote $f""#,
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let o = run_cmd(dir.path(), cache.path(), &cmd)
        .env("PATH", path)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert_eq!(committed_files(dir.path()).matches(".txt").count(), 4);
    let calls = std::fs::read_to_string(&seen).unwrap();
    let count = |what: &[&str]| {
        calls
            .lines()
            .filter(|l| what.iter().all(|w| l.contains(w)))
            .count()
    };
    assert_eq!(count(&[" apply ", "--cached"]), 4, "{calls}");
    assert_eq!(count(&[" apply ", "--check"]), 0, "{calls}");
    // Three of the four attempts ran in a reused tree.
    assert_eq!(
        count(&["/worktrees/", " status ", "--porcelain=v2"]),
        3,
        "{calls}"
    );
    assert_eq!(count(&["/worktrees/", " rev-parse "]), 0, "{calls}");
    assert_eq!(count(&["/worktrees/", " diff --cached "]), 8, "{calls}");
    assert_eq!(count(&["/worktrees/", " ls-files --others"]), 4, "{calls}");
}

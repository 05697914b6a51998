//! dagexec never writes through a link it did not create, and never lets a task's change
//! reach git's directory under any case: `dagexec run` with hostile workers, `dagexec
//! validate` with hostile plans and repositories, and `action finalize` with crafted patches.

use crate::common::fake_github;

use crate::common;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use common::local::{Ran, exec, local};
use common::{dagexec, git, text};

fn task(subject: &str, creates: &[&str]) -> Value {
    common::lab::task(subject, creates, &[])
}

/// A committed repository at `tmp/repo` with `tasks` as its plan, beside a directory
/// `tmp/outside` holding a precious file.
fn setup(tmp: &Path, tasks: Vec<Value>) -> (PathBuf, PathBuf) {
    let outside = tmp.join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("file"), "precious\n").unwrap();
    let repo = tmp.join("repo");
    std::fs::create_dir_all(repo.join(".design")).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    let plan = json!({
        "schemaVersion": 2, "goal": "Links", "context": {}, "progress": {"completedTasks": []},
        "tasks": tasks
    });
    std::fs::write(
        repo.join(".design/plan.json"),
        serde_json::to_string_pretty(&plan).unwrap(),
    )
    .unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "plan"]);
    (repo, outside)
}

/// `dagexec run --yes` (20 s an attempt) in `repo` with a worker `worker_body` that first
/// reads its prompt, kept beside the repository.
fn run(repo: &Path, worker_body: &str) -> Ran {
    let script = repo.parent().unwrap().join("worker.sh");
    std::fs::write(
        &script,
        format!("#!/bin/sh\ncat > /dev/null\n{worker_body}\n"),
    )
    .unwrap();
    local(repo)
        .worker(&format!("sh '{}'", script.display()))
        .timeout("20s")
        .args(["--yes"])
        .run()
}

fn plan_of(repo: &Path) -> Value {
    let path = repo.join(".design/plan.json");
    let text = std::fs::read_to_string(&path)
        .or_else(|_| {
            // Completed plans are archived; find the archive.
            let dir = repo.join(".design");
            let archived = std::fs::read_dir(&dir)
                .unwrap()
                .flatten()
                .find(|e| e.file_name().to_string_lossy().contains("plan"))
                .unwrap();
            std::fs::read_to_string(archived.path())
        })
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn a_workers_link_at_the_plans_temp_name_never_redirects_a_save() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, outside) = setup(tmp.path(), vec![task("A", &["a.txt"])]);
    let out = run(
        &repo,
        &format!(
            "echo a > a.txt; ln -s '{}' .design/plan.json.tmp; ln -s '{}' .design/processor-batch-1.json; echo 'COMPLETED: a'",
            outside.join("file").display(),
            outside.join("file").display()
        ),
    );
    let all = text(&out);
    assert_eq!(
        std::fs::read_to_string(outside.join("file")).unwrap(),
        "precious\n",
        "{all}"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "{all}");
    let plan = plan_of(&repo);
    assert_eq!(plan["tasks"][0]["status"], "failed", "{all}");
    let result = plan["tasks"][0]["result"].as_str().unwrap();
    assert!(
        result.contains("symbolic link .design/plan.json.tmp ->")
            && result.contains("does not declare"),
        "{result}"
    );
    // No link reached the repository.
    let tree = git(&repo, &["ls-tree", "-r", "HEAD"]);
    assert!(!tree.contains("120000"), "{tree}");
    assert!(std::fs::symlink_metadata(repo.join(".design/plan.json.tmp")).is_err());
}

#[test]
fn links_already_in_the_repository_are_never_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, outside) = setup(tmp.path(), vec![task("A", &["a.txt"])]);
    // Links a user (or an earlier tool) committed at the names dagexec used to write through.
    let file = outside.join("file");
    for name in [
        "plan.json.tmp",
        "processor-batch-1.json.tmp",
        "worker-0.log",
    ] {
        std::os::unix::fs::symlink(&file, repo.join(".design").join(name)).unwrap();
    }
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "links"]);
    let out = run(&repo, "echo a > a.txt; echo 'COMPLETED: a'");
    let all = text(&out);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "precious\n",
        "{all}"
    );
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1, "{all}");
    assert!(std::fs::symlink_metadata(repo.join(".design/plan.json.tmp")).is_ok());
}

#[test]
fn declared_links_out_of_the_repository_or_into_git_and_design_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, outside) = setup(
        tmp.path(),
        vec![
            task("out", &["out"]),
            task("git", &["cfg"]),
            task("design", &["d"]),
        ],
    );
    let out = run(
        &repo,
        &format!(
            "case $DAGEXEC_TASK_INDEX in \
             0) ln -s '{}' out ;; 1) ln -s .GIT/../.git/config cfg ;; 2) ln -s ./.design d ;; esac; \
             echo 'COMPLETED: linked'",
            outside.join("file").display()
        ),
    );
    let all = text(&out);
    let plan = plan_of(&repo);
    let result = |i: usize| plan["tasks"][i]["result"].as_str().unwrap().to_string();
    assert!(result(0).contains("points outside the repository"), "{all}");
    assert!(
        result(1).contains("cfg -> .GIT/../.git/config points into .git/"),
        "{}",
        result(1)
    );
    assert!(result(2).contains("points into .design/"), "{}", result(2));
    for i in 0..3 {
        assert_eq!(plan["tasks"][i]["status"], "failed", "{all}");
    }
    let tree = git(&repo, &["ls-tree", "-r", "HEAD"]);
    assert!(!tree.contains("120000"), "{tree}");
}

#[test]
fn a_worker_writing_git_hooks_under_another_case_fails_its_attempt_not_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = setup(
        tmp.path(),
        vec![task("A", &["a.txt"]), task("B", &["b.txt"])],
    );
    let out = run(
        &repo,
        "case $DAGEXEC_TASK_INDEX in \
         0) echo a > a.txt; mkdir -p .GIT/hooks; echo 'rm -rf /' > .GIT/hooks/pre-commit ;; \
         1) echo b > b.txt ;; esac; echo 'COMPLETED: done'",
    );
    let all = text(&out);
    let plan = plan_of(&repo);
    assert_eq!(plan["tasks"][0]["status"], "failed", "{all}");
    let result = plan["tasks"][0]["result"].as_str().unwrap();
    assert!(
        result.contains(".GIT") && result.contains("git's own directory"),
        "{result}"
    );
    assert_eq!(plan["tasks"][1]["status"], "completed", "{all}");
    assert!(!repo.join(".GIT").exists());
    let tree = git(&repo, &["ls-tree", "-r", "--name-only", "HEAD"]);
    assert!(tree.contains("b.txt") && !tree.contains(".GIT"), "{tree}");
}

/// A worker that makes an undeclared directory a nested repository (`gf/.git` naming the
/// repository's own git directory) would land a gitlink (mode 160000): refused like an
/// undeclared link, its attempt failed, the other task's work committed.
#[test]
fn an_undeclared_gitlink_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, _) = setup(
        tmp.path(),
        vec![task("A", &["a.txt"]), task("B", &["b.txt"])],
    );
    let out = run(
        &repo,
        "case $DAGEXEC_TASK_INDEX in \
         0) echo a > a.txt; mkdir gf; echo \"gitdir: $(git rev-parse --path-format=absolute --git-common-dir)\" > gf/.git ;; \
         1) echo b > b.txt ;; esac; echo 'COMPLETED: done'",
    );
    let all = text(&out);
    let plan = plan_of(&repo);
    assert_eq!(plan["tasks"][0]["status"], "failed", "{all}");
    let result = plan["tasks"][0]["result"].as_str().unwrap();
    assert!(
        result.contains("gf, a nested git repository") && result.contains("does not declare"),
        "{result}"
    );
    assert_eq!(plan["tasks"][1]["status"], "completed", "{all}");
    let tree = git(&repo, &["ls-tree", "-r", "HEAD"]);
    assert!(!tree.contains("160000") && !tree.contains("\tgf"), "{tree}");
}

#[test]
fn validate_refuses_git_under_any_case_and_paths_through_a_linked_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let mut linked = task("through a link", &["d/x.txt"]);
    linked["agent"] = json!({"role": "r", "contextFiles": [{"path": "d/sub/y.txt"}]});
    let (repo, outside) = setup(
        tmp.path(),
        vec![task("case", &[".GIT/config", "src/.Git/hooks/x"]), linked],
    );
    std::os::unix::fs::symlink(&outside, repo.join("d")).unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "-qm", "a link"]);
    let out = exec(&repo, &["validate", "--no-checks"]);
    let all = out.expect_code(2);
    assert!(
        all.contains("task 0 metadata.files.create[0]: \".GIT/config\" points into .git/"),
        "{all}"
    );
    assert!(all.contains("task 0 metadata.files.create[1]"), "{all}");
    assert!(
        all.contains(&format!(
            "task 1 metadata.files.create[0]: \"d/x.txt\" goes through d, a symbolic link to {}",
            outside.display()
        )),
        "{all}"
    );
    assert!(all.contains("task 1 agent.contextFiles[0].path"), "{all}");
    // `run` refuses it before any worker starts.
    let out = run(&repo, "touch ran; echo 'COMPLETED: x'");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!repo.join("ran").exists());
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 1);
}

// ---- action finalize with crafted patches ----------------------------------------------------

/// A patch (against `repo`'s HEAD) made in a scratch clone by `make`.
fn crafted_patch(tmp: &Path, repo: &Path, name: &str, make: impl FnOnce(&Path)) -> String {
    let scratch = tmp.join(name);
    git(
        tmp,
        &[
            "clone",
            "-q",
            repo.to_str().unwrap(),
            scratch.to_str().unwrap(),
        ],
    );
    make(&scratch);
    git(&scratch, &["add", "-A"]);
    git(&scratch, &["diff", "--cached", "--binary", "--full-index"])
}

/// `dagexec action work` for task `t` attempt 1 of run 77 (the worker creates the task's file),
/// its artifact left under `artifacts/<name>`, then its patch replaced by `patch` if given.
fn artifact(repo: &Path, artifacts: &Path, base: &str, t: usize, patch: Option<&str>) {
    let dir = artifacts.join(format!("dagexec-77-1-task-{t}-attempt-1"));
    let worker = "case $DAGEXEC_TASK_INDEX in 0) echo a > a.txt ;; 1) echo x > cfg ;; \
                  2) echo c > c.txt ;; 3) echo d > d.txt ;; esac; echo 'COMPLETED: done'";
    let out = dagexec(repo)
        .args(["action", "work"])
        .env("GITHUB_RUN_ID", "77")
        .env("GITHUB_RUN_ATTEMPT", "1")
        .env("DAGEXEC_TASK", t.to_string())
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BASE", base)
        .env("DAGEXEC_WORKER", worker)
        .env("DAGEXEC_ARTIFACTS", &dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    git(repo, &["reset", "-q", "--hard", base]);
    git(repo, &["clean", "-qfdx"]);
    if let Some(patch) = patch {
        std::fs::write(dir.join("changes.patch"), patch).unwrap();
    }
}

#[test]
fn finalize_refuses_patches_adding_links_to_the_plans_temp_name_or_git_config() {
    let tmp = tempfile::tempdir().unwrap();
    let (repo, outside) = setup(
        tmp.path(),
        vec![
            task("A", &["a.txt"]),
            task("B", &["cfg"]),
            task("C", &["c.txt"]),
            task("D", &["d.txt"]),
        ],
    );
    let origin = tmp.path().join("origin.git");
    std::fs::create_dir_all(&origin).unwrap();
    git(&origin, &["init", "-q", "--bare", "-b", "main"]);
    git(
        &repo,
        &["remote", "add", "origin", origin.to_str().unwrap()],
    );
    git(&repo, &["push", "-q", "origin", "main"]);
    let base = git(&repo, &["rev-parse", "HEAD"]).trim().to_string();
    let target = outside.join("file");
    let artifacts = tmp.path().join("artifacts");
    let p0 = crafted_patch(tmp.path(), &repo, "s0", |s| {
        std::fs::write(s.join("a.txt"), "a\n").unwrap();
        std::os::unix::fs::symlink(&target, s.join(".design/plan.json.tmp")).unwrap();
    });
    artifact(&repo, &artifacts, &base, 0, Some(&p0));
    let p1 = crafted_patch(tmp.path(), &repo, "s1", |s| {
        std::os::unix::fs::symlink(".git/config", s.join("cfg")).unwrap();
    });
    artifact(&repo, &artifacts, &base, 1, Some(&p1));
    artifact(&repo, &artifacts, &base, 2, None);
    // Git itself cannot make this patch (it refuses `.GIT` paths); a forged artifact can.
    let p3 = "diff --git a/.GIT/config b/.GIT/config\nnew file mode 100644\n--- /dev/null\n\
              +++ b/.GIT/config\n@@ -0,0 +1 @@\n+[core]\n";
    artifact(&repo, &artifacts, &base, 3, Some(p3));
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(fake_github::FakeGitHub::start());
    let matrix = r#"{"include":[{"task":0,"attempt":1,"name":"task 0: A"},{"task":1,"attempt":1,"name":"task 1: B"},{"task":2,"attempt":1,"name":"task 2: C"},{"task":3,"attempt":1,"name":"task 3: D"}]}"#;
    let out = dagexec(&repo)
        .args(["action", "finalize"])
        .env("GITHUB_RUN_ID", "77")
        .env("GITHUB_RUN_ATTEMPT", "1")
        .env("GITHUB_REPOSITORY", "acme/widgets")
        .env("GITHUB_API_URL", gh.url())
        .env("GITHUB_REF_NAME", "main")
        .env("DAGEXEC_TOKEN", "ghs_token")
        .env("DAGEXEC_MATRIX", matrix)
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_ROUND", "1")
        .env("DAGEXEC_BRANCH", "dagexec/links")
        .env("DAGEXEC_ARTIFACTS", &artifacts)
        .output()
        .unwrap();
    let all = text(&out);
    assert!(out.status.success(), "{all}");
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "precious\n",
        "{all}"
    );
    let config = std::fs::read_to_string(repo.join(".git/config")).unwrap();
    assert!(config.contains("[core]"), "{config}");
    let state: Value =
        serde_json::from_str(&git(&origin, &["show", "dagexec/links:.design/plan.json"])).unwrap();
    let result = |i: usize| state["tasks"][i]["result"].as_str().unwrap().to_string();
    assert!(
        result(0).contains("symbolic link .design/plan.json.tmp ->"),
        "{state:#}"
    );
    assert!(
        result(1).contains("cfg -> .git/config points into .git/"),
        "{state:#}"
    );
    assert_eq!(state["tasks"][2]["status"], "completed", "{state:#}");
    assert!(
        result(3).contains("the change writes .GIT/config, inside git's own directory"),
        "{state:#}"
    );
    let tree = git(&origin, &["ls-tree", "-r", "dagexec/links"]);
    assert!(!tree.contains("120000") && tree.contains("c.txt"), "{tree}");
}

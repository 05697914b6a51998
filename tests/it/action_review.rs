//! The reviewer loop (the conductor seed) on GitHub Actions, its jobs run directly (no act):
//! `dagexec action work` with a scripted worker and reviewer, then `dagexec action finalize`
//! against a local bare remote and the fake GitHub API, round after round — approved at once;
//! rejected, then approved with the rejection's feedback in the retry's prompt; the same
//! rejection three times, escalated to a question on the pull request, answered, and
//! escalated again at once when the reviewer still says the same.

use crate::common::fake_github::FakeGitHub;
use crate::common::git;
use crate::common::lab::{self, Lab};

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

const REPO: &str = "Codertocat/Hello-World";
const BRANCH: &str = "dagexec/review";

/// Records its prompt as `$OUT/prompt-<round>.md`, writes a.txt, completes.
const WORKER: &str = r#"#!/bin/sh
cat > "$OUT/prompt-$DAGEXEC_ROUND.md"
echo "a from round $DAGEXEC_ROUND" > a.txt
echo "COMPLETED: wrote a"
"#;

/// The reviewer's common head: records its prompt and environment as
/// `$OUT/review-<round>.md`, refuses to run outside a review, and may scribble in the tree
/// (ignored). What follows decides the verdict.
const REVIEWER_HEAD: &str = r#"#!/bin/sh
cat > "$OUT/review-$DAGEXEC_ROUND.md"
echo "review=$DAGEXEC_REVIEW base=$DAGEXEC_BASE attempt=$DAGEXEC_ATTEMPT" >> "$OUT/review-$DAGEXEC_ROUND.md"
[ "$DAGEXEC_REVIEW" = 1 ] || { echo "not a review"; exit 3; }
echo scribble > reviewer-was-here.txt
"#;

const REJECT: &str = "echo 'looked at it'\necho REJECTED\necho 'summary: Tests incomplete'\necho 'issues:'\necho '- No edge case tests'\necho 'suggestions:'\necho '- Add tests for empty input'\n";

const APPROVE: &str = "echo APPROVED\necho 'summary: a.txt is there'\n";

/// A repository with one task (A, creating a.txt), pushed to a bare remote; the reviewer's
/// verdict comes from `verdict` (shell, after [`REVIEWER_HEAD`]).
fn setup(verdict: &str) -> Lab {
    let lab = lab::lab()
        .repository(REPO)
        .branch(BRANCH)
        .plan(
            "Review",
            vec![json!({
                "subject": "A", "description": "Write a.txt", "status": "pending", "blockedBy": [],
                "metadata": {"files": {"create": ["a.txt"], "modify": []}},
                "agent": {"acceptanceCriteria": [{"criterion": "a exists", "check": "test -f a.txt"}]}
            })],
        )
        .worker(WORKER)
        .start();
    std::fs::create_dir_all(lab.out()).unwrap();
    // The reviewer lives outside the repository, so it is no part of any patch.
    std::fs::write(
        lab.tmp.path().join("reviewer.sh"),
        format!("{REVIEWER_HEAD}{verdict}"),
    )
    .unwrap();
    lab
}

/// What these tests add to the shared lab ([`crate::common::lab`]), whose jobs run one after
/// another in its seed clone: the reviewer and what the scripts record.
trait Review {
    /// Where the scripts record (`$OUT`).
    fn out(&self) -> PathBuf;
    /// Where the work jobs leave their artifacts.
    fn artifacts(&self) -> PathBuf;
    fn reviewer(&self) -> String;
    fn in_actions(&self, run_id: &str) -> std::process::Command;
    fn base(&self) -> String;
    fn review_round(&self, round: u32) -> (u32, String);
    fn read(&self, name: &str) -> String;
    fn result_json(&self, round: u32, attempt: u32) -> Value;
    fn pr_body(&self) -> String;
    fn question_comments(&self) -> Vec<String>;
}

impl Review for Lab {
    fn out(&self) -> PathBuf {
        self.tmp.path().join("out")
    }

    fn artifacts(&self) -> PathBuf {
        self.tmp.path().join("artifacts")
    }

    fn reviewer(&self) -> String {
        format!("sh '{}'", self.tmp.path().join("reviewer.sh").display())
    }

    /// `dagexec` in the seed clone with the GitHub context of run `run_id` on the fake.
    fn in_actions(&self, run_id: &str) -> std::process::Command {
        let mut cmd = self.context(&self.repo, run_id);
        cmd.env("OUT", self.out());
        cmd
    }

    /// The commit the next round starts from: the branch's tip, or `main` before round 1.
    fn base(&self) -> String {
        self.next_base()
    }

    /// One round on Actions: the work job for task 0 (its attempt taken from the plan at the
    /// base, as the plan job does), then finalize. Returns (attempt, finalize's output).
    fn review_round(&self, round: u32) -> (u32, String) {
        let base = self.base();
        git(&self.repo, &["fetch", "-q", "origin"]);
        git(&self.repo, &["checkout", "-q", "--detach", &base]);
        let plan: Value = serde_json::from_str(&git(
            &self.repo,
            &["show", &format!("{base}:.design/plan.json")],
        ))
        .unwrap();
        let attempt = plan["tasks"][0]["attempts"].as_u64().unwrap_or(0) as u32 + 1;
        let run_id = (70 + round).to_string();
        let name = format!("dagexec-{run_id}-1-task-0-attempt-{attempt}");
        let out = self
            .in_actions(&run_id)
            .env_remove("DAGEXEC_TOKEN")
            .args(["action", "work"])
            .env("DAGEXEC_TASK", "0")
            .env("DAGEXEC_ATTEMPT", attempt.to_string())
            .env("DAGEXEC_ROUND", round.to_string())
            .env("DAGEXEC_BASE", &base)
            .env("DAGEXEC_WORKER", "sh ./worker.sh")
            .env("DAGEXEC_REVIEWER", self.reviewer())
            .env("DAGEXEC_ARTIFACTS", self.artifacts().join(&name))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", lab::text(&out));
        // The next job starts from a clean checkout.
        git(&self.repo, &["reset", "-q", "--hard", &base]);
        git(&self.repo, &["clean", "-qfdx"]);
        let matrix =
            format!(r#"{{"include":[{{"task":0,"attempt":{attempt},"name":"task 0: A"}}]}}"#);
        let out = self
            .in_actions(&run_id)
            .args(["action", "finalize"])
            .env("DAGEXEC_MATRIX", matrix)
            .env("DAGEXEC_BASE", &base)
            .env("DAGEXEC_ROUND", round.to_string())
            .env("DAGEXEC_BRANCH", BRANCH)
            .env("DAGEXEC_ARTIFACTS", self.artifacts())
            .output()
            .unwrap();
        let text = lab::text(&out);
        assert!(out.status.success(), "{text}");
        (attempt, text)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn result_json(&self, round: u32, attempt: u32) -> Value {
        let dir = self
            .artifacts()
            .join(format!("dagexec-{}-1-task-0-attempt-{attempt}", 70 + round));
        serde_json::from_str(&std::fs::read_to_string(dir.join("result.json")).unwrap()).unwrap()
    }

    fn pr_body(&self) -> String {
        self.gh.state().pulls[0].body.clone().unwrap_or_default()
    }

    fn question_comments(&self) -> Vec<String> {
        self.gh
            .state()
            .comments
            .iter()
            .filter(|c| c.body.starts_with("<!-- dagexec:question:0 -->"))
            .map(|c| c.body.clone())
            .collect()
    }
}

#[test]
fn an_approved_attempt_completes_with_the_review_in_the_result_commit_and_table() {
    let s = setup(APPROVE);
    let main = s.base();
    let (attempt, text) = s.review_round(1);
    assert_eq!(attempt, 1);
    assert!(
        text.contains("(reviewer approved: a.txt is there)"),
        "{text}"
    );
    // The reviewer saw the seed's prompt with the diff, in a review, against the base.
    let review = s.read("review-1.md");
    assert!(review.contains("## Code Review Task"), "{review}");
    assert!(review.contains("+a from round 1"), "{review}");
    assert!(review.contains("- [ ] **Tests**"), "{review}");
    assert!(
        review.contains(&format!("review=1 base={main} attempt=1")),
        "{review}"
    );
    // result.json carries the verdict; review.log the reviewer's output.
    let r = s.result_json(1, 1);
    assert_eq!(r["review"]["kind"], "reviewed", "{r:#}");
    assert_eq!(r["review"]["verdict"], "approved");
    assert_eq!(r["review"]["summary"], "a.txt is there");
    let log = std::fs::read_to_string(
        s.artifacts()
            .join("dagexec-71-1-task-0-attempt-1/review.log"),
    )
    .unwrap();
    assert!(log.contains("APPROVED"), "{log}");
    // Completed; the approval is in the plan, the round commit, the PR table.
    let plan = s.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    assert_eq!(
        plan["progress"]["reviews"],
        json!([{"task": 0, "verdict": "approved", "rejections": 0, "summary": "a.txt is there"}])
    );
    let log = git(&s.origin, &["log", "--format=%B", BRANCH]);
    assert!(
        log.contains("wrote a (reviewer approved: a.txt is there)"),
        "{log}"
    );
    // What the reviewer wrote in the tree was not committed.
    let files = git(&s.origin, &["ls-tree", "-r", "--name-only", BRANCH]);
    assert!(
        files.contains("a.txt") && !files.contains("reviewer-was-here"),
        "{files}"
    );
    let body = s.pr_body();
    assert!(body.contains("| Review |"), "{body}");
    assert!(
        body.contains(" | approved | wrote a (reviewer approved"),
        "{body}"
    );
    let checks = s.gh.calls("checks/create");
    assert_eq!(
        checks.last().unwrap().body.as_ref().unwrap()["conclusion"],
        "success"
    );
    s.gh.assert_clean();
}

#[test]
fn a_rejection_is_retried_next_round_with_its_feedback_and_then_approved() {
    let s = setup(&format!(
        "if [ \"$DAGEXEC_ATTEMPT\" = 1 ]; then\n{REJECT}else\n{APPROVE}fi\n"
    ));
    let (attempt, text) = s.review_round(1);
    assert_eq!(attempt, 1);
    assert!(
        text.contains("reviewer rejected: Tests incomplete"),
        "{text}"
    );
    let r = s.result_json(1, 1);
    assert_eq!(r["review"]["verdict"], "rejected", "{r:#}");
    assert_eq!(r["review"]["issues"], json!(["No edge case tests"]));
    // Pending for the next round, the rejection in its history and retry prompt; nothing of
    // the rejected attempt committed; the next round dispatched.
    let plan = s.branch_plan();
    let t = &plan["tasks"][0];
    assert_eq!(t["status"], "pending", "{plan:#}");
    assert_eq!(t["attempts"], 1);
    assert_eq!(t["reviews"][0]["verdict"], "rejected", "{plan:#}");
    assert_eq!(t["reviews"][0]["issues"], json!(["No edge case tests"]));
    assert!(
        t["result"]
            .as_str()
            .unwrap()
            .contains("attempt 1 failed: reviewer rejected: Tests incomplete"),
        "{plan:#}"
    );
    let files = git(&s.origin, &["ls-tree", "-r", "--name-only", BRANCH]);
    assert!(!files.contains("a.txt"), "{files}");
    assert_eq!(s.gh.calls("actions/create-workflow-dispatch").len(), 1);
    assert!(
        s.pr_body().contains("| ⏳ pending | 1 | rejected |"),
        "{}",
        s.pr_body()
    );
    // Round 2: attempt 2's prompt carries the first review's feedback, from a clean tree.
    let (attempt, text) = s.review_round(2);
    assert_eq!(attempt, 2);
    assert!(!s.read("prompt-1.md").contains("Previous attempts"));
    let prompt = s.read("prompt-2.md");
    assert!(prompt.contains("## Previous attempts"), "{prompt}");
    assert!(
        prompt.contains("**Attempt 1 Feedback:**\nTests incomplete"),
        "{prompt}"
    );
    assert!(prompt.contains("- No edge case tests"), "{prompt}");
    assert!(prompt.contains("- Add tests for empty input"), "{prompt}");
    assert!(prompt.contains("starts from a clean tree"), "{prompt}");
    assert!(
        text.contains("(reviewer approved after 1 rejection(s): a.txt is there)"),
        "{text}"
    );
    let plan = s.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    assert_eq!(plan["progress"]["reviews"][0]["rejections"], 1);
    let files = git(&s.origin, &["ls-tree", "-r", "--name-only", BRANCH]);
    assert!(files.contains("a.txt"), "{files}");
    let body = s.pr_body();
    assert!(
        body.contains(" | approved after 1 rejection | wrote a"),
        "{body}"
    );
    assert!(s.question_comments().is_empty());
    s.gh.assert_clean();
}

/// `body` commented on pull request #1 (on the fake GitHub), and GitHub's event for it.
fn comment_event(dir: &Path, gh: &FakeGitHub, body: &str) -> PathBuf {
    let p = lab::pr_comment_event(gh, REPO, 1, body);
    let file = dir.join("event.json");
    std::fs::write(&file, p.to_string()).unwrap();
    file
}

#[test]
fn three_identical_rejections_ask_on_the_pull_request_and_the_same_one_after_the_answer_asks_again()
{
    let s = setup(REJECT);
    for round in 1..=2 {
        let (attempt, text) = s.review_round(round);
        assert_eq!(attempt, round);
        assert!(
            // Retries belong to the round: each run is a part of round 1.
            text.contains(&format!(
                "retried in this round (attempt {} of 3)",
                round + 1
            )),
            "{text}"
        );
        assert!(s.question_comments().is_empty());
    }
    assert!(
        s.pr_body().contains("| 2 | rejected ×2 |"),
        "{}",
        s.pr_body()
    );
    let (attempt, text) = s.review_round(3);
    assert_eq!(attempt, 3);
    assert!(
        text.contains("escalated to the user after 3 rejection(s): Tests incomplete"),
        "{text}"
    );
    let prompt = s.read("prompt-3.md");
    assert!(
        prompt.contains("**Attempt 1 Feedback:**") && prompt.contains("**Attempt 2 Feedback:**"),
        "{prompt}"
    );
    // Blocked with the review's question, which is a comment on the pull request; the check
    // run waits for the user; no further round.
    let plan = s.branch_plan();
    let t = &plan["tasks"][0];
    assert_eq!(t["status"], "blocked", "{plan:#}");
    assert_eq!(t["question"]["kind"], "review", "{plan:#}");
    assert_eq!(t["reviews"].as_array().unwrap().len(), 3);
    let q = s.question_comments();
    assert_eq!(q.len(), 1, "{q:#?}");
    assert!(
        q[0].contains("with the same issues 3 times in a row: the loop makes no progress"),
        "{}",
        q[0]
    );
    assert!(q[0].contains("- No edge case tests"), "{}", q[0]);
    assert!(q[0].contains("/execute answer 0 <your answer>"), "{}", q[0]);
    let checks = s.gh.calls("checks/create");
    assert_eq!(
        checks.last().unwrap().body.as_ref().unwrap()["conclusion"],
        "action_required"
    );
    assert_eq!(s.gh.calls("actions/create-workflow-dispatch").len(), 2);
    assert!(
        s.pr_body().contains("| ⛔ blocked | 3 | rejected ×3 |"),
        "{}",
        s.pr_body()
    );
    // The answer reopens the task with fresh attempts and the history kept; the answered
    // attempt's prompt carries the answer and all the feedback. The same rejection once more
    // is the fourth identical one in a row: escalated at once, on attempt 1.
    // The comment job hands the answer to the steer job, which commits it.
    let event = comment_event(
        s.repo.parent().unwrap(),
        &s.gh,
        "/execute answer 0 keep it simple",
    );
    for job in ["comment", "steer"] {
        let out = s
            .in_actions("90")
            .args(["action", job])
            .env("DAGEXEC_TOKEN", "ghs_token")
            .env("GITHUB_EVENT_NAME", "issue_comment")
            .env("GITHUB_EVENT_PATH", &event)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{job}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(s.branch_plan()["tasks"][0]["status"], "pending");
    let (attempt, text) = s.review_round(4);
    assert_eq!(attempt, 1);
    let prompt = s.read("prompt-4.md");
    assert!(prompt.contains("keep it simple"), "{prompt}");
    assert!(prompt.contains("**Attempt 3 Feedback:**"), "{prompt}");
    assert!(
        text.contains("escalated to the user after 4 rejection(s)"),
        "{text}"
    );
    let plan = s.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "blocked", "{plan:#}");
    assert!(plan["tasks"][0]["question"]["reply"].is_null(), "{plan:#}");
    let q = s.question_comments();
    assert_eq!(
        q.len(),
        1,
        "the question comment is updated in place: {q:#?}"
    );
    s.gh.assert_clean();
}

/// On GitHub too, what the reviewer spends is the attempt's: the work job adds it to the
/// worker's in `result.json`, and finalize records it in the plan (where `max-cost` reads it).
#[test]
fn the_reviewers_cost_is_recorded_with_the_attempt() {
    let s = setup(&format!(
        "printf '{{\"cost_usd\": 0.1}}' > \"$DAGEXEC_USAGE_FILE\"\n{APPROVE}"
    ));
    let (attempt, text) = s.review_round(1);
    assert_eq!(attempt, 1, "{text}");
    let plan = s.branch_plan();
    assert_eq!(plan["tasks"][0]["status"], "completed", "{plan:#}");
    let records = plan["progress"]["dagexecAttempts"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{plan:#}");
    assert_eq!(records[0]["costUsd"], json!(0.1), "{plan:#}");
    s.gh.assert_clean();
}

//! Queued steering (`/execute proceed|answer|retry`) driven job by job on the lab: each
//! command is applied once — whatever later happens to the plan file, however many commands
//! came before, and when the job that applied it died right after its push — and only a
//! command a person with write access gave on this pull request, checked when it is applied.

use crate::common::fake_github::{ACTIONS_BOT, Comment, FakeGitHub};
use crate::common::git;
use crate::common::lab::{Lab, lab, task};

use serde_json::{Value, json};

/// Every task writes its own file and completes.
const WORKER: &str = "#!/bin/sh\ncat > /dev/null\necho x > \"t$DAGEXEC_TASK_INDEX.txt\"\necho \"COMPLETED: t$DAGEXEC_TASK_INDEX\"\n";

/// Three tasks in a chain: a round each, so three writers of the branch in turn.
fn chain() -> Lab {
    lab()
        .plan(
            "Steer",
            vec![
                task("A", &["t0.txt"], &[]),
                task("B", &["t1.txt"], &[0]),
                task("C", &["t2.txt"], &[1]),
            ],
        )
        .worker(WORKER)
        .start()
}

/// A person pushes a new `.design/plan.json` (the branch's plan changed by `edit`) to the
/// execution branch.
fn hand_push_plan(lab: &Lab, edit: impl FnOnce(&mut Value)) {
    let dir = lab.checkout(&format!("origin/{}", lab.branch));
    let path = dir.join(".design/plan.json");
    let mut plan: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut plan);
    std::fs::write(&path, serde_json::to_string_pretty(&plan).unwrap()).unwrap();
    git(&dir, &["commit", "-qam", "A new plan, by hand"]);
    git(
        &dir,
        &[
            "push",
            "-q",
            "origin",
            &format!("HEAD:refs/heads/{}", lab.branch),
        ],
    );
}

/// Round `n`'s run, its finalize succeeding: finalize's output.
fn finalized(lab: &Lab, n: u64) -> String {
    let (ok, log) = lab.round(n).finalized.unwrap();
    assert!(ok, "{log}");
    log
}

/// How many commits on the branch have a subject starting with `prefix`.
fn commits(lab: &Lab, prefix: &str) -> usize {
    lab.branch_log()
        .iter()
        .filter(|s| s.starts_with(prefix))
        .count()
}

/// The body of dagexec's marker for comment `id`.
fn marker(gh: &FakeGitHub, id: u64) -> String {
    crate::common::lab::steer_marker(gh, id)
}

/// Round 1 ran and `/execute proceed` was applied by its steer job: the lab and the comment.
fn proceeded() -> (Lab, u64) {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let (id, text) = lab.comment_jobs(90, 1, "/execute proceed", true);
    assert_eq!(commits(&lab, "dagexec: proceed"), 1, "{text}");
    assert!(
        marker(&lab.gh, id).contains("✅ Applied"),
        "{}",
        marker(&lab.gh, id)
    );
    (lab, id)
}

#[test]
fn an_applied_command_is_not_applied_again_after_a_person_replaces_the_plan() {
    let (lab, id) = proceeded();
    // A person replaces the plan: the new one knows nothing of the commands applied so far.
    hand_push_plan(&lab, |p| {
        p["goal"] = json!("Steer, replanned");
        let progress = p["progress"].as_object_mut().unwrap();
        progress.remove("dagexecSteered");
        progress.remove("dagexecPreflight");
    });
    // The next writers of the branch — a round's finalize, then a steer job — apply nothing.
    let r = lab.round(2);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let (_, text) = lab.comment_jobs(92, 1, "/execute retry 9", true);
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        1,
        "{:?}",
        lab.branch_log()
    );
    let plan = lab.branch_plan();
    assert_eq!(plan["goal"], "Steer, replanned");
    assert!(
        plan["progress"].get("dagexecPreflight").is_none(),
        "the new plan got a decision nobody gave it: {plan:#}\n{text}"
    );
    assert!(marker(&lab.gh, id).contains("✅ Applied in "));
    // The command that could not be applied is settled too, and its author told why once.
    let told = saying(&lab, "dagexec cannot retry that: no task \"9\"");
    assert_eq!(told, 1, "{text}");
    lab.gh.assert_clean();
}

#[test]
fn the_record_of_applied_commands_is_not_capped() {
    let (lab, _) = proceeded();
    // The plan's list keeps the newest 500: after 500 more commands, the first is not in it.
    hand_push_plan(&lab, |p| {
        let newer: Vec<u64> = (1_000_000..1_000_500).collect();
        p["progress"]["dagexecSteered"] = json!(newer);
    });
    for run in [2, 3] {
        let r = lab.round(run);
        assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    }
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        1,
        "{:?}",
        lab.branch_log()
    );
    lab.gh.assert_clean();
}

/// Round 1 of [`chain`], then `/execute proceed` whose steer job (as the workflow runs it)
/// is killed (SIGKILL) right after its push: the lab and the comment's id.
fn proceed_killed_after_its_push() -> (Lab, u64) {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let (id, _) = lab.comment_jobs(90, 1, "/execute proceed", false);
    let dir = lab.checkout("main");
    let out = lab
        .context(&dir, 90)
        .args(["action", "steer"])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_EVENT_NAME", "issue_comment")
        .env(
            "GITHUB_EVENT_PATH",
            lab.tmp.path().join(format!("comment-{id}.json")),
        )
        .env("DAGEXEC_FAILPOINT", "steer-pushed:0")
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", crate::common::lab::text(&out));
    (lab, id)
}

/// The steer job is killed (SIGKILL) right after its push, before it rewrites the marker; a
/// person then replaces the plan. The next writer finds the command in the branch's history:
/// not applied again, and its marker now says so.
#[test]
fn a_steer_job_killed_after_its_push_applied_its_command_once() {
    let (lab, id) = proceed_killed_after_its_push();
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        1,
        "{:?}",
        lab.branch_log()
    );
    assert!(
        marker(&lab.gh, id).contains("⏳ Queued"),
        "{}",
        marker(&lab.gh, id)
    );
    hand_push_plan(&lab, |p| {
        let progress = p["progress"].as_object_mut().unwrap();
        progress.remove("dagexecSteered");
        progress.remove("dagexecPreflight");
    });
    let log = finalized(&lab, 2);
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        1,
        "{:?}\n{log}",
        lab.branch_log()
    );
    assert!(
        lab.branch_plan()["progress"]
            .get("dagexecPreflight")
            .is_none()
    );
    assert!(
        marker(&lab.gh, id).contains("✅ Applied in "),
        "{}\n{log}",
        marker(&lab.gh, id)
    );
    lab.gh.assert_clean();
}

/// The steer job is killed (SIGKILL) right after its push, and a person force-pushes the
/// branch back past the commit that applied `/execute proceed` before any other job writes
/// it: the record beside the branch went with the branch's push, so no writer decides the
/// command again, and its marker stops saying queued.
#[test]
fn a_command_whose_steer_job_died_after_its_push_is_not_applied_again_after_a_force_push() {
    let (lab, id) = proceed_killed_after_its_push();
    assert_eq!(commits(&lab, "dagexec: proceed"), 1);
    let dir = lab.checkout(&format!("origin/{}~1", lab.branch));
    let to = format!("HEAD:refs/heads/{}", lab.branch);
    git(&dir, &["push", "-q", "--force", "origin", &to]);
    let log = finalized(&lab, 2);
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        0,
        "{:?}\n{log}",
        lab.branch_log()
    );
    let m = marker(&lab.gh, id);
    assert!(m.contains("✅ Settled earlier"), "{m}\n{log}");
    lab.gh.assert_clean();
}

/// Round 2's finalize applies a queued `/execute proceed` (its steer job cancelled by GitHub)
/// and is killed (SIGKILL) right after its push; a person force-pushes the branch back to
/// round 1 before any other job writes it. The record beside the branch went with that push:
/// the next round applies nothing again.
#[test]
fn a_command_a_finalize_applied_before_it_died_is_not_applied_again_after_a_force_push() {
    let mut lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let round_one = lab.checkout(&format!("origin/{}", lab.branch));
    let (id, _) = lab.comment_jobs(90, 1, "/execute proceed", false);
    let (_, log) = lab.round_killed_at("push:2", 2);
    assert_eq!(commits(&lab, "dagexec: proceed"), 1, "{log}");
    let to = format!("HEAD:refs/heads/{}", lab.branch);
    git(&round_one, &["push", "-q", "--force", "origin", &to]);
    lab.set_env("DAGEXEC_FAILPOINT", "");
    let log = finalized(&lab, 3);
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        0,
        "{:?}\n{log}",
        lab.branch_log()
    );
    assert!(marker(&lab.gh, id).contains("✅ Settled earlier"), "{log}");
    lab.gh.assert_clean();
}

/// A person force-pushes the branch back past the commit that applied `/execute proceed`:
/// the branch no longer records the command, its marker (which anyone commenting as GitHub
/// Actions' bot could have written) is no record, and the record beside the branch
/// (`refs/dagexec/settled/<branch>`) still says it was settled: no writer decides it again.
#[test]
fn a_settled_command_is_not_applied_again_after_a_force_push_drops_its_commit() {
    let (lab, id) = proceeded();
    let dir = lab.checkout(&format!("origin/{}~1", lab.branch));
    let to = format!("HEAD:refs/heads/{}", lab.branch);
    git(&dir, &["push", "-q", "--force", "origin", &to]);
    assert_eq!(commits(&lab, "dagexec: proceed"), 0);
    for run in [2, 3] {
        let r = lab.round(run);
        let (ok, log) = r.finalized.unwrap();
        assert!(ok, "{log}");
        assert!(!log.contains(&format!("comment {id}")), "{log}");
        assert_eq!(
            commits(&lab, "dagexec: proceed"),
            0,
            "{:?}\n{log}",
            lab.branch_log()
        );
    }
    assert!(marker(&lab.gh, id).contains("✅ Applied in "));
    lab.gh.assert_clean();
}

/// The job that settled a command pushed the branch and the record beside it, but GitHub
/// refused to rewrite its marker; then a force-push dropped the commit that settled it. The
/// record beside the branch keeps the command from being decided again, and the next writer
/// makes its marker stop saying queued.
#[test]
fn a_marker_of_a_command_settled_only_beside_the_branch_stops_saying_queued() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let (id, _) = lab.comment_jobs(90, 1, "/execute proceed", false);
    let refused = json!({"message": "Resource not accessible by integration"});
    lab.gh.fail_next("issues/update-comment", 403, &[], refused);
    let (_, text) = lab.comment_job_again(90, id, true);
    assert_eq!(commits(&lab, "dagexec: proceed"), 1, "{text}");
    assert!(marker(&lab.gh, id).contains("⏳ Queued"), "{text}");
    let dir = lab.checkout(&format!("origin/{}~1", lab.branch));
    let to = format!("HEAD:refs/heads/{}", lab.branch);
    git(&dir, &["push", "-q", "--force", "origin", &to]);
    let log = finalized(&lab, 2);
    assert_eq!(commits(&lab, "dagexec: proceed"), 0, "{log}");
    let m = marker(&lab.gh, id);
    assert!(m.contains("✅ Settled earlier"), "{m}\n{log}");
    // The command as it was authorised stays in the marker.
    assert!(m.contains("<!-- dagexec:command:"), "{m}");
    lab.gh.assert_clean();
}

/// Once every command queued on the pull request is settled in the branch's history, a
/// round's writer does not fetch the record beside the branch (a round trip to GitHub per
/// job): nothing it holds could change what the writer does.
#[test]
fn a_writer_fetches_no_record_when_the_history_settles_every_queued_command() {
    let (mut lab, _) = proceeded();
    let trace = lab.tmp.path().join("git-trace");
    lab.set_env("GIT_TRACE", trace.to_str().unwrap());
    let log = finalized(&lab, 2);
    let trace = std::fs::read_to_string(&trace).unwrap();
    let fetched: Vec<&str> = trace
        .lines()
        .filter(|l| l.contains("fetch") && l.contains("refs/dagexec/settled/"))
        .collect();
    assert!(fetched.is_empty(), "{fetched:#?}\n{log}");
    lab.gh.assert_clean();
}

/// Any workflow that comments with `GITHUB_TOKEN` comments as GitHub Actions' bot, as the
/// comment job does: its marker is dagexec's by its author alone. What it names is checked
/// when it is applied: a read-only user's command, a command on another pull request, a
/// command whose author lost write access since the comment job checked it, a bot's comment
/// — none is applied, and each marker says why.
#[test]
fn a_queued_command_is_applied_only_when_a_writer_gave_it_on_this_pull_request() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let forge = |named: u64| {
        lab.gh.add_comment(
            &lab.repository,
            1,
            ACTIONS_BOT,
            &format!("<!-- dagexec:steer:{named} -->\n⏳ Queued"),
        );
    };
    lab.gh.set_permission("mallory", "read");
    let read_only = lab
        .gh
        .add_comment(&lab.repository, 1, "mallory", "/execute proceed");
    forge(read_only);
    lab.gh.set_permission("wendy", "write");
    let elsewhere = lab
        .gh
        .add_comment(&lab.repository, 2, "wendy", "/execute proceed");
    forge(elsewhere);
    let bots = lab
        .gh
        .add_comment(&lab.repository, 1, "helper[bot]", "/execute proceed");
    forge(bots);
    // A writer's command, queued by the comment job (its steer job cancelled by GitHub);
    // the writer loses write access before any job applies it.
    let (revoked, _) = lab.comment_jobs(91, 1, "/execute proceed", false);
    let user = lab
        .gh
        .state()
        .comments
        .iter()
        .find(|c| c.id == revoked)
        .unwrap()
        .user
        .clone();
    lab.gh.set_permission(&user, "read");
    let log = finalized(&lab, 2);
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        0,
        "{:?}\n{log}",
        lab.branch_log()
    );
    assert!(
        lab.branch_plan()["progress"]
            .get("dagexecPreflight")
            .is_none()
    );
    for (id, why) in [
        (read_only, "@mallory has read access now"),
        (elsewhere, "is not on this pull request"),
        (bots, "was not written by a person"),
        (revoked, &format!("@{user} has read access now")),
    ] {
        let m = marker(&lab.gh, id);
        assert!(
            m.contains("❌ Not applied: ") && m.contains(why),
            "{id}: {m}\n{log}"
        );
    }
    // Settled: the next writer reads none of them again.
    let before = lab.gh.calls("issues/get-comment").len();
    let r = lab.round(3);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    assert_eq!(lab.gh.calls("issues/get-comment").len(), before);
    lab.gh.assert_clean();
}

/// A status comment asking to stop, written as GitHub Actions' bot by some other workflow:
/// the round stops only for an `/execute abort` a writer gave on this pull request (one does:
/// `action_jobs::execute_comments_retry_abort_proceed_status_and_refuse_strangers`).
#[test]
fn a_forged_abort_in_a_bot_status_comment_stops_nothing() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    lab.gh.set_permission("mallory", "read");
    let theirs = lab
        .gh
        .add_comment(&lab.repository, 1, "mallory", "/execute abort");
    lab.gh.add_comment(
        &lab.repository,
        1,
        ACTIONS_BOT,
        &format!(
            "<!-- dagexec:status -->\n<!-- dagexec:abort-requested -->\n<!-- dagexec:abort-by:{theirs} -->\nstop"
        ),
    );
    lab.gh.add_comment(
        &lab.repository,
        1,
        ACTIONS_BOT,
        "<!-- dagexec:status -->\n<!-- dagexec:abort-requested -->\nstop",
    );
    let before = lab.dispatches();
    let log = finalized(&lab, 2);
    assert_eq!(lab.dispatches(), before + 1, "round 3 starts: {log}");
    assert!(!log.contains("Stopped after"), "{log}");
    lab.gh.assert_clean();
}

/// A command refused when its steer job applies it starts no round, whether or not the
/// comment job queued it first (it always does): its author gets the reason, and the branch
/// waits as it did. One that comes with an earlier command that was applied (whose own steer
/// job GitHub cancelled) still starts the round that one needs.
#[test]
fn a_refused_command_starts_no_round_unless_an_earlier_one_was_applied() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let dispatches = || lab.gh.calls("actions/create-workflow-dispatch").len();
    let before = dispatches();
    // Task 0 completed in round 1: it cannot be retried.
    let (id, text) = lab.comment_jobs(90, 1, "/execute retry 0", true);
    assert!(marker(&lab.gh, id).contains("❌ Not applied"), "{text}");
    assert_eq!(dispatches(), before, "{text}");
    // An answer nobody asked for is refused too, but the proceed queued before it (its steer
    // job cancelled) is applied, and its round starts.
    lab.comment_jobs(91, 1, "/execute proceed", false);
    let (id, text) = lab.comment_jobs(92, 1, "/execute answer 1 yes", true);
    assert!(marker(&lab.gh, id).contains("❌ Not applied"), "{text}");
    assert_eq!(commits(&lab, "dagexec: proceed"), 1, "{text}");
    assert_eq!(dispatches(), before + 1, "{text}");
    lab.gh.assert_clean();
}

/// The steer job of a refused command run again ("Re-run jobs") starts no round either: the
/// branch records the command as refused, and the run waits as it did.
#[test]
fn a_re_run_of_a_refused_commands_steer_job_starts_no_round() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let before = lab.dispatches();
    // Task 0 completed in round 1: it cannot be retried.
    let (id, text) = lab.comment_jobs(90, 1, "/execute retry 0", true);
    assert!(marker(&lab.gh, id).contains("❌ Not applied"), "{text}");
    assert_eq!(lab.dispatches(), before, "{text}");
    let (_, text) = lab.comment_job_again(90, id, true);
    assert_eq!(lab.dispatches(), before, "{text}");
    lab.gh.assert_clean();
}

/// `/execute abort` handled by the comment job while a round's finalize writes the status
/// comment — after finalize read the pull request's comments, before it wrote the status —
/// is not lost: the next round's finalize stops.
#[test]
fn an_abort_given_while_finalize_writes_the_status_comment_is_not_lost() {
    use dagexec::action::steering::comment::{Identity, STATUS_MARKER, trusted_marked};
    use dagexec::edge::github::{Client, RepoName, Token};
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let rt = tokio::runtime::Runtime::new().unwrap();
    let repo = RepoName::parse(&lab.repository).unwrap();
    let client = rt.block_on(async { Client::new(&lab.gh.url(), &Token::new("ghs_test"), repo) });
    let client = client.unwrap();
    // A finalize reads the comments…
    let read = rt
        .block_on(trusted_marked(&client, 1, Identity::default()))
        .unwrap();
    // …the comment job handles `/execute abort`…
    let (_, text) = lab.comment_jobs(90, 1, "/execute abort", false);
    // …and the finalize writes the status comment from what it read.
    let status = format!("{STATUS_MARKER}\n### dagexec status\n");
    rt.block_on(client.upsert_marked_comment(1, STATUS_MARKER, &status, &read.own))
        .unwrap();
    let before = lab.dispatches();
    let log = finalized(&lab, 2);
    assert_eq!(lab.dispatches(), before, "no round 3: {text}\n{log}");
    assert!(log.contains("Stopped after this round"), "{log}");
    // The stop is taken: the abort's record says so, and stops nothing more.
    let records = lab.gh.state().comments;
    let record = records
        .iter()
        .find(|c| c.body.starts_with("<!-- dagexec:abort:"));
    assert!(record.unwrap().body.contains("abort-taken"), "{records:#?}");
    lab.gh.assert_clean();
}

/// `/execute abort` given while no round runs, then `/execute`: the run resumes as the user
/// asked last — the round that starts does not stop after one pass for the earlier abort.
#[test]
fn execute_after_an_abort_given_between_rounds_resumes_the_run() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    lab.comment_jobs(90, 1, "/execute abort", false);
    let (_, text) = lab.comment_jobs(91, 1, "/execute", false);
    // The status comment no longer says the run stops.
    let comments = lab.gh.state().comments;
    let status = comments
        .iter()
        .find(|c| c.body.starts_with("<!-- dagexec:status -->"));
    assert!(!status.unwrap().body.contains("Stopping after"), "{text}");
    let before = lab.dispatches();
    let log = finalized(&lab, 2);
    assert!(!log.contains("Stopped after"), "{text}\n{log}");
    assert_eq!(lab.dispatches(), before + 1, "round 3 starts: {log}");
    lab.gh.assert_clean();
}

/// `/execute status` after `/execute abort` rewrites the status comment without the abort's
/// marker; the abort still stops the next round (its own record is not the status comment).
#[test]
fn a_status_refresh_after_an_abort_does_not_cancel_it() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    lab.comment_jobs(90, 1, "/execute abort", false);
    lab.comment_jobs(91, 1, "/execute status", false);
    let before = lab.dispatches();
    let log = finalized(&lab, 2);
    assert!(log.contains("Stopped after this round"), "{log}");
    assert_eq!(lab.dispatches(), before, "no round 3: {log}");
    lab.gh.assert_clean();
}

/// A command queued before `/execute abort` whose steer job runs after the round that stopped
/// for the abort: it is applied, but it does not start the run the user stopped after it.
#[test]
fn a_command_given_before_an_abort_does_not_restart_the_run_after_it() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let (proceed, _) = lab.comment_jobs(90, 1, "/execute proceed", false);
    lab.comment_jobs(91, 1, "/execute abort", false);
    let r = lab.round(2);
    let (ok, log) = r.finalized.unwrap();
    assert!(ok && log.contains("Stopped after this round"), "{log}");
    let before = lab.dispatches();
    let (_, text) = lab.comment_job_again(92, proceed, true);
    assert_eq!(commits(&lab, "dagexec: proceed"), 1, "{text}");
    assert_eq!(lab.dispatches(), before, "{text}");
    lab.gh.assert_clean();
}

/// `/execute status` while an `/execute abort` waits for the current round to end says so,
/// as the abort's own status did: the refreshed status comment does not tell the user that
/// the run goes on.
#[test]
fn a_status_refresh_during_a_pending_abort_still_says_the_run_stops() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    lab.comment_jobs(90, 1, "/execute abort", false);
    let (_, text) = lab.comment_jobs(91, 1, "/execute status", false);
    let comments = lab.gh.state().comments;
    let status = comments
        .iter()
        .find(|c| c.body.starts_with("<!-- dagexec:status -->"))
        .unwrap();
    for said in [
        "**Stopping after the current round**",
        "**Waiting on:** the current round to end",
    ] {
        assert!(
            status.body.contains(said),
            "{said}: {}\n{text}",
            status.body
        );
    }
    lab.gh.assert_clean();
}

/// A comment that looks like the marker of a writer's queued command — a person's, or one
/// another workflow wrote as GitHub Actions' bot, before the comment job queued the command
/// or after — neither keeps the command from being queued nor settles it: a marker says a
/// command was settled only with the branch's record of it. Each command is applied once.
#[test]
fn a_forged_marker_does_not_keep_a_writers_command_from_being_applied() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    lab.gh.set_permission("mallory", "read");
    // The comment's id comes after the two forged markers'.
    let next = 1000 + lab.gh.state().comments.len() as u64 + 2;
    for who in ["mallory", ACTIONS_BOT] {
        let forged =
            format!("<!-- dagexec:steer:{next} -->\n✅ Applied earlier (the plan records it).");
        lab.gh.add_comment(&lab.repository, 1, who, &forged);
    }
    let (id, text) = lab.comment_jobs(90, 1, "/execute proceed", false);
    assert_eq!(id, next);
    // Its steer job cancelled by GitHub (a round queued after it): the round's finalize
    // applies it.
    let log = finalized(&lab, 2);
    assert_eq!(commits(&lab, "dagexec: proceed"), 1, "{text}\n{log}");
    // Forged after the comment job queued it, before its steer job ran.
    let (second, _) = lab.comment_jobs(91, 1, "/execute proceed", false);
    let forged = format!("<!-- dagexec:steer:{second} -->\n❌ Not applied: no.");
    lab.gh.add_comment(&lab.repository, 1, ACTIONS_BOT, &forged);
    let (_, text) = lab.comment_job_again(91, second, true);
    assert_eq!(commits(&lab, "dagexec: proceed"), 2, "{text}");
    assert!(marker(&lab.gh, second).contains("✅ Applied in "), "{text}");
    // Settled: nothing is applied again.
    let r = lab.round(3);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    assert_eq!(
        commits(&lab, "dagexec: proceed"),
        2,
        "{:?}",
        lab.branch_log()
    );
    lab.gh.assert_clean();
}

/// An abort's record saying the stop was taken, written as GitHub Actions' bot by some other
/// workflow — before the comment job wrote the real one, or after — keeps neither the comment
/// job from saying the run stops nor the next writer from stopping: only the branch's record
/// says an abort was taken, a marker that says so is not believed alone.
#[test]
fn a_forged_taken_abort_record_does_not_keep_a_writers_abort_from_stopping_the_run() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let forged = |id: u64| {
        let body = format!(
            "<!-- dagexec:abort:{id} -->\n<!-- dagexec:abort-taken -->\n`/execute abort` (comment {id}): taken back by a later command that started the run.\n"
        );
        lab.gh.add_comment(&lab.repository, 1, ACTIONS_BOT, &body);
    };
    // The abort's id comes after the forged record's.
    let next = 1000 + lab.gh.state().comments.len() as u64 + 1;
    forged(next);
    let (abort, text) = lab.comment_jobs(90, 1, "/execute abort", false);
    assert_eq!(abort, next);
    forged(abort);
    let comments = lab.gh.state().comments;
    let status = comments
        .iter()
        .find(|c| c.body.starts_with("<!-- dagexec:status -->"))
        .unwrap();
    assert!(
        status.body.contains("Stopping after"),
        "{}\n{text}",
        status.body
    );
    let before = lab.dispatches();
    let log = finalized(&lab, 2);
    assert_eq!(lab.dispatches(), before, "no round 3: {text}\n{log}");
    assert!(log.contains("Stopped after this round"), "{log}");
    // The stop is taken where the branch records it, beside it.
    let out = std::process::Command::new("git")
        .args([
            "show",
            &format!("refs/dagexec/settled/{}:dagexec-settled", lab.branch),
        ])
        .current_dir(&lab.origin)
        .output()
        .unwrap();
    let settled = String::from_utf8_lossy(&out.stdout);
    assert!(
        settled.lines().any(|l| l == abort.to_string()),
        "{settled:?}\n{log}"
    );
    lab.gh.assert_clean();
}

/// The comment job of an `/execute abort` run again after the run stopped for it (the stop is
/// taken) does not tell the user once more that the run stops after the current round: the
/// abort stops nothing more.
#[test]
fn a_re_run_of_a_taken_abort_does_not_say_the_run_stops_again() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let (abort, _) = lab.comment_jobs(90, 1, "/execute abort", false);
    let r = lab.round(2);
    let (ok, log) = r.finalized.unwrap();
    assert!(ok && log.contains("Stopped after this round"), "{log}");
    // The comment job of the abort, run again.
    let _ = std::fs::remove_file(lab.tmp.path().join(format!("comment-{abort}.outputs")));
    let (_, text) = lab.comment_job_again(92, abort, false);
    let comments = lab.gh.state().comments;
    let status = comments
        .iter()
        .find(|c| c.body.starts_with("<!-- dagexec:status -->"))
        .unwrap();
    assert!(
        !status.body.contains("Stopping after"),
        "{}\n{text}",
        status.body
    );
    lab.gh.assert_clean();
}

/// An `/execute` comment edited or deleted while its command waits in the queue is settled
/// the same way whichever job applies it: its own steer job refuses it as a round's writer
/// does (deleted: there is nothing to apply; edited: dagexec applies a command only as it was
/// given), and starts no round.
#[test]
fn a_command_edited_or_deleted_while_queued_is_refused_by_its_own_steer_job_too() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let before = lab.dispatches();
    let (deleted, _) = lab.comment_jobs(90, 1, "/execute proceed", false);
    lab.gh.delete_comment(deleted);
    let (_, text) = lab.comment_job_again(90, deleted, true);
    assert!(marker(&lab.gh, deleted).contains("is gone"), "{text}");
    let (edited, _) = lab.comment_jobs(91, 1, "/execute proceed", false);
    lab.gh.edit_comment(edited, "/execute answer 1 yes");
    let (_, text) = lab.comment_job_again(91, edited, true);
    assert!(marker(&lab.gh, edited).contains("was edited"), "{text}");
    assert_eq!(commits(&lab, "dagexec: proceed"), 0, "{text}");
    assert_eq!(lab.dispatches(), before, "{text}");
    lab.gh.assert_clean();
}

/// Job `job` (`comment` or `steer`) of `/execute` comment `id` (its event written by
/// [`Lab::comment_jobs`] or [`comment_event`]) as attempt `attempt` of its workflow run:
/// GitHub's "Re-run jobs" runs it again with the same event and the next attempt number.
/// Whether it succeeded, and what it said.
fn job_attempt(lab: &Lab, job: &str, id: u64, attempt: u32) -> (bool, String) {
    let dir = lab.checkout("main");
    let out = lab
        .context(&dir, 90)
        .args(["action", job])
        .env("GITHUB_ACTIONS", "true")
        .env("GITHUB_RUN_ATTEMPT", attempt.to_string())
        .env("GITHUB_EVENT_NAME", "issue_comment")
        .env(
            "GITHUB_EVENT_PATH",
            lab.tmp.path().join(format!("comment-{id}.json")),
        )
        .output()
        .unwrap();
    (out.status.success(), crate::common::lab::text(&out))
}

/// [`job_attempt`] of the comment job, which succeeds: what it said.
fn comment_job_attempt(lab: &Lab, id: u64, attempt: u32) -> String {
    let (ok, text) = job_attempt(lab, "comment", id, attempt);
    assert!(ok, "{text}");
    text
}

/// `body` commented on pull request #1 and its event written for the jobs; the comment's id.
fn comment_event(lab: &Lab, body: &str) -> u64 {
    let p = crate::common::lab::pr_comment_event(&lab.gh, &lab.repository, 1, body);
    let id = p["comment"]["id"].as_u64().unwrap();
    let event = lab.tmp.path().join(format!("comment-{id}.json"));
    std::fs::write(event, p.to_string()).unwrap();
    id
}

/// How many comments on the pull request say `said`, queued commands' markers aside.
fn saying(lab: &Lab, said: &str) -> usize {
    let comments = lab.gh.state().comments;
    let reply = |c: &&Comment| !c.body.starts_with("<!-- dagexec:steer:");
    comments
        .iter()
        .filter(reply)
        .filter(|c| c.body.contains(said))
        .count()
}

/// The comment job run again ("Re-run jobs": the same event, the next attempt) answers a
/// comment it answered already — a command its author may not run, or no command — once: the
/// reply its first attempt posted is found again by its marker, and the first attempt lists no
/// comments to find it.
#[test]
fn a_re_run_of_the_comment_job_replies_once() {
    let lab = chain();
    let denied = comment_event(&lab, "/execute proceed");
    lab.gh.set_permission("Codertocat", "read");
    let lists = || lab.gh.calls("issues/list-comments").len();
    let before = lists();
    let text = comment_job_attempt(&lab, denied, 1);
    assert_eq!(lists(), before, "{text}");
    let text = comment_job_attempt(&lab, denied, 2);
    assert_eq!(saying(&lab, "only people with write"), 1, "{text}");
    lab.gh.set_permission("Codertocat", "write");
    let unknown = comment_event(&lab, "/execute bogus");
    for attempt in [1, 2, 3] {
        let text = comment_job_attempt(&lab, unknown, attempt);
        assert_eq!(saying(&lab, "unknown command `bogus`"), 1, "{text}");
    }
    lab.gh.assert_clean();
}

/// The reason a refused command was not applied reaches its author exactly once, wherever the
/// job that settled it stops: GitHub refusing the reply (as a job killed before it posted it)
/// leaves the marker queued, so the next writer posts it; GitHub refusing the marker's rewrite
/// after the reply (as a job killed between the two) has the next writer rewrite the marker
/// and find the reply posted.
#[test]
fn a_refused_commands_reason_is_posted_once_whichever_step_its_job_stops_at() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let refused = json!({"message": "Resource not accessible by integration"});
    // Task 0 completed in round 1: it cannot be retried; there is no task 9.
    let cases = [
        (
            "/execute retry 0",
            "issues/create-comment",
            "task 0 is completed",
        ),
        ("/execute retry 9", "issues/update-comment", "no task \"9\""),
    ];
    for (run, (body, op, why)) in (2..).zip(cases) {
        let (id, _) = lab.comment_jobs(90 + run, 1, body, false);
        lab.gh.fail_next(op, 403, &[], refused.clone());
        let (_, text) = lab.comment_job_again(90 + run, id, true);
        let r = lab.round(run);
        let (ok, log) = r.finalized.unwrap();
        assert!(ok, "{log}");
        assert!(
            marker(&lab.gh, id).contains("❌ Not applied"),
            "{text}\n{log}"
        );
        assert_eq!(saying(&lab, why), 1, "{why}: {text}\n{log}");
    }
    lab.gh.assert_clean();
}

/// The steer job applied a queued `/execute proceed` — its own command, or one queued before
/// it whose steer job GitHub cancelled, its own then refused —, pushed it, and failed when
/// GitHub refused to start the round; the job run again ("Re-run jobs") starts that round, as
/// the first attempt would have, without applying anything again.
#[test]
fn a_re_run_of_a_steer_job_whose_dispatch_failed_starts_the_round() {
    let lab = chain();
    let r = lab.round(1);
    assert!(r.finalized.as_ref().unwrap().0, "{:?}", r.finalized);
    let refused = json!({"message": "Resource not accessible by integration"});
    // Its own proceed, in round 2; a proceed queued before its own answer nobody asked for, in
    // round 3.
    for (run, queued, own) in [
        (2, None, "/execute proceed"),
        (3, Some("/execute proceed"), "/execute answer 1 yes"),
    ] {
        if let Some(queued) = queued {
            lab.comment_jobs(90, 1, queued, false);
        }
        let (id, _) = lab.comment_jobs(90, 1, own, false);
        lab.gh.fail_next(
            "actions/create-workflow-dispatch",
            403,
            &[],
            refused.clone(),
        );
        let before = lab.dispatches();
        let (ok, text) = job_attempt(&lab, "steer", id, 1);
        assert!(!ok, "{own}: {text}");
        let proceeds = commits(&lab, "dagexec: proceed");
        assert_eq!(proceeds, run - 1, "{own}: {text}");
        let (ok, text) = job_attempt(&lab, "steer", id, 2);
        assert!(ok, "{own}: {text}");
        assert_eq!(lab.dispatches(), before + 2, "{own}: {text}");
        assert_eq!(commits(&lab, "dagexec: proceed"), proceeds, "{own}: {text}");
        // The round the dispatch starts.
        assert!(lab.round(run as u64).finalized.unwrap().0);
    }
    lab.gh.assert_clean();
}

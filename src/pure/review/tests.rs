//! The reviewer loop's rules, prompts and verdict parsing.
use super::*;
use crate::pure::outcome::Verdict;
use crate::pure::plan::model::Status;
use crate::pure::question::Kind;

fn entry(attempt: u32, issues: &[&str]) -> ReviewEntry {
    let review = Review {
        word: Word::Rejected,
        summary: format!("attempt {attempt}"),
        issues: issues
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
        suggestions: vec![],
    };
    ReviewEntry::new(attempt, &review)
}

#[test]
fn parses_the_seeds_blocks() {
    let r = parse("looked at it\nAPPROVED\nsummary: adds the model\n").unwrap();
    assert_eq!(r.word, Word::Approved);
    assert_eq!(r.summary, "adds the model");
    let r = parse(
        "notes\n```\nREJECTED\nsummary: Missing error\n  handling overall\nissues:\n- No try-catch\n- Missing validation\nsuggestions:\n- Wrap it\n```\n",
    )
    .unwrap();
    assert_eq!(r.word, Word::Rejected);
    assert_eq!(r.summary, "Missing error handling overall");
    assert_eq!(r.issues, vec!["No try-catch", "Missing validation"]);
    assert_eq!(r.suggestions, vec!["Wrap it"]);
    // The last verdict counts; decorated verdict lines are accepted.
    let r = parse("APPROVED\nsummary: first\n**REJECTED**\nissues:\n* bad\n").unwrap();
    assert_eq!(
        (r.word, r.issues),
        (Word::Rejected, vec!["bad".to_string()])
    );
    // "APPROVED by me" is prose, not a verdict.
    let e = parse("APPROVED by me\nall good").unwrap_err();
    assert_eq!(
        e,
        ReviewParseError::NoVerdict {
            last: "all good".into()
        }
    );
    assert!(e.to_string().contains("APPROVED or REJECTED"));
}

#[test]
fn hash_ignores_order_and_padding() {
    let a = issues_hash(&["x".into(), " y ".into()]);
    assert_eq!(a, issues_hash(&["y".into(), "x".into()]));
    assert_ne!(a, issues_hash(&["x".into()]));
    assert_ne!(
        issues_hash(&["ab".into()]),
        issues_hash(&["a".into(), "b".into()])
    );
    assert_eq!(issues_hash(&[]).len(), 16);
}

#[test]
fn retry_then_escalate_and_no_progress() {
    let h = vec![entry(1, &["a"])];
    assert_eq!(after_rejection(&h, 1), AfterRejection::Retry);
    let h = vec![entry(1, &["a"]), entry(2, &["b"])];
    assert_eq!(after_rejection(&h, 2), AfterRejection::Retry);
    let h = vec![entry(1, &["a"]), entry(2, &["b"]), entry(3, &["c"])];
    assert_eq!(
        after_rejection(&h, 3),
        AfterRejection::Escalate(Escalation::MaxAttempts)
    );
    // Three identical in a row: early, whatever the attempt number (history carried over
    // an answer restarts the numbering).
    let h = vec![entry(1, &["a"]), entry(2, &["a"]), entry(1, &["a"])];
    assert_eq!(
        after_rejection(&h, 1),
        AfterRejection::Escalate(Escalation::NoProgress)
    );
    // An approval in between breaks the streak.
    let mut h = vec![entry(1, &["a"]), entry(2, &["a"])];
    let mut approved = entry(9, &[]);
    approved.review.word = Word::Approved;
    h.insert(1, approved);
    h.push(entry(1, &["a"]));
    assert_eq!(after_rejection(&h, 1), AfterRejection::Retry);
    assert_eq!(
        (start_for(2), start_for(3), start_for(1)),
        (NextTree::Continue, NextTree::Fresh, NextTree::Fresh)
    );
}

#[test]
fn conclude_applies_the_seeds_rules_to_the_verdict() {
    let task = Task {
        subject: "Write a".into(),
        ..Task::default()
    };
    let done = || Verdict {
        status: Status::Completed,
        result: "wrote a".into(),
        acceptance_passed: true,
        failed_checks: Vec::new(),
        warnings: Vec::new(),
        halt: None,
    };
    let rejected = parse("REJECTED\nsummary: thin\nissues:\n- no tests\n").unwrap();
    // Attempt 1 rejected: failed, retried, the history holds it.
    let mut v = done();
    let c = conclude(0, &task, 1, &mut v, Vec::new(), Ok(&rejected));
    assert_eq!(
        (v.status, v.result.as_str()),
        (Status::Failed, "reviewer rejected: thin")
    );
    assert!(c.retry && c.question.is_none());
    assert_eq!(c.history.len(), 1);
    // Then approved: completed, the approval in the result.
    let mut v = done();
    let approved = parse("APPROVED\nsummary: good now\n").unwrap();
    let c2 = conclude(0, &task, 2, &mut v, c.history.clone(), Ok(&approved));
    assert_eq!(v.status, Status::Completed);
    assert_eq!(
        v.result,
        "wrote a (reviewer approved after 1 rejection(s): good now)"
    );
    assert_eq!(
        latest_word(&with(&c2.history), None),
        "approved after 1 rejection"
    );
    // The third identical rejection escalates with a question.
    let mut h = c.history.clone();
    h.push(ReviewEntry::new(2, &rejected));
    assert_eq!(latest_word(&with(&h), None), "rejected ×2");
    let mut v = done();
    let c3 = conclude(0, &task, 3, &mut v, h, Ok(&rejected));
    assert_eq!(v.status, Status::Blocked);
    assert!(
        v.result
            .starts_with("escalated to the user after 3 rejection(s)")
    );
    let q = c3.question.unwrap();
    assert_eq!(q.kind, Kind::Review);
    assert!(
        q.text.contains("same issues 3 times in a row"),
        "{}",
        q.text
    );
    // A reviewer without a verdict fails the attempt and leaves the history alone.
    let mut v = done();
    let c4 = conclude(0, &task, 1, &mut v, c.history.clone(), Err("no verdict"));
    assert_eq!(
        (v.status, v.result.as_str()),
        (Status::Failed, "review failed: no verdict")
    );
    assert_eq!(c4.history, c.history);
    assert!(!c4.retry);
    // Never reviewed; approved and trimmed.
    assert_eq!(latest_word(&Task::default(), None), "");
    assert_eq!(latest_word(&Task::default(), Some(0)), "approved");
}

fn with(history: &[ReviewEntry]) -> Task {
    let mut t = Task::default();
    set_history(&mut t, history);
    t
}

#[test]
fn reviewer_per_task_overrides_the_run() {
    let mut t = Task::default();
    assert_eq!(reviewer_for(&t, Some("r")), Some("r"));
    assert_eq!(reviewer_for(&t, None), None);
    t.extra.insert(REVIEWER_FIELD.into(), "mine".into());
    assert_eq!(reviewer_for(&t, Some("r")), Some("mine"));
    t.extra.insert(REVIEWER_FIELD.into(), false.into());
    assert_eq!(reviewer_for(&t, Some("r")), None);
}

#[test]
fn history_round_trips_through_the_task() {
    let mut t = Task::default();
    assert!(history(&t).is_empty());
    let h = vec![entry(1, &["a"]), entry(2, &["b"])];
    set_history(&mut t, &h);
    assert_eq!(history(&t), h);
}

#[test]
fn snapshot_prompts() {
    let plan = crate::testing::example("auth-v2.json");
    let task = &plan.tasks[1];
    let changed = vec!["src/auth.ts".to_string()];
    let prompt = review_prompt(&ReviewInput {
        index: 1,
        task,
        attempt: 2,
        worker_summary: "Added login",
        changed: &changed,
        diff: "diff --git a/src/auth.ts b/src/auth.ts\n+login()\n",
    });
    insta::assert_snapshot!("review_prompt", prompt);
    let h = vec![
        entry(1, &["No try-catch", "Missing validation"]),
        entry(2, &["No edge case tests"]),
    ];
    insta::assert_snapshot!("feedback_fresh", feedback_section(&h, start_for(3)));
    insta::assert_snapshot!(
        "escalation_question",
        escalation_question(1, task, &h, &Escalation::MaxAttempts)
    );
}

#[test]
fn the_program_of_a_command_line() {
    for (line, want) in [
        ("claude -p", Some("claude")),
        ("  ./review.sh --strict", Some("./review.sh")),
        ("sh '/tmp/a b/r.sh'", Some("sh")),
        ("'/opt/my tools/rev' x", Some("/opt/my tools/rev")),
        ("\"rev\" x", Some("rev")),
        ("FOO=1 BAR=x rev --x", Some("rev")),
        ("rev;echo", Some("rev")),
        ("rev|cat", Some("rev")),
        ("$HOME/bin/rev", None),
        ("\"$R\" x", None),
        ("exec rev", None),
        ("true", None),
        ("(cd x && rev)", None),
        ("~/bin/rev", None),
        ("", None),
        ("FOO=1", None),
        ("'unclosed", None),
        ("#!/bin/sh\ncat > /dev/null", None),
        ("# the team's worker\nclaude -p", None),
    ] {
        assert_eq!(program(line).as_deref(), want, "{line:?}");
    }
}

#[test]
fn a_failed_reviewer_is_described_in_words() {
    use crate::pure::outcome::Exit;
    let s = reviewer_failure(&Exit::Code(3), "warming up\nerror: no model\n\n");
    assert_eq!(
        s,
        "the reviewer exited with status 3; its stderr ends: warming up | error: no model"
    );
    assert!(!s.contains("Code("));
    assert_eq!(
        reviewer_failure(&Exit::Code(137), ""),
        "the reviewer crashed: killed by signal 9 (exit status 137) (no stderr)"
    );
    assert_eq!(
        reviewer_failure(&Exit::Signal(11), "boom"),
        "the reviewer crashed: killed by signal 11; its stderr ends: boom"
    );
    let long = "x".repeat(1000);
    assert!(reviewer_failure(&Exit::Code(1), &long).chars().count() < 500);
}

/// A diff too long for the prompt is cut with a pointer to the rest that agrees with the
/// prompt's own account of where the changes are: against `$DAGEXEC_BASE`, committed or not
/// (`git diff HEAD` would miss what the implementer committed).
#[test]
fn a_cut_diff_points_at_the_rest_against_the_base() {
    let plan = crate::testing::example("auth-v2.json");
    let diff = "+x\n".repeat(MAX_DIFF_BYTES);
    let prompt = review_prompt(&ReviewInput {
        index: 1,
        task: &plan.tasks[1],
        attempt: 1,
        worker_summary: "Added login",
        changed: &[],
        diff: &diff,
    });
    assert!(
        prompt.contains(&format!(
            "(diff cut at {MAX_DIFF_BYTES} bytes; run `git diff $DAGEXEC_BASE` for the rest)"
        )),
        "{}",
        &prompt[prompt.find("(diff cut").unwrap_or(0)..][..80]
    );
}

//! `/execute` comments against the fake GitHub API, from GitHub's own webhook payloads: who
//! may run them, the 👀 acknowledgement, the replies, the events that make no call at all, and
//! the one status comment updated in place.

use crate::common::fake_github;

use dagexec::action::steering::comment::{
    self, Handled, STATUS_MARKER, SlashCommand, Trigger, classify, handle,
};
use dagexec::edge::github::{Client, RepoName, Token};
use fake_github::FakeGitHub;
use serde_json::{Value, json};

const REPO: &str = "Codertocat/Hello-World";
const COMMENT_ID: u64 = 492700400;

fn webhook(name: &str) -> Value {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/github/webhooks/"
    );
    let text = std::fs::read_to_string(format!("{dir}{name}")).expect("webhook example");
    serde_json::from_str(&text).expect("webhook JSON")
}

/// GitHub's example comment by `Codertocat`, on pull request #1 of `REPO`, saying `body`.
fn pr_comment(body: &str) -> Value {
    let mut p = webhook("issue_comment.created.0.json");
    p["issue"]["pull_request"] =
        json!({ "url": format!("https://api.github.com/repos/{REPO}/pulls/1") });
    p["comment"]["body"] = json!(body);
    p
}

/// A client for `REPO` on the fake, with pull request #1 from `head` (`branch` or
/// `owner:branch`) opened.
async fn setup(head: &str) -> (FakeGitHub, Client) {
    let gh = FakeGitHub::start().await;
    let client = Client::new(
        &gh.url(),
        &Token::new("ghs_test"),
        RepoName::parse(REPO).unwrap(),
    )
    .unwrap();
    let pr = client
        .create_pull(head, "main", "dagexec: add auth", "plan", true)
        .await
        .unwrap();
    assert_eq!(pr.number, 1);
    (gh, client)
}

/// What the action's `comment` command does with an event: classify, then handle.
async fn on_event(client: &Client, event: &str, payload: &Value) -> Option<Handled> {
    match classify(event, payload) {
        Ok(trigger) => Some(handle(client, &trigger).await.expect("handled")),
        Err(why) => {
            eprintln!("ignored: {why}");
            None
        }
    }
}

/// The text of dagexec's reply to the example comment: after its marker, by which a re-run of
/// the job finds it again.
fn replied(body: &str) -> &str {
    let marker = format!("{}\n", comment::reply_marker(COMMENT_ID));
    body.strip_prefix(&marker)
        .unwrap_or_else(|| panic!("no reply marker: {body}"))
}

fn ops(gh: &FakeGitHub) -> Vec<String> {
    gh.requests().into_iter().map(|r| r.operation_id).collect()
}

#[tokio::test]
async fn a_collaborators_execute_is_acknowledged_and_runs_on_the_head_branch() {
    let (gh, client) = setup("dagexec/add-auth").await;
    gh.set_permission("Codertocat", "maintain");
    let out = on_event(&client, "issue_comment", &pr_comment("/execute")).await;
    assert_eq!(
        out,
        Some(Handled::Run {
            head_branch: "dagexec/add-auth".into(),
            command: SlashCommand::Start,
        })
    );
    let state = gh.state();
    assert_eq!(state.reactions.len(), 1);
    assert_eq!(
        (
            state.reactions[0].comment_id,
            state.reactions[0].content.as_str()
        ),
        (COMMENT_ID, "eyes")
    );
    assert!(state.comments.is_empty(), "no reply: {:?}", state.comments);
    let perm = gh.calls("repos/get-collaborator-permission-level");
    assert_eq!(perm.len(), 1);
    assert_eq!(
        perm[0].path,
        format!("/repos/{REPO}/collaborators/Codertocat/permission")
    );

    // An answer spanning lines reaches the caller as data, unchanged.
    gh.set_permission("Codertocat", "admin");
    let body = "/execute answer 2 Use Postgres;\r\n`$(rm -rf /)` stays text";
    let out = on_event(&client, "issue_comment", &pr_comment(body)).await;
    let command = SlashCommand::Answer {
        task: "2".into(),
        text: "Use Postgres;\n`$(rm -rf /)` stays text".into(),
    };
    assert_eq!(
        out,
        Some(Handled::Run {
            head_branch: "dagexec/add-auth".into(),
            command,
        })
    );
    gh.assert_clean();
}

#[tokio::test]
async fn without_write_access_there_is_one_reply_and_nothing_else() {
    for role in ["read", "triage", "none"] {
        let (gh, client) = setup("dagexec/add-auth").await;
        gh.set_permission("Codertocat", role);
        let before = gh.requests().len();
        let out = on_event(&client, "issue_comment", &pr_comment("/execute abort")).await;
        assert_eq!(out, Some(Handled::Denied), "{role}");
        assert_eq!(
            ops(&gh)[before..],
            [
                "repos/get-collaborator-permission-level",
                "issues/create-comment"
            ],
            "{role}"
        );
        let state = gh.state();
        assert!(state.reactions.is_empty(), "{role}");
        assert_eq!(state.comments.len(), 1, "{role}");
        assert_eq!(state.comments[0].issue_number, 1);
        assert_eq!(
            replied(&state.comments[0].body),
            comment::denied_reply("Codertocat", role),
            "{role}"
        );
        gh.assert_clean();
    }
}

/// In a private repository GitHub answers 404 for the access of someone who is no
/// collaborator: that is no access, answered as `none` is, not a failed job.
#[tokio::test]
async fn someone_github_knows_no_access_for_is_answered_as_without_access() {
    let (gh, client) = setup("dagexec/add-auth").await;
    let op = "repos/get-collaborator-permission-level";
    let not_found =
        json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest"});
    gh.fail_next(op, 404, &[], not_found);
    let out = on_event(&client, "issue_comment", &pr_comment("/execute")).await;
    assert_eq!(out, Some(Handled::Denied));
    let state = gh.state();
    assert_eq!(state.comments.len(), 1);
    assert_eq!(
        replied(&state.comments[0].body),
        comment::denied_reply("Codertocat", "none")
    );
    assert!(state.reactions.is_empty());
    gh.assert_clean();
}

#[tokio::test]
async fn bots_edits_and_issue_comments_make_no_call_at_all() {
    let (gh, client) = setup("dagexec/add-auth").await;
    let before = gh.requests().len();
    let mut bot = pr_comment("/execute");
    bot["comment"]["user"]["type"] = json!("Bot");
    let mut app = pr_comment("/execute");
    app["comment"]["user"]["login"] = json!("dagexec-app[bot]");
    let mut edited = webhook("issue_comment.edited.7.json");
    edited["issue"]["pull_request"] = json!({ "url": "https://api.github.com/x" });
    edited["comment"]["body"] = json!("/execute");
    let mut issue = webhook("issue_comment.created.3.json");
    issue["comment"]["body"] = json!("/execute");
    let mut deleted = pr_comment("/execute");
    deleted["action"] = json!("deleted");
    for (event, payload) in [
        ("issue_comment", &bot),
        ("issue_comment", &app),
        ("issue_comment", &edited),
        ("issue_comment", &issue),
        ("issue_comment", &deleted),
        ("issue_comment", &pr_comment("Thanks! /execute later")),
        ("pull_request", &webhook("pull_request.opened.12.json")),
    ] {
        assert_eq!(on_event(&client, event, payload).await, None);
    }
    assert_eq!(gh.requests().len(), before, "{:?}", &ops(&gh)[before..]);
    gh.assert_clean();
}

#[tokio::test]
async fn an_unknown_command_is_answered_with_the_list() {
    let (gh, client) = setup("dagexec/add-auth").await;
    let out = on_event(&client, "issue_comment", &pr_comment("/execute bogus")).await;
    assert_eq!(out, Some(Handled::Replied));
    let state = gh.state();
    assert_eq!(state.reactions.len(), 1);
    assert_eq!(state.comments.len(), 1);
    let reply = replied(&state.comments[0].body);
    assert!(reply.starts_with("unknown command `bogus`, so nothing was run."));
    assert!(reply.ends_with(&comment::help_text()));
    assert!(gh.calls("pulls/get").is_empty());
    gh.assert_clean();
}

#[tokio::test]
async fn a_fork_or_closed_pull_request_is_refused_with_a_reply() {
    let (gh, client) = setup("someone:feature").await;
    let out = on_event(&client, "issue_comment", &pr_comment("/execute")).await;
    assert_eq!(out, Some(Handled::Replied));
    assert!(gh.state().comments[0].body.contains("fork"));
    gh.assert_clean();

    let (gh, client) = setup("dagexec/add-auth").await;
    let path = client.repo_path("/pulls/1");
    let close = json!({ "state": "closed" });
    client
        .rest("pulls/update", http::Method::PATCH, &path, Some(&close))
        .await
        .unwrap();
    let trigger: Trigger = classify("issue_comment", &pr_comment("/execute status")).unwrap();
    assert_eq!(handle(&client, &trigger).await.unwrap(), Handled::Replied);
    assert!(gh.state().comments[0].body.contains("closed"));
    gh.assert_clean();
}

/// dagexec's own marked comments on #1, as finalize finds them before it upserts.
async fn own(client: &Client) -> Vec<dagexec::edge::github::comments::IssueComment> {
    comment::trusted_marked(client, 1, comment::Identity::default())
        .await
        .unwrap()
        .own
}

/// A status (or question) comment someone deleted after dagexec read the pull request's
/// comments — a finalize reads them long before it writes — is written again, and the job
/// does not fail on GitHub's 404.
#[tokio::test]
async fn a_marked_comment_deleted_after_it_was_read_is_written_again() {
    let (gh, client) = setup("dagexec/add-auth").await;
    let first = format!("{STATUS_MARKER}\nround 1");
    let id = client
        .upsert_marked_comment(1, STATUS_MARKER, &first, &own(&client).await)
        .await
        .unwrap();
    let read = own(&client).await;
    gh.delete_comment(id);
    let again = client
        .upsert_marked_comment(1, STATUS_MARKER, "round 2", &read)
        .await
        .unwrap();
    assert_ne!(again, id);
    let now = own(&client).await;
    assert_eq!(now.len(), 1);
    assert_eq!(
        (now[0].id, now[0].body.as_str()),
        (again, format!("{STATUS_MARKER}\nround 2").as_str())
    );
    gh.assert_clean();
}

#[tokio::test]
async fn the_status_comment_is_created_once_then_updated_in_place() {
    let (gh, client) = setup("dagexec/add-auth").await;
    let other = client.comment(1, "LGTM").await.unwrap();
    let first = format!("{STATUS_MARKER}\nround 1");
    let id = client
        .upsert_marked_comment(1, STATUS_MARKER, &first, &own(&client).await)
        .await
        .unwrap();
    assert_ne!(id, other);
    let again = client
        .upsert_marked_comment(1, STATUS_MARKER, "round 2", &own(&client).await)
        .await
        .unwrap();
    assert_eq!(again, id);
    let same = client
        .upsert_marked_comment(1, STATUS_MARKER, "round 2", &own(&client).await)
        .await
        .unwrap();
    assert_eq!(same, id);
    let state = gh.state();
    let bodies: Vec<_> = state.comments.iter().map(|c| c.body.as_str()).collect();
    let want = format!("{STATUS_MARKER}\nround 2");
    assert_eq!(bodies, ["LGTM", want.as_str()]);
    assert_eq!(
        gh.calls("issues/create-comment").len(),
        2,
        "LGTM and status"
    );
    assert_eq!(
        gh.calls("issues/update-comment").len(),
        1,
        "an unchanged body is not sent again"
    );
    let list = gh.calls("issues/list-comments");
    assert_eq!(list.len(), 3);
    assert_eq!(list[0].query.as_deref(), Some("per_page=100&page=1"));
    gh.assert_clean();
}

#[tokio::test]
async fn a_strangers_marked_comment_is_neither_updated_nor_believed() {
    let (gh, client) = setup("dagexec/add-auth").await;
    let repo = "Codertocat/Hello-World";
    // Someone writes a comment that looks like dagexec's status comment asking to abort,
    // before dagexec wrote its own.
    let forged = format!(
        "{STATUS_MARKER}\n{}\nstop everything",
        dagexec::action::steering::ABORT_MARKER
    );
    let theirs = gh.add_comment(repo, 1, "mallory", &forged);
    let found = comment::trusted_marked(&client, 1, comment::Identity::default())
        .await
        .unwrap();
    assert!(found.own.is_empty());
    assert_eq!(found.ignored.len(), 1);
    assert!(!found.abort_requested(dagexec::action::steering::ABORT_MARKER));
    let id = client
        .upsert_marked_comment(1, STATUS_MARKER, "round 1", &found.own)
        .await
        .unwrap();
    assert_ne!(id, theirs, "dagexec writes its own status comment");
    let state = gh.state();
    assert_eq!(
        state.comments[0].body, forged,
        "the stranger's comment is untouched"
    );
    assert_eq!(state.comments[1].user, "github-actions[bot]");
    // dagexec's own comment with the abort marker is believed; so is one the App wrote, for
    // the finalize that authenticates as that App, and no other App's.
    let asked = format!(
        "{STATUS_MARKER}\n{}",
        dagexec::action::steering::ABORT_MARKER
    );
    client.update_comment(id, &asked).await.unwrap();
    let found = comment::trusted_marked(&client, 1, comment::Identity::default())
        .await
        .unwrap();
    assert!(found.abort_requested(dagexec::action::steering::ABORT_MARKER));
    let app_bot = dagexec::edge::github::comments::Author {
        login: "dagexec-test-app[bot]".into(),
        bot: true,
        app_id: Some(123456),
    };
    let app = comment::Identity {
        app_id: Some(123456),
    };
    assert!(app.wrote(&app_bot));
    assert!(!comment::Identity::default().wrote(&app_bot));
    let impostor = dagexec::edge::github::comments::Author {
        login: "github-actions[bot]".into(),
        bot: false,
        app_id: None,
    };
    assert!(!app.wrote(&impostor));
    gh.assert_clean();
}

//! Self-tests of the fake GitHub server in `common/fake_github.rs`.
//!
//! Requests go through a tiny blocking HTTP/1.1 client on `std::net::TcpStream`, called straight
//! from the async tests: that only works because the fake serves from its own thread.

use crate::common::fake_github;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use fake_github::FakeGitHub;
use serde_json::{Value, json};

struct Reply {
    status: u16,
    headers: HashMap<String, String>,
    body: Value,
}

fn call(gh: &FakeGitHub, method: &str, path: &str, body: Option<Value>) -> Reply {
    let addr = gh.url().trim_start_matches("http://").to_owned();
    let mut s = TcpStream::connect(&addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: token t0k3n\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, rest) = out.split_once("\r\n\r\n").expect("http response");
    let mut lines = head.lines();
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_owned()))
        .collect();
    let body = serde_json::from_str(rest).unwrap_or(Value::Null);
    Reply {
        status,
        headers,
        body,
    }
}

fn create_pr(gh: &FakeGitHub, head: &str, draft: bool) -> Reply {
    let body = json!({"title": "t", "body": "b", "head": head, "base": "main", "draft": draft});
    call(gh, "POST", "/repos/o/r/pulls", Some(body))
}

#[tokio::test]
async fn documented_request_is_answered_with_example_and_state() {
    let gh = FakeGitHub::start().await;
    assert!(!gh.url().ends_with('/'));
    let r = create_pr(&gh, "dagexec/x", true);
    assert_eq!(r.status, 201);
    assert_eq!(r.body["number"], 1);
    assert_eq!(r.body["node_id"], "PR_1");
    assert_eq!(r.body["draft"], true);
    assert_eq!(r.body["head"]["ref"], "dagexec/x");
    assert_eq!(r.body["base"]["ref"], "main");
    assert_eq!(r.body["html_url"], "https://github.com/o/r/pull/1");
    assert_eq!(
        r.body["user"]["login"], "octocat",
        "rest comes from GitHub's example"
    );
    let second = create_pr(&gh, "dagexec/y", false);
    assert_eq!(second.body["number"], 2);
    let got = call(&gh, "GET", "/repos/o/r/pulls/1", None);
    assert_eq!((got.status, got.body["title"].clone()), (200, json!("t")));
    let upd = call(
        &gh,
        "PATCH",
        "/repos/o/r/pulls/1",
        Some(json!({"title": "new", "state": "closed"})),
    );
    assert_eq!(
        (upd.body["title"].as_str(), upd.body["state"].as_str()),
        (Some("new"), Some("closed"))
    );
    let missing = call(&gh, "GET", "/repos/o/r/pulls/9", None);
    assert_eq!(missing.status, 404);
    assert_eq!(missing.body["message"], "Not Found");
    let calls = gh.calls("pulls/create");
    assert_eq!(calls.len(), 2);
    assert_eq!(calls[0].headers["authorization"], "token t0k3n");
    assert_eq!(calls[0].body.as_ref().unwrap()["head"], "dagexec/x");
    assert_eq!(gh.requests().len(), 5);
    assert_eq!(gh.state().pulls[0].title, "new");
    gh.assert_clean();
}

#[tokio::test]
async fn undocumented_path_is_a_violation() {
    let gh = FakeGitHub::start().await;
    assert_eq!(call(&gh, "GET", "/repos/o/r/nonsense", None).status, 404);
    assert_eq!(call(&gh, "DELETE", "/repos/o/r/pulls/1", None).status, 404);
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/pulls/abc", None).status,
        404,
        "pull_number is an integer"
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/pulls?bogus=1", None).status,
        422
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/pulls?state=merged", None).status,
        422
    );
    let v = gh.violations();
    assert_eq!(v.len(), 5, "{v:#?}");
    assert!(v[0].contains("GET /repos/o/r/nonsense"), "{v:#?}");
    assert_eq!(gh.requests()[0].operation_id, "");
    let panic =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| gh.assert_clean())).unwrap_err();
    let msg = panic.downcast_ref::<String>().unwrap();
    assert!(
        msg.contains("5 violation(s)") && msg.contains("nonsense"),
        "{msg}"
    );
}

#[tokio::test]
async fn invalid_body_is_a_violation() {
    let gh = FakeGitHub::start().await;
    let r = call(
        &gh,
        "POST",
        "/repos/o/r/pulls",
        Some(json!({"head": "a", "base": "main", "draft": "yes"})),
    );
    assert_eq!(r.status, 422);
    assert_eq!(r.body["message"], "Validation Failed");
    assert_eq!(
        call(
            &gh,
            "POST",
            "/repos/o/r/pulls",
            Some(json!({"base": "main"}))
        )
        .status,
        422
    );
    assert_eq!(call(&gh, "POST", "/repos/o/r/pulls", None).status, 422);
    let bad_date = json!({"name": "n", "head_sha": "abc", "started_at": "yesterday"});
    assert_eq!(
        call(&gh, "POST", "/repos/o/r/check-runs", Some(bad_date)).status,
        422
    );
    let v = gh.violations();
    assert_eq!(v.len(), 4, "{v:#?}");
    assert!(
        v[0].contains("pulls/create") && v[0].contains("/draft"),
        "{v:#?}"
    );
    assert!(v[1].contains("head"), "{v:#?}");
    assert!(gh.state().pulls.is_empty() && gh.state().check_runs.is_empty());
}

#[tokio::test]
async fn fail_next_answers_scripted_then_normal() {
    let gh = FakeGitHub::start().await;
    gh.fail_next(
        "pulls/create",
        429,
        &[("retry-after", "1")],
        json!({"message": "slow down"}),
    );
    gh.fail_next("pulls/create", 502, &[], Value::Null);
    let r = create_pr(&gh, "x", false);
    assert_eq!((r.status, r.headers["retry-after"].as_str()), (429, "1"));
    assert_eq!(r.body["message"], "slow down");
    assert_eq!(create_pr(&gh, "x", false).status, 502);
    let r = create_pr(&gh, "x", false);
    assert_eq!((r.status, r.body["number"].as_u64()), (201, Some(1)));
    assert_eq!(gh.calls("pulls/create").len(), 3);
    assert_eq!(gh.state().pulls.len(), 1);
    gh.assert_clean();
}

#[tokio::test]
async fn pulls_are_listed_by_head_and_state() {
    let gh = FakeGitHub::start().await;
    create_pr(&gh, "dagexec/a", false);
    create_pr(&gh, "dagexec/b", false);
    let list = |q: &str| call(&gh, "GET", &format!("/repos/o/r/pulls?{q}"), None).body;
    let a = list("head=o:dagexec/a");
    assert_eq!(a.as_array().unwrap().len(), 1);
    assert_eq!(
        (a[0]["number"].as_u64(), a[0]["head"]["ref"].as_str()),
        (Some(1), Some("dagexec/a"))
    );
    assert_eq!(list("head=other:dagexec/a"), json!([]));
    assert_eq!(
        list("head=o%3Adagexec%2Fb&state=open&per_page=100")[0]["number"],
        2
    );
    call(
        &gh,
        "PATCH",
        "/repos/o/r/pulls/1",
        Some(json!({"state": "closed"})),
    );
    assert_eq!(list("head=o:dagexec/a"), json!([]));
    assert_eq!(list("head=o:dagexec/a&state=closed")[0]["state"], "closed");
    assert_eq!(list("state=all").as_array().unwrap().len(), 2);
    assert_eq!(
        call(&gh, "GET", "/repos/other/r/pulls", None).body,
        json!([])
    );
    gh.assert_clean();
}

#[tokio::test]
async fn graphql_ready_for_review_flips_draft() {
    let gh = FakeGitHub::start().await;
    create_pr(&gh, "a", true);
    create_pr(&gh, "b", true);
    let q = "mutation($pullRequestId: ID!) { markPullRequestReadyForReview(input: {pullRequestId: $pullRequestId}) { pullRequest { isDraft number } } }";
    let r = call(
        &gh,
        "POST",
        "/graphql",
        Some(json!({"query": q, "variables": {"pullRequestId": "PR_2"}})),
    );
    assert_eq!(
        r.body,
        json!({"data": {"markPullRequestReadyForReview": {"pullRequest": {"isDraft": false, "number": 2}}}})
    );
    let drafts: Vec<bool> = gh.state().pulls.iter().map(|p| p.draft).collect();
    assert_eq!(drafts, [true, false]);
    let inline = r#"mutation { markPullRequestReadyForReview(input: {pullRequestId: "PR_1"}) { clientMutationId } }"#;
    assert_eq!(
        call(&gh, "POST", "/graphql", Some(json!({"query": inline}))).status,
        200
    );
    assert!(!gh.state().pulls[0].draft);
    assert_eq!(gh.calls("graphql").len(), 2);
    gh.assert_clean();
    let other = json!({"query": "query { viewer { login } }"});
    assert_eq!(call(&gh, "POST", "/graphql", Some(other)).status, 422);
    assert_eq!(gh.violations().len(), 1);
}

#[tokio::test]
async fn comments_checks_dispatches_and_the_rest() {
    let gh = FakeGitHub::start().await;
    let c = call(
        &gh,
        "POST",
        "/repos/o/r/issues/7/comments",
        Some(json!({"body": "hi"})),
    );
    assert_eq!(
        (c.status, c.body["id"].as_u64(), c.body["body"].as_str()),
        (201, Some(1000), Some("hi"))
    );
    call(
        &gh,
        "PATCH",
        "/repos/o/r/issues/comments/1000",
        Some(json!({"body": "edited"})),
    );
    let list = call(&gh, "GET", "/repos/o/r/issues/7/comments", None).body;
    assert_eq!(
        (list.as_array().unwrap().len(), list[0]["body"].as_str()),
        (1, Some("edited"))
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/issues/comments/1000", None).body["body"],
        "edited"
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/issues/comments/1", None).status,
        404
    );
    let react = call(
        &gh,
        "POST",
        "/repos/o/r/issues/comments/1000/reactions",
        Some(json!({"content": "eyes"})),
    );
    assert_eq!(
        (react.status, react.body["content"].as_str()),
        (201, Some("eyes"))
    );

    let run = json!({"name": "dagexec", "head_sha": "abc", "status": "in_progress", "output": {"title": "T", "summary": "S"}});
    let r = call(&gh, "POST", "/repos/o/r/check-runs", Some(run));
    assert_eq!(
        (r.body["id"].as_u64(), r.body["status"].as_str()),
        (Some(5000), Some("in_progress"))
    );
    assert_eq!(
        (
            r.body["conclusion"].clone(),
            r.body["output"]["title"].clone()
        ),
        (Value::Null, json!("T"))
    );
    call(
        &gh,
        "PATCH",
        "/repos/o/r/check-runs/5000",
        Some(json!({"conclusion": "success"})),
    );
    let got = call(&gh, "GET", "/repos/o/r/check-runs/5000", None).body;
    assert_eq!(
        (got["status"].as_str(), got["conclusion"].as_str()),
        (Some("completed"), Some("success"))
    );

    let d = json!({"ref": "main", "inputs": {"task": "t1"}});
    let r = call(
        &gh,
        "POST",
        "/repos/o/r/actions/workflows/dagexec.yml/dispatches",
        Some(d),
    );
    assert_eq!((r.status, r.body.clone()), (204, Value::Null));

    let perm = |u: &str| {
        call(
            &gh,
            "GET",
            &format!("/repos/o/r/collaborators/{u}/permission"),
            None,
        )
        .body
    };
    assert_eq!(
        (
            perm("amy")["permission"].as_str(),
            perm("amy")["user"]["login"].as_str()
        ),
        (Some("write"), Some("amy"))
    );
    gh.set_permission("bob", "triage");
    assert_eq!(
        (
            perm("bob")["permission"].as_str(),
            perm("bob")["role_name"].as_str()
        ),
        (Some("read"), Some("triage"))
    );

    let r = call(&gh, "GET", "/repos/o/r/git/ref/heads/dagexec/x", None);
    assert_eq!(
        (r.status, r.body["ref"].as_str()),
        (200, Some("refs/heads/dagexec/x"))
    );
    let r = call(
        &gh,
        "PATCH",
        "/repos/o/r/git/refs/heads%2Fdagexec%2Fx",
        Some(json!({"sha": "def", "force": true})),
    );
    assert_eq!(
        (r.body["ref"].as_str(), r.body["object"]["sha"].as_str()),
        (Some("refs/heads/dagexec/x"), Some("def"))
    );
    let r = call(
        &gh,
        "POST",
        "/repos/o/r/git/refs",
        Some(json!({"ref": "refs/heads/n", "sha": "abc"})),
    );
    assert_eq!(
        (r.status, r.body["ref"].as_str()),
        (201, Some("refs/heads/n"))
    );
    assert_eq!(
        call(&gh, "POST", "/app/installations/42/access_tokens", None).body["token"],
        "ghs_fake_installation_token"
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/installation", None).status,
        200
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r", None).body["full_name"],
        "o/r"
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/actions/runs/77", None).body["id"],
        77
    );
    assert_eq!(
        call(&gh, "GET", "/repos/o/r/actions/runs/77/artifacts", None).status,
        200
    );
    assert_eq!(
        call(
            &gh,
            "POST",
            "/repos/o/r/issues/3/labels",
            Some(json!({"labels": ["x"]}))
        )
        .status,
        200
    );

    let st = gh.state();
    assert_eq!(
        (
            st.comments.len(),
            st.reactions[0].comment_id,
            st.check_runs[0].name.as_str()
        ),
        (1, 1000, "dagexec")
    );
    assert_eq!(
        (
            st.dispatches[0].workflow_id.as_str(),
            st.dispatches[0].git_ref.as_str()
        ),
        ("dagexec.yml", "main")
    );
    assert_eq!(st.dispatches[0].inputs, json!({"task": "t1"}));
    gh.assert_clean();
}

/// The fake keeps serving while the test thread (and its runtime) blocks, e.g. on a subprocess.
#[tokio::test]
async fn serves_while_the_test_thread_blocks() {
    let gh = FakeGitHub::start().await;
    let curl = std::process::Command::new("curl")
        .args(["-sS", "--max-time", "20", "-H", "Authorization: Bearer jwt"])
        .arg(format!(
            "{}/repos/o/r/collaborators/amy/permission",
            gh.url()
        ))
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl runs");
    std::thread::sleep(Duration::from_millis(1500));
    let out = curl.wait_with_output().unwrap();
    assert!(out.status.success());
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["permission"], "write");
    assert_eq!(
        gh.calls("repos/get-collaborator-permission-level")[0].headers["authorization"],
        "Bearer jwt"
    );
    gh.assert_clean();
}

/// A plain blocking `#[test]` starts the fake with a throw-away runtime.
#[test]
fn usable_from_blocking_tests() {
    let gh = tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(FakeGitHub::start());
    let worker = std::thread::spawn({
        let url = gh.url();
        move || {
            std::process::Command::new("curl")
                .args(["-sS", "--max-time", "20", &format!("{url}/repos/o/r")])
                .output()
                .unwrap()
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let out = worker.join().unwrap();
    let body: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(body["full_name"], "o/r");
    gh.assert_clean();
}

//! The GitHub client (`dagexec::edge::github`) against the fake GitHub API: the GitHub App token
//! exchange, the retry policy through real calls, and tokens kept out of `Debug`.

use crate::common::fake_github;

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use dagexec::edge::github::app::installation_token;
use dagexec::edge::github::ops::CompletedCheckRun;
use dagexec::edge::github::{ApiError, Client, RepoName, Token};
use fake_github::FakeGitHub;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde_json::json;

/// The throwaway, test-only key of `tests/fixtures/app-key.pem`.
const KEY: &str = include_str!("../fixtures/app-key.pem");

fn repo() -> RepoName {
    RepoName::parse("o/r").unwrap()
}

fn client(gh: &FakeGitHub) -> Client {
    let mut c = Client::new(&gh.url(), &Token::new("ghs_test_token"), repo()).unwrap();
    // Quick back-off for the 5xx tests; rate-limit waits come from GitHub's headers.
    c.policy.base = Duration::from_millis(50);
    c
}

fn epoch_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

// ---------------------------------------------------------------- GitHub App

/// The fixture key's public half (`openssl rsa -pubout`): enough to verify the JWT's signature.
fn public_key() -> DecodingKey {
    DecodingKey::from_rsa_pem(include_bytes!("../fixtures/app-key.pub.pem")).unwrap()
}

#[derive(serde::Deserialize)]
struct Claims {
    iat: u64,
    exp: u64,
    iss: String,
}

#[tokio::test]
async fn app_token_exchange_end_to_end() {
    let gh = FakeGitHub::start().await;
    let before = epoch_now();
    let token = installation_token(&gh.url(), &repo(), "123456", KEY)
        .await
        .unwrap();
    assert_eq!(token.expose(), "ghs_fake_installation_token");
    assert_eq!(format!("{token:?}"), "Token(***)");

    let lookup = gh.calls("apps/get-repo-installation");
    let create = gh.calls("apps/create-installation-access-token");
    assert_eq!((lookup.len(), create.len(), gh.requests().len()), (1, 1, 2));
    assert_eq!(lookup[0].path, "/repos/o/r/installation");
    // The id from GitHub's example installation; the token is scoped to the one repository.
    assert_eq!(create[0].path, "/app/installations/1/access_tokens");
    assert_eq!(create[0].body, Some(json!({ "repositories": ["r"] })));

    for call in [&lookup[0], &create[0]] {
        let auth = &call.headers["authorization"];
        let jwt = auth.strip_prefix("Bearer ").expect(auth);
        let mut v = Validation::new(Algorithm::RS256);
        v.set_issuer(&["123456"]);
        v.set_required_spec_claims(&["iat", "exp", "iss"]);
        let claims = jsonwebtoken::decode::<Claims>(jwt, &public_key(), &v)
            .expect("a JWT signed with the app's key")
            .claims;
        assert_eq!(claims.iss, "123456");
        assert!(claims.iat + 60 >= before && claims.iat + 60 <= epoch_now());
        assert_eq!(claims.exp - claims.iat, 600, "exp is 9 minutes from now");
    }
    gh.assert_clean();
}

#[tokio::test]
async fn app_token_exchange_failures_say_why() {
    let gh = FakeGitHub::start().await;
    let not_found = json!({"message": "Not Found", "documentation_url": "https://docs.github.com/rest/apps/apps#get-a-repository-installation-for-the-authenticated-app"});
    gh.fail_next("apps/get-repo-installation", 404, &[], not_found);
    let e = installation_token(&gh.url(), &repo(), "123456", KEY)
        .await
        .unwrap_err();
    let s = e.to_string();
    assert_eq!(e.status(), Some(404));
    assert!(
        s.starts_with("apps/get-repo-installation: GitHub answered 404: Not Found"),
        "{s}"
    );
    assert!(
        s.contains("the GitHub App `123456` is not installed on o/r"),
        "{s}"
    );

    let bad_jwt = json!({"message": "A JSON web token could not be decoded"});
    gh.fail_next("apps/get-repo-installation", 401, &[], bad_jwt);
    let s = installation_token(&gh.url(), &repo(), "123456", KEY)
        .await
        .unwrap_err()
        .to_string();
    assert!(s.contains("A JSON web token could not be decoded"), "{s}");
    assert!(s.contains("`app-id` and `private-key`"), "{s}");

    // A bad key fails before any call, without quoting the key.
    let n = gh.requests().len();
    let e = installation_token(
        &gh.url(),
        &repo(),
        "123456",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEsecretstuff\n-----END RSA PRIVATE KEY-----",
    )
    .await
    .unwrap_err();
    assert!(matches!(e, ApiError::Invalid { .. }), "{e:?}");
    assert!(!e.to_string().contains("secretstuff"), "{e}");
    assert_eq!(gh.requests().len(), n);
    assert!(gh.calls("apps/create-installation-access-token").is_empty());
    gh.assert_clean();
}

// ---------------------------------------------------------------- the retry policy

#[tokio::test]
async fn a_429_with_retry_after_is_retried_after_waiting() {
    let gh = FakeGitHub::start().await;
    gh.fail_next(
        "pulls/list",
        429,
        &[("retry-after", "1")],
        json!({"message": "Too Many Requests"}),
    );
    let t = Instant::now();
    assert_eq!(client(&gh).find_pull("b").await.unwrap(), None);
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(gh.calls("pulls/list").len(), 2);
    gh.assert_clean();
}

#[tokio::test]
async fn an_exhausted_primary_limit_waits_for_the_reset() {
    let gh = FakeGitHub::start().await;
    let reset = (epoch_now() + 1).to_string();
    gh.fail_next(
        "pulls/list",
        403,
        &[
            ("x-ratelimit-limit", "5000"),
            ("x-ratelimit-remaining", "0"),
            ("x-ratelimit-reset", &reset),
        ],
        json!({"message": "API rate limit exceeded for installation ID 1."}),
    );
    let t = Instant::now();
    assert_eq!(client(&gh).find_pull("b").await.unwrap(), None);
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(gh.calls("pulls/list").len(), 2);
    gh.assert_clean();
}

#[tokio::test]
async fn a_secondary_rate_limit_is_retried() {
    let gh = FakeGitHub::start().await;
    gh.fail_next(
        "pulls/create",
        403,
        &[("retry-after", "1")],
        json!({"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
               "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"}),
    );
    let t = Instant::now();
    let pr = client(&gh)
        .create_pull("b", "main", "t", "body", true)
        .await
        .unwrap();
    assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
    assert_eq!(pr.number, 1);
    // Scripted failures change no state: one pull request, from the retry.
    assert_eq!(gh.calls("pulls/create").len(), 2);
    assert_eq!(gh.state().pulls.len(), 1);
    gh.assert_clean();
}

#[tokio::test]
async fn server_errors_are_retried_with_backoff_then_given_up() {
    let gh = FakeGitHub::start().await;
    let c = client(&gh);
    for _ in 0..2 {
        gh.fail_next("pulls/list", 502, &[], json!({"message": "Bad Gateway"}));
    }
    assert_eq!(c.find_pull("b").await.unwrap(), None);
    assert_eq!(gh.calls("pulls/list").len(), 3);

    // Every attempt failing: the last answer, saying it was retried.
    let mut c = c;
    c.policy.max_attempts = 3;
    for _ in 0..3 {
        gh.fail_next("pulls/get", 503, &[], serde_json::Value::Null);
    }
    let s = c.pull_head(1).await.unwrap_err().to_string();
    assert_eq!(
        s,
        "pulls/get: GitHub answered 503: HTTP 503 with no message (still failing after 3 attempts)"
    );
    assert_eq!(gh.calls("pulls/get").len(), 3);
    gh.assert_clean();
}

#[tokio::test]
async fn a_404_is_not_retried_and_names_the_operation() {
    let gh = FakeGitHub::start().await;
    let e = client(&gh).pull_head(42).await.unwrap_err();
    assert_eq!(e.status(), Some(404));
    let s = e.to_string();
    assert!(
        s.starts_with("pulls/get: GitHub answered 404: Not Found"),
        "{s}"
    );
    assert_eq!(gh.calls("pulls/get").len(), 1);
    gh.assert_clean();
}

#[tokio::test]
async fn a_plain_403_is_not_retried() {
    let gh = FakeGitHub::start().await;
    gh.fail_next(
        "pulls/create",
        403,
        &[("x-ratelimit-remaining", "4999")],
        json!({"message": "Resource not accessible by integration"}),
    );
    let e = client(&gh)
        .create_pull("b", "main", "t", "body", false)
        .await
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "pulls/create: GitHub answered 403: Resource not accessible by integration"
    );
    assert_eq!(gh.calls("pulls/create").len(), 1);
    gh.assert_clean();
}

#[tokio::test]
async fn a_422_surfaces_githubs_first_error() {
    let gh = FakeGitHub::start().await;
    gh.fail_next(
        "pulls/create",
        422,
        &[],
        json!({
            "message": "Validation Failed",
            "errors": [
                {"resource": "PullRequest", "code": "custom", "message": "A pull request already exists for o:b."},
                {"resource": "PullRequest", "code": "custom", "message": "second"}
            ],
            "documentation_url": "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"
        }),
    );
    let e = client(&gh)
        .create_pull("b", "main", "t", "body", false)
        .await
        .unwrap_err();
    assert_eq!(e.status(), Some(422));
    assert_eq!(
        e.to_string(),
        "pulls/create: GitHub answered 422: Validation Failed — A pull request already exists for o:b."
    );
    assert_eq!(gh.calls("pulls/create").len(), 1);
    gh.assert_clean();
}

// ---------------------------------------------------------------- secrets

#[tokio::test]
async fn the_token_is_sent_but_never_shown() {
    let gh = FakeGitHub::start().await;
    let secret = "ghs_s3cr3tT0k3nValue";
    let c = Client::new(&gh.url(), &Token::new(secret), repo()).unwrap();
    let debug = format!("{c:?} {:#?}", c);
    assert!(!debug.contains(secret), "{debug}");
    assert!(!debug.contains("s3cr3t"), "{debug}");
    // It is the one the client authenticates with.
    c.find_pull("b").await.unwrap();
    assert_eq!(
        gh.calls("pulls/list")[0].headers["authorization"],
        format!("Bearer {secret}")
    );
    gh.assert_clean();
}

// ---------------------------------------------------------------- the typed operations

/// Every operation through the fake: the request each sends (path, query, body) and what the
/// typed answer carries.
#[tokio::test]
async fn every_operation_sends_its_documented_request_and_reads_the_answer() {
    use dagexec::edge::github::ops::Conclusion;
    let gh = FakeGitHub::start().await;
    let c = client(&gh);

    assert!(!c.default_branch().await.unwrap().is_empty());

    let branch = "dagexec/añadir auth";
    let pr = c
        .create_pull(branch, "main", "Añadir auth", "body", true)
        .await
        .unwrap();
    assert_eq!(
        (pr.number, pr.node_id.as_str(), pr.draft),
        (1, "PR_1", true)
    );
    assert_eq!(
        (pr.head_ref.as_str(), pr.base_ref.as_str()),
        (branch, "main")
    );
    assert_eq!(pr.html_url, "https://github.com/o/r/pull/1");
    assert_eq!(
        gh.calls("pulls/create")[0].body,
        Some(
            json!({"title": "Añadir auth", "head": branch, "base": "main", "body": "body", "draft": true})
        )
    );
    // Another branch whose name starts the same is not the one looked for.
    c.create_pull("dagexec/añadir", "main", "t", "b", false)
        .await
        .unwrap();
    assert_eq!(c.find_pull(branch).await.unwrap(), Some(pr.clone()));
    let list = gh.calls("pulls/list");
    assert_eq!(list[0].path, "/repos/o/r/pulls");
    assert_eq!(
        list[0].query.as_deref(),
        Some("state=open&head=o:dagexec/a%C3%B1adir%20auth")
    );
    let head = c.pull_head(1).await.unwrap();
    assert_eq!(
        (
            head.head_ref.as_str(),
            head.head_owner.as_str(),
            head.state.as_str()
        ),
        (branch, "o", "open")
    );

    c.update_pull_body(1, "new body").await.unwrap();
    assert_eq!(
        gh.calls("pulls/update")[0].body,
        Some(json!({"body": "new body"}))
    );
    c.mark_ready(&pr).await.unwrap();
    assert!(!gh.state().pulls[0].draft);

    let id = c
        .complete_check_run(&CompletedCheckRun {
            name: "dagexec",
            head_sha: "abc123",
            conclusion: Conclusion::Failure,
            title: "t",
            summary: "s",
            details_url: Some("https://x/1"),
        })
        .await
        .unwrap();
    assert_eq!(id, gh.state().check_runs[0].id);
    assert_eq!(
        gh.calls("checks/create")[0].body,
        Some(
            json!({"name": "dagexec", "head_sha": "abc123", "status": "completed",
            "conclusion": "failure", "output": {"title": "t", "summary": "s"},
            "details_url": "https://x/1"})
        )
    );
    c.complete_check_run(&CompletedCheckRun {
        name: "dagexec",
        head_sha: "abc123",
        conclusion: Conclusion::Success,
        title: "t",
        summary: "s",
        details_url: None,
    })
    .await
    .unwrap();
    assert_eq!(
        gh.calls("checks/create")[1]
            .body
            .as_ref()
            .unwrap()
            .get("details_url"),
        None
    );

    let mut inputs = serde_json::Map::new();
    inputs.insert("round".into(), json!("2"));
    c.dispatch("dagexec.yml", branch, &inputs).await.unwrap();
    let d = &gh.calls("actions/create-workflow-dispatch")[0];
    assert_eq!(
        d.path,
        "/repos/o/r/actions/workflows/dagexec.yml/dispatches"
    );
    assert_eq!(
        d.body,
        Some(json!({"ref": branch, "inputs": {"round": "2"}}))
    );

    let artifacts = c.run_artifacts("42").await.unwrap();
    assert!(!artifacts.is_empty(), "GitHub's example lists artifacts");

    // Comments: create, list (with authors), update, react.
    let human = gh.add_comment("o/r", 1, "octocat", "/execute");
    let mine = c.comment(1, "<!-- m -->\nhello").await.unwrap();
    let listed = c.list_comments(1).await.unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0].id, human);
    assert_eq!(
        (
            listed[0].author.login.as_str(),
            listed[0].author.bot,
            listed[0].author.app_id
        ),
        ("octocat", false, None)
    );
    assert_eq!(listed[1].id, mine);
    assert_eq!(
        (
            listed[1].author.login.as_str(),
            listed[1].author.bot,
            listed[1].author.app_id
        ),
        ("github-actions[bot]", true, Some(15368))
    );
    c.update_comment(mine, "<!-- m -->\nbye").await.unwrap();
    assert_eq!(gh.state().comments[1].body, "<!-- m -->\nbye");
    c.react(human, "eyes").await.unwrap();
    assert_eq!(gh.state().reactions.len(), 1);

    gh.set_permission("octocat", "maintain");
    let (permission, role) = c.permission("octocat").await.unwrap();
    assert_eq!(permission, "write");
    assert_eq!(role.as_deref(), Some("maintain"));
    // A slash in a login cannot change the path.
    let _ = c.permission("a/../b").await;
    let p = gh.calls("repos/get-collaborator-permission-level");
    assert_eq!(p[1].path, "/repos/o/r/collaborators/a%2F..%2Fb/permission");
    gh.assert_clean();
}

/// An answer without a field dagexec reads fails naming the operation and the field.
#[tokio::test]
async fn an_answer_without_a_needed_field_names_it() {
    let gh = FakeGitHub::start().await;
    let c = client(&gh);
    gh.fail_next("repos/get", 200, &[], json!({"name": "r"}));
    let e = c.default_branch().await.unwrap_err().to_string();
    assert!(e.starts_with("repos/get: "), "{e}");
    assert!(e.contains("default_branch"), "{e}");
    gh.fail_next("pulls/get", 200, &[], json!({"number": 1, "head": {}}));
    let e = c.pull_head(1).await.unwrap_err().to_string();
    assert!(e.starts_with("pulls/get: ") && e.contains("head"), "{e}");
    gh.fail_next("checks/create", 201, &[], json!({"id": "five"}));
    let e = c
        .complete_check_run(&CompletedCheckRun {
            name: "n",
            head_sha: "abc",
            conclusion: dagexec::edge::github::ops::Conclusion::Neutral,
            title: "t",
            summary: "s",
            details_url: None,
        })
        .await
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("checks/create: ") && e.contains("id"), "{e}");
}

// ---------------------------------------------------------------- workflow runs (eager)

/// A zip archive holding `files`.
fn zip_of(files: &[(&str, &str)]) -> Vec<u8> {
    use std::io::Write;
    let mut w = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, text) in files {
        w.start_file(*name, zip::write::SimpleFileOptions::default())
            .unwrap();
        w.write_all(text.as_bytes()).unwrap();
    }
    w.finish().unwrap().into_inner()
}

/// A run dispatched with `dispatch_run` (the same request as `dispatch`, asking for the run's
/// id), ended with one artifact; returns (run id, artifact id, its zip).
async fn a_finished_run(gh: &FakeGitHub, c: &Client) -> (u64, u64, Vec<u8>) {
    let mut inputs = serde_json::Map::new();
    inputs.insert("task".into(), json!("3"));
    let run = c
        .dispatch_run("dagexec.yml", "dagexec/x", &inputs)
        .await
        .unwrap()
        .expect("the fake answers with the run's details");
    let d = gh.calls("actions/create-workflow-dispatch");
    assert_eq!(
        d.last().unwrap().body,
        Some(json!({"ref": "dagexec/x", "inputs": {"task": "3"}, "return_run_details": true}))
    );
    let zip = zip_of(&[("result.json", "{}")]);
    gh.finish_run(run, "success", vec![("dagexec-a".into(), zip.clone())]);
    let found = c.workflow_run(run).await.unwrap();
    assert!(found.completed() && found.conclusion.as_deref() == Some("success"));
    let artifacts = c.artifacts_of(run, Some("dagexec-a")).await.unwrap();
    assert_eq!(artifacts.len(), 1, "{artifacts:?}");
    assert_eq!(c.run_artifacts(&run.to_string()).await.unwrap().len(), 1);
    (run, artifacts[0].id, zip)
}

/// What a download wrote into its temporary file (which starts rewound).
fn contents(mut file: std::fs::File) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    file.read_to_end(&mut out).unwrap();
    out
}

/// The artifact download goes through the client's one retry policy: a rate limit on the API
/// call is waited out, then the redirect to storage is followed without the token (the fake
/// flags a token sent there).
#[tokio::test]
async fn an_artifact_download_is_retried_by_the_one_policy_and_storage_never_sees_the_token() {
    let gh = FakeGitHub::start().await;
    let c = client(&gh);
    let (_, id, zip) = a_finished_run(&gh, &c).await;
    gh.fail_next(
        "actions/download-artifact",
        429,
        &[("retry-after", "0")],
        json!({"message": "slow down"}),
    );
    gh.fail_next(
        "actions/download-artifact",
        502,
        &[],
        json!({"message": "bad gateway"}),
    );
    let got = c.download_artifact(id, 1 << 20).await.unwrap();
    assert_eq!(contents(got), zip);
    assert_eq!(gh.calls("actions/download-artifact").len(), 3);
    gh.assert_clean();

    // A plain 403 (no rate limit) is not retried, and names the operation.
    gh.fail_next(
        "actions/download-artifact",
        403,
        &[],
        json!({"message": "Resource not accessible by integration"}),
    );
    let e = c.download_artifact(id, 1 << 20).await.unwrap_err();
    assert_eq!(e.status(), Some(403));
    assert!(
        e.to_string()
            .starts_with("actions/download-artifact: GitHub answered 403"),
        "{e}"
    );
    assert_eq!(gh.calls("actions/download-artifact").len(), 4);
}

/// An archive larger than the limit is refused, saying so.
#[tokio::test]
async fn an_artifact_over_the_limit_is_refused() {
    let gh = FakeGitHub::start().await;
    let c = client(&gh);
    let (_, id, zip) = a_finished_run(&gh, &c).await;
    let e = c
        .download_artifact(id, zip.len() as u64 - 1)
        .await
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!(
            "actions/download-artifact: the artifact is larger than {} bytes; refused",
            zip.len() - 1
        )
    );
    assert_eq!(
        contents(c.download_artifact(id, zip.len() as u64).await.unwrap()),
        zip
    );
    gh.assert_clean();
}

/// An answer to a run lookup without the run's id names the field.
#[tokio::test]
async fn a_run_answer_without_its_id_names_the_field() {
    let gh = FakeGitHub::start().await;
    let c = client(&gh);
    gh.fail_next(
        "actions/get-workflow-run",
        200,
        &[],
        json!({"status": "queued"}),
    );
    let e = c.workflow_run(5).await.unwrap_err().to_string();
    assert!(
        e.starts_with("actions/get-workflow-run: ") && e.contains("id"),
        "{e}"
    );
}

/// Issue 31 §3: a dispatch that asks for its run's details is sent once — a 502 GitHub gives
/// after starting the run is returned as an outage (the caller looks for the run), never
/// re-POSTed — while a rate limit, which started nothing, is still waited out.
#[tokio::test]
async fn a_dispatch_asking_for_its_run_is_never_resent_after_a_5xx_but_waits_out_a_rate_limit() {
    let gh = FakeGitHub::start().await;
    let c = client(&gh);
    let mut inputs = serde_json::Map::new();
    inputs.insert("task".into(), json!("3"));
    gh.fail_after("actions/create-workflow-dispatch", 502);
    let e = c
        .dispatch_run("dagexec.yml", "dagexec/x", &inputs)
        .await
        .unwrap_err();
    assert!(e.transient() && e.status() == Some(502), "{e}");
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 1);
    assert_eq!(gh.state().dispatches.len(), 1, "the run GitHub started");

    gh.fail_next(
        "actions/create-workflow-dispatch",
        429,
        &[("retry-after", "0")],
        json!({"message": "slow down"}),
    );
    let run = c
        .dispatch_run("dagexec.yml", "dagexec/x", &inputs)
        .await
        .unwrap();
    assert!(run.is_some());
    assert_eq!(gh.calls("actions/create-workflow-dispatch").len(), 3);
    assert_eq!(gh.state().dispatches.len(), 2);
    gh.assert_clean();
}

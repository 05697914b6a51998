//! Workflow runs the conductor starts and watches (`schedule: eager` on Actions): a dispatch
//! that answers with the new run's id (`return_run_details`), a run's state, the dispatched
//! runs of a branch (to find a run by its run-name), its artifacts, and an artifact's zip
//! archive (its download from storage retried under the same policy), streamed into an
//! anonymous temporary file — never held in memory — and refused while it is read once it
//! passes its size limit.
//!
//! Every call goes through [`Client`]'s typed `get`/`send` (answers read into serde structs
//! of our own, keeping only the fields dagexec uses; an answer without them is
//! [`ApiError::Invalid`] naming the field) and its one retry policy. An artifact download asks
//! the API under that policy too, then follows GitHub's redirect to its storage by hand,
//! without the token: the redirect target is another host with a signed URL, and the
//! repository's token must never be sent there.

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};

use serde::Deserialize;
use serde_json::Value;

use super::ops::{encode, encode_segment};
use super::{ApiError, Client, MAX_LIST_PAGES, RawResponse};

/// A workflow run, as far as the conductor cares.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct WorkflowRun {
    pub id: u64,
    /// `queued`, `in_progress`, `completed`, `waiting`, `requested`, `pending`.
    pub status: Option<String>,
    /// When completed: `success`, `failure`, `cancelled`, `timed_out`, `skipped`, …
    pub conclusion: Option<String>,
    /// Which attempt of the run this is (a re-run is attempt 2, …).
    #[serde(default = "one")]
    pub run_attempt: u32,
    #[serde(default)]
    pub html_url: String,
    /// The run-name (`run-name:` of the workflow), which names the task and attempt.
    #[serde(default)]
    pub display_title: String,
    /// The commit the run's ref pointed at when it was started.
    #[serde(default)]
    pub head_sha: String,
    /// What started it (`workflow_dispatch`, `pull_request`, …).
    #[serde(default)]
    pub event: String,
    /// When the run was created, started and last changed (ISO 8601).
    #[serde(default)]
    pub created_at: Option<String>,
    #[serde(default)]
    pub run_started_at: Option<String>,
    #[serde(default)]
    pub updated_at: Option<String>,
}

fn one() -> u32 {
    1
}

impl WorkflowRun {
    /// The run has ended (whatever its conclusion).
    pub fn completed(&self) -> bool {
        self.status.as_deref() == Some("completed")
    }

    /// When the run started and (once completed) ended, as far as GitHub says, within the
    /// week before `now` (a longer span is not an attempt's): the span of an attempt whose
    /// job left no record of its own.
    pub fn span(&self, now: jiff::Timestamp) -> (jiff::Timestamp, jiff::Timestamp) {
        let parse = |s: &Option<String>| s.as_deref()?.parse::<jiff::Timestamp>().ok();
        let week_ago = now
            .checked_sub(jiff::SignedDuration::from_hours(7 * 24))
            .unwrap_or(now);
        let start = parse(&self.run_started_at)
            .or_else(|| parse(&self.created_at))
            .filter(|s| *s <= now && *s >= week_ago)
            .unwrap_or(now);
        let end = parse(&self.updated_at)
            .filter(|e| self.completed() && *e >= start && *e <= now)
            .unwrap_or(now);
        (start, end)
    }
}

/// An artifact of a run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Artifact {
    pub id: u64,
    pub name: String,
    #[serde(default)]
    pub size_in_bytes: u64,
    #[serde(default)]
    pub expired: bool,
}

#[derive(Deserialize)]
struct ArtifactList {
    #[serde(default)]
    artifacts: Vec<Artifact>,
}

/// `actions/create-workflow-dispatch`'s answer with `return_run_details`.
#[derive(Deserialize)]
struct DispatchDetails {
    workflow_run_id: u64,
}

fn invalid(op: &str, e: impl std::fmt::Display) -> ApiError {
    ApiError::invalid(
        op,
        format!("GitHub's answer lacks what dagexec reads ({e})"),
    )
}

impl Client {
    /// Starts `workflow` on `git_ref` with `inputs` and returns the new run's id
    /// (`actions/create-workflow-dispatch` with `return_run_details: true`, the request
    /// [`Client::dispatch`] sends). `None` when the server answered without details (a
    /// GitHub Enterprise Server that predates them).
    pub async fn dispatch_run(
        &self,
        workflow: &str,
        git_ref: &str,
        inputs: &serde_json::Map<String, Value>,
    ) -> Result<Option<u64>, ApiError> {
        let details: Option<DispatchDetails> = self
            .create_dispatch(workflow, git_ref, inputs, true)
            .await?;
        Ok(details.map(|d| d.workflow_run_id))
    }

    /// One workflow run (`actions/get-workflow-run`).
    pub async fn workflow_run(&self, run_id: u64) -> Result<WorkflowRun, ApiError> {
        self.get(
            "actions/get-workflow-run",
            &self.repo_path(&format!(
                "/actions/runs/{run_id}?exclude_pull_requests=true"
            )),
        )
        .await
    }

    /// Page `page` (from 1) of the runs of `workflow` on `branch` that a `workflow_dispatch`
    /// started, newest first, 100 a page (`actions/list-workflow-runs`).
    pub async fn dispatched_runs(
        &self,
        workflow: &str,
        branch: &str,
        page: u32,
    ) -> Result<Vec<WorkflowRun>, ApiError> {
        #[derive(Deserialize)]
        struct RunList {
            #[serde(default)]
            workflow_runs: Vec<WorkflowRun>,
        }
        let list: RunList = self
            .get(
                "actions/list-workflow-runs",
                &self.repo_path(&format!(
                    "/actions/workflows/{}/runs?branch={}&event=workflow_dispatch&per_page=100&page={page}",
                    encode(workflow),
                    encode_segment(branch)
                )),
            )
            .await?;
        Ok(list.workflow_runs)
    }

    /// The artifacts of run `run_id` (a number, or the text of one: it is encoded as a path
    /// segment) (`actions/list-workflow-run-artifacts`, `name` filtered when given; every
    /// page, at most [`MAX_LIST_PAGES`]).
    pub async fn artifacts_of(
        &self,
        run_id: impl std::fmt::Display,
        name: Option<&str>,
    ) -> Result<Vec<Artifact>, ApiError> {
        let filter = name
            .map(|n| format!("?name={}", encode(n)))
            .unwrap_or_default();
        let run = encode_segment(&run_id.to_string());
        let path = self.repo_path(&format!("/actions/runs/{run}/artifacts{filter}"));
        let op = "actions/list-workflow-run-artifacts";
        self.pages(op, &path, MAX_LIST_PAGES, |l: ArtifactList| l.artifacts)
            .await
    }

    /// An artifact's zip archive (`actions/download-artifact`), at most `limit` bytes, asked
    /// for under the client's one retry policy. GitHub answers with a redirect to its
    /// storage; that URL is fetched without the token. The body is written as it arrives into
    /// an anonymous temporary file (unlinked, `tempfile::tempfile`), returned at its start:
    /// the process holds no more of it than a frame at a time.
    pub async fn download_artifact(&self, id: u64, limit: u64) -> Result<File, ApiError> {
        const OP: &str = "actions/download-artifact";
        let path = self.repo_path(&format!("/actions/artifacts/{id}/zip"));
        let response = self.get_raw(OP, &path).await?;
        if response.status().is_redirection() {
            let location = response
                .headers()
                .get(http::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_string)
                .ok_or_else(|| invalid(OP, "a redirect without a Location"))?;
            return fetch_unauthenticated(&self.policy, OP, &location, limit).await;
        }
        let from = format!("{}{path}", self.api_url());
        read_limited(OP, &from, response, limit).await
    }
}

/// The body of `response` (from `url`, as errors name it) written into a new anonymous
/// temporary file as it arrives, refused (and the file dropped, which frees it) as soon as it
/// passes `limit` bytes; the file is returned rewound to its start.
async fn read_limited(
    op: &str,
    url: &str,
    response: RawResponse,
    limit: u64,
) -> Result<File, ApiError> {
    use http_body_util::BodyExt;
    let mut body = response.into_body();
    let disk = |what: &str, e: std::io::Error| {
        let message = format!(
            "cannot {what} the temporary file the artifact is downloaded into ({e}); check \
             that the temporary directory ($TMPDIR, else /tmp) is writable and has room"
        );
        ApiError::invalid(op, message)
    };
    let mut file = tempfile::tempfile().map_err(|e| disk("create", e))?;
    let mut written: u64 = 0;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ApiError::Network {
            op: op.into(),
            url: url.to_string(),
            message: super::error_chain(&e),
        })?;
        if let Ok(data) = frame.into_data() {
            written += data.len() as u64;
            if written > limit {
                let refused = format!("the artifact is larger than {limit} bytes; refused");
                return Err(ApiError::invalid(op, refused));
            }
            file.write_all(&data).map_err(|e| disk("write", e))?;
        }
    }
    file.seek(SeekFrom::Start(0))
        .map_err(|e| disk("rewind", e))?;
    Ok(file)
}

/// GETs `url` with no credentials (a signed storage URL), at most `limit` bytes, under
/// `policy` as every API call is: network errors and 5xx answers of the storage are tried
/// again with back-off, anything else that is not 2xx fails at once.
async fn fetch_unauthenticated(
    policy: &super::retry::RetryPolicy,
    op: &str,
    url: &str,
    limit: u64,
) -> Result<File, ApiError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| invalid(op, format!("a redirect to an invalid URL: {e}")))?;
    let base = format!(
        "{}://{}",
        uri.scheme_str().unwrap_or("https"),
        uri.authority()
            .map(http::uri::Authority::as_str)
            .unwrap_or_default()
    );
    let octo = super::octocrab(&base, None)?;
    let storage = super::Endpoint {
        octo: &octo,
        policy,
        base: &base,
        sent: None,
        storage: true,
    };
    let call = super::Call::new(op, http::Method::GET, url, None::<&()>);
    read_limited(op, &base, super::respond(storage, call).await?, limit).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A storage server for one GET: `body` with its length, or (`None`) an endless chunked
    /// body. Its task ends when the client goes away and gives the bytes of body it wrote.
    async fn storage(body: Option<Vec<u8>>) -> (String, tokio::task::JoinHandle<u64>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!(
            "http://{}/artifact.zip?sig=x",
            listener.local_addr().unwrap()
        );
        let task = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            while !request.ends_with(b"\r\n\r\n") {
                let mut b = [0u8; 1];
                if s.read(&mut b).await.unwrap() == 0 {
                    return 0;
                }
                request.push(b[0]);
            }
            let Some(body) = body else {
                let head = "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
                s.write_all(head.as_bytes()).await.unwrap();
                let chunk = [b"10000\r\n".as_slice(), &vec![b'x'; 0x10000], b"\r\n"].concat();
                let mut sent = 0;
                while s.write_all(&chunk).await.is_ok() {
                    sent += 0x10000;
                }
                return sent;
            };
            let head = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
            s.write_all(head.as_bytes()).await.unwrap();
            s.write_all(&body).await.unwrap();
            let _ = s.read(&mut [0u8; 1]).await;
            body.len() as u64
        });
        (url, task)
    }

    /// Issue 20 §4: the artifact was held in memory whole (up to 256 MiB). It is streamed
    /// into an anonymous temporary file, returned at its start; an endless body is refused
    /// while it is read, once past the limit (holding it first would never end).
    #[tokio::test]
    async fn an_artifact_is_streamed_into_an_unlinked_file_and_refused_past_its_limit() {
        let policy = super::super::retry::RetryPolicy::default();
        let body: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
        let (url, server) = storage(Some(body.clone())).await;
        let mut file = fetch_unauthenticated(&policy, "op", &url, 300_000)
            .await
            .unwrap();
        drop(server);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut file, &mut got).unwrap();
        assert!(got == body, "the file holds the body, from its start");
        #[cfg(target_os = "linux")]
        {
            use std::os::fd::AsRawFd;
            let name = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).unwrap();
            assert!(
                name.to_string_lossy().ends_with("(deleted)"),
                "no name in the file system: {name:?}"
            );
        }

        let limit = 1 << 20;
        let (url, server) = storage(None).await;
        let e = fetch_unauthenticated(&policy, "op", &url, limit)
            .await
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("op: the artifact is larger than {limit} bytes; refused")
        );
        let sent = server.await.unwrap();
        assert!(
            sent > limit && sent < limit + (32 << 20),
            "refused as it read, the connection dropped: {sent} bytes sent"
        );
    }

    /// A server on a local port that answers one request with `answer`, as written: its
    /// `http://host:port` and its task.
    async fn serve_once(answer: &'static str) -> (String, tokio::task::JoinHandle<()>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = format!("http://{}", listener.local_addr().unwrap());
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let _ = s.read(&mut [0u8; 4096]).await;
            s.write_all(answer.as_bytes()).await.unwrap();
        });
        (host, server)
    }

    /// Each call's debug line (`DAGEXEC_LOG=debug`) names where it went as errors do: a
    /// storage download by its `scheme://host`, never the signed URL.
    #[tokio::test]
    async fn a_storage_download_is_named_without_its_signed_url() {
        let octo = super::super::octocrab("https://storage.example", None).unwrap();
        let policy = super::super::retry::RetryPolicy::default();
        let to = |storage| super::super::Endpoint {
            octo: &octo,
            policy: &policy,
            base: "https://storage.example",
            sent: None,
            storage,
        };
        let signed = "https://storage.example/a.zip?sig=secret";
        assert_eq!(to(true).shown(signed), "https://storage.example");
        assert_eq!(
            to(false).shown("/repos/o/r"),
            "https://storage.example/repos/o/r"
        );
    }

    /// A download cut off mid-body said "cannot reach GitHub at : …", naming no place: it
    /// names the storage's `scheme://host` (never its signed URL), as a refused connection does.
    #[tokio::test]
    async fn a_download_cut_off_names_where_it_came_from() {
        let (host, server) =
            serve_once("HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\nonly ten b").await;
        let policy = super::super::retry::RetryPolicy::default();
        let url = format!("{host}/artifact.zip?sig=secret");
        let e = fetch_unauthenticated(&policy, "op", &url, 1 << 20)
            .await
            .unwrap_err()
            .to_string();
        server.await.unwrap();
        assert!(
            e.starts_with(&format!("op: cannot reach GitHub at {host}: ")),
            "{e}"
        );
        assert!(!e.contains("secret"), "{e}");
    }

    /// A rounds run's matrix has up to 256 jobs, each uploading an artifact (and a re-run
    /// uploads again): only the first page of 100 was read, so finalize linked no log for the
    /// tasks past it. Every page is read.
    #[tokio::test]
    async fn every_page_of_a_runs_artifacts_is_read() {
        use wiremock::matchers::{method, path, query_param};
        use wiremock::{Mock, MockServer, ResponseTemplate};
        let server = MockServer::start().await;
        let page = |ids: std::ops::Range<u64>| {
            let list: Vec<Value> = ids
                .map(|id| serde_json::json!({ "id": id, "name": format!("dagexec-{id}") }))
                .collect();
            ResponseTemplate::new(200)
                .set_body_json(serde_json::json!({ "total_count": 150, "artifacts": list }))
        };
        let at = || path("/repos/o/r/actions/runs/7/artifacts");
        Mock::given(method("GET"))
            .and(at())
            .and(query_param("page", "2"))
            .respond_with(page(100..150))
            .mount(&server)
            .await;
        Mock::given(method("GET"))
            .and(at())
            .respond_with(page(0..100))
            .mount(&server)
            .await;
        let repo = super::super::RepoName::parse("o/r").unwrap();
        let client = Client::new(&server.uri(), &super::super::Token::new("t"), repo).unwrap();
        let ids = client.run_artifacts("7").await.unwrap();
        assert_eq!(ids.len(), 150);
        assert_eq!(ids["dagexec-149"], 149);
    }

    fn run(status: &str, started: &str, updated: &str) -> WorkflowRun {
        serde_json::from_value(serde_json::json!({
            "id": 1, "status": status, "run_started_at": started, "updated_at": updated
        }))
        .unwrap()
    }

    #[test]
    fn a_runs_span_is_what_github_says_within_the_last_week() {
        let now: jiff::Timestamp = "2026-11-25T12:00:00Z".parse().unwrap();
        let t = |s: &str| s.parse::<jiff::Timestamp>().unwrap();
        let ended = run("completed", "2026-11-25T11:50:00Z", "2026-11-25T11:55:00Z");
        assert_eq!(
            ended.span(now),
            (t("2026-11-25T11:50:00Z"), t("2026-11-25T11:55:00Z"))
        );
        // Not ended yet: up to now.
        let running = run(
            "in_progress",
            "2026-11-25T11:50:00Z",
            "2026-11-25T11:51:00Z",
        );
        assert_eq!(running.span(now), (t("2026-11-25T11:50:00Z"), now));
        // Times from the future, from years ago or missing are not an attempt's.
        for (s, u) in [
            ("2026-11-26T00:00:00Z", "2026-11-26T00:00:01Z"),
            ("2020-01-22T19:33:08Z", "2020-01-22T19:33:08Z"),
            ("garbage", ""),
        ] {
            assert_eq!(run("completed", s, u).span(now), (now, now), "{s}");
        }
    }
}

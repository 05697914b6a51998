//! The real agent CLIs, at the versions `dagexec init` pins, run by `dagexec run` with the
//! worker commands `dagexec init` writes, against the scripted model server
//! (`common::model_server`): a plan completes, every task's spend is recorded exactly as the
//! server sent it, and the API's faults end in failed attempts whose reasons say what happened.
//!
//! The CLIs are installed by `.ci/install-agents.sh` (npm, into `.ci/tools/agents`; `.ci/run`
//! does it). Without them these tests are skipped, saying how to install them; under
//! `DAGEXEC_REQUIRE_TOOLS=1` (`.ci/run` sets it) they fail instead (`common::tools`). Set
//! `DAGEXEC_SKIP_REAL_AGENTS=1` to skip them knowingly even then.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::common;
use common::local::{Ran, exec, local};
use common::model_server::{
    ANTHROPIC_USAGE, Api, CURL_MESSAGES, Fault, GEMINI_USAGE, ModelServer, OPENAI_USAGE,
    StallServer, anthropic_response_cost, assert_served_through_the_gateway, content_of,
};
use common::{git, repo, text};

/// Where the pinned CLIs are, or `None` when the tests are skipped.
pub(crate) fn agents_bin() -> Option<PathBuf> {
    if std::env::var_os("DAGEXEC_SKIP_REAL_AGENTS").is_some_and(|v| v == "1") {
        eprintln!("real agent CLIs skipped (DAGEXEC_SKIP_REAL_AGENTS=1)");
        return None;
    }
    common::tools::agents(
        &["claude", "codex", "gemini"],
        "the real agent CLIs' tests (tests/it/real_agents.rs)",
    )
}

/// The worker command `dagexec init --worker <cli>` writes into the workflow.
fn documented_worker(cli: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    let out = exec(dir.path(), &["init", "--worker", cli, "--stdout"]);
    assert!(out.status.success(), "{}", text(&out));
    let workflow = String::from_utf8(out.stdout.clone()).unwrap();
    let line = workflow
        .lines()
        .find_map(|l| l.trim().strip_prefix("worker: "))
        .unwrap_or_else(|| panic!("no worker line in:\n{workflow}"));
    match serde_yaml::from_str::<String>(line) {
        Ok(s) => s,
        Err(_) => line.to_owned(),
    }
}

/// Two independent tasks and one after both; task 1 names a model.
fn plan(model: &str) -> Value {
    let task = |subject: &str, file: &str, blocked: Vec<u64>, model: Option<&str>| {
        let mut agent = json!({"role": "engineer"});
        if let Some(m) = model {
            agent["model"] = json!(m);
        }
        json!({
            "subject": subject,
            "description": format!("Create {file}. [[write {file}]]"),
            "status": "pending", "blockedBy": blocked,
            "metadata": {"files": {"create": [file], "modify": []}},
            "agent": agent,
        })
    };
    json!({"schemaVersion": 2, "goal": "real agents", "tasks": [
        task("alpha", "alpha.txt", vec![], None),
        task("beta", "beta.txt", vec![], Some(model)),
        task("gamma", "gamma.txt", vec![0, 1], None),
    ]})
}

/// Codex's configuration for the scripted server: a provider speaking the Responses API
/// (codex ignores `OPENAI_BASE_URL`), a model whose tools include `apply_patch`, and no
/// retries of its own.
pub(crate) fn codex_config(server: &ModelServer) -> String {
    format!(
        "model = \"gpt-5.5\"\nmodel_provider = \"scripted\"\n\n\
         [model_providers.scripted]\nname = \"scripted\"\nbase_url = \"{}/v1\"\n\
         env_key = \"OPENAI_API_KEY\"\nwire_api = \"responses\"\n\
         request_max_retries = 0\nstream_max_retries = 0\n",
        server.url()
    )
}

/// Gemini CLI's settings for the scripted server: with `GOOGLE_GEMINI_BASE_URL` set it takes
/// the gateway's authentication unless told to use `GEMINI_API_KEY`; one attempt per request.
pub(crate) const GEMINI_SETTINGS: &str =
    r#"{"security":{"auth":{"selectedType":"gemini-api-key"}},"general":{"maxAttempts":1}}"#;

/// A run of `cli` in `dir` against `server`: the pinned CLI first on PATH, its home and
/// configuration in `home`.
struct Agent {
    cli: &'static str,
    bin: PathBuf,
    home: tempfile::TempDir,
}

impl Agent {
    fn new(cli: &'static str, bin: &Path, server: &ModelServer) -> Agent {
        let home = tempfile::tempdir().unwrap();
        if cli == "codex" {
            let codex_home = home.path().join(".codex");
            std::fs::create_dir_all(&codex_home).unwrap();
            std::fs::write(codex_home.join("config.toml"), codex_config(server)).unwrap();
        }
        if cli == "gemini" {
            let gemini_home = home.path().join(".gemini");
            std::fs::create_dir_all(&gemini_home).unwrap();
            std::fs::write(gemini_home.join("settings.json"), GEMINI_SETTINGS).unwrap();
        }
        Agent {
            cli,
            bin: bin.to_owned(),
            home,
        }
    }

    fn run(&self, dir: &Path, server: &ModelServer, extra: &[&str]) -> Ran {
        let path = format!(
            "{}:{}",
            self.bin.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        local(dir)
            .worker(&documented_worker(self.cli))
            .args(["--yes"])
            .args(extra)
            .env("PATH", path)
            .env("HOME", self.home.path())
            .env("CODEX_HOME", self.home.path().join(".codex"))
            .env("ANTHROPIC_BASE_URL", server.url())
            .env("ANTHROPIC_API_KEY", "sk-ant-test")
            .env("OPENAI_API_KEY", "sk-test")
            // Where dagexec's gateway sends codex's requests (codex itself is pointed at the
            // gateway by the attempt's own CODEX_HOME, built on the one above).
            .env("OPENAI_BASE_URL", format!("{}/v1", server.url()))
            .env("GEMINI_API_KEY", "gm-test")
            .env("GOOGLE_GEMINI_BASE_URL", server.url())
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env("CLAUDE_CODE_MAX_RETRIES", "0")
            .env_remove("ANTHROPIC_AUTH_TOKEN")
            .run()
    }
}

fn status_json(dir: &Path) -> Value {
    let out = exec(dir, &["status", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn task_row(status: &Value, index: u64) -> Value {
    status
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["index"] == index)
        .cloned()
        .unwrap_or_else(|| panic!("task {index} in {status}"))
}

/// The plan completes with the CLI's own edits, committed round by round.
fn completes_a_plan(cli: &'static str, model: &str) -> Option<(tempfile::TempDir, ModelServer)> {
    let bin = agents_bin()?;
    let server = ModelServer::start();
    let dir = repo(&plan(model), &[("README.md", "real agents\n")]);
    let agent = Agent::new(cli, &bin, &server);
    let out = agent.run(dir.path(), &server, &["--timeout", "120s"]);
    assert!(out.status.success(), "{cli}: {}", text(&out));
    for file in ["alpha.txt", "beta.txt", "gamma.txt"] {
        let committed = git(dir.path(), &["show", &format!("HEAD:{file}")]);
        assert_eq!(committed, content_of(file), "{cli}: {file}");
    }
    let log = git(dir.path(), &["log", "--format=%s"]);
    assert!(log.contains("dagexec: round 1 — 2/2 tasks"), "{cli}: {log}");
    assert!(log.contains("dagexec: round 2 — 1/1 tasks"), "{cli}: {log}");
    assert!(server.other().is_empty(), "{cli}: {:?}", server.other());
    // Every request came through dagexec's gateway: the provider's key reached the server,
    // never the attempt's token the CLI held.
    let keys: std::collections::BTreeSet<_> = server.seen().iter().map(|s| s.key.clone()).collect();
    let key = match cli {
        "claude" => "sk-ant-test",
        "codex" => "sk-test",
        _ => "gm-test",
    };
    assert_eq!(keys, [Some(key.to_owned())].into(), "{cli}");
    // Where the documented command passes the task's model (claude's: plans name Claude
    // models), the task that names one ran with it.
    let seen = server.seen();
    if documented_worker(cli).contains("DAGEXEC_MODEL") {
        assert!(seen.iter().any(|s| s.model == model), "{cli}: {seen:?}");
    }
    Some((dir, server))
}

#[test]
fn claude_completes_a_plan_with_its_spend() {
    let Some((dir, server)) = completes_a_plan("claude", "claude-sonnet-4-5") else {
        return;
    };
    assert!(server.seen().iter().all(|s| s.api == Api::Anthropic));
    // Two requests per task (the edit, then the final text); claude counts cache reads and
    // writes as input and reports its own cost.
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    let status = status_json(dir.path());
    for i in 0..3 {
        let row = task_row(&status, i);
        assert_eq!(row["status"], "completed", "{row}");
        assert_eq!(
            row["inputTokens"],
            json!(2 * (input + writes + reads)),
            "{row}"
        );
        assert_eq!(row["outputTokens"], json!(2 * output), "{row}");
        assert!(row["costUsd"].as_f64().unwrap_or(0.0) > 0.0, "{row}");
    }
}

#[test]
fn codex_completes_a_plan_with_its_spend() {
    let Some((dir, server)) = completes_a_plan("codex", "gpt-5.5") else {
        return;
    };
    assert!(server.seen().iter().all(|s| s.api == Api::OpenAi));
    let (input, _cached, output) = OPENAI_USAGE;
    let status = status_json(dir.path());
    for i in 0..3 {
        let row = task_row(&status, i);
        assert_eq!(row["status"], "completed", "{row}");
        assert_eq!(row["inputTokens"], json!(2 * input), "{row}");
        assert_eq!(row["outputTokens"], json!(2 * output), "{row}");
    }
}

/// A local run of the three-task plan in a new repository through the pinned Codex, whose
/// user configuration (`$CODEX_HOME/config.toml`) is `config` with `{url}` the scripted
/// server's; no `OPENAI_BASE_URL`, `OPENAI_API_KEY` or `CODEX_API_KEY` in the environment,
/// `env` set. `None` where the agent CLIs are not installed.
fn codex_with_user_config(
    config: &str,
    env: &[(&str, &str)],
) -> Option<(tempfile::TempDir, ModelServer, Ran)> {
    let bin = agents_bin()?;
    let server = ModelServer::start();
    let dir = repo(&plan("gpt-5.5"), &[("README.md", "real agents\n")]);
    let home = tempfile::tempdir().unwrap();
    let codex_home = home.path().join(".codex");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = config.replace("{url}", &server.url());
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut run = local(dir.path())
        .worker(&documented_worker("codex"))
        .args(["--yes", "--timeout", "120s"])
        .env("PATH", path)
        .env("HOME", home.path())
        .env("CODEX_HOME", &codex_home)
        .env_remove("OPENAI_BASE_URL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("CODEX_API_KEY")
        .env_remove("DAGEXEC_GATEWAY");
    for (k, v) in env {
        run = run.env(k, v);
    }
    let out = run.run();
    Some((dir, server, out))
}

/// Issue 35: a user whose own Codex configuration selects a provider of their own (an Azure
/// or proxy endpoint: its `base_url`, its key in the variable `env_key` names, its
/// `query_params`) and who sets no `OPENAI_BASE_URL`: the gateway sends Codex's requests
/// there, with that key, not to api.openai.com — and the agent holds neither.
#[test]
fn codex_with_its_own_provider_and_no_openai_base_url_reaches_it_through_the_gateway() {
    let config = "model = \"gpt-5.5\"\nmodel_provider = \"proxy\"\n\n\
         [model_providers.proxy]\nname = \"a proxy\"\nbase_url = \"{url}/proxy/v1\"\n\
         env_key = \"PROXY_API_KEY\"\nwire_api = \"responses\"\n\
         query_params = { api-version = \"2025-04-01-preview\" }\n\
         request_max_retries = 0\nstream_max_retries = 0\n";
    let Some((dir, server, out)) = codex_with_user_config(config, &[("PROXY_API_KEY", "sk-proxy")])
    else {
        return;
    };
    assert!(out.status.success(), "{}", text(&out));
    let seen = server.seen();
    assert!(!seen.is_empty(), "{}", text(&out));
    for s in &seen {
        assert_eq!(s.api, Api::OpenAi, "{seen:?}");
        assert_eq!(s.path, "/proxy/v1/responses", "{seen:?}");
        assert_eq!(s.key.as_deref(), Some("sk-proxy"), "{seen:?}");
        assert_eq!(s.query.as_deref(), Some("api-version=2025-04-01-preview"));
    }
    let status = status_json(dir.path());
    for i in 0..3 {
        assert_eq!(task_row(&status, i)["status"], "completed", "{status}");
    }
}

/// A user whose Codex configuration selects a provider that names no key (a local server,
/// as Codex's built-in `ollama` and `lmstudio` are) and who has no `OpenAI` key at all: Codex
/// itself sends such a provider no key, so the gateway does not refuse its requests for want
/// of `OPENAI_API_KEY` but sends them on without one.
#[test]
fn codex_with_a_keyless_provider_and_no_openai_key_reaches_it_without_a_key() {
    let config = "model = \"gpt-5.5\"\nmodel_provider = \"local\"\n\n\
         [model_providers.local]\nname = \"a local server\"\nbase_url = \"{url}/local/v1\"\n\
         wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n";
    let Some((_dir, server, out)) = codex_with_user_config(config, &[]) else {
        return;
    };
    assert!(out.status.success(), "{}", text(&out));
    let seen = server.seen();
    assert!(!seen.is_empty(), "{}", text(&out));
    for s in &seen {
        assert_eq!(s.path, "/local/v1/responses", "{seen:?}");
        assert_eq!(s.key, None, "{seen:?}");
    }
}

#[test]
fn gemini_completes_a_plan_with_its_spend() {
    let Some((dir, server)) = completes_a_plan("gemini", "gemini-2.5-pro") else {
        return;
    };
    assert!(server.seen().iter().all(|s| s.api == Api::Gemini));
    // The CLI's router asks once, then two turns: three answers of the same usage.
    let (prompt, candidates, _total) = GEMINI_USAGE;
    let status = status_json(dir.path());
    for i in 0..3 {
        let row = task_row(&status, i);
        assert_eq!(row["status"], "completed", "{row}");
        assert_eq!(row["inputTokens"], json!(3 * prompt), "{row}");
        assert_eq!(row["outputTokens"], json!(3 * candidates), "{row}");
        assert!(row["costUsd"].as_f64().unwrap_or(0.0) > 0.0, "{row}");
    }
}

/// One task against a faulty API: the attempt fails, the reason says what the API did, the
/// logs are kept and no CLI process is left behind.
fn fault(cli: &'static str, fault: Fault) -> Option<(Ran, tempfile::TempDir)> {
    let bin = agents_bin()?;
    let server = ModelServer::start();
    server.set_fault(Some(fault.clone()));
    let mut one = json!({"schemaVersion": 2, "goal": "faults", "tasks": [{
        "subject": "alpha", "description": "Create alpha.txt. [[write alpha.txt]]",
        "status": "pending", "blockedBy": [],
        "metadata": {"files": {"create": ["alpha.txt"], "modify": []}},
        "agent": {"role": "engineer"}}]});
    if fault == Fault::Hang {
        // Its last attempt only, as a plan resumed after two would run it: one timeout to
        // wait out, not three (the test's 120 s of a 250 s suite's tail).
        one["tasks"][0]["attempts"] = json!(2);
    }
    let dir = repo(&one, &[]);
    let agent = Agent::new(cli, &bin, &server);
    // Every fault but a hang ends the CLI at its first call: time enough for a slow start,
    // never waited out (under CI's load a node CLI took over 8 s to reach the server, and
    // gemini's first attempt ran out 30 s and was retried). A hang is waited out: long
    // enough that the CLI reaches the server first.
    let timeout = if fault == Fault::Hang { "40s" } else { "180s" };
    let out = agent.run(dir.path(), &server, &["--timeout", timeout]);
    assert!(!out.status.success(), "{cli} {fault:?}: {}", text(&out));
    assert!(
        !server.seen().is_empty(),
        "{cli} {fault:?}: the CLI never called the server"
    );
    // No CLI process of this run is left.
    let home = agent.home.path().display().to_string();
    let left = std::process::Command::new("sh")
        .args([
            "-c",
            &format!("grep -l '{home}' /proc/[0-9]*/environ 2>/dev/null || true"),
        ])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&left.stdout).trim().is_empty(),
        "{cli} {fault:?}: processes left: {}",
        String::from_utf8_lossy(&left.stdout)
    );
    Some((out, dir))
}

/// Each fault in its own repository, model server and CLI home, all at once (each one mostly
/// waits: a CLI's start, its retries, a hang's timeout): the fault, what the test wants of its
/// reason, the run and the reason, in `faults`' order; none when the CLI is not installed.
fn faults_side_by_side(
    cli: &'static str,
    faults: &[(Fault, &'static str)],
) -> Vec<(Fault, &'static str, Ran, String)> {
    std::thread::scope(|s| {
        let runs: Vec<_> = faults
            .iter()
            .map(|(f, want)| {
                s.spawn(move || {
                    let (out, dir) = fault(cli, f.clone())?;
                    let why = reason(dir.path());
                    eprintln!("REASON {cli} {f:?}: {why}");
                    Some((f.clone(), *want, out, why))
                })
            })
            .collect();
        runs.into_iter()
            .filter_map(|r| r.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

fn reason(dir: &Path) -> String {
    let status = status_json(dir);
    task_row(&status, 0)["result"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn claude_faults_give_clear_reasons() {
    let faults = [
        (Fault::Status(500), "500"),
        (Fault::Status(429), "429"),
        (Fault::Malformed, "malformed"),
        (Fault::Truncated, "malformed"),
        (Fault::Hang, "timed out"),
    ];
    for (f, want, out, why) in faults_side_by_side("claude", &faults) {
        assert!(
            !why.is_empty() && why.contains(want),
            "claude {f:?}: {why}\n{}",
            text(&out)
        );
        assert!(!why.contains("\"type\""), "claude {f:?}: raw JSON in {why}");
    }
}

#[test]
fn codex_faults_give_clear_reasons() {
    let faults = [
        (Fault::Status(500), "high demand"),
        (Fault::Status(429), "429"),
        (Fault::Malformed, "stream disconnected"),
        (Fault::Truncated, "stream disconnected"),
        (Fault::Hang, "timed out"),
    ];
    for (f, want, out, why) in faults_side_by_side("codex", &faults) {
        assert!(
            !why.is_empty() && why.contains(want),
            "codex {f:?}: {why}\n{}",
            text(&out)
        );
        assert!(
            !why.contains("\"type\"") && !why.contains("turn.failed"),
            "codex {f:?}: raw JSON in {why}"
        );
    }
}

/// An authentication failure cannot be cured by retrying: the task fails at its first
/// attempt, the run stops, and the message names the secret to fix.
fn bad_key(cli: &'static str, secret: &str) {
    let Some((out, dir)) = fault(cli, Fault::Status(401)) else {
        return;
    };
    let status = status_json(dir.path());
    let row = task_row(&status, 0);
    assert_eq!(
        row["attempts"],
        json!(1),
        "{cli}: retried an authentication failure: {row}"
    );
    let all = text(&out);
    assert!(
        all.contains(secret),
        "{cli}: the message does not name {secret}:\n{all}"
    );
}

#[test]
fn claude_with_a_bad_key_stops_at_once_naming_the_secret() {
    bad_key("claude", "ANTHROPIC_API_KEY");
}

#[test]
fn codex_with_a_bad_key_stops_at_once_naming_the_secret() {
    bad_key("codex", "OPENAI_API_KEY");
}

#[test]
fn gemini_with_a_bad_key_stops_at_once_naming_the_secret() {
    bad_key("gemini", "GEMINI_API_KEY");
}

/// The CLIs the tests install are the ones `dagexec init` pins: a bump of a pinned version
/// is tested before users get it.
#[test]
fn the_tested_versions_are_the_pinned_ones() {
    let script = std::fs::read_to_string(common::manifest().join(".ci/install-agents.sh")).unwrap();
    for (cli, package) in [
        ("claude", "@anthropic-ai/claude-code@"),
        ("codex", "@openai/codex@"),
        ("gemini", "@google/gemini-cli@"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let out = exec(dir.path(), &["init", "--worker", cli, "--stdout"]);
        let workflow = String::from_utf8_lossy(&out.stdout);
        let start = workflow
            .find(package)
            .unwrap_or_else(|| panic!("{cli}: init installs no {package}:\n{workflow}"));
        let pinned: String = workflow[start..]
            .chars()
            .take_while(|c| !c.is_whitespace())
            .collect();
        assert!(
            script
                .split(|c: char| c.is_whitespace() || c == '"' || c == '=')
                .any(|w| w == pinned),
            "{cli}: init pins {pinned}, .ci/install-agents.sh installs something else"
        );
    }
}

// ------------------------------------------------------------------ the gateway, scripted

/// One task whose worker is `script`, against `server` through dagexec's gateway, with the
/// provider keys in dagexec's environment.
fn gateway_run(server: &ModelServer, script: &str, extra: &[&str]) -> (Ran, tempfile::TempDir) {
    let dir = repo(&one_task(), &[]);
    let out = through_gateway(dir.path(), &server.url(), script, extra).run();
    (out, dir)
}

fn one_task() -> Value {
    json!({"schemaVersion": 2, "goal": "gateway", "tasks": [{
        "subject": "alpha", "description": "Write env.txt.",
        "status": "pending", "blockedBy": [],
        "metadata": {"files": {"create": ["env.txt"], "modify": []}},
        "agent": {"role": "engineer"}}]})
}

/// `dagexec run` in `dir` with the worker `script`, its Anthropic requests going through
/// dagexec's gateway to `url`, the provider keys in dagexec's environment.
fn through_gateway(dir: &Path, url: &str, script: &str, extra: &[&str]) -> common::local::Local {
    local(dir)
        .script(script)
        .args(["--yes", "--timeout", "60s"])
        .args(extra)
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .env("OPENAI_API_KEY", "sk-secret-2")
        .env("GEMINI_API_KEY", "gm-secret-3")
        .env_remove("ANTHROPIC_AUTH_TOKEN")
        .env_remove("DAGEXEC_GATEWAY")
}

/// The same request, its stream printed as it arrives.
const CURL_STREAM: &str = r#"curl -sN -X POST "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" -H 'content-type: application/json' -d '{"model":"claude-sonnet-4-5","stream":true,"max_tokens":10,"messages":[{"role":"user","content":"hi"}]}'"#;

/// What a stream cut after its `message_start` spent: every prompt token, 1 output token.
fn stalled_spend() -> (u64, u64, f64) {
    let (input, writes, reads, _) = ANTHROPIC_USAGE;
    let cost = (input as f64 * 3.0 + reads as f64 * 0.3 + writes as f64 * 3.75 + 15.0) / 1e6;
    (input + writes + reads, 1, cost)
}

#[test]
fn a_worker_holds_no_provider_key_and_its_spend_is_counted_on_the_wire() {
    let server = ModelServer::start();
    let script = format!("env > env.txt\n{CURL_MESSAGES} >> env.txt\necho 'COMPLETED: env'");
    let (out, dir) = gateway_run(&server, &script, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let env = git(dir.path(), &["show", "HEAD:env.txt"]);
    assert!(env.contains("DAGEXEC_GATEWAY=http://127.0.0.1:"), "{env}");
    assert!(env.contains("GEMINI_API_KEY=dagexec-"), "{env}");
    // The server got the real key, and the attempt's record the tokens it streamed.
    let row = task_row(&status_json(dir.path()), 0);
    assert_served_through_the_gateway("worker", &env, &server, &row);
    assert!(
        (row["costUsd"].as_f64().unwrap() - anthropic_response_cost()).abs() < 1e-9,
        "{row}"
    );
}

/// A worker whose own report of its spend (here its usage file, as a CLI's final report
/// would be) disagrees with what the gateway counted: the record keeps both, the run's
/// summary, `status` and `status --json` show the CLI's beside the gateway's.
#[test]
fn a_cli_report_that_disagrees_with_the_wire_is_kept_beside_it_and_shown() {
    let server = ModelServer::start();
    let script = format!(
        "{CURL_MESSAGES} > env.txt\n\
         echo '{{\"cost_usd\": 0.5, \"input_tokens\": 7, \"output_tokens\": 3}}' > \"$DAGEXEC_USAGE_FILE\"\n\
         echo 'COMPLETED: asked once'"
    );
    let (out, dir) = gateway_run(&server, &script, &[]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    let line = format!(
        "- task 0: the CLI reported 7 in / 3 out tokens, $0.50; the gateway counted {} in / {output} out tokens, <$0.01",
        input + writes + reads
    );
    assert!(
        said.contains("Spend reported by the agent CLI differs from the gateway's count")
            && said.contains(&line),
        "{said}"
    );
    let table = exec(dir.path(), &["status"]);
    assert!(
        table.stdout().contains("<$0.01 (CLI: $0.50)"),
        "{}",
        table.stdout()
    );
    assert!(table.stdout().contains(&line), "{}", table.stdout());
    let row = task_row(&status_json(dir.path()), 0);
    assert_eq!(row["inputTokens"], json!(input + writes + reads), "{row}");
    assert_eq!(row["cliInputTokens"], json!(7), "{row}");
    assert_eq!(row["cliOutputTokens"], json!(3), "{row}");
    assert_eq!(row["cliCostUsd"], json!(0.5), "{row}");
    let plan = common::local::plan_or_done(dir.path());
    let record = &plan["progress"]["dagexecAttempts"][0];
    assert_eq!(
        record["inputTokens"],
        json!(input + writes + reads),
        "{record}"
    );
    assert_eq!(record["cli"]["costUsd"], json!(0.5), "{record}");
}

/// The reviewer command runs through the gateway as a worker does: no provider key in its
/// environment, a token of its own that the gateway accepts, and what it spent counted on
/// the wire into its attempt's record.
#[test]
fn the_reviewer_holds_no_provider_key_and_its_spend_is_counted_on_the_wire() {
    let server = ModelServer::start();
    let dir = repo(&one_task(), &[]);
    let outside = tempfile::tempdir().unwrap();
    let seen = outside.path().join("reviewer-env.txt");
    let reviewer = outside.path().join("reviewer.sh");
    std::fs::write(
        &reviewer,
        format!(
            "env > '{0}'\n{CURL_MESSAGES} >> '{0}'\necho APPROVED\necho 'summary: env.txt is there'\n",
            seen.display()
        ),
    )
    .unwrap();
    let reviewer = format!("sh '{}'", reviewer.display());
    let out = through_gateway(
        dir.path(),
        &server.url(),
        "echo x > env.txt; echo 'COMPLETED: wrote env.txt'",
        &["--reviewer", &reviewer],
    )
    .run();
    assert!(out.status.success(), "{}", text(&out));
    let env = std::fs::read_to_string(&seen).unwrap();
    let row = task_row(&status_json(dir.path()), 0);
    assert_served_through_the_gateway("reviewer", &env, &server, &row);
}

#[test]
fn with_the_gateway_off_the_worker_gets_dagexecs_environment_as_before() {
    let server = ModelServer::start();
    let (out, dir) = local_off(&server);
    assert!(out.status.success(), "{}", text(&out));
    let env = git(dir.path(), &["show", "HEAD:env.txt"]);
    assert!(env.contains("ANTHROPIC_API_KEY=sk-ant-secret-1"), "{env}");
    assert!(!env.contains("DAGEXEC_GATEWAY="), "{env}");
}

fn local_off(server: &ModelServer) -> (Ran, tempfile::TempDir) {
    let one = json!({"schemaVersion": 2, "goal": "gateway", "tasks": [{
        "subject": "alpha", "description": "Write env.txt.",
        "status": "pending", "blockedBy": [],
        "metadata": {"files": {"create": ["env.txt"], "modify": []}},
        "agent": {"role": "engineer"}}]});
    let dir = repo(&one, &[(".design/dagexec.yml", "gateway: off\n")]);
    let out = local(dir.path())
        .script("env > env.txt; echo 'COMPLETED: env'")
        .args(["--yes"])
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .env_remove("DAGEXEC_GATEWAY")
        .run();
    (out, dir)
}

#[test]
fn a_budget_crossed_during_an_attempt_stops_it_within_one_request() {
    let server = ModelServer::start();
    // Five requests in a row; the first one's spend (about $0.0006) crosses the budget.
    let script = format!(
        "for i in 1 2 3 4 5; do {CURL_MESSAGES} >> env.txt; done\necho 'COMPLETED: asked five times'"
    );
    let (out, dir) = gateway_run(&server, &script, &["--max-cost", "0.0001"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert_eq!(server.seen().len(), 1, "{:?}", server.seen());
    let row = task_row(&status_json(dir.path()), 0);
    assert_eq!(row["status"], "pending", "{row}");
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    assert_eq!(row["inputTokens"], json!(input + writes + reads), "{row}");
    assert_eq!(row["outputTokens"], json!(output), "{row}");
    let all = text(&out);
    assert!(all.contains("budget"), "{all}");
}

#[test]
fn a_worker_killed_by_kill_9_keeps_the_tokens_it_spent_in_its_record() {
    let server = ModelServer::start();
    // The worker spends, then dies by SIGKILL before it could report anything.
    let script = format!("{CURL_MESSAGES} > /dev/null\nkill -9 $$\necho 'COMPLETED: never'");
    let (out, dir) = gateway_run(&server, &script, &[]);
    assert!(!out.status.success(), "{}", text(&out));
    let row = task_row(&status_json(dir.path()), 0);
    assert_eq!(row["status"], "failed", "{row}");
    // Every attempt died the same way; each kept what it spent.
    let attempts = row["attempts"].as_u64().unwrap();
    assert_eq!(server.seen().len() as u64, attempts, "{:?}", server.seen());
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    assert_eq!(
        row["inputTokens"],
        json!(attempts * (input + writes + reads)),
        "{row}"
    );
    assert_eq!(row["outputTokens"], json!(attempts * output), "{row}");
    assert!(row["costUsd"].as_f64().unwrap_or(0.0) > 0.0, "{row}");
}

#[test]
fn a_worker_killed_by_kill_9_in_the_middle_of_a_stream_keeps_its_tokens_so_far() {
    let server = StallServer::start();
    // The worker starts a stream the model stalls after its first event, waits until that
    // event has arrived, and dies by SIGKILL with the stream still open.
    let script = format!(
        "f=$(mktemp)\n{CURL_STREAM} > \"$f\" &\n\
         until grep -q message_start \"$f\"; do sleep 0.1; done\nkill -9 $$"
    );
    let dir = repo(&one_task(), &[]);
    let out = through_gateway(dir.path(), &server.url(), &script, &[]).run();
    assert!(!out.status.success(), "{}", text(&out));
    let row = task_row(&status_json(dir.path()), 0);
    assert_eq!(row["status"], "failed", "{row}");
    let attempts = row["attempts"].as_u64().unwrap();
    assert_eq!(server.stalled() as u64, attempts, "{row}");
    let (input, output, cost) = stalled_spend();
    assert_eq!(row["inputTokens"], json!(attempts * input), "{row}");
    assert_eq!(row["outputTokens"], json!(attempts * output), "{row}");
    let recorded = row["costUsd"].as_f64().unwrap();
    assert!((recorded - attempts as f64 * cost).abs() < 1e-9, "{row}");
}

/// Runs dagexec in `d` with task 0's worker streaming from `server`, and kills it by `kill -9`
/// once the stream has stalled and the attempt's spend so far is in its live file: that file.
fn kill_9_mid_stream(server: &StallServer, d: &Path) -> PathBuf {
    let script = format!("{CURL_STREAM} > /dev/null\necho 'COMPLETED: never'");
    let logs = tempfile::tempdir().unwrap();
    let log = std::fs::File::create(logs.path().join("out")).unwrap();
    let first = through_gateway(d, &server.url(), &script, &[]);
    let mut child = first
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    // Wait until the stream has stalled and the attempt's spend so far is on disk.
    let live = d.join(".git/dagexec/spend/task-0-attempt-1.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while server.stalled() == 0
        || !std::fs::read_to_string(&live).is_ok_and(|t| t.contains("inputTokens"))
    {
        assert!(
            std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "the attempt's spend never reached {}: {}",
            live.display(),
            std::fs::read_to_string(logs.path().join("out")).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    live
}

/// dagexec itself dies by `kill -9` while a worker's stream is stalled mid-way: what the
/// attempt spent so far was kept on disk as it streamed, and the next `dagexec run` records
/// it — in the task's totals, and counted against `max-cost`, which it has used up, so the
/// next run starts nothing.
#[test]
fn a_kill_9_of_dagexec_mid_stream_keeps_the_spend_so_far_for_the_next_run() {
    let server = StallServer::start();
    let dir = repo(&one_task(), &[]);
    let d = dir.path();
    let live = kill_9_mid_stream(&server, d);
    // Run again with a budget below what the cut attempt spent.
    let (input, output, cost) = stalled_spend();
    let again = through_gateway(
        d,
        &server.url(),
        "echo again > env.txt; echo 'COMPLETED: again'",
        &["--max-cost", "0.0003"],
    )
    .run();
    let said = text(&again);
    assert!(!again.status.success(), "{said}");
    assert!(said.contains("attempt 1 was cut short"), "{said}");
    assert!(said.contains("budget"), "{said}");
    assert!(!d.join("env.txt").exists(), "a worker ran: {said}");
    assert_eq!(server.stalled(), 1, "{said}");
    let row = task_row(&status_json(d), 0);
    assert_eq!(row["inputTokens"], json!(input), "{row}");
    assert_eq!(row["outputTokens"], json!(output), "{row}");
    assert!(
        (row["costUsd"].as_f64().unwrap() - cost).abs() < 1e-9,
        "{row}"
    );
    let plan: Value =
        serde_json::from_str(&std::fs::read_to_string(d.join(".design/plan.json")).unwrap())
            .unwrap();
    let records = plan["progress"]["dagexecAttempts"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["outcome"], "interrupted", "{records:?}");
    assert!(records[0].get("signal").is_none(), "{records:?}");
    assert!(!live.exists(), "the live file is left");
}

/// dagexec dies by `kill -9` mid-stream, and before the next run the team marks the cut task
/// done, or removes it from the plan: what its attempt spent was spent all the same, so the
/// next run still counts it against `max-cost` (which it has used up: nothing starts) and
/// says so.
#[test]
fn a_cut_task_marked_done_or_removed_before_the_resume_still_counts_its_spend() {
    let (_, _, cost) = stalled_spend();
    for removed in [false, true] {
        let server = StallServer::start();
        let mut plan = one_task();
        plan["tasks"].as_array_mut().unwrap().push(json!({
            "subject": "beta", "description": "Write two.txt.",
            "status": "pending", "blockedBy": [0],
            "metadata": {"files": {"create": ["two.txt"], "modify": []}},
            "agent": {"role": "engineer"}}));
        let dir = repo(&plan, &[]);
        let d = dir.path();
        kill_9_mid_stream(&server, d);
        let path = d.join(".design/plan.json");
        let mut saved: Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let tasks = saved["tasks"].as_array_mut().unwrap();
        if removed {
            tasks.remove(0);
            tasks[0]["blockedBy"] = json!([]);
        } else {
            tasks[0]["status"] = json!("completed");
            tasks[0]["result"] = json!("done by hand");
            std::fs::write(d.join("env.txt"), "by hand\n").unwrap();
        }
        std::fs::write(&path, serde_json::to_string_pretty(&saved).unwrap()).unwrap();
        git(d, &["add", "-A"]);
        git(d, &["commit", "-qm", "the team's edit"]);
        let again = through_gateway(
            d,
            &server.url(),
            "echo two > two.txt; echo 'COMPLETED: two'",
            &["--max-cost", "0.0003"],
        )
        .run();
        let said = text(&again);
        assert!(!again.status.success(), "{said}");
        let why = if removed {
            "(no longer in the plan)"
        } else {
            "(marked done since)"
        };
        assert!(
            said.contains(&format!("{why} attempt 1 was cut short")),
            "{said}"
        );
        assert!(said.contains("budget"), "{said}");
        assert!(!d.join("two.txt").exists(), "a worker ran: {said}");
        let plan: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let progress = &plan["progress"];
        let counted = if removed {
            progress["dagexecRemovedSpend"]["costUsd"].as_f64()
        } else {
            progress["dagexecAttempts"][0]["costUsd"].as_f64()
        };
        assert!((counted.unwrap() - cost).abs() < 1e-9, "{progress}");
    }
}

/// A reviewer that spent through the gateway and then waits: the run stopped while it
/// waits, by Ctrl-C or by `kill -9` of dagexec itself. Returns the repository and the
/// marker file the reviewer touches once its request is answered.
fn reviewing(server: &ModelServer, dir: &Path) -> (common::local::Local, tempfile::TempDir) {
    let outside = tempfile::tempdir().unwrap();
    let asked = outside.path().join("asked");
    let reviewer = outside.path().join("reviewer.sh");
    std::fs::write(
        &reviewer,
        format!(
            "cat > /dev/null\n{CURL_MESSAGES} > /dev/null\ntouch '{}'\nsleep 60\necho APPROVED\n",
            asked.display()
        ),
    )
    .unwrap();
    let reviewer = format!("sh '{}'", reviewer.display());
    let run = through_gateway(
        dir,
        &server.url(),
        "echo x > env.txt; echo 'COMPLETED: wrote env.txt'",
        &["--reviewer", &reviewer],
    );
    (run, outside)
}

/// Waits until `until` holds (failing the test after two minutes or when `child` ended).
fn wait_for(child: &mut std::process::Child, what: &str, until: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while !until() {
        assert!(
            std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "{what} never happened"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Ctrl-C while the reviewer runs: what the reviewer already spent through the gateway is
/// the interrupted attempt's, in its record, the task's totals and the budget.
#[test]
fn ctrl_c_during_a_review_keeps_what_the_reviewer_spent() {
    let server = ModelServer::start();
    let dir = repo(&one_task(), &[]);
    let (run, outside) = reviewing(&server, dir.path());
    let mut child = run
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let asked = outside.path().join("asked");
    wait_for(&mut child, "the reviewer's request", || asked.exists());
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    let plan = common::local::plan_or_done(dir.path());
    let records = plan["progress"]["dagexecAttempts"].as_array().unwrap();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["outcome"], "interrupted", "{records:?}");
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    assert_eq!(
        records[0]["inputTokens"],
        json!(input + writes + reads),
        "{records:?}"
    );
    assert_eq!(records[0]["outputTokens"], json!(output), "{records:?}");
    let cost = records[0]["costUsd"].as_f64().unwrap_or(0.0);
    assert!(
        (cost - anthropic_response_cost()).abs() < 1e-9,
        "{records:?}"
    );
}

/// dagexec killed by `kill -9` while the reviewer runs: what the reviewer spent so far was
/// kept on disk with the attempt's, and the next run records it and holds it to `max-cost`.
#[test]
fn a_kill_9_of_dagexec_during_a_review_keeps_what_the_reviewer_spent_for_the_next_run() {
    let server = ModelServer::start();
    let dir = repo(&one_task(), &[]);
    let d = dir.path();
    let (run, outside) = reviewing(&server, d);
    let mut child = run
        .command()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let asked = outside.path().join("asked");
    wait_for(&mut child, "the reviewer's request", || asked.exists());
    // The attempt's live file follows the reviewer's spend as it grows.
    let live = d.join(".git/dagexec/spend/task-0-attempt-1.json");
    wait_for(&mut child, "the reviewer's spend on disk", || {
        std::fs::read_to_string(&live).is_ok_and(|t| t.contains("inputTokens"))
    });
    child.kill().unwrap();
    child.wait().unwrap();
    let again = through_gateway(
        d,
        &server.url(),
        "echo again > env.txt; echo 'COMPLETED: again'",
        &["--max-cost", "0.0003"],
    )
    .run();
    let said = text(&again);
    assert!(!again.status.success(), "{said}");
    assert!(said.contains("budget"), "{said}");
    assert_eq!(server.seen().len(), 1, "{said}");
    let row = task_row(&status_json(d), 0);
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    assert_eq!(row["inputTokens"], json!(input + writes + reads), "{row}");
    assert_eq!(row["outputTokens"], json!(output), "{row}");
}

/// A worker whose CLI reports exactly what the gateway counted for it, and a reviewer that
/// spends through the gateway too: nothing disagrees, and nothing says so — the record's
/// CLI figures are the worker's and the reviewer's together.
#[test]
fn a_reviewers_spend_is_not_shown_as_the_workers_cli_disagreeing_with_the_wire() {
    let server = ModelServer::start();
    let dir = repo(&one_task(), &[]);
    let outside = tempfile::tempdir().unwrap();
    let reviewer = outside.path().join("reviewer.sh");
    std::fs::write(
        &reviewer,
        format!(
            "cat > /dev/null\n{CURL_MESSAGES} > /dev/null\necho APPROVED\necho 'summary: fine'\n"
        ),
    )
    .unwrap();
    let reviewer = format!("sh '{}'", reviewer.display());
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    let script = format!(
        "{CURL_MESSAGES} > env.txt\n\
         echo '{{\"cost_usd\": {}, \"input_tokens\": {}, \"output_tokens\": {output}}}' > \"$DAGEXEC_USAGE_FILE\"\n\
         echo 'COMPLETED: asked once'",
        anthropic_response_cost(),
        input + writes + reads
    );
    let out = through_gateway(
        dir.path(),
        &server.url(),
        &script,
        &["--reviewer", &reviewer],
    )
    .run();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(server.seen().len(), 2, "{said}");
    assert!(!said.contains("differs from the gateway's count"), "{said}");
    let table = exec(dir.path(), &["status"]);
    assert!(!table.stdout().contains("(CLI:"), "{}", table.stdout());
}

/// The budget reached by the reviewer, not the worker: the worker's one request crosses
/// `max-cost`, and the gateway refuses the reviewer's. That is a budget stop, as a worker's
/// is — the run stops as when `max-cost` is spent, the task pending again (this attempt not
/// spent on it), both spends in its record — not a failed review.
#[test]
fn a_budget_the_reviewer_reaches_stops_the_run_as_the_workers_would() {
    let server = ModelServer::start();
    let dir = repo(&one_task(), &[]);
    let outside = tempfile::tempdir().unwrap();
    let reviewer = outside.path().join("reviewer.sh");
    std::fs::write(
        &reviewer,
        format!("cat > /dev/null\n{CURL_MESSAGES}\necho 'the model refused'\n"),
    )
    .unwrap();
    let reviewer = format!("sh '{}'", reviewer.display());
    let out = through_gateway(
        dir.path(),
        &server.url(),
        &format!("{CURL_MESSAGES} > env.txt\necho 'COMPLETED: wrote env.txt'"),
        &["--reviewer", &reviewer, "--max-cost", "0.0005"],
    )
    .run();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert_eq!(server.seen().len(), 1, "{said}");
    assert!(said.contains("budget"), "{said}");
    assert!(said.contains("not counted as a failure"), "{said}");
    let row = task_row(&status_json(dir.path()), 0);
    assert_eq!(row["status"], "pending", "{row}\n{said}");
    assert_eq!(row["attempts"], json!(0), "{row}\n{said}");
    let (input, writes, reads, _) = ANTHROPIC_USAGE;
    assert_eq!(row["inputTokens"], json!(input + writes + reads), "{row}");
    let plan = common::local::plan_or_done(dir.path());
    assert!(
        plan["tasks"][0].get("reviews").is_none(),
        "{plan:#}\n{said}"
    );
}

/// `rate-limits:` holds a provider's requests at the gateway until its last minute lets
/// them start: with one request a minute, a worker's second request never reaches the server
/// before its attempt's timeout (nor any retry's, each within the same minute).
#[test]
fn a_requests_per_minute_limit_holds_the_next_request_at_the_gateway() {
    let server = ModelServer::start();
    let dir = repo(
        &one_task(),
        &[(
            ".design/dagexec.yml",
            "rate-limits:\n  anthropic:\n    requests-per-minute: 1\n",
        )],
    );
    let script = format!(
        "{CURL_MESSAGES} >> \"$DAGEXEC_LOG_FILE\"\n{CURL_MESSAGES} >> \"$DAGEXEC_LOG_FILE\"\necho 'COMPLETED: asked twice'"
    );
    let started = std::time::Instant::now();
    let out = local(dir.path())
        .script(&script)
        .args(["--yes", "--timeout", "5s"])
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .env_remove("DAGEXEC_GATEWAY")
        .run();
    let minutes = started.elapsed().as_secs() / 60;
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("timed out"), "{said}");
    // One request a minute at most (a run slowed past a minute by load may see one more
    // per minute it took).
    let seen = server.seen().len() as u64;
    assert!(
        seen >= 1 && seen <= 1 + minutes,
        "{seen} requests in {minutes} min: {said}"
    );
}

#[test]
fn rate_limits_that_cannot_be_used_are_named_with_the_fix() {
    let dir = repo(
        &one_task(),
        &[(
            ".design/dagexec.yml",
            "rate-limits:\n  anthropic:\n    requests-per-minute: 0\n",
        )],
    );
    let out = local(dir.path())
        .script("echo 'COMPLETED: never'")
        .args(["--yes"])
        .env_remove("DAGEXEC_GATEWAY")
        .run();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(
            "rate-limits.anthropic.requests-per-minute: must be a whole number of at least 1, not 0; e.g. `requests-per-minute: 50` (in .design/dagexec.yml)"
        ),
        "{said}"
    );
}

#[test]
fn a_429_storm_holds_every_worker_until_the_retry_after() {
    let server = ModelServer::start();
    server.set_fault(Some(Fault::RateLimitFor(std::time::Duration::from_secs(2))));
    let task = |i: usize| {
        json!({"subject": format!("t{i}"), "description": "Ask until answered.",
               "status": "pending", "blockedBy": [],
               "metadata": {"files": {"create": [format!("f{i}.txt")], "modify": []}},
               "agent": {"role": "engineer"}})
    };
    let plan =
        json!({"schemaVersion": 2, "goal": "storm", "tasks": (0..4).map(task).collect::<Vec<_>>()});
    let dir = repo(&plan, &[]);
    // Each worker retries at once, as tightly as it can, up to 500 times.
    let script = format!(
        "i=0\nuntil [ \"$({CURL_MESSAGES})\" = 200 ] || [ $i -ge 500 ]; do i=$((i+1)); done\n\
         echo $i > f$DAGEXEC_TASK_INDEX.txt\necho \"COMPLETED: retried $i times\""
    );
    let out = local(dir.path())
        .script(&script)
        .jobs(4)
        .args(["--yes", "--timeout", "60s"])
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .env_remove("DAGEXEC_GATEWAY")
        .run();
    assert!(out.status.success(), "{}", text(&out));
    // Four workers: each one's first request may meet the limit, and one more sent before
    // the gateway learned of it; then the gateway held them all past the window, so each
    // is answered next. Without the hold the tight loops send hundreds.
    let seen = server.seen().len();
    assert!((4..=12).contains(&seen), "the server saw {seen} requests");
}

/// A worker that called a model the price table lacks beside a priced one, stopped while it
/// waits — by Ctrl-C, or by `kill -9` of dagexec itself (its spend kept in its live file for
/// the next run): what the gateway priced is the attempt's cost either way, as it is when an
/// attempt ends, and the next run's `max-cost` counts it.
#[test]
fn a_stopped_attempts_priced_spend_is_kept_beside_an_unpriced_models_tokens() {
    use nix::sys::signal::Signal;
    let unpriced = CURL_MESSAGES.replace("claude-sonnet-4-5", "mystery-1");
    for signal in [Signal::SIGINT, Signal::SIGKILL] {
        let server = ModelServer::start();
        let dir = repo(&one_task(), &[]);
        let d = dir.path();
        let outside = tempfile::tempdir().unwrap();
        let asked = outside.path().join("asked");
        let script = format!(
            "{CURL_MESSAGES} > /dev/null\n{unpriced} > /dev/null\ntouch '{}'\nsleep 60\necho 'COMPLETED: never'",
            asked.display()
        );
        let first = through_gateway(d, &server.url(), &script, &[]);
        let mut child = first
            .command()
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        wait_for(&mut child, "the worker's requests", || asked.exists());
        let live = d.join(".git/dagexec/spend/task-0-attempt-1.json");
        wait_for(&mut child, "the worker's spend on disk", || {
            std::fs::read_to_string(&live)
                .is_ok_and(|t| t.matches("inputTokens").count() == 1 && t.contains("230"))
        });
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, signal).unwrap();
        child.wait().unwrap();
        let again = through_gateway(
            d,
            &server.url(),
            "echo again > env.txt; echo 'COMPLETED: again'",
            &["--max-cost", "0.0003"],
        )
        .run();
        let said = text(&again);
        assert!(said.contains("budget"), "{signal}: {said}");
        assert_eq!(server.seen().len(), 2, "{signal}: {said}");
        let row = task_row(&status_json(d), 0);
        let (input, writes, reads, output) = ANTHROPIC_USAGE;
        assert_eq!(
            row["inputTokens"],
            json!(2 * (input + writes + reads)),
            "{signal}: {row}"
        );
        assert_eq!(row["outputTokens"], json!(2 * output), "{signal}: {row}");
        let cost = row["costUsd"].as_f64();
        assert!(
            cost.is_some_and(|c| (c - anthropic_response_cost()).abs() < 1e-9),
            "{signal}: {row}\n{said}"
        );
    }
}

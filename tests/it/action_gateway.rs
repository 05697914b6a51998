//! The work job's model gateway (issue 35 on the Action), job by job on the lab against the
//! scripted model server: the worker holds a token and no provider key, its tokens are read
//! off the wire into the attempt's record (the plan on the branch, `status`), a request past
//! `max-cost` stops the attempt as a budget stop, the `gateway` input off gives the worker
//! the job's environment as before, and the branch's own settings cannot loosen the gateway.

use serde_json::{Value, json};

use crate::common::lab::{Lab, lab, output_file, printed_outputs, task};
use crate::common::model_server::{
    ANTHROPIC_USAGE, CURL_MESSAGES, ModelServer, StallServer, anthropic_response_cost,
    assert_served_through_the_gateway,
};
use crate::common::text;

/// A lab of one task that writes `env.txt` with `script`, the provider keys in every job's
/// environment (the workflow's `env:` from secrets), the Anthropic API at `server`.
fn gateway_lab(server: &ModelServer, script: &str, env: &[(&str, &str)]) -> Lab {
    gateway_lab_at(&server.url(), script, env)
}

/// [`gateway_lab`] with the Anthropic API at `url`.
fn gateway_lab_at(url: &str, script: &str, env: &[(&str, &str)]) -> Lab {
    let mut b = lab()
        .plan("gateway", vec![task("alpha", &["env.txt"], &[])])
        .worker(script)
        .env("ANTHROPIC_BASE_URL", url)
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .env("OPENAI_API_KEY", "sk-secret-2")
        .env("GEMINI_API_KEY", "gm-secret-3");
    for (k, v) in env {
        b = b.env(k, v);
    }
    b.start()
}

/// Round 1's plan job, then task 0's first attempt as its work job (run 101) in a checkout
/// of the round's base: that checkout and the work job's output.
fn work_job(lab: &Lab) -> (std::path::PathBuf, std::process::Output) {
    let planned = lab.plan_job(101, &[]);
    let base = planned.outputs["base"].clone();
    let dir = lab.checkout(&base);
    let out = lab
        .job(&dir, 101)
        .env_remove("DAGEXEC_TOKEN")
        .args(["action", "work"])
        .env("DAGEXEC_TASK", "0")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", &planned.outputs["round"])
        .env("DAGEXEC_BASE", &base)
        .env("DAGEXEC_WORKER", "sh ./worker.sh")
        .env("DAGEXEC_ARTIFACTS", lab.tmp.path().join("artifacts"))
        .output()
        .unwrap();
    (dir, out)
}

/// The record of the task's attempts on the execution branch.
fn attempts(lab: &Lab) -> Vec<Value> {
    let plan = lab.branch_plan();
    plan["progress"]["dagexecAttempts"]
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// `dagexec status --json`'s row of task 0, in a clone of the execution branch.
fn status_row(lab: &Lab) -> Value {
    let dir = lab.checkout(&lab.next_base());
    let out = crate::common::local::exec(&dir, &["status", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    rows.as_array().unwrap()[0].clone()
}

#[test]
fn the_work_job_serves_its_worker_through_the_gateway_and_records_the_wires_tokens() {
    let server = ModelServer::start();
    let script = format!("env > env.txt\n{CURL_MESSAGES} >> env.txt\necho 'COMPLETED: env'");
    let lab = gateway_lab(&server, &script, &[]);
    let (ok, log) = lab.run_rounds(3);
    assert!(ok, "{log}");
    let env = lab.branch_file("env.txt");
    assert!(env.contains("DAGEXEC_GATEWAY=http://127.0.0.1:"), "{env}");
    assert!(env.contains("OPENAI_API_KEY=dagexec-"), "{env}");
    assert!(env.contains("CODEX_HOME="), "{env}");
    // The server got the job's key; the attempt's record, the tokens that streamed.
    let row = status_row(&lab);
    assert_eq!(row["status"], "completed", "{row}");
    assert_served_through_the_gateway("worker", &env, &server, &row);
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    let want = anthropic_response_cost();
    assert!(
        (row["costUsd"].as_f64().unwrap() - want).abs() < 1e-9,
        "{row}"
    );
    assert_eq!(attempts(&lab).len(), 1, "{:?}", attempts(&lab));
    // The run's outputs: the records' totals.
    let outputs = printed_outputs(&log);
    assert_eq!(outputs["conclusion"], "completed", "{log}");
    assert_eq!(outputs["cost"], format!("{want:.6}"), "{log}");
    assert_eq!(
        outputs["input-tokens"],
        (input + writes + reads).to_string()
    );
    assert_eq!(outputs["output-tokens"], output.to_string());
}

#[test]
fn a_request_past_max_cost_stops_the_work_jobs_attempt_as_a_budget_stop() {
    let server = ModelServer::start();
    // Five requests; the first one's spend (about $0.0006) crosses the budget.
    let script = format!(
        "for i in 1 2 3 4 5; do {CURL_MESSAGES} >> env.txt; done\necho 'COMPLETED: asked five times'"
    );
    let lab = gateway_lab(&server, &script, &[("DAGEXEC_MAX_COST", "0.0001")]);
    let (_, log) = lab.run_rounds(3);
    assert_eq!(server.seen().len(), 1, "{:?}\n{log}", server.seen());
    let records = attempts(&lab);
    assert_eq!(records.len(), 1, "{records:?}\n{log}");
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    let row = status_row(&lab);
    assert_ne!(row["status"], "completed", "{row}");
    assert_eq!(row["inputTokens"], json!(input + writes + reads), "{row}");
    assert_eq!(row["outputTokens"], json!(output), "{row}");
    assert!(log.contains("max-cost"), "{log}");
    assert!(log.contains("spending limit"), "{log}");
}

/// The budget reached by the reviewer, not the worker: the worker's one request crosses
/// `max-cost` and the gateway refuses the reviewer's. A budget stop, as a worker's is, not a
/// failed review: the work job dropped the reviewer's stop, and the attempt failed as "review
/// failed: the reviewer's output has no line APPROVED or REJECTED", retried past the budget.
#[test]
fn a_budget_the_reviewer_reaches_stops_the_work_jobs_attempt_as_a_budget_stop() {
    let server = ModelServer::start();
    let outside = tempfile::tempdir().unwrap();
    let reviewer = outside.path().join("reviewer.sh");
    std::fs::write(
        &reviewer,
        format!("cat > /dev/null\n{CURL_MESSAGES}\necho 'the model refused'\n"),
    )
    .unwrap();
    let reviewer = format!("sh '{}'", reviewer.display());
    let script = format!("{CURL_MESSAGES} > env.txt\necho 'COMPLETED: asked once'");
    let lab = gateway_lab(
        &server,
        &script,
        &[
            ("DAGEXEC_MAX_COST", "0.0005"),
            ("DAGEXEC_REVIEWER", &reviewer),
        ],
    );
    let (_, log) = lab.run_rounds(3);
    assert_eq!(server.seen().len(), 1, "{:?}\n{log}", server.seen());
    let row = status_row(&lab);
    assert_ne!(row["status"], "completed", "{row}");
    assert!(log.contains("spending limit"), "{log}");
    assert!(!log.contains("review failed"), "{log}");
}

/// The branch's `prices:` cannot make a model cheaper on the Action: priced at zero there,
/// claude-sonnet-4-5's first request would cost nothing and `max-cost` never bite. The
/// built-in price is kept and the first request crosses the budget.
#[test]
fn the_branchs_prices_cannot_make_a_model_cheaper_than_the_built_in_table_on_the_action() {
    let server = ModelServer::start();
    let script = format!(
        "for i in 1 2 3 4 5; do {CURL_MESSAGES} >> env.txt; done\necho 'COMPLETED: asked five times'"
    );
    let lab = lab()
        .plan("gateway", vec![task("alpha", &["env.txt"], &[])])
        .worker(&script)
        .file(
            ".design/dagexec.yml",
            "prices:\n  claude-sonnet-4-5: {input: 0, cached-input: 0, cache-write: 0, output: 0}\n",
        )
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .env("DAGEXEC_MAX_COST", "0.0001")
        .start();
    let (_, log) = lab.run_rounds(3);
    assert_eq!(server.seen().len(), 1, "{:?}\n{log}", server.seen());
    assert!(log.contains("spending limit"), "{log}");
    // What the work job's summary says of it: `flow::settings::tighten`'s unit test.
}

#[test]
fn with_the_gateway_input_off_the_worker_gets_the_jobs_environment_as_before() {
    let server = ModelServer::start();
    let lab = gateway_lab(
        &server,
        "env > env.txt; echo 'COMPLETED: env'",
        &[("DAGEXEC_GATEWAY", "off")],
    );
    let (ok, log) = lab.run_rounds(3);
    assert!(ok, "{log}");
    let env = lab.branch_file("env.txt");
    assert!(env.contains("ANTHROPIC_API_KEY=sk-ant-secret-1"), "{env}");
    assert!(!env.contains("DAGEXEC_GATEWAY=http"), "{env}");
}

/// Issue 35: the checkout's `.design/dagexec.yml` is on the branch, which an earlier task's
/// agent can edit: its `gateway: off` would hand the provider keys to every later task's
/// agent, its `max-requests: 5000` lift the input's cap. On the Action the file may only
/// tighten the inputs: the gateway stays on, the cap stays, and the summary says so.
#[test]
fn the_branchs_settings_cannot_turn_the_gateway_off_nor_raise_a_cap_on_the_action() {
    let server = ModelServer::start();
    let lab = lab()
        .plan("gateway", vec![task("alpha", &["env.txt"], &[])])
        .worker("env > env.txt; echo 'COMPLETED: env'")
        .file(".design/dagexec.yml", "gateway: off\nmax-requests: 5000\n")
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .env("DAGEXEC_GATEWAY", "")
        .env("DAGEXEC_MAX_REQUESTS", "3")
        .start();
    let (dir, out) = work_job(&lab);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    let env = std::fs::read_to_string(dir.join("env.txt")).unwrap();
    assert!(
        !env.contains("secret"),
        "a provider key reached the agent:\n{env}"
    );
    assert!(env.contains("ANTHROPIC_API_KEY=dagexec-"), "{env}");
    assert!(log.contains("**model gateway: on**"), "{log}");
    assert!(
        log.contains("#### Settings of the branch not followed"),
        "{log}"
    );
    assert!(
        log.contains(
            "`gateway: off` in the branch's .design/dagexec.yml was not followed: kept on"
        ),
        "{log}"
    );
    assert!(
        log.contains("`max-requests: 5000` in the branch's .design/dagexec.yml was not followed: kept 3 (the `max-requests` input)"),
        "{log}"
    );
}

#[test]
fn the_work_jobs_summary_says_which_protections_were_on_and_why_not() {
    let server = ModelServer::start();
    let lab = gateway_lab(
        &server,
        "echo x > env.txt; echo 'COMPLETED: x'",
        // A user this machine does not have: the job says so and goes on.
        &[("DAGEXEC_AGENT_USER", "dagexec-no-such-user")],
    );
    let (_, out) = work_job(&lab);
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(log.contains("#### Protections"), "{log}");
    assert!(log.contains("**model gateway: on**"), "{log}");
    assert!(log.contains("**provider key: withheld**"), "{log}");
    assert!(
        log.contains(
            "**unprivileged user: not available** — no user dagexec-no-such-user on this runner"
        ),
        "{log}"
    );
    assert!(log.contains("**egress: not restricted**"), "{log}");
}

#[test]
fn the_work_jobs_reviewer_goes_through_the_gateway_too_and_its_tokens_count() {
    let server = ModelServer::start();
    let out = tempfile::tempdir().unwrap();
    let seen_env = out.path().join("reviewer-env.txt");
    let reviewer = out.path().join("reviewer.sh");
    std::fs::write(
        &reviewer,
        format!(
            "#!/bin/sh\ncat > /dev/null\nenv > '{}'\n{CURL_MESSAGES} >> '{}'\necho APPROVED\necho 'summary: fine'\n",
            seen_env.display(),
            seen_env.display()
        ),
    )
    .unwrap();
    let script = format!("echo x > env.txt\n{CURL_MESSAGES} > /dev/null\necho 'COMPLETED: x'");
    let command = format!("sh '{}'", reviewer.display());
    let lab = gateway_lab(&server, &script, &[("DAGEXEC_REVIEWER", &command)]);
    let (ok, log) = lab.run_rounds(3);
    assert!(ok, "{log}");
    let env = std::fs::read_to_string(&seen_env).unwrap();
    assert!(
        !env.contains("secret"),
        "a provider key reached the reviewer:\n{env}"
    );
    assert!(env.contains("ANTHROPIC_API_KEY=dagexec-"), "{env}");
    assert!(env.contains("DAGEXEC_REVIEW=1"), "{env}");
    assert!(env.lines().any(|l| l == "200"), "{env}");
    // Worker and reviewer, each one request with the provider's key; both counted.
    let seen = server.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.key.as_deref() == Some("sk-ant-secret-1"))
    );
    let (input, writes, reads, output) = ANTHROPIC_USAGE;
    let row = status_row(&lab);
    assert_eq!(
        row["inputTokens"],
        json!(2 * (input + writes + reads)),
        "{row}"
    );
    assert_eq!(row["outputTokens"], json!(2 * output), "{row}");
}

/// Issue 35: a work job GitHub cancels, that passes its `timeout-minutes`, or whose dagexec
/// is killed while its worker's stream is open still delivers what the attempt spent: the
/// step's outputs name the artifact from the start (so the `if: always()` upload step
/// uploads it), its `result.json` holds the wire's tokens so far, and finalize records the
/// attempt with them.
#[test]
fn a_work_job_killed_mid_stream_leaves_its_spend_so_far_for_finalize_to_record() {
    let server = StallServer::start();
    let script = format!("{CURL_MESSAGES} > /dev/null\necho 'COMPLETED: never'");
    let lab = gateway_lab_at(&server.url(), &script, &[]);
    let planned = lab.plan_job(101, &[]);
    let (round, base) = (&planned.outputs["round"], &planned.outputs["base"]);
    let dir = lab.checkout(base);
    let artifacts = lab.tmp.path().join("artifacts-101");
    let name = "dagexec-101-1-task-0-attempt-1";
    let outputs = lab.tmp.path().join("work.outputs");
    std::fs::write(&outputs, "").unwrap();
    let log = lab.tmp.path().join("work.log");
    let mut child = lab
        .job(&dir, 101)
        .env_remove("DAGEXEC_TOKEN")
        .args(["action", "work"])
        .env("DAGEXEC_TASK", "0")
        .env("DAGEXEC_ATTEMPT", "1")
        .env("DAGEXEC_ROUND", round)
        .env("DAGEXEC_BASE", base)
        .env("DAGEXEC_WORKER", "sh ./worker.sh")
        .env("DAGEXEC_ARTIFACTS", artifacts.join(name))
        .env("GITHUB_OUTPUT", &outputs)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the stream has stalled and the attempt's spend so far is in its result.
    let result = artifacts.join(name).join("result.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while server.stalled() == 0
        || !std::fs::read_to_string(&result).is_ok_and(|t| t.contains("inputTokens"))
    {
        assert!(
            std::time::Instant::now() < deadline && child.try_wait().unwrap().is_none(),
            "the attempt's spend never reached {}: {}",
            result.display(),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // The upload step's inputs were set before the attempt began.
    let set = output_file(&std::fs::read_to_string(&outputs).unwrap());
    assert!(
        set.contains(&("artifact-name".to_string(), name.to_string())),
        "{set:?}"
    );
    let (_, said) = lab.finalize_job(101, &planned, &artifacts);
    assert!(
        said.contains("the work job ended before the attempt did"),
        "{said}"
    );
    let records = attempts(&lab);
    assert_eq!(records.len(), 1, "{records:?}\n{said}");
    assert_eq!(records[0]["outcome"], "failed", "{records:?}");
    let (input, writes, reads, _) = ANTHROPIC_USAGE;
    let row = status_row(&lab);
    assert_eq!(row["inputTokens"], json!(input + writes + reads), "{row}");
    assert_eq!(row["outputTokens"], json!(1), "{row}");
    assert!(row["costUsd"].as_f64().unwrap() > 0.0, "{row}");
}

#[test]
fn the_work_jobs_gateway_starts_from_a_hold_the_records_at_its_base_carry() {
    // An earlier attempt's record: Anthropic rate-limited until 20 s from now. The next
    // attempt's first request waits at its job's gateway until then.
    let server = ModelServer::start();
    let now = jiff::Timestamp::now();
    let until = now + jiff::SignedDuration::from_secs(20);
    let stamp = |t: jiff::Timestamp| t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let record = json!({
        "task": 0, "attempt": 1, "start": stamp(now - jiff::SignedDuration::from_secs(5)),
        "end": stamp(now), "seconds": 5.0, "outcome": "completed",
        "rateLimits": [{"provider": "anthropic", "answers": 1, "heldUntil": stamp(until)}]
    });
    let mut done = task("done", &["done.txt"], &[]);
    done["status"] = json!("completed");
    done["attempts"] = json!(1);
    let script = format!("{CURL_MESSAGES} > env.txt\ndate +%s >> env.txt\necho 'COMPLETED: env'");
    let lab = lab()
        .plan("gateway", vec![done, task("alpha", &["env.txt"], &[])])
        .progress(json!({"completedTasks": [], "dagexecAttempts": [record]}))
        .worker(&script)
        .env("ANTHROPIC_BASE_URL", server.url())
        .env("ANTHROPIC_API_KEY", "sk-ant-secret-1")
        .start();
    let (ok, log) = lab.run_rounds(3);
    assert!(ok, "{log}");
    let env = lab.branch_file("env.txt");
    let mut lines = env.lines();
    assert_eq!(lines.next(), Some("200"), "{env}\n{log}");
    let answered: i64 = lines.next().unwrap().trim().parse().unwrap();
    assert!(
        answered >= until.as_second(),
        "answered at {answered}, before the hold ended at {until}\n{log}"
    );
}

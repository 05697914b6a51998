use super::*;
use crate::pure::said::{Halt, Said};

#[test]
fn a_reviewers_spend_adds_to_the_workers() {
    let worker = Usage {
        cost_usd: Some(0.25),
        input_tokens: Some(10),
        output_tokens: None,
        model: Some("w".into()),
    };
    let reviewer = Usage {
        cost_usd: Some(0.5),
        input_tokens: None,
        output_tokens: Some(7),
        model: Some("r".into()),
    };
    assert_eq!(
        worker.clone().plus(reviewer.clone()),
        Usage {
            cost_usd: Some(0.75),
            input_tokens: Some(10),
            output_tokens: Some(7),
            model: Some("w".into()),
        }
    );
    assert_eq!(Usage::default().plus(reviewer.clone()), reviewer);
    assert_eq!(worker.clone().plus(Usage::default()), worker);
}

fn plan(tasks: usize) -> Plan {
    let tasks: Vec<Value> = (0..tasks)
            .map(|i| serde_json::json!({"subject": format!("t{i}"), "status": "pending", "blockedBy": []}))
            .collect();
    serde_json::from_value(serde_json::json!({
        "schemaVersion": 2, "goal": "g", "progress": {"completedTasks": []}, "tasks": tasks
    }))
    .unwrap()
}

fn at(s: &str) -> jiff::Timestamp {
    s.parse().unwrap()
}

#[test]
fn a_record_has_the_shared_shape() {
    let m = Measured {
        start: at("2026-11-23T05:20:13.4Z"),
        end: at("2026-11-23T05:22:40.62Z"),
        usage: Usage {
            cost_usd: Some(0.1234),
            input_tokens: Some(1200),
            output_tokens: Some(340),
            model: Some("claude-sonnet-4-5".into()),
        },
    };
    let r = AttemptRecord::new(3, 1, &m, Outcome::Completed);
    assert_eq!(
        serde_json::to_value(&r).unwrap(),
        serde_json::json!({"task": 3, "attempt": 1, "start": "2026-11-23T05:20:13Z",
                "end": "2026-11-23T05:22:40Z", "seconds": 147.2, "outcome": "completed",
                "costUsd": 0.1234, "inputTokens": 1200, "outputTokens": 340,
                "model": "claude-sonnet-4-5"})
    );
    let bare = AttemptRecord::new(
        0,
        2,
        &Measured {
            usage: Usage::default(),
            ..m
        },
        Outcome::Timeout,
    );
    let v = serde_json::to_value(&bare).unwrap();
    assert_eq!(v.as_object().unwrap().len(), 6, "{v}");
    assert_eq!(v["outcome"], "timeout");
}

#[test]
fn records_are_kept_in_order_and_summed() {
    let mut p = plan(3);
    let m = |secs: i64, cost: Option<f64>| Measured {
        start: at("2026-01-01T00:00:00Z"),
        end: at("2026-01-01T00:00:00Z") + jiff::SignedDuration::from_secs(secs),
        usage: Usage {
            cost_usd: cost,
            ..Default::default()
        },
    };
    record(
        &mut p,
        &AttemptRecord::new(1, 1, &m(60, Some(0.5)), Outcome::Failed),
    );
    record(
        &mut p,
        &AttemptRecord::new(1, 2, &m(30, Some(0.25)), Outcome::Completed),
    );
    record(
        &mut p,
        &AttemptRecord::new(0, 1, &m(5, None), Outcome::Completed),
    );
    let per = per_task(&p);
    assert_eq!(
        (per[&1].attempts, per[&1].seconds, per[&1].cost_usd),
        (2, 90.0, Some(0.75))
    );
    assert_eq!(
        (per[&0].cost_text(), per[&0].time_text()),
        (String::new(), "5s".into())
    );
    // A task that took 14ms is recorded as 0.1 s: summed up as under a second, not "100ms".
    let quick = Totals {
        attempts: 1,
        seconds: 0.1,
        ..Totals::default()
    };
    assert_eq!(quick.time_text(), "under 1s");
    assert_eq!(spent(&p), 0.75);
    assert_eq!(
        total_line(&p).unwrap(),
        "3 attempt(s) · 1m35s of work · $0.75"
    );
    let order: Vec<_> = records(&p).iter().map(|r| (r.task, r.attempt)).collect();
    assert_eq!(order, [(1, 1), (1, 2), (0, 1)]);
}

#[test]
fn hostile_records_and_usage_are_refused_or_bounded() {
    let mut p = plan(2);
    let list = serde_json::json!([
        "not a record",
        {"task": 9, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed"},
        {"task": 0, "attempt": 1, "start": "yesterday", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed"},
        {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:02Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed"},
        {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1e300, "outcome": "completed"},
        {"task": 0, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "exploded"},
        {"task": 1, "attempt": 1, "start": "2026-01-01T00:00:00Z", "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "failed",
         "costUsd": -5.0, "inputTokens": 10, "model": "\u{1b}]0;pwned\u{7}gpt|5 <b>"}
    ]);
    p.progress.extra.insert(ATTEMPTS_FIELD.into(), list);
    let kept = records(&p);
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(kept[0].usage.cost_usd, None);
    assert_eq!(kept[0].usage.input_tokens, Some(10));
    assert_eq!(kept[0].usage.model.as_deref(), Some("]0pwnedgpt5b"));
    assert_eq!(model_name(&"m".repeat(500)).unwrap().len(), MODEL_MAX);
    assert_eq!(model_name(" \u{7} "), None);
    // A field that is not a list is replaced, not appended to.
    p.progress.extra.insert(ATTEMPTS_FIELD.into(), "x".into());
    let m = Measured::since(jiff::Timestamp::now(), Usage::default());
    record(&mut p, &AttemptRecord::new(0, 1, &m, Outcome::Interrupted));
    assert_eq!(records(&p).len(), 1);
}

/// What the Action's network guards saw stands beside the record's other fields, as the work
/// job's `result.json` writes it, and is bounded when read: hosts cut to
/// [`EGRESS_BLOCKED_MAX`] safe lines, a `rateLimits` that is not a list read as none.
#[test]
fn the_network_fields_sit_beside_the_others_and_are_bounded_when_read() {
    let m = Measured::since(at("2026-01-01T00:00:00Z"), Usage::default());
    let mut r = AttemptRecord::new(0, 1, &m, Outcome::Completed);
    r.network.egress_blocked = vec!["evil.example".into()];
    r.network.rate_limits = vec![crate::pure::usage::limited::Limited {
        provider: crate::pure::gateway::Provider::Anthropic,
        answers: 2,
        held_until: None,
    }];
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["egressBlocked"], serde_json::json!(["evil.example"]));
    assert_eq!(
        v["rateLimits"],
        serde_json::json!([{"provider": "anthropic", "answers": 2}])
    );
    let mut p = plan(1);
    let hosts: Vec<String> = (0..30).map(|i| format!("h{i}.example\u{1b}[31m")).collect();
    let list = serde_json::json!([{"task": 0, "attempt": 1, "start": "2026-01-01T00:00:00Z",
        "end": "2026-01-01T00:00:01Z", "seconds": 1.0, "outcome": "completed",
        "egressBlocked": hosts, "rateLimits": "not a list"}]);
    p.progress.extra.insert(ATTEMPTS_FIELD.into(), list);
    let kept = records(&p);
    assert_eq!(kept.len(), 1, "{kept:?}");
    let blocked = &kept[0].network.egress_blocked;
    assert_eq!(blocked.len(), EGRESS_BLOCKED_MAX);
    assert!(blocked.iter().all(|h| !h.contains('\u{1b}')), "{blocked:?}");
    assert!(kept[0].network.rate_limits.is_empty());
}

#[test]
fn the_usage_file() {
    let u = parse_usage_file(r#"{"cost_usd": 0.42, "input_tokens": 1000, "output_tokens": 20, "model": "gpt-5", "extra": [1]}"#).unwrap();
    assert_eq!(
        u,
        Usage {
            cost_usd: Some(0.42),
            input_tokens: Some(1000),
            output_tokens: Some(20),
            model: Some("gpt-5".into())
        }
    );
    assert_eq!(parse_usage_file("{}").unwrap(), Usage::default());
    for (text, why) in [
        ("nope", "not JSON"),
        ("[1]", "not a JSON object"),
        (r#"{"cost_usd": "1"}"#, "`cost_usd` is not a number"),
        (r#"{"cost_usd": -1}"#, "out of range"),
        (r#"{"cost_usd": 1e9}"#, "out of range"),
        (
            r#"{"input_tokens": 1.5}"#,
            "`input_tokens` is not a whole number",
        ),
        (
            r#"{"output_tokens": -3}"#,
            "`output_tokens` is not a whole number",
        ),
        (r#"{"input_tokens": 18446744073709551615}"#, "above"),
        (r#"{"model": 5}"#, "`model` is not a string"),
    ] {
        let e = parse_usage_file(text).unwrap_err();
        assert!(e.contains(why), "{text}: {e}");
    }
}

const CLAUDE: &str = r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":3952,"num_turns":4,"result":"Edited src/a.rs.\n\nCOMPLETED: added the parser","session_id":"s","total_cost_usd":0.10457895,"usage":{"input_tokens":2,"cache_creation_input_tokens":7924,"cache_read_input_tokens":13368,"output_tokens":9,"server_tool_use":{"web_search_requests":0},"service_tier":"standard"},"modelUsage":{"claude-haiku-4-5":{"inputTokens":10,"outputTokens":2,"costUSD":0.001},"claude-sonnet-4-5-20250929":{"inputTokens":21294,"outputTokens":9,"costUSD":0.1035}}}"#;

#[test]
fn claude_json_result() {
    let n = claude_result(&format!("{CLAUDE}\n")).unwrap();
    assert_eq!(
        n.text.as_deref(),
        Some("Edited src/a.rs.\n\nCOMPLETED: added the parser")
    );
    assert_eq!(
        n.usage,
        Usage {
            cost_usd: Some(0.10457895),
            input_tokens: Some(21294),
            output_tokens: Some(9),
            model: Some("claude-sonnet-4-5-20250929".into())
        }
    );
    // stream-json: the result object is the last line.
    let stream = format!(
        "{{\"type\":\"system\",\"subtype\":\"init\"}}\n{{\"type\":\"assistant\"}}\n{CLAUDE}\n"
    );
    assert_eq!(claude_result(&stream), Some(n));
    // An error result has no text; what it cost still counts.
    let err =
        r#"{"type":"result","subtype":"error_max_turns","is_error":true,"total_cost_usd":2.5}"#;
    let n = claude_result(err).unwrap();
    assert_eq!((n.text, n.usage.cost_usd), (None, Some(2.5)));
    assert!(n.said.failure.unwrap().contains("error_max_turns"));
    for other in ["COMPLETED: plain", r#"{"type":"assistant"}"#, "", "{"] {
        assert_eq!(claude_result(other), None, "{other}");
    }
}

const CODEX: &str = r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}
{"type":"turn.started"}
{"type":"item.completed","item":{"id":"item_0","type":"reasoning","text":"**Reading the task**"}}
{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc ls","aggregated_output":"a.rs\n","exit_code":0,"status":"completed"}}
{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Done.\nCOMPLETED: wrote a.rs"}}
{"type":"turn.completed","usage":{"input_tokens":24763,"cached_input_tokens":24448,"output_tokens":122}}
"#;

#[test]
fn codex_json_events() {
    let n = codex_events(CODEX).unwrap();
    assert_eq!(n.text.as_deref(), Some("Done.\nCOMPLETED: wrote a.rs"));
    assert_eq!(
        (
            n.usage.input_tokens,
            n.usage.output_tokens,
            n.usage.cost_usd
        ),
        (Some(24763), Some(122), None)
    );
    // Two turns add up; noise between events is skipped.
    let two = format!(
        "{CODEX}warning: something\n{{\"type\":\"turn.completed\",\"usage\":{{\"input_tokens\":7,\"output_tokens\":3}}}}\n"
    );
    let n = codex_events(&two).unwrap();
    assert_eq!(
        (n.usage.input_tokens, n.usage.output_tokens),
        (Some(24770), Some(125))
    );
    assert_eq!(codex_events("COMPLETED: plain\n{\"x\":1}\n"), None);
    assert_eq!(
        from_output(CODEX, "").unwrap().usage.output_tokens,
        Some(122)
    );
}

#[test]
fn the_file_wins_field_by_field() {
    let file = r#"{"cost_usd": 1.5, "model": "mine"}"#;
    let prices = crate::pure::prices::Prices::default();
    let g = gather(CLAUDE, "", Some(file), &prices);
    assert!(g.text.unwrap().ends_with("COMPLETED: added the parser"));
    let usage = g.usage;
    assert_eq!(
        (usage.cost_usd, usage.model.as_deref(), usage.output_tokens),
        (Some(1.5), Some("mine"), Some(9))
    );
    assert_eq!(g.warnings, Vec::<String>::new());
    let g = gather("COMPLETED: x\n", "", Some("{oops"), &prices);
    assert_eq!((g.text, g.usage), (None, Usage::default()));
    assert!(g.warnings[0].contains("$DAGEXEC_USAGE_FILE was ignored: not JSON"));
}

#[test]
fn the_budget() {
    assert_eq!(Budget::parse("5").unwrap().usd(), 5.0);
    assert_eq!(Budget::parse(" $12.50 ").unwrap().to_string(), "$12.50");
    for bad in ["0", "-1", "abc", "NaN", "inf", "1e12", "", "0.0000001"] {
        assert!(Budget::parse(bad).is_err(), "{bad}");
    }
    // The smallest budget kept: a millionth of a dollar, not one that rounds to nothing.
    assert_eq!(Budget::parse("0.000001").unwrap().usd(), 0.000001);
    let b = Budget::parse("1").unwrap();
    assert!(!b.reached(0.999) && b.reached(1.0) && b.reached(1.2));
    let mut p = plan(2);
    assert_eq!(b.exhausted(&p), None);
    completed_for(&mut p, 0, 1.25);
    assert_eq!(
        b.exhausted(&p).unwrap(),
        "the budget of $1.00 is spent: $1.25 recorded over 1 attempt(s) bought 1 of 2 task(s) completed; no new attempt is started (raise the budget to go on)"
    );
    assert_eq!(
        (money(0.0), money(0.004), money(12.346)),
        ("$0.00".into(), "<$0.01".into(), "$12.35".into())
    );
}

#[test]
fn outcomes() {
    use Status::*;
    assert_eq!(Outcome::of(Completed, false, false), Outcome::Completed);
    assert_eq!(Outcome::of(Blocked, false, false), Outcome::Blocked);
    assert_eq!(Outcome::of(Failed, true, false), Outcome::Timeout);
    assert_eq!(Outcome::of(Failed, false, true), Outcome::Rejected);
    assert_eq!(Outcome::of(Failed, false, false), Outcome::Failed);
    assert_eq!(Outcome::Interrupted.to_string(), "interrupted");
}

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/agents")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn halt_of(n: &Native) -> Option<&Halt> {
    n.said.halt.as_ref()
}

#[test]
fn claude_says_what_it_refused_and_why_it_stopped() {
    // acceptEdits refused a Bash `npm test`; the run still "succeeded".
    let n = claude_result(&fixture("claude-refused-bash.json")).unwrap();
    assert_eq!(n.text.as_deref(), Some("done\nCOMPLETED: wrote x"));
    assert_eq!(n.said.refused, ["Bash npm test"]);
    assert_eq!((n.said.failure.as_deref(), halt_of(&n)), (None, None));
    assert_eq!(n.usage.cost_usd, Some(0.0016));
    // A refused key: the run stops, naming the secret.
    let n = claude_result(&fixture("claude-401.json")).unwrap();
    assert_eq!(
        n.said.failure.as_deref(),
        Some("claude: API error 401: Invalid API key · Fix external API key")
    );
    assert_eq!(
        halt_of(&n),
        Some(&Halt::Run {
            secret: "ANTHROPIC_API_KEY".into()
        })
    );
    assert_eq!(n.text, None, "an error's text is no status line");
    let n = claude_result(&fixture("claude-not-logged-in.json")).unwrap();
    assert!(matches!(halt_of(&n), Some(Halt::Run { .. })), "{n:?}");
    // A server error is an ordinary failure: retried.
    let n = claude_result(&fixture("claude-500.json")).unwrap();
    assert!(
        n.said
            .failure
            .as_deref()
            .unwrap()
            .starts_with("claude: API error 500: API Error: 500 Internal server error."),
        "{n:?}"
    );
    assert_eq!(halt_of(&n), None);
    let n = claude_result(&fixture("claude-max-turns.json")).unwrap();
    assert_eq!(
        n.said.failure.as_deref(),
        Some(
            "claude stopped at its turn limit after 2 turn(s) (error_max_turns): Reached maximum number of turns (1)"
        )
    );
    assert_eq!(halt_of(&n), None);
    // Its own spending limit: a budget stop, what it spent recorded.
    let n = claude_result(&fixture("claude-max-budget.json")).unwrap();
    assert_eq!(halt_of(&n), Some(&Halt::Budget));
    assert_eq!(n.usage.cost_usd, Some(0.0008));
    assert_eq!(
        n.said.failure.as_deref(),
        Some(
            "claude stopped at its spending limit (error_max_budget_usd): Reached maximum budget ($0.0001)"
        )
    );
}

#[test]
fn codex_failures_are_read_not_shown_as_raw_json() {
    let n = codex_events(&fixture("codex-ok.jsonl")).unwrap();
    assert_eq!(n.text.as_deref(), Some("COMPLETED: wrote x"));
    assert_eq!(
        n.tokens,
        [crate::pure::prices::ModelTokens {
            model: None,
            input: 240,
            cached: 40,
            output: 60
        }]
    );
    assert_eq!(n.said, Said::default());
    let n = codex_events(&fixture("codex-401.jsonl")).unwrap();
    insta::assert_snapshot!(n.said.failure.unwrap(), @"codex: the turn failed: unexpected status 401 Unauthorized: Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys., url: http://127.0.0.1:18743/v1/responses");
    assert_eq!(
        n.said.halt,
        Some(Halt::Run {
            secret: "OPENAI_API_KEY".into()
        })
    );
    let n = codex_events(&fixture("codex-missing-key.jsonl")).unwrap();
    assert!(matches!(n.said.halt, Some(Halt::Run { .. })));
    let n = codex_events(&fixture("codex-500.jsonl")).unwrap();
    assert_eq!(
        n.said.failure.as_deref(),
        Some(
            "codex: the turn failed: We’re currently experiencing high demand, which may cause temporary errors."
        )
    );
    assert_eq!((n.said.halt, n.text), (None, None));
    // "Reconnecting..." notices alone are no failure.
    let notice = r#"{"type":"error","message":"Reconnecting... 1/5 (unexpected status 500)"}"#;
    assert_eq!(codex_events(notice).unwrap().said.failure, None);
}

#[test]
fn gemini_json_output_and_its_errors_on_stderr() {
    let n = gemini_json(&fixture("gemini-ok.json"), "").unwrap();
    assert_eq!(n.text.as_deref(), Some("done\nCOMPLETED: wrote x.txt"));
    assert_eq!(
        n.tokens,
        [crate::pure::prices::ModelTokens {
            model: Some("gemini-2.5-pro".into()),
            input: 360,
            cached: 60,
            output: 90 + 15
        }]
    );
    assert_eq!(
        (
            n.usage.input_tokens,
            n.usage.output_tokens,
            n.usage.model.as_deref()
        ),
        (Some(360), Some(105), Some("gemini-2.5-pro"))
    );
    // Priced from the table: 300 fresh at $1.25, 60 cached at $0.125, 105 out at $10.
    let g = gather(
        &fixture("gemini-ok.json"),
        "",
        None,
        &crate::pure::prices::Prices::default(),
    );
    let want = (300.0 * 1.25 + 60.0 * 0.125 + 105.0 * 10.0) / 1e6;
    assert!((g.usage.cost_usd.unwrap() - want).abs() < 1e-12, "{g:?}");
    for (name, code) in [
        ("gemini-401.stderr", 401),
        ("gemini-400-bad-key.stderr", 400),
        ("gemini-no-key.stderr", 41),
    ] {
        let n = from_output("", &fixture(name)).unwrap();
        assert_eq!(
            n.said.halt,
            Some(Halt::Run {
                secret: "GEMINI_API_KEY".into()
            }),
            "{name}"
        );
        assert!(
            n.said
                .failure
                .as_deref()
                .unwrap()
                .ends_with(&format!("(code {code})")),
            "{name}: {n:?}"
        );
    }
    assert_eq!(
        from_output("", &fixture("gemini-401.stderr"))
            .unwrap()
            .said
            .failure
            .as_deref(),
        Some("gemini: Request had invalid authentication credentials. (code 401)")
    );
    assert_eq!(gemini_json("COMPLETED: x", "some\nnoise {\n"), None);
}

#[test]
fn a_token_only_cli_is_priced_unless_its_cost_is_reported() {
    let prices = crate::pure::prices::Prices::default();
    let codex = fixture("codex-ok.jsonl");
    let g = gather(&codex, "", None, &prices);
    let want = (200.0 * 5.0 + 40.0 * 0.5 + 60.0 * 30.0) / 1e6;
    assert!((g.usage.cost_usd.unwrap() - want).abs() < 1e-12);
    // The usage file's cost wins.
    let g = gather(&codex, "", Some(r#"{"cost_usd": 0.5}"#), &prices);
    assert_eq!(g.usage.cost_usd, Some(0.5));
    // A model the table lacks: tokens kept, no cost, a warning saying how to add it.
    let y: serde_yaml::Value = serde_yaml::from_str("other: {input: 1, output: 1}").unwrap();
    let mut gemini = fixture("gemini-ok.json");
    gemini = gemini.replace("gemini-2.5-pro", "gemini-9-ultra");
    let g = gather(
        &gemini,
        "",
        None,
        &crate::pure::prices::Prices::with(Some(&y)).unwrap(),
    );
    assert_eq!((g.usage.cost_usd, g.usage.input_tokens), (None, Some(360)));
    assert!(g.warnings[0].contains("no price for the model \"gemini-9-ultra\""));
}

/// The budget's message counts tasks as every report does: a join is no task of its own.
#[test]
fn a_spent_budget_counts_the_tasks_without_their_joins() {
    let b = Budget::parse("1").unwrap();
    let mut p = plan(2);
    p.tasks.push(crate::pure::plan::model::Task {
        join: true,
        blocked_by: vec![0, 1],
        ..Default::default()
    });
    completed_for(&mut p, 0, 1.25);
    let said = b.exhausted(&p).unwrap();
    assert!(said.contains("bought 1 of 2 task(s) completed"), "{said}");
}

/// Task `task` of `p` completed in one minute-long attempt that cost `cost` dollars.
fn completed_for(p: &mut Plan, task: usize, cost: f64) {
    let m = Measured {
        start: at("2026-01-01T00:00:00Z"),
        end: at("2026-01-01T00:01:00Z"),
        usage: Usage {
            cost_usd: Some(cost),
            ..Default::default()
        },
    };
    record(p, &AttemptRecord::new(task, 1, &m, Outcome::Completed));
    p.tasks[task].status = Status::Completed;
}

//! The work job's model gateway: started inside this job's dagexec, as a local run starts
//! it, for the one attempt the job runs. The worker gets the gateway's URL and the attempt's
//! token (Codex: a `CODEX_HOME` of its own), never a provider key of the job's environment;
//! what it spent is read off the wire into the attempt's record (`result.json`), and a
//! request past the budget stops the attempt as a budget stop.
//!
//! Settings: the `gateway`, `max-task-cost` and `max-requests` inputs (`DAGEXEC_GATEWAY`,
//! `DAGEXEC_MAX_TASK_COST`, `DAGEXEC_MAX_REQUESTS`; empty: on, no cap), which the checkout's
//! `.design/dagexec.yml` — a file on the branch, which task code can change — may only
//! tighten ([`crate::flow::settings::gateway_on_action`]; what it asked and was not given is
//! in the job's summary), and the `max-cost` input against what the plan at the round's base
//! recorded. A provider the attempts recorded at that base found rate-limited is held from
//! the start, until the held-until their records carry.

use std::path::Path;
use std::time::Instant;

use crate::action::ActionError;
use crate::edge::gateway::{Gateway, Pass, Spend};

/// The gateway serving this job's attempt, and the worker's pass (its token valid until
/// [`Served::close`]); the reviewer gets a pass of its own from the gateway.
pub(super) struct Served {
    /// Kept until the attempt is done: dropping it stops the gateway. The reviewer gets its
    /// pass from it, the provisional result its spend.
    pub(super) gateway: Gateway,
    pass: Option<Pass>,
    /// The worker's variables: the gateway's URL, each CLI pointed at it with the token.
    pub(super) env: Vec<(String, String)>,
    /// What the branch's `.design/dagexec.yml` asked that would have loosened the gateway,
    /// not followed.
    pub(super) loosened: Vec<crate::flow::settings::Loosening>,
}

impl Served {
    /// Ends the current pass (its token is refused from now on) and returns what was spent
    /// with it.
    pub(super) fn close(&mut self) -> Spend {
        self.pass.take().map(|p| p.spend()).unwrap_or_default()
    }
}

/// The environment as the action's inputs hand it over: a variable the workflow left empty
/// is unset.
fn input(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

/// Starts the gateway for attempt `attempt` of task `task` of `plan` (checked out at
/// `root`), its Codex home in `scratch`; `None` when it is turned off.
pub(super) async fn start(
    root: &Path,
    plan: &crate::pure::plan::model::Plan,
    task: usize,
    max_cost: Option<crate::pure::usage::Budget>,
    scratch: &Path,
    worker: &str,
) -> Result<Option<Served>, ActionError> {
    let began = Instant::now();
    let config_err =
        |e: crate::flow::settings::ConfigError| ActionError::Input(format!("{e} ({})", e.hint()));
    let file = crate::flow::settings::read_file_config(root).map_err(config_err)?;
    let (settings, loosened) =
        crate::flow::settings::gateway_on_action(&input, &file).map_err(config_err)?;
    if !settings.on {
        return Ok(None);
    }
    let (config, warning) =
        crate::flow::settings::gateway_config(&input, plan, max_cost, &settings, worker)
            .map_err(config_err)?;
    if let Some(w) = warning {
        crate::action::runtime::annotation("warning", "dagexec", &w);
    }
    let gateway = Gateway::start(config).await.map_err(|e| {
        ActionError::Input(format!("cannot start the model gateway on 127.0.0.1: {e}"))
    })?;
    // A provider the attempts recorded at the round's base found rate-limited is held from
    // the start: the worker's first request waits for the hold instead of meeting the limit
    // (each record's held-until believed at most `MAX_HOLD` past its end).
    let holds = crate::pure::gateway::held::Holds::of_records(&crate::pure::usage::records(plan));
    for (provider, until) in holds.active(jiff::Timestamp::now()) {
        println!(
            "dagexec's model gateway: {} is rate-limited until {until} (an earlier attempt's record): its requests wait until then",
            provider.label()
        );
        gateway.hold_until(provider, until);
    }
    let pass = gateway.open(task).map_err(ActionError::write(scratch))?;
    let env = pass
        .worker_env(&scratch.join("codex-home"))
        .map_err(ActionError::write(scratch))?;
    // How long starting it took: the job's own time it adds.
    println!(
        "dagexec's model gateway: {} (started in {:.1} ms); the worker holds a token for this attempt, no provider key",
        gateway.url(),
        began.elapsed().as_secs_f64() * 1000.0
    );
    Ok(Some(Served {
        gateway,
        pass: Some(pass),
        env,
        loosened,
    }))
}

/// What the gateway saw of the providers' rate limits (the worker's and the reviewer's
/// requests): the conductor holds new work for a limited provider from it.
pub(super) fn rate_limits(served: Option<&Served>) -> Vec<crate::pure::usage::limited::Limited> {
    served
        .map(|s| s.gateway.watch().borrow().rate_limits.clone())
        .unwrap_or_default()
}

/// A model request the gateway refused past the budget (`why`) stopped the attempt: a budget
/// stop whatever the worker said after — `verdict` failed with it, and `said` (what the
/// attempt's record carries to finalize) the spending limit halt, as a CLI's own budget stop
/// is recorded.
pub(super) fn budget_stop(
    why: Option<String>,
    verdict: &mut crate::pure::outcome::Verdict,
    said: &mut crate::pure::said::Said,
) {
    let Some(why) = why else {
        return;
    };
    crate::pure::outcome::stopped_by_budget(verdict, &why);
    *said = crate::pure::said::Said {
        failure: Some(why),
        halt: Some(crate::pure::said::Halt::Budget),
        refused: Vec::new(),
    };
}

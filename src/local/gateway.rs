//! The model gateway of a local run: its configuration (with the user's Codex configuration it
//! follows) checked with the other pre-start checks, before anything is written, and the
//! gateway started when the workers start.

use std::sync::Arc;

use crate::flow::{RunError, RunOptions};
use crate::pure::plan::model::Plan;

/// The gateway's configuration for a run, checked.
struct Checked {
    config: crate::edge::gateway::Config,
    /// What to say at the start (a Codex configuration followed in part, say).
    warning: Option<String>,
    settings: crate::flow::settings::GatewaySettings,
}

/// The model gateway's configuration for a run of `plan` (`None`: `gateway: off` in
/// .design/dagexec.yml or `DAGEXEC_GATEWAY=off`): the providers' keys and base URLs from
/// dagexec's environment (a user's Codex configuration the gateway cannot follow refuses a
/// Codex worker's run), the run's `max-cost` against what the plan recorded before, the
/// per-task cap and the request cap of the settings.
fn config(plan: &Plan, opts: &RunOptions) -> Result<Option<Checked>, RunError> {
    let file = crate::flow::settings::read_file_config(&opts.root)
        .map_err(|e| RunError::Other(format!("{e}")))?;
    let env = |k: &str| std::env::var(k).ok();
    let settings = crate::flow::settings::gateway(&env, &file)
        .map_err(|e| RunError::Other(format!("{e} ({})", e.hint())))?;
    if !settings.on {
        return Ok(None);
    }
    let (config, warning) = crate::flow::settings::gateway_config(
        &env,
        plan,
        opts.settings.max_cost,
        &settings,
        &opts.settings.worker,
    )
    .map_err(|e| RunError::Other(format!("{e} ({})", e.hint())))?;
    Ok(Some(Checked {
        config,
        warning,
        settings,
    }))
}

/// [`config`] with the other pre-start checks, before anything is written; its warning said
/// once, here.
pub(super) fn check(plan: &Plan, opts: &RunOptions) -> Result<(), RunError> {
    if let Some(Checked {
        warning: Some(warning),
        ..
    }) = config(plan, opts)?
    {
        eprintln!("warning: {warning}");
    }
    Ok(())
}

/// dagexec's model gateway for this run's workers ([`config`], from the plan as it
/// stands when the workers start; its warning was said at the start).
pub(super) fn start(
    runtime: &tokio::runtime::Runtime,
    plan: &Plan,
    opts: &RunOptions,
) -> Result<Option<Arc<crate::edge::gateway::Gateway>>, RunError> {
    let Some(Checked {
        config, settings, ..
    }) = config(plan, opts)?
    else {
        return Ok(None);
    };
    let gateway = runtime
        .block_on(crate::edge::gateway::Gateway::start(config))
        .map_err(|e| {
            RunError::Other(format!("cannot start the model gateway on 127.0.0.1: {e}"))
        })?;
    gateway.pace(&settings.rates);
    Ok(Some(Arc::new(gateway)))
}

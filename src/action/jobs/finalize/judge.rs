//! Finalize's reading of the part's artifacts: each matrix entry judged from the artifact of
//! this run (its latest attempt) that names it, its log linked, and an entry without a readable
//! artifact recorded as an attempt that spanned the run; what the run's earlier attempts'
//! artifacts of the entry spent is counted with it.

use crate::action::ActionError;
use crate::action::arrival::{Judge, accepted_names, collect, judge_entry_at};
use crate::action::matrix;
use crate::flow::attempt::Judged;

use super::part::save_logs;
use super::{Finalize, merging};

impl Finalize<'_> {
    /// Every entry judged from the artifact of this run (its latest attempt) that names it.
    pub(super) async fn judge(
        &mut self,
        entries: &[matrix::MatrixEntry],
    ) -> Result<Vec<Judged>, ActionError> {
        let (ctx, client) = (self.ctx, self.client);
        let run_attempt = crate::action::writer::run_attempt(ctx);
        let artifacts = &self.job.checkout.inputs.artifacts;
        let (found, ignored) = collect(artifacts, &ctx.run_id, run_attempt, entries);
        for name in &ignored {
            self.job.ui.say(format!(
                "  ignored artifact {name}: not the one of a matrix entry of this run and attempt"
            ));
        }
        if let Some(c) = client
            && let Ok(ids) = c.run_artifacts(&ctx.run_id).await
        {
            for e in entries {
                let best = accepted_names(&ctx.run_id, run_attempt, e)
                    .into_iter()
                    .find(|n| ids.contains_key(n));
                if let Some(url) = best.and_then(|n| ctx.artifact_url(ids[&n])) {
                    self.links.logs.insert(e.task, url);
                }
            }
        }
        save_logs(&mut self.job.checkout.plan, &self.links.logs);
        // A matrix job that left no readable artifact (cancelled, failed before its upload)
        // still ended an attempt: its record spans this run, as far as GitHub says — asked
        // only then, once.
        let now = jiff::Timestamp::now();
        let mut run_start = None;
        let job = &self.job;
        let mut judged = Vec::new();
        for e in entries {
            let found = found.get(&(e.task, e.attempt));
            // A rebase built on the chain's candidates: its patch is read against the base
            // with their merged changes (finalize's own copies) applied.
            let on = merging::built_on_tree(&job.checkout.repo, &job.checkout.plan, e)?;
            let at = Judge {
                repo: &job.checkout.repo,
                plan: &job.checkout.plan,
                inputs: &job.checkout.inputs,
                ui: &job.ui,
            };
            let mut j = judge_entry_at(at, e, on.as_deref(), found);
            if j.measured.is_none() {
                let start = if let Some(start) = run_start {
                    start
                } else {
                    let run = match (client, ctx.run_id.parse::<u64>()) {
                        (Some(c), Ok(id)) => c.workflow_run(id).await.ok(),
                        _ => None,
                    };
                    *run_start.insert(run.map_or(now, |r| r.span(now).0))
                };
                j.measured = Some(crate::pure::usage::Measured {
                    start,
                    end: now,
                    usage: Default::default(),
                });
            }
            if let Some(m) = &mut j.measured {
                let names = accepted_names(&ctx.run_id, run_attempt, e);
                let earlier = earlier_spend(artifacts, names, e, now);
                m.usage = std::mem::take(&mut m.usage).plus(earlier);
            }
            judged.push(j);
        }
        Ok(judged)
    }
}

/// What `e`'s artifacts of earlier attempts of the run in `dir` spent (`names`: the ones it
/// accepts, newest first: [`accepted_names`]), beside the one judged (the newest). "Re-run
/// failed jobs" runs a work job again
/// in a later attempt of the same run; GitHub keeps listing the earlier attempts' artifacts
/// for the run, and their workers spent too. No finalize counted them: one that did and
/// pushed leaves its re-run the plan that push holds (`publish`). An artifact that cannot be
/// read spent nothing that can be believed.
fn earlier_spend(
    dir: &std::path::Path,
    names: Vec<String>,
    e: &matrix::MatrixEntry,
    now: jiff::Timestamp,
) -> crate::pure::usage::Usage {
    names
        .into_iter()
        .filter(|n| dir.join(n).exists())
        .skip(1)
        .filter_map(|n| {
            let read = crate::action::artifact::read(&dir.join(&n));
            read.and_then(|c| crate::action::arrival::of_entry(c, &n, e))
                .ok()
        })
        .fold(Default::default(), |sum, c| {
            sum.plus(c.result.measured(now).usage)
        })
}

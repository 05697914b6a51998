//! The work job's attempt as it would be recorded if the job died now: while the model
//! gateway serves the attempt, every growth of its tokens (the worker's and the reviewer's)
//! or of its providers' rate-limit answers writes a `result.json` into the artifact
//! directory — a failed attempt that says why, with its span so far and the wire's spend —
//! crash-safe ([`crate::edge::fsx::write`]).
//! The job's own `result.json` replaces it when the attempt ends. A job GitHub cancels, that
//! passes its `timeout-minutes`, or whose dagexec is killed leaves that file for the
//! workflow's `if: always()` upload step (its name and folder are the step's outputs from
//! the start), so finalize and the conductor record what the attempt spent, as they record
//! any arrival — and the conductor holds a provider whose rate limit the attempt met. Nothing
//! is written while nothing is spent or limited: the normal path pays one small write per
//! usage event of the wire.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::action::artifact::{self, WorkResult};
use crate::edge::gateway::Spend;
use crate::edge::lock::held;
use crate::pure::outcome::AttemptReport;

/// The status line of an attempt whose job ended before it did.
pub(super) const CUT_SHORT: &str = "FAILED: the work job ended before the attempt did (cancelled, past its timeout-minutes, or its dagexec killed); its spend so far is the model gateway's count";

/// The keeper of the attempt's provisional `result.json`; [`Live::finish`] stops it before
/// the job writes its own.
pub(super) struct Live {
    /// Set once the job writes its own result: a write of the keeper still under way is
    /// then skipped (it holds the lock while it writes).
    done: Arc<Mutex<bool>>,
    keeper: tokio::task::JoinHandle<()>,
}

/// Which attempt, where its artifact goes, and when it started.
pub(super) struct Provisional {
    pub dir: PathBuf,
    pub job: super::Assignment,
    pub base: String,
    pub start: jiff::Timestamp,
}

impl Provisional {
    /// The attempt's result if its job ended now, having spent `spend`.
    fn cut_short(&self, spend: &Spend) -> WorkResult {
        // Exit status 0, nothing to show: the status line says it failed, and why.
        let report = AttemptReport {
            output: CUT_SHORT.to_string(),
            ..AttemptReport::default()
        };
        let measured = crate::pure::usage::Measured::since(self.start, spend.usage());
        let mut result = self.job.result(&self.base, &report, measured.duration());
        result.set_measured(&measured);
        result.network.rate_limits.clone_from(&spend.rate_limits);
        result
    }
}

/// Follows the gateway's spend (`spend`) and writes `at`'s provisional result whenever its
/// tokens or rate-limit answers grew, until [`Live::finish`]. A write that fails is logged
/// and tried again at the next growth.
pub(super) fn keep(at: Provisional, spend: tokio::sync::watch::Receiver<Spend>) -> Live {
    let done = Arc::new(Mutex::new(false));
    let flag = done.clone();
    let (task, dir) = (at.job.task, at.dir.display().to_string());
    let keeper = tokio::spawn(crate::flow::live::on_growth(
        spend,
        move |now| {
            let done = held(&flag);
            if *done {
                return Ok(());
            }
            let result = at.cut_short(&now);
            artifact::write(&at.dir, &result, b"", None).map_err(|e| e.to_string())
        },
        move |e| {
            println!("warning: task {task}: cannot keep the attempt's spend so far in {dir}: {e}");
        },
    ));
    Live { done, keeper }
}

impl Live {
    /// Stops the keeper: no provisional result is written from now on (one being written
    /// finishes first), so the job's own result is the last word.
    pub(super) fn finish(self) {
        *held(&self.done) = true;
        self.keeper.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provisional(dir: &std::path::Path) -> Provisional {
        Provisional {
            dir: dir.to_path_buf(),
            job: super::super::Assignment {
                task: 0,
                attempt: 1,
                round: 1,
            },
            base: "b".into(),
            start: jiff::Timestamp::now(),
        }
    }

    /// A model the price table lacks beside a priced one: the provisional result keeps what
    /// the gateway priced, as the attempt's own result would.
    #[test]
    fn a_provisional_result_keeps_what_the_gateway_priced_beside_an_unpriced_model() {
        let at = provisional(std::path::Path::new(""));
        let tokens = crate::pure::gateway::Tokens {
            input: 1000,
            output: 100,
            ..Default::default()
        };
        let mut spend = Spend::default();
        spend.tokens.insert("claude-sonnet-4-5".into(), tokens);
        spend.tokens.insert("mystery-1".into(), tokens);
        spend.unpriced.insert("mystery-1".into());
        (spend.cost_usd, spend.requests) = (0.5, 2);
        let usage = at.cut_short(&spend).usage.unwrap();
        assert_eq!(usage.cost_usd, Some(0.5));
        assert_eq!(usage.input_tokens, Some(2000));
    }

    /// A provider's 429 (its `retry-after` holding it), before or without any token spent:
    /// a job killed while it waits leaves the hold in its provisional result, for the
    /// conductor to hold new work for that provider.
    #[tokio::test]
    async fn a_rate_limit_answer_is_kept_in_the_provisional_result_though_nothing_was_spent() {
        let dir = tempfile::tempdir().unwrap();
        let (tx, rx) = tokio::sync::watch::channel(Spend::default());
        let live = keep(provisional(dir.path()), rx);
        let until = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
        tx.send_modify(|s| {
            let anthropic = crate::pure::gateway::Provider::Anthropic;
            crate::pure::usage::limited::saw(&mut s.rate_limits, anthropic, Some(until));
        });
        drop(tx);
        live.keeper.await.unwrap();
        let kept = artifact::read(dir.path()).map(|c| c.result.network.rate_limits);
        assert_eq!(kept.map(|l| l.len()), Ok(1));
    }
}

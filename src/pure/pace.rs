//! How the Action paces itself on GitHub, as values the simulator and the timeline share with
//! the jobs: GitHub's matrix limit, the conductor's polls (kept under the token's rate
//! limit) and its hand-over before the 6-hour job limit.

use std::time::Duration;

/// GitHub's limit on the jobs one matrix may generate.
pub const MAX_MATRIX_JOBS: usize = 256;

/// At most this many poll requests an hour by default (`GITHUB_TOKEN`: 1,000 requests an hour).
pub const POLLS_PER_HOUR: u64 = 600;

/// The conductor's own settings.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// How long to wait between polls (at least; see [`poll_interval`]).
    pub poll: Duration,
    /// When to hand over to a successor run (before GitHub's 6-hour job limit).
    pub handover_after: Duration,
    /// The most run polls an hour (a token with a larger rate limit may allow more).
    pub polls_per_hour: u64,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            poll: Duration::from_secs(10),
            handover_after: Duration::from_secs(5 * 3600 + 30 * 60),
            polls_per_hour: POLLS_PER_HOUR,
        }
    }
}

/// The wait between two polls that each make `reads` requests (the conductor's: one listing
/// of the branch's runs, and one read of each run in flight the listing did not hold): at
/// least `poll`, and long enough that the polls stay under `per_hour` requests an hour.
pub fn poll_interval(poll: Duration, reads: usize, per_hour: u64) -> Duration {
    let budget = Duration::from_millis(3_600_000 * reads as u64 / per_hour.max(1));
    poll.max(budget)
}

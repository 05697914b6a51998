//! The one retry policy every GitHub call goes through, after GitHub's documented rules for
//! rate limits and failures: honour `Retry-After`; when `x-ratelimit-remaining` is 0 wait until
//! `x-ratelimit-reset`; a secondary rate limit without either waits at least a minute; 5xx and
//! network errors back off exponentially with jitter, bounded; other 4xx fail at once.
//!
//! Pure: [`RetryPolicy::after_status`] decides from the status, the headers and the clock. The
//! back-off's base and cap may be set from the environment ([`RetryPolicy::from_env`]).

use std::time::Duration;

/// How patient a client is.
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub max_attempts: u32,
    /// The first back-off; doubled at each further attempt.
    pub base: Duration,
    /// The longest single back-off (before jitter).
    pub cap: Duration,
    /// The longest wait a rate limit may impose; a reset further away fails the call.
    pub max_wait: Duration,
}

/// The environment variables that set [`RetryPolicy::base`] and [`RetryPolicy::cap`] (durations such as
/// `2s` or `100ms`): for tests that play GitHub outages without waiting minutes, or a
/// runner that must be more patient.
pub const BASE_ENV: &str = "DAGEXEC_API_RETRY_BASE";
pub const CAP_ENV: &str = "DAGEXEC_API_RETRY_CAP";

impl RetryPolicy {
    /// The default policy, its back-off base and cap taken from [`BASE_ENV`] and [`CAP_ENV`]
    /// when they are set to a duration (anything else is ignored).
    pub fn from_env() -> RetryPolicy {
        RetryPolicy::from_vars(|k| std::env::var(k).ok())
    }

    /// [`RetryPolicy::from_env`] over the variables `var` gives.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> RetryPolicy {
        let read = |k: &str| var(k).and_then(|v| humantime::parse_duration(v.trim()).ok());
        let mut p = RetryPolicy::default();
        if let Some(base) = read(BASE_ENV) {
            p.base = base;
        }
        if let Some(cap) = read(CAP_ENV) {
            p.cap = cap;
        }
        p
    }
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            max_wait: Duration::from_secs(15 * 60),
        }
    }
}

/// The rate-limit headers of a response.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RateLimitHeaders {
    /// `Retry-After`, in seconds.
    pub retry_after: Option<u64>,
    /// `x-ratelimit-remaining`.
    pub remaining: Option<u64>,
    /// `x-ratelimit-reset`, in epoch seconds.
    pub reset: Option<u64>,
}

impl RateLimitHeaders {
    /// Reads the three headers (absent or malformed ones are `None`).
    pub fn from_headers(headers: &http::HeaderMap) -> RateLimitHeaders {
        let num = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
        };
        RateLimitHeaders {
            retry_after: num("retry-after"),
            remaining: num("x-ratelimit-remaining"),
            reset: num("x-ratelimit-reset"),
        }
    }
}

/// What to do after a response or a failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RetryOrFail {
    /// Try again after this long.
    Retry(Duration),
    /// Give up; the reason says why when it is not simply the status.
    Fail(Option<String>),
}

impl RetryPolicy {
    /// After a non-2xx `status` on attempt `attempt` (1-based), at epoch second `now`.
    pub fn after_status(
        &self,
        status: u16,
        limits: &RateLimitHeaders,
        message: &str,
        attempt: u32,
        now: u64,
    ) -> RetryOrFail {
        let last = attempt >= self.max_attempts;
        let rate_limited = matches!(status, 403 | 429);
        if rate_limited {
            if let Some(secs) = limits.retry_after {
                return self.wait(Duration::from_secs(secs), last);
            }
            if limits.remaining == Some(0)
                && let Some(reset) = limits.reset
            {
                // One second past the reset: the window turns over on GitHub's clock.
                return self.wait(Duration::from_secs(reset.saturating_sub(now) + 1), last);
            }
            let lower = message.to_ascii_lowercase();
            if status == 429 || lower.contains("secondary rate limit") {
                // GitHub: "wait for at least one minute before retrying", longer each time.
                let wait = Duration::from_secs(60).max(self.backoff(attempt));
                return self.wait(wait, last);
            }
            return RetryOrFail::Fail(None);
        }
        if status >= 500 {
            return self.after_network_error(attempt);
        }
        RetryOrFail::Fail(None)
    }

    /// After a network error (or a 5xx answer) on attempt `attempt`.
    pub fn after_network_error(&self, attempt: u32) -> RetryOrFail {
        if attempt >= self.max_attempts {
            RetryOrFail::Fail(Some(format!("still failing after {attempt} attempts")))
        } else {
            RetryOrFail::Retry(self.jittered(attempt))
        }
    }

    fn wait(&self, wait: Duration, last: bool) -> RetryOrFail {
        if last {
            return RetryOrFail::Fail(Some("rate limited on every attempt".into()));
        }
        if wait > self.max_wait {
            return RetryOrFail::Fail(Some(format!(
                "rate limited for {}s, longer than the {}s this client waits",
                wait.as_secs(),
                self.max_wait.as_secs()
            )));
        }
        RetryOrFail::Retry(wait)
    }

    /// `base * 2^(attempt-1)`, capped.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let factor = 1u32 << attempt.saturating_sub(1).min(16);
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The back-off with "full jitter" on its upper half, so clients that failed together do
    /// not come back together.
    fn jittered(&self, attempt: u32) -> Duration {
        let b = self.backoff(attempt);
        b / 2 + b.mul_f64(fastrand::f64() / 2.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> RetryPolicy {
        RetryPolicy::default()
    }

    #[test]
    fn retry_after_is_honoured_on_429_and_403() {
        let l = RateLimitHeaders {
            retry_after: Some(7),
            ..Default::default()
        };
        assert_eq!(
            p().after_status(429, &l, "", 1, 0),
            RetryOrFail::Retry(Duration::from_secs(7))
        );
        assert_eq!(
            p().after_status(403, &l, "", 1, 0),
            RetryOrFail::Retry(Duration::from_secs(7))
        );
    }

    #[test]
    fn exhausted_primary_limit_waits_until_the_reset() {
        let l = RateLimitHeaders {
            remaining: Some(0),
            reset: Some(1_000_030),
            ..Default::default()
        };
        assert_eq!(
            p().after_status(403, &l, "API rate limit exceeded", 1, 1_000_000),
            RetryOrFail::Retry(Duration::from_secs(31))
        );
        // A reset further away than the client will wait fails, saying so.
        let far = RateLimitHeaders {
            remaining: Some(0),
            reset: Some(1_000_000 + 3600),
            ..Default::default()
        };
        match p().after_status(403, &far, "", 1, 1_000_000) {
            RetryOrFail::Fail(Some(why)) => assert!(why.contains("3601s"), "{why}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn secondary_limit_without_headers_waits_a_minute() {
        let n = p().after_status(
            403,
            &RateLimitHeaders::default(),
            "You have exceeded a secondary rate limit",
            1,
            0,
        );
        assert_eq!(n, RetryOrFail::Retry(Duration::from_secs(60)));
    }

    #[test]
    fn a_plain_403_and_other_4xx_are_not_retried() {
        for s in [400, 401, 403, 404, 409, 422] {
            assert_eq!(
                p().after_status(s, &RateLimitHeaders::default(), "Not Found", 1, 0),
                RetryOrFail::Fail(None),
                "{s}"
            );
        }
    }

    #[test]
    fn server_errors_back_off_exponentially_with_bounded_jitter() {
        for attempt in 1..=5 {
            let RetryOrFail::Retry(d) =
                p().after_status(502, &RateLimitHeaders::default(), "", attempt, 0)
            else {
                panic!("502 on attempt {attempt} is retried");
            };
            let b = Duration::from_secs(1 << (attempt - 1)).min(Duration::from_secs(60));
            assert!(
                d >= b / 2 && d <= b,
                "attempt {attempt}: {d:?} outside [{:?}, {b:?}]",
                b / 2
            );
        }
        assert!(matches!(
            p().after_status(502, &RateLimitHeaders::default(), "", 6, 0),
            RetryOrFail::Fail(Some(_))
        ));
        assert!(matches!(p().after_network_error(1), RetryOrFail::Retry(_)));
        assert!(matches!(
            p().after_network_error(6),
            RetryOrFail::Fail(Some(_))
        ));
    }

    #[test]
    fn the_back_off_base_and_cap_can_be_set_and_junk_is_ignored() {
        let p = RetryPolicy::from_vars(|k| match k {
            BASE_ENV => Some("10ms".into()),
            CAP_ENV => Some(" 40ms ".into()),
            _ => None,
        });
        assert_eq!(
            (p.base, p.cap),
            (Duration::from_millis(10), Duration::from_millis(40))
        );
        assert_eq!(p.backoff(1), Duration::from_millis(10));
        assert_eq!(p.backoff(5), Duration::from_millis(40));
        assert_eq!(p.max_attempts, RetryPolicy::default().max_attempts);
        let junk = RetryPolicy::from_vars(|_| Some("soon".into()));
        assert_eq!(
            (junk.base, junk.cap),
            (RetryPolicy::default().base, RetryPolicy::default().cap)
        );
    }

    #[test]
    fn headers_are_read_leniently() {
        let mut h = http::HeaderMap::new();
        h.insert("retry-after", "12".parse().unwrap());
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", "garbage".parse().unwrap());
        assert_eq!(
            RateLimitHeaders::from_headers(&h),
            RateLimitHeaders {
                retry_after: Some(12),
                remaining: Some(0),
                reset: None
            }
        );
    }
}

//! How hard an upload tries: attempts, backoff with jitter, and the
//! per-request timeouts. Owns the numbers and their validation; the retry
//! loop itself is `backon`'s.

use backon::ExponentialBuilder;
use std::time::Duration;

/// Bounds on one upload.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// Delay before the second attempt; it doubles after each failure.
    pub initial_delay: Duration,
    /// Cap on one delay (before jitter).
    pub max_delay: Duration,
    /// Time allowed to open the TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Time allowed for one whole request, connection to last response byte.
    pub request_timeout: Duration,
    /// Seed of the jitter, for reproducible tests; `None` draws one.
    pub jitter_seed: Option<u64>,
    /// The whole upload, attempts and delays: no attempt starts after it,
    /// and each request's timeout is cut to what is left of it. It keeps a
    /// slow receiver from holding a finished boot past the host's silence
    /// timeout, whatever `max_attempts` and `request_timeout` say.
    pub total_budget: Duration,
}

/// [`RetryPolicy::total_budget`] by default.
pub const DEFAULT_TOTAL_BUDGET: Duration = Duration::from_secs(120);

impl Default for RetryPolicy {
    /// 6 attempts, delays of 0.5, 1, 2, 4, 8 s plus up to 100% jitter,
    /// 10 s to connect, 30 s per request, and 120 s for the whole upload:
    /// well inside the host's default silence timeout (300 s).
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            initial_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            jitter_seed: None,
            total_budget: DEFAULT_TOTAL_BUDGET,
        }
    }
}

impl RetryPolicy {
    /// The backoff schedule: exponential from `initial_delay` (factor 2),
    /// capped at `max_delay`, each delay plus a random jitter of up to the
    /// delay itself, for `max_attempts - 1` retries.
    pub fn backoff(&self) -> ExponentialBuilder {
        let b = ExponentialBuilder::default()
            .with_factor(2.0)
            .with_min_delay(self.initial_delay)
            .with_max_delay(self.max_delay.max(self.initial_delay))
            .with_max_times(self.max_attempts.saturating_sub(1) as usize)
            .with_jitter();
        match self.jitter_seed {
            Some(seed) => b.with_jitter_seed(seed),
            None => b,
        }
    }

    /// The longest the whole upload can take: every attempt timing out
    /// and every delay at its maximum with full jitter, cut at
    /// [`RetryPolicy::total_budget`] (name resolution aside).
    pub fn worst_case(&self) -> Duration {
        self.unbudgeted_worst_case().min(self.total_budget)
    }

    fn unbudgeted_worst_case(&self) -> Duration {
        let mut total = self.request_timeout * self.max_attempts.max(1);
        let mut delay = self.initial_delay;
        for _ in 1..self.max_attempts {
            let capped = delay.min(self.max_delay.max(self.initial_delay));
            total += capped * 2;
            delay = delay.saturating_mul(2);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use backon::BackoffBuilder;

    #[test]
    fn schedule_doubles_is_capped_and_jittered_within_bounds() {
        let p = RetryPolicy {
            max_attempts: 6,
            initial_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(400),
            jitter_seed: Some(7),
            ..RetryPolicy::default()
        };
        let delays: Vec<Duration> = p.backoff().build().collect();
        assert_eq!(delays.len(), 5, "{delays:?}");
        let bases = [100, 200, 400, 400, 400];
        for (d, base) in delays.iter().zip(bases) {
            // backon computes in f32: allow a millisecond of rounding.
            let base = Duration::from_millis(base);
            let slack = Duration::from_millis(1);
            assert!(*d + slack >= base && *d <= base * 2 + slack, "{d:?} not within [{base:?}, {:?}]", base * 2);
        }
        // Jitter really varies the delays (same base, different values).
        assert!(delays[2] != delays[3] || delays[3] != delays[4], "{delays:?}");
    }

    #[test]
    fn one_attempt_means_no_retry() {
        let p = RetryPolicy { max_attempts: 1, ..RetryPolicy::default() };
        assert_eq!(p.backoff().build().count(), 0);
    }

    #[test]
    fn default_worst_case_stays_under_the_silence_timeout() {
        let w = RetryPolicy::default().worst_case();
        assert!(w <= Duration::from_secs(120), "{w:?}");
        assert!(RetryPolicy::default().unbudgeted_worst_case() > Duration::from_secs(180));
    }

    #[test]
    fn the_budget_caps_the_largest_settings_the_cmdline_allows() {
        let p = RetryPolicy {
            max_attempts: 20,
            request_timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(600),
            ..RetryPolicy::default()
        };
        assert_eq!(p.worst_case(), DEFAULT_TOTAL_BUDGET);
    }
}

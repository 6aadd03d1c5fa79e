//! Retry timing: capped exponential backoff with full jitter, so that many specialists retrying
//! one overloaded server spread out instead of arriving together; a server's `Retry-After` wins.

use std::time::Duration;

use rand::Rng;

use crate::error::LlmError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total HTTP calls allowed for one chat, the first included; 0 is treated as 1.
    pub max_attempts: u32,
    pub base_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
        }
    }
}

impl RetryPolicy {
    /// A single attempt, no retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }

    pub(crate) fn attempts(&self) -> u32 {
        self.max_attempts.max(1)
    }

    /// The ceiling of the backoff window after failed attempt number `attempt` (1-based):
    /// `base * 2^(attempt-1)`, capped at `max_delay`.
    pub fn backoff_cap(&self, attempt: u32) -> Duration {
        let exp = attempt.saturating_sub(1).min(31);
        self.base_delay
            .checked_mul(1u32 << exp)
            .unwrap_or(self.max_delay)
            .min(self.max_delay)
    }

    /// How long to wait after failed attempt number `attempt` (1-based) before the next one.
    pub fn delay_for(&self, attempt: u32, err: &LlmError) -> Duration {
        if let LlmError::RateLimited {
            retry_after: Some(after),
            ..
        } = err
        {
            return (*after).min(self.max_delay);
        }
        let cap = self.backoff_cap(attempt);
        let cap_ms = cap.as_millis() as u64;
        if cap_ms == 0 {
            return cap;
        }
        Duration::from_millis(rand::thread_rng().gen_range(0..=cap_ms))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server_error() -> LlmError {
        LlmError::Server {
            url: "http://h".into(),
            status: 500,
            body: String::new(),
        }
    }

    #[test]
    fn backoff_doubles_then_caps() {
        let p = RetryPolicy::default();
        assert_eq!(p.backoff_cap(1), Duration::from_millis(500));
        assert_eq!(p.backoff_cap(2), Duration::from_secs(1));
        assert_eq!(p.backoff_cap(4), Duration::from_secs(4));
        assert_eq!(p.backoff_cap(5), Duration::from_secs(8));
        assert_eq!(p.backoff_cap(200), Duration::from_secs(8));
    }

    #[test]
    fn jittered_delay_stays_within_the_window() {
        let p = RetryPolicy::default();
        for attempt in 1..8 {
            for _ in 0..50 {
                assert!(p.delay_for(attempt, &server_error()) <= p.backoff_cap(attempt));
            }
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = RetryPolicy::default();
        let limited = |secs| LlmError::RateLimited {
            url: "http://h".into(),
            retry_after: Some(Duration::from_secs(secs)),
        };
        assert_eq!(p.delay_for(1, &limited(3)), Duration::from_secs(3));
        assert_eq!(p.delay_for(1, &limited(60)), Duration::from_secs(8));
    }

    #[test]
    fn zero_attempts_means_one() {
        let p = RetryPolicy {
            max_attempts: 0,
            ..RetryPolicy::default()
        };
        assert_eq!(p.attempts(), 1);
    }
}

//! A clock a command's timeout runs by, which the caller can stop: the
//! time a question at an exec waits for a person counts toward no limit.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Holds on a command's timeout. While any [`Held`] guard lives, the
/// timeout does not run; the time held is added to it.
#[derive(Debug, Default)]
pub struct TimeoutHold(Mutex<HoldState>);

#[derive(Debug, Default)]
struct HoldState {
    /// Guards alive.
    holders: usize,
    /// When the first of them was taken.
    since: Option<Instant>,
    /// Time held by guards already dropped.
    total: Duration,
}

/// Stops the clock until dropped.
#[derive(Debug)]
pub struct Held(Arc<TimeoutHold>);

impl TimeoutHold {
    /// A new hold, not held.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Stops the clock until the guard is dropped.
    pub fn hold(self: &Arc<Self>) -> Held {
        let mut state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if state.holders == 0 {
            state.since = Some(Instant::now());
        }
        state.holders += 1;
        Held(Arc::clone(self))
    }

    /// Whether the clock is stopped now.
    pub fn is_held(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .holders
            > 0
    }

    /// All the time the clock was stopped, up to now.
    pub fn held(&self) -> Duration {
        let state = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        state.total + state.since.map_or(Duration::ZERO, |since| since.elapsed())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut state = (self.0).0.lock().unwrap_or_else(PoisonError::into_inner);
        state.holders = state.holders.saturating_sub(1);
        if state.holders == 0
            && let Some(since) = state.since.take()
        {
            state.total += since.elapsed();
        }
    }
}

/// Waits until `limit` of unheld time has passed since `started`: while
/// held, the deadline moves on with the clock stopped.
pub(crate) async fn run_down(started: Instant, limit: Duration, hold: Option<&TimeoutHold>) {
    loop {
        let held = hold.map_or(Duration::ZERO, TimeoutHold::held);
        tokio::time::sleep_until((started + limit + held).into()).await;
        match hold {
            // Held now: look again shortly.
            Some(hold) if hold.is_held() => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(hold) if hold.held() > held => {}
            _ => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_time_adds_up_over_guards() {
        let hold = TimeoutHold::new();
        assert!(!hold.is_held());
        assert_eq!(hold.held(), Duration::ZERO);
        let first = hold.hold();
        let second = hold.hold();
        std::thread::sleep(Duration::from_millis(30));
        drop(first);
        assert!(hold.is_held(), "one guard is left");
        drop(second);
        assert!(!hold.is_held());
        let held = hold.held();
        assert!(held >= Duration::from_millis(30), "{held:?}");
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(hold.held(), held, "the clock runs again");
    }

    #[tokio::test]
    async fn a_timeout_waits_out_the_time_held() {
        let hold = TimeoutHold::new();
        let started = Instant::now();
        let guard = hold.hold();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            drop(guard);
        });
        run_down(started, Duration::from_millis(200), Some(&hold)).await;
        release.await.expect("released");
        let waited = started.elapsed();
        assert!(waited >= Duration::from_millis(700), "{waited:?}");
        let started = Instant::now();
        run_down(started, Duration::from_millis(200), None).await;
        assert!(started.elapsed() < Duration::from_millis(700));
    }
}

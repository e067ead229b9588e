//! How many model calls (and WebSocket tunnels) the tap is still reading: the relay waits for
//! none to be left before its last count, so a call the agent made just before it exited (a
//! prompt suggestion after its last result) is counted, not lost with the process.

use std::sync::Arc;

/// The count of calls under way, shared by the tap's connections.
#[derive(Debug, Clone)]
pub struct Flights(Arc<tokio::sync::watch::Sender<usize>>);

impl Default for Flights {
    fn default() -> Flights {
        Flights(Arc::new(tokio::sync::watch::Sender::new(0)))
    }
}

impl Flights {
    /// One more call under way, until the returned guard is dropped.
    pub(super) fn start(&self) -> Flight {
        self.0.send_modify(|n| *n += 1);
        Flight(self.0.clone())
    }

    /// The count, to wait on.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<usize> {
        self.0.subscribe()
    }
}

/// One call under way. Dropped once the call has been reported (or found to have no usage),
/// so a count of zero means every call read is on the relay's channel.
#[derive(Debug)]
pub(super) struct Flight(Arc<tokio::sync::watch::Sender<usize>>);

impl Drop for Flight {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Waits until no call is under way, for at most `limit`; whether none was left.
pub async fn settled(
    mut count: tokio::sync::watch::Receiver<usize>,
    limit: std::time::Duration,
) -> bool {
    // A closed channel has no sender left: no tap, so nothing under way either.
    tokio::time::timeout(limit, count.wait_for(|n| *n == 0)).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn settles_when_the_last_flight_lands_and_not_before() {
        let flights = Flights::default();
        assert!(settled(flights.watch(), Duration::ZERO).await, "nothing under way");
        let a = flights.start();
        let b = flights.start();
        assert!(!settled(flights.watch(), Duration::from_millis(20)).await);
        drop(a);
        assert!(!settled(flights.watch(), Duration::from_millis(20)).await);
        let waiting = tokio::spawn(settled(flights.watch(), Duration::from_secs(10)));
        drop(b);
        assert!(waiting.await.unwrap(), "the wait ends when the last call is reported");
    }
}

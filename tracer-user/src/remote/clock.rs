//! How far an agent's CLOCK_MONOTONIC is from the collector's, by ping-pongs (Score-P's
//! method): the collector reads its clock before (t0) and after (t1) asking the agent's
//! (agent_t); the agent read its clock somewhere between, so agent_t + offset lies in
//! [t0, t1], and the midpoint is off by at most half the round trip. Of several pings,
//! the one with the shortest round trip bounds the error best.

use std::future::Future;

use crate::probes::monotonic_ns;

/// Ping-pongs per estimate.
pub(super) const PINGS: usize = 16;

/// One node's clock against the collector's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ClockOffset {
    /// collector time = agent time + offset_ns.
    pub(crate) offset_ns: i64,
    /// The round trip of the ping it was taken from: the offset is within half of it.
    pub(crate) round_trip_ns: u64,
}

/// The offset of the ping with the shortest round trip of `PINGS`; `ask` returns the
/// agent's clock (or the call's error, which ends the estimate).
pub(super) async fn estimate<E, F, Fut>(mut ask: F) -> Result<ClockOffset, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<u64, E>>,
{
    let mut best: Option<ClockOffset> = None;
    for _ in 0..PINGS {
        let t0 = monotonic_ns();
        let agent_ns = ask().await?;
        let t1 = monotonic_ns();
        let round_trip_ns = t1 - t0;
        let midpoint = i128::from(t0) + i128::from(round_trip_ns / 2);
        let offset_ns = i64::try_from(midpoint - i128::from(agent_ns)).unwrap_or(i64::MAX);
        if best.is_none_or(|b| round_trip_ns < b.round_trip_ns) {
            best = Some(ClockOffset {
                offset_ns,
                round_trip_ns,
            });
        }
    }
    Ok(best.expect("PINGS > 0"))
}

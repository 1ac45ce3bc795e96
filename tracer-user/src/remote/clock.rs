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
    /// The agent's time that ping read.
    pub(crate) agent_ns: u64,
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
                agent_ns,
            });
        }
    }
    Ok(best.expect("PINGS > 0"))
}

/// How long the collector waits before measuring an agent's clock again, once it has
/// measured it `done` times since the connection: every 250 ms for the first 2 s, so
/// that the drift is known early, then every second (16 pings per measurement: 64, then
/// 16 calls a second per node).
pub(crate) fn measure_period(done: usize) -> std::time::Duration {
    const QUICK: usize = 8;
    if done < QUICK {
        std::time::Duration::from_millis(250)
    } else {
        std::time::Duration::from_secs(1)
    }
}

/// Measurements a fit keeps: the last 40 (about half a minute), so that a drift that
/// changes (a clock slewed by NTP) is followed within that.
const FIT_SAMPLES: usize = 40;
/// Below this span of measurements the drift is not estimated: two measurements each
/// within about 10 us, a quarter of a second apart, would make up a drift of 80 ppm.
const MIN_DRIFT_SPAN_NS: u64 = 1_000_000_000;
/// A measurement whose shortest round trip is more than this many times the best one
/// seen was disturbed (a descheduled thread, a busy link) and is left out.
const DISTURBED_ROUND_TRIP: u64 = 3;

/// A node's clock offset from its measurements: a straight line, offset against the
/// node's time, fitted by least squares to the last measurements (Score-P's linear
/// interpolation, online: between and just past them).
#[derive(Clone, Debug, Default)]
pub(crate) struct ClockFit {
    samples: std::collections::VecDeque<ClockOffset>,
    best_round_trip_ns: Option<u64>,
    /// Measurements left out as disturbed.
    disturbed: u64,
    /// Measurements added, kept or not.
    added: usize,
}

/// What a fit says of a node's clock.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct ClockLine {
    /// collector time = agent time + offset, at agent time `at_ns`...
    pub(crate) at_ns: u64,
    pub(crate) offset_ns: f64,
    /// ... plus this much per ns of agent time after `at_ns` (0.000050: 50 ppm fast).
    pub(crate) drift: f64,
    /// The largest distance of a kept measurement from the line, plus half the best
    /// round trip: how far the line may be from the truth.
    pub(crate) uncertainty_ns: u64,
    /// Measurements it was fitted to.
    pub(crate) samples: usize,
}

impl ClockLine {
    /// The offset at agent time `agent_ns`.
    pub(crate) fn offset_at(&self, agent_ns: u64) -> f64 {
        self.offset_ns + self.drift * (agent_ns as f64 - self.at_ns as f64)
    }
}

impl ClockFit {
    pub(crate) fn add(&mut self, sample: ClockOffset) {
        self.added += 1;
        let best = self
            .best_round_trip_ns
            .map_or(sample.round_trip_ns, |b| b.min(sample.round_trip_ns));
        self.best_round_trip_ns = Some(best);
        if sample.round_trip_ns > best.saturating_mul(DISTURBED_ROUND_TRIP) {
            self.disturbed += 1;
            return;
        }
        if self.samples.len() == FIT_SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(sample);
    }

    /// Measurements left out as disturbed.
    pub(crate) fn disturbed(&self) -> u64 {
        self.disturbed
    }

    /// Measurements added, kept or not (the connection's first).
    pub(crate) fn added(&self) -> usize {
        self.added
    }

    /// The line through the kept measurements; None before the first. Until they span
    /// `MIN_DRIFT_SPAN_NS`, no drift: the latest measurement's offset.
    pub(crate) fn line(&self) -> Option<ClockLine> {
        let last = *self.samples.back()?;
        let first = *self.samples.front()?;
        let best_half = self.best_round_trip_ns.unwrap_or(last.round_trip_ns) / 2;
        let (at_ns, offset_ns, drift) =
            if last.agent_ns.saturating_sub(first.agent_ns) < MIN_DRIFT_SPAN_NS {
                (last.agent_ns, last.offset_ns as f64, 0.0)
            } else {
                // x: agent time since the first kept measurement; y: offset.
                let n = self.samples.len() as f64;
                let x = |s: &ClockOffset| (s.agent_ns - first.agent_ns) as f64;
                let y = |s: &ClockOffset| s.offset_ns as f64;
                let mean_x = self.samples.iter().map(x).sum::<f64>() / n;
                let mean_y = self.samples.iter().map(y).sum::<f64>() / n;
                let sxx: f64 = self.samples.iter().map(|s| (x(s) - mean_x).powi(2)).sum();
                let sxy: f64 = self
                    .samples
                    .iter()
                    .map(|s| (x(s) - mean_x) * (y(s) - mean_y))
                    .sum();
                let drift = sxy / sxx;
                (first.agent_ns + mean_x as u64, mean_y, drift)
            };
        let mut line = ClockLine {
            at_ns,
            offset_ns,
            drift,
            uncertainty_ns: 0,
            samples: self.samples.len(),
        };
        let worst = self
            .samples
            .iter()
            .map(|s| (s.offset_ns as f64 - line.offset_at(s.agent_ns)).abs())
            .fold(0.0, f64::max);
        line.uncertainty_ns = worst.round() as u64 + best_half;
        Some(line)
    }
}

/// Testing only: how an agent misreports its clock (`tracer agent`'s hidden options), to
/// play a node whose clock is `shift_ns` off and runs `drift_ppm` fast (negative: slow)
/// since `since_ns`. The collector's measurements must undo it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SkewedClock {
    pub shift_ns: i64,
    pub drift_ppm: i64,
    /// This node's CLOCK_MONOTONIC when the drift began.
    pub since_ns: u64,
}

impl SkewedClock {
    /// A clock `shift_ns` off that drifts `drift_ppm` from now on.
    pub fn from_now(shift_ns: i64, drift_ppm: i64) -> SkewedClock {
        SkewedClock {
            shift_ns,
            drift_ppm,
            since_ns: monotonic_ns(),
        }
    }

    /// What the node reports for its true time `ns`.
    pub fn read(&self, ns: u64) -> u64 {
        let elapsed = i128::from(ns) - i128::from(self.since_ns);
        let t = i128::from(ns)
            + i128::from(self.shift_ns)
            + elapsed * i128::from(self.drift_ppm) / 1_000_000;
        u64::try_from(t.max(0)).unwrap_or(u64::MAX)
    }

    pub fn is_exact(&self) -> bool {
        self.shift_ns == 0 && self.drift_ppm == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    /// A measurement at agent time `at_ms` of a clock `offset_us` behind, drifting
    /// `drift_ppm`, with `error_us` of noise.
    fn sample(at_ms: u64, offset_us: f64, drift_ppm: f64, error_us: f64) -> ClockOffset {
        let agent_ns = 5 * SECOND + at_ms * 1_000_000;
        let offset = offset_us * 1e3 + drift_ppm * 1e-6 * (at_ms as f64 * 1e6) + error_us * 1e3;
        ClockOffset {
            offset_ns: offset.round() as i64,
            round_trip_ns: 200_000,
            agent_ns,
        }
    }

    #[test]
    fn a_drifting_clock_is_fitted_within_its_measurements_error() {
        let mut fit = ClockFit::default();
        assert!(fit.line().is_none());
        // -50 ppm, measurements off by up to 10 us either way, every 250 ms for 3 s.
        let noise = [
            3.0, -10.0, 7.0, 0.0, -4.0, 10.0, -8.0, 2.0, 5.0, -6.0, 1.0, 9.0, -2.0,
        ];
        for (i, e) in noise.iter().enumerate() {
            fit.add(sample(250 * i as u64, -37_000.0, -50.0, *e));
        }
        let line = fit.line().unwrap();
        assert_eq!(line.samples, 13);
        assert!((line.drift * 1e6 + 50.0).abs() < 10.0, "{line:?}");
        // Extrapolated half a second past the last measurement: within 20 us.
        let at = 5 * SECOND + 3_500_000_000;
        let truth = -37_000_000.0 - 50e-6 * 3.5e9;
        assert!((line.offset_at(at) - truth).abs() < 20_000.0, "{line:?}");
        assert!(line.uncertainty_ns >= 100_000 && line.uncertainty_ns < 120_000);
    }

    #[test]
    fn no_drift_is_guessed_from_measurements_close_together() {
        let mut fit = ClockFit::default();
        fit.add(sample(0, 100.0, 0.0, -10.0));
        fit.add(sample(250, 100.0, 0.0, 10.0));
        let line = fit.line().unwrap();
        assert_eq!(line.drift, 0.0);
        assert_eq!(line.offset_ns, 110_000.0, "the latest measurement");
    }

    #[test]
    fn a_disturbed_measurement_is_left_out() {
        let mut fit = ClockFit::default();
        fit.add(sample(0, 0.0, 0.0, 0.0));
        let mut slow = sample(250, 0.0, 0.0, 900.0);
        slow.round_trip_ns = 2_000_000;
        fit.add(slow);
        assert_eq!(fit.disturbed(), 1);
        assert_eq!(fit.line().unwrap().offset_ns, 0.0);
    }

    #[test]
    fn a_skewed_clock_reads_shifted_and_drifting() {
        let clock = SkewedClock {
            shift_ns: -37_000_000,
            drift_ppm: -50,
            since_ns: SECOND,
        };
        assert_eq!(clock.read(SECOND), SECOND - 37_000_000);
        assert_eq!(clock.read(3 * SECOND), 3 * SECOND - 37_000_000 - 100_000);
        assert!(!clock.is_exact());
        assert!(SkewedClock::default().is_exact());
        assert_eq!(SkewedClock::default().read(42), 42);
    }
}

//! Latency distributions: an HdrHistogram for the percentiles, plus the exact count,
//! total and maximum (cheap to keep, and tests and totals then need no tolerance).

use hdrhistogram::Histogram;
use serde::Serialize;

/// How precisely a distribution keeps its values: 3 significant digits (percentiles
/// within 0.1 %) for the few program-wide distributions, 2 (within 1 %) for the
/// per-call-site ones, which can be many (an auto-resizing histogram of ns values up to
/// 1 s takes about 90 KB at 3 digits, 10 KB at 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Precision {
    Fine,
    Coarse,
}

/// Values in nanoseconds, summarized as [`Distribution`].
#[derive(Clone, Debug)]
pub(crate) struct Hist {
    h: Histogram<u32>,
    count: u64,
    total: u64,
    max: u64,
}

impl Hist {
    pub(super) fn new(p: Precision) -> Self {
        let digits = match p {
            Precision::Fine => 3,
            Precision::Coarse => 2,
        };
        Hist {
            h: Histogram::new(digits).expect("2 and 3 significant digits are valid"),
            count: 0,
            total: 0,
            max: 0,
        }
    }

    pub(super) fn record(&mut self, ns: u64) {
        // Auto-resizing `record` grows the histogram (`saturating_record` would clamp to
        // the current range instead); only values past i64::MAX / 2 fail, and saturate.
        if self.h.record(ns).is_err() {
            self.h.saturating_record(ns);
        }
        self.count += 1;
        self.total = self.total.saturating_add(ns);
        self.max = self.max.max(ns);
    }

    /// Adds every value of `other` (same precision or not: values are re-bucketed).
    pub(super) fn merge(&mut self, other: &Hist) {
        // Both auto-resize, so adding cannot run out of range.
        let _ = self.h.add(&other.h);
        self.count += other.count;
        self.total = self.total.saturating_add(other.total);
        self.max = self.max.max(other.max);
    }

    pub(super) fn summary(&self) -> Distribution {
        if self.count == 0 {
            return Distribution::default();
        }
        // A percentile is the largest value equivalent to the one at that rank; never
        // report more than the exact maximum.
        let q = |f: f64| self.h.value_at_quantile(f).min(self.max);
        Distribution {
            count: self.count,
            total_ns: self.total,
            mean_ns: self.total / self.count,
            p50_ns: q(0.50),
            p90_ns: q(0.90),
            p99_ns: q(0.99),
            max_ns: self.max,
        }
    }
}

/// A distribution of durations. `count`, `total_ns`, `mean_ns` (rounded down) and
/// `max_ns` are exact; the percentiles come from the histogram (see [`Precision`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Distribution {
    pub count: u64,
    pub total_ns: u64,
    pub mean_ns: u64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub max_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_values_are_exact_and_percentiles_rank() {
        let mut h = Hist::new(Precision::Fine);
        for v in 1..=100 {
            h.record(v);
        }
        let d = h.summary();
        assert_eq!(
            d,
            Distribution {
                count: 100,
                total_ns: 5050,
                mean_ns: 50,
                p50_ns: 50,
                p90_ns: 90,
                p99_ns: 99,
                max_ns: 100,
            }
        );
        assert_eq!(
            Hist::new(Precision::Coarse).summary(),
            Distribution::default()
        );
    }

    #[test]
    fn large_values_within_precision() {
        let mut h = Hist::new(Precision::Coarse);
        h.record(123_456_789);
        let d = h.summary();
        assert_eq!(d.max_ns, 123_456_789);
        let err = (d.p50_ns as f64 - 123_456_789.0).abs() / 123_456_789.0;
        assert!(err <= 0.01, "{d:?}");
        let mut f = Hist::new(Precision::Fine);
        f.record(7);
        f.merge(&h);
        let d = f.summary();
        assert_eq!((d.count, d.total_ns, d.p50_ns), (2, 123_456_796, 7));
    }
}

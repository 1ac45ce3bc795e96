//! How often the probes failed, by reason ([`ProbeFailure`]): what userspace sums from the
//! probes' per-CPU counters, and the names the recording's trailer and the summary keep.

use std::collections::BTreeMap;

use tracer_common::ProbeFailure;

/// The probes' failure counts, one per [`ProbeFailure`], summed over the CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FailureCounts {
    by_reason: [u64; ProbeFailure::COUNT as usize],
}

impl FailureCounts {
    /// Adds one CPU's count of `reason`.
    pub fn add(&mut self, reason: ProbeFailure, count: u64) {
        let total = &mut self.by_reason[reason.index() as usize];
        *total = total.saturating_add(count);
    }

    pub(crate) fn get(&self, reason: ProbeFailure) -> u64 {
        self.by_reason[reason.index() as usize]
    }

    /// Records the probes could not write: the ring buffer was full.
    pub fn lost(&self) -> u64 {
        self.get(ProbeFailure::RingFull)
    }

    /// The reasons that happened, by name: empty when nothing failed, so that outputs
    /// stay as they were without failures.
    pub fn named(&self) -> BTreeMap<String, u64> {
        ProbeFailure::ALL
            .into_iter()
            .filter(|&r| self.get(r) > 0)
            .map(|r| (r.name().to_string(), self.get(r)))
            .collect()
    }
}

/// The line that reports failures next to the lost records ("probe failures: ring_full 3,
/// user_read 1"), or None when nothing failed.
pub fn failures_line(named: &BTreeMap<String, u64>) -> Option<String> {
    if named.is_empty() {
        return None;
    }
    let parts: Vec<String> = named.iter().map(|(k, v)| format!("{k} {v}")).collect();
    Some(format!("probe failures: {}", parts.join(", ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sum_over_cpus_and_only_failures_that_happened_are_named() {
        let mut counts = FailureCounts::default();
        assert!(counts.named().is_empty());
        assert_eq!(failures_line(&counts.named()), None);
        // Two CPUs' counters.
        for per_cpu in [[3, 0, 0, 1, 0, 0], [4, 2, 0, 0, 0, 0]] {
            for (reason, n) in ProbeFailure::ALL.into_iter().zip(per_cpu) {
                counts.add(reason, n);
            }
        }
        assert_eq!(counts.lost(), 7);
        assert_eq!(counts.get(ProbeFailure::UserRead), 2);
        assert_eq!(counts.get(ProbeFailure::Signal), 0);
        let named = counts.named();
        assert_eq!(
            named.into_iter().collect::<Vec<_>>(),
            [
                ("map_insert".to_string(), 1),
                ("ring_full".to_string(), 7),
                ("user_read".to_string(), 2)
            ]
        );
        assert_eq!(
            failures_line(&counts.named()).as_deref(),
            Some("probe failures: map_insert 1, ring_full 7, user_read 2")
        );
    }
}

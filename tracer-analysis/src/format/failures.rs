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

    /// Adds the counts another tracer reported by name ([`FailureCounts::named`]: an
    /// agent's); a name this tracer does not know is returned, not counted.
    pub fn add_named(&mut self, named: &BTreeMap<String, u64>) -> Vec<String> {
        let mut unknown = Vec::new();
        for (name, &count) in named {
            match ProbeFailure::ALL.into_iter().find(|r| r.name() == name) {
                Some(reason) => self.add(reason, count),
                None => unknown.push(name.clone()),
            }
        }
        unknown
    }

    pub(crate) fn get(&self, reason: ProbeFailure) -> u64 {
        self.by_reason[reason.index() as usize]
    }

    /// Records lost: the probes could not write them (the ring buffer was full), or the
    /// tracer dropped them past its memory limit.
    pub fn lost(&self) -> u64 {
        self.get(ProbeFailure::RingFull)
            .saturating_add(self.get(ProbeFailure::MemoryLimit))
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

/// What a failure of `name` (`ProbeFailure::name`) `count` times means for the results,
/// in words; None for `ring_full` (the lost records, warned of on their own).
fn what_failed(name: &str, count: u64) -> Option<String> {
    let depth = tracer_common::MAX_CALL_DEPTH;
    Some(match name {
        "ring_full" => return None,
        "user_read" => format!(
            "{count} reads of the program's memory failed: records went out with a field \
             unset, so messages among them may be unmatched or mis-sized"
        ),
        "tracepoint_field" => format!(
            "{count} kernel events not recorded (a tracepoint's field could not be read): \
             waits, wake-ups and switches among them are missing"
        ),
        "map_insert" => format!(
            "{count} processes or threads not traced (a probe map was full): their calls, \
             messages and work are missing"
        ),
        "call_too_deep" => format!(
            "{count} call exits not recorded: calls nested deeper than {depth} probed \
             calls; their durations and messages may be wrong"
        ),
        "signal" => format!(
            "{count} held processes could not be stopped: they may have run before they \
             were probed, so their first calls may be missing"
        ),
        "tail_call" => format!(
            "{count} calls' records not written (their arrays of handles, ranks or \
             statuses could not be handed on): their messages and requests are missing"
        ),
        "hold_expired" => format!(
            "{count} held processes let go at the hold's deadline before they were \
             probed: their first calls may be missing"
        ),
        "memory_limit" => format!(
            "{count} records dropped by the tracer, its memory over --memory-limit-mib: \
             calls and messages among them are missing"
        ),
        "exit_missed" => format!(
            "{count} calls returned without their exit probe (a return probe attached \
             while a thread was inside the call, or a longjmp): their ends, durations and \
             results are not known"
        ),
        "node_lost" => format!(
            "{count} nodes' links failed before their sessions ended: what those nodes \
             traced after is missing (their messages to other nodes unmatched)"
        ),
        "node_late" => format!(
            "{count} records of a lagging node reached the analysis after later records: \
             the waits and messages around them may be misplaced"
        ),
        other => format!("{count} probe failures of kind {other}"),
    })
}

/// The warning that probe failures (other than lost records) may have touched the
/// results, one clause per reason that happened, saying what it means for them; None when
/// none happened.
pub fn failures_warning(named: &BTreeMap<String, u64>) -> Option<String> {
    let parts: Vec<String> = named
        .iter()
        .filter(|&(_, &count)| count > 0)
        .filter_map(|(name, &count)| what_failed(name, count))
        .collect();
    if parts.is_empty() {
        return None;
    }
    Some(format!(
        "probes failed, so the results may be wrong: {}",
        parts.join("; ")
    ))
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

    #[test]
    fn the_failures_warning_says_what_each_failure_means_and_leaves_lost_records_out() {
        let named = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
            pairs.iter().map(|&(k, v)| (k.to_string(), v)).collect()
        };
        assert_eq!(failures_warning(&named(&[])), None);
        // Lost records have a warning of their own.
        assert_eq!(failures_warning(&named(&[("ring_full", 5)])), None);
        assert_eq!(
            failures_warning(&named(&[("call_too_deep", 3834), ("ring_full", 5)])).as_deref(),
            Some(
                "probes failed, so the results may be wrong: 3834 call exits not recorded: \
                 calls nested deeper than 4 probed calls; their durations and messages may \
                 be wrong"
            )
        );
        // Every reason but ring_full has words of its own, not the fallback's.
        for f in &ProbeFailure::ALL[1..] {
            let warning = failures_warning(&named(&[(f.name(), 1)])).unwrap();
            assert!(!warning.contains("of kind"), "{warning}");
        }
        assert!(failures_warning(&named(&[("new_reason", 2)]))
            .unwrap()
            .ends_with("2 probe failures of kind new_reason"));
    }
}

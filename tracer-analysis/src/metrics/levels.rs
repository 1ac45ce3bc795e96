//! A level's totals (a thread, a process, a machine, the program) and the ratios made
//! from them. Times add over threads; elapsed time spans the first to the last event.

use super::thread::{Cause, ThreadAcc};
use super::{Blocked, Measures};

/// A level's totals before the ratios.
#[derive(Clone, Default)]
pub(crate) struct Sums {
    span: Option<(u64, u64)>,
    cpu: u64,
    work: u64,
    blocked: [u64; 4],
    cpu_wait: u64,
    pub processes: usize,
    threads: usize,
}

impl Sums {
    fn widen(&mut self, first: u64, last: u64) {
        self.span = Some(match self.span {
            Some((a, b)) => (a.min(first), b.max(last)),
            None => (first, last),
        });
    }

    // Times add saturating: a damaged recording's clocks may hold any value, and a sum
    // past 2^64 ns (585 years) must not overflow (found by the fuzzer).
    pub(crate) fn add_thread(&mut self, t: &ThreadAcc) {
        self.widen(t.first_ts, t.last_ts);
        self.cpu = self.cpu.saturating_add(t.cpu_ns());
        self.work = self.work.saturating_add(t.work_ns());
        for (i, c) in Cause::ALL.iter().enumerate() {
            self.blocked[i] = self.blocked[i].saturating_add(t.blocked_ns(*c));
        }
        self.cpu_wait = self.cpu_wait.saturating_add(t.cpu_wait_ns());
        self.threads += 1;
    }

    pub(super) fn add(&mut self, o: &Sums) {
        if let Some((a, b)) = o.span {
            self.widen(a, b);
        }
        self.cpu = self.cpu.saturating_add(o.cpu);
        self.work = self.work.saturating_add(o.work);
        for i in 0..4 {
            self.blocked[i] = self.blocked[i].saturating_add(o.blocked[i]);
        }
        self.cpu_wait = self.cpu_wait.saturating_add(o.cpu_wait);
        self.processes += o.processes;
        self.threads += o.threads;
    }

    pub(super) fn measures(&self, cpus: u32) -> Measures {
        let elapsed = self.span.map_or(0, |(a, b)| b - a);
        let ratio = |n: u64, d: u64| (d > 0).then(|| n as f64 / d as f64);
        let parallelism = ratio(self.cpu, elapsed);
        let b = |c: Cause| self.blocked[c as usize];
        Measures {
            processes: self.processes,
            threads: self.threads,
            elapsed_ns: elapsed,
            cpu_ns: self.cpu,
            work_ns: self.work,
            blocked: Blocked {
                total_ns: self.blocked.iter().fold(0, |a, b| a.saturating_add(*b)),
                message_ns: b(Cause::Message),
                collective_ns: b(Cause::Collective),
                futex_ns: b(Cause::Futex),
                other_ns: b(Cause::Other),
            },
            cpu_wait_ns: self.cpu_wait,
            parallelism,
            response_ratio: ratio(elapsed, self.cpu),
            utilization: parallelism.map(|p| p / cpus.max(1) as f64),
            load_factor: ratio(self.cpu.saturating_add(self.cpu_wait), self.cpu),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the fuzzer (the analysis target, a recording whose clocks were mutated):
    /// totals past 2^64 ns overflowed (a panic in a debug build); they saturate.
    #[test]
    fn totals_saturate() {
        let big = Sums {
            span: Some((0, 10)),
            cpu: u64::MAX - 1,
            cpu_wait: 5,
            blocked: [u64::MAX, 1, 0, 0],
            ..Default::default()
        };
        let mut s = big.clone();
        s.add(&big);
        let m = s.measures(1);
        assert_eq!(m.cpu_ns, u64::MAX);
        assert_eq!(m.blocked.total_ns, u64::MAX);
        assert_eq!(m.blocked.message_ns, u64::MAX);
        assert_eq!(m.cpu_wait_ns, 10);
        assert_eq!(m.load_factor, Some(1.0));
    }
}

//! The threads' CPU clock the probes stamp every event with: its state and its
//! arithmetic. The probes read the kernel's counts and call these methods; the arithmetic
//! lives here, without any kernel access, so it is tested on made-up counts.

/// Per-thread state the probes keep to stamp each event with the thread's CPU time.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadClock {
    /// The best estimate of the thread's CPU time at `slice_start_ns`. It may be behind
    /// `last_ns`: the clock then waits for it (see [`ThreadClock::check`]).
    pub on_cpu_ns: u64,
    /// When the current slice began, or the clock was last checked in it (valid if
    /// `running`).
    pub slice_start_ns: u64,
    /// The CPU's stolen time (`ProbeConfig::rq_stolen`) at `slice_start_ns`, or
    /// [`STOLEN_UNKNOWN`].
    pub stolen_at_start_ns: u64,
    /// The last CPU time stamped on one of the thread's events: the clock never goes back.
    pub last_ns: u64,
    /// 0 when unknown (a freshly forked thread before its first event).
    pub tgid: u32,
    /// One of [`clock_state`].
    pub running: u32,
}

/// [`ThreadClock::stolen_at_start_ns`] when the kernel's count of stolen time is unknown.
pub const STOLEN_UNKNOWN: u64 = u64::MAX;

/// Check the clock against the kernel's counts at least this often while a thread runs.
pub const RECHECK_NS: u64 = 1_000_000;

/// Where a thread's [`ThreadClock`] stands.
pub mod clock_state {
    /// Off the CPU, or not known to be on it.
    pub const OFF_CPU: u32 = 0;
    /// On the CPU since `slice_start_ns`.
    pub const RUNNING: u32 = 1;
    /// On the CPU, and the clock was checked against the kernel's counts at
    /// `slice_start_ns`.
    pub const CHECKED: u32 = 2;
}

/// What the kernel says at a check of a running thread's clock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelCounts {
    /// The thread's CPU time as the kernel counts it (`se.sum_exec_runtime`), if known:
    /// it leaves out the time the hypervisor stole, and lags a running thread by at most
    /// `lag_ns`.
    pub cpu_ns: Option<u64>,
    /// How far `cpu_ns` may lag behind (one scheduler tick); 0 for no bound.
    pub lag_ns: u64,
    /// The time the hypervisor has stolen from this CPU so far, or [`STOLEN_UNKNOWN`].
    pub stolen_ns: u64,
}

impl ThreadClock {
    /// Starts a slice of the thread's time on a CPU at `now`, when that CPU's stolen time
    /// was `stolen_ns`.
    #[inline(always)]
    fn start_slice(&mut self, now: u64, stolen_ns: u64) {
        self.slice_start_ns = now;
        self.stolen_at_start_ns = stolen_ns;
    }

    /// The stamp of an event of the running thread at `now`: from the estimate alone
    /// (the time since the last check added to the CPU time then), or, at a slice's
    /// first event and then every [`RECHECK_NS`], [checked](Self::check) against the
    /// kernel's counts, which `kernel` reads only then.
    #[inline(always)]
    pub fn stamp_event(&mut self, now: u64, kernel: impl FnOnce() -> KernelCounts) -> u64 {
        if self.running == clock_state::OFF_CPU {
            // It runs now, so its switch-in was missed (or this is its first event): its
            // slice starts here, and is checked at once.
            self.running = clock_state::RUNNING;
            self.slice_start_ns = now;
        }
        let elapsed = now.saturating_sub(self.slice_start_ns);
        if self.running == clock_state::CHECKED && elapsed < RECHECK_NS {
            return self.stamp(self.on_cpu_ns + elapsed);
        }
        self.check(now, kernel())
    }

    /// The stamp of an event at `now`, after checking the estimate against the kernel's
    /// counts, which correct two errors of the plain estimate:
    /// - time the hypervisor stole from the CPU, which the kernel leaves out of CPU time;
    /// - switch events the probes missed (a tracepoint program is skipped while another
    ///   BPF program holds the CPU's recursion guard, and this kernel sometimes reports no
    ///   switch-in): a thread whose switch-out and switch-in were both missed looks as if
    ///   it ran all the while. The kernel's count, which lags a running thread by at most
    ///   `lag_ns`, bounds the estimate from both sides.
    ///
    /// The corrected estimate is kept even when it is behind the last stamp: the stamps
    /// then stay where they are until the thread's CPU time catches up. Raising the
    /// estimate to the last stamp instead would keep every error the stamps between two
    /// checks made (each up to [`RECHECK_NS`] of wall time, stolen time included), and
    /// with events more often than that the clock ran at wall-clock speed whatever the
    /// kernel said: 64 ms ahead after 390 ms of a thread on a busy host.
    #[inline(always)]
    fn check(&mut self, now: u64, kernel: KernelCounts) -> u64 {
        let elapsed = now.saturating_sub(self.slice_start_ns);
        let mut cpu = self.on_cpu_ns + elapsed;
        if self.stolen_at_start_ns != STOLEN_UNKNOWN && kernel.stolen_ns != STOLEN_UNKNOWN {
            cpu -= kernel
                .stolen_ns
                .saturating_sub(self.stolen_at_start_ns)
                .min(elapsed);
        }
        if let Some(k) = kernel.cpu_ns {
            if kernel.lag_ns != 0 {
                cpu = cpu.min(k + kernel.lag_ns);
            }
            cpu = cpu.max(k);
        }
        self.running = clock_state::CHECKED;
        self.start_slice(now, kernel.stolen_ns);
        self.on_cpu_ns = cpu;
        self.stamp(cpu)
    }

    /// The thread leaves its CPU at `now`; `kernel_cpu_ns` is the kernel's count, exact at
    /// a switch. Returns the switch-out's stamp.
    #[inline(always)]
    pub fn switch_out(&mut self, now: u64, kernel_cpu_ns: Option<u64>) -> u64 {
        match kernel_cpu_ns {
            Some(k) => self.on_cpu_ns = k,
            None if self.running != clock_state::OFF_CPU => {
                self.on_cpu_ns += now.saturating_sub(self.slice_start_ns)
            }
            None => {}
        }
        self.running = clock_state::OFF_CPU;
        self.stamp(self.on_cpu_ns)
    }

    /// The thread gets a CPU at `now`, whose stolen time is `stolen_ns`. Returns the
    /// switch-in's stamp.
    #[inline(always)]
    pub fn switch_in(&mut self, now: u64, stolen_ns: u64) -> u64 {
        self.running = clock_state::RUNNING;
        self.start_slice(now, stolen_ns);
        self.on_cpu_ns.max(self.last_ns)
    }

    /// Stamps an event with `estimate`, or with the last stamp if that is later.
    #[inline(always)]
    fn stamp(&mut self, estimate: u64) -> u64 {
        let cpu = estimate.max(self.last_ns);
        self.last_ns = cpu;
        cpu
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;
    const US: u64 = 1_000;

    fn counts(cpu_ns: u64, stolen_ns: u64) -> KernelCounts {
        KernelCounts {
            cpu_ns: Some(cpu_ns),
            lag_ns: 4 * MS,
            stolen_ns,
        }
    }

    fn event(c: &mut ThreadClock, now: u64, kernel: KernelCounts) -> u64 {
        c.stamp_event(now, || kernel)
    }

    /// A thread runs with an event every 20 us while the hypervisor steals a fifth of
    /// its CPU: the kernel counts 0.8 ns of CPU per ns. The stamps must follow the
    /// kernel's count within the lag and a check's period, however long it runs.
    #[test]
    fn stamps_follow_the_kernel_when_time_is_stolen() {
        let mut c = ThreadClock::default();
        let kernel_at = |t: u64| t * 4 / 5;
        let mut cpu = 0;
        for i in 0..50_000u64 {
            let now = i * 20 * US;
            // Steal the kernel's accounting hides; the run queue's count is unknown here.
            cpu = event(&mut c, now, counts(kernel_at(now), STOLEN_UNKNOWN));
            assert!(cpu >= kernel_at(now), "at {now}: {cpu} behind the kernel");
            assert!(
                cpu <= kernel_at(now) + 4 * MS + RECHECK_NS,
                "at {now}: {cpu} ahead of the kernel's {}",
                kernel_at(now)
            );
        }
        assert!(cpu >= 799 * MS, "1 s of wall time at 0.8: {cpu}");
    }

    /// A clock ahead of the kernel's count is never taken back: its stamps wait for the
    /// count and then follow it, rather than stay ahead for good.
    #[test]
    fn a_clock_ahead_waits_for_the_kernel() {
        let mut c = ThreadClock::default();
        assert_eq!(event(&mut c, 0, counts(0, 0)), 0);
        // 30 ms without an event or a switch (both missed while it slept): the estimate
        // ran on, and the check holds it to the lag past the kernel's count.
        let ahead = event(&mut c, 30 * MS, counts(0, 0));
        assert_eq!(ahead, 4 * MS);
        assert_eq!(c.switch_out(30 * MS + 1, Some(0)), ahead, "went back");
        assert_eq!(c.switch_in(40 * MS, 0), ahead);
        // It runs 10 ms, an event every 100 us, and the kernel counts all of it.
        for i in 1..=100u64 {
            let k = i * 100 * US;
            let cpu = event(&mut c, 40 * MS + k, counts(k, 0));
            assert_eq!(cpu, ahead.max(k), "after {k} ns on the CPU");
        }
    }

    /// The run queue's count of stolen time takes the steal out of the estimate itself.
    #[test]
    fn counted_steal_is_taken_out_between_checks() {
        let mut c = ThreadClock::default();
        event(&mut c, 0, counts(0, 100 * MS));
        // 2 ms later, 1 ms of which was stolen; the kernel's count lags by a tick.
        let cpu = event(&mut c, 2 * MS, counts(0, 101 * MS));
        assert_eq!(cpu, MS);
    }

    /// Without the kernel's count, a switch-out adds the slice's wall time.
    #[test]
    fn without_the_kernel_count_slices_add_up() {
        let mut c = ThreadClock::default();
        assert_eq!(c.switch_in(10 * MS, STOLEN_UNKNOWN), 0);
        assert_eq!(c.switch_out(13 * MS, None), 3 * MS);
        assert_eq!(c.switch_in(20 * MS, STOLEN_UNKNOWN), 3 * MS);
        assert_eq!(c.switch_out(22 * MS, None), 5 * MS);
    }
}

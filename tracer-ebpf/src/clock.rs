//! The threads' CPU clock, and the header that stamps every event with it.

use crate::{emit::write_held_entry, maps::config};
use aya_ebpf::helpers::{
    bpf_get_current_task, bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel,
};
use tracer_common::{EventHeader, KernelCounts, ThreadClock, ThreadState, STOLEN_UNKNOWN};

/// The current thread's CPU time as the kernel counts it (`se.sum_exec_runtime`), when
/// BTF told userspace where it is. It is exact at a context switch and lags by at most a
/// scheduler tick in between.
pub fn kernel_cpu_time() -> Option<u64> {
    let off = config()?.task_cpu_time;
    if off == 0 {
        return None;
    }
    let task = unsafe { bpf_get_current_task() } as *const u8;
    unsafe { bpf_probe_read_kernel(task.add(off as usize) as *const u64) }.ok()
}

/// The time the hypervisor has stolen from this CPU, as the kernel's run queue counts
/// it (it leaves that time out of every thread's CPU time); None without BTF for it.
fn cpu_stolen_ns() -> Option<u64> {
    let c = config()?;
    if c.task_cfs_rq == 0 {
        return None;
    }
    // The current task's run queue is this CPU's.
    let task = unsafe { bpf_get_current_task() } as *const u8;
    unsafe {
        let cfs_rq: *const u8 =
            bpf_probe_read_kernel(task.add(c.task_cfs_rq as usize) as _).ok()?;
        let rq: *const u8 = bpf_probe_read_kernel(cfs_rq.add(c.cfs_rq_rq as usize) as _).ok()?;
        bpf_probe_read_kernel(rq.add(c.rq_stolen as usize) as *const u64).ok()
    }
}

/// The stolen time of the current CPU, or [`STOLEN_UNKNOWN`].
pub fn cpu_stolen_or_unknown() -> u64 {
    cpu_stolen_ns().unwrap_or(STOLEN_UNKNOWN)
}

/// The current thread's CPU time: the time since its switch-in added to its CPU time at
/// that switch, checked against the kernel's counts at the slice's first event and then
/// every `RECHECK_NS` ([`ThreadClock::stamp_event`]; its check says why and how).
pub fn cpu_clock(c: &mut ThreadClock, tgid: u32, now: u64) -> u64 {
    if c.tgid == 0 {
        c.tgid = tgid;
    }
    c.stamp_event(now, || KernelCounts {
        cpu_ns: kernel_cpu_time(),
        lag_ns: config().map_or(0, |c| c.kernel_clock_lag_ns as u64),
        stolen_ns: cpu_stolen_or_unknown(),
    })
}

/// Header for an event of the current thread, whose state is `t`. A call entry the
/// thread holds back is written first, so the thread's records stay in order. (Inlined:
/// a BPF function takes at most five arguments, and the returned header is a sixth.)
#[inline(always)]
pub fn header(t: &mut ThreadState, kind: u16, call: u16, tgid: u32, tid: u32) -> EventHeader {
    write_held_entry(t);
    let now = unsafe { bpf_ktime_get_ns() };
    EventHeader {
        ts_ns: now,
        cpu_ns: cpu_clock(&mut t.clock, tgid, now),
        tgid,
        tid,
        kind,
        call,
        cpu: unsafe { bpf_get_smp_processor_id() },
    }
}

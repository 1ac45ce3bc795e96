//! Reading what a raw tracepoint passes: its `TP_PROTO` arguments, and fields of the
//! kernel objects they point to, at offsets userspace read from kernel BTF (CONFIG).
//!
//! Raw tracepoints rather than the classic kind: a classic tracepoint is a perf event,
//! and closing one waits for RCU grace periods under a global mutex (about 35 ms each,
//! one after the other: 0.28 s of every session's stop for our eight); a raw tracepoint
//! link goes without waiting. The program also runs without the perf event's record
//! being built first.

use aya_ebpf::{helpers::bpf_probe_read_kernel, programs::RawTracePointContext};
use tracer_common::ProbeFailure;

use crate::maps::count_failure;

/// Argument `n` of the tracepoint (its `TP_PROTO`'s n-th parameter, widened to 64 bits).
#[inline(always)]
pub fn arg(ctx: &RawTracePointContext, n: usize) -> u64 {
    ctx.arg::<u64>(n)
}

/// The field at `offset` of the kernel object at `object` (a task, a binprm); a field
/// that cannot be read is counted as `ProbeFailure::TracepointField`.
pub fn kernel_field<T: Copy>(object: u64, offset: u32) -> Result<T, ()> {
    match unsafe { bpf_probe_read_kernel((object + offset as u64) as *const T) } {
        Ok(value) => Ok(value),
        Err(_) => {
            count_failure(ProbeFailure::TracepointField);
            Err(())
        }
    }
}

/// The thread id (`pid`) of the task at `task`.
pub fn task_tid(task: u64, pid_offset: u32) -> Result<u32, ()> {
    kernel_field::<i32>(task, pid_offset).map(|pid| pid as u32)
}

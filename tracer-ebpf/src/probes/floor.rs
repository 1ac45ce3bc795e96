//! The floor (`tracer record --probes floor`, for `cargo xtask bench`): empty programs that
//! userspace attaches where the real probes attach, so the benchmarks can set the cost of
//! our probes against the cost of a probe that does nothing.

use aya_ebpf::{
    macros::{tracepoint, uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext, TracePointContext},
};

#[uprobe]
pub fn floor_uprobe(_ctx: ProbeContext) -> u32 {
    0
}

#[uretprobe]
pub fn floor_uretprobe(_ctx: RetProbeContext) -> u32 {
    0
}

#[tracepoint]
pub fn floor_tracepoint(_ctx: TracePointContext) -> u32 {
    0
}

//! The floor (`tracer record --probes floor`, for `cargo xtask bench`): empty programs that
//! userspace attaches where the real probes attach, so the benchmarks can set the cost of
//! our probes against the cost of a probe that does nothing.

use super::uprobe_twins;
use aya_ebpf::{
    macros::{raw_tracepoint, tracepoint},
    programs::{RawTracePointContext, TracePointContext},
};

uprobe_twins!(uprobe floor_uprobe, floor_uprobe_m => nothing);
uprobe_twins!(uretprobe floor_uretprobe, floor_uretp_m => nothing);

fn nothing<C>(_ctx: &C) {}

/// Attached wherever a classic tracepoint program of ours is (futex).
#[tracepoint]
pub fn floor_tracepoint(_ctx: TracePointContext) -> u32 {
    0
}

/// Attached wherever a raw tracepoint program of ours is (the scheduler's).
#[raw_tracepoint]
pub fn floor_raw_tp(_ctx: RawTracePointContext) -> u32 {
    0
}

//! The floor (`tracer record --probes floor`, for `cargo xtask bench`): empty programs that
//! userspace attaches where the real probes attach, so the benchmarks can set the cost of
//! our probes against the cost of a probe that does nothing.

use super::uprobe_twins;
use aya_ebpf::{macros::raw_tracepoint, programs::RawTracePointContext};

uprobe_twins!(uprobe floor_uprobe, floor_uprobe_m => nothing);
uprobe_twins!(uretprobe floor_uretprobe, floor_uretp_m => nothing);

fn nothing<C>(_ctx: &C) {}

/// Attached wherever a raw tracepoint program of ours is.
#[raw_tracepoint]
pub fn floor_tracepoint(_ctx: RawTracePointContext) -> u32 {
    0
}

//! The programs, one file per probe family.

pub mod calls;
pub mod floor;
pub mod futex;
pub mod procedures;
pub mod process;
pub mod sched;
pub mod status;

use aya_ebpf::programs::TracePointContext;

/// A field of a tracepoint's record, at its offset from tracefs (in CONFIG).
pub fn field<T>(ctx: &TracePointContext, offset: u32) -> Result<T, ()> {
    unsafe { ctx.read_at::<T>(offset as usize) }.map_err(|_| ())
}

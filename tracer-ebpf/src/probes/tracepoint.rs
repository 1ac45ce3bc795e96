//! Reading tracepoint records, whose layout the kernel states in tracefs.

use aya_ebpf::programs::TracePointContext;

/// A field of a tracepoint's record, at its offset from tracefs (in CONFIG).
pub fn field<T>(ctx: &TracePointContext, offset: u32) -> Result<T, ()> {
    unsafe { ctx.read_at::<T>(offset as usize) }.map_err(|_| ())
}

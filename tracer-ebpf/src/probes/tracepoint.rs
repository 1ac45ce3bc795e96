//! Reading tracepoint records, whose layout the kernel states in tracefs.

use aya_ebpf::{
    helpers::generated::bpf_probe_read_kernel, programs::TracePointContext, EbpfContext,
};
use core::{ffi::c_void, mem::MaybeUninit};
use tracer_common::ProbeFailure;

use crate::maps::count_failure;

/// A field of a tracepoint's record, at its offset from tracefs (in CONFIG); a field that
/// cannot be read is counted as `ProbeFailure::TracepointField`. The value starts zeroed:
/// left undefined on the failed path (as `read_at` leaves it), the compiler may read a
/// register the counting call clobbered, which the verifier refuses.
pub fn field<T>(ctx: &TracePointContext, offset: u32) -> Result<T, ()> {
    let mut value = MaybeUninit::<T>::zeroed();
    let ret = unsafe {
        bpf_probe_read_kernel(
            value.as_mut_ptr() as *mut c_void,
            core::mem::size_of::<T>() as u32,
            (ctx.as_ptr() as *const u8).add(offset as usize) as *const c_void,
        )
    };
    if ret != 0 {
        count_failure(ProbeFailure::TracepointField);
        return Err(());
    }
    // SAFETY: the kernel wrote every byte (the fields are plain integers).
    Ok(unsafe { value.assume_init() })
}

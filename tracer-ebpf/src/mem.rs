//! Copies that stay word-sized, and reads of user memory.

use crate::maps::count_failure;
use aya_ebpf::helpers::{bpf_probe_read_user, generated};
use core::ffi::c_void;
use tracer_common::ProbeFailure;

/// Pointers below this are sentinels (MPI_STATUS_IGNORE is 0 in Open MPI, 1 in MPICH).
pub const MIN_POINTER: u64 = 4096;

/// Copies a record word by word. A struct assignment between a map value and ring
/// memory (which the compiler cannot tell apart) is a call of compiler-builtins'
/// `memmove`, and zeroing a few fields one of its `memset`: in BPF both are loops over
/// bytes (3.5 % of a traced loop of MPI calls, more than the program's own code).
#[inline(always)]
pub fn copy_words<T>(dst: &mut T, src: &T) {
    const { assert!(core::mem::size_of::<T>() % 8 == 0) };
    let (d, s) = (dst as *mut T as *mut u64, src as *const T as *const u64);
    for i in 0..core::mem::size_of::<T>() / 8 {
        unsafe { core::ptr::write_volatile(d.add(i), core::ptr::read_volatile(s.add(i))) };
    }
}

/// `*src`, copied word by word ([`copy_words`]): where the compiler can see that a value
/// is mostly zeros, a plain copy becomes a `memset`.
#[inline(always)]
pub fn copy_of<T>(src: &T) -> T {
    let mut v = core::mem::MaybeUninit::<T>::uninit();
    // SAFETY: copy_words writes every byte of `v` (its size is a multiple of 8).
    unsafe {
        copy_words(&mut *v.as_mut_ptr(), src);
        v.assume_init()
    }
}

/// `*dst = *addr` from user memory, or `*dst = unset` when `addr` cannot be read (counted
/// as `ProbeFailure::UserRead` unless `addr` is a sentinel below [`MIN_POINTER`]). The
/// kernel writes `dst` itself (a ring record): reading the value back right after the
/// helper wrote it stalls the CPU (its copy cannot be forwarded to a load; a quarter of
/// a traced MPI_Comm_rank's exit program went there).
#[inline(always)]
pub fn read_user_into<T: Copy>(dst: &mut T, addr: u64, unset: T) {
    if addr < MIN_POINTER {
        *dst = unset;
        return;
    }
    let ret = unsafe {
        generated::bpf_probe_read_user(
            dst as *mut T as *mut c_void,
            core::mem::size_of::<T>() as u32,
            addr as *const c_void,
        )
    };
    if ret != 0 {
        *dst = unset;
        count_failure(ProbeFailure::UserRead);
    }
}

/// The first `len` bytes of `*dst` (at most all of them) from user memory at `addr`, in
/// one read: false when `addr` is a sentinel below [`MIN_POINTER`] or (counted as
/// `ProbeFailure::UserRead`) the read fails, and then the kernel has zeroed them. One read
/// for a whole slice of an array, rather than one per element, keeps the verifier's
/// walk short: a branch per element multiplied the states of every program that reads
/// arrays (the call entry program took 0.4 M instructions to verify, 0.7 s).
#[inline(always)]
pub fn read_user_prefix<T>(dst: &mut T, addr: u64, len: u32) -> bool {
    if addr < MIN_POINTER {
        return false;
    }
    let read = probe_user_prefix(dst, addr, len);
    if !read {
        count_failure(ProbeFailure::UserRead);
    }
    read
}

/// As [`read_user_prefix`], where a failed read is expected (an array of unknown length
/// read past its end): not a failure to count.
#[inline(always)]
pub fn probe_user_prefix<T>(dst: &mut T, addr: u64, len: u32) -> bool {
    // Through memory, so that the compiler cannot drop the clamp where it knows `len`
    // is small enough: the verifier may not know it (a bound checked on a copy of the
    // register), and refuses the read unless it sees the clamp.
    let len = unsafe { core::ptr::read_volatile(&len) };
    let len = len.min(core::mem::size_of::<T>() as u32);
    if addr < MIN_POINTER {
        return false;
    }
    let ret = unsafe {
        generated::bpf_probe_read_user(dst as *mut T as *mut c_void, len, addr as *const c_void)
    };
    ret == 0
}

/// `*addr` from user memory: None for a sentinel below [`MIN_POINTER`], or (counted as
/// `ProbeFailure::UserRead`) when the read fails.
pub fn read_user<T>(addr: u64) -> Option<T> {
    let value = probe_user(addr);
    if value.is_none() && addr >= MIN_POINTER {
        count_failure(ProbeFailure::UserRead);
    }
    value
}

/// `*addr` from user memory, where a failed read is expected (a guessed address, such as
/// a word of the stack that may point at code): not a failure to count.
pub fn probe_user<T>(addr: u64) -> Option<T> {
    if addr < MIN_POINTER {
        return None;
    }
    unsafe { bpf_probe_read_user(addr as *const T) }.ok()
}

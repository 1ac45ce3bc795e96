//! The probes. Each entry point is a thin wrapper around a `try_*` function; all of them
//! write fixed-size records from `tracer-common` into one ring buffer and count every
//! record that could not be reserved, and every other step that failed, in `FAILURES`
//! (by `ProbeFailure`).
//!
//! Only traced processes produce events: a process is traced when userspace put its tgid
//! in `TRACED` (`--pid`, `-- COMMAND`), when a traced thread forked it, or, in
//! system-wide mode, when it first calls a probed MPI/PVM function or procedure.
#![no_std]
#![no_main]
// A binary: nothing in it is reachable from another crate, and `pub` marks what its
// modules share. The probes' entry points reach the kernel as exported symbols
// (`#[no_mangle]`, from aya's attribute macros), not through Rust visibility.
#![allow(unreachable_pub)]

mod clock;
mod emit;
mod maps;
mod mem;
mod probes;
mod scratch;
mod thread;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";

//! The event ABI shared by the eBPF probes (`tracer-ebpf`) and userspace (`tracer-user`).
//!
//! Every record that crosses the ring buffer starts with an [`EventHeader`]; its `kind`
//! says which fixed-size record follows. Kind ids and call ids are never reused: a
//! recording made today must decode the same way forever (see docs/recording-format.md).
//! All structs are `#[repr(C)]` with explicit fields and no implicit padding, so the
//! byte image is the same on both sides and in the trace file.
//!
//! By concern, all re-exported here: `clock` (the threads' CPU clock the probes stamp
//! events with), `ids` (record kinds and call ids), `records` (the
//! frozen records recordings hold), `ring` (forms that exist only in the ring buffer),
//! `config` (what userspace writes into the probes' tables at load time), `state` (map
//! state: the slots, and what the probes keep per thread) and `failures` (why a probe
//! failed: the indexes of its failure counters).
#![no_std]

mod clock;
mod config;
mod failures;
mod ids;
mod records;
mod ring;
mod state;

pub use clock::*;
pub use config::*;
pub use failures::*;
pub use ids::*;
pub use records::*;
pub use ring::*;
pub use state::*;

#[cfg(feature = "user")]
mod pod {
    use super::*;
    unsafe impl aya::Pod for CallLayout {}
    unsafe impl aya::Pod for FlavorConfig {}
    unsafe impl aya::Pod for ProbeConfig {}
    unsafe impl aya::Pod for ThreadClock {}
    unsafe impl aya::Pod for ThreadState {}
}

// The layouts are part of the recording format: fail the build if one changes size.
const _: () = {
    use core::mem::size_of;
    assert!(size_of::<EventHeader>() == 32);
    assert!(size_of::<CallRecord>() == 104);
    assert!(size_of::<HandleArrayRecord>() == 104);
    assert!(size_of::<StatusArrayRecord>() == 168);
    assert!(size_of::<FutexRecord>() == 64);
    assert!(size_of::<SwitchRecord>() == 40);
    assert!(size_of::<WakeRecord>() == 48);
    assert!(size_of::<ForkRecord>() == 40);
    assert!(size_of::<ExecRecord>() == 168);
    assert!(size_of::<ExitRecord>() == 40);
    assert!(size_of::<ProcessEndRecord>() == 40);
    assert!(size_of::<UnwoundRecord>() == 40);
    assert!(size_of::<SampleRecord>() == 40 + 8 * SAMPLE_MAX_FRAMES);
    assert!(size_of::<RawSampleRecord>() == 64 + SAMPLE_STACK_BYTES);
    assert!(size_of::<CallLayout>() == 20);
    assert!(size_of::<FlavorConfig>() == 56);
    assert!(size_of::<ProbeConfig>() == 80);
    assert!(size_of::<SlotCursor>() == 128);
    assert!(size_of::<CallPairRecord>() <= SLOT_BYTES);
    // Map values: no padding either (the kernel copies them byte for byte).
    assert!(size_of::<ThreadClock>() == 40);
    assert!(size_of::<CallFrame>() == 72);
    assert!(size_of::<CallResult>() == 48);
    assert!(size_of::<CallReturnRecord>() == 80);
    assert!(size_of::<CallPairRecord>() == 136);
    assert!(size_of::<FutexPairRecord>() == 96);
    assert!(size_of::<SwitchPairRecord>() == 56);
    assert!(size_of::<ProcedureFrame>() == 16);
    assert!(
        size_of::<ThreadState>()
            == 56
                + 72 * MAX_CALL_DEPTH
                + 104
                + 64
                + 8
                + 8 * ARRAY_CHUNK
                + 8
                + 16 * MAX_PROCEDURE_DEPTH
    );
};

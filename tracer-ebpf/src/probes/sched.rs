//! Scheduler tracepoints: switches (the threads' clocks) and wakeups. Field offsets come
//! from tracefs via CONFIG.

use crate::{
    clock::{header, kernel_cpu_time, start_slice},
    emit::{emit, write_held_entry},
    maps::config,
    probes::field,
    thread::{current_ids, forget_thread, known_thread, traced_thread},
};
use aya_ebpf::{
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns},
    macros::tracepoint,
    programs::TracePointContext,
};
use tracer_common::{clock_state, kind, EventHeader, SwitchRecord, WakeRecord};

/// `prev_state` bits of a thread that has exited (the kernel's `exit_state` values, as
/// `sched_switch` reports them: a reaped thread, a process waiting for its parent).
const EXIT_DEAD: i64 = 0x10;
const EXIT_ZOMBIE: i64 = 0x20;

#[tracepoint]
pub fn sched_switch(ctx: TracePointContext) -> u32 {
    let _ = try_sched_switch(&ctx);
    0
}

pub fn try_sched_switch(ctx: &TracePointContext) -> Result<(), ()> {
    let c = config().ok_or(())?;
    let prev: u32 = field(ctx, c.switch_prev_pid)?;
    let next: u32 = field(ctx, c.switch_next_pid)?;
    let now = unsafe { bpf_ktime_get_ns() };
    let cpu = unsafe { bpf_get_smp_processor_id() };
    if let Some(thread) = known_thread(prev) {
        // `prev` is the current task: a call entry it holds goes before its switch-out.
        write_held_entry(thread);
        let clock = &mut thread.clock;
        // `prev` is the current task; the scheduler has just brought its CPU time up to
        // date, so the kernel's count is exact here.
        match kernel_cpu_time() {
            Some(k) => clock.on_cpu_ns = k.max(clock.last_ns),
            None if clock.running != clock_state::OFF_CPU => {
                clock.on_cpu_ns += now.saturating_sub(clock.slice_start_ns)
            }
            None => {}
        }
        clock.last_ns = clock.on_cpu_ns;
        clock.running = clock_state::OFF_CPU;
        let state: i64 = field(ctx, c.switch_prev_state)?;
        emit(&SwitchRecord {
            header: EventHeader {
                ts_ns: now,
                cpu_ns: clock.on_cpu_ns,
                tgid: current_ids().0,
                tid: prev,
                kind: kind::SWITCH_OUT,
                call: 0,
                cpu,
            },
            prev_state: state,
        });
        if state & (EXIT_DEAD | EXIT_ZOMBIE) != 0 {
            // Its last switch: the thread never runs again.
            forget_thread(prev);
        }
    }
    if let Some(thread) = known_thread(next) {
        let clock = &mut thread.clock;
        clock.running = clock_state::RUNNING;
        start_slice(clock, now);
        emit(&SwitchRecord {
            header: EventHeader {
                ts_ns: now,
                cpu_ns: clock.on_cpu_ns,
                tgid: clock.tgid,
                tid: next,
                kind: kind::SWITCH_IN,
                call: 0,
                cpu,
            },
            prev_state: 0,
        });
    }
    Ok(())
}

#[tracepoint]
pub fn sched_waking(ctx: TracePointContext) -> u32 {
    let _ = try_wakeup(&ctx, kind::WAKEUP);
    0
}

#[tracepoint]
pub fn sched_wakeup_new(ctx: TracePointContext) -> u32 {
    let _ = try_wakeup(&ctx, kind::WAKEUP_NEW);
    0
}

fn try_wakeup(ctx: &TracePointContext, kind: u16) -> Result<(), ()> {
    let c = config().ok_or(())?;
    let wakee: u32 = field(ctx, c.waking_pid)?;
    let wakee_tgid = match known_thread(wakee) {
        Some(t) => t.clock.tgid,
        None => return Ok(()),
    };
    let (tgid, tid) = current_ids();
    // The waker may be an untraced thread or an interrupt: stamp it without giving it a
    // clock.
    let h = if let Some(thread) = traced_thread(tgid, tid) {
        header(thread, kind, 0, tgid, tid)
    } else {
        EventHeader {
            ts_ns: unsafe { bpf_ktime_get_ns() },
            cpu_ns: 0,
            tgid,
            tid,
            kind,
            call: 0,
            cpu: unsafe { bpf_get_smp_processor_id() },
        }
    };
    emit(&WakeRecord {
        header: h,
        wakee_tid: wakee,
        wakee_tgid,
        target_cpu: field(ctx, c.waking_target_cpu)?,
        _reserved: 0,
    });
    Ok(())
}

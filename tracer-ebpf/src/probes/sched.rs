//! Scheduler tracepoints (raw): switches (the threads' clocks) and wakeups. Offsets in
//! `task_struct` come from kernel BTF via CONFIG.

use crate::{
    clock::{cpu_stolen_or_unknown, header, kernel_cpu_time},
    emit::{emit, write_held_entry},
    maps::config,
    probes::{arg, kernel_field, task_tid},
    thread::{current_ids, forget_thread, known_thread, traced_thread},
};
use aya_ebpf::{
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns},
    macros::raw_tracepoint,
    programs::RawTracePointContext,
};
use tracer_common::{kind, EventHeader, SwitchPairRecord, SwitchRecord, WakeRecord};

/// `prev_state` bits of a thread that has exited (the kernel's `exit_state` values, as
/// `sched_switch` reports them: a reaped thread, a process waiting for its parent).
const EXIT_DEAD: i64 = 0x10;
const EXIT_ZOMBIE: i64 = 0x20;

/// `sched_switch(bool preempt, struct task_struct *prev, struct task_struct *next,
/// unsigned int prev_state)`.
#[raw_tracepoint(tracepoint = "sched_switch")]
pub fn sched_switch(ctx: RawTracePointContext) -> u32 {
    let _ = try_sched_switch(&ctx);
    0
}

/// The state the classic `sched_switch` tracepoint reports for `prev` (the kernel's
/// `__trace_sched_switch_state`), which recordings keep: `TASK_REPORT_MAX` (0x100) when
/// preempted, else the highest bit of the task's reportable state, 0 when runnable.
fn reported_state(preempt: bool, state: u32, exit_state: u32) -> i64 {
    const TASK_UNINTERRUPTIBLE: u32 = 0x2;
    const TASK_REPORT: u32 = 0x7f;
    const TASK_IDLE: u32 = 0x402;
    const TASK_REPORT_IDLE: u32 = 0x80;
    const TASK_REPORT_MAX: u32 = 0x100;
    const TASK_RTLOCK_WAIT: u32 = 0x1000;
    if preempt {
        return TASK_REPORT_MAX as i64;
    }
    let mut s = (state | exit_state) & TASK_REPORT;
    if state & TASK_IDLE == TASK_IDLE {
        s = TASK_REPORT_IDLE;
    }
    if state & TASK_RTLOCK_WAIT != 0 {
        s = TASK_UNINTERRUPTIBLE;
    }
    // The highest set bit of an 8-bit value, without a loop.
    s |= s >> 1;
    s |= s >> 2;
    s |= s >> 4;
    (s - (s >> 1)) as i64
}

pub fn try_sched_switch(ctx: &RawTracePointContext) -> Result<(), ()> {
    let c = config().ok_or(())?;
    let prev_task = arg(ctx, 1);
    let next_task = arg(ctx, 2);
    let prev = task_tid(prev_task, c.task_pid)?;
    let next = task_tid(next_task, c.task_pid)?;
    let now = unsafe { bpf_ktime_get_ns() };
    let cpu = unsafe { bpf_get_smp_processor_id() };
    let mut switch_out = None;
    if let Some(thread) = known_thread(prev) {
        // `prev` is the current task: a call entry it holds goes before its switch-out,
        // and the scheduler has just brought its CPU time up to date, so the kernel's
        // count is exact here.
        write_held_entry(thread);
        let cpu_ns = thread.clock.switch_out(now, kernel_cpu_time());
        let exit_state: u32 = kernel_field(prev_task, c.task_exit_state)?;
        let state = reported_state(arg(ctx, 0) & 1 != 0, arg(ctx, 3) as u32, exit_state);
        switch_out = Some(SwitchRecord {
            header: EventHeader {
                ts_ns: now,
                cpu_ns,
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
    let Some(thread) = known_thread(next) else {
        if let Some(record) = switch_out {
            emit(&record);
        }
        return Ok(());
    };
    let clock = &mut thread.clock;
    let cpu_ns = clock.switch_in(now, cpu_stolen_or_unknown());
    match switch_out {
        // One traced thread gives the CPU to another: both in one record.
        Some(mut out) => {
            out.header.kind = kind::SWITCH_PAIR;
            emit(&SwitchPairRecord {
                out,
                in_cpu_ns: cpu_ns,
                in_tgid: clock.tgid,
                in_tid: next,
            });
        }
        None => emit(&SwitchRecord {
            header: EventHeader {
                ts_ns: now,
                cpu_ns,
                tgid: clock.tgid,
                tid: next,
                kind: kind::SWITCH_IN,
                call: 0,
                cpu,
            },
            prev_state: 0,
        }),
    }
    Ok(())
}

/// `sched_waking(struct task_struct *p)`.
#[raw_tracepoint(tracepoint = "sched_waking")]
pub fn sched_waking(ctx: RawTracePointContext) -> u32 {
    let _ = try_wakeup(&ctx, kind::WAKEUP);
    0
}

/// `sched_wakeup_new(struct task_struct *p)`.
#[raw_tracepoint(tracepoint = "sched_wakeup_new")]
pub fn sched_wakeup_new(ctx: RawTracePointContext) -> u32 {
    let _ = try_wakeup(&ctx, kind::WAKEUP_NEW);
    0
}

fn try_wakeup(ctx: &RawTracePointContext, kind: u16) -> Result<(), ()> {
    let c = config().ok_or(())?;
    let wakee_task = arg(ctx, 0);
    let wakee = task_tid(wakee_task, c.task_pid)?;
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
        // `task_cpu(p)`, as the classic tracepoint's `target_cpu`.
        target_cpu: kernel_field(wakee_task, c.task_cpu)?,
        _reserved: 0,
    });
    Ok(())
}

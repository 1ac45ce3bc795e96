//! Process lifecycle: fork, exec, exit, and the dlopen return of a held process.

use crate::{
    clock::header,
    emit::{emit, BPF_RB_FORCE_WAKEUP},
    maps::{config, count_failure, EVENTS, HELD, HOLD_ON_LOAD, TRACED},
    probes::{arg, kernel_field, task_tid},
    thread::{current_ids, new_thread, traced_thread},
};
use aya_ebpf::{
    helpers::generated::bpf_send_signal,
    helpers::{
        bpf_get_current_task, bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel,
        bpf_probe_read_kernel_str_bytes,
    },
    macros::{raw_tracepoint, uretprobe},
    programs::{RawTracePointContext, RetProbeContext},
};
use tracer_common::{
    kind, EventHeader, ExecRecord, ExitRecord, ForkRecord, ProbeFailure, ProcessEndRecord,
};

const SIGSTOP: u32 = 19;

/// `sched_process_fork(struct task_struct *parent, struct task_struct *child)`.
#[raw_tracepoint(tracepoint = "sched_process_fork")]
pub fn sched_process_fork(ctx: RawTracePointContext) -> u32 {
    let _ = try_fork(&ctx);
    0
}

fn try_fork(ctx: &RawTracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    let child = task_tid(arg(ctx, 1), c.task_pid)?;
    // The child may be a thread or a process: either way its id joins the traced set, and
    // its clock starts when it first runs.
    if TRACED.insert(&child, &1, 0).is_err() {
        count_failure(ProbeFailure::MapInsert);
    }
    let _ = new_thread(child);
    emit(&ForkRecord {
        header: header(thread, kind::FORK, 0, tgid, tid),
        child_tid: child,
        _reserved: 0,
    });
    Ok(())
}

/// `sched_process_exec(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)`.
#[raw_tracepoint(tracepoint = "sched_process_exec")]
pub fn sched_process_exec(ctx: RawTracePointContext) -> u32 {
    let _ = try_exec(&ctx);
    0
}

fn try_exec(ctx: &RawTracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    // Before the reservation: the header may write a held call entry.
    let h = header(thread, kind::EXEC, 0, tgid, tid);
    let Some(mut rec) = EVENTS.reserve::<ExecRecord>(0) else {
        count_failure(ProbeFailure::RingFull);
        return Ok(());
    };
    let r = unsafe { &mut *rec.as_mut_ptr() };
    r.header = h;
    r.old_tid = arg(ctx, 1) as u32;
    // `bprm->filename`: the path the program was executed by.
    let filename = kernel_field::<u64>(arg(ctx, 2), c.bprm_filename).unwrap_or(0);
    r.filename_len =
        match unsafe { bpf_probe_read_kernel_str_bytes(filename as *const u8, &mut r.filename) } {
            Ok(s) => s.len() as u32,
            Err(_) => 0,
        };
    // Wake the reader now: with hold_on_exec the process waits for it.
    rec.submit(BPF_RB_FORCE_WAKEUP);
    if c.hold_on_exec != 0 {
        // Userspace attaches the procedure probes to the new program, then sends SIGCONT.
        stop_current_process(tgid);
    }
    Ok(())
}

/// dlopen returned (a uretprobe on the C library's dlopen, in every process). In a process
/// userspace holds, the library and what it needs are mapped now but none of their code
/// ran: stop the process and tell userspace, which probes the MPI/PVM libraries among
/// them before the program can call one (mpi4py's MPI module calls MPI_Init as it is
/// imported), then lets it go on.
#[uretprobe]
pub fn library_loaded(ctx: RetProbeContext) -> u32 {
    let _ = try_library_loaded(&ctx);
    0
}

fn try_library_loaded(ctx: &RetProbeContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    if unsafe { HOLD_ON_LOAD.get(&tgid) }.is_none() {
        return Ok(());
    }
    let handle: u64 = ctx.ret();
    if handle == 0 {
        return Ok(()); // dlopen failed: nothing new is mapped
    }
    let header = EventHeader {
        ts_ns: unsafe { bpf_ktime_get_ns() },
        cpu_ns: 0,
        tgid,
        tid,
        kind: kind::LIBRARY_LOADED,
        call: 0,
        cpu: unsafe { bpf_get_smp_processor_id() },
    };
    // Straight to the reader (it must act before the process can go on).
    if EVENTS
        .output::<EventHeader>(&header, BPF_RB_FORCE_WAKEUP)
        .is_err()
    {
        count_failure(ProbeFailure::RingFull);
        return Ok(()); // not stopped: nobody would know to let it go on
    }
    stop_current_process(tgid);
    Ok(())
}

/// The current task's `exit_code`, at `offset` in `task_struct` (0: unknown, u32::MAX).
fn exit_status(offset: u32) -> u32 {
    if offset == 0 {
        return u32::MAX;
    }
    let task = unsafe { bpf_get_current_task() } as *const u8;
    unsafe { bpf_probe_read_kernel(task.add(offset as usize) as *const u32) }.unwrap_or(u32::MAX)
}

/// Stops the current process, `tgid` (SIGSTOP), for userspace, which lets it go on. The
/// hold is entered in `HELD` first: userspace lets go every process still there at the
/// hold's deadline, even one whose record it never read. A hold that cannot be entered
/// is not made (`ProbeFailure::MapInsert`), and a signal the kernel would not send is
/// counted as `ProbeFailure::Signal`.
fn stop_current_process(tgid: u32) {
    let since = unsafe { bpf_ktime_get_ns() };
    if HELD.insert(&tgid, &since, 0).is_err() {
        count_failure(ProbeFailure::MapInsert);
        return;
    }
    if unsafe { bpf_send_signal(SIGSTOP) } != 0 {
        count_failure(ProbeFailure::Signal);
        let _ = HELD.remove(&tgid);
    }
}

/// `sched_process_exit(struct task_struct *p, bool group_dead)`.
#[raw_tracepoint(tracepoint = "sched_process_exit")]
pub fn sched_process_exit(ctx: RawTracePointContext) -> u32 {
    let _ = try_exit(&ctx);
    0
}

fn try_exit(ctx: &RawTracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    let group_dead = (arg(ctx, 1) & 0xff) as u8;
    let exit = header(thread, kind::EXIT, 0, tgid, tid);
    emit(&ExitRecord {
        header: exit,
        group_dead: group_dead as u32,
        _reserved: 0,
    });
    if group_dead != 0 {
        // How the process ended (an exit code or the signal that killed it): the kernel
        // set the task's exit_code before this tracepoint.
        emit(&ProcessEndRecord {
            header: EventHeader {
                kind: kind::PROCESS_END,
                ..exit
            },
            status: exit_status(c.task_exit_code),
            _reserved: 0,
        });
    }
    // The state lives on until the thread's last switch-out (`try_sched_switch`): after
    // this tracepoint the exiting thread still wakes its joiner (the kernel's futex wake
    // of `clear_child_tid`), and freeing the state here made that wakeup claim a fresh
    // one that nothing freed again, left to whichever thread later got the same id.
    if tid != tgid {
        let _ = TRACED.remove(&tid);
    }
    if group_dead != 0 {
        let _ = TRACED.remove(&tgid);
        // Killed while held: its id may be reused by a process nobody held.
        let _ = HELD.remove(&tgid);
    }
    Ok(())
}

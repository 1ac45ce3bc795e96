//! Process lifecycle: fork, exec, exit, and the dlopen return of a held process.

use crate::{
    clock::header,
    emit::{count_failure, emit, BPF_RB_FORCE_WAKEUP},
    maps::{config, EVENTS, HOLD_ON_LOAD, TRACED},
    probes::field,
    thread::{current_ids, new_thread, traced_thread},
};
use aya_ebpf::{
    helpers::generated::bpf_send_signal,
    helpers::{
        bpf_get_current_task, bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel,
        bpf_probe_read_kernel_str_bytes,
    },
    macros::{tracepoint, uretprobe},
    programs::{RetProbeContext, TracePointContext},
    EbpfContext,
};
use tracer_common::{
    kind, EventHeader, ExecRecord, ExitRecord, ForkRecord, ProbeFailure, ProcessEndRecord,
};

const SIGSTOP: u32 = 19;

#[tracepoint]
pub fn sched_process_fork(ctx: TracePointContext) -> u32 {
    let _ = try_fork(&ctx);
    0
}

fn try_fork(ctx: &TracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    let child: u32 = field(ctx, c.fork_child_pid)?;
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

#[tracepoint]
pub fn sched_process_exec(ctx: TracePointContext) -> u32 {
    let _ = try_exec(&ctx);
    0
}

fn try_exec(ctx: &TracePointContext) -> Result<(), ()> {
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
    r.old_tid = field(ctx, c.exec_old_pid).unwrap_or(0);
    // __data_loc: low 16 bits offset from the record start, high 16 bits length.
    let loc: u32 = field(ctx, c.exec_filename).unwrap_or(0);
    let src = unsafe { (ctx.as_ptr() as *const u8).add((loc & 0xffff) as usize) };
    r.filename_len = match unsafe { bpf_probe_read_kernel_str_bytes(src, &mut r.filename) } {
        Ok(s) => s.len() as u32,
        Err(_) => 0,
    };
    // Wake the reader now: with hold_on_exec the process waits for it.
    rec.submit(BPF_RB_FORCE_WAKEUP);
    if c.hold_on_exec != 0 {
        // Userspace attaches the procedure probes to the new program, then sends SIGCONT.
        stop_current_process();
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
    stop_current_process();
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

/// Stops the current process (SIGSTOP) for userspace, which lets it go on; a signal the
/// kernel would not send is counted as `ProbeFailure::Signal`.
fn stop_current_process() {
    if unsafe { bpf_send_signal(SIGSTOP) } != 0 {
        count_failure(ProbeFailure::Signal);
    }
}

#[tracepoint]
pub fn sched_process_exit(ctx: TracePointContext) -> u32 {
    let _ = try_exit(&ctx);
    0
}

fn try_exit(ctx: &TracePointContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    let group_dead: u8 = field(ctx, c.exit_group_dead).unwrap_or(0);
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
    }
    Ok(())
}

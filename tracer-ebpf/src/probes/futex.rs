//! futex(2) enter and exit, with the user call site of a wait. Classic tracepoints, unlike
//! the scheduler's: the kernel calls them for futex only, while a raw `sys_enter` and
//! `sys_exit` program runs at every system call of every process. With uretprobes
//! returning through a system call (the `uretprobe` syscall of Linux 6.11+), that was
//! every probed MPI call too: 100-150 ns more per call of a traced `MPI_Comm_rank`.

use crate::{
    clock::header,
    emit::{emit, reserve, NO_FUTEX},
    maps::{config, STACK_WORDS},
    mem::{copy_of, copy_words, probe_user, MIN_POINTER},
    probes::field,
    scratch::SCAN_WORDS,
    thread::{current_ids, traced_thread},
};
use aya_ebpf::{
    bindings::{pt_regs, task_struct},
    helpers::bpf_probe_read_kernel,
    helpers::generated::{bpf_find_vma, bpf_get_current_task_btf, bpf_loop, bpf_task_pt_regs},
    macros::tracepoint,
    programs::TracePointContext,
};
use tracer_common::{held, kind, FutexPairRecord, FutexRecord, ThreadState, MAX_CALL_DEPTH};

static EMPTY_FUTEX: FutexRecord = NO_FUTEX;

#[tracepoint]
pub fn sys_enter_futex(ctx: TracePointContext) -> u32 {
    let _ = try_futex(&ctx, kind::FUTEX_ENTER);
    0
}

#[tracepoint]
pub fn sys_exit_futex(ctx: TracePointContext) -> u32 {
    let _ = try_futex(&ctx, kind::FUTEX_EXIT);
    0
}

fn try_futex(ctx: &TracePointContext, kind: u16) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    let c = config().ok_or(())?;
    // An enter still held at the exit: the call did not sleep (a wait that sleeps writes
    // its enter before its switch-out), and the two go out as one record.
    let paired = kind == tracer_common::kind::FUTEX_EXIT && thread.held == held::FUTEX;
    if paired {
        thread.held = held::NOTHING;
    }
    let h = header(thread, kind, 0, tgid, tid);
    if kind == tracer_common::kind::FUTEX_ENTER {
        let call_site = innermost_call_site(thread);
        // Built where it waits for the exit.
        let rec = &mut thread.held_futex;
        copy_words(rec, &EMPTY_FUTEX);
        rec.header = h;
        rec.uaddr = field(ctx, c.futex_uaddr)?;
        rec.op = field::<u64>(ctx, c.futex_op)? as u32;
        rec.val = field::<u64>(ctx, c.futex_val)? as u32;
        if tracer_common::futex_waits(rec.op) {
            // Inside a probed call (pthread_join, an MPI call), the program's line is
            // that call's: its return probe hid the return address from the scan.
            rec.site = match call_site {
                0 => futex_site(),
                site => site,
            };
        }
        thread.held = held::FUTEX;
        return Ok(());
    }
    let ret = field(ctx, c.futex_ret)?;
    if !paired {
        let mut rec = copy_of(&EMPTY_FUTEX);
        rec.header = h;
        rec.ret = ret;
        emit(&rec);
        return Ok(());
    }
    let Some(mut place) = reserve::<FutexPairRecord>() else {
        return Ok(());
    };
    let r = place.record();
    copy_words(&mut r.enter, &thread.held_futex);
    r.enter.header.kind = tracer_common::kind::FUTEX_PAIR;
    r.exit_ts_ns = h.ts_ns;
    r.exit_cpu_ns = h.cpu_ns;
    r.ret = ret;
    r.exit_cpu = h.cpu;
    r._reserved = 0;
    place.submit();
    Ok(())
}

/// Without the stack's mapping, words closer than this to the stack pointer are taken to
/// point into the stack (saved frame pointers, addresses of locals), not at code.
const STACK_SPAN: u64 = 1 << 20;
/// Without libc's mapping, return addresses closer than this to the syscall instruction
/// are taken to be in the same object (libc; its text is 1.3 MiB).
const LIBRARY_SPAN: u64 = 2 << 20;
/// Highest user-space address on x86-64 (4-level paging; 5-level is larger but rare).
const USER_TOP: u64 = 0x0000_7fff_ffff_ffff;

/// The call site of the innermost probed call the thread is in, if it read one (0 if none).
fn innermost_call_site(t: &ThreadState) -> u64 {
    let depth = t.depth as usize;
    if depth > MAX_CALL_DEPTH {
        return 0;
    }
    depth
        .checked_sub(1)
        .and_then(|i| t.frames.get(i))
        .map_or(0, |f| f.site)
}

/// A user code address for the futex syscall being entered. The syscall instruction sits
/// in libc, which says little; the first caller outside libc is what a user wants.
/// `bpf_get_stack(BPF_F_USER_STACK)` walks frame pointers, and Debian's libc has none: on
/// threads_pingpong no frame of 1,198 futex waits and wakes got out of libc. So the top
/// of the user stack is scanned instead: the first word that is outside libc's code
/// mapping and the thread's stack mapping (`bpf_find_vma`) and just after a call
/// instruction is taken as the return address into the caller (threads_pingpong: every
/// site on the line of the program's pthread call; docs/design-decisions.md). Bounded:
/// `SCAN_WORDS` words read at once, and one 8-byte read of code per candidate. Falls back
/// to the syscall instruction's address; 0 if the user registers cannot be read.
fn futex_site() -> u64 {
    let task = unsafe { bpf_get_current_task_btf() };
    let regs = unsafe { bpf_task_pt_regs(task) } as *const pt_regs;
    if regs.is_null() {
        return 0;
    }
    let Ok(ip) = (unsafe { bpf_probe_read_kernel(&(*regs).rip) }) else {
        return 0;
    };
    let Ok(sp) = (unsafe { bpf_probe_read_kernel(&(*regs).rsp) }) else {
        return ip;
    };
    // The code mapping holding the syscall instruction (libc's text) and the thread's
    // stack mapping; if the process's memory map is busy, everything within LIBRARY_SPAN
    // of the instruction and STACK_SPAN of the stack pointer.
    let libc = mapping_bounds(task, ip, LIBRARY_SPAN);
    let stack = mapping_bounds(task, sp, STACK_SPAN);
    let Some(buf) = STACK_WORDS.get_ptr_mut(0) else {
        return ip;
    };
    let words = unsafe { &mut *buf };
    // The whole window, or, near the top of a stack, its first eighth.
    let valid = if read_user_words(words, sp, SCAN_WORDS) {
        SCAN_WORDS
    } else if read_user_words(words, sp, SCAN_WORDS / 8) {
        SCAN_WORDS / 8
    } else {
        return ip;
    };
    // One word per `bpf_loop` call: the verifier checks the body once, where an unrolled
    // loop had it walk all `SCAN_WORDS` copies (57,000 instructions verified, the most
    // of any program, 0.3 s of every session's start).
    let mut scan = Scan {
        valid: valid as u64,
        libc,
        stack,
        found: 0,
    };
    unsafe {
        bpf_loop(
            SCAN_WORDS as u32,
            scan_word as *mut core::ffi::c_void,
            &mut scan as *mut Scan as *mut core::ffi::c_void,
            0,
        )
    };
    match scan.found {
        0 => ip,
        site => site,
    }
}

/// The stack scan's state between two calls of [`scan_word`].
#[repr(C)]
struct Scan {
    /// Words read from the stack into `STACK_WORDS`.
    valid: u64,
    /// libc's code mapping and the stack's mapping, `[start, end)`.
    libc: [u64; 2],
    stack: [u64; 2],
    /// The return address found; 0 while none is.
    found: u64,
}

/// `bpf_loop` callback: looks at word `index` of the scanned stack (`ctx` is the
/// [`Scan`]); 1 ends the loop (a return address found, or no word left), 0 goes on.
#[inline(never)]
extern "C" fn scan_word(index: u64, ctx: *mut core::ffi::c_void) -> i64 {
    let scan = unsafe { &mut *(ctx as *mut Scan) };
    if index >= scan.valid {
        return 1;
    }
    let Some(words) = STACK_WORDS.get_ptr(0) else {
        return 1;
    };
    let Some(&v) = unsafe { &*words }.get(index as usize) else {
        return 1;
    };
    if v < MIN_POINTER
        || v > USER_TOP
        || (v >= scan.libc[0] && v < scan.libc[1])
        || (v >= scan.stack[0] && v < scan.stack[1])
    {
        return 0;
    }
    if follows_call(v) {
        scan.found = v;
        return 1;
    }
    0
}

/// The bounds of the memory mapping of the current process that holds `addr`, or `addr`
/// ± `span` when the kernel could not look (its memory map lock was taken).
fn mapping_bounds(task: *mut task_struct, addr: u64, span: u64) -> [u64; 2] {
    let mut bounds: [u64; 2] = [addr.saturating_sub(span), addr.saturating_add(span + 1)];
    unsafe {
        bpf_find_vma(
            task,
            addr,
            vma_bounds as *mut core::ffi::c_void,
            &mut bounds as *mut [u64; 2] as *mut core::ffi::c_void,
            0,
        )
    };
    bounds
}

/// `bpf_find_vma` callback: copies the mapping's bounds (`vm_start`, `vm_end`, the first
/// two fields of `struct vm_area_struct`) to `out`.
#[inline(never)]
extern "C" fn vma_bounds(
    _task: *mut core::ffi::c_void,
    vma: *mut core::ffi::c_void,
    out: *mut core::ffi::c_void,
) -> i64 {
    if let Ok(bounds) = unsafe { bpf_probe_read_kernel(vma as *const [u64; 2]) } {
        unsafe { *(out as *mut [u64; 2]) = bounds };
    }
    0
}

fn read_user_words(words: &mut [u64; SCAN_WORDS], sp: u64, n: usize) -> bool {
    let dst = words.as_mut_ptr() as *mut core::ffi::c_void;
    let ret = unsafe {
        aya_ebpf::helpers::generated::bpf_probe_read_user(
            dst,
            (n * 8) as u32,
            sp as *const core::ffi::c_void,
        )
    };
    ret == 0
}

/// Whether the instruction before `ret` is a call (x86-64): `call rel32`, or `call` with a
/// register or memory operand (opcode FF /2) of 2, 3, 4, 6 or 7 bytes.
fn follows_call(ret: u64) -> bool {
    let Some(code) = probe_user::<[u8; 8]>(ret - 8) else {
        return false;
    };
    // FF /2: reg field of ModRM is 2; `len` is the instruction length, `m` its ModRM byte.
    let ff2 = |len: usize, mod_bits: u8| {
        let m = code[8 - len + 1];
        code[8 - len] == 0xff && (m >> 3) & 7 == 2 && m >> 6 == mod_bits
    };
    code[3] == 0xe8
        || ff2(2, 3)
        || ff2(3, 1)
        || (ff2(4, 1) && code[5] & 7 == 4)
        || (ff2(6, 0) && code[3] & 7 == 5)
        || ff2(6, 2)
        || (ff2(7, 2) && code[2] & 7 == 4)
}

//! The sampler: a perf-event program run by a software CPU-clock event on every CPU
//! (`tracer record --sample HZ`). For a traced thread it copies the thread's user
//! registers and the top of its user stack into a `RawSampleRecord`, stamped with the
//! thread's CPU clock like its other records; `tracer record` unwinds it with the
//! binaries' unwind tables (docs/sampling.md). Other threads cost a lookup.

use crate::{
    clock::{cpu_clock, header},
    emit::reserve,
    thread::{current_ids, traced_thread},
};
use aya_ebpf::{
    bindings::pt_regs,
    helpers::generated::{bpf_get_current_task_btf, bpf_probe_read_user, bpf_task_pt_regs},
    helpers::{bpf_get_smp_processor_id, bpf_ktime_get_ns, bpf_probe_read_kernel},
    macros::perf_event,
    programs::PerfEventContext,
};
use core::ffi::c_void;
use tracer_common::{
    held, kind, EventHeader, RawSampleRecord, ThreadState, MAX_CALL_DEPTH, MAX_PROCEDURE_DEPTH,
    SAMPLE_STACK_BYTES,
};

const PAGE: u64 = 4096;

#[perf_event]
pub fn sampler(ctx: PerfEventContext) -> u32 {
    let _ = try_sample(&ctx);
    0
}

fn try_sample(ctx: &PerfEventContext) -> Result<(), ()> {
    let (tgid, tid) = current_ids();
    let Some(thread) = traced_thread(tgid, tid) else {
        return Ok(());
    };
    // Where the tick interrupted the thread: in user mode (the low bits of the saved
    // code segment are the privilege level, 3), no program of ours can be running for
    // it; in the kernel, one may be (a uprobe_multi program runs without the recursion
    // guard that keeps perf-event programs out of the others), halfway through the
    // thread's held call entry.
    let cs = unsafe { bpf_probe_read_kernel(&(*ctx.ctx).regs.cs) }.unwrap_or(0);
    let in_user_mode = cs & 3 == 3;
    // A full ring is counted by `reserve`.
    let Some(mut place) = reserve::<RawSampleRecord>() else {
        return Ok(());
    };
    let r = place.record();
    r.header = if in_user_mode || thread.held == held::NOTHING {
        // Writes the entry the thread holds back first, so its records stay in order.
        header(thread, kind::RAW_SAMPLE, 0, tgid, tid)
    } else {
        // The held entry is left alone (it may be half built): it goes out later,
        // after this sample, with its own earlier time (docs/sampling.md, "Limits").
        let now = unsafe { bpf_ktime_get_ns() };
        EventHeader {
            ts_ns: now,
            cpu_ns: cpu_clock(&mut thread.clock, tgid, now),
            tgid,
            tid,
            kind: kind::RAW_SAMPLE,
            call: 0,
            cpu: unsafe { bpf_get_smp_processor_id() },
        }
    };
    r._reserved = 0;
    // The user registers, also when the sample interrupted the thread in the kernel
    // (a system call, a page fault), where the perf context's registers are the
    // kernel's: the entry code saved the user ones at the top of the thread's kernel
    // stack, which is what `bpf_task_pt_regs` points at.
    let regs = unsafe { bpf_task_pt_regs(bpf_get_current_task_btf()) } as *const pt_regs;
    let user = if regs.is_null() {
        None
    } else {
        unsafe {
            match (
                bpf_probe_read_kernel(&(*regs).rip),
                bpf_probe_read_kernel(&(*regs).rsp),
                bpf_probe_read_kernel(&(*regs).rbp),
            ) {
                (Ok(ip), Ok(sp), Ok(bp)) => Some((ip, sp, bp)),
                _ => None,
            }
        }
    };
    // No user state (a thread in exec or exit, between address spaces): the record
    // still goes, with no stack, and counts as a NO_USER_STATE sample in the summary
    // rather than as a failed read (which warns of unset message fields).
    let Some((ip, sp, bp)) = user else {
        (r.ip, r.sp, r.bp, r.stack_len) = (0, 0, 0, 0);
        place.submit();
        return Ok(());
    };
    (r.ip, r.sp, r.bp) = (ip, sp, bp);
    r.stack_len = copy_stack(&mut r.stack, sp);
    restore_return_addresses(&mut r.stack, sp, r.stack_len, thread);
    place.submit();
    Ok(())
}

/// Puts back, in the copied stack, the return address of every probed call and selected
/// procedure the thread is in: their return probes replaced each with the address of the
/// kernel's trampoline (in the `[uprobes]` page), where the unwinder would stop. Each
/// call's entry kept the address (`CallFrame::site`, read at every entry while the
/// sampler runs) and where it was (`CallFrame::sp`); each procedure's, in
/// `ThreadState::procedures`.
#[inline(always)]
fn restore_return_addresses(
    stack: &mut [u8; SAMPLE_STACK_BYTES],
    sp: u64,
    len: u32,
    thread: &ThreadState,
) {
    for i in 0..MAX_CALL_DEPTH {
        if i as u32 >= thread.depth {
            break;
        }
        let Some(frame) = thread.frames.get(i) else {
            break;
        };
        put_back(stack, sp, len, frame.sp, frame.site);
    }
    for i in 0..MAX_PROCEDURE_DEPTH {
        if i as u32 >= thread.procedure_depth {
            break;
        }
        let Some(frame) = thread.procedures.get(i) else {
            break;
        };
        put_back(stack, sp, len, frame.sp, frame.site);
    }
}

/// Writes return address `site` where it was on the stack (`at_sp`) into the copy of the
/// stack from `sp` (`len` bytes of it read).
#[inline(always)]
fn put_back(stack: &mut [u8; SAMPLE_STACK_BYTES], sp: u64, len: u32, at_sp: u64, site: u64) {
    if site == 0 || at_sp < sp {
        return;
    }
    let at = at_sp - sp;
    if at + 8 > u64::from(len) || at > (SAMPLE_STACK_BYTES - 8) as u64 {
        return;
    }
    // Masked too, so the verifier sees the write inside the record.
    let at = (at as usize) & (SAMPLE_STACK_BYTES - 1);
    if let Some(slot) = stack.get_mut(at..at + 8) {
        slot.copy_from_slice(&site.to_le_bytes());
    }
}

/// Copies up to `SAMPLE_STACK_BYTES` of user stack from `sp` up into `stack`; returns the
/// bytes copied. One read in the common case. Near the stack's top the window crosses
/// the end of its mapping and that read fails: then what lies before the end is read by
/// pages (a mapping ends at a page boundary): the rest of `sp`'s page, then whole pages
/// up to the first that fails, the mapping's end. The bytes past the last whole page
/// that fits in the window are not read then: they share a page with the window's end,
/// and had that page been readable, so would the whole window (every page between `sp`
/// and a stack's top holds frames, so is resident).
#[inline(always)]
fn copy_stack(stack: &mut [u8; SAMPLE_STACK_BYTES], sp: u64) -> u32 {
    let base = stack.as_mut_ptr();
    let whole = unsafe {
        bpf_probe_read_user(
            base as *mut c_void,
            SAMPLE_STACK_BYTES as u32,
            sp as *const c_void,
        )
    };
    if whole == 0 {
        return SAMPLE_STACK_BYTES as u32;
    }
    // 1..=PAGE bytes to the end of sp's page: the verifier sees the bound from the mask.
    let first = PAGE - (sp & (PAGE - 1));
    if first > PAGE {
        return 0;
    }
    let read =
        unsafe { bpf_probe_read_user(base as *mut c_void, first as u32, sp as *const c_void) };
    if read != 0 {
        return 0;
    }
    let mut copied = first;
    // At most the window's whole pages after the first (a bounded loop).
    for _ in 0..SAMPLE_STACK_BYTES as u64 / PAGE {
        if copied > SAMPLE_STACK_BYTES as u64 - PAGE {
            break;
        }
        let next = unsafe {
            bpf_probe_read_user(
                base.add(copied as usize) as *mut c_void,
                PAGE as u32,
                (sp + copied) as *const c_void,
            )
        };
        if next != 0 {
            break;
        }
        copied += PAGE;
    }
    copied as u32
}

//! MPI, PVM and pthread calls: one entry and one exit program for every call; the cookie
//! says which call and library family, the layout table says where each argument is.

use super::uprobe_twins;
use crate::{
    clock::header,
    emit::{emit, reserve, UNSET_CALL},
    maps::{config, count_failure, FLAVORS, LAYOUTS},
    mem::{copy_words, read_user},
    probes::{
        arrays::{
            emit_handle_array, emit_tested_array, read_chunk, stage_array, write_array, AfterCall,
        },
        status::{call_result, ExitSeen},
    },
    scratch::{array_kind, ArrayJob},
    thread::{current_ids, known_thread, traced_thread, uprobe_thread, EMPTY_FRAME},
};
use aya_ebpf::{
    bindings::pt_regs,
    helpers::generated::bpf_get_attach_cookie,
    programs::{ProbeContext, RetProbeContext},
    EbpfContext,
};
use tracer_common::{
    array_when, dtype_mode, flavor, held, kind, status_mode, CallFrame, CallPairRecord, CallRecord,
    CallReturnRecord, EventHeader, FlavorConfig, ProbeFailure, ThreadState, UnwoundRecord, ARG_IP,
    ARRAY_CHUNK, MAX_CALL_DEPTH, NO_ARG, UNSET32,
};

/// `*rec = CallRecord::unset(h)`, without a `memset` ([`copy_words`]).
#[inline(always)]
fn start_call_record(rec: &mut CallRecord, h: EventHeader) {
    copy_words(rec, &UNSET_CALL);
    rec.header = h;
}

fn arg(regs: &pt_regs, index: u8) -> u64 {
    match index {
        0 => regs.rdi,
        1 => regs.rsi,
        2 => regs.rdx,
        3 => regs.rcx,
        4 => regs.r8,
        5 => regs.r9,
        // x86-64 System V: at entry rsp points at the return address, then arguments 7..
        6..=13 => read_user::<u64>(regs.rsp + 8 * (index as u64 - 5)).unwrap_or(0),
        _ => 0,
    }
}

fn int_arg(regs: &pt_regs, index: u8) -> i32 {
    if index == NO_ARG {
        UNSET32
    } else {
        arg(regs, index) as i32
    }
}

fn handle_value(raw: u64, flavor: &FlavorConfig) -> u64 {
    if flavor.handle_size == 4 {
        raw & 0xffff_ffff
    } else {
        raw
    }
}

fn read_handle(addr: u64, flavor: &FlavorConfig) -> u64 {
    if flavor.handle_size == 4 {
        read_user::<u32>(addr).map(|v| v as u64).unwrap_or(0)
    } else {
        read_user::<u64>(addr).unwrap_or(0)
    }
}

fn element_size(dtype: u64, flavor: &FlavorConfig) -> i32 {
    match flavor.dtype_mode {
        dtype_mode::POINTER_TO_SIZE => read_user::<u64>(dtype + flavor.dtype_size_off as u64)
            .map(|s| s as i32)
            .unwrap_or(UNSET32),
        // Builtin MPICH handles (kind bits 30-31 == 01) carry the size in bits 8-15.
        dtype_mode::MPICH_HANDLE if (dtype as u32) >> 30 == 1 => ((dtype >> 8) & 0xff) as i32,
        dtype_mode::PVM_CODE => match dtype as u32 {
            1 => 1,
            2 | 9 => 2,
            3 | 4 | 10 => 4,
            5 | 6 | 8 | 11 => 8,
            7 => 16,
            _ => UNSET32,
        },
        _ => UNSET32,
    }
}

uprobe_twins!(uprobe call_enter, call_enter_m => call_enter_body);

#[inline(always)]
fn call_enter_body(ctx: &ProbeContext) {
    if try_call_enter(ctx) == Ok(AfterCall::WriteArray) {
        write_array(ctx);
    }
}

fn try_call_enter(ctx: &ProbeContext) -> Result<AfterCall, ()> {
    let (tgid, tid) = current_ids();
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let call_id = cookie as u16 & 0xff;
    let flavor_id = (cookie >> 16) as u8;
    // An MPI/PVM call makes its process traced in system-wide mode; a pthread call (the
    // thread creation and join probes fire in every process) never does.
    let thread = if flavor_id == flavor::GLIBC_PTHREAD {
        traced_thread(tgid, tid)
    } else {
        uprobe_thread(tgid, tid)
    };
    let Some(thread) = thread else {
        return Ok(AfterCall::Done);
    };
    let layout = LAYOUTS.get(call_id as u32).ok_or(())?;
    let flavor = FLAVORS.get(flavor_id as u32).ok_or(())?;
    let regs = unsafe { &*ctx.regs };
    // The uprobe fires with rip at the symbol, so rip minus the symbol's address in the
    // file is where the library is loaded.
    let bias = regs.rip.wrapping_sub(cookie >> 32);

    // A call entered above an open call's return address is made from a frame that
    // call has left: it returned without its exit probe. At the very same address it
    // may be the open call's tail call (a jump to another probed function, whose return
    // address is then still the return probe's trampoline), so only a call from the
    // open call's own call site (its loop's next turn) shows that it returned.
    if thread.depth > 0 {
        let return_address = read_user::<u64>(regs.rsp).unwrap_or(0);
        unwind_returned(
            thread,
            |f| f.sp < regs.rsp || (f.sp == regs.rsp && f.site != 0 && f.site == return_address),
            tgid,
            tid,
        );
    }
    // Call records carry the flavor in the high byte of `call`.
    let h = header(
        thread,
        kind::CALL_ENTER,
        call_id | ((flavor_id as u16) << 8),
        tgid,
        tid,
    );
    let count = int_arg(regs, layout.count);
    // A test of requests keeps their handles until its exit, which writes them only if
    // one completed (`array_when`); then no record comes between its entry and exit.
    let tests = layout.array_when != array_when::ENTRY
        && layout.array != NO_ARG
        && count > 0
        && count <= ARRAY_CHUNK as i32;
    // A call that cannot block is built where it waits for its exit (`held_entry`).
    let hold = tests
        || (layout.cannot_block != 0
            && layout.array == NO_ARG
            && layout.peer2 == NO_ARG
            && layout.tag2 == NO_ARG);
    let mut local = UNSET_CALL;
    let rec = if hold {
        start_call_record(&mut thread.held_entry, h);
        &mut thread.held_entry
    } else {
        local.header = h;
        &mut local
    };
    rec.peer = int_arg(regs, layout.peer);
    rec.tag = int_arg(regs, layout.tag);
    rec.peer2 = int_arg(regs, layout.peer2);
    rec.tag2 = int_arg(regs, layout.tag2);
    rec.count = count;
    if layout.comm == ARG_IP {
        rec.comm = regs.rip;
    } else if layout.comm != NO_ARG {
        rec.comm = handle_value(arg(regs, layout.comm), flavor);
    }
    if layout.dtype != NO_ARG {
        rec.elem_size = element_size(arg(regs, layout.dtype), flavor);
        if rec.elem_size != UNSET32 && rec.count != UNSET32 {
            rec.bytes = rec.elem_size as i64 * rec.count as i64;
        }
    }
    if layout.handle_in != NO_ARG {
        let a = arg(regs, layout.handle_in);
        // pthread calls: the lock's address is its identity; MPI: a pointer to a request.
        rec.handle = if flavor.handle_by_value != 0 {
            a
        } else if layout.handle_in_by_value != 0 {
            handle_value(a, flavor)
        } else {
            read_handle(a, flavor)
        };
    } else if layout.want_bias != 0 {
        rec.handle = bias;
    }
    let header = rec.header;
    let mut site = 0;
    if hold {
        // Written with the exit, unless another record of the thread comes first.
        thread.held = held::CALL;
        // The record's site comes with the exit; the sampler needs it before (it puts
        // it back where the return probe's trampoline replaced it).
        if matches!(config(), Some(c) if c.sampling != 0) {
            site = read_user::<u64>(regs.rsp).unwrap_or(0);
        }
    } else {
        // At the function's first instruction the return address is on top of the stack.
        // The exit record has it for free (the kernel puts it back in rip before the
        // return probe), but a call that can block may never return: one that hangs
        // keeps its site this way.
        site = read_user::<u64>(regs.rsp).unwrap_or(0);
        rec.site = site;
        emit(rec);
    }

    let mut frame = EMPTY_FRAME;
    frame.sp = regs.rsp;
    frame.call = call_id;
    frame.flavor = flavor_id as u16;
    frame.count = count;
    frame.bias = bias;
    frame.site = site;
    if layout.handle_out != NO_ARG {
        frame.handle_out = arg(regs, layout.handle_out);
    }
    if layout.out != NO_ARG {
        frame.out = arg(regs, layout.out);
    }
    if layout.status != NO_ARG {
        frame.status[0] = arg(regs, layout.status);
        if layout.status_mode == status_mode::INT_POINTERS {
            frame.status[1] = arg(regs, layout.status + 1);
            frame.status[2] = arg(regs, layout.status + 2);
        }
    }
    push_frame(thread, &frame);
    if thread.tested_frame == thread.depth {
        // Kept by a test at this depth whose exit never came (a longjmp out of it).
        thread.tested_frame = 0;
    }
    let elem = if layout.array_elem == 0 {
        flavor.handle_size
    } else {
        layout.array_elem as u32
    };
    if tests {
        thread.tested_frame = thread.depth;
        thread.tested_total = count as u32;
        read_chunk(
            &mut thread.tested,
            arg(regs, layout.array),
            count as u32,
            elem,
        );
        return Ok(AfterCall::Done);
    }
    if layout.array != NO_ARG && layout.array_unsized != 0 {
        return Ok(stage_array(&ArrayJob {
            header,
            base: arg(regs, layout.array),
            total: ARRAY_CHUNK as u32,
            kind: array_kind::UNSIZED_INTS,
            flavor: flavor_id as u32,
            _pad: 0,
        }));
    }
    if layout.array != NO_ARG && count > 0 {
        // Group_range_incl/excl: `count` triples of ints.
        let per_count = if layout.array_per_count == 0 {
            1
        } else {
            layout.array_per_count as u32
        };
        return Ok(stage_array(&ArrayJob {
            header,
            base: arg(regs, layout.array),
            total: (count as u32).saturating_mul(per_count),
            kind: if elem == 4 {
                array_kind::HANDLES_4
            } else {
                array_kind::HANDLES_8
            },
            flavor: flavor_id as u32,
            _pad: 0,
        }));
    }
    Ok(AfterCall::Done)
}

/// Drops the thread's innermost open calls for which `returned` holds (they returned
/// without their exit probe: a return probe attached while the thread was inside the
/// call, a longjmp out of it) and says so in one `CALLS_UNWOUND` record, so that the
/// analysis drops them too; each is counted as `ProbeFailure::ExitMissed`. Without this,
/// every such call stayed on the thread's stack for good, until every later exit was
/// past `MAX_CALL_DEPTH` and not written (`call_too_deep`). Frames past the depth limit
/// have no stack pointer kept: the unwinding stops at them.
fn unwind_returned(
    t: &mut ThreadState,
    returned: impl Fn(&CallFrame) -> bool,
    tgid: u32,
    tid: u32,
) {
    let mut calls = 0u32;
    let mut innermost = 0u16;
    for _ in 0..MAX_CALL_DEPTH {
        // `get`, not indexing: a bounds check's panic is code the verifier refuses.
        let Some(top) = t.frames.get((t.depth as usize).wrapping_sub(1)) else {
            break; // no open call, or past the depth limit
        };
        if top.sp == 0 || !returned(top) {
            break;
        }
        if calls == 0 {
            innermost = top.call | (top.flavor << 8);
        }
        t.depth -= 1;
        calls += 1;
        count_failure(ProbeFailure::ExitMissed);
    }
    if calls == 0 {
        return;
    }
    if t.tested_frame > t.depth {
        t.tested_frame = 0;
    }
    emit(&UnwoundRecord {
        header: header(t, kind::CALLS_UNWOUND, innermost, tgid, tid),
        calls,
        _reserved: 0,
    });
}

fn push_frame(t: &mut ThreadState, frame: &CallFrame) {
    let depth = t.depth as usize;
    if depth < MAX_CALL_DEPTH {
        t.frames[depth] = *frame;
    } else {
        // No frame for its exit, which then writes nothing.
        count_failure(ProbeFailure::CallTooDeep);
    }
    // Count frames beyond MAX_CALL_DEPTH too, so the matching exits pop them.
    t.depth += 1;
}

fn pop_frame(t: &mut ThreadState) -> Option<CallFrame> {
    if t.depth == 0 {
        return None;
    }
    t.depth -= 1;
    let depth = t.depth as usize;
    if depth < MAX_CALL_DEPTH {
        Some(t.frames[depth])
    } else {
        None
    }
}

uprobe_twins!(uretprobe call_exit, call_exit_m => call_exit_body);

#[inline(always)]
fn call_exit_body(ctx: &RetProbeContext) {
    if try_call_exit(ctx) == Ok(AfterCall::WriteArray) {
        write_array(ctx);
    }
}

fn try_call_exit(ctx: &RetProbeContext) -> Result<AfterCall, ()> {
    let (tgid, tid) = current_ids();
    // Only threads of traced processes have frames (the entry probe admitted them), so
    // the thread's state is the filter: no lookup in TRACED.
    let thread = known_thread(tid).ok_or(())?;
    let cookie = unsafe { bpf_get_attach_cookie(ctx.as_ptr()) };
    let call_id = cookie as u16 & 0xff;
    // Open calls inside this one whose return address is below the stack pointer now
    // have returned without their exit probe (this call's own frame is just below it
    // too, and has its id).
    let rsp = unsafe { (*ctx.regs).rsp };
    unwind_returned(thread, |f| f.call != call_id && f.sp < rsp, tgid, tid);
    // An exit whose entry was never seen (its return probe went in while the thread was
    // inside the call, before the entry probe did) has no frame: the open frame, if any,
    // is a caller's (another call, or above this call's return address), and stays.
    if let Some(top) = thread.frames.get((thread.depth as usize).wrapping_sub(1)) {
        if top.call != call_id || (top.sp != 0 && top.sp >= rsp) {
            return Err(());
        }
    }
    let frame = pop_frame(thread).ok_or(())?;
    if frame.call != call_id {
        return Err(());
    }
    let layout = LAYOUTS.get(call_id as u32).ok_or(())?;
    let flavor = FLAVORS.get(frame.flavor as u32).ok_or(())?;
    let ret: u64 = ctx.ret();
    // The kernel put the return address back in rip before running this program.
    let site = unsafe { (*ctx.regs).rip };
    // A test of requests whose handles the entry kept: whether it completed one.
    let tested = layout.array_when != array_when::ENTRY
        && thread.tested_frame != 0
        && thread.tested_frame == thread.depth + 1;
    // The int the call wrote through `out` (a flag, a count or an index), read once for
    // the test's completion, the indices' count and the record.
    let out = read_user::<i32>(frame.out).unwrap_or(UNSET32);
    let mut completed = false;
    if tested {
        thread.tested_frame = 0;
        completed = if layout.array_when == array_when::IF_OUT_NOT_NEGATIVE {
            out >= 0
        } else {
            out > 0
        };
    }
    // Nothing of the thread was written since this call's entry was held: the two go out
    // as one record (taken out of `thread` first, or `header` would write it alone). A
    // test that completed a request writes its handles in between.
    let paired =
        thread.held == held::CALL && thread.held_entry.header.call & 0xff == call_id && !completed;
    if paired {
        thread.held = held::NOTHING;
    }
    let h = header(
        thread,
        kind::CALL_EXIT,
        call_id | (frame.flavor << 8),
        tgid,
        tid,
    );
    let seen = ExitSeen {
        ret,
        site,
        cpu: h.cpu,
        out,
    };
    if paired {
        // Built in place, field by field ([`copy_words`]).
        let Some(mut place) = reserve::<CallPairRecord>() else {
            return Ok(AfterCall::Done);
        };
        let r = place.record();
        let e = &thread.held_entry;
        copy_words(&mut r.header, &e.header);
        r.header.kind = kind::CALL_PAIR;
        r.comm = e.comm;
        r.handle = e.handle;
        r.bytes = e.bytes;
        r.peer = e.peer;
        r.tag = e.tag;
        r.count = e.count;
        r.elem_size = e.elem_size;
        r.exit_ts_ns = h.ts_ns;
        r.exit_cpu_ns = h.cpu_ns;
        call_result(&mut r.result, &seen, &frame, layout, flavor);
        place.submit();
        return Ok(AfterCall::Done);
    }
    // Elements of the tested requests' array, which the indices follow.
    let mut tested_written = 0;
    if completed {
        emit_tested_array(&h, thread);
        tested_written = thread.tested_total;
    }
    if layout.status_mode == status_mode::INDEX_ARRAY {
        // Waitsome/Testsome: the indices of the requests that completed, written before
        // the exit so that userspace reads them while the call is still open.
        if out > 0 {
            emit_handle_array(&h, frame.status[0], out as u32, 4, tested_written);
        }
    }
    let Some(mut place) = reserve::<CallReturnRecord>() else {
        return Ok(AfterCall::Done);
    };
    let r = place.record();
    r.header = h;
    r.header.kind = kind::CALL_RETURN;
    call_result(&mut r.result, &seen, &frame, layout, flavor);
    place.submit();
    // A test that completed nothing wrote no status.
    if layout.status_mode == status_mode::MPI_STATUS_ARRAY
        && frame.count > 0
        && (completed || !tested)
    {
        return Ok(stage_array(&ArrayJob {
            header: h,
            base: frame.status[0],
            total: frame.count as u32,
            kind: array_kind::STATUSES,
            flavor: frame.flavor as u32,
            _pad: 0,
        }));
    }
    Ok(AfterCall::Done)
}

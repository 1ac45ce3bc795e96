//! Selected procedures (--func): the cookie is the probe id. While the sampler runs, each
//! procedure in progress keeps its return address for it (`ThreadState::procedures`).

use super::uprobe_twins;
use crate::{
    clock::header,
    emit::emit,
    maps::config,
    mem::read_user,
    thread::{current_ids, uprobe_thread},
};
use aya_ebpf::{
    bindings::pt_regs,
    helpers::generated::bpf_get_attach_cookie,
    programs::{ProbeContext, RetProbeContext},
    EbpfContext,
};
use tracer_common::{kind, ProcedureFrame, ThreadState, MAX_PROCEDURE_DEPTH};

uprobe_twins!(uprobe func_enter, func_enter_m => func_enter_body);
uprobe_twins!(uretprobe func_exit, func_exit_m => func_exit_body);

fn func_enter_body(ctx: &ProbeContext) {
    func_event(ctx.as_ptr(), unsafe { &*ctx.regs }, kind::FUNC_ENTER);
}

fn func_exit_body(ctx: &RetProbeContext) {
    func_event(ctx.as_ptr(), unsafe { &*ctx.regs }, kind::FUNC_EXIT);
}

fn func_event(ctx: *mut core::ffi::c_void, regs: &pt_regs, kind: u16) {
    let (tgid, tid) = current_ids();
    let Some(thread) = uprobe_thread(tgid, tid) else {
        return;
    };
    let probe = unsafe { bpf_get_attach_cookie(ctx) } as u16;
    emit(&header(thread, kind, probe, tgid, tid));
    if matches!(config(), Some(c) if c.sampling != 0) {
        keep_return_address(thread, regs, kind == kind::FUNC_ENTER);
    }
}

/// Keeps the procedure frames of the procedures still in progress: at an entry (the
/// return address on top of the stack), those entered at or below the stack pointer have
/// returned (without their exit: a longjmp), and the new one is pushed; at an exit
/// (the return address popped), those below the stack pointer have returned.
// Every index is a loop constant: an index computed from the depth, even checked, can
// reach the verifier as an unbounded offset (the compiler checks one register and
// indexes with another).
#[inline(always)]
fn keep_return_address(thread: &mut ThreadState, regs: &pt_regs, entry: bool) {
    let sp = regs.rsp;
    for i in (0..MAX_PROCEDURE_DEPTH).rev() {
        if i as u32 >= thread.procedure_depth {
            continue;
        }
        let Some(innermost) = thread.procedures.get(i) else {
            break;
        };
        let returned = if entry {
            innermost.sp <= sp
        } else {
            innermost.sp < sp
        };
        if !returned {
            break;
        }
        thread.procedure_depth = i as u32;
    }
    if !entry {
        return;
    }
    for i in 0..MAX_PROCEDURE_DEPTH {
        if i as u32 != thread.procedure_depth {
            continue;
        }
        if let Some(frame) = thread.procedures.get_mut(i) {
            *frame = ProcedureFrame {
                site: read_user::<u64>(sp).unwrap_or(0),
                sp,
            };
            thread.procedure_depth += 1;
        }
        break;
    }
}

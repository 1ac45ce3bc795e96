//! Selected procedures (--func): the cookie is the probe id.

use crate::{
    clock::header,
    emit::emit,
    thread::{current_ids, uprobe_thread},
};
use aya_ebpf::{
    helpers::generated::bpf_get_attach_cookie,
    macros::{uprobe, uretprobe},
    programs::{ProbeContext, RetProbeContext},
    EbpfContext,
};
use tracer_common::kind;

#[uprobe]
pub fn func_enter(ctx: ProbeContext) -> u32 {
    func_event(ctx.as_ptr(), kind::FUNC_ENTER);
    0
}

#[uretprobe]
pub fn func_exit(ctx: RetProbeContext) -> u32 {
    func_event(ctx.as_ptr(), kind::FUNC_EXIT);
    0
}

fn func_event(ctx: *mut core::ffi::c_void, kind: u16) {
    let (tgid, tid) = current_ids();
    let Some(thread) = uprobe_thread(tgid, tid) else {
        return;
    };
    let probe = unsafe { bpf_get_attach_cookie(ctx) } as u16;
    emit(&header(thread, kind, probe, tgid, tid));
}

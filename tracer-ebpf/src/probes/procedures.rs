//! Selected procedures (--func): the cookie is the probe id.

use super::uprobe_twins;
use crate::{
    clock::header,
    emit::emit,
    thread::{current_ids, uprobe_thread},
};
use aya_ebpf::{
    helpers::generated::bpf_get_attach_cookie,
    programs::{ProbeContext, RetProbeContext},
    EbpfContext,
};
use tracer_common::kind;

uprobe_twins!(uprobe func_enter, func_enter_m => func_enter_body);
uprobe_twins!(uretprobe func_exit, func_exit_m => func_exit_body);

fn func_enter_body(ctx: &ProbeContext) {
    func_event(ctx.as_ptr(), kind::FUNC_ENTER);
}

fn func_exit_body(ctx: &RetProbeContext) {
    func_event(ctx.as_ptr(), kind::FUNC_EXIT);
}

fn func_event(ctx: *mut core::ffi::c_void, kind: u16) {
    let (tgid, tid) = current_ids();
    let Some(thread) = uprobe_thread(tgid, tid) else {
        return;
    };
    let probe = unsafe { bpf_get_attach_cookie(ctx) } as u16;
    emit(&header(thread, kind, probe, tgid, tid));
}

//! The record decoder on any bytes: as a recording's record, as a ring record (the short
//! forms expanded first) and as a probe's slot; then what the commands print of one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_analysis::calls;
use tracer_analysis::records::{self, Record};

fn look(r: &Record) {
    let h = r.header();
    let _ = records::kind_name(h.kind);
    let call = calls::split_call_field(h.call).id;
    let _ = calls::name(call);
    let _ = calls::spec(call);
    if let Record::Exec(e) = r {
        let _ = records::exec_filename(e);
    }
    assert_eq!(records::decode(r.as_bytes()).as_ref(), Ok(r));
}

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = records::decode(data) {
        look(&r);
    }
    let _ = records::unpair(data, |raw| {
        if let Ok(r) = records::decode(raw) {
            look(&r);
        }
        Ok::<(), ()>(())
    });
    if let Ok(r) = records::decode(records::in_slot(data)) {
        look(&r);
    }
});

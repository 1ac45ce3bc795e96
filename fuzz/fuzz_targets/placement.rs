//! The `--placement` parser on any text: a spec or a typed error; a spec it accepts
//! validates and places processes without a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_analysis::placement::PlacementSpec;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(spec) = text.parse::<PlacementSpec>() {
        let _ = spec.validate();
        let _ = format!("{spec:?}");
    }
});

//! The `--scale PROCEDURE=FACTOR` parser on any text, against a recording's procedure
//! names: an edit with a finite factor >= 0, or a typed error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_analysis::whatif::parse_scale;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let procedures = ["compute".to_string(), "a=b".to_string(), String::new()];
    for known in [&procedures[..], &[]] {
        if let Ok(scale) = parse_scale(text, known) {
            assert!(scale.factor.is_finite() && scale.factor >= 0.0);
            assert!(scale.procedure < known.len());
        }
    }
});

//! The `--scale PROCEDURE=FACTOR` parser on any text, against a recording's procedure
//! names and symbols: an edit with a finite factor >= 0, or a typed error.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_analysis::whatif::parse_scale;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let procedures = ["compute(int)".to_string(), "a=b".to_string(), String::new()];
    let symbols = ["_Z7computei".to_string(), "a=b".to_string(), String::new()];
    for (known, known_symbols) in [(&procedures[..], &symbols[..]), (&[], &[])] {
        if let Ok(scale) = parse_scale(text, known, known_symbols) {
            assert!(scale.factor.is_finite() && scale.factor >= 0.0);
            assert!(scale.procedure < known.len());
        }
    }
});

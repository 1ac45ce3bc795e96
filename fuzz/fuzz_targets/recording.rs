//! The recording reader on any bytes, as they are and with their chunks' checksums made
//! right (`seal`): it reads what it can and ends with a typed error or a condition, never
//! a panic. Both ways of reading run: decoding every record, and the skim
//! `condition_of` makes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_analysis::recording::{condition_of_bytes, RecordingReader};

fuzz_target!(|data: &[u8]| {
    for bytes in [data.to_vec(), tracer_fuzz::seal(data)] {
        if let Ok(mut reader) = RecordingReader::from_bytes(bytes.clone()) {
            while let Ok(Some(_)) = reader.next_item() {}
            let _ = reader.condition().messages();
        }
        if let Ok(condition) = condition_of_bytes(bytes) {
            let _ = condition.messages();
        }
    }
});

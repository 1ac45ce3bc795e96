//! The network table parser on any text: a table or a line-numbered error; a table it
//! accepts answers every latency and reads back from its own CSV unchanged.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tracer_analysis::network::{NetworkTable, Scope};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(table) = NetworkTable::parse(text) else {
        return;
    };
    for scope in [Scope::Local, Scope::Remote] {
        let sizes: Vec<u64> = table.rows(scope).map(|r| r.bytes).collect();
        for bytes in sizes
            .iter()
            .flat_map(|&b| [b, b.saturating_add(1), b.saturating_sub(1), b / 2])
            .chain([0, 1, 4096, u64::MAX / 2, u64::MAX])
        {
            let _ = table.latency_ns(scope, bytes);
        }
    }
    let again = NetworkTable::parse(&table.to_csv()).expect("a table reads its own CSV");
    assert_eq!(
        again.rows(Scope::Local).collect::<Vec<_>>(),
        table.rows(Scope::Local).collect::<Vec<_>>()
    );
    assert_eq!(
        again.rows(Scope::Remote).collect::<Vec<_>>(),
        table.rows(Scope::Remote).collect::<Vec<_>>()
    );
});

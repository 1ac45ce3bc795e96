//! The release binary users run: a sensible size, with what a backtrace needs (issue 40
//! item 8; docs/design-decisions.md, "The release binary's debug information").

use std::process::Command;
use tracer_tests::tracer;

/// What binutils says of `args`, as text.
fn binutils(tool: &str, args: &[&str]) -> String {
    let out = Command::new(tool)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{tool} (binutils, which `cargo xtask setup` installs): {e}"));
    assert!(out.status.success(), "{tool} {args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn the_release_binary_is_small_and_keeps_names_and_our_lines() {
    let bin = tracer();
    let path = bin.to_str().unwrap();
    // Full debug information for every crate made it 153 MB; our line tables, 50 MB.
    let bytes = std::fs::metadata(&bin).unwrap().len();
    assert!(bytes < 64 << 20, "{path} is {bytes} bytes");

    // The symbol table stays: a backtrace names every function, ours and the
    // dependencies'.
    let symbols = binutils("nm", &["-C", path]);
    let address_of = |name: &str| {
        let text_symbol = |l: &&str| {
            let mut fields = l.splitn(3, ' ');
            let (_, kind, symbol) = (fields.next(), fields.next(), fields.next());
            matches!(kind, Some("t" | "T")) && symbol == Some(name)
        };
        let line = symbols
            .lines()
            .find(text_symbol)
            .unwrap_or_else(|| panic!("no text symbol {name} in {path}"));
        format!("0x{}", line.split(' ').next().unwrap())
    };
    let ours = address_of("tracer::cli::record::run");
    assert!(
        symbols.contains(" tokio::runtime::"),
        "the dependencies' symbols are gone from {path}"
    );

    // Our code has its files and lines.
    let line = binutils("addr2line", &["-e", path, &ours]);
    let (file, number) = line.trim().rsplit_once(':').unwrap();
    assert!(file.ends_with("tracer-user/src/cli/record.rs"), "{line}");
    assert!(number.parse::<u32>().unwrap() > 0, "{line}");
}

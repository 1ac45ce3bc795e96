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
    // Full debug information for every crate made it 153 MB; our line tables, 50 MB;
    // with the gRPC transport of jobs across nodes (tonic, h2, rustls), 70 MB.
    let bytes = std::fs::metadata(&bin).unwrap().len();
    assert!(bytes < 80 << 20, "{path} is {bytes} bytes");

    // The symbol table stays: a backtrace names every function, ours and the
    // dependencies'.
    let symbols = binutils("nm", &["-C", path]);
    // Functions of our command line (their names stay; which are inlined is the
    // compiler's choice, so any of them).
    let ours: Vec<(&str, &str)> = symbols
        .lines()
        .filter_map(|l| {
            let mut fields = l.splitn(3, ' ');
            let (address, kind, name) = (fields.next()?, fields.next()?, fields.next()?);
            (matches!(kind, "t" | "T") && name.starts_with("tracer::cli::"))
                .then_some((address, name))
        })
        .take(10)
        .collect();
    assert_eq!(
        ours.len(),
        10,
        "the functions of tracer::cli are gone from {path}"
    );
    assert!(
        symbols.contains(" tokio::runtime::"),
        "the dependencies' symbols are gone from {path}"
    );

    // Our code has its files and lines: the outermost frame at each function's address
    // (`-i` lists the frames inlined there, innermost first) is in our source.
    for (address, name) in ours {
        let frames = binutils("addr2line", &["-i", "-e", path, &format!("0x{address}")]);
        let outermost = frames.trim().lines().last().unwrap();
        let (file, number) = outermost.rsplit_once(':').unwrap();
        assert!(file.contains("/tracer-user/src/"), "{name}: {frames}");
        assert!(number.parse::<u32>().unwrap() > 0, "{name}: {frames}");
    }
}

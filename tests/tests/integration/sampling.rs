//! Sampled stacks (issue 42, docs/sampling.md): the sampler's perf-event program copies
//! the user stacks of traced threads, and `tracer record` unwinds them with the
//! binaries' unwind tables. The programs are built -O2, as users build them, which on
//! x86-64 keeps no frame pointers: C, threaded C, C++, Fortran, and a routine whose time
//! is inside the C library's memcpy.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;
use std::process::Command;

use tracer_analysis::recording::Item;
use tracer_analysis::records::Record;
use tracer_common::{unwind_end, SampleRecord};
use tracer_tests::{program, record, tracer_fails, Traced};

/// The program's symbols of these names (`nm -S`, demangled), as address ranges of the
/// file. Every name must be there.
fn symbols(prog: &str, names: &[&str]) -> Vec<Range<u64>> {
    let out = Command::new("nm")
        .args(["-S", "-C", "--defined-only", prog])
        .output()
        .expect("nm");
    let text = String::from_utf8(out.stdout).unwrap();
    let mut found: HashMap<&str, Range<u64>> = HashMap::new();
    for line in text.lines() {
        let mut f = line.splitn(4, ' ');
        let (Some(addr), Some(size), Some(_kind), Some(name)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let (Ok(addr), Ok(size)) = (u64::from_str_radix(addr, 16), u64::from_str_radix(size, 16))
        else {
            continue;
        };
        if let Some(&n) = names.iter().find(|&&n| n == name) {
            found.insert(n, addr..addr + size);
        }
    }
    names
        .iter()
        .map(|n| {
            found
                .get(n)
                .cloned()
                .unwrap_or_else(|| panic!("{prog} has no symbol {n}"))
        })
        .collect()
}

/// The samples of the processes that ran `prog`, each with the load bias of `prog` in
/// its process (from the recording's process snapshots). Panics on a sample of any other
/// process: the tracer and its helpers are never sampled.
fn program_samples<'a>(t: &'a Traced, prog: &str) -> Vec<(&'a SampleRecord, u64)> {
    let real = std::fs::canonicalize(prog).unwrap();
    let mut bias: HashMap<u32, u64> = HashMap::new();
    for item in &t.items {
        if let Item::Process(p) = item {
            for m in &p.mappings {
                if std::fs::canonicalize(&m.path).ok().as_deref() == Some(real.as_path()) {
                    bias.insert(p.pid, m.bias);
                }
            }
        }
    }
    let samples: Vec<(&SampleRecord, u64)> = t
        .records()
        .filter_map(|r| match r {
            Record::Sample(s) => Some(&**s),
            _ => None,
        })
        .map(|s| {
            let b = *bias.get(&s.header.tgid).unwrap_or_else(|| {
                panic!(
                    "a sample of pid {}, which does not run {prog}",
                    s.header.tgid
                )
            });
            (s, b)
        })
        .collect();
    assert!(
        samples.len() >= 20,
        "{} samples of {prog} at 999 Hz over 0.5 s of CPU",
        samples.len()
    );
    samples
}

/// The sample's frames as addresses to look up: the interrupted instruction itself,
/// then each return address less one (the call instruction).
fn lookups(s: &SampleRecord) -> impl Iterator<Item = u64> + '_ {
    s.frames[..usize::from(s.depth)]
        .iter()
        .enumerate()
        .map(|(i, &a)| if i == 0 { a } else { a - 1 })
}

fn complete_pct(samples: &[(&SampleRecord, u64)]) -> f64 {
    let complete = samples
        .iter()
        .filter(|(s, _)| s.end == unwind_end::COMPLETE)
        .count();
    complete as f64 * 100.0 / samples.len() as f64
}

/// At least 95 % of the samples unwound to the stack's root, and every complete sample
/// taken inside `chain[0]` holds the frames of `chain` in that order, innermost first
/// (the caller of each is the next). Those are most samples: the program spins there.
fn check_chain(t: &Traced, prog: &str, chain: &[&str]) {
    let ranges = symbols(prog, chain);
    let samples = program_samples(t, prog);
    let pct = complete_pct(&samples);
    assert!(
        pct >= 95.0,
        "{pct:.1} % of {} samples of {prog} complete",
        samples.len()
    );
    assert_eq!(
        t.summary["samples"]["total"].as_u64(),
        Some(samples.len() as u64)
    );
    let mut inside = 0;
    for (s, bias) in &samples {
        if s.end != unwind_end::COMPLETE || !ranges[0].contains(&(s.frames[0] - bias)) {
            continue;
        }
        inside += 1;
        let mut want = ranges.iter().peekable();
        for addr in lookups(s) {
            if want.peek().is_some_and(|r| r.contains(&(addr - bias))) {
                want.next();
            }
        }
        assert!(
            want.peek().is_none(),
            "a sample in {} lacks {:?} in order: {:x?}",
            chain[0],
            chain,
            &s.frames[..usize::from(s.depth)]
        );
    }
    assert!(
        inside * 2 >= samples.len(),
        "{inside} of {} samples in {}",
        samples.len(),
        chain[0]
    );
}

#[test]
fn c_stacks_unwind_to_main_without_frame_pointers() {
    let prog = program("sampled_chain");
    let t = record(
        "sampled-c",
        &["--sample", "999"],
        std::slice::from_ref(&prog),
    );
    check_chain(&t, &prog, &["inner", "outer", "main"]);
}

/// With the chain's functions selected (`--func`), their return probes replace their
/// return addresses too: the probes keep each selected procedure's, and the stacks
/// sampled inside them still unwind to main.
#[test]
fn stacks_inside_selected_procedures_unwind_to_main() {
    let prog = program("sampled_chain");
    let t = record(
        "sampled-func",
        &["--sample", "999", "--func", "inner", "--func", "outer"],
        std::slice::from_ref(&prog),
    );
    check_chain(&t, &prog, &["inner", "outer", "main"]);
}

#[test]
fn thread_stacks_unwind_to_their_start_routine() {
    let prog = program("sampled_chain");
    let t = record(
        "sampled-threads",
        &["--sample", "999"],
        &[prog.clone(), "threads".into()],
    );
    check_chain(&t, &prog, &["inner", "outer", "worker"]);
    // The two workers' threads were sampled, not only the main thread.
    let threads: std::collections::BTreeSet<u32> = program_samples(&t, &prog)
        .iter()
        .filter(|(s, _)| s.header.tid != s.header.tgid)
        .map(|(s, _)| s.header.tid)
        .collect();
    assert_eq!(threads.len(), 2, "sampled worker threads: {threads:?}");
}

#[test]
fn cpp_stacks_unwind_to_main() {
    let prog = program("sampled_chain_cpp");
    let t = record(
        "sampled-cpp",
        &["--sample", "999"],
        std::slice::from_ref(&prog),
    );
    check_chain(
        &t,
        &prog,
        &[
            "unsigned long chain::inner<unsigned long>(double)",
            "chain::Outer::run(double) [clone .isra.0]",
            "main",
        ],
    );
}

#[test]
fn fortran_stacks_unwind_to_main_program() {
    let prog = program("sampled_chain_f");
    let t = record(
        "sampled-fortran",
        &["--sample", "999"],
        std::slice::from_ref(&prog),
    );
    check_chain(&t, &prog, &["inner_", "outer_", "MAIN__", "main"]);
}

/// Most of the program's time is copy_routine's inside libc's memcpy: those samples
/// start in libc and unwind out of it through copy_routine to main.
#[test]
fn stacks_inside_libc_reach_the_routine_and_main() {
    let prog = program("sampled_memcpy");
    let t = record(
        "sampled-memcpy",
        &["--sample", "999"],
        std::slice::from_ref(&prog),
    );
    let samples = program_samples(&t, &prog);
    let pct = complete_pct(&samples);
    assert!(
        pct >= 95.0,
        "{pct:.1} % of {} samples complete",
        samples.len()
    );
    let ranges = symbols(&prog, &["copy_routine", "main", "_start"]);
    // libc's extent in each process: from its bias over its file's size.
    let mut libc: HashMap<u32, Range<u64>> = HashMap::new();
    for item in &t.items {
        if let Item::Process(p) = item {
            for m in p.mappings.iter().filter(|m| m.path.contains("/libc.so")) {
                let len = std::fs::metadata(&m.path).unwrap().len();
                libc.insert(p.pid, m.bias..m.bias + len);
            }
        }
    }
    let program_len = std::fs::metadata(&prog).unwrap().len();
    // main's memsets are in libc too; the copies are most of the time.
    let mut via_routine = 0;
    for (s, bias) in &samples {
        let lib = &libc[&s.header.tgid];
        if s.end != unwind_end::COMPLETE || !lib.contains(&s.frames[0]) {
            continue;
        }
        // Out of libc into copy_routine then main, or into main.
        let frames: Vec<u64> = lookups(s).collect();
        let out = frames
            .iter()
            .position(|a| !lib.contains(a))
            .expect("a frame outside libc");
        // libc called by another library: the dynamic loader's work as the process
        // starts or exits (a complete stack through ld.so: CI saw one), not the
        // program's call.
        if !(*bias..bias + program_len).contains(&frames[out]) {
            continue;
        }
        let caller = frames[out] - bias;
        if ranges[1].contains(&caller) {
            continue;
        }
        // libc called from `_start`: the C runtime's own work around main, before main
        // is called or after it returned (CI saw exit's handlers: `exit` called by
        // `__libc_start_call_main` under `__libc_start_main`, main no longer on the stack).
        if ranges[2].contains(&caller) {
            continue;
        }
        assert!(
            ranges[0].contains(&caller),
            "libc's caller is neither copy_routine nor main: {frames:x?}"
        );
        via_routine += 1;
        assert!(
            frames[out + 1..]
                .iter()
                .any(|a| ranges[1].contains(&(a - bias))),
            "no main after copy_routine: {frames:x?}"
        );
    }
    assert!(
        via_routine * 2 >= samples.len(),
        "{via_routine} of {} samples inside libc called by copy_routine",
        samples.len()
    );
}

/// `--sample 0` takes no samples (and the summary has no `samples`); a rate past the
/// maximum is refused before anything runs.
#[test]
fn sample_rate_zero_is_off_and_a_bad_rate_is_refused() {
    let prog = program("sampled_chain");
    let t = record("sampled-off", &["--sample", "0"], &[prog]);
    assert_eq!(
        t.records()
            .filter(|r| matches!(r, Record::Sample(_)))
            .count(),
        0
    );
    assert!(t.summary.get("samples").is_none());
    let marker = std::env::temp_dir().join(format!("tracer-it-{}-not-run", std::process::id()));
    let touch = format!("touch {}", marker.display());
    let (code, err) = tracer_fails(&["record", "--sample", "20000", "--", "sh", "-c", &touch]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--sample"), "{err}");
    assert!(!Path::new(&marker).exists(), "the command ran");
}

//! What several subcommands print on stderr: the lost-events and probe-failures
//! warnings, how a recording ended, the summary.

use std::collections::BTreeMap;
use std::path::Path;

use tracer_analysis::failures;
use tracer_analysis::recording::{self, Trailer};

/// `eprintln!` that never panics: a reader of the tracer's stderr that left (`2>&1 |
/// head -1`) ends what the tracer says, not the tracer, which still finishes its session
/// (the recording written, the probes detached, nothing held) and exits with its status.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}
pub(super) use say;

/// `eprint!` that never panics (see [`say`]).
macro_rules! say_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr(), $($arg)*);
    }};
}
pub(super) use say_part;

/// `println!` that never panics: a closed stdout (`| head`) ends the output, and the
/// command goes on to its end as `dump`, `report` and `metrics` do.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}
pub(super) use out;

/// `print!` that never panics (see [`out`]).
macro_rules! out_part {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($arg)*);
    }};
}
pub(super) use out_part;

/// Says on stderr, once, before a command reads a recording, that it was cut short (no
/// END chunk: the tracer was killed) or has damaged chunks: the command then reads every
/// sound chunk. A file that cannot be read at all is left to the command's reader to
/// report.
///
/// Returns the recording's totals as the same pass read them (nothing lost nor failed if
/// it cannot be read), for [`warn_probe_failures`] at the command's end.
pub(super) fn tell_condition(path: &Path) -> Trailer {
    match recording::skim_of(path) {
        Ok(skimmed) => {
            for m in skimmed.condition.messages() {
                say!("tracer: warning: {m}");
            }
            skimmed.totals
        }
        Err(_) => Trailer::default(),
    }
}

/// Says on stderr that a recording is incomplete, when it is: `recorded` events are in
/// it, `lost` more were dropped by the probes or past the tracer's memory limit (every command that reads or writes a
/// recording ends with this, so that no result from an incomplete one goes unflagged).
pub(super) fn warn_lost(recorded: u64, lost: u64) {
    if lost > 0 {
        let produced = recorded + lost;
        say!(
            "tracer: warning: {lost} of {produced} events ({:.1} %) were lost (the tracer \
             fell behind and the probes' buffers filled up, or it passed its memory limit): \
             calls and messages among them are missing, so the results are incomplete",
            lost as f64 * 100.0 / produced as f64
        );
    }
}

/// Says on stderr, as loudly as [`warn_lost`] and just before it (the lost-events
/// warning stays a command's last line), that the probes failed in ways that may have
/// touched the results (`failures`: the recording's or the session's failure counts by
/// name), and what each failure means for them; lost records are `warn_lost`'s.
pub(super) fn warn_probe_failures(failures: &BTreeMap<String, u64>) {
    if let Some(warning) = failures::failures_warning(failures) {
        say!("tracer: warning: {warning}");
    }
}

/// Prints a summary for people.
pub(super) fn print_summary(s: &tracer_analysis::summary::Summary) {
    let cpu = s
        .tracer_cpu_ns
        .map(|ns| format!("; tracer CPU {:.2} s", ns as f64 / 1e9))
        .unwrap_or_default();
    say!(
        "events: {} recorded, {} lost{cpu}",
        s.events.total,
        s.events.lost
    );
    if let Some(line) = failures::failures_line(&s.events.failures) {
        say!("{line}");
    }
    if let Some(samples) = &s.samples {
        say!("{}", samples.text_line());
    }
    for p in &s.processes {
        let mut who = String::new();
        if let Some(r) = p.rank {
            who.push_str(&format!(" rank {r}"));
        }
        if let Some(t) = p.pvm_tid {
            who.push_str(&format!(" pvm tid {t:#x}"));
        }
        // A job across nodes: the pid its machine gave it, and the machine.
        let (pid, on) = match &p.node {
            Some(node) => (
                node.pid,
                format!(" on node {} ({})", node.index, node.hostname),
            ),
            None => (p.pid, String::new()),
        };
        say!(
            "  pid {pid:>7}{on}{who}  threads {:>3}  {}",
            p.threads,
            p.command
        );
    }
    if !s.calls.is_empty() {
        let calls: Vec<String> = s.calls.iter().map(|(k, v)| format!("{k} {v}")).collect();
        say!("calls: {}", calls.join(", "));
    }
    if !s.functions.is_empty() {
        let f: Vec<String> = s
            .functions
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        say!("procedures entered: {}", f.join(", "));
    }
    if let Some(unprobed) = s.unprobed_mpi_calls.as_ref().filter(|u| !u.is_empty()) {
        let names: Vec<&str> = unprobed.keys().map(String::as_str).collect();
        say!(
            "MPI calls imported but not probed (their time counts as work, their traffic \
             is unmatched): {}",
            names.join(", ")
        );
    }
}

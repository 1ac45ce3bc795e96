//! The critical path profile: the report of `tracer analyze` and of `tracer record
//! --profile-json`. Schema: docs/profile-json.md.

use crate::format::node::ShownId;
use std::collections::HashMap;
use std::fmt::Write;

use serde::Serialize;

use super::engine::CriticalEnd;
use super::faults::{killed_lines, Killed};
use super::matcher::MatchStats;
pub use super::sampled::LiveSampleCounts;
use super::sync::SyncStats;
use super::workclock::ClockKind;
use super::{Analyzer, Pipeline};
use crate::format::pairing::Resynchronised;
use crate::format::recording::{Item, RecordingError, RecordingReader};
use crate::symbolize::CodeLocator;
use crate::units::{ms, name_column, percent};

pub(crate) const SCHEMA_VERSION: u32 = 1;

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Profile {
    pub schema_version: u32,
    /// "cpu" or "wall".
    pub clock: String,
    pub critical_path: CriticalPath,
    /// Sorted by critical-path time, largest first.
    pub procedures: Vec<ProcedureRow>,
    /// The hot sampled functions followed on the path while tracing (`--sample`), an
    /// estimate (docs/sampled-attribution.md, "Live"); sorted as `procedures`. Absent
    /// when nothing was sampled.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sampled_functions: Vec<ProcedureRow>,
    /// What the samples amount to, when the profile follows sampled functions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<LiveSampleCounts>,
    /// The threads the critical path runs through, by time on it, largest first.
    pub threads: Vec<PathThread>,
    pub messages: MatchStats,
    /// Shared-memory dependencies found, by kind.
    pub sync: SyncStats,
    pub events: EventTotals,
    /// Processes a signal killed, in order of death (absent when none was).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub killed: Vec<Killed>,
    /// CPU time of all traced threads, first to last record of each: what the
    /// procedures' `cpu_pct` is of. Not in the JSON (docs/profile-json.md is as it was);
    /// `tracer record` gives it in its summary's `cost`.
    #[serde(skip)]
    pub traced_cpu_ns: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CriticalPath {
    pub length_ns: u64,
    /// The thread (and its process) whose last event ends the critical path.
    pub ends_in_pid: u32,
    pub ends_in_tid: u32,
    pub ends_in_command: String,
    /// First to last event seen (wall clock).
    pub elapsed_ns: u64,
    /// Whether only the program's own processes may end the path: some process called
    /// MPI/PVM or entered a selected procedure. Until one does, every traced thread may
    /// (a launcher's too), so a live sample taken before can be longer than later ones.
    pub within_program: bool,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct ProcedureRow {
    /// Demangled (C++, Rust).
    pub name: String,
    /// As the binary has it (what `--func` matched).
    pub symbol: String,
    /// Time of the critical path inside the procedure (callees included).
    pub cp_ns: u64,
    pub cp_pct: f64,
    /// Time of the critical path inside the procedure and not in a selected callee.
    pub cp_exclusive_ns: u64,
    /// CPU time inside the procedure, all threads.
    pub cpu_ns: u64,
    /// Of the CPU time of all traced threads.
    pub cpu_pct: f64,
    /// How much shorter the critical path gets if the procedure took no time.
    pub zeroing_ns: u64,
    pub zeroing_pct: f64,
}

/// A thread the critical path runs through.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathThread {
    pub pid: u32,
    pub tid: u32,
    /// Its process's command line.
    pub command: String,
    /// Time of the path spent in the thread's work.
    pub cp_ns: u64,
    pub cp_pct: f64,
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct EventTotals {
    pub total: u64,
    pub lost: u64,
    /// Calls whose entry or exit the probes did not write, dropped so that the thread's
    /// other calls pair up: absent when every call paired.
    #[serde(skip_serializing_if = "Resynchronised::is_none")]
    pub calls_resynchronised: Resynchronised,
}

impl CriticalPath {
    /// The first line of the profile and of `tracer report`: the path's length and where
    /// it ends.
    pub(crate) fn headline(&self, clock: &str) -> String {
        // Thread 0 is the idle task, never traced: no thread ran, so there is no path
        // to end anywhere.
        if self.ends_in_tid == 0 && self.length_ns == 0 {
            return "critical path: none: the recording has no events of a traced thread"
                .to_string();
        }
        format!(
            "critical path: {:.3} ms ({clock} clock) of {:.3} ms elapsed, ends in pid {} tid {} {}",
            ms(self.length_ns),
            ms(self.elapsed_ns),
            ShownId(self.ends_in_pid),
            ShownId(self.ends_in_tid),
            self.ends_in_command
        )
    }
}

/// The matcher's counts in one line (also in `tracer report`).
pub(crate) fn messages_line(m: &MatchStats) -> String {
    // Only a recording of several nodes can have any (`analysis::late`).
    let corrected = if m.clock_corrected > 0 {
        format!(
            "; {} completed before what they depend on by the nodes' clocks (corrected)",
            m.clock_corrected
        )
    } else {
        String::new()
    };
    format!(
        "messages: {} sent, {} received, {} matched, {} unmatched; {} collective exits ({} incomplete){corrected}",
        m.sent, m.received, m.matched, m.unmatched, m.collectives, m.collectives_incomplete
    )
}

impl Profile {
    /// The profile of a whole recording (`tracer analyze`, and `tracer record
    /// --analyze-after` once tracing ends): streamed through the same reorder window as
    /// the live engine, so memory stays bounded by the program's shape, not the
    /// recording's length, and the result is the live one. With `functions`, the
    /// sampled functions are named through it and followed as live.
    pub fn of_recording(
        reader: &mut RecordingReader,
        clock: ClockKind,
        functions: Option<Box<dyn CodeLocator>>,
    ) -> Result<Profile, RecordingError> {
        let mut pipeline = Pipeline::new(clock);
        if let Some(locator) = functions {
            pipeline.analyzer.follow_sampled_functions(locator);
        }
        let mut commands: HashMap<u32, String> = HashMap::new();
        while let Some(item) = reader.next_item()? {
            if let Item::Process(p) = &item {
                if !p.command.is_empty() {
                    commands.insert(p.pid, p.command.clone());
                }
            }
            pipeline.item(&item);
        }
        let lost = reader.totals().events_lost;
        Ok(Profile::new(pipeline.flush(), clock, lost, &commands))
    }

    /// `commands`: pid -> command line, for naming the process that ends the path.
    pub fn new(
        a: &Analyzer,
        clock: ClockKind,
        lost: u64,
        commands: &HashMap<u32, String>,
    ) -> Profile {
        let CriticalEnd { tid, path } = a.critical().unwrap_or_default();
        let pid = a.pid_of(tid).unwrap_or(0);
        let length = path.longest;
        let cpu_total = a.cpu_total();
        let (mut procedures, mut sampled_functions): (Vec<_>, Vec<_>) = a
            .procedures
            .names
            .iter()
            .zip(&a.procedures.symbols)
            .enumerate()
            // A released column names no function until another takes it.
            .filter(|(p, _)| !a.is_released_sampled_column(*p))
            .map(|(p, (name, symbol))| {
                let cp = path.inclusive.get(p).copied().unwrap_or(0);
                let zeroing = length.saturating_sub(a.zeroed_length(p));
                let sampled = a.procedures.sampled[p];
                let cpu = if sampled {
                    a.sampled_cpu(p)
                } else {
                    a.cpu_in(p)
                };
                let row = ProcedureRow {
                    name: name.clone(),
                    symbol: symbol.clone(),
                    cp_ns: cp,
                    cp_pct: percent(cp, length),
                    cp_exclusive_ns: path.exclusive.get(p).copied().unwrap_or(0),
                    cpu_ns: cpu,
                    cpu_pct: percent(cpu, cpu_total),
                    zeroing_ns: zeroing,
                    zeroing_pct: percent(zeroing, length),
                };
                (row, sampled)
            })
            .partition(|(_, sampled)| !sampled);
        let by_path = |x: &(ProcedureRow, bool), y: &(ProcedureRow, bool)| {
            y.0.cp_ns.cmp(&x.0.cp_ns).then(x.0.name.cmp(&y.0.name))
        };
        procedures.sort_by(by_path);
        sampled_functions.sort_by(by_path);
        let mut threads: Vec<PathThread> = path
            .by_thread
            .iter()
            .filter(|share| share.ns > 0)
            .map(|share| {
                let pid = a.pid_of(share.tid).unwrap_or(0);
                PathThread {
                    pid,
                    tid: share.tid,
                    command: commands.get(&pid).cloned().unwrap_or_default(),
                    cp_ns: share.ns,
                    cp_pct: percent(share.ns, length),
                }
            })
            .collect();
        threads.sort_by(|x, y| y.cp_ns.cmp(&x.cp_ns).then(x.tid.cmp(&y.tid)));
        Profile {
            schema_version: SCHEMA_VERSION,
            clock: clock.name().into(),
            critical_path: CriticalPath {
                length_ns: length,
                ends_in_pid: pid,
                ends_in_tid: tid,
                ends_in_command: commands.get(&pid).cloned().unwrap_or_default(),
                elapsed_ns: a.last_ts.saturating_sub(a.first_ts.unwrap_or(a.last_ts)),
                within_program: a.has_participants(),
            },
            procedures: procedures.into_iter().map(|(row, _)| row).collect(),
            sampled_functions: sampled_functions.into_iter().map(|(row, _)| row).collect(),
            // Only when there were samples: a session that samples and a recording read
            // back give one profile, whether or not the program ran long enough.
            samples: a.sample_counts().filter(|c| c.samples > 0),
            threads,
            messages: a.matcher.final_stats(),
            sync: a.sync.stats.clone(),
            events: EventTotals {
                total: a.events,
                lost,
                calls_resynchronised: a.resynchronised,
            },
            killed: a
                .killed
                .iter()
                .map(|k| Killed {
                    command: commands.get(&k.pid).cloned().unwrap_or_default(),
                    ..k.clone()
                })
                .collect(),
            traced_cpu_ns: cpu_total,
        }
    }

    /// The table for people.
    pub fn text(&self) -> String {
        let cp = &self.critical_path;
        let mut s = String::new();
        let _ = writeln!(s, "{}", cp.headline(&self.clock));
        procedure_table(&mut s, "procedure", &self.procedures);
        if let Some(c) = &self.samples {
            let _ = writeln!(
                s,
                "sampled functions: {} samples ({} unwound to the stack's root), {} functions, the {} hottest followed on the path (an estimate: `tracer report` weighs every sample on the graph)",
                c.samples, c.complete, c.functions, c.tracked
            );
            procedure_table(&mut s, "sampled function", &self.sampled_functions);
        }
        let _ = writeln!(s, "{}", messages_line(&self.messages));
        s.push_str(&killed_lines(&self.killed));
        let _ = writeln!(
            s,
            "events: {} analyzed, {} lost{}",
            self.events.total,
            self.events.lost,
            resynchronised_clause(&self.events.calls_resynchronised)
        );
        s
    }
}

/// The procedures' table (`what` heads the name column); nothing when there are none.
fn procedure_table(s: &mut String, what: &str, rows: &[ProcedureRow]) {
    if rows.is_empty() {
        return;
    }
    let width = name_column(rows.iter().map(|p| p.name.as_str()), 28);
    let _ = writeln!(
        s,
        "{:<width$} {:>12} {:>7} {:>12} {:>12} {:>7} {:>12} {:>7}",
        what, "cp ms", "cp %", "cp excl ms", "cpu ms", "cpu %", "zeroing ms", "zero %"
    );
    for p in rows {
        let _ = writeln!(
            s,
            "{:<width$} {:>12.3} {:>7.2} {:>12.3} {:>12.3} {:>7.2} {:>12.3} {:>7.2}",
            p.name,
            ms(p.cp_ns),
            p.cp_pct,
            ms(p.cp_exclusive_ns),
            ms(p.cpu_ns),
            p.cpu_pct,
            ms(p.zeroing_ns),
            p.zeroing_pct
        );
    }
}

/// What the events line adds when calls did not pair ("; calls resynchronised: 3 exits
/// missing, 1 entry missing"); nothing when they all did.
pub(crate) fn resynchronised_clause(r: &Resynchronised) -> String {
    if r.is_none() {
        return String::new();
    }
    let count = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "; calls resynchronised: {} missing, {} missing",
        count(r.exits_missing, "exit", "exits"),
        count(r.entries_missing, "entry", "entries")
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{ClockKind, Pipeline, Profile};

    /// A recording with no events has no path: not one that "ends in pid 0 tid 0".
    #[test]
    fn a_recording_without_events_has_no_critical_path() {
        let mut pipeline = Pipeline::new(ClockKind::Cpu);
        let profile = Profile::new(pipeline.flush(), ClockKind::Cpu, 0, &HashMap::new());
        let text = profile.text();
        assert_eq!(
            text.lines().next(),
            Some("critical path: none: the recording has no events of a traced thread"),
            "{text}"
        );
    }
}

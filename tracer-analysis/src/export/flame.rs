//! The critical path as folded stacks (`frame;frame;... weight`, the input of Brendan
//! Gregg's flamegraph.pl, inferno, speedscope; the `tracer` binary draws them as an SVG
//! flame graph with inferno, which this crate does not link). A stack is the process,
//! the thread and the frames of a [`StackSource`]'s stack (outermost first); its weight
//! is the stack's critical-path time, in nanoseconds, so the weights add up to the
//! path's length.

use crate::format::node::ShownId;
use std::collections::BTreeMap;
use std::io::{self, Write};

use super::stack_source::{StackSource, StackWeights};
use super::written::Written;

/// What a flame graph export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlameStats {
    /// Distinct stacks with work on the path.
    pub stacks: usize,
    /// Their weights in total: the critical path's length.
    pub critical_path_ns: u64,
}

/// A name as one frame: `;` separates frames and a line ends at its last space before
/// the weight, so neither a `;` nor a line break may be inside one.
fn frame(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            ';' => ':',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect()
}

/// The frame of a process: its program, its MPI rank when it has one, its pid.
pub(crate) fn process_frame(source: &dyn StackSource, pid: u32) -> String {
    let command = source
        .process(pid)
        .map(|p| p.command.as_str())
        .unwrap_or("");
    // The program's file name: its directory and arguments would only widen the graph.
    let program = command
        .split_whitespace()
        .next()
        .map(|p| p.rsplit('/').next().unwrap_or(p))
        .unwrap_or("");
    let mut name = String::new();
    if !program.is_empty() {
        name.push_str(program);
        name.push(' ');
    }
    if let Some(rank) = source.rank(pid) {
        name.push_str(&format!("rank {rank} "));
    }
    name.push_str(&format!("pid {}", ShownId(pid)));
    frame(&name)
}

/// The folded stacks of the critical path, each once, in sorted order (what
/// flamegraph tools expect), with their weights in nanoseconds.
pub fn folded_stacks(source: &dyn StackSource) -> BTreeMap<String, u64> {
    folded_by(source, |w| w.critical_path_ns)
}

/// The folded stacks of all work (CPU time for the cpu clock), on the path or not: the
/// CPU flame graph beside the critical path's.
pub fn folded_work_stacks(source: &dyn StackSource) -> BTreeMap<String, u64> {
    folded_by(source, |w| w.work_ns)
}

fn folded_by(
    source: &dyn StackSource,
    weight: impl Fn(&StackWeights) -> u64,
) -> BTreeMap<String, u64> {
    let mut stacks: BTreeMap<String, u64> = BTreeMap::new();
    for s in source.stacks().iter().filter(|s| weight(&s.weights) > 0) {
        let mut line = process_frame(source, s.pid);
        line.push_str(&format!(";tid {}", ShownId(s.tid)));
        for f in &s.frames {
            line.push(';');
            line.push_str(&frame(f));
        }
        // Two names can fold to one frame (a `;` replaced): their stacks merge.
        *stacks.entry(line).or_default() += weight(&s.weights);
    }
    stacks
}

/// The count and total weight of folded stacks.
pub fn stats(stacks: &BTreeMap<String, u64>) -> FlameStats {
    FlameStats {
        stacks: stacks.len(),
        critical_path_ns: stacks.values().sum(),
    }
}

/// Writes the folded stacks, one `frames weight` line each.
pub fn write_folded<W: Write>(
    source: &dyn StackSource,
    mut out: W,
) -> io::Result<Written<FlameStats, W>> {
    let stacks = folded_stacks(source);
    for (line, ns) in &stacks {
        writeln!(out, "{line} {ns}")?;
    }
    Ok(Written {
        stats: stats(&stacks),
        out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::workclock::ClockKind;
    use crate::export::stacks::GraphStacks;
    use crate::format::synth::nested_ring;
    use crate::graph::path::OUTSIDE;
    use crate::graph::recorded::RecordedGraph;

    fn ring_profile() -> GraphStacks {
        GraphStacks::new(&RecordedGraph::from_items(&nested_ring(), ClockKind::Cpu))
    }

    #[test]
    fn folded_lines_weigh_the_path() {
        let profile = ring_profile();
        let Written { stats, out: bytes } = write_folded(&profile, Vec::new()).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        let lines: Vec<(&str, u64)> = text
            .lines()
            .map(|l| {
                let (stack, ns) = l.rsplit_once(' ').unwrap();
                (stack, ns.parse().unwrap())
            })
            .collect();
        assert_eq!(lines.len(), stats.stacks);
        let total: u64 = lines.iter().map(|(_, ns)| ns).sum();
        assert_eq!(total, profile.summary().critical_path_ns);
        assert_eq!(stats.critical_path_ns, total);
        let inner = lines
            .iter()
            .find(|(s, _)| *s == "app rank 1 pid 101;tid 101;outer;inner")
            .unwrap();
        assert_eq!(inner.1, 30_000);
        let outside = format!("app rank 0 pid 100;tid 100;{OUTSIDE}");
        assert!(lines.iter().any(|(s, _)| *s == outside), "{text}");
    }

    #[test]
    fn names_cannot_break_the_format() {
        assert_eq!(frame("a;b\nc"), "a:b c");
    }
}

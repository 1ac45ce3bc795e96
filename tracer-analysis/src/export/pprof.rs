//! pprof's profile.proto, gzip-compressed (what `go tool pprof` and pprof's web UI
//! read). Three sample types, all nanoseconds: `critical_path` (work on the critical
//! path), the clock's own (`cpu` or `wall`: all work, on the path or not) and
//! `zeroing` (how much shorter the path gets if a procedure took no time).
//!
//! The work samples are one per thread and stack of selected procedures, labelled with
//! `pid`, `tid` and `rank`: pprof's flat time of a procedure is then its exclusive
//! time and its cumulative time the inclusive one, as in `tracer report`. Zeroing is
//! no sum over stacks (two procedures' gains do not add up), so each procedure gets one
//! zeroing sample of its own, on a stack of that procedure alone: flat and cumulative
//! are then both its gain, and the work samples carry 0 there. docs/exports.md has the
//! mapping and the commands.

use std::collections::HashMap;
use std::io::{self, Write};

use flate2::write::GzEncoder;
use flate2::Compression;
use prost::Message;

use super::stack_source::StackSource;
use super::written::Written;

/// The messages of profile.proto this export writes (field numbers as published;
/// the fields it never sets are left out, which the format allows).
pub(crate) mod proto {
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub(crate) sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub(crate) sample: Vec<Sample>,
        #[prost(message, repeated, tag = "4")]
        pub(crate) location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub(crate) function: Vec<Function>,
        /// Index 0 is always the empty string.
        #[prost(string, repeated, tag = "6")]
        pub(crate) string_table: Vec<String>,
        #[prost(int64, tag = "10")]
        pub(crate) duration_nanos: i64,
        #[prost(int64, repeated, tag = "13")]
        pub(crate) comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub(crate) default_sample_type: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ValueType {
        #[prost(int64, tag = "1")]
        pub(crate) r#type: i64,
        #[prost(int64, tag = "2")]
        pub(crate) unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Sample {
        /// Leaf first.
        #[prost(uint64, repeated, tag = "1")]
        pub(crate) location_id: Vec<u64>,
        /// One per sample type, in the order of `Profile::sample_type`.
        #[prost(int64, repeated, tag = "2")]
        pub(crate) value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub(crate) label: Vec<Label>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Label {
        #[prost(int64, tag = "1")]
        pub(crate) key: i64,
        #[prost(int64, tag = "2")]
        pub(crate) str: i64,
        #[prost(int64, tag = "3")]
        pub(crate) num: i64,
        /// pprof drops a numeric label whose value and unit are both 0 (rank 0): a
        /// unit keeps it.
        #[prost(int64, tag = "4")]
        pub(crate) num_unit: i64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Location {
        #[prost(uint64, tag = "1")]
        pub(crate) id: u64,
        #[prost(message, repeated, tag = "4")]
        pub(crate) line: Vec<Line>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Line {
        #[prost(uint64, tag = "1")]
        pub(crate) function_id: u64,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Function {
        #[prost(uint64, tag = "1")]
        pub(crate) id: u64,
        #[prost(int64, tag = "2")]
        pub(crate) name: i64,
        #[prost(int64, tag = "3")]
        pub(crate) system_name: i64,
    }
}

/// Sample type names (`go tool pprof -sample_index=NAME`).
pub(crate) const CRITICAL_PATH: &str = "critical_path";
pub(crate) const ZEROING: &str = "zeroing";
const NANOSECONDS: &str = "nanoseconds";

/// What a pprof export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PprofStats {
    pub samples: usize,
    pub functions: usize,
    pub critical_path_ns: u64,
    /// All work, on the clock the graph was weighed with.
    pub work_ns: u64,
}

/// Strings by index, each once, "" first (as profile.proto wants).
struct StringTable {
    strings: Vec<String>,
    index: HashMap<String, i64>,
}

impl StringTable {
    fn new() -> Self {
        let mut t = StringTable {
            strings: Vec::new(),
            index: HashMap::new(),
        };
        t.intern("");
        t
    }

    fn intern(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.strings.len() as i64;
        self.strings.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

/// One function and one location per procedure name (we have no addresses: a frame is
/// a procedure); ids start at 1, as 0 means "none" in the format. A function's
/// `system_name` is the procedure's symbol as the binary has it (mangled for C++ and
/// Rust), its `name` the demangled name.
struct Frames<'s> {
    ids: HashMap<String, u64>,
    /// Symbols by frame name, where the source knows them.
    symbols: HashMap<&'s str, &'s str>,
    functions: Vec<proto::Function>,
    locations: Vec<proto::Location>,
}

impl Frames<'_> {
    fn id(&mut self, name: &str, strings: &mut StringTable) -> u64 {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.functions.len() as u64 + 1;
        let name_index = strings.intern(name);
        let system_name = match self.symbols.get(name) {
            Some(symbol) => strings.intern(symbol),
            None => name_index,
        };
        self.functions.push(proto::Function {
            id,
            name: name_index,
            system_name,
        });
        self.locations.push(proto::Location {
            id,
            line: vec![proto::Line { function_id: id }],
        });
        self.ids.insert(name.to_string(), id);
        id
    }
}

/// The profile as profile.proto messages.
pub(crate) fn profile_message(source: &dyn StackSource) -> proto::Profile {
    let summary = source.summary();
    let mut strings = StringTable::new();
    let mut frames = Frames {
        ids: HashMap::new(),
        symbols: source
            .zeroing()
            .iter()
            .filter_map(|z| Some((z.procedure.as_str(), z.symbol.as_deref()?)))
            .collect(),
        functions: Vec::new(),
        locations: Vec::new(),
    };
    let unit = strings.intern(NANOSECONDS);
    let sample_type = [CRITICAL_PATH, summary.clock.name(), ZEROING]
        .into_iter()
        .map(|name| proto::ValueType {
            r#type: strings.intern(name),
            unit,
        })
        .collect();
    let (pid_key, tid_key, rank_key) = (
        strings.intern("pid"),
        strings.intern("tid"),
        strings.intern("rank"),
    );
    let id_unit = strings.intern("id");
    let number = |key: i64, num: i64| proto::Label {
        key,
        str: 0,
        num,
        num_unit: id_unit,
    };
    let mut samples = Vec::new();
    for s in source.stacks() {
        let mut label = vec![number(pid_key, s.pid.into()), number(tid_key, s.tid.into())];
        if let Some(rank) = source.rank(s.pid) {
            label.push(number(rank_key, rank.into()));
        }
        samples.push(proto::Sample {
            location_id: s
                .frames
                .iter()
                .rev()
                .map(|f| frames.id(f, &mut strings))
                .collect(),
            value: vec![
                s.weights.critical_path_ns as i64,
                s.weights.work_ns as i64,
                0,
            ],
            label,
        });
    }
    for z in source.zeroing().iter().filter(|z| z.zeroing_ns > 0) {
        samples.push(proto::Sample {
            location_id: vec![frames.id(&z.procedure, &mut strings)],
            value: vec![0, 0, z.zeroing_ns as i64],
            label: Vec::new(),
        });
    }
    let comment = vec![strings.intern(&format!(
        "tracer: critical path {} ns, clock {}, {} events ({} lost)",
        summary.critical_path_ns,
        summary.clock.name(),
        summary.events_recorded,
        summary.events_lost
    ))];
    let default_sample_type = strings.intern(CRITICAL_PATH);
    proto::Profile {
        sample_type,
        sample: samples,
        location: frames.locations,
        function: frames.functions,
        string_table: strings.strings,
        duration_nanos: summary.elapsed_ns as i64,
        comment,
        default_sample_type,
    }
}

/// Writes the profile, gzip-compressed, and returns the writer.
pub fn write_pprof<W: Write>(
    source: &dyn StackSource,
    out: W,
) -> io::Result<Written<PprofStats, W>> {
    let message = profile_message(source);
    let stats = PprofStats {
        samples: message.sample.len(),
        functions: message.function.len(),
        critical_path_ns: source
            .stacks()
            .iter()
            .map(|s| s.weights.critical_path_ns)
            .sum(),
        work_ns: source.stacks().iter().map(|s| s.weights.work_ns).sum(),
    };
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&message.encode_to_vec())?;
    Ok(Written {
        stats,
        out: gz.finish()?,
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
    use std::io::Read;

    fn decode(bytes: &[u8]) -> proto::Profile {
        let mut raw = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut raw)
            .expect("gzip");
        proto::Profile::decode(raw.as_slice()).expect("profile.proto")
    }

    #[test]
    fn encodes_the_stacks_and_the_zeroing() {
        let rg = RecordedGraph::from_items(&nested_ring(), ClockKind::Cpu);
        let profile = GraphStacks::new(&rg);
        let Written { stats, out: bytes } = write_pprof(&profile, Vec::new()).unwrap();
        let p = decode(&bytes);
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(p.string_table[0], "");
        let types: Vec<(&str, &str)> = p
            .sample_type
            .iter()
            .map(|t| (s(t.r#type), s(t.unit)))
            .collect();
        assert_eq!(
            types,
            [
                ("critical_path", "nanoseconds"),
                ("cpu", "nanoseconds"),
                ("zeroing", "nanoseconds")
            ]
        );
        assert_eq!(s(p.default_sample_type), "critical_path");
        assert_eq!(stats.samples, p.sample.len());
        // Per sample type, the sums are the profile's.
        let total = |i: usize| -> i64 { p.sample.iter().map(|x| x.value[i]).sum() };
        assert_eq!(total(0) as u64, profile.summary().critical_path_ns);
        assert_eq!(total(1) as u64, stats.work_ns);
        let zeroing: u64 = profile.zeroing().iter().map(|z| z.zeroing_ns).sum();
        assert_eq!(total(2) as u64, zeroing);
        // Stacks are leaf first, and name functions through their locations.
        let name_of = |loc: u64| {
            let l = p.location.iter().find(|l| l.id == loc).unwrap();
            let f = p
                .function
                .iter()
                .find(|f| f.id == l.line[0].function_id)
                .unwrap();
            s(f.name)
        };
        let inner = p
            .sample
            .iter()
            .find(|x| {
                x.location_id.len() == 2
                    && x.label.iter().any(|l| s(l.key) == "tid" && l.num == 101)
            })
            .unwrap();
        let names: Vec<&str> = inner.location_id.iter().map(|&l| name_of(l)).collect();
        assert_eq!(names, ["inner", "outer"]);
        assert_eq!(inner.value, [30_000, 30_000, 0]);
        let rank = inner.label.iter().find(|l| s(l.key) == "rank").unwrap();
        assert_eq!(rank.num, 1);
        // One zeroing sample per procedure with a gain, on that procedure alone.
        for z in profile.zeroing().iter().filter(|z| z.zeroing_ns > 0) {
            let found: Vec<&proto::Sample> = p
                .sample
                .iter()
                .filter(|x| x.value[2] > 0 && name_of(x.location_id[0]) == z.procedure)
                .collect();
            assert_eq!(found.len(), 1, "{}", z.procedure);
            assert_eq!(found[0].location_id.len(), 1);
            assert_eq!(found[0].value, [0, 0, z.zeroing_ns as i64]);
        }
        assert!(p.function.iter().any(|f| s(f.name) == OUTSIDE));
    }

    #[test]
    fn a_function_is_named_demangled_with_its_symbol_as_system_name() {
        let symbols = ["_Z5stagei", "_ZN5tools5solve17h0123456789abcdefE"];
        let items = crate::format::synth::pipeline(&symbols).items;
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let bytes = write_pprof(&GraphStacks::new(&rg), Vec::new()).unwrap().out;
        let p = decode(&bytes);
        let s = |i: i64| p.string_table[i as usize].as_str();
        let mut names: Vec<(&str, &str)> = p
            .function
            .iter()
            .map(|f| (s(f.name), s(f.system_name)))
            .collect();
        names.sort();
        assert_eq!(
            names,
            // The pipeline works only inside its two procedures.
            [
                ("stage(int)", "_Z5stagei"),
                ("tools::solve", "_ZN5tools5solve17h0123456789abcdefE")
            ]
        );
    }

    #[test]
    fn an_empty_profile_is_still_a_profile() {
        let rg = RecordedGraph::from_items(&[], ClockKind::Wall);
        let Written { stats, out: bytes } =
            write_pprof(&GraphStacks::new(&rg), Vec::new()).unwrap();
        let p = decode(&bytes);
        assert_eq!(stats.samples, 0);
        assert_eq!(p.string_table[p.sample_type[1].r#type as usize], "wall");
    }
}

//! Chrome trace-event JSON (the `{"traceEvents": [...]}` format that Perfetto's UI and
//! chrome://tracing load): the timeline of [`super::timeline`] as complete ("X")
//! slices, flow events ("s", "f") inside the flow slices, and metadata ("M") naming
//! processes and threads. docs/chrome-export.md describes the mapping.
//!
//! Times are microseconds since the first analysed record, as the format wants.
//!
//! The timeline's events (millions in a big recording) are formatted by hand into one
//! buffer written in large chunks: through serde_json, one small write per token and a
//! JSON map per call's arguments took most of the export's time. The few others (names,
//! the critical path) go through serde_json.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::Path;

use serde::Serialize;
use serde_json::{json, Value};

use super::timeline::{
    FlowSlice, IntArg, IntArgs, Slice, TimelinePlan, TimelineSink, TrackedThread,
};
use super::write_behind::FORMATTED_BYTES;
use super::written::Written;
use super::ExportError;
use crate::analysis::workclock::ClockKind;
use crate::format::recording::{ItemSource, RecordingError};
use crate::format::summary::Summary;

pub use super::timeline::{ExportStats, CRITICAL_PID};

/// The Chrome export: the shared timeline plan, written as JSON.
pub struct ChromeExport {
    plan: TimelinePlan,
    /// Events in the recording, and events the probes dropped (the timeline misses
    /// their calls and messages).
    pub events_recorded: u64,
    pub events_lost: u64,
}

impl ChromeExport {
    /// The first pass over a recording: its graph through the analysis pipeline.
    pub fn read(path: &Path, clock: ClockKind) -> Result<Self, RecordingError> {
        Ok(Self::from_plan(TimelinePlan::read(path, clock)?))
    }

    #[cfg(test)]
    fn new(rg: &crate::graph::recorded::RecordedGraph) -> Self {
        Self::from_plan(TimelinePlan::new(rg))
    }

    fn from_plan(plan: TimelinePlan) -> Self {
        ChromeExport {
            events_recorded: plan.events_recorded,
            events_lost: plan.events_lost,
            plan,
        }
    }

    /// The second pass: streams the timeline of `source` (the same recording, in file
    /// order) to `out` as Chrome JSON and returns the writer.
    pub fn write<W: Write>(
        mut self,
        source: &mut (impl ItemSource + Send),
        out: W,
    ) -> Result<Written<ExportStats, W>, ExportError> {
        let mut out = EventWriter::begin(out, self.plan.base_ns)?;
        let mut stats = ExportStats::default();
        self.write_critical_path(&mut out, &mut stats)?;
        let streamed = self.plan.stream(source, &mut out, &mut stats)?;
        self.write_names(&mut out, &streamed.summary, &streamed.threads, &mut stats)?;
        let other = json!({
            "generator": concat!("tracer ", env!("CARGO_PKG_VERSION")),
            "clock": ClockKind::name(self.plan.clock),
            "critical_path_ns": self.plan.critical_length_ns,
            "time_zero_monotonic_ns": self.plan.base_ns,
        });
        Ok(Written {
            stats,
            out: out.finish(&other)?,
        })
    }

    fn write_critical_path<W: Write>(
        &self,
        out: &mut EventWriter<W>,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        let p = CRITICAL_PID;
        out.event(&Event::meta(
            "process_name",
            p,
            p,
            json!({ "name": "critical path" }),
        ))?;
        out.event(&Event::meta(
            "process_sort_index",
            p,
            p,
            json!({ "sort_index": -1 }),
        ))?;
        let thread = format!("critical path ({} clock)", ClockKind::name(self.plan.clock));
        out.event(&Event::meta("thread_name", p, p, json!({ "name": thread })))?;
        for s in &self.plan.critical {
            out.open();
            let b = &mut out.buf;
            let head = SliceHead {
                name: &s.procedure,
                cat: "critical_path",
                pid: p,
                tid: p,
                start_ns: s.start_ns,
                end_ns: s.end_ns,
            };
            put_slice_head(b, &head, out.base_ns);
            b.extend_from_slice(b",\"args\":{\"pid\":");
            put_int(b, s.pid);
            b.extend_from_slice(b",\"tid\":");
            put_int(b, s.tid);
            b.extend_from_slice(b",\"work_ms\":");
            put_decimal(b, s.work_ns as i128, 6);
            b.extend_from_slice(b",\"work_ns\":");
            put_int(b, s.work_ns);
            b.extend_from_slice(b"}}");
            out.spill()?;
            stats.critical_slices += 1;
            stats.critical_path_ns += s.work_ns;
        }
        Ok(())
    }

    /// Names of the processes (with their MPI rank or PVM task id) and threads.
    fn write_names<W: Write>(
        &self,
        out: &mut EventWriter<W>,
        summary: &Summary,
        threads: &BTreeSet<TrackedThread>,
        stats: &mut ExportStats,
    ) -> io::Result<()> {
        for p in &summary.processes {
            let name = self.plan.process_name(p);
            out.event(&Event::meta(
                "process_name",
                p.pid,
                p.pid,
                json!({ "name": name }),
            ))?;
            if let Some(r) = self.plan.rank(p) {
                out.event(&Event::meta(
                    "process_sort_index",
                    p.pid,
                    p.pid,
                    json!({ "sort_index": r }),
                ))?;
            }
            stats.processes += 1;
        }
        for &TrackedThread { pid, tid } in threads {
            let name = super::timeline::thread_name(pid, tid);
            out.event(&Event::meta(
                "thread_name",
                pid,
                tid,
                json!({ "name": name }),
            ))?;
            stats.threads += 1;
        }
        Ok(())
    }
}

impl<W: Write> TimelineSink for EventWriter<W> {
    fn slice(&mut self, s: &Slice) -> io::Result<()> {
        self.open();
        let b = &mut self.buf;
        let head = SliceHead {
            name: s.name,
            cat: s.cat,
            pid: s.pid,
            tid: s.tid,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        };
        put_slice_head(b, &head, self.base_ns);
        if let Some(args) = s.args.filter(|a| !a.is_empty()) {
            put_args(b, args);
        }
        b.push(b'}');
        self.spill()
    }

    /// The flow slice, listing its flows, and the flow events inside it ("s" binds to
    /// the enclosing slice; "f" with `bp: e` too).
    fn flow_slice(&mut self, s: &FlowSlice) -> io::Result<()> {
        self.open();
        let b = &mut self.buf;
        let head = SliceHead {
            name: s.name,
            cat: s.cat,
            pid: s.pid,
            tid: s.tid,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
        };
        put_slice_head(b, &head, self.base_ns);
        b.extend_from_slice(b",\"args\":{\"flows\":[");
        for (i, e) in s.ends.iter().enumerate() {
            if i > 0 {
                b.push(b',');
            }
            put_int(b, e.id);
        }
        b.extend_from_slice(b"]}}");
        for e in s.ends {
            self.open();
            let b = &mut self.buf;
            b.extend_from_slice(if e.start {
                b"{\"ph\":\"s\""
            } else {
                b"{\"ph\":\"f\""
            });
            common_fields(b, e.name, e.cat(), e.pid, s.tid);
            b.extend_from_slice(b",\"ts\":");
            put_decimal(b, s.flows_at_ns as i128 - self.base_ns as i128, 3);
            b.extend_from_slice(b",\"id\":");
            put_int(b, e.id);
            if !e.start {
                b.extend_from_slice(b",\"bp\":\"e\"");
            }
            b.push(b'}');
        }
        self.spill()
    }
}

/// What opens a complete ("X") slice event.
struct SliceHead<'a> {
    name: &'a str,
    cat: &'a str,
    pid: u32,
    tid: u32,
    start_ns: u64,
    end_ns: u64,
}

/// `{"ph":"X",` the name, category, pid, tid, start and duration (microseconds from
/// `base_ns`, exact to the nanosecond); the caller adds the arguments and the `}`.
fn put_slice_head(b: &mut Vec<u8>, s: &SliceHead, base_ns: u64) {
    b.extend_from_slice(b"{\"ph\":\"X\"");
    common_fields(b, s.name, s.cat, s.pid, s.tid);
    b.extend_from_slice(b",\"ts\":");
    put_decimal(b, s.start_ns as i128 - base_ns as i128, 3);
    b.extend_from_slice(b",\"dur\":");
    put_decimal(b, s.end_ns as i128 - s.start_ns as i128, 3);
}

/// An event's name, category (left out when empty, as [`Event`] does), pid and tid.
fn common_fields(b: &mut Vec<u8>, name: &str, cat: &str, pid: u32, tid: u32) {
    b.extend_from_slice(b",\"name\":");
    put_str(b, name);
    if !cat.is_empty() {
        b.extend_from_slice(b",\"cat\":");
        put_str(b, cat);
    }
    b.extend_from_slice(b",\"pid\":");
    put_int(b, pid);
    b.extend_from_slice(b",\"tid\":");
    put_int(b, tid);
}

/// `,"args":{...}`: a slice's named integers.
fn put_args(b: &mut Vec<u8>, args: &IntArgs) {
    b.extend_from_slice(b",\"args\":{");
    for (i, IntArg { name, value }) in args.iter().enumerate() {
        if i > 0 {
            b.push(b',');
        }
        put_str(b, name);
        b.push(b':');
        put_int(b, value);
    }
    b.push(b'}');
}

fn put_int(b: &mut Vec<u8>, v: impl itoa::Integer) {
    b.extend_from_slice(itoa::Buffer::new().format(v).as_bytes());
}

/// A JSON string: as it is when nothing in it needs escaping (every name the timeline
/// makes), else through serde_json.
fn put_str(b: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|c| c >= 0x20 && c != b'"' && c != b'\\') {
        b.push(b'"');
        b.extend_from_slice(s.as_bytes());
        b.push(b'"');
    } else {
        serde_json::to_writer(&mut *b, s).expect("a string is valid JSON");
    }
}

/// `units / 10^digits` in decimal and exact: nanoseconds as microseconds (3 digits:
/// "12.345", "-0.5", "3.0") or milliseconds (6). That is the JSON number whose value
/// is `units as f64 / 10^digits`, which serde_json formatted more slowly: both are the
/// double nearest to the exact quotient while |units| < 2^53 (104 days of ns).
fn put_decimal(b: &mut Vec<u8>, units: i128, digits: u32) {
    if units < 0 {
        b.push(b'-');
    }
    let units = units.unsigned_abs();
    // In u64 whenever it fits (every time of a recording does): u128 division and
    // formatting were 5 % of the export's samples.
    match u64::try_from(units) {
        Ok(units) => {
            let scale = 10u64.pow(digits);
            put_int(b, units / scale);
            put_fraction(b, units % scale, digits);
        }
        Err(_) => {
            let scale = 10u128.pow(digits);
            put_int(b, units / scale);
            put_fraction(b, (units % scale) as u64, digits);
        }
    }
}

/// `.` and the `digits` digits of `frac` (below 10^digits), trailing zeros left out
/// (one digit kept). Written digit by digit into a small array: through itoa, a zero
/// count and a padding, it cost about as much as the rest of the number.
fn put_fraction(b: &mut Vec<u8>, frac: u64, digits: u32) {
    let mut text = [b'0'; 20];
    let digits = (digits as usize).min(text.len());
    let mut rest = frac;
    for d in text[..digits].iter_mut().rev() {
        *d = b'0' + (rest % 10) as u8;
        rest /= 10;
    }
    let mut len = digits;
    while len > 1 && text[len - 1] == b'0' {
        len -= 1;
    }
    b.push(b'.');
    b.extend_from_slice(&text[..len]);
}

/// A metadata ("M") event: process and thread names and order (the timeline's other
/// events are formatted by hand, in the same field order).
#[derive(Serialize)]
struct Event<'a> {
    ph: &'static str,
    name: &'a str,
    pid: u32,
    tid: u32,
    ts: f64,
    args: Value,
}

impl<'a> Event<'a> {
    fn meta(name: &'a str, pid: u32, tid: u32, args: Value) -> Self {
        Event {
            ph: "M",
            name,
            pid,
            tid,
            ts: 0.0,
            args,
        }
    }
}

/// Writes the JSON object event by event into `buf`, and `buf` to `out` in chunks of
/// [`CHUNK`] bytes; times relative to `base_ns`.
struct EventWriter<W: Write> {
    out: W,
    buf: Vec<u8>,
    first: bool,
    base_ns: u64,
}

/// Bytes gathered before a write.
const CHUNK: usize = FORMATTED_BYTES;

impl<W: Write> EventWriter<W> {
    fn begin(out: W, base_ns: u64) -> io::Result<Self> {
        let mut buf = Vec::with_capacity(CHUNK + 4096);
        buf.extend_from_slice(b"{\"traceEvents\":[\n");
        Ok(EventWriter {
            out,
            buf,
            first: true,
            base_ns,
        })
    }

    /// Starts an event: the separator after the previous one.
    fn open(&mut self) {
        if !std::mem::take(&mut self.first) {
            self.buf.extend_from_slice(b",\n");
        }
    }

    /// Writes the buffer once it holds a chunk.
    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn event(&mut self, e: &Event) -> io::Result<()> {
        self.open();
        serde_json::to_writer(&mut self.buf, e)?;
        self.spill()
    }

    fn finish(mut self, other: &Value) -> io::Result<W> {
        self.buf
            .extend_from_slice(b"\n],\"displayTimeUnit\":\"ms\",\"otherData\":");
        serde_json::to_writer(&mut self.buf, other)?;
        self.buf.extend_from_slice(b"}\n");
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::timeline::{flow_slice, Endpoint, CRITICAL_FLOW_CAT};
    use crate::format::recording::{Item, ItemIter};
    use crate::format::synth::{self, SyntheticRun};
    use crate::graph::cpm::Schedule;
    use crate::graph::path::OUTSIDE;
    use crate::graph::recorded::RecordedGraph;
    use crate::graph::ArcKind;
    use std::collections::BTreeSet;
    use tracer_common::call;

    /// The decimals are the exact quotients, in u64 and past it: the digits of the
    /// integer divided with `/` and `%` in u128.
    #[test]
    fn decimals_are_exact_in_and_past_u64() {
        let big = u64::MAX as i128;
        for units in [
            0,
            5,
            -5,
            1000,
            -1500,
            123_456_789,
            big,
            -big,
            big + 1,
            -(big + 1),
            i128::from(i64::MIN),
        ] {
            for digits in [3, 6] {
                let mut b = Vec::new();
                put_decimal(&mut b, units, digits);
                let scale = 10u128.pow(digits);
                let abs = units.unsigned_abs();
                let frac = format!("{:0width$}", abs % scale, width = digits as usize);
                let frac = frac.trim_end_matches('0');
                let expected = format!(
                    "{}{}.{}",
                    if units < 0 { "-" } else { "" },
                    abs / scale,
                    if frac.is_empty() { "0" } else { frac }
                );
                assert_eq!(String::from_utf8(b).unwrap(), expected, "{units} {digits}");
            }
        }
    }

    /// A ring over 3 ranks, 4 rounds, with work inside and outside `work`.
    fn ring() -> Vec<Item> {
        synth::ring(Some(500))
    }

    /// An export of a synthetic run: what it wrote, the JSON, and the graph it drew.
    struct Exported {
        stats: ExportStats,
        json: Value,
        graph: RecordedGraph,
    }

    fn export(items: &[Item]) -> Exported {
        let graph = RecordedGraph::from_items(items, ClockKind::Cpu);
        let Written { stats, out: bytes } = ChromeExport::new(&graph)
            .write(&mut ItemIter(items.iter().cloned().map(Ok)), Vec::new())
            .unwrap();
        let json = serde_json::from_slice(&bytes).expect("valid JSON");
        Exported { stats, json, graph }
    }

    fn events<'a>(v: &'a Value, ph: &str) -> Vec<&'a Value> {
        v["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["ph"] == ph)
            .collect()
    }

    /// The slice of thread `tid` named `name` that strictly contains `ts`.
    fn inside<'a>(slices: &[&'a Value], tid: &Value, ts: f64, name: &str) -> Option<&'a Value> {
        slices.iter().copied().find(|s| {
            let start = s["ts"].as_f64().unwrap();
            let end = start + s["dur"].as_f64().unwrap();
            s["tid"] == *tid && s["name"] == name && start < ts && ts < end
        })
    }

    /// The innermost slice of the thread of `e` that strictly contains its time.
    fn innermost<'a>(slices: &[&'a Value], e: &Value) -> Option<&'a Value> {
        let ts = e["ts"].as_f64().unwrap();
        slices
            .iter()
            .copied()
            .filter(|s| {
                let start = s["ts"].as_f64().unwrap();
                s["pid"] == e["pid"]
                    && s["tid"] == e["tid"]
                    && start < ts
                    && ts < start + s["dur"].as_f64().unwrap()
            })
            .min_by(|a, b| a["dur"].as_f64().partial_cmp(&b["dur"].as_f64()).unwrap())
    }

    /// What Perfetto makes of the flows: each starts in a departure slice and ends in an
    /// arrival slice of its own (named after it, listing its id), the departure slice
    /// starting no later than the arrival slice; and the slices of every thread nest.
    fn check_flow_slices(v: &Value) {
        let slices = events(v, "X");
        let ends = events(v, "f");
        let starts = events(v, "s");
        assert_eq!(starts.len(), ends.len());
        for s in &starts {
            let f = ends.iter().find(|f| f["id"] == s["id"]).unwrap();
            let bound = |e: &Value, side: &str| {
                let slice = innermost(&slices, e).unwrap_or_else(|| panic!("{e}: no slice"));
                let name = format!("{} {side}", e["name"].as_str().unwrap());
                assert_eq!(slice["name"], name.as_str(), "{e}");
                assert_eq!(slice["cat"], e["cat"]);
                assert!(slice["args"]["flows"]
                    .as_array()
                    .unwrap()
                    .contains(&e["id"]));
                slice["ts"].as_f64().unwrap()
            };
            assert!(bound(s, "departure") <= bound(f, "arrival"), "{s} {f}");
            assert!(s["ts"].as_f64() < f["ts"].as_f64(), "{s} {f}");
        }
        for a in &slices {
            for b in &slices {
                if a["pid"] != b["pid"] || a["tid"] != b["tid"] {
                    continue;
                }
                let span = |s: &Value| {
                    let t = s["ts"].as_f64().unwrap();
                    (t, t + s["dur"].as_f64().unwrap())
                };
                let ((a0, a1), (b0, b1)) = (span(a), span(b));
                let overlap = a0 < b1 && b0 < a1;
                let nested = (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1);
                assert!(!overlap || nested, "{a} and {b} overlap");
            }
        }
    }

    #[test]
    fn ring_exports_slices_flows_and_the_critical_path() {
        let items = ring();
        let Exported {
            stats,
            json: v,
            graph: rg,
        } = export(&items);
        let slices = events(&v, "X");
        let named = |n: &str| {
            slices
                .iter()
                .filter(|s| s["name"] == n && s["pid"] != CRITICAL_PID)
                .count()
        };
        assert_eq!(named("MPI_Send"), 12);
        assert_eq!(named("MPI_Recv"), 12);
        assert_eq!(named("work"), 12);
        let send = slices.iter().find(|s| s["name"] == "MPI_Send").unwrap();
        assert_eq!(send["cat"], "mpi");
        assert_eq!(send["args"]["bytes"], 64);
        assert_eq!(send["pid"], send["tid"]);

        // One flow per dependency arc; ids unique, each start before its end, each end
        // strictly inside the sending and the receiving call.
        let deps = rg
            .graph
            .arcs
            .iter()
            .filter(|a| {
                let (from, to) = (
                    &rg.graph.vertices[a.from as usize],
                    &rg.graph.vertices[a.to as usize],
                );
                a.kind == ArcKind::Dependency && from.tid != to.tid
            })
            .count();
        assert_eq!(deps, 12);
        let starts = events(&v, "s");
        let ends = events(&v, "f");
        assert_eq!(starts.len(), deps);
        assert_eq!(ends.len(), deps);
        assert_eq!(stats.flows, deps as u64);
        let ids: BTreeSet<u64> = starts.iter().map(|e| e["id"].as_u64().unwrap()).collect();
        assert_eq!(ids.len(), deps);
        for s in &starts {
            let f = ends
                .iter()
                .find(|f| f["id"] == s["id"])
                .expect("matching end");
            assert_eq!(f["bp"], "e");
            assert_eq!(
                (f["name"].clone(), f["cat"].clone()),
                (s["name"].clone(), s["cat"].clone())
            );
            let (ts, tf) = (s["ts"].as_f64().unwrap(), f["ts"].as_f64().unwrap());
            assert!(ts < tf, "flow {} goes back in time", s["id"]);
            assert!(inside(&slices, &s["tid"], ts, "MPI_Send").is_some(), "{s}");
            assert!(inside(&slices, &f["tid"], tf, "MPI_Recv").is_some(), "{f}");
        }
        check_flow_slices(&v);
        assert_eq!(stats.flow_slices, 2 * deps as u64);

        // The critical path track adds up to the schedule's length.
        let length = Schedule::new(&rg.graph).length;
        let critical: Vec<&&Value> = slices.iter().filter(|s| s["pid"] == CRITICAL_PID).collect();
        assert!(!critical.is_empty());
        let work: u64 = critical
            .iter()
            .map(|s| s["args"]["work_ns"].as_u64().unwrap())
            .sum();
        assert_eq!(work, length);
        assert_eq!(stats.critical_path_ns, length);
        assert!(critical.iter().any(|s| s["name"] == "work"));
        assert!(critical.iter().any(|s| s["name"] == OUTSIDE));
        assert!(starts.iter().any(|s| s["cat"] == CRITICAL_FLOW_CAT));
        let work_ms: f64 = critical
            .iter()
            .map(|s| s["args"]["work_ms"].as_f64().unwrap())
            .sum();
        assert!((work_ms - length as f64 / 1e6).abs() < 1e-9);

        // Named processes (ranks from the launcher's environment) and threads.
        let meta = events(&v, "M");
        let mut names: Vec<&str> = meta
            .iter()
            .filter(|m| m["name"] == "process_name")
            .map(|m| m["args"]["name"].as_str().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                "critical path",
                "rank 0: ./app",
                "rank 1: ./app",
                "rank 2: ./app"
            ]
        );
        let threads = meta.iter().filter(|m| m["name"] == "thread_name").count();
        assert_eq!(threads, 4);
        assert_eq!(stats.slices, 36);
        assert_eq!(stats.unclosed, 0);
        assert_eq!(v["otherData"]["critical_path_ns"], length);
    }

    /// Threads: a new thread's start and a futex wakeup get slices at both ends, the
    /// new thread's arrival before its first record, and every arrow points forwards.
    #[test]
    fn thread_start_and_wakeup_flows_have_slices() {
        let Exported { stats, json: v, .. } = export(&synth::thread_fork_join());
        check_flow_slices(&v);
        let slices = events(&v, "X");
        let named = |n: &str| slices.iter().filter(|s| s["name"] == n).count();
        assert_eq!(named("thread start departure"), 1, "{v}");
        assert_eq!(named("thread start arrival"), 1);
        assert_eq!(named("wakeup departure"), 1);
        assert_eq!(named("wakeup arrival"), 1);
        assert_eq!(stats.flows, 2);
        assert_eq!(stats.flow_slices, 4);
        // The wakeup arrives inside the futex wait.
        let f = events(&v, "f")
            .into_iter()
            .find(|f| f["name"] == "wakeup")
            .unwrap();
        let ts = f["ts"].as_f64().unwrap();
        assert!(inside(&slices, &f["tid"], ts, "futex wait").is_some());
    }

    /// A flow of 3 µs between two threads with room around both vertices: its slices
    /// are as long as they may be (1 µs), and still its start event comes strictly
    /// before its end event (at one time, Perfetto may read the end first and drop it).
    #[test]
    fn a_short_flow_starts_before_it_ends() {
        let departure = Endpoint {
            ts_ns: 10_000,
            pid: 1,
            id: 1,
            start: true,
            span_ns: 3000,
            name: "wakeup",
            critical: false,
        };
        let arrival = Endpoint {
            ts_ns: 13_000,
            pid: 2,
            start: false,
            ..departure
        };
        let mut out = EventWriter::begin(Vec::new(), 0).unwrap();
        let mut stats = ExportStats::default();
        flow_slice(&mut out, &mut stats, &[departure], 1, 10_000, 50_000).unwrap();
        flow_slice(&mut out, &mut stats, &[arrival], 2, 0, 13_000).unwrap();
        let v: Value = serde_json::from_slice(&out.finish(&json!({})).unwrap()).unwrap();
        check_flow_slices(&v);
        assert!(events(&v, "X").iter().all(|s| s["dur"] == 1.0));
        assert_eq!((stats.flows, stats.flow_slices), (1, 2));
    }

    #[test]
    fn unclosed_calls_are_counted_not_drawn() {
        let mut s = SyntheticRun::new(2, &["work"]);
        s.compute(0, 1000, Some(0));
        s.call(0, call::MPI_SEND, 1, 0, false);
        let Exported { stats, json: v, .. } = export(&s.items);
        assert_eq!(
            events(&v, "X")
                .iter()
                .filter(|e| e["pid"] != CRITICAL_PID)
                .count(),
            1
        );
        assert_eq!(stats.unclosed, 1);
    }

    #[test]
    fn a_recording_error_stops_the_export() {
        let items = ring();
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let stream = items
            .iter()
            .take(10)
            .cloned()
            .map(Ok)
            .chain([Err(RecordingError::Truncated("test"))]);
        let err = ChromeExport::new(&rg)
            .write(&mut ItemIter(stream), Vec::new())
            .unwrap_err();
        assert!(matches!(
            err,
            ExportError::Recording(RecordingError::Truncated(_))
        ));
    }
}

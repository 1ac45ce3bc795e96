//! Perfetto's native protobuf trace (a `Trace`: a stream of `TracePacket`s), the
//! timeline of [`super::timeline`] as TrackEvents: one thread track per traced thread
//! under its process's track, every slice a SLICE_BEGIN/SLICE_END pair, the flows
//! carried by their departure slice (`flow_ids`) and arrival slice
//! (`terminating_flow_ids`), the critical path on a track of its own. The scheduler
//! records go in as Perfetto's own ftrace `sched_switch`, `sched_waking` and
//! `sched_wakeup_new`, so that Perfetto's scheduling views and its thread critical
//! path run on them, and two counter tracks count the traced threads running and
//! runnable. docs/exports.md describes the mapping.
//!
//! Times are the recording's own (CLOCK_MONOTONIC, ns); Perfetto takes them as its
//! trace clock.

use crate::format::node::ShownId;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{self, Write};

use serde::Serialize;

use super::protowire as wire;
use super::timeline::{
    thread_name, Endpoint, FlowSlice, IntArg, IntArgs, Slice, TimelinePlan, TimelineSink,
    TrackedThread,
};
use super::write_behind::FORMATTED_BYTES;
use super::written::Written;
use super::ExportError;
use crate::analysis::workclock::ClockKind;
use crate::format::recording::ItemSource;
use crate::format::records::Record;

pub use super::timeline::{ExportStats, CRITICAL_PID};

/// The messages of Perfetto's trace protos this export writes, with their published
/// field numbers (protos/perfetto/trace/trace_packet.proto, track_event/*.proto,
/// ftrace/ftrace_event.proto, ftrace/ftrace_event_bundle.proto, ftrace/sched.proto of
/// google/perfetto); fields it never sets are left out.
pub(crate) mod proto {
    /// `Trace`: the file is its packets, each as field 1 (the tests decode it; the
    /// export encodes packet by packet).
    #[cfg(test)]
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Trace {
        #[prost(message, repeated, tag = "1")]
        pub(crate) packet: Vec<TracePacket>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TracePacket {
        #[prost(uint64, optional, tag = "8")]
        pub(crate) timestamp: Option<u64>,
        #[prost(uint32, optional, tag = "10")]
        pub(crate) trusted_packet_sequence_id: Option<u32>,
        /// 1: SEQ_INCREMENTAL_STATE_CLEARED.
        #[prost(uint32, optional, tag = "13")]
        pub(crate) sequence_flags: Option<u32>,
        #[prost(message, optional, tag = "1")]
        pub(crate) ftrace_events: Option<FtraceEventBundle>,
        #[prost(message, optional, tag = "11")]
        pub(crate) track_event: Option<TrackEvent>,
        #[prost(message, optional, tag = "60")]
        pub(crate) track_descriptor: Option<TrackDescriptor>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TrackDescriptor {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) uuid: Option<u64>,
        #[prost(string, optional, tag = "2")]
        pub(crate) name: Option<String>,
        #[prost(message, optional, tag = "3")]
        pub(crate) process: Option<ProcessDescriptor>,
        #[prost(message, optional, tag = "4")]
        pub(crate) thread: Option<ThreadDescriptor>,
        #[prost(uint64, optional, tag = "5")]
        pub(crate) parent_uuid: Option<u64>,
        #[prost(message, optional, tag = "8")]
        pub(crate) counter: Option<CounterDescriptor>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ProcessDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub(crate) pid: Option<i32>,
        #[prost(string, optional, tag = "6")]
        pub(crate) process_name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct ThreadDescriptor {
        #[prost(int32, optional, tag = "1")]
        pub(crate) pid: Option<i32>,
        #[prost(int32, optional, tag = "2")]
        pub(crate) tid: Option<i32>,
        #[prost(string, optional, tag = "5")]
        pub(crate) thread_name: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct CounterDescriptor {
        /// 2: UNIT_COUNT.
        #[prost(int32, optional, tag = "3")]
        pub(crate) unit: Option<i32>,
    }

    pub(crate) const UNIT_COUNT: i32 = 2;

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct TrackEvent {
        #[prost(string, repeated, tag = "22")]
        pub(crate) categories: Vec<String>,
        #[prost(string, optional, tag = "23")]
        pub(crate) name: Option<String>,
        /// 1 SLICE_BEGIN, 2 SLICE_END, 4 COUNTER.
        #[prost(int32, optional, tag = "9")]
        pub(crate) r#type: Option<i32>,
        #[prost(uint64, optional, tag = "11")]
        pub(crate) track_uuid: Option<u64>,
        #[prost(int64, optional, tag = "30")]
        pub(crate) counter_value: Option<i64>,
        #[prost(message, repeated, tag = "4")]
        pub(crate) debug_annotations: Vec<DebugAnnotation>,
        #[prost(fixed64, repeated, packed = "false", tag = "47")]
        pub(crate) flow_ids: Vec<u64>,
        #[prost(fixed64, repeated, packed = "false", tag = "48")]
        pub(crate) terminating_flow_ids: Vec<u64>,
    }

    pub(crate) const SLICE_BEGIN: i32 = 1;
    pub(crate) const SLICE_END: i32 = 2;
    pub(crate) const COUNTER: i32 = 4;

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct DebugAnnotation {
        #[prost(string, optional, tag = "10")]
        pub(crate) name: Option<String>,
        #[prost(int64, optional, tag = "4")]
        pub(crate) int_value: Option<i64>,
        #[prost(double, optional, tag = "5")]
        pub(crate) double_value: Option<f64>,
        #[prost(string, optional, tag = "6")]
        pub(crate) string_value: Option<String>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct FtraceEventBundle {
        #[prost(uint32, optional, tag = "1")]
        pub(crate) cpu: Option<u32>,
        #[prost(message, repeated, tag = "2")]
        pub(crate) event: Vec<FtraceEvent>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct FtraceEvent {
        #[prost(uint64, optional, tag = "1")]
        pub(crate) timestamp: Option<u64>,
        /// The task running on the CPU (a thread id).
        #[prost(uint32, optional, tag = "2")]
        pub(crate) pid: Option<u32>,
        #[prost(message, optional, tag = "4")]
        pub(crate) sched_switch: Option<SchedSwitch>,
        #[prost(message, optional, tag = "20")]
        pub(crate) sched_waking: Option<SchedWaking>,
        #[prost(message, optional, tag = "114")]
        pub(crate) sched_wakeup_new: Option<SchedWaking>,
    }

    /// `SchedSwitchFtraceEvent`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct SchedSwitch {
        #[prost(int32, optional, tag = "2")]
        pub(crate) prev_pid: Option<i32>,
        #[prost(int32, optional, tag = "3")]
        pub(crate) prev_prio: Option<i32>,
        #[prost(int64, optional, tag = "4")]
        pub(crate) prev_state: Option<i64>,
        #[prost(int32, optional, tag = "6")]
        pub(crate) next_pid: Option<i32>,
        #[prost(int32, optional, tag = "7")]
        pub(crate) next_prio: Option<i32>,
    }

    /// `SchedWakingFtraceEvent` and `SchedWakeupNewFtraceEvent` (the same fields).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct SchedWaking {
        #[prost(int32, optional, tag = "2")]
        pub(crate) pid: Option<i32>,
        #[prost(int32, optional, tag = "3")]
        pub(crate) prio: Option<i32>,
        #[prost(int32, optional, tag = "4")]
        pub(crate) success: Option<i32>,
        #[prost(int32, optional, tag = "5")]
        pub(crate) target_cpu: Option<i32>,
    }
}

use proto::{TracePacket, TrackDescriptor};

/// The only packet sequence of the file.
const SEQUENCE: u32 = 1;
/// The kernel's default priority of a normal thread (what `sched_switch` reports).
const NORMAL_PRIO: i32 = 120;

/// Track uuids: one namespace per kind of track.
fn process_uuid(pid: u32) -> u64 {
    1 << 40 | pid as u64
}
fn thread_uuid(tid: u32) -> u64 {
    2 << 40 | tid as u64
}
const RUNNING_UUID: u64 = 3 << 40;
const RUNNABLE_UUID: u64 = 3 << 40 | 1;

/// What the Perfetto export wrote.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PerfettoStats {
    /// The timeline, as the Chrome export counts it.
    #[serde(flatten)]
    pub timeline: ExportStats,
    /// `sched_switch` events (a switch-out and a switch-in at one time on one CPU are
    /// one), `sched_waking` and `sched_wakeup_new` events.
    pub sched_switches: u64,
    pub sched_wakeups: u64,
    /// Values of the two counter tracks (traced threads running, runnable).
    pub counter_values: u64,
    /// Switches the recording misses, added at the next switch-out so that every
    /// switch leaves the task its CPU runs (see [`SchedState::switch`]).
    pub sched_repairs: u64,
    /// Threads only the scheduler events name (untraced wakers and CPU neighbours):
    /// Perfetto lists them as threads too.
    pub sched_only_threads: usize,
}

/// Writes `plan`'s timeline of `source` (the same recording, in file order) to `out` as
/// a Perfetto trace and returns the writer.
pub fn write_perfetto<W: Write>(
    mut plan: TimelinePlan,
    source: &mut (impl ItemSource + Send),
    out: W,
) -> Result<Written<PerfettoStats, W>, ExportError> {
    let mut w = PacketWriter {
        out: Packets {
            out,
            buf: Vec::with_capacity(CHUNK + 4096),
            first: true,
        },
        tracks: BTreeSet::new(),
        sched: SchedState::default(),
        stats: PerfettoStats::default(),
    };
    // Counter tracks before their values: Perfetto reads a counter value with its
    // track (thread and process tracks may come last, when their names are known).
    for (uuid, name) in [
        (RUNNING_UUID, "traced threads running"),
        (RUNNABLE_UUID, "traced threads runnable"),
    ] {
        w.descriptor(TrackDescriptor {
            uuid: Some(uuid),
            name: Some(name.into()),
            counter: Some(proto::CounterDescriptor {
                unit: Some(proto::UNIT_COUNT),
            }),
            ..Default::default()
        })?;
    }
    // The critical path: a thread of a pseudo process, as in the Chrome export.
    let mut timeline = ExportStats::default();
    let p = CRITICAL_PID;
    for s in &plan.critical {
        let args = IntArgs::new([
            IntArg::new("pid", s.pid as i64),
            IntArg::new("tid", s.tid as i64),
            IntArg::new("work_ns", s.work_ns as i64),
        ]);
        w.slice(&Slice {
            pid: p,
            tid: p,
            name: &s.procedure,
            cat: "critical_path",
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            args: Some(&args),
        })?;
        timeline.critical_slices += 1;
        timeline.critical_path_ns += s.work_ns;
    }
    let streamed = plan.stream(source, &mut w, &mut timeline)?;
    w.sched.flush(&mut w.out, &mut w.stats)?;

    // Tracks: named processes, their threads, the counters.
    let mut pids: BTreeSet<u32> = BTreeSet::new();
    let names: HashMap<u32, String> = streamed
        .summary
        .processes
        .iter()
        .map(|p| (p.pid, plan.process_name(p)))
        .collect();
    let clock = ClockKind::name(plan.clock);
    let threads: BTreeSet<TrackedThread> = streamed.threads.union(&w.tracks).copied().collect();
    pids.extend(names.keys());
    pids.extend(threads.iter().map(|t| t.pid));
    for &pid in &pids {
        let name = match (pid, names.get(&pid)) {
            (CRITICAL_PID, _) => "critical path".to_string(),
            (_, Some(n)) => n.clone(),
            (_, None) => format!("pid {}", ShownId(pid)),
        };
        w.descriptor(TrackDescriptor {
            uuid: Some(process_uuid(pid)),
            process: Some(proto::ProcessDescriptor {
                pid: Some(pid as i32),
                process_name: Some(name),
            }),
            ..Default::default()
        })?;
        timeline.processes += 1;
    }
    for &TrackedThread { pid, tid } in &threads {
        let name = if pid == CRITICAL_PID {
            format!("critical path ({clock} clock)")
        } else {
            thread_name(pid, tid).to_string()
        };
        w.descriptor(TrackDescriptor {
            uuid: Some(thread_uuid(tid)),
            parent_uuid: Some(process_uuid(pid)),
            thread: Some(proto::ThreadDescriptor {
                pid: Some(pid as i32),
                tid: Some(tid as i32),
                thread_name: Some(name),
            }),
            ..Default::default()
        })?;
        timeline.threads += 1;
    }
    let traced: HashSet<u32> = threads.iter().map(|t| t.tid).collect();
    w.stats.sched_only_threads = w.sched.tids.iter().filter(|t| !traced.contains(t)).count();
    w.stats.timeline = timeline;
    Ok(Written {
        stats: w.stats,
        out: w.out.finish()?,
    })
}

/// Bytes of packets gathered before a write.
const CHUNK: usize = FORMATTED_BYTES;

/// Writes packets one by one, each as field 1 of `Trace`, encoded into one buffer that
/// goes out in chunks (a big recording makes millions of packets).
struct Packets<W: Write> {
    out: W,
    buf: Vec<u8>,
    /// No packet written yet: the next one opens the sequence.
    first: bool,
}

impl<W: Write> Packets<W> {
    fn packet(&mut self, mut p: TracePacket) -> io::Result<()> {
        p.trusted_packet_sequence_id = Some(SEQUENCE);
        if std::mem::take(&mut self.first) {
            p.sequence_flags = Some(1);
        }
        // What `Trace { packet: vec![p] }.encode` writes.
        prost::encoding::message::encode(1, &p, &mut self.buf);
        self.spill()
    }

    /// A TrackEvent packet, written by hand: the bytes [`Self::packet`] writes for it.
    fn track_event(&mut self, ts: u64, e: &EventFields) -> io::Result<()> {
        let first = std::mem::take(&mut self.first);
        // TracePacket's fields in tag order: timestamp, sequence id, track_event, flags.
        wire::message(&mut self.buf, 1, |b| {
            wire::uint(b, 8, ts);
            wire::uint(b, 10, SEQUENCE.into());
            wire::message(b, 11, |b| e.encode(b));
            if first {
                wire::uint(b, 13, 1);
            }
        });
        self.spill()
    }

    /// One ftrace event in a bundle of its own, written by hand: the bytes
    /// [`Self::packet`] writes for it.
    fn ftrace_event(&mut self, cpu: u32, e: &SchedFields) -> io::Result<()> {
        let first = std::mem::take(&mut self.first);
        // TracePacket's fields in tag order: ftrace_events, sequence id, flags.
        wire::message(&mut self.buf, 1, |b| {
            wire::message(b, 1, |b| {
                wire::uint(b, 1, cpu.into());
                wire::message(b, 2, |b| e.encode(b));
            });
            wire::uint(b, 10, SEQUENCE.into());
            if first {
                wire::uint(b, 13, 1);
            }
        });
        self.spill()
    }

    fn spill(&mut self) -> io::Result<()> {
        if self.buf.len() >= CHUNK {
            self.out.write_all(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> io::Result<W> {
        self.out.write_all(&self.buf)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The timeline's packets, and the scheduler's.
struct PacketWriter<W: Write> {
    out: Packets<W>,
    /// Every thread track with an event.
    tracks: BTreeSet<TrackedThread>,
    sched: SchedState,
    stats: PerfettoStats,
}

impl<W: Write> PacketWriter<W> {
    fn packet(&mut self, p: TracePacket) -> io::Result<()> {
        self.out.packet(p)
    }

    fn descriptor(&mut self, d: TrackDescriptor) -> io::Result<()> {
        self.packet(TracePacket {
            track_descriptor: Some(d),
            ..Default::default()
        })
    }

    /// A slice on a thread track: its begin (with its arguments and flows) and end.
    fn begin_end(
        &mut self,
        at: &Slice,
        args: Option<&IntArgs>,
        flows: Option<&Flows>,
    ) -> io::Result<()> {
        self.tracks.insert(TrackedThread {
            pid: at.pid,
            tid: at.tid,
        });
        let track_uuid = thread_uuid(at.tid);
        let begin = EventFields {
            kind: proto::SLICE_BEGIN,
            track_uuid,
            names: Some(SliceNames {
                cat: at.cat,
                name: at.name,
            }),
            counter_value: None,
            args,
            flows,
        };
        self.out.track_event(at.start_ns, &begin)?;
        let end = EventFields {
            kind: proto::SLICE_END,
            track_uuid,
            names: None,
            counter_value: None,
            args: None,
            flows: None,
        };
        self.out.track_event(at.end_ns, &end)
    }
}

/// The category and name of a slice's begin.
struct SliceNames<'a> {
    cat: &'a str,
    name: &'a str,
}

/// The flows a flow slice's begin lists: it starts them (a departure) or ends them.
struct Flows<'a> {
    ends: &'a [Endpoint],
    departure: bool,
}

/// The fields of a `TrackEvent` this export sets (see [`proto::TrackEvent`]).
struct EventFields<'a> {
    kind: i32,
    track_uuid: u64,
    names: Option<SliceNames<'a>>,
    counter_value: Option<i64>,
    /// As debug annotations, by name.
    args: Option<&'a IntArgs>,
    flows: Option<&'a Flows<'a>>,
}

impl EventFields<'_> {
    /// The `TrackEvent`'s fields, in tag order.
    fn encode(&self, b: &mut Vec<u8>) {
        for IntArg { name, value } in self.args.iter().flat_map(|a| a.iter()) {
            // DebugAnnotation: int_value (4), name (10).
            wire::message(b, 4, |b| {
                wire::int(b, 4, value);
                wire::string(b, 10, name);
            });
        }
        wire::int(b, 9, self.kind.into());
        wire::uint(b, 11, self.track_uuid);
        if let Some(n) = &self.names {
            wire::string(b, 22, n.cat);
            wire::string(b, 23, n.name);
        }
        if let Some(v) = self.counter_value {
            wire::int(b, 30, v);
        }
        if let Some(f) = self.flows {
            // flow_ids (47) or terminating_flow_ids (48), not packed.
            let field = if f.departure { 47 } else { 48 };
            for e in f.ends {
                wire::fixed64(b, field, e.id);
            }
        }
    }
}

/// The fields of an `FtraceEvent` this export sets (see [`proto::FtraceEvent`]).
struct SchedFields {
    timestamp: u64,
    /// The task running on the CPU.
    pid: u32,
    event: SchedEvent,
}

#[derive(Clone, Copy)]
enum SchedEvent {
    Switch {
        prev_pid: u32,
        prev_state: i64,
        next_pid: u32,
    },
    /// `sched_waking`, or `sched_wakeup_new` when `new`.
    Waking {
        pid: u32,
        target_cpu: i32,
        new: bool,
    },
}

impl SchedFields {
    /// The `FtraceEvent`'s fields, in tag order (both priorities the normal one, a
    /// wakeup always a success).
    fn encode(&self, b: &mut Vec<u8>) {
        wire::uint(b, 1, self.timestamp);
        wire::uint(b, 2, self.pid.into());
        match self.event {
            SchedEvent::Switch {
                prev_pid,
                prev_state,
                next_pid,
            } => wire::message(b, 4, |b| {
                wire::int(b, 2, i64::from(prev_pid as i32));
                wire::int(b, 3, NORMAL_PRIO.into());
                wire::int(b, 4, prev_state);
                wire::int(b, 6, i64::from(next_pid as i32));
                wire::int(b, 7, NORMAL_PRIO.into());
            }),
            SchedEvent::Waking {
                pid,
                target_cpu,
                new,
            } => wire::message(b, if new { 114 } else { 20 }, |b| {
                wire::int(b, 2, i64::from(pid as i32));
                wire::int(b, 3, NORMAL_PRIO.into());
                wire::int(b, 4, 1);
                wire::int(b, 5, target_cpu.into());
            }),
        }
    }
}

impl<W: Write> TimelineSink for PacketWriter<W> {
    fn slice(&mut self, s: &Slice) -> io::Result<()> {
        self.begin_end(s, s.args, None)
    }

    /// Perfetto draws a flow from the slice that lists it in `flow_ids` to the one that
    /// lists it in `terminating_flow_ids`.
    fn flow_slice(&mut self, s: &FlowSlice) -> io::Result<()> {
        let flows = Flows {
            ends: s.ends,
            departure: s.ends.first().is_some_and(|e| e.start),
        };
        let slice = Slice {
            pid: s.pid,
            tid: s.tid,
            name: s.name,
            cat: s.cat,
            start_ns: s.start_ns,
            end_ns: s.end_ns,
            args: None,
        };
        self.begin_end(&slice, None, Some(&flows))
    }

    fn sched(&mut self, r: &Record) -> io::Result<()> {
        let counters = self.sched.record(r, &mut self.out, &mut self.stats)?;
        for CounterValue { track_uuid, value } in counters {
            let counter = EventFields {
                kind: proto::COUNTER,
                track_uuid,
                names: None,
                counter_value: Some(value),
                args: None,
                flows: None,
            };
            self.out.track_event(r.header().ts_ns, &counter)?;
            self.stats.counter_values += 1;
        }
        Ok(())
    }
}

/// A switch-out waiting for the switch-in the same tracepoint may have made (same CPU,
/// same time): together they are one `sched_switch`.
struct PendingOut {
    ts_ns: u64,
    tid: u32,
    prev_state: i64,
}

/// The scheduler records as ftrace events, and the counts of traced threads running and
/// runnable.
#[derive(Default)]
struct SchedState {
    pending: HashMap<u32, PendingOut>,
    running: HashSet<u32>,
    /// The task on each CPU after the last switch written (0: one the recording does
    /// not know).
    current: HashMap<u32, u32>,
    runnable: HashSet<u32>,
    /// Every thread id the scheduler events name.
    tids: BTreeSet<u32>,
}

/// A counter track's new value.
struct CounterValue {
    track_uuid: u64,
    value: i64,
}

impl SchedState {
    /// Writes what `r` completes; returns the counter values it changed.
    fn record<W: Write>(
        &mut self,
        r: &Record,
        out: &mut Packets<W>,
        stats: &mut PerfettoStats,
    ) -> io::Result<Vec<CounterValue>> {
        let h = r.header();
        let (running, runnable) = (self.running.len(), self.runnable.len());
        match r {
            Record::SwitchOut(s) => {
                if let Some(p) = self.pending.remove(&h.cpu) {
                    self.switch(out, stats, h.cpu, Some(&p), 0)?;
                }
                self.running.remove(&h.tid);
                // Preempted: still runnable.
                if s.prev_state == 0 {
                    self.runnable.insert(h.tid);
                }
                self.pending.insert(
                    h.cpu,
                    PendingOut {
                        ts_ns: h.ts_ns,
                        tid: h.tid,
                        prev_state: s.prev_state,
                    },
                );
            }
            Record::SwitchIn(_) => {
                let prev = self.pending.remove(&h.cpu);
                match prev {
                    Some(p) if p.ts_ns == h.ts_ns => {
                        self.switch(out, stats, h.cpu, Some(&p), h.tid)?
                    }
                    _ => {
                        if let Some(p) = prev {
                            self.switch(out, stats, h.cpu, Some(&p), 0)?;
                        }
                        let lone = PendingOut {
                            ts_ns: h.ts_ns,
                            tid: 0,
                            prev_state: 0,
                        };
                        self.switch(out, stats, h.cpu, Some(&lone), h.tid)?;
                    }
                }
                self.running.insert(h.tid);
                self.runnable.remove(&h.tid);
            }
            Record::Wakeup(w) | Record::WakeupNew(w) => {
                let event = SchedFields {
                    timestamp: h.ts_ns,
                    pid: h.tid,
                    event: SchedEvent::Waking {
                        pid: w.wakee_tid,
                        target_cpu: w.target_cpu,
                        new: matches!(r, Record::WakeupNew(_)),
                    },
                };
                self.tids
                    .extend([h.tid, w.wakee_tid].into_iter().filter(|&t| t != 0));
                out.ftrace_event(h.cpu, &event)?;
                stats.sched_wakeups += 1;
                if !self.running.contains(&w.wakee_tid) {
                    self.runnable.insert(w.wakee_tid);
                }
            }
            _ => {}
        }
        let mut changed = Vec::new();
        if self.running.len() != running {
            changed.push(CounterValue {
                track_uuid: RUNNING_UUID,
                value: self.running.len() as i64,
            });
        }
        if self.runnable.len() != runnable {
            changed.push(CounterValue {
                track_uuid: RUNNABLE_UUID,
                value: self.runnable.len() as i64,
            });
        }
        Ok(changed)
    }

    /// One `sched_switch` on `cpu` from `prev` (tid 0: a thread the recording does not
    /// know, shown as idle) to `next` (the same).
    fn switch<W: Write>(
        &mut self,
        out: &mut Packets<W>,
        stats: &mut PerfettoStats,
        cpu: u32,
        prev: Option<&PendingOut>,
        next: u32,
    ) -> io::Result<()> {
        let Some(p) = prev else { return Ok(()) };
        // A switch-in the recording misses (a lost event): the CPU's last task as the
        // recording has it went off it no later than `prev` went off, and Perfetto
        // counts a switch from a task that is not on its CPU as an error.
        match self.current.insert(cpu, next) {
            Some(on_cpu) if on_cpu != p.tid => {
                let missed = PendingOut {
                    ts_ns: p.ts_ns,
                    tid: on_cpu,
                    prev_state: 0,
                };
                stats.sched_repairs += 1;
                self.emit_switch(out, stats, cpu, &missed, p.tid)?;
            }
            _ => {}
        }
        self.emit_switch(out, stats, cpu, p, next)
    }

    fn emit_switch<W: Write>(
        &mut self,
        out: &mut Packets<W>,
        stats: &mut PerfettoStats,
        cpu: u32,
        p: &PendingOut,
        next: u32,
    ) -> io::Result<()> {
        self.tids
            .extend([p.tid, next].into_iter().filter(|&t| t != 0));
        let event = SchedFields {
            timestamp: p.ts_ns,
            pid: p.tid,
            event: SchedEvent::Switch {
                prev_pid: p.tid,
                prev_state: p.prev_state,
                next_pid: next,
            },
        };
        stats.sched_switches += 1;
        out.ftrace_event(cpu, &event)
    }

    /// Switch-outs still waiting, at the end.
    fn flush<W: Write>(
        &mut self,
        out: &mut Packets<W>,
        stats: &mut PerfettoStats,
    ) -> io::Result<()> {
        let mut pending: Vec<(u32, PendingOut)> = self.pending.drain().collect();
        pending.sort_by_key(|(cpu, p)| (p.ts_ns, *cpu));
        for (cpu, p) in pending {
            self.switch(out, stats, cpu, Some(&p), 0)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::recording::ItemIter;
    use crate::format::synth::thread_fork_join;
    use crate::graph::recorded::RecordedGraph;
    use prost::Message;
    use proto::{
        DebugAnnotation, FtraceEvent, FtraceEventBundle, SchedSwitch, SchedWaking, TrackEvent,
    };

    /// What `Packets::packet` writes for `p` (prost's bytes).
    fn prost_bytes(p: TracePacket, first: bool) -> Vec<u8> {
        let mut out = Packets {
            out: Vec::new(),
            buf: Vec::new(),
            first,
        };
        out.packet(p).unwrap();
        out.finish().unwrap()
    }

    fn by_hand(first: bool, write: impl FnOnce(&mut Packets<Vec<u8>>)) -> Vec<u8> {
        let mut out = Packets {
            out: Vec::new(),
            buf: Vec::new(),
            first,
        };
        write(&mut out);
        out.finish().unwrap()
    }

    /// The hand-written TrackEvent packets are prost's bytes: a slice begin with
    /// arguments (a negative one too), one with flows, an end, a counter, a long name.
    #[test]
    fn track_events_by_hand_are_prosts_bytes() {
        let args = IntArgs::new([
            IntArg::new("peer", 3),
            IntArg::new("tag", -1),
            IntArg::new("bytes", 1 << 33),
        ]);
        let end = |id, start| Endpoint {
            ts_ns: 5,
            pid: 7,
            id,
            start,
            span_ns: 9,
            name: "message",
            critical: false,
        };
        let ends = [end(1, true), end(300, true), end(u64::MAX, true)];
        let long = "p".repeat(200);
        for first in [true, false] {
            for departure in [true, false] {
                let flows = Flows {
                    ends: &ends,
                    departure,
                };
                let ids: Vec<u64> = ends.iter().map(|e| e.id).collect();
                for (name, args, flows) in [
                    ("MPI_Send", Some(&args), None),
                    (long.as_str(), None, Some(&flows)),
                ] {
                    let ours = by_hand(first, |p| {
                        let e = EventFields {
                            kind: proto::SLICE_BEGIN,
                            track_uuid: thread_uuid(77),
                            names: Some(SliceNames { cat: "mpi", name }),
                            counter_value: None,
                            args,
                            flows,
                        };
                        p.track_event(123_456_789, &e).unwrap()
                    });
                    let theirs = prost_bytes(
                        TracePacket {
                            timestamp: Some(123_456_789),
                            track_event: Some(TrackEvent {
                                r#type: Some(proto::SLICE_BEGIN),
                                track_uuid: Some(thread_uuid(77)),
                                categories: vec!["mpi".into()],
                                name: Some(name.into()),
                                debug_annotations: args
                                    .iter()
                                    .flat_map(|a| a.iter())
                                    .map(|a| DebugAnnotation {
                                        name: Some(a.name.into()),
                                        int_value: Some(a.value),
                                        ..Default::default()
                                    })
                                    .collect(),
                                flow_ids: if flows.is_some() && departure {
                                    ids.clone()
                                } else {
                                    Vec::new()
                                },
                                terminating_flow_ids: if flows.is_some() && !departure {
                                    ids.clone()
                                } else {
                                    Vec::new()
                                },
                                ..Default::default()
                            }),
                            ..Default::default()
                        },
                        first,
                    );
                    assert_eq!(ours, theirs);
                }
            }
            for (kind, counter_value) in [(proto::SLICE_END, None), (proto::COUNTER, Some(-5))] {
                let ours = by_hand(first, |p| {
                    let e = EventFields {
                        kind,
                        track_uuid: RUNNABLE_UUID,
                        names: None,
                        counter_value,
                        args: None,
                        flows: None,
                    };
                    p.track_event(1, &e).unwrap()
                });
                let theirs = prost_bytes(
                    TracePacket {
                        timestamp: Some(1),
                        track_event: Some(TrackEvent {
                            r#type: Some(kind),
                            track_uuid: Some(RUNNABLE_UUID),
                            counter_value,
                            ..Default::default()
                        }),
                        ..Default::default()
                    },
                    first,
                );
                assert_eq!(ours, theirs);
            }
        }
    }

    /// The hand-written ftrace packets are prost's bytes: a switch (to an unknown task,
    /// from a blocked one), a waking and a wakeup of a new thread.
    #[test]
    fn sched_events_by_hand_are_prosts_bytes() {
        let switch = SchedEvent::Switch {
            prev_pid: 4321,
            prev_state: 0x402,
            next_pid: 0,
        };
        let waking = |new| SchedEvent::Waking {
            pid: 99,
            target_cpu: -1,
            new,
        };
        for first in [true, false] {
            for event in [switch, waking(false), waking(true)] {
                let theirs_event = match event {
                    SchedEvent::Switch {
                        prev_pid,
                        prev_state,
                        next_pid,
                    } => FtraceEvent {
                        sched_switch: Some(SchedSwitch {
                            prev_pid: Some(prev_pid as i32),
                            prev_prio: Some(NORMAL_PRIO),
                            prev_state: Some(prev_state),
                            next_pid: Some(next_pid as i32),
                            next_prio: Some(NORMAL_PRIO),
                        }),
                        ..Default::default()
                    },
                    SchedEvent::Waking {
                        pid,
                        target_cpu,
                        new,
                    } => {
                        let w = SchedWaking {
                            pid: Some(pid as i32),
                            prio: Some(NORMAL_PRIO),
                            success: Some(1),
                            target_cpu: Some(target_cpu),
                        };
                        FtraceEvent {
                            sched_waking: (!new).then(|| w.clone()),
                            sched_wakeup_new: new.then_some(w),
                            ..Default::default()
                        }
                    }
                };
                let theirs = prost_bytes(
                    TracePacket {
                        ftrace_events: Some(FtraceEventBundle {
                            cpu: Some(3),
                            event: vec![FtraceEvent {
                                timestamp: Some(987_654_321),
                                pid: Some(4321),
                                ..theirs_event
                            }],
                        }),
                        ..Default::default()
                    },
                    first,
                );
                let ours = by_hand(first, |p| {
                    let e = SchedFields {
                        timestamp: 987_654_321,
                        pid: 4321,
                        event,
                    };
                    p.ftrace_event(3, &e).unwrap()
                });
                assert_eq!(ours, theirs);
            }
        }
    }

    /// A thread started and joined through a futex wakeup: the trace decodes, every
    /// slice begins and ends on a described thread track, each flow leaves from a
    /// departure and ends in an arrival that begins strictly later.
    #[test]
    fn threads_decode_with_tracks_slices_and_flows() {
        let items = thread_fork_join();
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        let Written { stats, out: bytes } = write_perfetto(
            TimelinePlan::new(&rg),
            &mut ItemIter(items.iter().cloned().map(Ok)),
            Vec::new(),
        )
        .unwrap();
        let trace = proto::Trace::decode(bytes.as_slice()).unwrap();
        assert_eq!(trace.packet[0].sequence_flags, Some(1));
        let tracks: HashSet<u64> = trace
            .packet
            .iter()
            .filter_map(|p| p.track_descriptor.as_ref()?.uuid)
            .collect();
        let events: Vec<(u64, &TrackEvent)> = trace
            .packet
            .iter()
            .filter_map(|p| Some((p.timestamp?, p.track_event.as_ref()?)))
            .collect();
        assert!(events
            .iter()
            .all(|(_, e)| tracks.contains(&e.track_uuid.unwrap())));
        let of = |t: i32| events.iter().filter(|(_, e)| e.r#type == Some(t)).count() as u64;
        let t = &stats.timeline;
        let slices = t.slices + t.flow_slices + t.critical_slices;
        assert_eq!(of(proto::SLICE_BEGIN), slices);
        assert_eq!(of(proto::SLICE_END), slices);
        assert_eq!((t.flows, t.flow_slices), (2, 4));
        assert_eq!(t.threads, 3, "main, thread 501, the critical path");
        for (ts, e) in &events {
            for id in &e.flow_ids {
                assert!(e.name.as_deref().unwrap().ends_with(" departure"));
                let (arrival_ts, arrival) = events
                    .iter()
                    .find(|(_, a)| a.terminating_flow_ids.contains(id))
                    .unwrap();
                assert!(arrival.name.as_deref().unwrap().ends_with(" arrival"));
                assert!(ts < arrival_ts, "flow {id}");
            }
        }
    }
}

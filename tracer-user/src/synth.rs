//! Synthetic recordings for unit tests: single-threaded MPICH ranks (pid = tid =
//! 100 + rank) whose records are written in causal order, with CPU clocks that advance
//! only where the test says work happens.

use tracer_common::{call, flavor, kind, CallRecord, EventHeader, SwitchRecord};

use crate::calls::MPICH_COMM_WORLD;
use crate::procfs::ProcessInfo;
use crate::recording::{FunctionProbe, Item};
use crate::records::Record;

/// Bytes of every synthetic message.
pub const MESSAGE_BYTES: i64 = 64;

pub struct SyntheticRun {
    pub items: Vec<Item>,
    pub ts: u64,
    pub cpu: Vec<u64>,
}

impl SyntheticRun {
    /// `ranks` processes and selected procedures named `procedures` (probe ids 1, 2, ...).
    pub fn new(ranks: usize, procedures: &[&str]) -> Self {
        let mut items = Vec::new();
        for (f, name) in procedures.iter().enumerate() {
            items.push(Item::Probe(FunctionProbe {
                id: f as u16 + 1,
                symbol: name.to_string(),
                path: "/x".into(),
                vaddr: 0,
            }));
        }
        for r in 0..ranks {
            items.push(Item::Process(ProcessInfo {
                pid: 100 + r as u32,
                ppid: 1,
                command: "./app".into(),
                env_rank: Some(r as i32),
                env_size: Some(ranks as i32),
                ..Default::default()
            }));
        }
        SyntheticRun {
            items,
            ts: 1_000_000,
            cpu: vec![0; ranks],
        }
    }

    /// A header on `rank`, 1 us after the previous record.
    pub fn header(&mut self, rank: usize, kind: u16, callf: u16) -> EventHeader {
        self.ts += 1000;
        let id = 100 + rank as u32;
        EventHeader {
            ts_ns: self.ts,
            cpu_ns: self.cpu[rank],
            tgid: id,
            tid: id,
            kind,
            call: callf,
            cpu: 0,
        }
    }

    /// `w` ns of CPU work on `rank`, inside selected procedure `f` if given (entry and
    /// exit records); outside, a switch-out record carries the clock forward.
    pub fn compute(&mut self, rank: usize, w: u64, f: Option<usize>) {
        if let Some(f) = f {
            let h = self.header(rank, kind::FUNC_ENTER, f as u16 + 1);
            self.items.push(Item::Record(Record::FuncEnter(h)));
        }
        self.cpu[rank] += w;
        let h = self.header(rank, kind::FUNC_EXIT, f.map(|f| f as u16 + 1).unwrap_or(0));
        self.items.push(Item::Record(match f {
            Some(_) => Record::FuncExit(h),
            None => Record::SwitchOut(SwitchRecord {
                header: EventHeader {
                    kind: kind::SWITCH_OUT,
                    ..h
                },
                prev_state: 1,
            }),
        }));
    }

    /// Entry or exit of MPI call `id` on `rank` (MPI_COMM_WORLD; peer and tag on entry,
    /// and on a receive's exit the actual source and tag).
    pub fn call(&mut self, rank: usize, id: u16, peer: i32, tag: i32, exit: bool) {
        let k = if exit {
            kind::CALL_EXIT
        } else {
            kind::CALL_ENTER
        };
        let h = self.header(rank, k, id | ((flavor::MPICH as u16) << 8));
        let mut c = CallRecord::unset(h);
        if exit {
            c.ret = 0;
            if id == call::MPI_RECV {
                c.peer = peer;
                c.tag = tag;
                c.bytes = MESSAGE_BYTES;
            }
        } else {
            c.comm = MPICH_COMM_WORLD;
            c.peer = peer;
            c.tag = tag;
            c.bytes = MESSAGE_BYTES;
        }
        self.items.push(Item::Record(if exit {
            Record::CallExit(c)
        } else {
            Record::CallEnter(c)
        }));
    }

    /// MPI_Send's entry and exit on `src`.
    pub fn send(&mut self, src: usize, dst: usize, tag: i32) {
        self.call(src, call::MPI_SEND, dst as i32, tag, false);
        self.call(src, call::MPI_SEND, 0, 0, true);
    }

    /// MPI_Recv's entry and exit on `dst`, from `src`.
    pub fn recv(&mut self, dst: usize, src: usize, tag: i32) {
        self.call(dst, call::MPI_RECV, src as i32, tag, false);
        self.call(dst, call::MPI_RECV, src as i32, tag, true);
    }

    /// A message from `src` to `dst`, received right away.
    pub fn message(&mut self, src: usize, dst: usize, tag: i32) {
        self.send(src, dst, tag);
        self.recv(dst, src, tag);
    }
}

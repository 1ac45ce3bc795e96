//! Message traffic: matched point-to-point messages (MPI and PVM) per ordered pair of
//! processes, and their latency from the send's entry to the receive's completion.
//! Machine pairs are sums of process pairs, made when the result is built.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::dist::{Distribution, Hist, Precision};
use crate::analysis::matcher::{MatchStats, MatchedMessage};

/// Accumulates the matcher's matches.
pub(crate) struct TrafficAcc {
    /// (sender pid, receiver pid) -> (messages, bytes).
    pairs: HashMap<(u32, u32), (u64, u64)>,
    unknown_size: u64,
    latency: Hist,
}

impl Default for TrafficAcc {
    fn default() -> Self {
        TrafficAcc {
            pairs: HashMap::new(),
            unknown_size: 0,
            latency: Hist::new(Precision::Fine),
        }
    }
}

impl TrafficAcc {
    pub(super) fn add(&mut self, m: &MatchedMessage) {
        let e = self.pairs.entry((m.from_pid, m.to_pid)).or_default();
        e.0 += 1;
        match m.bytes {
            Some(b) => e.1 += b,
            None => self.unknown_size += 1,
        }
        self.latency.record(m.recv_ts.saturating_sub(m.send_ts));
    }

    /// The traffic tables. `rank` names processes, `machine` places them, `elapsed_ns`
    /// (the program's) gives the rates.
    pub(super) fn finish(
        &self,
        rank: impl Fn(u32) -> Option<i32>,
        machine: impl Fn(u32) -> String,
        elapsed_ns: u64,
        matching: MatchStats,
    ) -> Traffic {
        let mut processes: Vec<ProcessPair> = self
            .pairs
            .iter()
            .map(|(&(from, to), &(messages, bytes))| ProcessPair {
                from_pid: from,
                to_pid: to,
                from_rank: rank(from),
                to_rank: rank(to),
                messages,
                bytes,
            })
            .collect();
        processes.sort_by_key(|p| {
            (
                p.from_rank.is_none(),
                p.from_rank,
                p.from_pid,
                p.to_rank,
                p.to_pid,
            )
        });
        let mut by_machine: BTreeMap<(String, String), (u64, u64)> = BTreeMap::new();
        for p in &processes {
            let e = by_machine
                .entry((machine(p.from_pid), machine(p.to_pid)))
                .or_default();
            e.0 += p.messages;
            e.1 += p.bytes;
        }
        let machines = by_machine
            .into_iter()
            .map(|((from, to), (messages, bytes))| MachinePair {
                from,
                to,
                messages,
                bytes,
            })
            .collect();
        let messages: u64 = processes.iter().map(|p| p.messages).sum();
        let bytes: u64 = processes.iter().map(|p| p.bytes).sum();
        let rate = |n: u64| (elapsed_ns > 0).then(|| n as f64 * 1e9 / elapsed_ns as f64);
        Traffic {
            messages,
            bytes,
            messages_unknown_size: self.unknown_size,
            messages_per_s: rate(messages),
            bytes_per_s: rate(bytes),
            processes,
            machines,
            latency: self.latency.summary(),
            matching,
        }
    }
}

/// Matched point-to-point traffic of the whole recording.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Traffic {
    pub messages: u64,
    /// Bytes of the messages whose size was known.
    pub bytes: u64,
    /// Messages whose size neither the send nor the receive's status told.
    pub messages_unknown_size: u64,
    /// Over the program's elapsed time.
    pub messages_per_s: Option<f64>,
    pub bytes_per_s: Option<f64>,
    /// Ordered pairs (sender, receiver) that exchanged messages, by sender rank.
    pub processes: Vec<ProcessPair>,
    /// The same, summed per ordered pair of machines.
    pub machines: Vec<MachinePair>,
    /// Send entry to receive completion, per message.
    pub latency: Distribution,
    /// What the matcher saw (sent, received, matched, unmatched, collectives).
    pub matching: MatchStats,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ProcessPair {
    pub from_pid: u32,
    pub to_pid: u32,
    pub from_rank: Option<i32>,
    pub to_rank: Option<i32>,
    pub messages: u64,
    pub bytes: u64,
}

#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct MachinePair {
    pub from: String,
    pub to: String,
    pub messages: u64,
    pub bytes: u64,
}

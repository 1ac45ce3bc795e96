//! Putting records in timestamp order. Records from different CPUs reach the ring buffer
//! in reservation order, which can differ slightly from timestamp order; the engine
//! needs causal order (a send before its receive), which timestamps from one machine
//! clock give. Online and offline analysis both go through this buffer.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::records::Record;

/// Online reordering: holds records until they are `window_ns` older than the newest
/// one seen, then releases them in timestamp order.
pub struct ReorderBuffer {
    window_ns: u64,
    newest: u64,
    seq: u64,
    heap: BinaryHeap<Reverse<(u64, u64, RecordBox)>>,
}

/// Orders by (ts, arrival) only; the record itself is payload.
struct RecordBox(Box<Record>);

impl PartialEq for RecordBox {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl Eq for RecordBox {}
impl PartialOrd for RecordBox {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for RecordBox {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl ReorderBuffer {
    pub fn new(window_ns: u64) -> Self {
        ReorderBuffer {
            window_ns,
            newest: 0,
            seq: 0,
            heap: BinaryHeap::new(),
        }
    }

    pub fn push(&mut self, r: Record) {
        let ts = r.header().ts_ns;
        self.newest = self.newest.max(ts);
        self.seq += 1;
        self.heap
            .push(Reverse((ts, self.seq, RecordBox(Box::new(r)))));
    }

    /// Records old enough to be in order.
    pub fn ready(&mut self, mut f: impl FnMut(&Record)) {
        let limit = self.newest.saturating_sub(self.window_ns);
        while let Some(Reverse((ts, _, _))) = self.heap.peek() {
            if *ts > limit {
                break;
            }
            let Reverse((_, _, r)) = self.heap.pop().unwrap();
            f(&r.0);
        }
    }

    /// Everything left, in order.
    pub fn flush(&mut self, mut f: impl FnMut(&Record)) {
        while let Some(Reverse((_, _, r))) = self.heap.pop() {
            f(&r.0);
        }
    }

    pub fn len(&self) -> usize {
        self.heap.len()
    }

    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::{kind, ExitRecord};

    fn rec(ts: u64) -> Record {
        let mut e = ExitRecord::default();
        e.header.kind = kind::EXIT;
        e.header.ts_ns = ts;
        Record::Exit(e)
    }

    #[test]
    fn releases_in_order_after_the_window() {
        let mut b = ReorderBuffer::new(10);
        let mut out = Vec::new();
        for ts in [5, 3, 20, 12, 14, 40] {
            b.push(rec(ts));
            b.ready(|r| out.push(r.header().ts_ns));
        }
        assert_eq!(out, vec![3, 5, 12, 14, 20]);
        b.flush(|r| out.push(r.header().ts_ns));
        assert_eq!(out, vec![3, 5, 12, 14, 20, 40]);
    }
}

//! Records through the reorder window into an analyzer: the same path live (`tracer
//! record`) and offline (`tracer analyze` on a recording).

use super::analyzer::Analyzer;
use super::engine::CriticalPathEngine;
use super::model::PathModel;
use super::reorder;
use super::workclock::ClockKind;
use crate::format::recording::Item;
use crate::format::records::Record;

/// How far records may be out of timestamp order in the stream (one ring buffer, many
/// CPUs); the engine sees them once they are this much older than the newest.
pub(crate) const REORDER_WINDOW_NS: u64 = 50_000_000;

/// Feeds a stream of items through the reorder window into an analyzer, the same way
/// `tracer record` does live, so a recording analysed later gives the same result.
pub struct Pipeline<M: PathModel = CriticalPathEngine> {
    pub analyzer: Analyzer<M>,
    reorder: reorder::ReorderBuffer,
}

impl Pipeline {
    pub fn new(clock: ClockKind) -> Self {
        Pipeline::with_model(clock, CriticalPathEngine::new())
    }
}

impl<M: PathModel> Pipeline<M> {
    pub(crate) fn with_model(clock: ClockKind, model: M) -> Self {
        Pipeline {
            analyzer: Analyzer::with_model(clock, model),
            reorder: reorder::ReorderBuffer::new(REORDER_WINDOW_NS),
        }
    }

    /// Facts (processes, probes) apply at once; records wait in the reorder window.
    pub fn item(&mut self, item: &Item) {
        match item {
            Item::Record(r) => self.record(r),
            other => self.analyzer.item(other),
        }
    }

    /// A record (waits in the reorder window).
    pub fn record(&mut self, r: &Record) {
        self.reorder.push(r);
        let a = &mut self.analyzer;
        self.reorder.ready(|r| a.record(&r));
    }

    /// [`Self::record`], calling `then` on each record the window releases, right after
    /// the analyzer took it (an export that writes rows in the analysis's own pass).
    pub(crate) fn record_then(
        &mut self,
        r: &Record,
        mut then: impl FnMut(&mut Analyzer<M>, &Record),
    ) {
        self.reorder.push(r);
        let a = &mut self.analyzer;
        self.reorder.ready(|r| {
            a.record(&r);
            then(a, &r);
        });
    }

    /// Releases everything still in the window to the analyzer, in order, calling `then`
    /// after each record as [`Self::record_then`] does ([`Self::flush`] then ends).
    pub(crate) fn drain_then(&mut self, mut then: impl FnMut(&mut Analyzer<M>, &Record)) {
        let a = &mut self.analyzer;
        self.reorder.flush(|r| {
            a.record(&r);
            then(a, &r);
        });
    }

    /// Everything still in the window, in order.
    pub fn flush(&mut self) -> &Analyzer<M> {
        let a = &mut self.analyzer;
        self.reorder.flush(|r| a.record(&r));
        a.settle_killed();
        &self.analyzer
    }
}

/// Runs the whole analysis over a recording's items.
pub fn analyze(items: &[Item], clock: ClockKind) -> Analyzer {
    let mut p = Pipeline::new(clock);
    for item in items {
        p.item(item);
    }
    p.flush();
    p.analyzer
}

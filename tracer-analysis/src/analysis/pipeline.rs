//! Records through the reorder window into an analyzer: the same path live (`tracer
//! record`) and offline (`tracer analyze` on a recording).

use super::analyzer::Analyzer;
use super::engine::CriticalPathEngine;
use super::model::PathModel;
use super::ordered::Ordered;
use super::reorder;
use super::workclock::ClockKind;
use crate::format::recording::Item;
use crate::format::records::Record;

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
            reorder: reorder::ReorderBuffer::new(reorder::REORDER_WINDOW_NS),
        }
    }

    /// Facts (processes, probes) apply at once; records wait in the reorder window.
    pub fn item(&mut self, item: &Item) {
        match item {
            Item::Record(r) => self.record(r),
            other => self.analyzer.item(other),
        }
    }

    /// An entry that came through a reorder window already (a pass that orders its
    /// records on a thread of its own, [`super::ordered`]): a fact applies as in
    /// [`Self::item`], a record goes straight to the analyzer.
    pub(crate) fn ordered(&mut self, entry: &Ordered) {
        match entry {
            Ordered::Record(r) => self.analyzer.record(r),
            Ordered::Fact(fact) => self.analyzer.item(fact),
        }
    }

    /// A record (waits in the reorder window).
    pub fn record(&mut self, r: &Record) {
        self.reorder.push(r);
        let a = &mut self.analyzer;
        self.reorder.ready(|r| a.record(&r));
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

//! The summary as a consumer: counts of what was seen.

use super::consumer::{ConsumerOutcome, RecordConsumer, SessionEnd};
use crate::session::SessionError;
use tracer_analysis::node::NodeInfo;
use tracer_analysis::recording::FunctionProbe;
use tracer_analysis::records::Record;
use tracer_analysis::summary::SummaryBuilder;
use tracer_analysis::ProcessInfo;

pub(super) struct SummaryConsumer {
    builder: SummaryBuilder,
    /// The recording's node table, which names each process's machine.
    nodes: Vec<NodeInfo>,
}

impl SummaryConsumer {
    pub(super) fn new(nodes: &[NodeInfo]) -> Self {
        SummaryConsumer {
            builder: SummaryBuilder::new(),
            nodes: nodes.to_vec(),
        }
    }
}

impl RecordConsumer for SummaryConsumer {
    fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
        self.builder.probe(probe);
        Ok(())
    }

    fn process(&mut self, info: &ProcessInfo) -> Result<(), SessionError> {
        self.builder.process(info);
        Ok(())
    }

    fn record(&mut self, _raw: &[u8], record: &Record) -> Result<(), SessionError> {
        self.builder.record(record);
        Ok(())
    }

    fn finish(self: Box<Self>, end: &SessionEnd) -> Result<ConsumerOutcome, SessionError> {
        let mut summary = self.builder.finish(end.failures.lost());
        summary.events.failures = end.failures.named();
        summary.name_nodes(&self.nodes);
        Ok(ConsumerOutcome::Summary(summary))
    }
}

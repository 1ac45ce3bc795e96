//! The online what-if replay as a consumer (`--whatif-placement`, `--whatif-network`).

use super::consumer::{ConsumerOutcome, RecordConsumer, SessionEnd};
use crate::session::SessionError;
use tracer_analysis::online::OnlineWhatIf;
use tracer_analysis::recording::{FunctionProbe, Item};
use tracer_analysis::records::Record;
use tracer_analysis::ProcessInfo;

pub(super) struct WhatIfConsumer {
    replay: OnlineWhatIf,
}

impl WhatIfConsumer {
    pub(super) fn new(replay: OnlineWhatIf) -> Self {
        WhatIfConsumer { replay }
    }
}

impl RecordConsumer for WhatIfConsumer {
    fn probe(&mut self, probe: &FunctionProbe) -> Result<(), SessionError> {
        self.replay.item(&Item::Probe(probe.clone()));
        Ok(())
    }

    fn process(&mut self, info: &ProcessInfo) -> Result<(), SessionError> {
        self.replay.item(&Item::Process(info.clone()));
        Ok(())
    }

    fn record(&mut self, _raw: &[u8], record: &Record) -> Result<(), SessionError> {
        self.replay.item(&Item::Record(record.clone()));
        Ok(())
    }

    fn finish(self: Box<Self>, _end: &SessionEnd) -> Result<ConsumerOutcome, SessionError> {
        Ok(ConsumerOutcome::WhatIf(self.replay.finish()))
    }
}

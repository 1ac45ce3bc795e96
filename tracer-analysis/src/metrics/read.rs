//! Metrics of a recording, streamed or in memory, and their call sites located.

use super::builder::MetricsBuilder;
use super::text;
use super::types::Metrics;
use crate::format::recording::{Item, RecordingError, RecordingMeta, RecordingReader};
use crate::format::Mapping;
use crate::symbolize::CodeLocator;

impl Metrics {
    /// Names the function, file and line of every call site in an object file (the
    /// object is read again: the recording keeps only its path and the offset).
    pub fn locate_sites(&mut self, locator: &mut dyn CodeLocator) {
        for s in &mut self.call_sites {
            let Some(object) = &s.object else { continue };
            let Ok(offset) = u64::from_str_radix(s.address.trim_start_matches("0x"), 16) else {
                continue;
            };
            let mapping = [Mapping {
                path: object.clone(),
                bias: 0,
            }];
            s.location = locator
                .locate_return(&mapping, offset)
                .map(|l| l.to_string());
        }
    }

    /// The metrics of a recording held in memory.
    pub fn from_items(items: &[Item], meta: &RecordingMeta) -> Metrics {
        let mut b = MetricsBuilder::new(meta);
        for item in items {
            b.item(item);
        }
        b.finish()
    }

    /// Streams a recording: memory grows with the program's shape (threads, processes,
    /// call kinds and sites), not with the recording's length.
    pub fn from_reader(reader: &mut RecordingReader) -> Result<Metrics, RecordingError> {
        let mut b = MetricsBuilder::new(&reader.meta);
        while let Some(item) = reader.next_item()? {
            b.item(&item);
        }
        b.events_lost(reader.totals().events_lost);
        Ok(b.finish())
    }

    /// For people: the levels, procedures, traffic and distributions as tables.
    pub fn text(&self) -> String {
        text::render(self)
    }
}

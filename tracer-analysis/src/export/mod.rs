//! Exports of a recording to other tools' formats (`tracer export`).
//!
//! An exporter reads the recording twice: once through the analysis, which builds the
//! program activity graph (messages matched, critical path computed), and once as a
//! stream of events for the timeline. Memory then holds the graph, never the events,
//! and the output is written as it is produced.

pub mod chrome;
pub mod flame;
pub mod pprof;
pub mod stacks;

use std::io;
use std::path::Path;

use crate::format::recording::{Item, RecordingError, RecordingReader};

/// Why an export failed: the recording could not be read, or the output not written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error(transparent)]
    Write(#[from] io::Error),
}

/// The items of a recording as an iterator; it ends after the first error.
pub fn recording_items(
    path: &Path,
) -> Result<impl Iterator<Item = Result<Item, RecordingError>>, RecordingError> {
    let mut reader = RecordingReader::open(path)?;
    let mut failed = false;
    Ok(std::iter::from_fn(move || {
        if failed {
            return None;
        }
        match reader.next_item() {
            Ok(item) => item.map(Ok),
            Err(e) => {
                failed = true;
                Some(Err(e))
            }
        }
    }))
}

//! What every exporter reads and how it fails: the recording as a stream of items.

use std::io;
use std::path::Path;

use crate::format::read_ahead::ReadAhead;
use crate::format::recording::{Item, RecordingError, RecordingReader};

/// Why an export failed: the recording could not be read, or the output not written.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error(transparent)]
    Recording(#[from] RecordingError),
    #[error(transparent)]
    Write(#[from] io::Error),
}

/// The items of a recording as an iterator, read and decoded ahead on another thread;
/// it ends after the first error.
pub fn recording_items(
    path: &Path,
) -> Result<impl Iterator<Item = Result<Item, RecordingError>>, RecordingError> {
    Ok(ReadAhead::new(RecordingReader::open(path)?))
}

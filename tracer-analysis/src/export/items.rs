//! What every exporter reads and how it fails: the recording as a stream of items.

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

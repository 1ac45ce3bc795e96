//! What an export hands back when it is done.

/// What an export wrote, and the writer it wrote to, given back finished: a test reads
/// the bytes out of a `Vec`, the CLI syncs the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written<S, W> {
    pub stats: S,
    pub out: W,
}

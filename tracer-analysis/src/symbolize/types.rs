//! What symbolizing says: a code location, or why a file's layout could not be read.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ElfLayoutError {
    #[error("cannot read {path}: {error}")]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("{path} is not an ELF file we can read: {error}")]
    Parse { path: PathBuf, error: object::Error },
}

/// Where a code address is, as source code sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodeLocation {
    /// The function (the innermost inlined one when the address is in inlined code).
    pub function: String,
    /// Source file, with its directory when the debug info has one.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// The executable or shared object the address is in.
    pub object: String,
}

impl std::fmt::Display for CodeLocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.function)?;
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, " at {file}:{line}"),
            (Some(file), None) => write!(f, " at {file}"),
            _ => write!(f, " in {}", self.object),
        }
    }
}

//! What can end a session before it starts or while it runs.

use std::path::PathBuf;

use crate::probes::ProbeError;
use crate::target::funcs::FuncError;
use tracer_analysis::format::recording::RecordingError;
use tracer_analysis::format::records;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("tracing needs root (CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN); run as root")]
    NotRoot,
    #[error("no process with PID {0}")]
    NoSuchProcess(u32),
    #[error("nothing to trace: give --pid PID, --all, or -- COMMAND")]
    NoTarget,
    #[error("command not found: {0}")]
    CommandNotFound(String),
    #[error("cannot read MPI/PVM library {path}: {reason}")]
    Library { path: PathBuf, reason: String },
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Func(#[from] FuncError),
    #[error("too many procedure probes (at most 65535)")]
    TooManyFunctionProbes,
    #[error("writing the recording")]
    Recording(#[from] RecordingError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("malformed record from the probes")]
    Decode(#[from] records::DecodeError),
}

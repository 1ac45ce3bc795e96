//! What can end a session before it starts or while it runs.

use std::path::PathBuf;

use super::WatchdogError;
use crate::probes::ProbeError;
use crate::remote::RemoteError;
use crate::target::funcs::FuncError;
use crate::target::symbols::SymbolError;
use tracer_analysis::recording::RecordingError;
use tracer_analysis::records;

#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("tracing needs root (CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN); run as root")]
    NotRoot,
    #[error("no process with PID {0}")]
    NoSuchProcess(u32),
    #[error("--pid {0} is the tracer itself or one of its helpers: it never traces itself")]
    TracerItself(u32),
    #[error("nothing to trace: give --pid PID, --all, or -- COMMAND")]
    NoTarget,
    #[error("command not found: {0}")]
    CommandNotFound(String),
    // The symbol error is shown inline, without its own source (the io error), as the
    // message always was.
    #[error("cannot read MPI/PVM library {path}: {error}")]
    Library { path: PathBuf, error: SymbolError },
    #[error("cannot read MPI/PVM library {path}: it defines no MPI or PVM entry point")]
    NotALibrary { path: PathBuf },
    #[error(transparent)]
    Probe(#[from] ProbeError),
    #[error(transparent)]
    Func(#[from] FuncError),
    #[error(transparent)]
    Watchdog(#[from] WatchdogError),
    #[error("too many procedure probes (at most 65535)")]
    TooManyFunctionProbes,
    #[error("writing the recording")]
    Recording(#[from] RecordingError),
    #[error("reading the recording {path} back for the analysis")]
    ReadBack {
        path: PathBuf,
        #[source]
        source: RecordingError,
    },
    #[error("--analyze-after reads the recording back once tracing ends: give -o FILE")]
    AnalyzeAfterWithoutRecording,
    #[error(
        "--analyze-after computes no profile while tracing: not with --interval or `tracer top`"
    )]
    AnalyzeAfterWithSamples,
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("{option} {path} cannot be written")]
    Unwritable {
        option: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{first} and {second} name the same file {path}")]
    SameOutput {
        first: &'static str,
        second: &'static str,
        path: PathBuf,
    },
    #[error("writing {path}")]
    WriteJson {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A command or argument with a NUL byte, which exec cannot take.
    #[error(transparent)]
    Nul(#[from] std::ffi::NulError),
    #[error("cannot write the command's output to {path}")]
    CommandOutput {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("malformed record from the probes")]
    Decode(#[from] records::DecodeError),
    /// An agent could not be reached, refused us, or its link failed before tracing.
    #[error(transparent)]
    Remote(#[from] RemoteError),
    #[error("at most {} nodes", tracer_analysis::node::MAX_NODES)]
    Nodes(#[from] tracer_analysis::node::NodeError),
}

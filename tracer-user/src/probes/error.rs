//! What can go wrong loading, attaching and reading the probes.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("tracefs: {0}")]
    Tracefs(String),
    #[error("kernel BTF: {0}")]
    Btf(String),
    #[error("loading the eBPF object failed: {0}")]
    Load(#[from] aya::EbpfError),
    #[error("eBPF program {name}: {source}")]
    Program {
        name: &'static str,
        source: aya::programs::ProgramError,
    },
    #[error("eBPF map {0} is missing or has the wrong type")]
    Map(&'static str),
    #[error("mapping eBPF map {name} into memory: {source}")]
    Mmap {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("counting the CPUs: {0}")]
    Cpus(String),
    #[error("eBPF map {name}: {source}")]
    MapOp {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("attaching to {symbol} in {path}: {source}")]
    Attach {
        symbol: String,
        path: PathBuf,
        source: aya::programs::ProgramError,
    },
}

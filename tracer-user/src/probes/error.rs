//! What can go wrong loading, attaching and reading the probes.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error("tracefs")]
    Tracefs(#[from] TracefsError),
    #[error("kernel BTF")]
    Btf(#[from] BtfError),
    // aya's loading errors print their source inside their own message too (`map error:
    // failed to create map X` whose source is `failed to create map X`): the chain is
    // written here once, and is not this error's source.
    #[error("loading the eBPF object failed: {}", one_line(.0))]
    Load(aya::EbpfError),
    #[error("eBPF program {name}")]
    Program {
        name: &'static str,
        source: aya::programs::ProgramError,
    },
    #[error("eBPF map {0} is missing or has the wrong type")]
    Map(&'static str),
    #[error("mapping eBPF map {name} into memory")]
    Mmap {
        name: &'static str,
        source: std::io::Error,
    },
    #[error("counting the CPUs: {what}")]
    Cpus {
        /// What aya could not read (the file of possible CPUs).
        what: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("eBPF map {name}")]
    MapOp {
        name: &'static str,
        source: aya::maps::MapError,
    },
    #[error("attaching to {symbol} in {path}")]
    Attach {
        symbol: String,
        path: PathBuf,
        source: aya::programs::ProgramError,
    },
}

/// Why the futex tracepoints' field offsets could not be read from tracefs.
#[derive(Debug, thiserror::Error)]
pub enum TracefsError {
    #[error("tracefs is not mounted and could not be mounted at /sys/kernel/tracing")]
    NotMounted,
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("tracepoint {group}:{name} has no field {field}")]
    NoField {
        group: String,
        name: String,
        field: String,
    },
}

/// Why the kernel's BTF (the types the probes read kernel structures with) is unusable.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    #[error("cannot read {path}")]
    Read {
        path: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is not BTF we can read")]
    Parse { path: &'static str },
    #[error("the kernel's BTF has no {structure}.{member}, which the tracepoint probes read")]
    NoMember {
        structure: &'static str,
        member: String,
    },
}

impl From<aya::EbpfError> for ProbeError {
    fn from(e: aya::EbpfError) -> Self {
        ProbeError::Load(e)
    }
}

/// An error and each of its sources once, on one line (`a: b: c`), for warnings that go
/// on without it (errors that stop a command are printed so by the CLI). A source that
/// the line says already (an error that prints its source in its own message) is left
/// out.
pub(crate) fn one_line(e: &dyn std::error::Error) -> String {
    let mut line = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !line.ends_with(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        source = s.source();
    }
    line
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[derive(Debug, thiserror::Error)]
    #[error("map error: {0}")]
    struct Inline(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("failed to create map `EVENTS`")]
    struct Inner(#[source] std::io::Error);

    #[test]
    fn a_source_printed_inline_is_written_once() {
        let e = Inline(Inner(std::io::Error::from_raw_os_error(22)));
        assert_eq!(
            one_line(&e),
            "map error: failed to create map `EVENTS`: Invalid argument (os error 22)"
        );
    }
}

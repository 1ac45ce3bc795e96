//! Unwinding the sampler's stacks (docs/sampling.md): each RAW_SAMPLE the probe copied
//! (user registers and the top of the user stack) becomes a SAMPLE record of return
//! addresses, with the unwind tables (`.eh_frame`) of the files the process maps
//! (`files`), one unwinder per traced process (`process`), all of them in `Unwinders`.

mod files;
mod process;
mod unwinders;

pub(crate) use unwinders::Unwinders;

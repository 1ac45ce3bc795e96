//! The OTF2 archive writer: the pure-Rust model of `tracer_analysis::otf2`
//! written through the OTF2 C library Debian ships (libopen-trace-format2, OTF2 3.0).

mod ffi;
mod writer;

pub use writer::{write_otf2, Otf2Error};

#![no_std]
// The probes are the `tracer-ebpf` binary (src/main.rs and the modules it declares), built
// for bpfel-unknown-none by tracer-user's build script. This empty library only lets cargo
// treat the crate as a workspace member on the host.

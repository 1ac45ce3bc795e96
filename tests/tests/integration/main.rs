//! The root-only integration tests, one binary with one module per area: each loads the
//! real probes into the real kernel and traces real programs (threads, Open MPI, MPICH,
//! PVM, OpenMP, real applications). `cargo xtask test` runs them one at a time; run one
//! area with `cargo test --release -p tracer-tests --test integration -- --test-threads=1 mpi::`.

mod applications;
mod binary;
mod cost;
mod critical_path;
mod demo;
mod errors;
mod export;
mod export_otf2;
mod export_parquet;
mod export_perfetto;
mod export_pvm;
mod faults;
mod lifecycle;
mod locks;
mod lost_events;
mod metrics;
mod mpi;
mod mpi_calls;
mod mpi_classes;
mod mpi_comms;
mod multinode;
mod network;
mod pvm;
mod recovery;
mod reliability;
mod report_html;
mod run_as;
mod sampled;
mod sampled_paths;
mod sampling;
mod sessions;
mod shared_memory;
mod symbols;
mod threads;
mod top;
mod whatif;
mod whole_machine;

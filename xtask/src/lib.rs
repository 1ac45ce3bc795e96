//! What the `xtask` commands share with the integration tests: running commands
//! (`util`), the demo's real application (`lammps`: how LAMMPS is traced and the three
//! lines the demo says of its report), so that the test of the demo runs the demo's own
//! code, and the lab of nodes on one machine (`netlab`), which the multinode tests and
//! the benchmark of jobs across nodes both run.

pub mod lammps;
pub mod netlab;
pub mod util;

//! What the `xtask` commands share with the integration tests: running commands
//! (`util`) and the demo's real application (`lammps`: how LAMMPS is traced and the three
//! lines the demo says of its report), so that the test of the demo runs the demo's own
//! code.

pub mod lammps;
pub mod util;

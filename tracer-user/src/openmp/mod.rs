//! OpenMP (libgomp): probing parallel regions, their outlined functions and the team
//! barriers, and lowering those records into waits and their releases (see `lowering`).

pub mod lowering;
pub mod probes;

pub use lowering::OpenMpLowering;
pub use probes::OpenMpProbes;

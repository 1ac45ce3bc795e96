//! What the recording keeps about a traced process (read from /proc by the tracer).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub ppid: u32,
    /// The command line, arguments joined by spaces.
    pub command: String,
    pub exe: String,
    /// MPI rank and size in MPI_COMM_WORLD as the launcher exported them
    /// (OMPI_COMM_WORLD_RANK, PMI_RANK, PMIX_RANK).
    pub env_rank: Option<i32>,
    pub env_size: Option<i32>,
    /// Mapped files and where their offset 0 is mapped.
    pub mappings: Vec<Mapping>,
    /// Open MPI: the process's MPI_COMM_WORLD handle (address of `ompi_mpi_comm_world`
    /// as the dynamic linker resolved it), when the library was mapped.
    #[serde(default)]
    pub mpi_world_handle: Option<u64>,
    /// Open MPI: the process's MPI_COMM_SELF handle (address of `ompi_mpi_comm_self`),
    /// found as `mpi_world_handle` is.
    #[serde(default)]
    pub mpi_self_handle: Option<u64>,
    /// The job the launcher says the process belongs to (PMIX_NAMESPACE, Open MPI's
    /// OMPI_MCA_ess_base_jobid): ranks started by daemons on two "nodes" have different
    /// parents but one job.
    #[serde(default)]
    pub env_job: Option<String>,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Mapping {
    pub path: String,
    /// Start address of the mapping of file offset 0.
    pub bias: u64,
}

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

impl ProcessInfo {
    /// Completes a later snapshot of the same program with what an earlier one saw: a
    /// process read while it exits has lost some or all of its mappings (and its command
    /// line and environment), and the records written before it exited still point into
    /// them. Files mapped now win; files mapped then and no longer stay.
    pub fn keep_earlier(&mut self, earlier: &ProcessInfo) {
        for m in &earlier.mappings {
            if !self.mappings.iter().any(|n| n.path == m.path) {
                self.mappings.push(m.clone());
            }
        }
        if self.command.is_empty() {
            self.command.clone_from(&earlier.command);
        }
        if self.exe.is_empty() {
            self.exe.clone_from(&earlier.exe);
        }
        if self.ppid == 0 {
            self.ppid = earlier.ppid;
        }
        self.env_rank = self.env_rank.or(earlier.env_rank);
        self.env_size = self.env_size.or(earlier.env_size);
        self.mpi_world_handle = self.mpi_world_handle.or(earlier.mpi_world_handle);
        self.mpi_self_handle = self.mpi_self_handle.or(earlier.mpi_self_handle);
        if self.env_job.is_none() {
            self.env_job.clone_from(&earlier.env_job);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mapping(path: &str, bias: u64) -> Mapping {
        Mapping {
            path: path.into(),
            bias,
        }
    }

    #[test]
    fn a_snapshot_taken_during_exit_keeps_what_the_earlier_one_saw() {
        let earlier = ProcessInfo {
            pid: 7,
            ppid: 3,
            command: "ring 5".into(),
            exe: "/bin/ring".into(),
            env_rank: Some(1),
            mappings: vec![mapping("/bin/ring", 0x5000), mapping("/lib/ld.so", 0x7000)],
            ..Default::default()
        };
        // Read as the process exits: libmpi is there, the program and ld.so are gone
        // already, and so are its command line and environment.
        let mut later = ProcessInfo {
            pid: 7,
            mappings: vec![
                mapping("/lib/libmpi.so", 0x9000),
                mapping("/lib/ld.so", 0x8000),
            ],
            ..Default::default()
        };
        later.keep_earlier(&earlier);
        assert_eq!(
            later.mappings,
            vec![
                mapping("/lib/libmpi.so", 0x9000),
                mapping("/lib/ld.so", 0x8000),
                mapping("/bin/ring", 0x5000),
            ]
        );
        assert_eq!(later.command, "ring 5");
        assert_eq!(later.exe, "/bin/ring");
        assert_eq!(later.ppid, 3);
        assert_eq!(later.env_rank, Some(1));
    }
}

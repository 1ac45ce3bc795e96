//! What /proc tells about a process: command line, parent, threads, MPI rank from the
//! launcher's environment, and where libraries are loaded.

use std::fs;
use std::path::PathBuf;

pub(crate) use tracer_analysis::{Mapping, ProcessInfo};

fn proc_path(pid: u32, what: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{what}"))
}

/// Whether `pid` exists and is not a zombie.
pub(crate) fn is_alive(pid: u32) -> bool {
    match fs::read_to_string(proc_path(pid, "stat")) {
        Ok(stat) => !matches!(stat_state(&stat), Some('Z') | Some('X')),
        Err(_) => false,
    }
}

fn stat_state(stat: &str) -> Option<char> {
    // "pid (comm) S ppid ...": comm may contain spaces and parentheses.
    stat.rfind(')')
        .and_then(|i| stat[i + 1..].trim_start().chars().next())
}

pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    let stat = fs::read_to_string(proc_path(pid, "stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

pub(crate) fn threads_of(pid: u32) -> Vec<u32> {
    let mut tids: Vec<u32> = fs::read_dir(proc_path(pid, "task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids
}

fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `root` and every process below it, now.
pub(crate) fn descendants(root: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = all_pids()
        .into_iter()
        .filter_map(|p| Some((p, parent_of(p)?)))
        .collect();
    let mut out = vec![root];
    let mut i = 0;
    while i < out.len() {
        let p = out[i];
        out.extend(parents.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    out
}

/// Every process that maps a file whose name contains one of `needles`.
pub(crate) fn processes_mapping(needles: &[&str]) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&p| {
            fs::read_to_string(proc_path(p, "maps"))
                .map(|m| needles.iter().any(|n| m.contains(n)))
                .unwrap_or(false)
        })
        .collect()
}

fn env_str(env: &[u8], names: &[&str]) -> Option<String> {
    env_find(env, names, |v| Some(v.to_string()))
}

fn env_int(env: &[u8], names: &[&str]) -> Option<i32> {
    env_find(env, names, |v| v.parse().ok())
}

/// The first variable of `names` (in the environment's order) that `parse` accepts.
fn env_find<T>(env: &[u8], names: &[&str], parse: impl Fn(&str) -> Option<T>) -> Option<T> {
    for var in env.split(|b| *b == 0) {
        let var = String::from_utf8_lossy(var);
        for name in names {
            if let Some(v) = var.strip_prefix(name).and_then(|r| r.strip_prefix('=')) {
                if let Some(x) = parse(v) {
                    return Some(x);
                }
            }
        }
    }
    None
}

/// Every mapped file with the address its offset 0 is mapped at.
pub(crate) fn mappings(pid: u32) -> Vec<Mapping> {
    let Ok(maps) = fs::read_to_string(proc_path(pid, "maps")) else {
        return Vec::new();
    };
    let mut out: Vec<Mapping> = Vec::new();
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(_perms), Some(offset)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(2).unwrap_or("");
        if !path.starts_with('/') || out.iter().any(|m| m.path == path) {
            continue;
        }
        let start = range
            .split('-')
            .next()
            .and_then(|s| u64::from_str_radix(s, 16).ok());
        let offset = u64::from_str_radix(offset, 16).ok();
        if let (Some(start), Some(0)) = (start, offset) {
            out.push(Mapping {
                path: path.to_string(),
                bias: start,
            });
        }
    }
    out
}

/// Everything /proc knows about `pid` now; fields stay empty if it is gone.
/// The MPI rank a launcher gave process `pid` in its environment, if any.
pub(crate) fn env_rank(pid: u32) -> Option<i32> {
    let env = fs::read(proc_path(pid, "environ")).ok()?;
    env_int(&env, RANK_VARIABLES)
}

/// Where MPI launchers put a rank's number (Open MPI, Hydra, PMIx).
const RANK_VARIABLES: &[&str] = &["OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"];

pub(crate) fn inspect(pid: u32) -> ProcessInfo {
    let command = fs::read(proc_path(pid, "cmdline"))
        .map(|c| {
            c.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default();
    let env = fs::read(proc_path(pid, "environ")).unwrap_or_default();
    ProcessInfo {
        pid,
        ppid: parent_of(pid).unwrap_or(0),
        command,
        exe: fs::read_link(proc_path(pid, "exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        env_rank: env_int(&env, RANK_VARIABLES),
        env_size: env_int(&env, &["OMPI_COMM_WORLD_SIZE", "PMI_SIZE"]),
        mappings: mappings(pid),
        mpi_world_handle: None,
        mpi_self_handle: None,
        env_job: env_str(&env, &["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inspects_this_process() {
        let me = std::process::id();
        let info = inspect(me);
        assert_eq!(info.pid, me);
        assert!(is_alive(me));
        assert!(threads_of(me).contains(&me));
        assert!(descendants(1).contains(&me));
        assert!(info.mappings.iter().any(|m| m.path.contains("libc")));
    }

    #[test]
    fn parses_state_after_odd_command_names() {
        assert_eq!(stat_state("12 (a) b) S 1 2"), Some('S'));
        assert_eq!(env_int(b"A=1\0PMI_RANK=3\0", &["PMI_RANK"]), Some(3));
    }
}

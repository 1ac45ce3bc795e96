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

/// Field `n` of /proc/PID/stat counted from the state (field 3) after the command,
/// which may contain spaces and parentheses.
fn stat_field<T: std::str::FromStr>(pid: u32, n: usize) -> Option<T> {
    let stat = fs::read_to_string(proc_path(pid, "stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n)?.parse().ok()
}

pub(crate) fn parent_of(pid: u32) -> Option<u32> {
    stat_field(pid, 1)
}

/// When `pid` started, in clock ticks since boot (`starttime`, field 22); None when it
/// is gone.
pub(crate) fn start_ticks(pid: u32) -> Option<u64> {
    stat_field(pid, 19)
}

/// Now, in the unit of `start_ticks` (clock ticks of CLOCK_BOOTTIME, as the kernel
/// counts `starttime`).
pub(crate) fn now_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) };
    ts.tv_sec as u64 * per_second + ts.tv_nsec as u64 * per_second / 1_000_000_000
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

/// Every mapped file, and the vDSO, with the address its offset 0 is mapped at.
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
        let named = path.starts_with('/') || path == crate::symbolize::vdso::VDSO;
        if !named || out.iter().any(|m| m.path == path) {
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
/// The job its launcher says process `pid` belongs to (as [`inspect`] reads it), if any.
pub(crate) fn job(pid: u32) -> Option<String> {
    let env = fs::read(proc_path(pid, "environ")).ok()?;
    job_of(&env, parent_of(pid).unwrap_or(0))
}

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
        env_job: job_of(&env, parent_of(pid).unwrap_or(0)),
    }
}

/// The job a process belongs to, named the same on every node the job runs on, from what
/// its launcher leaves (docs/multinode.md): PMIx's namespace (Open MPI and other PMIx
/// launchers), Open MPI's job id, a Slurm step, or the MPICH Hydra launcher's address
/// and process group, which its proxy on every node has on its command line.
fn job_of(env: &[u8], ppid: u32) -> Option<String> {
    if let Some(job) = env_str(env, &["PMIX_NAMESPACE", "OMPI_MCA_ess_base_jobid"]) {
        return Some(job);
    }
    if let (Some(job), Some(step)) = (
        env_str(env, &["SLURM_JOB_ID"]),
        env_str(env, &["SLURM_STEP_ID"]),
    ) {
        return Some(format!("slurm:{job}.{step}"));
    }
    let parent = fs::read(proc_path(ppid, "cmdline")).ok()?;
    hydra_job(&parent)
}

/// The job of a rank whose parent is a Hydra proxy (`hydra_pmi_proxy --control-port
/// HOST:PORT ... --pgid N`, NUL-separated as /proc has it): the launcher's control
/// address and the process group, the same for the job's proxies on every node.
fn hydra_job(parent_cmdline: &[u8]) -> Option<String> {
    let args: Vec<String> = parent_cmdline
        .split(|b| *b == 0)
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    if !args.first()?.ends_with("hydra_pmi_proxy") {
        return None;
    }
    let value = |flag: &str| {
        let at = args.iter().position(|a| a == flag)?;
        args.get(at + 1).cloned()
    };
    Some(format!(
        "hydra:{}:{}",
        value("--control-port")?,
        value("--pgid").unwrap_or_default()
    ))
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
    fn names_a_job_by_what_its_launcher_leaves() {
        assert_eq!(
            job_of(b"PMIX_NAMESPACE=prterun-vm-1@1\0", 0).as_deref(),
            Some("prterun-vm-1@1")
        );
        assert_eq!(
            job_of(b"SLURM_STEP_ID=0\0SLURM_JOB_ID=42\0", 0).as_deref(),
            Some("slurm:42.0")
        );
        let proxy = [
            "/usr/bin/hydra_pmi_proxy",
            "--control-port",
            "10.77.1.1:35447",
            "--rmk",
            "user",
            "--pgid",
            "0",
            "--proxy-id",
            "1",
        ]
        .join("\0");
        let proxy = proxy.as_bytes();
        assert_eq!(hydra_job(proxy).as_deref(), Some("hydra:10.77.1.1:35447:0"));
        assert_eq!(hydra_job(b"/bin/bash\0--control-port\0x\0"), None);
    }

    #[test]
    fn parses_state_after_odd_command_names() {
        assert_eq!(stat_state("12 (a) b) S 1 2"), Some('S'));
        assert_eq!(env_int(b"A=1\0PMI_RANK=3\0", &["PMI_RANK"]), Some(3));
    }
}

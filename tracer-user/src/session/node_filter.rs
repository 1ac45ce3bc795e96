//! A node's share of a job across nodes: the processes of the tracer's own network
//! namespace. On real nodes every process a tracer sees is on its node and this keeps
//! them all; on one machine whose nodes are network namespaces (the test lab, containers
//! on one kernel), a collector that launched `mpirun` also sees the ranks mpirun started
//! in another namespace, whose records that namespace's agent sends. Each is kept by one
//! tracer only, so each process is one node's.
//!
//! An agent traces the collector's job only: the processes that start after its session
//! did (the collector launches its command once every agent traces), not another job
//! running on the node already, whatever MPI calls it makes; and once the collector has
//! said its job's name (what the launcher leaves in a rank's environment or process
//! tree, `procfs::job`), not a process that names another job either (a job started on
//! the node during the session).

use std::os::unix::fs::MetadataExt;

use rustc_hash::FxHashMap;

use crate::remote::CollectorJob;
use crate::target::procfs;
use tracer_analysis::records::Record;

/// Decides, per process, whether a record is this node's.
pub(super) struct NodeFilter {
    /// The inode of this tracer's network namespace.
    own: u64,
    /// Each process's answer, taken at its first record and again at each exec (a
    /// launcher's `nsenter` enters the namespace, then execs the node's daemon); a
    /// child's is its parent's at the fork, so that a child gone before its first record
    /// is read (a short-lived helper, a rank whose first record here is its exit) is
    /// still placed.
    ours: FxHashMap<u32, bool>,
    /// Only processes started at or after this time (clock ticks since boot, as
    /// /proc/PID/stat's `starttime`), when set.
    started_since_ticks: Option<u64>,
    /// Only processes of this job or of none, once the collector names it.
    job: Option<CollectorJob>,
}

/// The inode of a process's network namespace, None when it is gone.
fn net_namespace(pid: &str) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

impl NodeFilter {
    pub(super) fn of_this_tracer() -> std::io::Result<NodeFilter> {
        let own = std::fs::metadata("/proc/self/ns/net")?.ino();
        Ok(NodeFilter {
            own,
            ours: FxHashMap::default(),
            started_since_ticks: None,
            job: None,
        })
    }

    /// The same, keeping only processes that start from now on (a tick of the clock
    /// early: `starttime` counts whole ticks).
    pub(super) fn started_from_now_on(self) -> NodeFilter {
        NodeFilter {
            started_since_ticks: Some(procfs::now_ticks()),
            ..self
        }
    }

    /// The same, leaving out the processes of another job than `job` once it is set
    /// (a process that names no job, a launcher's daemon, stays).
    pub(super) fn of_job(self, job: CollectorJob) -> NodeFilter {
        NodeFilter {
            job: Some(job),
            ..self
        }
    }

    /// Whether `rec` belongs to this node: its process's (for a wakeup, the woken
    /// process's, whose wait it ends). A process already gone when first asked about,
    /// with no fork seen, is kept: nothing says it was elsewhere.
    pub(super) fn keeps(&mut self, rec: &Record) -> bool {
        let pid = match rec {
            Record::Wakeup(w) | Record::WakeupNew(w) if w.wakee_tgid != 0 => w.wakee_tgid,
            _ => rec.header().tgid,
        };
        if pid == 0 {
            return true;
        }
        if matches!(rec, Record::Exec(_)) {
            self.ours.remove(&pid);
        }
        let (own, since) = (self.own, self.started_since_ticks);
        let job = self.job.as_ref().and_then(|j| j.get());
        let ours = *self.ours.entry(pid).or_insert_with(|| {
            net_namespace(&pid.to_string()).is_none_or(|ns| ns == own)
                && since.is_none_or(|since| procfs::start_ticks(pid).is_none_or(|t| t >= since))
                && job.is_none_or(|job| procfs::job(pid).is_none_or(|j| j == *job))
        });
        match rec {
            Record::Exit(x) => {
                // A thread's id (below), and the process's once its last thread ends.
                self.ours.remove(&rec.header().tid);
                if x.group_dead != 0 {
                    self.ours.remove(&pid);
                }
            }
            // A new thread's id as well as a new process's: a thread's id is never
            // another process's while the thread lives, and it is dropped with it.
            Record::Fork(f) if f.child_tid != 0 => {
                self.ours.insert(f.child_tid, ours);
            }
            _ => {}
        }
        ours
    }
}

#[cfg(test)]
mod tests {
    use super::NodeFilter;
    use tracer_analysis::records::Record;
    use tracer_common::EventHeader;

    #[test]
    fn from_now_on_a_process_running_already_is_left_out() {
        let of = |tgid| {
            Record::FuncEnter(EventHeader {
                tgid,
                tid: tgid,
                ..Default::default()
            })
        };
        let old = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        // starttime counts ticks (10 ms at 100 Hz): the filter starts two ticks later.
        std::thread::sleep(std::time::Duration::from_millis(50));
        let mut f = NodeFilter::of_this_tracer().unwrap().started_from_now_on();
        let new = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        assert!(!f.keeps(&of(old.id())), "started before the session");
        assert!(f.keeps(&of(new.id())), "started after");
        // A process gone before its first record: nothing says it is not the job's.
        assert!(f.keeps(&of(4_000_001)));
        for mut child in [old, new] {
            child.kill().unwrap();
            child.wait().unwrap();
        }
    }

    #[test]
    fn a_process_in_another_network_namespace_is_another_nodes() {
        let of = |tgid| {
            Record::FuncEnter(EventHeader {
                tgid,
                tid: tgid,
                ..Default::default()
            })
        };
        // `unshare` enters a new network namespace, then execs `sleep` as the same pid.
        let mut other = std::process::Command::new("unshare")
            .args(["--net", "--", "sleep", "30"])
            .spawn()
            .expect("unshare (util-linux) runs; the tests run as root");
        let pid = other.id();
        let own = std::fs::metadata("/proc/self/ns/net").unwrap();
        let moved = (0..500).any(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe.ends_with("sleep"))
        });
        assert!(moved, "unshare did not exec sleep");
        let mut f = NodeFilter::of_this_tracer().unwrap();
        assert_eq!(f.own, {
            use std::os::unix::fs::MetadataExt;
            own.ino()
        });
        assert!(f.keeps(&of(std::process::id())));
        assert!(!f.keeps(&of(pid)));
        assert!(!f.keeps(&of(pid)), "the answer is kept");
        // A child it forks is on its node, even gone before its first record is read
        // (no such pid: /proc cannot say).
        let gone_child = 4_000_000;
        assert!(!std::path::Path::new(&format!("/proc/{gone_child}")).exists());
        let fork = Record::Fork(tracer_common::ForkRecord {
            header: EventHeader {
                tgid: pid,
                tid: pid,
                ..Default::default()
            },
            child_tid: gone_child,
            _reserved: 0,
        });
        assert!(!f.keeps(&fork));
        assert!(!f.keeps(&of(gone_child)));
        other.kill().unwrap();
        other.wait().unwrap();
        // Gone: nothing says it was elsewhere, once its exit let the answer go.
        f.ours.clear();
        assert!(f.keeps(&of(pid)));
    }
}

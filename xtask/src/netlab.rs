//! A network lab on one machine: two network namespaces joined by a veth pair,
//! optionally shaped with tbf (this kernel has no netem, so rate is all we can shape),
//! or three and more joined by a bridge, and the launchers that run an MPI job with rank
//! i inside namespace i over that link.
//!
//! Layout of a lab (`N` is unique per lab in this process, names carry the pid):
//!
//! ```text
//!   netns tracerlab-PID-K-0            netns tracerlab-PID-K-1
//!     lo up, lab0 10.77.N.1/24  <--veth-->  lab0 10.77.N.2/24, lo up
//!     (tbf on lab0 egress)                  (tbf on lab0 egress)
//!
//!   with three nodes and more (`NetLab::bridged`): each node's lab0 is a veth whose
//!   peer, portI, is a port of the bridge lab0 in netns tracerlab-PID-K-switch
//!   node i: lab0 10.77.N.(i+1)/24
//! ```
//!
//! Each node also has a UTS namespace of its own, host name `nodeI` (kept in
//! `/run/tracerlab-uts/NETNS`); everything the lab runs in a node enters both (`enter`
//! for tracers, `ip netns exec` in that host name for launchers and ranks).
//!
//! Open MPI: `mpirun` runs in namespace 0 with a hostfile naming the two addresses; it
//! starts its daemon for the second "node" through `plm_rsh_agent`, a generated script
//! standing in for ssh that runs the daemon in namespace 1. Each rank then talks to its
//! own node's daemon over that namespace's loopback (PMIx), and to the other rank with
//! the TCP BTL over the veth. (Wrapping each rank in `ip netns exec` under one mpirun
//! does not work: PMIx reaches mpirun over 127.0.0.1, which is another loopback in the
//! rank's namespace, and MPI_Init fails with "OPAL ERROR: Unreachable".)
//!
//! MPICH (hydra): the same trick with `-launcher ssh -launcher-exec AGENT -hosts A,B`;
//! UCX is told to use TCP on lab0.
//!
//! Everything (namespaces, hence the veth and its qdiscs, and the scripts) goes away in
//! Drop; labs left behind by a killed test process are removed by the next lab.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Name of the veth end in each namespace.
pub const DEVICE: &str = "lab0";
/// MTU of the veth (the Ethernet default, so TCP segments look like a real LAN's).
pub const MTU: u32 = 1500;
/// tbf bucket size, small so that the link paces all but the first frames of a message.
/// It must exceed a full frame (1514 bytes: tbf rounds `burst 1514` down to 1512 and then
/// stalls full frames); 2000 bytes gives latencies within 1 % of the rate model (docs/
/// network-table.md). A message of this many bytes or fewer leaves at once when the
/// bucket is full: tbf shapes rate, not the serialization delay of a lone small packet,
/// and without netem there is no added propagation delay either.
pub const BURST_BYTES: u64 = 2000;
/// Bytes on the wire per full TCP segment beyond its payload: Ethernet 14, IPv4 20,
/// TCP 20 + 12 (timestamps). tbf counts the frame with its Ethernet header.
pub const SEGMENT_OVERHEAD: u64 = 66;
/// TCP payload per segment at MTU 1500 with timestamps.
pub const MSS: u64 = MTU as u64 - 20 - 32;

const PREFIX: &str = "tracerlab-";
/// Where each node's UTS namespace is kept (a file per node, named as its network
/// namespace, bind-mounted by `unshare --uts=FILE`): its own host name, `nodeI`.
const UTS_DIR: &str = "/run/tracerlab-uts";

/// The arguments that run a tracer in node namespace `ns`: its network and its host
/// name. `nsenter`, not `ip netns exec`, which remounts /sys and hides tracefs and bpffs.
pub fn enter(ns: &str) -> Vec<String> {
    vec![
        "nsenter".to_string(),
        format!("--net=/run/netns/{ns}"),
        format!("--uts={UTS_DIR}/{ns}"),
    ]
}

/// The arguments that run a launcher or a rank in node namespace `ns`: `ip netns exec`,
/// whose /sys shows the namespace's network devices (UCX finds `lab0` there), in the
/// node's host name.
fn enter_for_mpi(ns: &str) -> Vec<String> {
    [
        "nsenter",
        &format!("--uts={UTS_DIR}/{ns}"),
        "ip",
        "netns",
        "exec",
        ns,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Namespaces joined by a veth (two) or a bridge (more), deleted on drop.
pub struct NetLab {
    /// Node i's namespace.
    ns: Vec<String>,
    /// The bridge's namespace, for three nodes and more.
    switch: Option<String>,
    subnet: u32,
    rate_bps: Option<u64>,
    dir: PathBuf,
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}

fn in_ns(ns: &str, cmd: &[&str]) {
    let mut args = vec!["netns", "exec", ns];
    args.extend_from_slice(cmd);
    ip(&args);
}

/// Lets node `ns`'s UTS namespace go (unmounts and removes its file), if it has one.
fn remove_uts(ns: &str) {
    let file = format!("{UTS_DIR}/{ns}");
    if Path::new(&file).exists() {
        let _ = Command::new("umount")
            .arg(&file)
            .stderr(std::process::Stdio::null())
            .status();
        let _ = std::fs::remove_file(&file);
    }
}

/// Deletes the namespaces of labs whose process is gone (a test killed mid-run).
fn remove_stale_labs() {
    let Ok(out) = Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or("");
        let Some(rest) = name.strip_prefix(PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
            remove_uts(name);
        }
    }
}

impl NetLab {
    /// The baseline: the two namespaces and the veth, nothing shaped.
    pub fn unshaped() -> NetLab {
        NetLab::new(None)
    }

    /// The same lab with each direction of the link limited to `rate_bps` bits per
    /// second (tbf on both veth ends).
    pub fn shaped(rate_bps: u64) -> NetLab {
        NetLab::new(Some(rate_bps))
    }

    /// `nodes` namespaces (3 or more) on one bridge, nothing shaped.
    pub fn bridged(nodes: usize) -> NetLab {
        assert!(nodes >= 3, "two nodes take a veth: NetLab::unshaped");
        NetLab::build(nodes, None)
    }

    pub fn new(rate_bps: Option<u64>) -> NetLab {
        NetLab::build(2, rate_bps)
    }

    fn build(nodes: usize, rate_bps: Option<u64>) -> NetLab {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        remove_stale_labs();
        let k = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let base = format!("{PREFIX}{pid}-{k}");
        let lab = NetLab {
            ns: (0..nodes).map(|i| format!("{base}-{i}")).collect(),
            switch: (nodes > 2).then(|| format!("{base}-switch")),
            // The namespaces are private, so labs may share a subnet; distinct ones keep
            // logs readable.
            subnet: k % 250 + 1,
            rate_bps,
            dir: std::env::temp_dir().join(&base),
        };
        // From here on Drop cleans up whatever was made.
        for ns in lab.ns.iter().chain(&lab.switch) {
            ip(&["netns", "add", ns]);
        }
        std::fs::create_dir_all(UTS_DIR).unwrap();
        for (i, ns) in lab.ns.iter().enumerate() {
            let file = format!("{UTS_DIR}/{ns}");
            std::fs::write(&file, b"").unwrap();
            let status = Command::new("unshare")
                .arg(format!("--uts={file}"))
                .args(["hostname", &lab.hostname(i)])
                .status()
                .expect("run unshare");
            assert!(status.success(), "unshare --uts={file}: {status}");
        }
        match &lab.switch {
            None => ip(&[
                "link", "add", DEVICE, "netns", &lab.ns[0], "type", "veth", "peer", "name", DEVICE,
                "netns", &lab.ns[1],
            ]),
            Some(sw) => {
                ip(&["-n", sw, "link", "add", DEVICE, "type", "bridge"]);
                ip(&["-n", sw, "link", "set", DEVICE, "up"]);
                for (i, ns) in lab.ns.iter().enumerate() {
                    let port = format!("port{i}");
                    ip(&[
                        "link", "add", DEVICE, "netns", ns, "type", "veth", "peer", "name", &port,
                        "netns", sw,
                    ]);
                    ip(&["-n", sw, "link", "set", &port, "master", DEVICE]);
                    ip(&["-n", sw, "link", "set", &port, "up"]);
                }
            }
        }
        for i in 0..nodes {
            let ns = lab.ns[i].as_str();
            let cidr = format!("{}/24", lab.address(i));
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            ip(&["-n", ns, "link", "set", DEVICE, "mtu", &MTU.to_string()]);
            ip(&["-n", ns, "addr", "add", &cidr, "dev", DEVICE]);
            ip(&["-n", ns, "link", "set", DEVICE, "up"]);
            if let Some(rate) = rate_bps {
                // limit: a queue for the largest message the tests send, so TCP never
                // sees a drop.
                in_ns(
                    ns,
                    &[
                        "tc",
                        "qdisc",
                        "add",
                        "dev",
                        DEVICE,
                        "root",
                        "tbf",
                        "rate",
                        &format!("{rate}bit"),
                        "burst",
                        &BURST_BYTES.to_string(),
                        "limit",
                        "16000000",
                    ],
                );
            }
        }
        lab.wait_for_carrier();
        std::fs::create_dir_all(&lab.dir).unwrap();
        lab.write_scripts();
        lab
    }

    /// Waits until both veth ends report a carrier: right after `link set up` the link
    /// is not RUNNING yet, and UCX then refuses the device ("network device 'lab0' is not
    /// available").
    fn wait_for_carrier(&self) {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        for ns in &self.ns {
            loop {
                let out = Command::new("ip")
                    .args(["-n", ns, "-o", "link", "show", DEVICE])
                    .output()
                    .expect("run ip");
                let text = String::from_utf8_lossy(&out.stdout);
                if text.contains("LOWER_UP") && text.contains("state UP") {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{DEVICE} in {ns} has no carrier after 10 s: {text}"
                );
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
    }

    pub fn namespace(&self, i: usize) -> &str {
        &self.ns[i]
    }

    /// `program args...` on node `i` (as a launcher or a rank runs there).
    pub fn command_on(&self, i: usize, program: &str, args: &[&str]) -> Command {
        let enter = enter_for_mpi(&self.ns[i]);
        let mut cmd = Command::new(&enter[0]);
        cmd.args(&enter[1..]).arg(program).args(args);
        cmd
    }

    /// Node `i`'s host name (its UTS namespace's).
    pub fn hostname(&self, i: usize) -> String {
        format!("node{i}")
    }

    /// Address of node `i` on the link.
    pub fn address(&self, i: usize) -> String {
        format!("10.77.{}.{}", self.subnet, i + 1)
    }

    pub fn subnet(&self) -> String {
        format!("10.77.{}.0/24", self.subnet)
    }

    pub fn rate_bps(&self) -> Option<u64> {
        self.rate_bps
    }

    /// The ssh stand-in: `AGENT [-options] HOST COMMAND...` runs COMMAND (a shell
    /// command line, as ssh would) in HOST's namespace.
    pub fn agent(&self) -> PathBuf {
        self.dir.join("agent.sh")
    }

    fn hostfile(&self) -> PathBuf {
        self.dir.join("hosts")
    }

    fn write_scripts(&self) {
        use std::os::unix::fs::PermissionsExt;
        let hosts: String = (0..self.ns.len())
            .map(|i| format!("{}) ns={} ;;\n", self.address(i), self.ns[i]))
            .collect();
        let agent = format!(
            "#!/bin/sh\n\
             # ssh stand-in for mpirun: [-options] HOST COMMAND... runs COMMAND in HOST's namespace\n\
             while [ $# -gt 0 ]; do case \"$1\" in -*) shift ;; *) break ;; esac; done\n\
             host=$1; shift\n\
             case \"$host\" in\n\
             {hosts}\
             *) echo \"netlab agent: unknown host $host\" >&2; exit 255 ;;\n\
             esac\n\
             exec nsenter --uts={UTS_DIR}/\"$ns\" ip netns exec \"$ns\" sh -c \"$*\"\n",
        );
        std::fs::write(self.agent(), agent).unwrap();
        std::fs::set_permissions(self.agent(), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::write(
            self.hostfile(),
            (0..self.ns.len())
                .map(|i| format!("{} slots=1\n", self.address(i)))
                .collect::<String>(),
        )
        .unwrap();
    }

    /// Launcher prefix for Open MPI with rank 0 in namespace 0 and rank 1 in namespace 1,
    /// talking over the veth with the TCP BTL; the program and its arguments follow.
    /// `mpi_yield_when_idle`: ranks busy-poll otherwise, and on 2 CPUs the softirq that
    /// moves the shaped packets then waits for a scheduler tick now and then.
    pub fn openmpi_launcher(&self, np: usize) -> Vec<String> {
        let subnet = self.subnet();
        let mut v = enter_for_mpi(&self.ns[0]);
        v.push("mpirun.openmpi".into());
        let agent = self.agent().display().to_string();
        let hostfile = self.hostfile().display().to_string();
        v.extend(
            [
                "--allow-run-as-root",
                "--oversubscribe",
                "--bind-to",
                "none",
                "--map-by",
                "node",
                "--hostfile",
                &hostfile,
                "--mca",
                "plm_rsh_agent",
                &agent,
                "--mca",
                "pml",
                "ob1",
                "--mca",
                "btl",
                "tcp,self",
                "--mca",
                "btl_tcp_if_include",
                &subnet,
                "--mca",
                "oob_tcp_if_include",
                &subnet,
                "--mca",
                "mpi_yield_when_idle",
                "1",
                // No topology shared through a file: every node's daemon runs on one host
                // (all named `vm`), and two `orted`s writing the same session file at
                // once crashed one of them (hwloc_shmem_topology_write, 1 job in 4 on
                // three nodes).
                "--mca",
                "rtc_hwloc_vmhole",
                "none",
                "-np",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        v.push(np.to_string());
        v
    }

    /// `openmpi_launcher` followed by `program` (a path) and its arguments.
    pub fn openmpi(&self, np: usize, program: &str, args: &[&str]) -> Vec<String> {
        let mut v = self.openmpi_launcher(np);
        v.push(program.to_string());
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }

    /// Launcher prefix for MPICH (hydra, ch4:ucx) with rank i in namespace i: hydra
    /// starts a proxy per "host" through the agent; UCX uses TCP on the veth.
    pub fn mpich_launcher(&self, np: usize) -> Vec<String> {
        let agent = self.agent().display().to_string();
        let hosts = (0..self.ns.len())
            .map(|i| self.address(i))
            .collect::<Vec<_>>()
            .join(",");
        let mut v = enter_for_mpi(&self.ns[0]);
        v.extend(
            [
                "mpirun.mpich",
                "-launcher",
                "ssh",
                "-launcher-exec",
                &agent,
                "-hosts",
                &hosts,
                "-genv",
                "UCX_TLS",
                "tcp,self",
                "-genv",
                "UCX_NET_DEVICES",
                DEVICE,
                "-np",
                &np.to_string(),
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        v
    }

    /// `mpich_launcher` followed by `program` (a path) and its arguments.
    pub fn mpich(&self, np: usize, program: &str, args: &[&str]) -> Vec<String> {
        let mut v = self.mpich_launcher(np);
        v.push(program.to_string());
        v.extend(args.iter().map(|s| s.to_string()));
        v
    }

    /// What the shaped link should add to a message of `payload` bytes (MPI headers
    /// included) sent from an idle link: its frames at the link rate, less the burst
    /// that leaves at once. None when the link is not shaped.
    pub fn transfer_ns(&self, payload: u64) -> Option<f64> {
        let rate = self.rate_bps? as f64;
        let wire = payload + payload.div_ceil(MSS) * SEGMENT_OVERHEAD;
        Some(wire.saturating_sub(BURST_BYTES) as f64 * 8.0 / rate * 1e9)
    }
}

/// The lab's link, to cut and restore from another thread while a job runs.
pub struct LinkSwitch {
    /// Node 1's namespace: its end of the veth is the one switched.
    ns: String,
}

impl NetLab {
    pub fn link_switch(&self) -> LinkSwitch {
        LinkSwitch {
            ns: self.ns[1].clone(),
        }
    }
}

impl LinkSwitch {
    /// Takes node 1's end of the veth down: both ends lose their carrier and nothing
    /// passes; the TCP connections across it (MPI's, the agent's) stay open and
    /// retransmit.
    pub fn cut(&self) {
        ip(&["-n", &self.ns, "link", "set", DEVICE, "down"]);
    }

    /// Brings it up again (its address and route come back with it).
    pub fn restore(&self) {
        ip(&["-n", &self.ns, "link", "set", DEVICE, "up"]);
    }

    /// Destroys node 1's TCP connections from local `port` (the kernel aborts them:
    /// both ends see them broken at once), the link staying up.
    pub fn break_connections_from(&self, port: u16) {
        let filter = format!("sport = :{port}");
        let status = Command::new("ss")
            .args(["-N", &self.ns, "-K", &filter])
            .stdout(std::process::Stdio::null())
            // It also says it cannot destroy what is no TCP connection.
            .stderr(std::process::Stdio::null())
            .status()
            .expect("ss runs");
        assert!(status.success(), "ss -K {filter} in {}", self.ns);
    }
}

impl Drop for NetLab {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it (and so the pair) and its
        // qdiscs.
        for ns in self.ns.iter().chain(&self.switch) {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(std::process::Stdio::null())
                .status();
            remove_uts(ns);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

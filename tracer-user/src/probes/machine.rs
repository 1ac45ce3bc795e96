//! What the probes are sized and tuned by: the machine's CPUs (the ring, the reader's
//! wakeups) and its kernel's scheduler tick; and what the recording's node table says of
//! it.

use tracer_analysis::node::NodeInfo;

/// How far the kernel's count of a running thread's CPU time may lag behind: it is
/// brought up to date at every scheduler tick, so one tick (`kernel_tick_ns`). This is also
/// how far ahead of that count the probes' own estimate may run (time stolen by the
/// hypervisor after the last tick is in the estimate but not yet known to the kernel),
/// so a tight figure keeps the clock exact within a tick. CPUs in `nohz_full` run
/// without a regular tick (its count can lag by a second there), so the probes get no
/// bound when the kernel has any.
pub(super) fn kernel_clock_lag_ns() -> u32 {
    let tickless = std::fs::read_to_string("/sys/devices/system/cpu/nohz_full")
        .is_ok_and(|cpus| !cpus.trim().is_empty() && cpus.trim() != "(null)");
    if tickless {
        0
    } else {
        kernel_tick_ns()
    }
}

/// The scheduler tick of the running kernel, from its `CONFIG_HZ` (in /proc/config.gz or
/// /boot/config-RELEASE); 10 ms (HZ=100, the lowest usual setting) when neither says.
fn kernel_tick_ns() -> u32 {
    const LONGEST_TICK_NS: u32 = 10_000_000;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let config = read_gzip("/proc/config.gz")
        .or_else(|| std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok());
    config
        .as_deref()
        .and_then(config_hz)
        .map_or(LONGEST_TICK_NS, |hz| 1_000_000_000 / hz)
}

fn read_gzip(path: &str) -> Option<String> {
    use std::io::Read;
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).ok()?)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// `CONFIG_HZ=N` of a kernel configuration, if it is a plausible tick rate.
fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|hz| (24..=10_000).contains(hz))
}

/// The ring's default size, from the machine: 4 MiB per CPU the kernel may run on, or
/// a 256th of its memory if that is more, rounded to a power of two (up for the CPUs,
/// down for the memory), between 16 MiB and 256 MiB.
///
/// The CPUs: the slots are a share of the ring per CPU
/// ([`slots::slots_per_cpu`](super::slots::slots_per_cpu)): a fixed ring gave each CPU of
/// a big machine fewer slots (64 CPUs: 1,024, 3 ms of a CPU writing 330,000 records a
/// second, against 50 ms with 16,384), and 4 MiB per CPU keeps the most (16,384, 2.1 MiB)
/// up to 64 CPUs.
///
/// The memory: what the ring holds is how long the reader may fall behind (starved of
/// CPU by the ranks it traces) before records are lost. 16 MiB and the slots of 2 CPUs
/// hold about 390,000 records, 1.6 s of GROMACS at 2 ranks of 2 threads (240,000 records
/// a second); 64 MiB, the size from 16 GiB of `MemTotal` up, holds 1.3 million (5 s).
/// A 256th keeps the locked memory of ring and slots under 0.5 % of the machine's; the
/// bounds keep a small machine's ring as it was and a big one's at most 0.5 GiB with
/// its slots.
pub(crate) fn default_ring_bytes(cpus: usize, memory_bytes: Option<u64>) -> u32 {
    const MIB: u64 = 1 << 20;
    let for_cpus = (cpus.max(1) as u64 * 4 * MIB).next_power_of_two();
    let for_memory = memory_bytes.map_or(0, |m| {
        let share = m / 256;
        if share == 0 {
            0
        } else {
            1 << share.ilog2()
        }
    });
    for_cpus.max(for_memory).clamp(16 * MIB, 256 * MIB) as u32
}

/// The largest ring `--buffer-mib` may ask for: the kernel takes a ring's size as a
/// 32-bit count of bytes, a power of two (4096 MiB would be 2^32).
pub const MAX_RING_MIB: u32 = 2048;

/// The machine's memory (`MemTotal` of /proc/meminfo), if it says.
pub fn machine_memory_bytes() -> Option<u64> {
    std::fs::read_to_string("/proc/meminfo")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kib| kib * 1024)
}

/// How many bytes of records a CPU writes between two wakeups of the reader: a sixteenth
/// of the ring, at most 1 MiB, a power of two (the probes rely on it). Each wakeup is an
/// interrupt, which on a VM is an APIC write that exits to the hypervisor (about 10 us
/// here: 2.5 % of a traced loop of MPI calls when it came every 128 KiB); the reader
/// also drains the ring every 50 ms.
pub(super) fn wakeup_bytes(ring_bytes: u32) -> u32 {
    let bytes = (ring_bytes / 16).clamp(4096, 1 << 20);
    1 << bytes.ilog2()
}

/// CLOCK_MONOTONIC, the clock of bpf_ktime_get_ns.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into a local struct.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// This machine, for the recording's node table: its names and the clocks read together
/// at `start` (a recording of one machine is node 0).
pub(crate) fn this_node(start: ClockPair) -> NodeInfo {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    NodeInfo {
        hostname: read("/proc/sys/kernel/hostname"),
        machine_id: read("/etc/machine-id"),
        boot_id: read("/proc/sys/kernel/random/boot_id"),
        kernel: read("/proc/sys/kernel/osrelease"),
        // The CPU numbers the kernel may use (what the records' `cpu` indexes): aya
        // reads /sys/devices/system/cpu/possible, as the probes' loading does.
        cpus: aya::util::nr_cpus().map_or(0, |n| n.get()),
        start_unix_ns: start.unix_ns,
        start_monotonic_ns: start.monotonic_ns,
    }
}

/// This machine as a recording's node table names it, its clocks read now (an agent's
/// answer to a collector's hello).
pub fn this_node_now() -> NodeInfo {
    this_node(ClockPair::now())
}

/// The wall clock (Unix ns) and the probes' clock (CLOCK_MONOTONIC ns), read together.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ClockPair {
    pub unix_ns: u128,
    pub monotonic_ns: u64,
}

impl ClockPair {
    pub(crate) fn now() -> ClockPair {
        ClockPair {
            unix_ns: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
            monotonic_ns: monotonic_ns(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_ring_grows_with_the_cpus_within_bounds() {
        let mib = |cpus| super::default_ring_bytes(cpus, None) >> 20;
        assert_eq!(mib(0), 16);
        assert_eq!(mib(1), 16);
        assert_eq!(mib(2), 16);
        assert_eq!(mib(4), 16);
        assert_eq!(mib(5), 32);
        assert_eq!(mib(8), 32);
        assert_eq!(mib(48), 256);
        assert_eq!(mib(64), 256);
        assert_eq!(mib(4096), 256);
        // Every CPU keeps the most slots up to 64 CPUs.
        for cpus in [1, 2, 8, 24, 64] {
            let ring = super::default_ring_bytes(cpus, None);
            assert_eq!(
                crate::probes::slots::slots_per_cpu(ring, cpus),
                16384,
                "{cpus} CPUs"
            );
        }
    }

    #[test]
    fn the_default_ring_grows_with_the_memory_within_bounds() {
        const GIB: u64 = 1 << 30;
        let mib = |cpus, memory| super::default_ring_bytes(cpus, Some(memory)) >> 20;
        assert_eq!(mib(2, 0), 16);
        assert_eq!(mib(2, 4 * GIB), 16);
        assert_eq!(mib(2, 8 * GIB), 32);
        // This machine: 2 CPUs, 24 GiB (a 256th is 96 MiB, down to a power of two).
        assert_eq!(mib(2, 24 * GIB), 64);
        assert_eq!(mib(2, 1024 * GIB), 256);
        // The CPUs' size when it is more.
        assert_eq!(mib(16, 8 * GIB), 64);
    }

    #[test]
    fn wakeups_come_every_power_of_two_bytes() {
        let w = super::wakeup_bytes;
        assert_eq!(w(16 << 20), 1 << 20);
        assert_eq!(w(128 << 20), 1 << 20);
        assert_eq!(w(1 << 20), 64 << 10);
        assert_eq!(w(3 << 20), 128 << 10);
        assert_eq!(w(4096), 4096);
    }

    #[test]
    fn tick_rate_comes_from_the_kernel_configuration() {
        let hz = super::config_hz;
        assert_eq!(hz("CONFIG_HZ_250=y\nCONFIG_HZ=250\n"), Some(250));
        assert_eq!(
            hz("# CONFIG_HZ_1000 is not set\nCONFIG_HZ=1000"),
            Some(1000)
        );
        assert_eq!(hz("CONFIG_HZ_PERIODIC=y\n"), None);
        assert_eq!(hz("CONFIG_HZ=0\n"), None);
    }

    /// This machine's kernel says its tick (CONFIG_HZ=250: 4 ms) in /proc/config.gz;
    /// the probes' bound follows it instead of the 10 ms fallback.
    #[test]
    fn tick_of_the_running_kernel() {
        let tick = super::kernel_tick_ns();
        assert!((100_000..=10_000_000).contains(&tick), "tick {tick} ns");
        if std::path::Path::new("/proc/config.gz").exists() {
            let text = super::read_gzip("/proc/config.gz").expect("readable config");
            let hz = super::config_hz(&text).expect("CONFIG_HZ in /proc/config.gz");
            assert_eq!(tick, 1_000_000_000 / hz);
        }
    }
}

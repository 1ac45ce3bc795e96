//! The metrics as text for people: one table of levels (program, machines, processes
//! with their threads), the processes' commands, procedures, the traffic matrices and
//! the distributions. Times in milliseconds.

use crate::format::node::ShownId;
use std::collections::BTreeMap;
use std::fmt::Write;

use super::{Distribution, Measures, Metrics, ProcessMetrics};
use crate::units::{ms_text, name_column};

/// Matrices wider than this are printed as a list of pairs.
const MAX_MATRIX: usize = 12;
/// Call sites shown (the JSON has them all).
const MAX_SITES: usize = 10;

fn ratio(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

fn who(p: &ProcessMetrics) -> String {
    match p.rank {
        Some(r) => format!("rank {r} pid {}", ShownId(p.pid)),
        None => format!("pid {}", ShownId(p.pid)),
    }
}

fn level_header(out: &mut String) {
    let _ = writeln!(
        out,
        "{:<24} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>6} {:>6} {:>6}",
        "(ms)",
        "elapsed",
        "cpu",
        "work",
        "msg wait",
        "coll wait",
        "futex",
        "other",
        "cpu wait",
        "par",
        "util",
        "load"
    );
}

fn level_row(out: &mut String, label: &str, m: &Measures) {
    let b = &m.blocked;
    let _ = writeln!(
        out,
        "{:<24} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11} {:>6} {:>6} {:>6}",
        label,
        ms_text(m.elapsed_ns),
        ms_text(m.cpu_ns),
        ms_text(m.work_ns),
        ms_text(b.message_ns),
        ms_text(b.collective_ns),
        ms_text(b.futex_ns),
        ms_text(b.other_ns),
        ms_text(m.cpu_wait_ns),
        ratio(m.parallelism),
        ratio(m.utilization),
        ratio(m.load_factor)
    );
}

fn dist_header(out: &mut String, title: &str) {
    let _ = writeln!(
        out,
        "{:<44} {:>8} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        title, "count", "total", "mean", "p50", "p90", "p99", "max"
    );
}

fn dist_row(out: &mut String, label: &str, d: &Distribution) {
    let _ = writeln!(
        out,
        "{:<44} {:>8} {:>11} {:>11} {:>11} {:>11} {:>11} {:>11}",
        label,
        d.count,
        ms_text(d.total_ns),
        ms_text(d.mean_ns),
        ms_text(d.p50_ns),
        ms_text(d.p90_ns),
        ms_text(d.p99_ns),
        ms_text(d.max_ns)
    );
}

pub(crate) fn render(m: &Metrics) -> String {
    let mut out = String::new();
    let p = &m.program;
    let _ = writeln!(
        out,
        "program: {} processes, {} threads on {} machine(s), {} CPUs: elapsed {} ms, cpu {} ms, \
         parallelism {}, response ratio {}, utilization {}, load factor {}",
        p.processes,
        p.threads,
        m.machines.len(),
        m.cpus,
        ms_text(p.elapsed_ns),
        ms_text(p.cpu_ns),
        ratio(p.parallelism),
        ratio(p.response_ratio),
        ratio(p.utilization),
        ratio(p.load_factor)
    );
    for mc in &m.machines {
        let _ = writeln!(
            out,
            "machine {}: {} CPUs, {} processes, {} threads: parallelism {}, response ratio {}, \
             utilization {}, load factor {}",
            mc.name,
            mc.cpus,
            mc.measures.processes,
            mc.measures.threads,
            ratio(mc.measures.parallelism),
            ratio(mc.measures.response_ratio),
            ratio(mc.measures.utilization),
            ratio(mc.measures.load_factor)
        );
    }
    out.push('\n');
    level_header(&mut out);
    level_row(&mut out, "program", p);
    for mc in &m.machines {
        level_row(&mut out, &format!("machine {}", mc.name), &mc.measures);
    }
    for proc in &m.processes {
        level_row(&mut out, &who(proc), &proc.measures);
        for t in m.threads.iter().filter(|t| t.pid == proc.pid) {
            level_row(&mut out, &format!("  tid {}", ShownId(t.tid)), &t.measures);
        }
    }
    out.push_str("(msg/coll wait, futex, other: time blocked by cause; par: cpu/elapsed; util: par/CPUs; load: (cpu + cpu wait)/cpu)\n");

    out.push_str("\nprocesses:\n");
    for proc in &m.processes {
        let pvm = proc
            .pvm_tid
            .map(|t| format!(" pvm tid {t:#x}"))
            .unwrap_or_default();
        let outside = if proc.participant || m.processes.iter().all(|p| !p.participant) {
            ""
        } else {
            "  (not in the program: launcher or helper)"
        };
        let _ = writeln!(
            out,
            "  {:<20}{pvm} threads {:>3}  {}{outside}",
            who(proc),
            proc.measures.threads,
            proc.command
        );
    }

    if !m.procedures.is_empty() {
        out.push('\n');
        let width = name_column(m.procedures.iter().map(|p| p.name.as_str()), 24);
        let _ = writeln!(
            out,
            "{:<width$} {:>8} {:>12} {:>12}",
            "procedure", "calls", "elapsed ms", "cpu ms"
        );
        for pr in &m.procedures {
            let _ = writeln!(
                out,
                "{:<width$} {:>8} {:>12} {:>12}",
                pr.name,
                pr.calls,
                ms_text(pr.elapsed_ns),
                ms_text(pr.cpu_ns)
            );
            for r in &pr.processes {
                let label = match r.rank {
                    Some(k) => format!("  rank {k} pid {}", ShownId(r.pid)),
                    None => format!("  pid {}", ShownId(r.pid)),
                };
                let _ = writeln!(
                    out,
                    "{:<width$} {:>8} {:>12} {:>12}",
                    label,
                    r.calls,
                    ms_text(r.elapsed_ns),
                    ms_text(r.cpu_ns)
                );
            }
        }
    }

    traffic(&mut out, m);

    out.push('\n');
    dist_header(&mut out, "distributions (ms)");
    dist_row(&mut out, "message latency", &m.traffic.latency);
    for c in &m.calls {
        dist_row(&mut out, &format!("blocked in {}", c.name), &c.blocked);
    }
    for pr in &m.procedures {
        dist_row(&mut out, &format!("procedure {}", pr.name), &pr.duration);
    }
    if !m.call_sites.is_empty() {
        let shown = m.call_sites.len().min(MAX_SITES);
        out.push('\n');
        dist_header(
            &mut out,
            &format!("call sites ({shown} of {}, ms)", m.call_sites.len()),
        );
        for s in &m.call_sites[..shown] {
            let at = match (&s.object, s.pid) {
                // Function and file name: the directory is in the JSON.
                _ if s.location.is_some() => {
                    let l = s.location.as_deref().unwrap_or_default();
                    match l.split_once(" at ") {
                        Some((f, file)) => {
                            format!("{f} at {}", file.rsplit('/').next().unwrap_or(file))
                        }
                        None => l.to_string(),
                    }
                }
                (Some(o), _) => format!("{}+{}", o.rsplit('/').next().unwrap_or(o), s.address),
                (None, Some(pid)) => format!("pid {} {}", ShownId(pid), s.address),
                (None, None) => s.address.clone(),
            };
            dist_row(&mut out, &format!("{} @ {at}", s.name), &s.blocked);
        }
    }
    let _ = writeln!(
        out,
        "\nevents: {} analyzed, {} lost",
        m.events.analyzed, m.events.lost
    );
    out
}

fn traffic(out: &mut String, m: &Metrics) {
    let t = &m.traffic;
    let s = &t.matching;
    let rate = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.1}"));
    let _ = writeln!(
        out,
        "\nmessages: {} matched, {} bytes ({} of unknown size); {} msg/s, {} bytes/s; \
         {} sent, {} received, {} unmatched",
        t.messages,
        t.bytes,
        t.messages_unknown_size,
        rate(t.messages_per_s),
        rate(t.bytes_per_s),
        s.sent,
        s.received,
        s.unmatched
    );
    if t.processes.is_empty() {
        return;
    }
    // Name processes by rank when every one that communicates has a rank.
    let mut ends: Vec<(Option<i32>, u32)> = t
        .processes
        .iter()
        .flat_map(|p| [(p.from_rank, p.from_pid), (p.to_rank, p.to_pid)])
        .collect();
    ends.sort_by_key(|&(r, pid)| (r.is_none(), r, pid));
    ends.dedup();
    let by_rank = ends.iter().all(|(r, _)| r.is_some());
    let name = |r: Option<i32>, pid: u32| match r {
        Some(r) if by_rank => format!("rank {r}"),
        _ => format!("pid {}", ShownId(pid)),
    };
    if ends.len() > MAX_MATRIX {
        let _ = writeln!(
            out,
            "{:<16} {:<16} {:>10} {:>14}",
            "from", "to", "messages", "bytes"
        );
        for p in &t.processes {
            let _ = writeln!(
                out,
                "{:<16} {:<16} {:>10} {:>14}",
                name(p.from_rank, p.from_pid),
                name(p.to_rank, p.to_pid),
                p.messages,
                p.bytes
            );
        }
    } else {
        let cells: BTreeMap<(u32, u32), (u64, u64)> = t
            .processes
            .iter()
            .map(|p| ((p.from_pid, p.to_pid), (p.messages, p.bytes)))
            .collect();
        for (title, pick) in [
            ("messages", (|c: (u64, u64)| c.0) as fn((u64, u64)) -> u64),
            ("bytes", |c: (u64, u64)| c.1),
        ] {
            let _ = write!(out, "{:<14}", format!("{title} from\\to"));
            for &(r, pid) in &ends {
                let _ = write!(out, " {:>12}", name(r, pid));
            }
            out.push('\n');
            for &(fr, fp) in &ends {
                let _ = write!(out, "{:<14}", name(fr, fp));
                for &(_, tp) in &ends {
                    let v = cells.get(&(fp, tp)).map(|&c| pick(c)).unwrap_or(0);
                    let cell = if v == 0 {
                        ".".to_string()
                    } else {
                        v.to_string()
                    };
                    let _ = write!(out, " {cell:>12}");
                }
                out.push('\n');
            }
        }
    }
    for mp in &t.machines {
        let _ = writeln!(
            out,
            "machines {} -> {}: {} messages, {} bytes",
            mp.from, mp.to, mp.messages, mp.bytes
        );
    }
}

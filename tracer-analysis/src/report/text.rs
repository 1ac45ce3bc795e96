//! The report for people.

use crate::format::node::ShownId;
use std::fmt::Write;

use super::build::activity_start;
use super::types::*;
use crate::analysis::profile::messages_line;
use crate::graph::path::{Activity, THREAD_START};
use crate::units::{ms, name_column, percent};

/// How many activities the text report lists.
const TEXT_ACTIVITIES: usize = 30;

impl Report {
    /// The report for people.
    pub fn text(&self) -> String {
        let cp = &self.critical_path;
        let mut s = String::new();
        let _ = writeln!(s, "{}", cp.path.headline(&self.clock));
        if !self.diagnosis.is_empty() {
            let _ = writeln!(s, "\ndiagnosis:");
            for (i, f) in self.diagnosis.iter().enumerate() {
                let _ = writeln!(s, "  {}. {}", i + 1, f.text);
            }
            let _ = writeln!(s);
        }
        let _ = writeln!(
            s,
            "graph: {} vertices, {} arcs from {} events ({} lost)",
            cp.vertices, cp.arcs, cp.events, cp.lost
        );
        let t = &self.totals;
        let _ = writeln!(
            s,
            "on the path: computation {:.3} ms ({:.2} %); {} waits for other threads with {:.3} ms measured latency ({:.2} %, not in the length)",
            ms(t.length_ns),
            percent(t.length_ns, t.length_ns + t.dependency_latency_ns),
            t.dependencies,
            ms(t.dependency_latency_ns),
            percent(t.dependency_latency_ns, t.length_ns + t.dependency_latency_ns),
        );

        let _ = writeln!(s, "\nthe path ({} activities):", self.activities.len());
        let t0 = self
            .activities
            .iter()
            .map(activity_start)
            .find(|&t| t > 0)
            .unwrap_or(0);
        for a in self.activities.iter().take(TEXT_ACTIVITIES) {
            match a {
                Activity::Work {
                    pid,
                    tid,
                    procedure,
                    start_ns,
                    work_ns,
                    ..
                } => {
                    let _ = writeln!(
                        s,
                        "  {:>10.3} ms  pid {} tid {}  {procedure}  {:.3} ms",
                        ms(start_ns.saturating_sub(t0)),
                        ShownId(*pid),
                        ShownId(*tid),
                        ms(*work_ns)
                    );
                }
                Activity::Wait {
                    from_pid,
                    from_tid,
                    to_pid,
                    to_tid,
                    call,
                    latency_ns,
                } => {
                    // Threads of one process are told apart by thread id.
                    let (to, from) = if from_pid == to_pid {
                        (
                            format!("tid {}", ShownId(*to_tid)),
                            format!("tid {}", ShownId(*from_tid)),
                        )
                    } else {
                        (
                            format!("pid {}", ShownId(*to_pid)),
                            format!("pid {}", ShownId(*from_pid)),
                        )
                    };
                    let what = if call == THREAD_START {
                        format!("{to} is started by {from}")
                    } else {
                        format!("{to} waits in {call} for {from}")
                    };
                    let _ = writeln!(
                        s,
                        "  {:>13}  {what} ({:.3} ms latency)",
                        "",
                        ms(*latency_ns)
                    );
                }
            }
        }
        if self.activities.len() > TEXT_ACTIVITIES {
            let _ = writeln!(
                s,
                "  ... {} more (--json lists them all)",
                self.activities.len() - TEXT_ACTIVITIES
            );
        }

        let width = name_column(self.procedures.iter().map(|p| p.name.as_str()), 30);
        let _ = writeln!(
            s,
            "\n{:<width$} {:>11} {:>7} {:>11} {:>11} {:>7} {:>11} {:>7}",
            "procedure", "cp ms", "cp %", "excl ms", "zeroing ms", "zero %", "mbm ms", "mbm %"
        );
        for p in &self.procedures {
            let _ = writeln!(
                s,
                "{:<width$} {:>11.3} {:>7.2} {:>11.3} {:>11.3} {:>7.2} {:>11.3} {:>7.2}",
                p.name,
                ms(p.cp_ns),
                p.cp_pct,
                ms(p.cp_exclusive_ns),
                ms(p.zeroing_ns),
                p.zeroing_pct,
                ms(p.mbm_ns),
                p.mbm_pct
            );
        }
        let _ = writeln!(
            s,
            "(mbm: maximum benefit over the {} longest paths)",
            self.near_critical_paths.len()
        );
        if let Some(sampled) = &self.sampled {
            sampled.text(&mut s);
        }

        let _ = writeln!(
            s,
            "\n{:<9} {:>5} {:>11} {:>7}  command",
            "pid", "rank", "cp ms", "cp %"
        );
        for p in &self.processes {
            let rank = p.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "{:<9} {:>5} {:>11.3} {:>7.2}  {}",
                ShownId(p.pid),
                rank,
                ms(p.cp_ns),
                p.cp_pct,
                p.command
            );
        }
        let _ = writeln!(
            s,
            "\n{:<9} {:<9} {:>11} {:>11} {:>13}",
            "tid", "pid", "cp ms", "work ms", "min slack ms"
        );
        for r in &self.threads {
            let slack = r
                .min_slack_ns
                .map(|x| format!("{:.3}", ms(x)))
                .unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                "{:<9} {:<9} {:>11.3} {:>11.3} {:>13}",
                ShownId(r.tid),
                ShownId(r.pid),
                ms(r.cp_ns),
                ms(r.work_ns),
                slack
            );
        }

        let _ = writeln!(s, "\nlongest paths:");
        for p in &self.near_critical_paths {
            let _ = writeln!(
                s,
                "  #{:<5} {:>12.3} ms {:>7.2} %",
                p.rank,
                ms(p.length_ns),
                p.pct
            );
        }

        if let Some(w) = &self.whatif {
            let edits: Vec<String> = w.scales.iter().map(|(p, f)| format!("{p}={f}")).collect();
            let _ = writeln!(
                s,
                "\nwhat if {}: critical path {:.3} ms instead of {:.3} ms (gain {:.3} ms, {:.2} %); ends in tid {}",
                edits.join(" "),
                ms(w.predicted_ns),
                ms(w.measured_ns),
                ms(w.gain_ns),
                w.gain_pct,
                ShownId(w.ends_in_tid)
            );
            for (p, ns) in &w.by_procedure {
                let _ = writeln!(
                    s,
                    "  {:<30} {:>11.3} ms {:>7.2} %",
                    p,
                    ms(*ns),
                    percent(*ns, w.predicted_ns)
                );
            }
        }

        if !self.phases.is_empty() {
            let _ = writeln!(s, "\nrepeated phases on the path (occurrences x pattern):");
            for p in &self.phases {
                let _ = writeln!(s, "  {:>4} x  {}", p.count, p.pattern.join(" > "));
            }
        }
        let _ = writeln!(s, "\n{}", messages_line(&self.messages));
        s
    }
}

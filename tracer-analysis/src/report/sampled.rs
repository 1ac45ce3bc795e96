//! The report's section of functions on the critical path by sampled stacks: the first
//! functions by inclusive critical-path time, from a [`SampledProfile`]
//! (docs/sampled-attribution.md).

use std::fmt::Write;

use super::types::{Report, SampledFunctionRow, SampledSection};
use crate::graph::attribution::{SampledProfile, ZEROED_FUNCTIONS};
use crate::units::{ms, name_column, percent};

/// How many functions the section lists.
pub(crate) const REPORTED_FUNCTIONS: usize = 30;

impl SampledSection {
    pub fn new(profile: &SampledProfile) -> Self {
        let length = profile.length_ns;
        let counts = &profile.counts;
        let functions = profile
            .functions
            .iter()
            .take(REPORTED_FUNCTIONS)
            .map(|f| SampledFunctionRow {
                name: f.name.clone(),
                cp_ns: f.inclusive.critical_path_ns,
                cp_pct: percent(f.inclusive.critical_path_ns, length),
                cpu_ns: f.inclusive.cpu_ns,
                cpu_pct: percent(f.inclusive.cpu_ns, counts.cpu_ns),
                samples: f.inclusive.samples,
                self_cp_ns: f.self_times.critical_path_ns,
                self_cp_pct: percent(f.self_times.critical_path_ns, length),
                self_cpu_ns: f.self_times.cpu_ns,
                self_cpu_pct: percent(f.self_times.cpu_ns, counts.cpu_ns),
                self_samples: f.self_times.samples,
                zeroing_ns: f.zeroing_ns,
                zeroing_pct: f.zeroing_ns.map(|z| percent(z, length)),
            })
            .collect();
        SampledSection {
            samples: counts.samples,
            complete: counts.complete,
            complete_pct: percent(counts.complete, counts.samples),
            cpu_ns: counts.cpu_ns,
            critical_path_ns: counts.critical_path_ns,
            critical_path_pct: percent(counts.critical_path_ns, length),
            functions_total: profile.functions.len(),
            functions,
        }
    }

    pub(super) fn text(&self, s: &mut String) {
        let _ = writeln!(
            s,
            "\nfunctions on the critical path (sampled): {} samples, {} unwound completely ({:.2} %); they cover {:.3} ms of the path ({:.2} %) and {:.3} ms of CPU",
            self.samples,
            self.complete,
            self.complete_pct,
            ms(self.critical_path_ns),
            self.critical_path_pct,
            ms(self.cpu_ns),
        );
        let width = name_column(self.functions.iter().map(|f| f.name.as_str()), 30);
        let _ = writeln!(
            s,
            "{:<width$} {:>11} {:>7} {:>7} {:>11} {:>7} {:>7} {:>11} {:>7} {:>8}",
            "function",
            "cp ms",
            "cp %",
            "cpu %",
            "self cp ms",
            "self %",
            "cpu %",
            "zeroing ms",
            "zero %",
            "samples"
        );
        for f in &self.functions {
            let (zeroing, zeroing_pct) = match (f.zeroing_ns, f.zeroing_pct) {
                (Some(z), Some(p)) => (format!("{:.3}", ms(z)), format!("{p:.2}")),
                _ => ("-".into(), "-".into()),
            };
            let _ = writeln!(
                s,
                "{:<width$} {:>11.3} {:>7.2} {:>7.2} {:>11.3} {:>7.2} {:>7.2} {:>11} {:>7} {:>8}",
                f.name,
                ms(f.cp_ns),
                f.cp_pct,
                f.cpu_pct,
                ms(f.self_cp_ns),
                f.self_cp_pct,
                f.self_cpu_pct,
                zeroing,
                zeroing_pct,
                f.samples
            );
        }
        if self.functions_total > self.functions.len() {
            let _ = writeln!(
                s,
                "  ... {} more functions (tracer export --format pprof has them all)",
                self.functions_total - self.functions.len()
            );
        }
        let _ = writeln!(
            s,
            "(cp: inclusive time on the critical path, % of its length; cpu: % of the samples' CPU time; self: innermost; zeroing: the path recomputed without the function's sampled time, for the first {ZEROED_FUNCTIONS})"
        );
    }
}

impl Report {
    /// Adds the section of functions on the critical path by sampled stacks.
    pub fn add_sampled(&mut self, profile: &SampledProfile) {
        self.sampled = Some(SampledSection::new(profile));
    }
}

#[cfg(test)]
mod tests {
    use crate::analysis::workclock::ClockKind;
    use crate::export::sampled::tests::sampled_pair_stacks;
    use crate::format::synth::sampled_pair;
    use crate::graph::recorded::RecordedGraph;
    use crate::report::{Report, ReportOptions};

    fn report() -> Report {
        let rg = RecordedGraph::from_items(&sampled_pair(), ClockKind::Cpu);
        let mut report = Report::new(&rg, &ReportOptions::default(), None);
        report.add_sampled(sampled_pair_stacks().profile());
        report
    }

    #[test]
    fn the_text_lists_the_functions_and_the_samples_unwound() {
        let text = report().text();
        let section: Vec<&str> = text
            .lines()
            .skip_while(|l| !l.starts_with("functions on the critical path (sampled)"))
            .take(6)
            .map(str::trim_end)
            .collect();
        assert_eq!(
            section,
            [
                "functions on the critical path (sampled): 6 samples, 5 unwound completely (83.33 %); they cover 0.050 ms of the path (100.00 %) and 0.060 ms of CPU",
                "function                             cp ms    cp %   cpu %  self cp ms  self %   cpu %  zeroing ms  zero %  samples",
                "main                                 0.050  100.00  100.00       0.000    0.00    0.00       0.050  100.00        6",
                "a                                    0.035   70.00   58.33       0.035   70.00   58.33       0.035   70.00        3",
                "b                                    0.010   20.00   16.67       0.010   20.00   16.67       0.010   20.00        1",
                "c                                    0.005   10.00   25.00       0.005   10.00   25.00       0.005   10.00        2",
            ]
        );
    }

    #[test]
    fn the_page_has_the_table_and_the_three_flame_graphs() {
        let r = report();
        let page = |graphs| crate::report::HtmlPage {
            command: "./app",
            recording: "run.trace",
            flame_graph_svg: "<svg id=\"flame\"></svg>",
            sampled_flame_graphs: graphs,
        };
        let html = r.html(&page(Some(crate::report::SampledFlameGraphs {
            critical_path_svg: "<svg id=\"cp\"></svg>",
            cpu_svg: "<svg id=\"cpu\"></svg>",
            difference_svg: "<svg id=\"diff\"></svg>",
        })));
        assert!(html.contains("<table id=\"sampled-functions\">"));
        assert!(html.contains(
            "<tr><td>c</td><td class=\"n\" data-ns=\"5000\">0.005</td><td class=\"n\">10.00</td><td class=\"n\">25.00</td>"
        ), "{html}");
        let at = |s: &str| html.find(s).unwrap();
        assert!(at("id=\"cp\"") < at("id=\"cpu\"") && at("id=\"cpu\"") < at("id=\"diff\""));
        assert!(!r
            .html(&page(None))
            .contains("Flame graphs of the sampled stacks"));
    }

    #[test]
    fn the_json_has_the_section_after_the_procedures() {
        let json = serde_json::to_value(report()).unwrap();
        let s = &json["sampled"];
        assert_eq!(
            (s["samples"].as_u64(), s["complete"].as_u64()),
            (Some(6), Some(5))
        );
        let c = &s["functions"][3];
        assert_eq!(c["name"], "c");
        assert_eq!(
            [
                &c["cp_ns"],
                &c["cpu_ns"],
                &c["self_cpu_ns"],
                &c["zeroing_ns"],
                &c["samples"]
            ],
            [5_000, 15_000, 15_000, 5_000, 2]
        );
        // In field order: after the procedures, before the processes.
        let text = serde_json::to_string(&report()).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\":")).unwrap();
        assert!(at("procedures") < at("sampled") && at("sampled") < at("processes"));
        let without = Report::new(
            &RecordedGraph::from_items(&sampled_pair(), ClockKind::Cpu),
            &ReportOptions::default(),
            None,
        );
        assert!(serde_json::to_value(without)
            .unwrap()
            .get("sampled")
            .is_none());
    }
}

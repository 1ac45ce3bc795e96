//! The report's section of functions on the critical path by sampled stacks: the first
//! functions by inclusive critical-path time, from [`SampledStacks`]
//! (docs/sampled-attribution.md).

use std::fmt::Write;

use serde::Serialize;

use super::html::{ms_cell, pct_cell, SampledFlameGraphs};
use super::markup::escape;
use super::Report;
use crate::export::sampled::{SampledStacks, ZEROED_FUNCTIONS};
use crate::export::stack_source::StackSource;
use crate::units::{ms, ms_text, name_column, percent};

/// How many functions the section lists.
pub(crate) const REPORTED_FUNCTIONS: usize = 30;

/// Functions on the critical path, measured by sampled stacks.
#[derive(Clone, Debug, Serialize)]
pub struct SampledSection {
    /// Samples, and how many unwound to their stack's root (`main`, a thread's start).
    pub samples: u64,
    pub complete: u64,
    pub complete_pct: f64,
    /// CPU time the samples weigh in all, and the part of it on the critical path (and
    /// its share of the path's length).
    pub cpu_ns: u64,
    pub critical_path_ns: u64,
    pub critical_path_pct: f64,
    /// Functions with any time, all counted.
    pub functions_total: usize,
    /// The first [`REPORTED_FUNCTIONS`] by inclusive critical-path time.
    pub functions: Vec<SampledFunctionRow>,
}

/// One function of [`SampledSection`]: percentages of the path's length (cp) and of
/// the samples' CPU time (cpu).
#[derive(Clone, Debug, Serialize)]
pub struct SampledFunctionRow {
    pub name: String,
    /// Inclusive: the function anywhere on the stack.
    pub cp_ns: u64,
    pub cp_pct: f64,
    pub cpu_ns: u64,
    pub cpu_pct: f64,
    pub samples: u64,
    /// Self: the function innermost.
    pub self_cp_ns: u64,
    pub self_cp_pct: f64,
    pub self_cpu_ns: u64,
    pub self_cpu_pct: f64,
    pub self_samples: u64,
    /// What the path gets shorter by without the function's sampled time (exact, through
    /// the graph); absent after the first functions.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zeroing_ns: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zeroing_pct: Option<f64>,
}

impl SampledSection {
    pub fn new(stacks: &SampledStacks) -> Self {
        let length = stacks.summary().critical_path_ns;
        let counts = stacks.counts();
        let functions = stacks
            .functions()
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
            functions_total: stacks.functions().len(),
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

impl SampledSection {
    /// The section on the HTML page: the table, then the flame graphs when drawn.
    pub(super) fn html(&self, graphs: Option<&SampledFlameGraphs>) -> String {
        let mut s = String::from(
            "<h2>Functions on the critical path (sampled)</h2>\n",
        );
        let _ = writeln!(
            s,
            "<p class=\"sub\">{} samples, {} unwound completely ({:.2} %); they cover {} ms of \
             the critical path ({:.2} %) and {} ms of CPU time.</p>",
            self.samples,
            self.complete,
            self.complete_pct,
            ms_text(self.critical_path_ns),
            self.critical_path_pct,
            ms_text(self.cpu_ns),
        );
        s.push_str(
            "<table id=\"sampled-functions\">\n<tr><th>function</th><th>critical path ms</th><th>%</th><th>% of CPU</th>\
             <th>self critical path ms</th><th>%</th><th>self % of CPU</th>\
             <th>zeroing gain ms</th><th>%</th><th>samples</th></tr>\n",
        );
        for f in &self.functions {
            let (zeroing, zeroing_pct) = match (f.zeroing_ns, f.zeroing_pct) {
                (Some(z), Some(p)) => (ms_cell(z), pct_cell(p)),
                _ => ("<td class=\"n\">-</td>".into(), "<td class=\"n\">-</td>".into()),
            };
            let _ = writeln!(
                s,
                "<tr><td>{}</td>{}{}{}{}{}{}{zeroing}{zeroing_pct}<td class=\"n\">{}</td></tr>",
                escape(&f.name),
                ms_cell(f.cp_ns),
                pct_cell(f.cp_pct),
                pct_cell(f.cpu_pct),
                ms_cell(f.self_cp_ns),
                pct_cell(f.self_cp_pct),
                pct_cell(f.self_cpu_pct),
                f.samples,
            );
        }
        s.push_str("</table>\n");
        let _ = writeln!(
            s,
            "<p class=\"sub\">Critical path: inclusive, the function anywhere on the stack; \
             self: innermost. Zeroing gain: how much shorter the path gets without the \
             function's sampled time (the path recomputed), for the first {ZEROED_FUNCTIONS}.</p>"
        );
        if let Some(g) = graphs {
            let _ = write!(
                s,
                "<h2>Flame graphs of the sampled stacks</h2>\n<p class=\"sub\">Critical path: \
                 width is time on the critical path. CPU: width is CPU time, on the path or \
                 not. Difference: width is time on the critical path, colour how much more \
                 (red) or less (blue) of the path a stack is than its share of CPU time.</p>\n\
                 <div class=\"figure flame-graph\" id=\"sampled-critical-path\">\n{}\n</div>\n\
                 <div class=\"figure flame-graph\" id=\"sampled-cpu\">\n{}\n</div>\n\
                 <div class=\"figure flame-graph\" id=\"sampled-difference\">\n{}\n</div>\n",
                g.critical_path_svg, g.cpu_svg, g.difference_svg
            );
        }
        s
    }
}

impl Report {
    /// Adds the section of functions on the critical path by sampled stacks.
    pub fn add_sampled(&mut self, stacks: &SampledStacks) {
        self.sampled = Some(SampledSection::new(stacks));
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
        report.add_sampled(&sampled_pair_stacks());
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
        assert!(!r.html(&page(None)).contains("Flame graphs of the sampled stacks"));
    }

    #[test]
    fn the_json_has_the_section_after_the_procedures() {
        let json = serde_json::to_value(report()).unwrap();
        let s = &json["sampled"];
        assert_eq!((s["samples"].as_u64(), s["complete"].as_u64()), (Some(6), Some(5)));
        let c = &s["functions"][3];
        assert_eq!(c["name"], "c");
        assert_eq!(
            [&c["cp_ns"], &c["cpu_ns"], &c["self_cpu_ns"], &c["zeroing_ns"], &c["samples"]],
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
        assert!(serde_json::to_value(without).unwrap().get("sampled").is_none());
    }
}

//! The report as one self-contained HTML page (`tracer report --html`): the diagnosis,
//! the procedure and process tables (the figures of `--json`), the critical path's
//! timeline and its flame graph, inline; no script, no file or address outside it.

use std::fmt::Write;

use super::markup::{escape, LegendEntry, Palette};
use super::timeline::{timeline_svg, MAX_ACTIVITIES};
use super::types::*;
use crate::analysis::profile::messages_line;
use crate::format::failures::failures_warning;
use crate::graph::attribution::ZEROED_FUNCTIONS;
use crate::units::{ms_text, percent};

/// What the page shows besides the report.
pub struct HtmlPage<'a> {
    /// The traced command, as recorded (empty for `--pid` and `--all` sessions).
    pub command: &'a str,
    /// The recording, as named on the command line.
    pub recording: &'a str,
    /// The flame graph of the critical path: one `<svg>` element, put in as it is (the
    /// caller draws it; this crate draws no flame graph).
    pub flame_graph_svg: &'a str,
    /// With sampled stacks ([`Report::sampled`]): their flame graphs, drawn by the caller.
    pub sampled_flame_graphs: Option<SampledFlameGraphs<'a>>,
}

/// The flame graphs of the sampled stacks, each one `<svg>` element.
pub struct SampledFlameGraphs<'a> {
    /// Width: time on the critical path.
    pub critical_path_svg: &'a str,
    /// Width: CPU time.
    pub cpu_svg: &'a str,
    /// Width: time on the critical path; colour: its difference from the stack's share of
    /// CPU time (red: more on the path than its CPU suggests).
    pub difference_svg: &'a str,
}

/// The page's style: inline, so that the file needs nothing else.
const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1240px; color: #222; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ddd; }
.sub { color: #666; margin-top: 0; }
code { font-family: ui-monospace, monospace; background: #f3f3f3; padding: 0 0.2em; }
ol.diagnosis li { margin: 0.35em 0; }
table { border-collapse: collapse; font-size: 0.92em; }
th, td { padding: 0.25em 0.6em; border-bottom: 1px solid #e5e5e5; }
th { text-align: left; background: #f6f6f6; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; margin-right: 0.4em; vertical-align: -0.1em; border: 1px solid #0003; }
ul.legend { list-style: none; padding: 0; display: flex; flex-wrap: wrap; gap: 0.3em 1.2em; }
.figure { overflow-x: auto; }
.figure > svg { max-width: 100%; height: auto; }
.timeline .band { fill: #f7f7f7; }
.timeline text { font-family: system-ui, sans-serif; font-size: 11px; fill: #333; }
.timeline .axis line { stroke: #888; }
.timeline .axis text { text-anchor: middle; font-size: 10px; }
.timeline .wait { stroke-width: 2; }
.timeline .work:hover, .timeline .wait:hover { stroke: #000; stroke-width: 1.5; }
.warning { color: #a40000; }
/* inferno's search and zoom controls: they need its script, which the page leaves out */
.flame-graph #search, .flame-graph #unzoom, .flame-graph #matched { display: none; }
"#;

impl Report {
    /// The report as a self-contained HTML page.
    pub fn html(&self, page: &HtmlPage) -> String {
        let palette = Palette::of_report(self);
        let mut s = String::new();
        s.push_str(&head(page));
        s.push_str(&self.header_section(page));
        s.push_str(&self.diagnosis_section());
        s.push_str(&self.procedure_section(&palette));
        s.push_str(&self.timeline_section(&palette));
        s.push_str(&flame_section(page.flame_graph_svg));
        if let Some(sampled) = &self.sampled {
            s.push_str(&sampled_section(
                sampled,
                page.sampled_flame_graphs.as_ref(),
            ));
        }
        s.push_str(&self.process_section());
        s.push_str(&self.footer());
        s.push_str("</body>\n</html>\n");
        s
    }

    /// The title, what was traced, and the headline.
    fn header_section(&self, page: &HtmlPage) -> String {
        let mut s = format!(
            "<h1>Critical path of <code>{}</code></h1>\n",
            title_of(page)
        );
        let _ = writeln!(
            s,
            r#"<p class="sub">recording <code>{}</code>, {} clock</p>"#,
            escape(page.recording),
            escape(&self.clock)
        );
        let _ = writeln!(
            s,
            r#"<p id="headline">{}</p>"#,
            escape(&self.critical_path.path.headline(&self.clock))
        );
        let cp = &self.critical_path;
        if cp.lost > 0 {
            let _ = writeln!(
                s,
                r#"<p class="warning">{} of {} events were lost: the results are incomplete.</p>"#,
                cp.lost,
                cp.events + cp.lost
            );
        }
        if let Some(warning) = failures_warning(&cp.probe_failures) {
            let _ = writeln!(s, r#"<p class="warning">{}.</p>"#, escape(&warning));
        }
        s
    }

    /// The findings in words, most important first.
    fn diagnosis_section(&self) -> String {
        let mut s = String::from("<h2>Diagnosis</h2>\n");
        if self.diagnosis.is_empty() {
            s.push_str("<p>Nothing stands out.</p>\n");
            return s;
        }
        s.push_str("<ol id=\"diagnosis\" class=\"diagnosis\">\n");
        for f in &self.diagnosis {
            let kind = serde_json::to_value(&f.kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let _ = writeln!(
                s,
                r#"<li data-kind="{}">{}</li>"#,
                escape(&kind),
                escape(&f.text)
            );
        }
        s.push_str("</ol>\n");
        s
    }

    /// The selected procedures' share of the path, zeroing and maximum benefit.
    fn procedure_section(&self, palette: &Palette) -> String {
        let mut s = String::from("<h2>Procedures</h2>\n<table id=\"procedures\">\n");
        s.push_str(
            "<tr><th>procedure</th><th>critical path ms</th><th>%</th><th>exclusive ms</th>\
             <th>work ms</th><th>% of work</th><th>zeroing gain ms</th><th>%</th>\
             <th>maximum benefit ms</th><th>%</th></tr>\n",
        );
        for p in &self.procedures {
            let mbm = if p.mbm_exact { "" } else { " (at most)" };
            let _ = writeln!(
                s,
                r#"<tr data-procedure="{name}"><td><span class="swatch" style="background:{colour}"></span>{name}</td>{}{}{}{}{}{}{}<td class="n" data-ns="{}">{}{mbm}</td><td class="n">{:.2}</td></tr>"#,
                ms_cell(p.cp_ns),
                pct_cell(p.cp_pct),
                ms_cell(p.cp_exclusive_ns),
                ms_cell(p.work_ns),
                pct_cell(p.work_pct),
                ms_cell(p.zeroing_ns),
                pct_cell(p.zeroing_pct),
                p.mbm_ns,
                ms_text(p.mbm_ns),
                p.mbm_pct,
                name = escape(&p.name),
                colour = palette.colour(&p.name),
            );
        }
        s.push_str("</table>\n");
        let _ = writeln!(
            s,
            "<p class=\"sub\">Zeroing gain: how much shorter the critical path gets if the \
             procedure took no time. Maximum benefit: the most tuning it can gain, judged by \
             the {} longest paths.</p>",
            self.near_critical_paths.len()
        );
        s
    }

    /// The path as a timeline, with a legend of its colours.
    fn timeline_section(&self, palette: &Palette) -> String {
        let mut s = String::from("<h2>Timeline of the critical path</h2>\n");
        let t = &self.totals;
        let _ = writeln!(
            s,
            r#"<p class="sub">{} activities: computation {} ms ({:.2} %), {} waits for other threads with {} ms measured latency. Bars are the work on the path laid end to end in the {} clock, the clock of every figure on this page: each is as wide as what it adds to the path's length (its tooltip also gives when it ran, in wall time). Lines are where the path moves to another thread (from the thread waited for to the waiting one; their latency, wall time, is not in the length).</p>"#,
            self.activities.len(),
            ms_text(t.length_ns),
            percent(t.length_ns, t.length_ns + t.dependency_latency_ns),
            t.dependencies,
            ms_text(t.dependency_latency_ns),
            escape(&self.clock),
        );
        if self.activities.len() > MAX_ACTIVITIES {
            let _ = writeln!(
                s,
                r#"<p class="warning">Only the first {MAX_ACTIVITIES} activities are drawn (<code>tracer report --json</code> lists them all).</p>"#
            );
        }
        s.push_str("<ul class=\"legend\">\n");
        for LegendEntry { name, colour } in palette.on_path(&self.activities) {
            let _ = writeln!(
                s,
                r#"<li><span class="swatch" style="background:{colour}"></span>{}</li>"#,
                escape(name)
            );
        }
        s.push_str("</ul>\n<div class=\"figure\">\n");
        s.push_str(&timeline_svg(self, palette));
        s.push_str("</div>\n");
        s
    }

    /// The processes' share of the path.
    fn process_section(&self) -> String {
        let mut s = String::from("<h2>Processes</h2>\n<table id=\"processes\">\n");
        s.push_str(
            "<tr><th>pid</th><th>rank</th><th>critical path ms</th><th>%</th><th>command</th></tr>\n",
        );
        for p in &self.processes {
            let rank = p.rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                s,
                r#"<tr><td class="n">{}</td><td class="n">{rank}</td>{}{}<td><code>{}</code></td></tr>"#,
                p.pid,
                ms_cell(p.cp_ns),
                pct_cell(p.cp_pct),
                escape(&p.command)
            );
        }
        s.push_str("</table>\n");
        s
    }

    /// The graph's size and the message matching.
    fn footer(&self) -> String {
        let cp = &self.critical_path;
        format!(
            "<h2>Recording</h2>\n<p class=\"sub\">graph: {} vertices, {} arcs from {} events ({} lost); {}</p>\n",
            cp.vertices,
            cp.arcs,
            cp.events,
            cp.lost,
            escape(&messages_line(&self.messages))
        )
    }
}

/// The document's head: its title and style.
fn head(page: &HtmlPage) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>tracer report: {}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n",
        title_of(page)
    )
}

/// The traced command, or else the recording, escaped.
fn title_of(page: &HtmlPage) -> String {
    if page.command.is_empty() {
        escape(page.recording)
    } else {
        escape(page.command)
    }
}

/// The flame graph of the path, as the caller drew it.
fn flame_section(svg: &str) -> String {
    format!(
        "<h2>Flame graph of the critical path</h2>\n<p class=\"sub\">Width is time on the \
         critical path; stacks are process, thread and selected procedures. Hover for \
         figures.</p>\n<div class=\"figure flame-graph\">\n{svg}\n</div>\n"
    )
}

/// The section of the sampled functions: the table, then the flame graphs when drawn.
fn sampled_section(section: &SampledSection, graphs: Option<&SampledFlameGraphs>) -> String {
    let mut s = String::from("<h2>Functions on the critical path (sampled)</h2>\n");
    let _ = writeln!(
        s,
        "<p class=\"sub\">{} samples, {} unwound completely ({:.2} %); they cover {} ms of \
         the critical path ({:.2} %) and {} ms of CPU time.</p>",
        section.samples,
        section.complete,
        section.complete_pct,
        ms_text(section.critical_path_ns),
        section.critical_path_pct,
        ms_text(section.cpu_ns),
    );
    s.push_str(
        "<table id=\"sampled-functions\">\n<tr><th>function</th><th>critical path ms</th><th>%</th><th>% of CPU</th>\
         <th>self critical path ms</th><th>%</th><th>self % of CPU</th>\
         <th>zeroing gain ms</th><th>%</th><th>samples</th></tr>\n",
    );
    for f in &section.functions {
        let (zeroing, zeroing_pct) = match (f.zeroing_ns, f.zeroing_pct) {
            (Some(z), Some(p)) => (ms_cell(z), pct_cell(p)),
            _ => (
                "<td class=\"n\">-</td>".into(),
                "<td class=\"n\">-</td>".into(),
            ),
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

/// A cell of milliseconds, with the exact nanoseconds in `data-ns`.
fn ms_cell(ns: u64) -> String {
    format!(r#"<td class="n" data-ns="{ns}">{}</td>"#, ms_text(ns))
}

fn pct_cell(p: f64) -> String {
    format!(r#"<td class="n">{p:.2}</td>"#)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::workclock::ClockKind;
    use crate::format::synth;
    use crate::graph::path::Activity;
    use crate::graph::recorded::RecordedGraph;

    /// A three-stage pipeline whose middle stage (`slow`) is the bottleneck.
    fn pipeline() -> Report {
        let items = synth::pipeline(&["fast", "slow"]).items;
        let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
        Report::new(&rg, &ReportOptions::default(), None)
    }

    fn page(command: &str) -> HtmlPage<'_> {
        HtmlPage {
            command,
            recording: "run.trace",
            flame_graph_svg: "<svg id=\"flame\"></svg>",
            sampled_flame_graphs: None,
        }
    }

    #[test]
    fn the_page_names_the_bottleneck_in_its_table_and_diagnosis() {
        let r = pipeline();
        let html = r.html(&page("mpirun -np 3 ./pipeline"));
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert!(html.trim_end().ends_with("</html>"));
        assert!(html.contains("<title>tracer report: mpirun -np 3 ./pipeline</title>"));
        let slow = &r.procedures[0];
        assert_eq!(slow.name, "slow");
        let row = format!(
            r#"<tr data-procedure="slow"><td><span class="swatch" style="background:#e15759"></span>slow</td><td class="n" data-ns="{}">{}</td>"#,
            slow.cp_ns,
            ms_text(slow.cp_ns)
        );
        assert!(html.contains(&row), "{row} not in\n{html}");
        assert!(html.contains(&format!(
            "<li data-kind=\"sequential_bottleneck\">{}",
            escape(&r.diagnosis[0].text)
        )));
        assert!(html.contains("<svg id=\"flame\"></svg>"));
    }

    #[test]
    fn the_page_warns_of_probe_failures_beside_lost_events() {
        let mut r = pipeline();
        assert!(!r.html(&page("p")).contains("class=\"warning\""));
        r.critical_path.probe_failures = [("call_too_deep".to_string(), 3)].into();
        let html = r.html(&page("p"));
        assert!(
            html.contains(
                "<p class=\"warning\">probes failed, so the results may be wrong: 3 call exits \
                 not recorded"
            ),
            "{html}"
        );
    }

    #[test]
    fn the_timeline_draws_every_activity_with_a_tooltip() {
        let r = pipeline();
        let html = r.html(&page("p"));
        let works = r
            .activities
            .iter()
            .filter(|a| matches!(a, Activity::Work { .. }))
            .count();
        let waits = r.activities.len() - works;
        assert!(works > 0 && waits > 0);
        assert_eq!(html.matches("<rect class=\"work\"").count(), works);
        assert_eq!(html.matches("<line class=\"wait\"").count(), waits);
        // One row per thread on the path: the three ranks' main threads.
        assert_eq!(html.matches("<g class=\"row\">").count(), 3);
        assert!(
            html.contains("<title>slow: 300.000 ms of work (cpu clock), pid 101 tid 101"),
            "{html}"
        );
    }

    /// The bars are in the clock of the tables: each is as wide as its share of the
    /// path's length, so a process's bars add up to its row of the process table.
    #[test]
    fn the_timeline_is_drawn_in_the_clock_of_the_figures() {
        let r = pipeline();
        let html = r.html(&page("p"));
        let plot = 1200.0 - 230.0 - 20.0;
        let length = r.critical_path.path.length_ns as f64;
        assert!(html.contains("data-clock=\"cpu\""), "{html}");
        assert!(html.contains("ms along the path (cpu clock)"), "{html}");
        for p in &r.processes {
            let mut width = 0.0;
            for rect in html.split("<rect class=\"work\"").skip(1) {
                if !rect.contains(&format!("data-pid=\"{}\"", p.pid)) {
                    continue;
                }
                let w: f64 = attribute(rect, "width").parse().unwrap();
                let ns: f64 = attribute(rect, "data-work-ns").parse().unwrap();
                assert!((w - (ns * plot / length).max(0.5)).abs() < 0.01, "{rect}");
                width += w;
            }
            let expected = p.cp_ns as f64 * plot / length;
            assert!(
                (width - expected).abs() < 0.05,
                "pid {}: {width} px, not {expected}",
                p.pid
            );
        }
    }

    /// The value of `name="..."` in an element's text.
    fn attribute<'a>(element: &'a str, name: &str) -> &'a str {
        let start = element.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        let len = element[start..].find('"').unwrap();
        &element[start..start + len]
    }

    #[test]
    fn the_page_is_self_contained_and_escaped() {
        let r = pipeline();
        let html = r.html(&page("./a.out '<script>alert(1)</script>' & more"));
        assert!(!html.contains("<script"), "{html}");
        assert!(html.contains("./a.out &#39;&lt;script&gt;alert(1)&lt;/script&gt;&#39; &amp; more"));
        for external in ["src=", "href=", "@import", "url("] {
            assert!(!html.contains(external), "{external}");
        }
    }
}

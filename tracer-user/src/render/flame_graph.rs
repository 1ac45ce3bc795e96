//! The critical path as an SVG flame graph, drawn by inferno from the folded stacks that
//! `tracer_analysis::flame` computes (the same lines `--format folded` writes).

use std::collections::BTreeMap;
use std::io::{self, Write};

use inferno::differential;
use inferno::flamegraph::{self, Options};
use tracer_analysis::flame::{folded_stacks, folded_work_stacks, stats, FlameStats};
use tracer_analysis::ms_text;
use tracer_analysis::stack_source::StackSource;
use tracer_analysis::written::Written;

/// Writes the flame graph of the critical path as SVG (interactive in a browser: click
/// to zoom, search). Frames are kept however narrow, so that every stack of the folded
/// output is in it; colors follow the frame names, so the same recording draws the same.
pub fn write_flame_graph<W: Write>(
    source: &dyn StackSource,
    mut out: W,
) -> io::Result<Written<FlameStats, W>> {
    let stacks = folded_stacks(source);
    let summary = source.summary();
    let subtitle = format!(
        "{} ms of work on the {} clock; width = time on the critical path",
        ms_text(summary.critical_path_ns),
        summary.clock.name()
    );
    draw(&stacks, subtitle, &mut out)?;
    Ok(Written {
        stats: stats(&stacks),
        out,
    })
}

/// The flame graph of the critical path as an `<svg>` element for an HTML page
/// (`tracer report --html`): inferno's drawing without its XML prolog and its script.
/// Inline, the script would take the page's first `<svg>` for its own, and nothing would
/// call its `init`; the frames keep their tooltips (`<title>`).
pub(crate) fn inline_flame_graph(source: &dyn StackSource) -> io::Result<String> {
    let Written { out: bytes, .. } = write_flame_graph(source, Vec::new())?;
    let svg = String::from_utf8(bytes).map_err(io::Error::other)?;
    Ok(inline(&svg))
}

/// The flame graphs of sampled stacks for the HTML page, each an `<svg>` element (see
/// [`inline_flame_graph`]): the critical path's, the CPU's, and their difference.
pub(crate) struct InlineSampledGraphs {
    pub(crate) critical_path: String,
    pub(crate) cpu: String,
    pub(crate) difference: String,
}

pub(crate) fn inline_sampled_flame_graphs(
    source: &dyn StackSource,
) -> io::Result<InlineSampledGraphs> {
    let critical_path = folded_stacks(source);
    let cpu = folded_work_stacks(source);
    let summary = source.summary();
    let drawn = |stacks: &BTreeMap<String, u64>, title: &str, subtitle: String| {
        let mut out = Vec::new();
        draw_titled(stacks, title, subtitle, &mut out)?;
        Ok::<String, io::Error>(inline(&String::from_utf8(out).map_err(io::Error::other)?))
    };
    let cp_svg = drawn(
        &critical_path,
        "Critical path (sampled stacks)",
        format!(
            "{} ms of the path's {} ms; width = time on the critical path",
            ms_text(critical_path.values().sum()),
            ms_text(summary.critical_path_ns)
        ),
    )?;
    let cpu_svg = drawn(
        &cpu,
        "CPU (sampled stacks)",
        format!(
            "{} ms of CPU time; width = CPU time",
            ms_text(cpu.values().sum())
        ),
    )?;
    // inferno's differential input: `stack before after`, widths after, colours after
    // minus before; before (CPU) is scaled to after's total (`normalize`).
    let folded = |stacks: &BTreeMap<String, u64>| {
        stacks
            .iter()
            .map(|(line, ns)| format!("{line} {ns}\n"))
            .collect::<String>()
    };
    let mut lines = Vec::new();
    differential::from_readers(
        differential::Options {
            normalize: true,
            strip_hex: false,
        },
        folded(&cpu).as_bytes(),
        folded(&critical_path).as_bytes(),
        &mut lines,
    )?;
    let lines = String::from_utf8(lines).map_err(io::Error::other)?;
    let mut out = Vec::new();
    if critical_path.is_empty() {
        write_empty_svg(&mut out)?;
    } else {
        let mut options = options(
            "Critical path minus CPU share (sampled stacks)",
            "width = time on the critical path; red: more of the path than of the CPU time, blue: less".into(),
        );
        flamegraph::from_lines(&mut options, lines.lines(), &mut out).map_err(io::Error::other)?;
    }
    Ok(InlineSampledGraphs {
        critical_path: cp_svg,
        cpu: cpu_svg,
        difference: inline(&String::from_utf8(out).map_err(io::Error::other)?),
    })
}

/// An SVG document as an element: from `<svg` on, without `onload` and `<script>`.
fn inline(svg: &str) -> String {
    let element = svg.find("<svg").map_or(svg, |at| &svg[at..]);
    let mut out = element.replacen(r#" onload="init(evt)""#, "", 1);
    if let Some(start) = out.find("<script") {
        if let Some(len) = out[start..].find("</script>") {
            out.replace_range(start..start + len + "</script>".len(), "");
        }
    }
    out
}

/// Draws folded stacks (`frames` -> nanoseconds) under a subtitle.
fn draw<W: Write>(stacks: &BTreeMap<String, u64>, subtitle: String, out: &mut W) -> io::Result<()> {
    draw_titled(stacks, "Critical path", subtitle, out)
}

/// inferno's options of every flame graph here.
fn options(title: &str, subtitle: String) -> Options<'static> {
    let mut options = Options::default();
    options.title = title.into();
    options.subtitle = Some(subtitle);
    options.count_name = "ns".into();
    options.name_type = "Frame:".into();
    options.min_width = 0.0;
    options.hash = true;
    options.deterministic = true;
    options
}

/// [`draw`] under a title.
fn draw_titled<W: Write>(
    stacks: &BTreeMap<String, u64>,
    title: &str,
    subtitle: String,
    out: &mut W,
) -> io::Result<()> {
    if stacks.is_empty() {
        // inferno refuses an empty profile; an empty path still deserves a picture.
        return write_empty_svg(out);
    }
    let lines: Vec<String> = stacks
        .iter()
        .map(|(line, ns)| format!("{line} {ns}"))
        .collect();
    let mut options = options(title, subtitle);
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(io::Error::other)
}

/// A valid SVG that says the path is empty.
fn write_empty_svg<W: Write>(out: &mut W) -> io::Result<()> {
    writeln!(
        out,
        r#"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="1200" height="60" xmlns="http://www.w3.org/2000/svg"><text x="600" y="30" text-anchor="middle">Critical path: no work recorded</text></svg>"#
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_analysis::recorded::ProcessLabel;
    use tracer_analysis::stack_source::{
        ProcedureZeroing, SourceSummary, StackWeights, WeightedStack,
    };
    use tracer_analysis::workclock::ClockKind;

    /// `n` as inferno writes counts in frame titles: with thousands separators.
    fn with_separators(n: u64) -> String {
        let digits = n.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        out
    }

    #[test]
    fn the_svg_holds_every_stack_and_the_total() {
        let stacks: BTreeMap<String, u64> = [
            ("app rank 0 pid 100;tid 100;outer".to_string(), 50_000),
            ("app rank 1 pid 101;tid 101;outer;inner".to_string(), 30_000),
        ]
        .into();
        let mut bytes = Vec::new();
        draw(&stacks, "test".into(), &mut bytes).unwrap();
        let svg = String::from_utf8(bytes).unwrap();
        assert!(svg.starts_with("<?xml"), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        let total = format!("<title>all ({} ns, 100%)</title>", with_separators(80_000));
        assert!(svg.contains(&total), "{total} not in the SVG");
        assert!(svg.contains(&format!("<title>inner ({} ns,", with_separators(30_000))));
        assert!(svg.contains("<title>app rank 1 pid 101 ("));
    }

    #[test]
    fn the_inline_graph_is_an_element_without_script() {
        let stacks: BTreeMap<String, u64> =
            [("app pid 100;tid 100;work".to_string(), 50_000)].into();
        let mut bytes = Vec::new();
        draw(&stacks, "test".into(), &mut bytes).unwrap();
        let svg = inline(&String::from_utf8(bytes).unwrap());
        assert!(svg.starts_with("<svg "), "{svg}");
        assert!(svg.trim_end().ends_with("</svg>"));
        assert!(!svg.contains("<script") && !svg.contains("onload"), "{svg}");
        assert!(svg.contains("<title>work ("), "{svg}");
        let empty = inline(&{
            let mut b = Vec::new();
            draw(&BTreeMap::new(), "test".into(), &mut b).unwrap();
            String::from_utf8(b).unwrap()
        });
        assert!(empty.starts_with("<svg "), "{empty}");
    }

    /// Two stacks of one thread: `on_path` is 80 % of the path and half of the CPU time,
    /// `off_path` 20 % and the other half.
    struct TwoStacks {
        summary: SourceSummary,
        stacks: Vec<WeightedStack>,
    }

    impl StackSource for TwoStacks {
        fn summary(&self) -> &SourceSummary {
            &self.summary
        }
        fn stacks(&self) -> &[WeightedStack] {
            &self.stacks
        }
        fn zeroing(&self) -> &[ProcedureZeroing] {
            &[]
        }
        fn process(&self, _: u32) -> Option<&ProcessLabel> {
            None
        }
    }

    #[test]
    fn the_difference_is_the_path_beyond_the_cpu_share() {
        let stack = |name: &str, critical_path_ns, work_ns| WeightedStack {
            pid: 100,
            tid: 100,
            frames: vec!["main".into(), name.into()],
            weights: StackWeights {
                critical_path_ns,
                work_ns,
            },
        };
        let source = TwoStacks {
            summary: SourceSummary {
                clock: ClockKind::Cpu,
                critical_path_ns: 100_000,
                elapsed_ns: 0,
                events_recorded: 0,
                events_lost: 0,
            },
            stacks: vec![
                stack("off_path", 20_000, 50_000),
                stack("on_path", 80_000, 50_000),
            ],
        };
        let g = inline_sampled_flame_graphs(&source).unwrap();
        let title = |svg: &str, name: &str| {
            let at = svg.find(&format!("<title>{name} (")).unwrap();
            svg[at..at + svg[at..].find("</title>").unwrap()].to_string()
        };
        assert_eq!(
            title(&g.critical_path, "on_path"),
            "<title>on_path (80,000 ns, 80.00%)"
        );
        assert_eq!(
            title(&g.cpu, "on_path"),
            "<title>on_path (50,000 ns, 50.00%)"
        );
        // CPU scaled to the path's 100 us: 50 us each; the path has 30 us more of one.
        assert_eq!(
            title(&g.difference, "on_path"),
            "<title>on_path (80,000 ns, 80.00%; +30.00%)"
        );
        assert_eq!(
            title(&g.difference, "off_path"),
            "<title>off_path (20,000 ns, 20.00%; -30.00%)"
        );
        for svg in [&g.critical_path, &g.cpu, &g.difference] {
            assert!(svg.starts_with("<svg ") && !svg.contains("<script"));
        }
    }

    #[test]
    fn an_empty_path_is_an_svg_too() {
        let mut bytes = Vec::new();
        draw(&BTreeMap::new(), "test".into(), &mut bytes).unwrap();
        assert!(String::from_utf8(bytes).unwrap().contains("</svg>"));
    }
}

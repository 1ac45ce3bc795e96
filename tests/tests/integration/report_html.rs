//! `tracer report --html` on a real recording, read back by Debian's headless Chromium:
//! the hybrid MPI + threads program (2 ranks x 2 threads, 5 rounds; one thread of one
//! rank, the rank rotating, runs `thread_slow` for 40 ms, the others `thread_work` for
//! 10 ms; tests/programs/hybrid_mpi_threads.c) has `thread_slow` as its bottleneck by
//! construction. The page's DOM must name it in the diagnosis and first in the
//! procedure table with the figures of `report --json`, draw its five runs in the
//! timeline and hold the flame graph; the screenshot is kept as a test artifact.
//! The timeline is drawn in the clock of the figures beside it (each process's bars add
//! up to its row of the process table), and a rank a signal killed
//! (tests/programs/mpi_killed.c) is the diagnosis's first finding, on the page and in
//! the text report.

use std::collections::BTreeSet;
use std::process::Command;

use serde_json::Value;
use tracer_tests::profile::{assert_diagnosis, assert_near, ms, proc_row, tracer_json};
use tracer_tests::{openmpi, tracer};

use super::export::{dump_dom, screenshot_sized};
use super::export_perfetto::Recording;

const ROUNDS: usize = 5;

#[test]
fn hybrid_report_page_shows_the_planted_bottleneck() {
    let r = Recording::new(
        "report-html-hybrid",
        &["thread_slow", "thread_work"],
        &openmpi(2, "hybrid_mpi_threads", &["2", "5", "40", "10", "-1"]),
    );
    let json = tracer_json(&["report"], &r.trace);
    check_known_answers(&json);
    let page = r.trace.with_file_name("report.html");
    let text = report_html(&r.trace, &page);
    assert!(text.contains("diagnosis:"), "{text}");
    let dom = dump_dom(&page);
    check_self_contained(&dom);
    check_title(&dom);
    check_diagnosis(&dom, &json);
    check_procedure_table(&dom, &json);
    check_timeline(&dom, &json);
    check_flame_graph(&dom, &json);
    screenshot_sized(&page, "report-html-hybrid.png", (1280, 1600));
}

/// The figures the program's construction gives (docs in hybrid_mpi_threads.c): a
/// 200 ms path, all of it in thread_slow; zeroing it gains 150 ms; thread_work is off
/// the path.
fn check_known_answers(json: &Value) {
    assert_near(
        "critical path",
        ms(&json["critical_path"]["length_ns"]),
        200.0,
    );
    assert_eq!(
        json["procedures"][0]["name"], "thread_slow",
        "{}",
        json["procedures"]
    );
    let slow = proc_row(json, "thread_slow");
    assert_near("thread_slow on the path", ms(&slow["cp_ns"]), 200.0);
    assert_near("thread_slow zeroing", ms(&slow["zeroing_ns"]), 150.0);
    let work = proc_row(json, "thread_work");
    assert_eq!(work["cp_ns"], 0, "{work}");
    assert_eq!(work["zeroing_ns"], 0, "{work}");
    assert_diagnosis(json, &["thread_slow"], &["thread_work"]);
}

/// `tracer report --html PAGE TRACE`: writes the page, prints the text report.
fn report_html(trace: &std::path::Path, page: &std::path::Path) -> String {
    let out = Command::new(tracer())
        .arg("report")
        .arg("--html")
        .arg(page)
        .arg(trace)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tracer report --html: {stderr}");
    assert!(
        stderr.contains(&format!("wrote {} (HTML report)", page.display())),
        "{stderr}"
    );
    String::from_utf8(out.stdout).unwrap()
}

/// No script, stylesheet, image or font from elsewhere: the page is one file.
fn check_self_contained(dom: &str) {
    for outside in ["<script", "<link", "src=", "href=", "@import", "url(http"] {
        assert!(!dom.contains(outside), "the page holds {outside}");
    }
}

fn check_title(dom: &str) {
    assert!(
        dom.contains("hybrid_mpi_threads.openmpi 2 5 40 10 -1</title>"),
        "no command in the title"
    );
    assert!(dom.contains("<h1>Critical path of <code>mpirun.openmpi"));
}

/// The diagnosis's findings, in order, word for word as in `--json`; the first names
/// thread_slow.
fn check_diagnosis(dom: &str, json: &Value) {
    let items = check_diagnosis_items(dom, json);
    assert!(items[0].contains("thread_slow"), "{items:?}");
}

/// The page's findings, word for word and in order those of `--json`.
fn check_diagnosis_items(dom: &str, json: &Value) -> Vec<String> {
    let list = between(dom, "<ol id=\"diagnosis\"", "</ol>");
    let items: Vec<String> = list
        .split("<li ")
        .skip(1)
        .map(|li| text_of(between(li, ">", "</li>")))
        .collect();
    let want: Vec<String> = json["diagnosis"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| dom_text(f["text"].as_str().unwrap()))
        .collect();
    assert_eq!(items, want);
    items
}

/// Each row of the procedure table has the report's figures, in its order; thread_slow
/// first.
fn check_procedure_table(dom: &str, json: &Value) {
    let table = between(dom, "<table id=\"procedures\">", "</table>");
    let rows: Vec<&str> = table.split("<tr data-procedure=").skip(1).collect();
    let procedures = json["procedures"].as_array().unwrap();
    assert_eq!(rows.len(), procedures.len());
    assert!(rows[0].starts_with("\"thread_slow\""), "{}", rows[0]);
    for (row, p) in rows.iter().zip(procedures) {
        let f = |k: &str| p[k].as_u64().unwrap() as f64 / 1e6;
        let pc = |k: &str| format!("{:.2}", p[k].as_f64().unwrap());
        let mbm = format!(
            "{:.3}{}",
            f("mbm_ns"),
            if p["mbm_exact"] == true {
                ""
            } else {
                " (at most)"
            }
        );
        let want = vec![
            dom_text(p["name"].as_str().unwrap()),
            format!("{:.3}", f("cp_ns")),
            pc("cp_pct"),
            format!("{:.3}", f("cp_exclusive_ns")),
            format!("{:.3}", f("work_ns")),
            pc("work_pct"),
            format!("{:.3}", f("zeroing_ns")),
            pc("zeroing_pct"),
            mbm,
            pc("mbm_pct"),
        ];
        assert_eq!(cells(row), want);
        let ns: Vec<u64> = row
            .split("data-ns=\"")
            .skip(1)
            .map(|s| s.split('"').next().unwrap().parse().unwrap())
            .collect();
        let keys = [
            "cp_ns",
            "cp_exclusive_ns",
            "work_ns",
            "zeroing_ns",
            "mbm_ns",
        ];
        let exact: Vec<u64> = keys.iter().map(|k| p[k].as_u64().unwrap()).collect();
        assert_eq!(ns, exact, "{}", p["name"]);
    }
}

/// One row per thread on the path (threads of both ranks), one bar per work activity,
/// one line per wait; thread_slow's bars are the five rounds' slow threads.
fn check_timeline(dom: &str, json: &Value) {
    let svg = between(dom, "<svg id=\"timeline\"", "</svg>");
    let acts = json["activities"].as_array().unwrap();
    let works = acts.iter().filter(|a| a["type"] == "work").count();
    let waits = acts.iter().filter(|a| a["type"] == "wait").count();
    assert_eq!(svg.matches("<rect class=\"work\"").count(), works);
    assert_eq!(svg.matches("<line class=\"wait\"").count(), waits);
    let threads: BTreeSet<(u64, u64)> = acts
        .iter()
        .filter(|a| a["type"] == "work")
        .map(|a| (a["pid"].as_u64().unwrap(), a["tid"].as_u64().unwrap()))
        .collect();
    assert_eq!(svg.matches("<g class=\"row\">").count(), threads.len());
    assert!(svg.contains(">rank 0 tid ") && svg.contains(">rank 1 tid "));
    let slow_bars = svg.matches("<title>thread_slow: ").count();
    assert_eq!(slow_bars, ROUNDS, "one bar per round's slow thread");
    let slow_threads: BTreeSet<u64> = acts
        .iter()
        .filter(|a| a["procedure"] == "thread_slow")
        .map(|a| a["tid"].as_u64().unwrap())
        .collect();
    assert_eq!(slow_threads.len(), ROUNDS, "a new slow thread each round");
    check_timeline_clock(dom, json);
}

/// The timeline is in the clock of the figures: every bar is as wide as the work it adds
/// to the path (in the report's clock, not the wall time it took), so the bars of each
/// process add up to its critical path time in the process table.
fn check_timeline_clock(dom: &str, json: &Value) {
    let svg = between(dom, "<svg id=\"timeline\"", "</svg>");
    let clock = json["clock"].as_str().unwrap();
    assert!(svg.contains(&format!("data-clock=\"{clock}\"")), "no clock");
    assert!(svg.contains(&format!("ms along the path ({clock} clock)")));
    // The plot: from the labels (230 px) to the right margin (20 px) of 1200 px.
    let plot = 1200.0 - 230.0 - 20.0;
    let length = json["critical_path"]["length_ns"].as_u64().unwrap() as f64;
    let bars: Vec<(u64, f64)> = svg
        .split("<rect class=\"work\"")
        .skip(1)
        .map(|rect| {
            let width: f64 = attribute(rect, "width").parse().unwrap();
            let work_ns: f64 = attribute(rect, "data-work-ns").parse().unwrap();
            let expected = (work_ns * plot / length).max(0.5);
            assert!(
                (width - expected).abs() < 0.01,
                "{width} px for {work_ns} ns"
            );
            (attribute(rect, "data-pid").parse().unwrap(), width)
        })
        .collect();
    for p in json["processes"].as_array().unwrap() {
        let pid = p["pid"].as_u64().unwrap();
        let drawn: f64 = bars.iter().filter(|b| b.0 == pid).map(|b| b.1).sum();
        let cp_ns = p["cp_ns"].as_u64().unwrap() as f64;
        // Half a pixel at most per bar: what a bar under half a pixel is drawn as.
        let slack = 0.5 * bars.iter().filter(|b| b.0 == pid).count() as f64 + 0.05;
        assert!(
            (drawn - cp_ns * plot / length).abs() <= slack,
            "pid {pid}: {drawn} px of bars for {cp_ns} ns of {length} on the path"
        );
    }
}

/// A rank that SIGKILLs itself mid-run: the page's diagnosis names it first, as the text
/// report does, and the timeline is still in the figures' clock.
#[test]
fn a_killed_rank_is_the_first_finding_of_the_page_and_the_text() {
    const RANKS: usize = 4;
    const VICTIM: i64 = 2;
    let dir = std::env::temp_dir().join(format!("tracer-report-killed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let trace = dir.join("killed.trace");
    let out = Command::new(tracer())
        .args(["record", "-q", "-o"])
        .arg(&trace)
        .arg("--")
        .args(openmpi(RANKS, "mpi_killed", &["5", "2"]))
        .output()
        .unwrap();
    // mpirun fails (137) and the tracer passes its status on; 1 would be its own error.
    let code = out.status.code();
    assert!(
        code.is_some_and(|c| c != 0 && c != 1),
        "status {code:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json = tracer_json(&["report"], &trace);
    let victim = json["killed"][0]["pid"].as_u64().expect("a killed process");
    assert_eq!(json["killed"][0]["rank"], VICTIM, "{}", json["killed"]);
    let first = &json["diagnosis"][0];
    assert_eq!(first["kind"], "process_killed", "{}", json["diagnosis"]);
    let named = format!("rank {VICTIM} (pid {victim}, ");
    let text = first["text"].as_str().unwrap();
    assert!(text.starts_with(&named), "{text}");
    assert!(
        text.contains("mpi_killed.openmpi 5 2) was killed by SIGKILL at "),
        "{text}"
    );
    assert!(
        text.ends_with("sends never received: 3 from it, 1 to it; incomplete collectives: 1"),
        "{text}"
    );

    let page = dir.join("report.html");
    let report = report_html(&trace, &page);
    assert!(
        report.contains(&format!("diagnosis:\n  1. {text}\n")),
        "{report}"
    );
    let dom = dump_dom(&page);
    check_diagnosis_items(&dom, &json);
    let list = between(&dom, "<ol id=\"diagnosis\"", "</ol>");
    assert!(list.contains("<li data-kind=\"process_killed\">"), "{list}");
    check_timeline_clock(&dom, &json);
    screenshot_sized(&page, "report-html-killed.png", (1280, 1200));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The value of `name="..."` in an element's markup.
fn attribute<'a>(element: &'a str, name: &str) -> &'a str {
    between(element, &format!(" {name}=\""), "\"")
}

/// inferno's flame graph, inline and without its script: the total is the path's
/// length, and thread_slow is a frame of it.
fn check_flame_graph(dom: &str, json: &Value) {
    let figure = between(dom, "<div class=\"figure flame-graph\">", "</div>");
    assert!(figure.trim_start().starts_with("<svg"), "no inline SVG");
    let total = with_separators(json["critical_path"]["length_ns"].as_u64().unwrap());
    assert!(
        figure.contains(&format!("<title>all ({total} ns, 100%)</title>")),
        "no total of {total} ns"
    );
    assert!(figure.contains("<title>thread_slow ("));
}

/// The text from `start` (which must be there) to the next `end`.
fn between<'a>(s: &'a str, start: &str, end: &str) -> &'a str {
    let from = s
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in the page"))
        + start.len();
    let len = s[from..].find(end).unwrap_or(s.len() - from);
    &s[from..from + len]
}

/// The text of each `<td>` of a table row, tags left out.
fn cells(row: &str) -> Vec<String> {
    row.split("<td")
        .skip(1)
        .map(|cell| text_of(between(cell, ">", "</td>")))
        .collect()
}

/// Markup without its tags.
fn text_of(markup: &str) -> String {
    let mut out = String::new();
    let mut in_tag = false;
    for c in markup.chars() {
        match c {
            '<' => in_tag = true,
            '>' => in_tag = false,
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// Text as Chromium serializes it in the DOM: `&`, `<` and `>` escaped.
fn dom_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

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

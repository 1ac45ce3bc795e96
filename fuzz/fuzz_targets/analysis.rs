//! The whole analysis on any recording the reader accepts: the profile (`tracer
//! analyze`), the graph and its report with metrics (`tracer report`), without a panic.
//! The chunks' checksums are made right first (`seal`): the analysis sees what a mutation
//! changed.
#![no_main]

use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use tracer_analysis::recorded::RecordedGraph;
use tracer_analysis::recording::{Item, RecordingReader};
use tracer_analysis::Metrics;
use tracer_analysis::{profile::Profile, workclock::ClockKind, Pipeline};
use tracer_analysis::{Report, ReportOptions};

fuzz_target!(|data: &[u8]| {
    let Ok(mut reader) = RecordingReader::from_bytes(tracer_fuzz::seal(data)) else {
        return;
    };
    let mut items = Vec::new();
    while let Ok(Some(item)) = reader.next_item() {
        items.push(item);
    }
    let lost = reader.totals().events_lost;
    for clock in [ClockKind::Cpu, ClockKind::Wall] {
        let mut pipeline = Pipeline::new(clock);
        let mut commands = HashMap::new();
        for item in &items {
            if let Item::Process(p) = item {
                commands.insert(p.pid, p.command.clone());
            }
            pipeline.item(item);
        }
        let profile = Profile::new(pipeline.flush(), clock, lost, &commands);
        let _ = profile.text();
    }
    let rg = RecordedGraph::from_items(&items, ClockKind::Cpu);
    let metrics = Metrics::from_items(&items, &reader.meta);
    let report = Report::new(&rg, &ReportOptions::default(), Some(metrics));
    let _ = report.text();
});

use std::collections::HashMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use tracer_analysis::calls;
use tracer_analysis::recording::{Item, RecordingReader};
use tracer_analysis::records::{self, Record};
use tracer_common::{UNSET, UNSET32};

#[derive(Args)]
pub(super) struct DumpArgs {
    /// A recording made with `tracer record -o`.
    file: PathBuf,
}

fn opt32(v: i32) -> String {
    if v == UNSET32 {
        "-".into()
    } else {
        v.to_string()
    }
}

fn opt64(v: i64) -> String {
    if v == UNSET {
        "-".into()
    } else {
        v.to_string()
    }
}

pub(super) fn run(a: DumpArgs) -> anyhow::Result<ExitCode> {
    super::tell_condition(&a.file);
    let mut r =
        RecordingReader::open(&a.file).with_context(|| format!("reading {}", a.file.display()))?;
    let out = std::io::stdout();
    let mut out = std::io::BufWriter::new(out.lock());
    // The recording snapshots a process again after exec and at its first MPI/PVM call:
    // a snapshot that says nothing new (same command, same rank) is not printed again.
    let mut shown: HashMap<u32, (Option<i32>, String)> = HashMap::new();
    while let Some(item) = r
        .next_item()
        .with_context(|| format!("reading {}", a.file.display()))?
    {
        let line = match item {
            Item::Process(p) => {
                let seen = (p.env_rank, p.command.clone());
                if shown.get(&p.pid) == Some(&seen) {
                    continue;
                }
                shown.insert(p.pid, seen);
                format!(
                    "process pid={} rank={} mappings={} command={}",
                    p.pid,
                    p.env_rank.map_or_else(|| "-".into(), |r| r.to_string()),
                    p.mappings.len(),
                    p.command
                )
            }
            Item::Probe(p) => format!("probe id={} {} in {}", p.id, p.symbol, p.path),
            Item::Record(rec) => {
                let h = rec.header();
                let head = format!(
                    "{} {}/{} cpu={} {}",
                    h.ts_ns,
                    h.tgid,
                    h.tid,
                    h.cpu_ns,
                    records::kind_name(h.kind)
                );
                let body = match &rec {
                    Record::CallEnter(c) | Record::CallExit(c) => format!(
                        "{} peer={} tag={} comm={:#x} handle={:#x} bytes={} count={} ret={} out={} site={:#x}",
                        calls::name(calls::split_call_field(h.call).id),
                        opt32(c.peer),
                        opt32(c.tag),
                        c.comm,
                        c.handle,
                        opt64(c.bytes),
                        opt32(c.count),
                        opt64(c.ret),
                        opt64(c.out),
                        c.site
                    ),
                    Record::HandleArray(x) => {
                        let values: Vec<String> =
                            x.values.iter().map(|v| format!("{v:#x}")).collect();
                        format!(
                            "first={} total={} values={}",
                            x.first,
                            x.total,
                            values.join(",")
                        )
                    }
                    Record::StatusArray(x) => {
                        let list = |v: &[i32]| {
                            v.iter().map(|&n| opt32(n)).collect::<Vec<_>>().join(",")
                        };
                        format!(
                            "first={} total={} source={} tag={}",
                            x.first,
                            x.total,
                            list(&x.source),
                            list(&x.tag)
                        )
                    }
                    Record::FuncEnter(_) | Record::FuncExit(_) => format!("probe={}", h.call),
                    Record::FutexEnter(f) => {
                        format!(
                            "uaddr={:#x} op={} val={} site={:#x}",
                            f.uaddr, f.op, f.val, f.site
                        )
                    }
                    Record::FutexExit(f) => format!("ret={}", f.ret),
                    Record::SwitchOut(s) => format!("state={}", s.prev_state),
                    Record::SwitchIn(_) => String::new(),
                    Record::Wakeup(w) | Record::WakeupNew(w) => {
                        format!("wakee={}/{}", w.wakee_tgid, w.wakee_tid)
                    }
                    Record::Fork(f) => format!("child={}", f.child_tid),
                    Record::Exec(e) => records::exec_filename(e),
                    Record::Exit(e) => format!("group_dead={}", e.group_dead),
                    Record::ProcessEnd(e) => format!("status={:#x}", e.status),
                    Record::CallsUnwound(u) => format!(
                        "calls={} innermost={}",
                        u.calls,
                        calls::name(calls::split_call_field(h.call).id)
                    ),
                    Record::Sample(x) => {
                        let frames: Vec<String> = x.frames[..usize::from(x.depth).min(x.frames.len())]
                            .iter()
                            .map(|f| format!("{f:#x}"))
                            .collect();
                        format!(
                            "end={} stack_bytes={} frames={}",
                            x.end,
                            x.stack_bytes,
                            frames.join(",")
                        )
                    }
                };
                format!("{head} {body}")
            }
        };
        if writeln!(out, "{line}").is_err() {
            break; // closed pipe (e.g. `| head`)
        }
    }
    // Known once the whole recording is read (not after a closed pipe).
    if let Some(t) = &r.trailer {
        super::warn_probe_failures(&t.probe_failures);
        super::warn_lost(t.events_total, t.events_lost);
    }
    Ok(ExitCode::SUCCESS)
}

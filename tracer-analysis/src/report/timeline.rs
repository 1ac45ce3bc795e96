//! The critical path as a timeline, in SVG: one row per thread the path runs through,
//! its work as rectangles coloured by procedure, its waits as lines from the thread
//! waited for to the waiting one, coloured by call; each with a tooltip (`<title>`).

use crate::format::node::ShownId;
use std::collections::BTreeMap;
use std::fmt::Write;

use super::markup::{escape, Palette};
use super::types::Report;
use crate::graph::path::{Activity, THREAD_START};
use crate::units::{ms, ms_text};

/// Most activities drawn: a longer path is drawn up to there, and says so.
pub(crate) const MAX_ACTIVITIES: usize = 20_000;

const WIDTH: f64 = 1200.0;
const LABEL_WIDTH: f64 = 230.0;
const RIGHT_MARGIN: f64 = 20.0;
const ROW_HEIGHT: f64 = 18.0;
const ROW_GAP: f64 = 6.0;
const TOP: f64 = 8.0;
const AXIS_HEIGHT: f64 = 34.0;

/// The threads on the path, each a row, sorted by process and thread.
struct Rows(BTreeMap<(u32, u32), usize>);

impl Rows {
    fn of(acts: &[Activity]) -> Rows {
        let mut keys: BTreeMap<(u32, u32), usize> = BTreeMap::new();
        for a in acts {
            match a {
                Activity::Work { pid, tid, .. } => {
                    keys.insert((*pid, *tid), 0);
                }
                Activity::Wait {
                    from_pid,
                    from_tid,
                    to_pid,
                    to_tid,
                    ..
                } => {
                    keys.insert((*from_pid, *from_tid), 0);
                    keys.insert((*to_pid, *to_tid), 0);
                }
            }
        }
        for (i, row) in keys.values_mut().enumerate() {
            *row = i;
        }
        Rows(keys)
    }

    /// Top of a thread's row.
    fn y(&self, pid: u32, tid: u32) -> f64 {
        TOP + self.0.get(&(pid, tid)).copied().unwrap_or(0) as f64 * (ROW_HEIGHT + ROW_GAP)
    }

    fn height(&self) -> f64 {
        TOP + self.0.len() as f64 * (ROW_HEIGHT + ROW_GAP)
    }
}

/// Where on the path an activity is, to x: the path laid out in the clock its length
/// and every figure of the report are in (the work clock: with the CPU clock a thread's
/// bar is as wide as the CPU time it adds to the path, not the wall time it took), the
/// first work at the left of the plot and the path's end at its right. A wait adds
/// nothing to the length: it is drawn where the path moves, as a line between the rows.
struct Scale {
    span_ns: u64,
    /// The probe clock at the path's first work: tooltips give wall times from there.
    wall_t0: u64,
}

impl Scale {
    fn of(acts: &[Activity]) -> Scale {
        let works = acts.iter().filter_map(|a| match a {
            Activity::Work {
                start_ns, work_ns, ..
            } => Some((*start_ns, *work_ns)),
            Activity::Wait { .. } => None,
        });
        Scale {
            span_ns: works.clone().map(|(_, w)| w).sum::<u64>().max(1),
            wall_t0: works.map(|(s, _)| s).filter(|&s| s > 0).min().unwrap_or(0),
        }
    }

    /// x of a point `along_ns` into the path.
    fn x(&self, along_ns: u64) -> f64 {
        let plot = WIDTH - LABEL_WIDTH - RIGHT_MARGIN;
        LABEL_WIDTH + along_ns as f64 * plot / self.span_ns as f64
    }

    /// Wall milliseconds since the path's first work, on the probe clock.
    fn wall_since(&self, t: u64) -> String {
        ms_text(t.saturating_sub(self.wall_t0))
    }
}

/// The timeline of the report's critical path, an `<svg>` element.
pub(crate) fn timeline_svg(r: &Report, palette: &Palette) -> String {
    let acts = &r.activities[..r.activities.len().min(MAX_ACTIVITIES)];
    let rows = Rows::of(acts);
    let scale = Scale::of(acts);
    let height = rows.height() + AXIS_HEIGHT;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg id="timeline" class="timeline" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="timeline of the critical path" data-clock="{}" data-span-ns="{}">"#,
        escape(&r.clock),
        scale.span_ns,
    );
    s.push_str(&row_labels(r, &rows));
    s.push_str(&activities(acts, &rows, &scale, palette, &r.clock));
    s.push_str(&axis(&scale, rows.height(), &r.clock));
    s.push_str("</svg>\n");
    s
}

/// Each row's band and its thread's name, the command in its tooltip.
fn row_labels(r: &Report, rows: &Rows) -> String {
    let mut s = String::new();
    for &(pid, tid) in rows.0.keys() {
        let y = rows.y(pid, tid);
        let process = r.processes.iter().find(|p| p.pid == pid);
        let (shown_pid, shown_tid) = (ShownId(pid), ShownId(tid));
        let who = match process.and_then(|p| p.rank) {
            Some(rank) => format!("rank {rank} tid {shown_tid}"),
            None => format!("pid {shown_pid} tid {shown_tid}"),
        };
        let main = if pid == tid { " (main)" } else { "" };
        let command = process.map(|p| p.command.as_str()).unwrap_or("");
        let _ = writeln!(
            s,
            r#"<g class="row"><title>pid {shown_pid} tid {shown_tid}: {}</title><rect class="band" x="0" y="{y}" width="{WIDTH}" height="{ROW_HEIGHT}"/><text x="6" y="{}">{}{main}</text></g>"#,
            escape(command),
            y + ROW_HEIGHT - 5.0,
            escape(&who),
        );
    }
    s
}

/// The work rectangles and wait lines, in path order.
fn activities(
    acts: &[Activity],
    rows: &Rows,
    scale: &Scale,
    palette: &Palette,
    clock: &str,
) -> String {
    let mut s = String::new();
    // How far along the path the drawing is, in the work clock.
    let mut along = 0;
    for a in acts {
        match a {
            Activity::Work {
                pid,
                tid,
                procedure,
                start_ns,
                end_ns,
                work_ns,
            } => {
                let work = DrawnWork {
                    pid: *pid,
                    tid: *tid,
                    procedure,
                    along_ns: along,
                    work_ns: *work_ns,
                    wall_start_ns: (*start_ns).max(scale.wall_t0),
                    wall_end_ns: *end_ns,
                };
                s.push_str(&work_rect(&work, rows, scale, palette, clock));
                along += work_ns;
            }
            Activity::Wait { .. } => {
                s.push_str(&wait_line(a, along, rows, scale, palette));
            }
        }
    }
    s
}

/// A thread's work in one procedure as drawn: where on the path it starts and what it
/// adds to it, and when it ran on the probe (wall) clock.
struct DrawnWork<'a> {
    pid: u32,
    tid: u32,
    procedure: &'a str,
    along_ns: u64,
    work_ns: u64,
    wall_start_ns: u64,
    wall_end_ns: u64,
}

/// A thread's work in one procedure: a rectangle at least half a pixel wide.
fn work_rect(
    work: &DrawnWork,
    rows: &Rows,
    scale: &Scale,
    palette: &Palette,
    clock: &str,
) -> String {
    let DrawnWork {
        pid,
        tid,
        procedure,
        along_ns,
        work_ns,
        wall_start_ns,
        wall_end_ns,
    } = *work;
    let x = scale.x(along_ns);
    let width = (scale.x(along_ns + work_ns) - x).max(0.5);
    format!(
        r#"<rect class="work" x="{x:.2}" y="{}" width="{width:.2}" height="{ROW_HEIGHT}" fill="{}" data-pid="{pid}" data-work-ns="{work_ns}"><title>{}: {} ms of work ({clock} clock), pid {} tid {}, from {} ms to {} ms of the path; it ran from {} ms to {} ms wall time</title></rect>
"#,
        rows.y(pid, tid),
        palette.colour(procedure),
        escape(procedure),
        ms_text(work_ns),
        ShownId(pid),
        ShownId(tid),
        ms_text(along_ns),
        ms_text(along_ns + work_ns),
        scale.wall_since(wall_start_ns),
        scale.wall_since(wall_end_ns),
    )
}

/// A wait: a line from the thread waited for to the waiting thread, where the path
/// moves from one to the other (its latency is not in the path's length).
fn wait_line(a: &Activity, along: u64, rows: &Rows, scale: &Scale, palette: &Palette) -> String {
    let Activity::Wait {
        from_pid,
        from_tid,
        to_pid,
        to_tid,
        call,
        latency_ns,
    } = a
    else {
        return String::new();
    };
    let [shown_from_pid, shown_from_tid, shown_to_pid, shown_to_tid] =
        [*from_pid, *from_tid, *to_pid, *to_tid].map(ShownId);
    let what = if call == THREAD_START {
        format!("tid {shown_to_tid} is started by tid {shown_from_tid}")
    } else {
        format!(
            "pid {shown_to_pid} tid {shown_to_tid} waits in {call} for pid {shown_from_pid} tid {shown_from_tid}"
        )
    };
    let middle = ROW_HEIGHT / 2.0;
    let x = scale.x(along);
    format!(
        r#"<line class="wait" x1="{x:.2}" y1="{}" x2="{x:.2}" y2="{}" stroke="{}"><title>{} ({} ms measured latency, wall time)</title></line>
"#,
        rows.y(*from_pid, *from_tid) + middle,
        rows.y(*to_pid, *to_tid) + middle,
        palette.colour(call),
        escape(&what),
        ms_text(*latency_ns),
    )
}

/// An axis under the rows, in milliseconds along the path in its clock.
fn axis(scale: &Scale, top: f64, clock: &str) -> String {
    let step = tick_step(scale.span_ns);
    let mut s = format!(
        r#"<g class="axis"><line x1="{LABEL_WIDTH}" y1="{top}" x2="{}" y2="{top}"/>"#,
        WIDTH - RIGHT_MARGIN
    );
    let mut t = 0;
    while t <= scale.span_ns {
        let x = scale.x(t);
        let _ = write!(
            s,
            r#"<line x1="{x:.2}" y1="{top}" x2="{x:.2}" y2="{}"/><text x="{x:.2}" y="{}">{} ms</text>"#,
            top + 5.0,
            top + 18.0,
            tick_label(t),
        );
        t += step;
    }
    let _ = write!(
        s,
        r#"<text class="unit" x="{}" y="{}" style="text-anchor:end">ms along the path ({clock} clock)</text>"#,
        LABEL_WIDTH - 24.0,
        top + 18.0,
    );
    s.push_str("</g>\n");
    s
}

/// A round tick interval (1, 2 or 5 times a power of ten ns) giving at most 10 ticks.
fn tick_step(span_ns: u64) -> u64 {
    let mut unit = 1u64;
    loop {
        for m in [1, 2, 5] {
            if span_ns / (unit * m) <= 10 {
                return unit * m;
            }
        }
        unit *= 10;
    }
}

/// A tick's milliseconds, with as few decimals as it needs.
fn tick_label(ns: u64) -> String {
    let text = format!("{:.6}", ms(ns));
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_few() {
        assert_eq!(tick_step(200_000_000), 20_000_000);
        assert_eq!(tick_step(1), 1);
        assert_eq!(tick_step(1_000), 100);
        assert_eq!(tick_step(45_000_000), 5_000_000);
        assert_eq!(tick_label(20_000_000), "20");
        assert_eq!(tick_label(2_500_000), "2.5");
        assert_eq!(tick_label(0), "0");
    }
}

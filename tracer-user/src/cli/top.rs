//! `tracer top`: `record` with a live terminal view of the critical path in place of the
//! lines `record` prints while it traces. The view runs on a thread of its own (the
//! session's event loop owns this one), gets a sample of the profile every second, and
//! ends before the probes are detached, so that the detaching line and the summary are
//! printed on the normal screen, as `record` prints them.

use std::cell::RefCell;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::bail;
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table};
use ratatui::{DefaultTerminal, Frame};
use tracer_analysis::analysis::profile::{PathThread, ProcedureRow, Profile};
use tracer_analysis::units::{ms, ms_text};
use tracer_user::session::{EventsSoFar, Ready};

use super::record::{loss_line, run_with, RecordArgs, WhileTracing};

/// `record`'s options, but `--analyze-after`, which computes no live profile (README:
/// not with `tracer top`): not offered (and refused if given).
#[derive(Args)]
#[command(mut_arg("analyze_after", |a| a.hide(true)))]
pub(super) struct TopArgs {
    #[command(flatten)]
    record: RecordArgs,
}

pub(super) fn run(a: TopArgs) -> anyhow::Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        bail!("tracer top draws on a terminal; without one, use `tracer record --interval SECS`");
    }
    let screen = Screen::new();
    let sender = |s: &Screen| s.tx.clone();
    let (samples, losses) = (sender(&screen), sender(&screen));
    let (starter, ender) = (screen.clone(), screen.clone());
    let live = WhileTracing {
        on_sample: Box::new(move |p: &Profile| {
            let _ = samples.send(Update::Sample(Box::new(p.clone())));
        }),
        // The view starts once the probes are in and the command is launched: the
        // terminal is the session's until then (its errors, the command's fork).
        on_ready: Some(Box::new(move |r: &Ready| {
            starter.start();
            let _ = starter.tx.send(Update::Notice(format!(
                "{} processes, {} probes in {} MPI/PVM libraries so far, {}",
                r.processes,
                r.probes,
                r.libraries,
                r.links.describe()
            )));
        })),
        on_loss: Box::new(move |e: &EventsSoFar| {
            let _ = losses.send(Update::Notice(loss_line(e)));
        }),
        before_detach: Some(Box::new(move || ender.end())),
        live_view: true,
    };
    let result = run_with(a.record, live);
    // The session may have failed before it detached: the terminal is restored either way.
    screen.end();
    result
}

/// What the view thread is told.
enum Update {
    Sample(Box<Profile>),
    /// A line for the status bar (tracing started, events lost).
    Notice(String),
    End,
}

/// The view thread and the way to it; cloned into the session's hooks. Updates sent
/// before the thread starts wait in the channel.
#[derive(Clone)]
struct Screen {
    tx: Sender<Update>,
    /// The receiving end, until the thread takes it.
    rx: Rc<RefCell<Option<Receiver<Update>>>>,
    thread: Rc<RefCell<Option<JoinHandle<()>>>>,
}

impl Screen {
    fn new() -> Screen {
        let (tx, rx) = mpsc::channel();
        Screen {
            tx,
            rx: Rc::new(RefCell::new(Some(rx))),
            thread: Rc::new(RefCell::new(None)),
        }
    }

    /// Starts the view thread (once).
    fn start(&self) {
        if let Some(rx) = self.rx.borrow_mut().take() {
            *self.thread.borrow_mut() = std::thread::Builder::new()
                .name("tracer-top".into())
                .spawn(move || View::run(rx))
                .ok();
        }
    }

    /// Ends the view and waits until the terminal is restored (once; later calls return).
    fn end(&self) {
        let _ = self.tx.send(Update::End);
        if let Some(t) = self.thread.borrow_mut().take() {
            let _ = t.join();
        }
    }
}

/// Which column orders the procedures.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SortBy {
    CriticalPath,
    Zeroing,
    Cpu,
}

impl SortBy {
    fn next(self) -> SortBy {
        match self {
            SortBy::CriticalPath => SortBy::Zeroing,
            SortBy::Zeroing => SortBy::Cpu,
            SortBy::Cpu => SortBy::CriticalPath,
        }
    }

    fn name(self) -> &'static str {
        match self {
            SortBy::CriticalPath => "critical path",
            SortBy::Zeroing => "zeroing",
            SortBy::Cpu => "cpu",
        }
    }

    fn key(self, r: &ProcedureRow) -> u64 {
        match self {
            SortBy::CriticalPath => r.cp_ns,
            SortBy::Zeroing => r.zeroing_ns,
            SortBy::Cpu => r.cpu_ns,
        }
    }
}

/// The two screens `tab` switches between.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Page {
    Procedures,
    Messages,
}

/// A sample and when it came, for rates between two samples.
struct Timed {
    profile: Box<Profile>,
    at: Instant,
}

struct View {
    started: Instant,
    latest: Option<Timed>,
    previous: Option<Timed>,
    notice: String,
    sort: SortBy,
    page: Page,
    stopping: bool,
}

impl View {
    /// The view thread: draws after every update and key, until told to end.
    fn run(rx: Receiver<Update>) {
        let mut terminal = ratatui::init();
        let mut view = View {
            started: Instant::now(),
            latest: None,
            previous: None,
            notice: "loading the probes".into(),
            sort: SortBy::CriticalPath,
            page: Page::Procedures,
            stopping: false,
        };
        let _ = view.show(&mut terminal, &rx);
        ratatui::restore();
    }

    fn show(
        &mut self,
        terminal: &mut DefaultTerminal,
        rx: &Receiver<Update>,
    ) -> std::io::Result<()> {
        loop {
            loop {
                match rx.try_recv() {
                    Ok(Update::Sample(p)) => {
                        self.previous = self.latest.take();
                        self.latest = Some(Timed {
                            profile: p,
                            at: Instant::now(),
                        });
                        // The traced command shares the terminal: a full redraw each
                        // second wipes what it printed over the view.
                        terminal.clear()?;
                    }
                    Ok(Update::Notice(n)) => self.notice = n,
                    Ok(Update::End) | Err(TryRecvError::Disconnected) => return Ok(()),
                    Err(TryRecvError::Empty) => break,
                }
            }
            terminal.draw(|f| self.draw(f))?;
            if event::poll(Duration::from_millis(100))? {
                if let Event::Key(k) = event::read()? {
                    if k.kind == KeyEventKind::Press {
                        self.key(k.code, k.modifiers);
                    }
                }
            }
        }
    }

    fn key(&mut self, code: KeyCode, modifiers: KeyModifiers) {
        match code {
            KeyCode::Char('q') | KeyCode::Esc => self.stop(),
            // Raw mode: Ctrl-C is a key here, not a signal.
            KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => self.stop(),
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Tab | KeyCode::Char('v') => {
                self.page = match self.page {
                    Page::Procedures => Page::Messages,
                    Page::Messages => Page::Procedures,
                }
            }
            _ => {}
        }
    }

    /// Stops tracing as Ctrl-C stops `record`: the session writes its outputs and ends.
    fn stop(&mut self) {
        if !self.stopping {
            self.stopping = true;
            self.notice = "stopping: writing the outputs".into();
            // SAFETY: a signal to this process, whose session handles SIGINT.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGINT);
            }
        }
    }

    fn draw(&self, f: &mut Frame) {
        let [head, body, foot] = Layout::vertical([
            Constraint::Length(5),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(f.area());
        f.render_widget(
            Paragraph::new(self.headline()).block(Block::bordered().title(" tracer top ")),
            head,
        );
        match (&self.latest, self.page) {
            (None, _) => f.render_widget(Paragraph::new("waiting for the first sample"), body),
            (Some(t), Page::Procedures) => {
                let through = path_processes(&t.profile);
                let rows: usize = through
                    .iter()
                    .map(|q| 1 + q.threads.len().min(THREADS_SHOWN))
                    .sum();
                let [procedures, path] = Layout::vertical([
                    Constraint::Min(5),
                    // The rows, a header and the borders, or what room the procedures leave.
                    Constraint::Length(rows.min(16) as u16 + 3),
                ])
                .areas(body);
                f.render_widget(self.procedures(&t.profile), procedures);
                f.render_widget(path_table(&t.profile, &through), path);
            }
            (Some(t), Page::Messages) => {
                f.render_widget(Paragraph::new(self.messages(&t.profile)), body)
            }
        }
        let keys = format!(
            " q stop and write the outputs   s sort (by {})   tab switch view   | {}",
            self.sort.name(),
            self.notice
        );
        f.render_widget(
            Paragraph::new(keys).style(Style::new().add_modifier(Modifier::REVERSED)),
            foot,
        );
    }

    /// The path's length, growth and end; the events so far.
    fn headline(&self) -> Vec<Line<'static>> {
        let elapsed = self.started.elapsed().as_secs_f64();
        let Some(t) = &self.latest else {
            return vec![Line::from(format!("{elapsed:.1} s"))];
        };
        let p = &t.profile;
        let cp = &p.critical_path;
        let growth = self.rate(|p| ms(p.critical_path.length_ns));
        let scope = if cp.within_program {
            ""
        } else {
            " (all traced threads: no MPI/PVM call or selected procedure yet)"
        };
        vec![
            Line::from(format!(
                "critical path {:.3} ms ({} clock){scope}, growing {} ms/s; {:.1} s traced",
                ms(cp.length_ns),
                p.clock,
                growth.map_or("-".into(), |g| format!("{g:.1}")),
                elapsed
            )),
            Line::from(format!(
                "ends in pid {} tid {} {}",
                cp.ends_in_pid, cp.ends_in_tid, cp.ends_in_command
            )),
            Line::from(format!(
                "messages {} matched of {} sent ({} /s), {} unmatched; events {}, {} lost",
                p.messages.matched,
                p.messages.sent,
                self.rate(|p| p.messages.matched as f64)
                    .map_or("-".into(), |r| format!("{r:.0}")),
                p.messages.unmatched,
                p.events.total,
                p.events.lost
            )),
        ]
    }

    /// Per second between the last two samples.
    fn rate(&self, of: impl Fn(&Profile) -> f64) -> Option<f64> {
        let (Some(now), Some(before)) = (&self.latest, &self.previous) else {
            return None;
        };
        let secs = now.at.duration_since(before.at).as_secs_f64();
        (secs > 0.0).then(|| (of(&now.profile) - of(&before.profile)) / secs)
    }

    fn procedures(&self, p: &Profile) -> Table<'static> {
        let mut rows: Vec<&ProcedureRow> = p.procedures.iter().collect();
        rows.sort_by_key(|r| std::cmp::Reverse(self.sort.key(r)));
        let pct = |x: f64| format!("{x:.1}");
        let body: Vec<Row> = rows
            .iter()
            .map(|r| {
                Row::new(vec![
                    r.name.clone(),
                    ms_text(r.cp_ns),
                    pct(r.cp_pct),
                    ms_text(r.zeroing_ns),
                    pct(r.zeroing_pct),
                    ms_text(r.cpu_ns),
                    pct(r.cpu_pct),
                ])
            })
            .collect();
        let header = Row::new(vec![
            "procedure",
            "cp ms",
            "cp %",
            "zeroing ms",
            "zero %",
            "cpu ms",
            "cpu %",
        ])
        .style(Style::new().add_modifier(Modifier::BOLD));
        Table::new(
            body,
            [
                Constraint::Min(30),
                Constraint::Length(12),
                Constraint::Length(7),
                Constraint::Length(12),
                Constraint::Length(7),
                Constraint::Length(12),
                Constraint::Length(7),
            ],
        )
        .header(header)
        .block(Block::bordered().title(format!(" procedures by {} ", self.sort.name())))
    }

    fn messages(&self, p: &Profile) -> Vec<Line<'static>> {
        let m = &p.messages;
        let s = &p.sync;
        vec![
            Line::from(format!(
                "point-to-point: {} sent, {} received, {} matched, {} unmatched",
                m.sent, m.received, m.matched, m.unmatched
            )),
            Line::from(format!(
                "collectives: {} exits, {} incomplete",
                m.collectives, m.collectives_incomplete
            )),
            Line::from(format!(
                "shared-memory dependencies: {} wakeups ({} by a thread's exit), {} thread \
                 creations, {} joins without a wait, {} lock handoffs, {} condition signals, \
                 {} semaphore posts; OpenMP: {} forks, {} joins, {} barriers",
                s.wakeups,
                s.exit_wakeups,
                s.creations,
                s.joins,
                s.lock_handoffs,
                s.signals,
                s.sem_posts,
                s.omp_forks,
                s.omp_joins,
                s.omp_barriers
            )),
            Line::from(format!(
                "events: {} recorded, {} lost",
                p.events.total, p.events.lost
            )),
        ]
    }
}

/// A process the critical path runs through: its threads' time on the path.
struct PathProcess<'a> {
    pid: u32,
    command: &'a str,
    cp_ns: u64,
    cp_pct: f64,
    /// Its threads on the path, by time on it, largest first.
    threads: Vec<&'a PathThread>,
}

/// The processes the path runs through, by time on it, largest first.
fn path_processes(p: &Profile) -> Vec<PathProcess<'_>> {
    let mut by_pid: Vec<PathProcess> = Vec::new();
    for t in &p.threads {
        match by_pid.iter_mut().find(|q| q.pid == t.pid) {
            Some(q) => {
                q.cp_ns += t.cp_ns;
                q.cp_pct += t.cp_pct;
                q.threads.push(t);
            }
            None => by_pid.push(PathProcess {
                pid: t.pid,
                command: &t.command,
                cp_ns: t.cp_ns,
                cp_pct: t.cp_pct,
                threads: vec![t],
            }),
        }
    }
    by_pid.sort_by(|x, y| y.cp_ns.cmp(&x.cp_ns).then(x.pid.cmp(&y.pid)));
    by_pid
}

/// Threads shown under each process of the path.
const THREADS_SHOWN: usize = 3;

/// Where the path runs: a row per process, then its threads that hold most of it.
fn path_table(p: &Profile, through: &[PathProcess]) -> Table<'static> {
    let mut body = Vec::new();
    for q in through {
        body.push(Row::new(vec![
            format!("pid {} {}", q.pid, q.command),
            q.threads.len().to_string(),
            ms_text(q.cp_ns),
            format!("{:.1}", q.cp_pct),
        ]));
        for t in q.threads.iter().take(THREADS_SHOWN) {
            body.push(Row::new(vec![
                format!("  tid {}", t.tid),
                String::new(),
                ms_text(t.cp_ns),
                format!("{:.1}", t.cp_pct),
            ]));
        }
    }
    let header = Row::new(vec!["process / thread", "threads", "cp ms", "cp %"])
        .style(Style::new().add_modifier(Modifier::BOLD));
    Table::new(
        body,
        [
            Constraint::Min(30),
            Constraint::Length(8),
            Constraint::Length(12),
            Constraint::Length(7),
        ],
    )
    .header(header)
    .block(Block::bordered().title(format!(
        " path runs through {} processes, {} threads ",
        through.len(),
        p.threads.len()
    )))
}

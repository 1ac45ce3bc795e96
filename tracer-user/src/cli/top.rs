//! `tracer top`: `record` with a live terminal view of the critical path in place of the
//! lines `record` prints while it traces. The view runs on a thread of its own (the
//! session's event loop owns this one), gets a sample of the profile every second, and
//! ends before the probes are detached, so that the detaching line and the summary are
//! printed on the normal screen, as `record` prints them.
//!
//! The terminal is the view's: a launched command writes to a file (its last lines in a
//! pane of the view), reads /dev/null, and runs in a process group of its own, which
//! `q` (a key here, not the terminal's Ctrl-C) interrupts as Ctrl-C does under `record`.

use std::cell::RefCell;
use std::io::{IsTerminal, Read, Seek, SeekFrom};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::rc::Rc;
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tracer_analysis::node::ShownId;

use anyhow::{bail, Context};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Paragraph, Row, Table, Wrap};
use ratatui::{DefaultTerminal, Frame};
use tracer_analysis::profile::{PathThread, ProcedureRow, Profile};
use tracer_analysis::{ms, ms_text};
use tracer_user::session::{CommandTerminal, EventsSoFar, Probed, Ready};

use super::print::say;
use super::record::{loss_line, run_with, RecordArgs, WhileTracing};

/// `record`'s options, but `--analyze-after`, which computes no live profile (README:
/// not with `tracer top`): not offered (and refused if given).
#[derive(Args)]
#[command(mut_arg("analyze_after", |a| a.hide(true)))]
pub(super) struct TopArgs {
    /// Write the launched command's standard output and error here (created, or emptied);
    /// the view shows its last lines. Default: tracer-top-PID.out in the temporary
    /// directory.
    #[arg(long, value_name = "FILE")]
    command_output: Option<PathBuf>,
    #[command(flatten)]
    record: RecordArgs,
}

/// A new file in the temporary directory for the command's output. Created here, never
/// opened through a name someone else made: the tracer runs as root, and a link planted
/// under a name it would open in a shared /tmp could make it empty another file.
fn fresh_output_file() -> anyhow::Result<PathBuf> {
    let path = std::env::temp_dir().join(format!("tracer-top-{}.out", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(tracer_user::session::PRIVATE_MODE)
        .open(&path)
        .with_context(|| {
            format!(
                "cannot create {} for the command's output (give --command-output FILE)",
                path.display()
            )
        })?;
    Ok(path)
}

pub(super) fn run(a: TopArgs) -> anyhow::Result<ExitCode> {
    if !std::io::stdout().is_terminal() {
        bail!("tracer top draws on a terminal; without one, use `tracer record --interval SECS`");
    }
    if !a.record.launches_command() && a.command_output.is_some() {
        bail!("--command-output is the output of a command: give -- COMMAND");
    }
    let output = match (a.record.launches_command(), &a.command_output) {
        (false, _) => None,
        (true, Some(path)) => Some(path.clone()),
        (true, None) => Some(fresh_output_file()?),
    };
    let screen = Screen::new(output.clone());
    let sender = |s: &Screen| s.tx.clone();
    let (samples, losses, probed) = (sender(&screen), sender(&screen), sender(&screen));
    let (starter, ender) = (screen.clone(), screen.clone());
    let told = output.clone();
    let live = WhileTracing {
        on_sample: Box::new(move |p: &Profile| {
            let _ = samples.send(Update::Sample(Box::new(p.clone())));
        }),
        // The view starts once the probes are in and the command is launched: the
        // terminal is the session's until then (its errors, the command's fork).
        on_ready: Some(Box::new(move |r: &Ready| {
            starter.start();
            let _ = starter.tx.send(Update::Ready {
                links: r.links.describe(),
                probed: Probed {
                    probes: r.probes,
                    libraries: r.libraries,
                },
            });
        })),
        on_loss: Box::new(move |e: &EventsSoFar| {
            let _ = losses.send(Update::Notice(loss_line(e)));
        }),
        on_probed: Some(Box::new(move |p: &Probed| {
            let _ = probed.send(Update::Probed(*p));
        })),
        before_detach: Some(Box::new(move || {
            ender.end();
            if let Some(path) = told {
                say!("tracer: the command's output is in {}", path.display());
            }
        })),
        live_view: true,
        command_terminal: match output {
            Some(output) => CommandTerminal::Detached { output },
            None => CommandTerminal::Shared,
        },
    };
    let result = run_with(a.record, live);
    // The session may have failed before it detached: the terminal is restored either way.
    screen.end();
    result
}

/// What the view thread is told.
enum Update {
    Sample(Box<Profile>),
    /// Tracing started: how the uprobes are attached, the probes so far.
    Ready {
        links: &'static str,
        probed: Probed,
    },
    /// The probes so far (more come as programs load their MPI/PVM libraries).
    Probed(Probed),
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
    /// Where the launched command writes, if one is.
    output: Option<PathBuf>,
}

impl Screen {
    fn new(output: Option<PathBuf>) -> Screen {
        let (tx, rx) = mpsc::channel();
        Screen {
            tx,
            rx: Rc::new(RefCell::new(Some(rx))),
            thread: Rc::new(RefCell::new(None)),
            output,
        }
    }

    /// Starts the view thread (once).
    fn start(&self) {
        if let Some(rx) = self.rx.borrow_mut().take() {
            let output = self.output.clone();
            *self.thread.borrow_mut() = std::thread::Builder::new()
                .name("tracer-top".into())
                .spawn(move || View::run(rx, output))
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
    /// How the uprobes are attached and the probes so far, once tracing started.
    links: &'static str,
    probed: Option<Probed>,
    /// The launched command's output file, whose last lines the view shows.
    output: Option<PathBuf>,
    sort: SortBy,
    page: Page,
    stopping: bool,
}

impl View {
    /// The view thread: draws after every update and key, until told to end.
    fn run(rx: Receiver<Update>, output: Option<PathBuf>) {
        let mut terminal = ratatui::init();
        let mut view = View {
            started: Instant::now(),
            latest: None,
            previous: None,
            notice: String::new(),
            links: "",
            probed: None,
            output,
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
                    }
                    Ok(Update::Ready { links, probed }) => {
                        self.links = links;
                        self.probed = Some(probed);
                    }
                    Ok(Update::Probed(p)) => self.probed = Some(p),
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
        let output_rows = if self.output.is_some() { OUTPUT_MIN } else { 0 };
        let rest = match (&self.latest, self.page) {
            (None, _) => {
                let [waiting, rest] =
                    Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(body);
                f.render_widget(Paragraph::new("waiting for the first sample"), waiting);
                rest
            }
            (Some(t), Page::Procedures) => {
                let through = path_processes(&t.profile);
                let path_rows: usize = through.iter().map(|q| 1 + q.threads.len()).sum();
                let heights = PaneHeights::of(
                    body.height,
                    shown_rows(&t.profile).0.len(),
                    path_rows,
                    output_rows,
                );
                let [procedures, path, rest] = Layout::vertical([
                    Constraint::Length(heights.procedures),
                    Constraint::Length(heights.path),
                    Constraint::Min(0),
                ])
                .areas(body);
                f.render_widget(self.procedures(&t.profile), procedures);
                let shown = threads_shown(&through, heights.path.saturating_sub(TABLE_CHROME));
                f.render_widget(path_table(&t.profile, &through, &shown), path);
                rest
            }
            (Some(t), Page::Messages) => {
                let lines = self.messages(&t.profile);
                // Wrapped lines may take more rows on a narrow terminal.
                let wanted = (lines.len() as u16 + 2).min(body.height.saturating_sub(output_rows));
                let [messages, rest] =
                    Layout::vertical([Constraint::Length(wanted), Constraint::Min(0)]).areas(body);
                f.render_widget(
                    Paragraph::new(lines)
                        .wrap(Wrap { trim: false })
                        .block(Block::bordered().title(" messages and dependencies ")),
                    messages,
                );
                rest
            }
        };
        if let Some(output) = &self.output {
            self.output_pane(f, output, rest);
        }
        f.render_widget(
            Paragraph::new(self.footer()).style(Style::new().add_modifier(Modifier::REVERSED)),
            foot,
        );
    }

    /// The keys, the probes so far, the latest notice.
    fn footer(&self) -> String {
        let mut s = format!(
            " q stop, end the command and write the outputs   s sort (by {})   tab switch view",
            self.sort.name(),
        );
        match self.probed {
            Some(p) => s.push_str(&format!(
                "   | {} probes in {} MPI/PVM libraries ({})",
                p.probes, p.libraries, self.links
            )),
            None => s.push_str("   | loading the probes"),
        }
        if !self.notice.is_empty() {
            s.push_str("   | ");
            s.push_str(&self.notice);
        }
        s
    }

    /// The last lines the launched command wrote, in the room left, its file named.
    fn output_pane(&self, f: &mut Frame, output: &Path, area: Rect) {
        if area.height < 3 {
            return;
        }
        let rows = usize::from(area.height - 2);
        let lines = match last_lines(output, rows) {
            Ok(lines) => lines.into_iter().map(Line::from).collect(),
            Err(e) => vec![Line::from(format!("cannot read it: {e}"))],
        };
        f.render_widget(
            Paragraph::new(lines).block(
                Block::bordered().title(format!(" the command's output: {} ", output.display())),
            ),
            area,
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
                ShownId(cp.ends_in_pid),
                ShownId(cp.ends_in_tid),
                cp.ends_in_command
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

    /// The `--func` procedures, or without any the sampled functions the profile follows.
    fn procedures(&self, p: &Profile) -> Table<'static> {
        let (shown, what) = shown_rows(p);
        let mut rows: Vec<&ProcedureRow> = shown.iter().collect();
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
        .block(Block::bordered().title(format!(" {what} by {} ", self.sort.name())))
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
                 creations, {} joins without a wait",
                s.wakeups, s.exit_wakeups, s.creations, s.joins,
            )),
            Line::from(format!(
                "  locks and signals: {} lock handoffs, {} condition signals, {} semaphore posts",
                s.lock_handoffs, s.signals, s.sem_posts,
            )),
            Line::from(format!(
                "  OpenMP: {} forks, {} joins, {} barriers",
                s.omp_forks, s.omp_joins, s.omp_barriers
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

/// Rows of a bordered table that are not its body: the borders and the header.
const TABLE_CHROME: u16 = 3;

/// Rows the command's output pane keeps however full the tables are: three lines.
const OUTPUT_MIN: u16 = 5;

/// The rows of the procedure table and what they are: the `--func` procedures when there
/// are any (sampled functions ranked by inclusive time among them would put every
/// stack's roots first), else the sampled functions.
fn shown_rows(p: &Profile) -> (&[ProcedureRow], &'static str) {
    if p.procedures.is_empty() && !p.sampled_functions.is_empty() {
        (&p.sampled_functions, "sampled functions")
    } else {
        (&p.procedures, "procedures")
    }
}

/// Rows of the procedure table kept however many threads the path runs through.
const PROCEDURES_KEPT: u16 = 3;

/// How the procedures page shares its rows: each table as high as its content, the
/// path's threads first, the command's output the rest.
#[derive(Debug, PartialEq, Eq)]
struct PaneHeights {
    procedures: u16,
    path: u16,
}

impl PaneHeights {
    /// For a body of `height` rows, `procedures` and `path_rows` rows of content, and
    /// `output_min` rows kept for the output pane (0 without one).
    fn of(height: u16, procedures: usize, path_rows: usize, output_min: u16) -> PaneHeights {
        let need = |rows: usize| {
            u16::try_from(rows)
                .unwrap_or(u16::MAX)
                .saturating_add(TABLE_CHROME)
        };
        let room = height.saturating_sub(output_min);
        let procedures_need = need(procedures);
        let procedures_kept = procedures_need.min(TABLE_CHROME + PROCEDURES_KEPT);
        let path = need(path_rows).min(room.saturating_sub(procedures_kept));
        let procedures = if output_min == 0 {
            // Nothing below: the procedures take the rest, blank or not.
            height.saturating_sub(path)
        } else {
            procedures_need.min(room.saturating_sub(path))
        };
        PaneHeights { procedures, path }
    }
}

/// Threads shown under each process of the path (in `through`'s order) in `rows` rows:
/// all of them if they fit, else as many under each as fit under every one (each process
/// keeping its row), and the rows left over to one more thread of the processes that
/// hold most of the path: no row stays blank while a thread is left out.
fn threads_shown(through: &[PathProcess], rows: u16) -> Vec<usize> {
    let rows = usize::from(rows);
    let rows_with =
        |k: usize| -> usize { through.iter().map(|q| 1 + q.threads.len().min(k)).sum() };
    let most = through.iter().map(|q| q.threads.len()).max().unwrap_or(0);
    let under_each = (0..=most)
        .rev()
        .find(|&k| rows_with(k) <= rows)
        .unwrap_or(0);
    let mut left = rows.saturating_sub(rows_with(under_each));
    through
        .iter()
        .map(|q| {
            let mut shown = q.threads.len().min(under_each);
            if shown < q.threads.len() && left > 0 {
                shown += 1;
                left -= 1;
            }
            shown
        })
        .collect()
}

/// The last `n` lines of the file at `path`, for a terminal: read from its last 64 KiB,
/// a line rewritten with carriage returns (a progress bar) as it was left, tabs as
/// spaces, escape sequences and other control characters left out.
fn last_lines(path: &Path, n: usize) -> std::io::Result<Vec<String>> {
    const TAIL: u64 = 64 << 10;
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    file.seek(SeekFrom::Start(len.saturating_sub(TAIL)))?;
    let mut bytes = Vec::new();
    // At most the tail: the file may grow while it is read.
    file.take(TAIL).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let mut lines: Vec<String> = text
        .split('\n')
        .map(|l| printable(l.rsplit('\r').find(|s| !s.is_empty()).unwrap_or("")))
        .collect();
    // The text after the last newline is a line still being written, or nothing.
    if lines.last().is_some_and(String::is_empty) {
        lines.pop();
    }
    Ok(lines.split_off(lines.len().saturating_sub(n)))
}

/// A line as a terminal pane can hold it: escape sequences (ESC [ ... final byte) and
/// control characters out, tabs as four spaces.
fn printable(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                if chars.next_if_eq(&'[').is_some() {
                    while chars.next().is_some_and(|c| !('@'..='~').contains(&c)) {}
                }
            }
            '\t' => out.push_str("    "),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

/// Where the path runs: a row per process, then its threads that hold most of it.
fn path_table(p: &Profile, through: &[PathProcess], threads_shown: &[usize]) -> Table<'static> {
    let mut body = Vec::new();
    for (q, &threads_shown) in through.iter().zip(threads_shown) {
        body.push(Row::new(vec![
            format!("pid {} {}", ShownId(q.pid), q.command),
            q.threads.len().to_string(),
            ms_text(q.cp_ns),
            format!("{:.1}", q.cp_pct),
        ]));
        for t in q.threads.iter().take(threads_shown) {
            body.push(Row::new(vec![
                format!("  tid {}", ShownId(t.tid)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panes_are_as_high_as_their_content_and_the_output_takes_the_rest() {
        // 160x45: a body of 39 rows; 2 procedures, 2 processes of 8 threads on the path.
        assert_eq!(
            PaneHeights::of(39, 2, 18, OUTPUT_MIN),
            PaneHeights {
                procedures: 5,
                path: 21
            }
        );
        // Threads first: a path too long for the screen leaves the procedures their
        // first rows and the output its three lines.
        assert_eq!(
            PaneHeights::of(39, 40, 100, OUTPUT_MIN),
            PaneHeights {
                procedures: 6,
                path: 28
            }
        );
        // Many procedures, a short path: the procedures take what the path leaves.
        assert_eq!(
            PaneHeights::of(39, 40, 3, OUTPUT_MIN),
            PaneHeights {
                procedures: 28,
                path: 6
            }
        );
        // No command, no output pane: the procedures take the rest.
        assert_eq!(
            PaneHeights::of(39, 2, 3, 0),
            PaneHeights {
                procedures: 33,
                path: 6
            }
        );
        // A tiny terminal: nothing overflows.
        assert_eq!(
            PaneHeights::of(4, 2, 3, OUTPUT_MIN),
            PaneHeights {
                procedures: 0,
                path: 0
            }
        );
    }

    fn thread(pid: u32, tid: u32) -> PathThread {
        PathThread {
            pid,
            tid,
            command: "p".into(),
            cp_ns: 1,
            cp_pct: 1.0,
        }
    }

    #[test]
    fn the_path_shows_every_thread_that_fits() {
        let a: Vec<PathThread> = (0..8).map(|t| thread(1, 10 + t)).collect();
        let b: Vec<PathThread> = (0..3).map(|t| thread(2, 20 + t)).collect();
        let through = |k: usize| {
            vec![
                PathProcess {
                    pid: 1,
                    command: "p",
                    cp_ns: 8,
                    cp_pct: 8.0,
                    threads: a.iter().take(k).collect(),
                },
                PathProcess {
                    pid: 2,
                    command: "p",
                    cp_ns: 3,
                    cp_pct: 3.0,
                    threads: b.iter().collect(),
                },
            ]
        };
        assert_eq!(threads_shown(&through(8), 13), [8, 3], "all 13 rows fit");
        assert_eq!(threads_shown(&through(8), 12), [7, 3]);
        assert_eq!(
            threads_shown(&through(8), 7),
            [3, 2],
            "2 + 2 threads and 2 process rows, the last row to the process with most of the path"
        );
        assert_eq!(
            threads_shown(&through(8), 3),
            [1, 0],
            "the process rows, one thread"
        );
        assert_eq!(
            threads_shown(&through(8), 2),
            [0, 0],
            "the process rows only"
        );
        assert_eq!(threads_shown(&through(8), 1), [0, 0]);
        // Processes with threads left out have a row each for every row of the pane.
        for rows in 2..=13 {
            let shown = threads_shown(&through(8), rows);
            assert_eq!(2 + shown.iter().sum::<usize>(), usize::from(rows), "{rows}");
        }
    }

    #[test]
    fn the_output_pane_holds_the_last_lines_as_a_terminal_shows_them() {
        let path = std::env::temp_dir().join(format!("tracer-top-test-{}", std::process::id()));
        let mut text = String::new();
        for i in 0..5000 {
            text.push_str(&format!("line {i}\n"));
        }
        text.push_str("\x1b[1;31mred\x1b[0m\tafter a tab\n");
        text.push_str("progress 10%\rprogress 100%\r\n");
        text.push_str("not ended");
        std::fs::write(&path, text).unwrap();
        let lines = last_lines(&path, 4).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(
            lines,
            [
                "line 4999",
                "red    after a tab",
                "progress 100%",
                "not ended"
            ]
        );
    }
}

//! The network cost table of Eom and Hollingsworth's NF: the one-way latency of a message
//! by size, measured separately for messages between processes on the same node
//! (`local`) and on different nodes (`remote`), as half a ping-pong round trip.
//!
//! On disk it is a CSV file (docs/network-table.md):
//!
//! ```text
//! # comments start with '#'
//! scope,bytes,latency_ns
//! local,0,350
//! local,65536,12000
//! remote,0,4200
//! remote,65536,27400000
//! ```
//!
//! Between measured sizes the latency is interpolated linearly; below the smallest size
//! it is the smallest size's latency; above the largest it follows the slope of the last
//! two sizes (never downwards).

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

/// The header line every table starts with (after comments and blank lines).
pub(crate) const HEADER: &str = "scope,bytes,latency_ns";

/// Where a message goes: to a process on the same node, or to another node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Local,
    Remote,
}

impl Scope {
    pub fn name(self) -> &'static str {
        match self {
            Scope::Local => "local",
            Scope::Remote => "remote",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "local" => Some(Scope::Local),
            "remote" => Some(Scope::Remote),
            _ => None,
        }
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What is wrong with one line of a table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    #[error("expected the header `{HEADER}`, found `{0}`")]
    Header(String),
    #[error("expected 3 fields (scope,bytes,latency_ns), found {0}")]
    FieldCount(usize),
    #[error("unknown scope `{0}` (expected `local` or `remote`)")]
    Scope(String),
    #[error("{field} `{text}` is not a whole number >= 0")]
    Number { field: &'static str, text: String },
    #[error("{scope} size {bytes} appears twice (first on line {first_line})")]
    Duplicate {
        scope: Scope,
        bytes: u64,
        first_line: usize,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum NetworkTableError {
    #[error("cannot read network table {}: {error}", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    #[error("network table{}: line {line}: {problem}", in_file(path))]
    Line {
        /// The file, when the table was loaded from one.
        path: Option<PathBuf>,
        /// 1-based.
        line: usize,
        problem: LineProblem,
    },
    #[error("network table{}: no header line `{HEADER}`", in_file(path))]
    NoHeader { path: Option<PathBuf> },
}

fn in_file(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" {}", p.display()),
        None => String::new(),
    }
}

impl NetworkTableError {
    fn with_path(self, p: &Path) -> Self {
        match self {
            NetworkTableError::Line { line, problem, .. } => NetworkTableError::Line {
                path: Some(p.to_path_buf()),
                line,
                problem,
            },
            NetworkTableError::NoHeader { .. } => NetworkTableError::NoHeader {
                path: Some(p.to_path_buf()),
            },
            e => e,
        }
    }
}

/// One measured row of a scope: a message size and its one-way latency.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MeasuredLatency {
    pub bytes: u64,
    pub latency_ns: u64,
}

/// Measured one-way latencies by scope and message size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkTable {
    /// bytes -> latency_ns, per scope.
    rows: BTreeMap<Scope, BTreeMap<u64, u64>>,
    /// Comment lines (without the leading `#`), kept through parse and `to_csv`.
    comments: Vec<String>,
}

impl NetworkTable {
    pub fn parse(text: &str) -> Result<Self, NetworkTableError> {
        let mut table = NetworkTable::default();
        let mut seen_header = false;
        // (scope, bytes) -> line, to name the first occurrence of a duplicate.
        let mut first: BTreeMap<(Scope, u64), usize> = BTreeMap::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let l = raw.trim();
            if l.is_empty() {
                continue;
            }
            if let Some(c) = l.strip_prefix('#') {
                table
                    .comments
                    .push(c.strip_prefix(' ').unwrap_or(c).to_string());
                continue;
            }
            let bad = |problem| NetworkTableError::Line {
                path: None,
                line,
                problem,
            };
            let fields: Vec<&str> = l.split(',').map(str::trim).collect();
            if !seen_header {
                if fields != ["scope", "bytes", "latency_ns"] {
                    return Err(bad(LineProblem::Header(l.to_string())));
                }
                seen_header = true;
                continue;
            }
            if fields.len() != 3 {
                return Err(bad(LineProblem::FieldCount(fields.len())));
            }
            let scope =
                Scope::parse(fields[0]).ok_or_else(|| bad(LineProblem::Scope(fields[0].into())))?;
            let bytes = number("bytes", fields[1]).map_err(bad)?;
            let latency = number("latency_ns", fields[2]).map_err(bad)?;
            if let Some(&first_line) = first.get(&(scope, bytes)) {
                return Err(bad(LineProblem::Duplicate {
                    scope,
                    bytes,
                    first_line,
                }));
            }
            first.insert((scope, bytes), line);
            table.insert(scope, bytes, latency);
        }
        if !seen_header {
            return Err(NetworkTableError::NoHeader { path: None });
        }
        Ok(table)
    }

    pub fn load(path: &Path) -> Result<Self, NetworkTableError> {
        let text = std::fs::read_to_string(path).map_err(|error| NetworkTableError::Read {
            path: path.to_path_buf(),
            error,
        })?;
        Self::parse(&text).map_err(|e| e.with_path(path))
    }

    /// One-way latency of a message of `bytes` (linear interpolation between measured
    /// sizes; below the smallest: the smallest's latency; above the largest: extrapolate
    /// with the slope of the last two, or flat when that slope is negative). None when
    /// the table has no row for `scope`.
    pub fn latency_ns(&self, scope: Scope, bytes: u64) -> Option<u64> {
        let rows = self.rows.get(&scope).filter(|r| !r.is_empty())?;
        if let Some(&l) = rows.get(&bytes) {
            return Some(l);
        }
        let below = rows.range(..bytes).next_back();
        let above = rows.range(bytes..).next();
        let (b0, l0, b1, l1) = match (below, above) {
            // Below the smallest size.
            (None, Some((_, &l))) => return Some(l),
            (Some((&b0, &l0)), Some((&b1, &l1))) => (b0, l0, b1, l1),
            // Above the largest size: the slope of the last two, never negative.
            (Some((&b1, &l1)), None) => {
                let Some((&b0, &l0)) = rows.range(..b1).next_back() else {
                    return Some(l1);
                };
                if l1 <= l0 {
                    return Some(l1);
                }
                (b0, l0, b1, l1)
            }
            (None, None) => unreachable!("rows is not empty"),
        };
        let rise = l1 as i128 - l0 as i128;
        let y = (l0 as i128).saturating_add(scale_round(rise, bytes - b0, b1 - b0));
        Some(y.clamp(0, u64::MAX as i128) as u64)
    }

    pub fn has(&self, scope: Scope) -> bool {
        self.rows.get(&scope).is_some_and(|r| !r.is_empty())
    }

    /// Adds a row, replacing the latency of a size already there.
    pub fn insert(&mut self, scope: Scope, bytes: u64, latency_ns: u64) {
        self.rows
            .entry(scope)
            .or_default()
            .insert(bytes, latency_ns);
    }

    /// The measured rows of `scope`, by size.
    pub fn rows(&self, scope: Scope) -> impl Iterator<Item = MeasuredLatency> + '_ {
        self.rows.get(&scope).into_iter().flat_map(|r| {
            r.iter()
                .map(|(&bytes, &latency_ns)| MeasuredLatency { bytes, latency_ns })
        })
    }

    /// Adds a comment line (written before the header by `to_csv`).
    pub fn add_comment(&mut self, text: &str) {
        self.comments.extend(text.lines().map(str::to_string));
    }

    pub fn comments(&self) -> &[String] {
        &self.comments
    }

    /// The table as CSV: comments, the header, then local rows and remote rows by size.
    pub fn to_csv(&self) -> String {
        let mut out = String::new();
        for c in &self.comments {
            out.push_str("# ");
            out.push_str(c);
            out.push('\n');
        }
        out.push_str(HEADER);
        out.push('\n');
        for (scope, rows) in &self.rows {
            for (bytes, latency) in rows {
                out.push_str(&format!("{scope},{bytes},{latency}\n"));
            }
        }
        out
    }
}

/// A whole number >= 0 (no sign, no fraction, no exponent).
fn number(field: &'static str, text: &str) -> Result<u64, LineProblem> {
    let bad = || LineProblem::Number {
        field,
        text: text.to_string(),
    };
    // `u64::from_str` accepts a leading '+'; a table has no use for it.
    if text.starts_with('+') {
        return Err(bad());
    }
    text.parse::<u64>().map_err(|_| bad())
}

/// n / d rounded to the nearest integer (halves away from zero); d > 0.
/// `rise * run / over` rounded to the nearest (halves away from zero), saturating: the
/// product of two differences of u64 values overflows even an i128 (a table with sizes
/// and latencies near 2^64 did, found by the fuzzer), so it is split as
/// `rise * (run / over) + rise * (run % over) / over`, whose second product fits a u128.
fn scale_round(rise: i128, run: u64, over: u64) -> i128 {
    let (run, over) = (u128::from(run), u128::from(over));
    let m = rise.unsigned_abs();
    let whole = m.saturating_mul(run / over);
    let part = (m * (run % over) + over / 2) / over;
    let magnitude = i128::try_from(whole.saturating_add(part)).unwrap_or(i128::MAX);
    if rise < 0 {
        -magnitude
    } else {
        magnitude
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table's first bad line: its number and what is wrong with it.
    struct BadLine {
        line: usize,
        problem: LineProblem,
    }

    fn line_problem(text: &str) -> BadLine {
        match NetworkTable::parse(text) {
            Err(NetworkTableError::Line { line, problem, .. }) => BadLine { line, problem },
            other => panic!("expected a line error, got {other:?}"),
        }
    }

    const TABLE: &str = "\
# measured on a test machine
# second comment

scope,bytes,latency_ns
local,0,300
local,1000,1300
local,3000,2300
remote , 8 , 5000
remote,1008,7000
";

    fn row(bytes: u64, latency_ns: u64) -> MeasuredLatency {
        MeasuredLatency { bytes, latency_ns }
    }

    #[test]
    fn parses_rows_and_comments() {
        let t = NetworkTable::parse(TABLE).unwrap();
        assert!(t.has(Scope::Local) && t.has(Scope::Remote));
        assert_eq!(
            t.rows(Scope::Local).collect::<Vec<_>>(),
            [row(0, 300), row(1000, 1300), row(3000, 2300)]
        );
        assert_eq!(
            t.rows(Scope::Remote).collect::<Vec<_>>(),
            [row(8, 5000), row(1008, 7000)]
        );
        assert_eq!(
            t.comments(),
            ["measured on a test machine", "second comment"]
        );
    }

    #[test]
    fn interpolates_exactly() {
        let t = NetworkTable::parse(TABLE).unwrap();
        let l = |b| t.latency_ns(Scope::Local, b).unwrap();
        // Measured sizes.
        assert_eq!(l(0), 300);
        assert_eq!(l(1000), 1300);
        assert_eq!(l(3000), 2300);
        // Between: 300 + 1000 * 500 / 1000; 1300 + 1000 * 1000 / 2000.
        assert_eq!(l(500), 800);
        assert_eq!(l(2000), 1800);
        // Rounded to nearest: 1300 + 1000 * 1 / 2000 = 1300.5 -> 1301.
        assert_eq!(l(1001), 1301);
        // Above the largest: the last slope, 0.5 ns per byte.
        assert_eq!(l(5000), 3300);
        assert_eq!(l(3001), 2301);
        let r = |b| t.latency_ns(Scope::Remote, b).unwrap();
        // Below the smallest: the smallest's latency.
        assert_eq!(r(0), 5000);
        assert_eq!(r(7), 5000);
        // 2 ns per byte.
        assert_eq!(r(508), 6000);
        assert_eq!(r(2008), 9000);
    }

    #[test]
    fn edge_cases_of_the_curve() {
        let mut t = NetworkTable::default();
        assert_eq!(t.latency_ns(Scope::Local, 10), None);
        assert!(!t.has(Scope::Local));
        t.insert(Scope::Local, 100, 4000);
        // One row: flat.
        assert_eq!(t.latency_ns(Scope::Local, 0), Some(4000));
        assert_eq!(t.latency_ns(Scope::Local, 1 << 30), Some(4000));
        assert_eq!(t.latency_ns(Scope::Remote, 100), None);
        // A falling last segment interpolates down but extrapolates flat.
        t.insert(Scope::Local, 200, 3000);
        assert_eq!(t.latency_ns(Scope::Local, 150), Some(3500));
        assert_eq!(t.latency_ns(Scope::Local, 400), Some(3000));
        // insert replaces a size already there.
        t.insert(Scope::Local, 200, 5000);
        assert_eq!(t.latency_ns(Scope::Local, 300), Some(6000));
        // Huge sizes saturate instead of overflowing.
        t.insert(Scope::Local, 201, u64::MAX / 2);
        assert_eq!(t.latency_ns(Scope::Local, u64::MAX), Some(u64::MAX));
    }

    /// Found by the fuzzer (fuzz/regressions/network_table/max): sizes and latencies near 2^64
    /// made the interpolation's product overflow an i128 (a panic in a debug build).
    #[test]
    fn rows_near_the_largest_numbers_interpolate_exactly() {
        let t = NetworkTable::parse(
            "scope,bytes,latency_ns\nremote,18446744073709551615,18446744073709551615\nremote,0,0\n",
        )
        .unwrap();
        let r = |b| t.latency_ns(Scope::Remote, b).unwrap();
        assert_eq!(r(u64::MAX / 2), u64::MAX / 2);
        assert_eq!(r(1), 1);
        assert_eq!(r(u64::MAX - 1), u64::MAX - 1);
        assert_eq!(r(u64::MAX), u64::MAX);
        // Falling by the whole range: the same, mirrored.
        let t = NetworkTable::parse(
            "scope,bytes,latency_ns\nlocal,0,18446744073709551615\nlocal,18446744073709551615,0\n",
        )
        .unwrap();
        assert_eq!(t.latency_ns(Scope::Local, 1), Some(u64::MAX - 1));
        assert_eq!(
            t.latency_ns(Scope::Local, u64::MAX / 2),
            Some(u64::MAX / 2 + 1)
        );
    }

    #[test]
    fn csv_round_trip() {
        let t = NetworkTable::parse(TABLE).unwrap();
        let csv = t.to_csv();
        assert_eq!(
            csv,
            "# measured on a test machine\n# second comment\nscope,bytes,latency_ns\n\
             local,0,300\nlocal,1000,1300\nlocal,3000,2300\nremote,8,5000\nremote,1008,7000\n"
        );
        assert_eq!(NetworkTable::parse(&csv).unwrap(), t);
        // An empty table is a header.
        assert_eq!(NetworkTable::default().to_csv(), "scope,bytes,latency_ns\n");
        assert!(!NetworkTable::parse("scope,bytes,latency_ns\n")
            .unwrap()
            .has(Scope::Local));
    }

    #[test]
    fn bad_header() {
        let BadLine { line, problem: p } = line_problem("# c\nscope,size,latency\nlocal,0,1\n");
        assert_eq!(line, 2);
        assert_eq!(p, LineProblem::Header("scope,size,latency".into()));
        // Rows before the header are a bad header too.
        let BadLine { line, problem: p } = line_problem("local,0,1\n");
        assert_eq!((line, p), (1, LineProblem::Header("local,0,1".into())));
        let e = NetworkTable::parse("# only a comment\n\n").unwrap_err();
        assert!(
            matches!(e, NetworkTableError::NoHeader { path: None }),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            "network table: no header line `scope,bytes,latency_ns`"
        );
    }

    #[test]
    fn bad_numbers_and_fields() {
        let h = "scope,bytes,latency_ns\n";
        for (row, field, text) in [
            ("local,-1,5", "bytes", "-1"),
            ("local,1k,5", "bytes", "1k"),
            ("local,,5", "bytes", ""),
            ("local,+3,5", "bytes", "+3"),
            ("local,8,5.5", "latency_ns", "5.5"),
            (
                "local,8,99999999999999999999",
                "latency_ns",
                "99999999999999999999",
            ),
        ] {
            let BadLine { line, problem: p } = line_problem(&format!("{h}local,0,1\n{row}\n"));
            assert_eq!(line, 3, "{row}");
            assert_eq!(
                p,
                LineProblem::Number {
                    field,
                    text: text.into()
                },
                "{row}"
            );
        }
        let BadLine { line, problem: p } = line_problem(&format!("{h}local,0\n"));
        assert_eq!((line, p), (2, LineProblem::FieldCount(2)));
        let BadLine { line, problem: p } = line_problem(&format!("{h}local,0,1,2\n"));
        assert_eq!((line, p), (2, LineProblem::FieldCount(4)));
        let e = NetworkTable::parse(&format!("{h}local,x,1\n")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "network table: line 2: bytes `x` is not a whole number >= 0"
        );
    }

    #[test]
    fn unknown_scope() {
        let BadLine { line, problem: p } = line_problem("scope,bytes,latency_ns\nLOCAL,0,1\n");
        assert_eq!((line, p), (2, LineProblem::Scope("LOCAL".into())));
        let p = line_problem("scope,bytes,latency_ns\nsame-node,0,1\n").problem;
        assert_eq!(p, LineProblem::Scope("same-node".into()));
    }

    #[test]
    fn duplicate_size() {
        let text = "scope,bytes,latency_ns\nlocal,8,1\nremote,8,2\n\nlocal,8,3\n";
        let BadLine { line, problem: p } = line_problem(text);
        assert_eq!(line, 5);
        assert_eq!(
            p,
            LineProblem::Duplicate {
                scope: Scope::Local,
                bytes: 8,
                first_line: 2
            }
        );
    }

    #[test]
    fn load_names_the_file() {
        let dir = std::env::temp_dir().join(format!("tracer-nettable-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("net.csv");
        std::fs::write(&f, "scope,bytes,latency_ns\nlocal,8,oops\n").unwrap();
        let e = NetworkTable::load(&f).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "network table {}: line 2: latency_ns `oops` is not a whole number >= 0",
                f.display()
            )
        );
        std::fs::write(&f, TABLE).unwrap();
        assert_eq!(
            NetworkTable::load(&f).unwrap(),
            NetworkTable::parse(TABLE).unwrap()
        );
        let missing = dir.join("missing.csv");
        let e = NetworkTable::load(&missing).unwrap_err();
        assert!(matches!(e, NetworkTableError::Read { .. }));
        assert!(
            e.to_string().starts_with(&format!(
                "cannot read network table {}: ",
                missing.display()
            )),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

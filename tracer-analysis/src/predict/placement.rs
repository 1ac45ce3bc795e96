//! A placement: which processes share which CPUs (and on which node) in the run being
//! predicted. Parsed from `--placement SPEC`:
//!
//! ```text
//! SPEC   := ITEM (';' ITEM)*          later items override earlier ones
//! ITEM   := PROCS '@' [NODE ':'] CPUS
//! PROCS  := '*' | RANKS               '*' is every process of the program; RANKS are
//!                                     MPI_COMM_WORLD ranks: 0-3,5
//! CPUS   := CPU list: 0 | 0-1 | 0,2
//! ```
//!
//! `*@0` puts every rank on CPU 0; `*@0-1` shares two CPUs among all of them;
//! `0@0;1@1` gives ranks 0 and 1 a CPU each; `0-1@a:0;2-3@b:0` puts two ranks on each of
//! two nodes. The keyword `each` gives every process of the program a CPU of its own.
//! Processes the spec does not name (launchers, daemons) keep a CPU per thread.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Why a placement could not be parsed or applied.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error("placement item `{0}`: expected PROCS@CPUS, e.g. 0-3@0 or *@0-1")]
    Item(String),
    #[error("placement item `{item}`: `{what}` is not a number or range")]
    Number { item: String, what: String },
    #[error("placement item `{0}`: more than {MAX_LIST} ranks or CPUs in one list")]
    TooMany(String),
    #[error("placement names rank {0}, but the recording has no process with that rank")]
    NoSuchRank(i32),
    #[error("placement: {0} and {1} overlap; processes that share CPUs need the same set")]
    Overlap(String, String),
    #[error("placement is empty")]
    Empty,
}

/// Which processes an item places.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Procs {
    All,
    Ranks(BTreeSet<i32>),
}

/// A CPU set on a node: the unit that processes share.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuSet {
    pub node: String,
    pub cpus: BTreeSet<u32>,
}

impl std::fmt::Display for CpuSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let cpus: Vec<String> = self.cpus.iter().map(|c| c.to_string()).collect();
        if self.node.is_empty() {
            write!(f, "cpu {}", cpus.join(","))
        } else {
            write!(f, "{} cpu {}", self.node, cpus.join(","))
        }
    }
}

/// A parsed `--placement`, not yet bound to a recording's processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlacementSpec {
    items: Vec<(Procs, Option<CpuSet>)>,
}

/// Most ranks or CPUs one list may name: a short spec must not fill the memory
/// (`0@0-65535,65536-131071,...`, 4 KB, named 16 million: 1 GB and 50 s in the fuzz
/// target's build; fuzz/regressions/placement/many-ranges).
const MAX_LIST: usize = 65_536;

/// A list of numbers and ranges (`0-3,5`), each from 0 to `i32::MAX` (a rank is an i32, a
/// CPU a u32: a larger number would wrap to another one).
fn numbers(item: &str, list: &str) -> Result<BTreeSet<i32>, PlacementError> {
    let bad = |what: &str| PlacementError::Number {
        item: item.to_string(),
        what: what.to_string(),
    };
    let mut out = BTreeSet::new();
    for part in list.split(',') {
        let part = part.trim();
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let lo: i32 = lo.parse().map_err(|_| bad(part))?;
        let hi: i32 = hi.parse().map_err(|_| bad(part))?;
        if lo < 0 || hi < lo {
            return Err(bad(part));
        }
        if (hi - lo) as usize >= MAX_LIST {
            return Err(PlacementError::TooMany(item.to_string()));
        }
        out.extend(lo..=hi);
        if out.len() > MAX_LIST {
            return Err(PlacementError::TooMany(item.to_string()));
        }
    }
    Ok(out)
}

impl std::str::FromStr for PlacementSpec {
    type Err = PlacementError;

    fn from_str(spec: &str) -> Result<Self, PlacementError> {
        let spec = spec.trim();
        if spec == "each" {
            return Ok(PlacementSpec {
                items: vec![(Procs::All, None)],
            });
        }
        let mut items = Vec::new();
        for item in spec.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let (procs, target) = item
                .split_once('@')
                .ok_or_else(|| PlacementError::Item(item.to_string()))?;
            let procs = match procs.trim() {
                "*" => Procs::All,
                "" => return Err(PlacementError::Item(item.to_string())),
                list => Procs::Ranks(numbers(item, list)?),
            };
            let (node, cpus) = match target.split_once(':') {
                Some((node, cpus)) => (node.trim().to_string(), cpus),
                None => (String::new(), target),
            };
            if cpus.trim().is_empty() {
                return Err(PlacementError::Item(item.to_string()));
            }
            let cpus = numbers(item, cpus)?.into_iter().map(|c| c as u32).collect();
            items.push((procs, Some(CpuSet { node, cpus })));
        }
        if items.is_empty() {
            return Err(PlacementError::Empty);
        }
        Ok(PlacementSpec { items })
    }
}

impl PlacementSpec {
    /// A spec as `--placement` gives it: parsed, then [`PlacementSpec::validate`]d, so
    /// that no command replays a placement whose CPU sets overlap.
    pub fn parse_checked(spec: &str) -> Result<Self, PlacementError> {
        let parsed: PlacementSpec = spec.parse()?;
        parsed.validate()?;
        Ok(parsed)
    }

    /// Checks that CPU sets given on one node are equal or disjoint.
    pub fn validate(&self) -> Result<(), PlacementError> {
        let sets: Vec<&CpuSet> = self.items.iter().filter_map(|(_, s)| s.as_ref()).collect();
        for (i, a) in sets.iter().enumerate() {
            for b in &sets[i + 1..] {
                if a.node == b.node && a != b && !a.cpus.is_disjoint(&b.cpus) {
                    return Err(PlacementError::Overlap(a.to_string(), b.to_string()));
                }
            }
        }
        Ok(())
    }

    /// The CPU set of the `k`-th process of the program, of MPI rank `rank` if any (the
    /// last item naming it wins), or None when the spec leaves it alone.
    pub(crate) fn cpu_set(&self, k: usize, rank: Option<i32>) -> Option<CpuSet> {
        let (i, (_, set)) =
            self.items
                .iter()
                .enumerate()
                .rev()
                .find(|(_, (procs, _))| match procs {
                    Procs::All => true,
                    Procs::Ranks(ranks) => rank.is_some_and(|r| ranks.contains(&r)),
                })?;
        // `each`: a CPU per process, on a node name of its own.
        Some(set.clone().unwrap_or_else(|| CpuSet {
            node: format!("#each{i}"),
            cpus: [k as u32].into_iter().collect(),
        }))
    }
}

/// Index of a CPU group in [`Placement::groups`].
pub(crate) type GroupId = usize;

/// A placement bound to a recording: the CPU group of every placed process.
#[derive(Clone, Debug, Default)]
pub struct Placement {
    pub groups: Vec<CpuSet>,
    pub of_pid: HashMap<u32, GroupId>,
}

/// A process of the traced program, as a placement names it: by its pid, and by its MPI
/// rank if it has one.
#[derive(Clone, Copy, Debug)]
pub struct ProgramProcess {
    pub pid: u32,
    pub rank: Option<i32>,
}

impl ProgramProcess {
    #[cfg(test)]
    pub(crate) const fn ranked(pid: u32, rank: i32) -> Self {
        Self {
            pid,
            rank: Some(rank),
        }
    }
}

impl Placement {
    /// No constraint: every thread has a CPU of its own.
    pub fn unconstrained() -> Self {
        Self::default()
    }

    /// Binds `spec` to the processes of a recording: `program` are the processes of the
    /// program.
    pub fn bind(spec: &PlacementSpec, program: &[ProgramProcess]) -> Result<Self, PlacementError> {
        for (procs, _) in &spec.items {
            if let Procs::Ranks(ranks) = procs {
                if let Some(r) = ranks
                    .iter()
                    .find(|&&r| !program.iter().any(|p| p.rank == Some(r)))
                {
                    return Err(PlacementError::NoSuchRank(*r));
                }
            }
        }
        let chosen: BTreeMap<u32, CpuSet> = program
            .iter()
            .enumerate()
            .filter_map(|(k, p)| Some((p.pid, spec.cpu_set(k, p.rank)?)))
            .collect();
        let mut groups: Vec<CpuSet> = chosen.values().cloned().collect();
        groups.sort();
        groups.dedup();
        for (i, a) in groups.iter().enumerate() {
            for b in &groups[i + 1..] {
                if a.node == b.node && !a.cpus.is_disjoint(&b.cpus) {
                    return Err(PlacementError::Overlap(a.to_string(), b.to_string()));
                }
            }
        }
        let of_pid = chosen
            .into_iter()
            .map(|(pid, set)| (pid, groups.binary_search(&set).expect("group listed")))
            .collect();
        Ok(Placement { groups, of_pid })
    }

    /// How many CPUs a group has.
    pub(crate) fn capacity(&self, g: GroupId) -> f64 {
        self.groups[g].cpus.len() as f64
    }

    /// The node a process runs on ("" for the recorded machine).
    pub(crate) fn node_of(&self, pid: u32) -> &str {
        self.of_pid
            .get(&pid)
            .map(|&g| self.groups[g].node.as_str())
            .filter(|n| !n.starts_with("#each"))
            .unwrap_or("")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROGRAM: &[ProgramProcess] = &[
        ProgramProcess::ranked(100, 0),
        ProgramProcess::ranked(101, 1),
        ProgramProcess::ranked(102, 2),
        ProgramProcess::ranked(103, 3),
    ];

    #[test]
    fn ranks_share_the_cpus_they_are_given() {
        let p = Placement::bind(&"*@0-1".parse().unwrap(), PROGRAM).unwrap();
        assert_eq!(p.groups.len(), 1);
        assert_eq!(p.capacity(0), 2.0);
        assert_eq!(p.of_pid.len(), 4);

        let p = Placement::bind(&"0-1@0; 2-3@1".parse().unwrap(), PROGRAM).unwrap();
        assert_eq!(p.groups.len(), 2);
        assert_eq!(p.of_pid[&100], p.of_pid[&101]);
        assert_ne!(p.of_pid[&100], p.of_pid[&102]);

        // A later item overrides an earlier one.
        let p = Placement::bind(&"*@0;3@1".parse().unwrap(), PROGRAM).unwrap();
        assert_eq!(p.groups.len(), 2);
        assert_ne!(p.of_pid[&103], p.of_pid[&100]);

        let p = Placement::bind(&"0-1@a:0;2-3@b:0".parse().unwrap(), PROGRAM).unwrap();
        assert_eq!(p.node_of(100), "a");
        assert_eq!(p.node_of(103), "b");
        assert_eq!(p.node_of(999), "");

        let p = Placement::bind(&"each".parse().unwrap(), PROGRAM).unwrap();
        assert_eq!(p.groups.len(), 4);
        assert_eq!(p.node_of(100), "");
    }

    /// fuzz/regressions/placement/many-ranges: 245 ranges of 65,536 CPUs in 4 KB.
    fn many_ranges() -> String {
        let ranges: Vec<String> = (0..245)
            .map(|i| format!("{}-{}", i * 65_536, i * 65_536 + 65_535))
            .collect();
        format!("0@{}", ranges.join(","))
    }

    #[test]
    fn bad_specs_say_what_is_wrong() {
        assert_eq!("".parse::<PlacementSpec>(), Err(PlacementError::Empty));
        assert!(matches!(
            "0-3".parse::<PlacementSpec>(),
            Err(PlacementError::Item(_))
        ));
        assert!(matches!(
            "x@0".parse::<PlacementSpec>(),
            Err(PlacementError::Number { .. })
        ));
        assert!(matches!(
            "0@".parse::<PlacementSpec>(),
            Err(PlacementError::Item(_))
        ));
        assert!(matches!(
            "3-1@0".parse::<PlacementSpec>(),
            Err(PlacementError::Number { .. })
        ));
        // Numbers past a rank's or a CPU's range are refused, not wrapped around.
        assert!(matches!(
            "4294967296@0".parse::<PlacementSpec>(),
            Err(PlacementError::Number { .. })
        ));
        assert!(matches!(
            "0@2147483648".parse::<PlacementSpec>(),
            Err(PlacementError::Number { .. })
        ));
        // A list may name 65,536 ranks or CPUs, no more (in one range or several).
        assert!("0-65535@0".parse::<PlacementSpec>().is_ok());
        assert!("0@0-65535,0-65535".parse::<PlacementSpec>().is_ok());
        for spec in ["0-65536@0", "0@0-65535,65536", &many_ranges()] {
            let e = spec.parse::<PlacementSpec>().unwrap_err();
            assert!(matches!(e, PlacementError::TooMany(_)), "{e:?}");
        }
        assert_eq!(
            "0@0-65535,65536"
                .parse::<PlacementSpec>()
                .unwrap_err()
                .to_string(),
            "placement item `0@0-65535,65536`: more than 65536 ranks or CPUs in one list"
        );
        let spec = "0@0;1@0-1".parse().unwrap();
        assert!(matches!(
            Placement::bind(&spec, PROGRAM),
            Err(PlacementError::Overlap(..))
        ));
        let spec = "7@0".parse().unwrap();
        assert_eq!(
            Placement::bind(&spec, PROGRAM).unwrap_err(),
            PlacementError::NoSuchRank(7)
        );
    }
}

//! Phases: the critical path read as a string over activity types (one symbol per
//! critical arc, e.g. its procedure), and the substrings that repeat in it. A loop in
//! the program shows up as a pattern that occurs many times; ranking patterns by
//! `count x length^2` favours long patterns that still repeat often, which are the
//! program's phases rather than its incidental pairs.
//!
//! Every length from `min_len` to `max_len` is one pass over the string with a rolling
//! hash, so the cost is `O(n x lengths)` whatever the alphabet; equal hashes are
//! confirmed by comparing the substrings, so a collision can cost time, never a wrong
//! answer.
//!
//! Why bounded lengths and hashing rather than a suffix array or tree: the report asks
//! for patterns of at most 16 activities (`ReportOptions::phase_max_len`), so the cost
//! is linear in the path (200,000 activities: tens of ms). Unbounded lengths would not
//! be: a loop's path is periodic, and a periodic string of length n has Θ(n) distinct
//! repeated substrings with Θ(n) occurrences each, so listing their greedy
//! non-overlapping occurrences is Θ(n²) whatever index finds them. Each candidate's
//! occurrences come out of its pass already sorted, which the greedy count needs.

use std::collections::HashMap;

/// A repeated substring of the symbol string.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Phase {
    pub pattern: Vec<u32>,
    /// Non-overlapping occurrences, taken greedily from left to right.
    pub count: usize,
    /// Start index of each counted occurrence, ascending.
    pub positions: Vec<usize>,
    /// `count x len^2`.
    pub score: u64,
}

/// Odd multiplier of the polynomial hash (arithmetic mod 2^64).
const BASE: u64 = 0x9e37_79b9_7f4a_7c15;

/// Start indexes of one distinct substring of the current length.
struct Group {
    positions: Vec<usize>,
}

/// The repeated substrings of `symbols` with `min_len..=max_len` symbols and at least
/// `min_support` non-overlapping occurrences, best first: by score, then longer, then
/// earlier. A pattern that is a substring of a better-ranked kept pattern with the same
/// count is left out (it only ever occurs inside that pattern, so it says nothing
/// new). At most `limit` phases are returned.
pub(crate) fn find_phases(
    symbols: &[u32],
    min_support: usize,
    min_len: usize,
    max_len: usize,
    limit: usize,
) -> Vec<Phase> {
    let min_support = min_support.max(1);
    let min_len = min_len.max(1);
    let max_len = max_len.min(symbols.len());
    if limit == 0 || min_len > max_len {
        return Vec::new();
    }
    // Candidates hold no copy of their pattern (it is `symbols[start..start + len]`):
    // a long string over a small alphabet has many.
    let mut candidates: Vec<Candidate> = Vec::new();
    for len in min_len..=max_len {
        // Greedy non-overlapping occurrences can only be fewer than all occurrences, and
        // at most n / len of them fit.
        if symbols.len() / len < min_support {
            break;
        }
        for group in groups_of_length(symbols, len) {
            if group.positions.len() < min_support {
                continue;
            }
            let positions = non_overlapping(&group.positions, len);
            if positions.len() >= min_support {
                candidates.push(Candidate {
                    score: positions.len() as u64 * (len as u64) * (len as u64),
                    len,
                    positions,
                });
            }
        }
    }
    candidates.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then(b.len.cmp(&a.len))
            .then(a.positions[0].cmp(&b.positions[0]))
    });
    let mut kept: Vec<Phase> = Vec::new();
    for c in candidates {
        let pattern = &symbols[c.positions[0]..c.positions[0] + c.len];
        let fragment = kept
            .iter()
            .any(|k| k.count == c.positions.len() && contains(&k.pattern, pattern));
        if !fragment {
            kept.push(Phase {
                pattern: pattern.to_vec(),
                count: c.positions.len(),
                positions: c.positions,
                score: c.score,
            });
            if kept.len() == limit {
                break;
            }
        }
    }
    kept
}

/// A pattern that passed the support test, before ranking.
struct Candidate {
    score: u64,
    len: usize,
    positions: Vec<usize>,
}

/// Every distinct substring of length `len` with its start indexes, ascending.
fn groups_of_length(symbols: &[u32], len: usize) -> Vec<Group> {
    // Symbols are offset by one so that a run of zeros does not hash like a shorter one.
    let code = |s: u32| s as u64 + 1;
    let top = BASE.wrapping_pow(len as u32 - 1);
    let mut hash = symbols[..len]
        .iter()
        .fold(0u64, |h, &s| h.wrapping_mul(BASE).wrapping_add(code(s)));
    let mut groups: Vec<Group> = Vec::new();
    // Hash -> groups with that hash (more than one only on a collision).
    let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
    for start in 0..=symbols.len() - len {
        if start > 0 {
            hash = hash
                .wrapping_sub(code(symbols[start - 1]).wrapping_mul(top))
                .wrapping_mul(BASE)
                .wrapping_add(code(symbols[start + len - 1]));
        }
        let window = &symbols[start..start + len];
        let ids = by_hash.entry(hash).or_default();
        match ids.iter().find(|&&g| {
            let first = groups[g].positions[0];
            &symbols[first..first + len] == window
        }) {
            Some(&g) => groups[g].positions.push(start),
            None => {
                ids.push(groups.len());
                groups.push(Group {
                    positions: vec![start],
                });
            }
        }
    }
    groups
}

/// The occurrences a left-to-right scan keeps when each must start after the previous
/// one ended.
fn non_overlapping(positions: &[usize], len: usize) -> Vec<usize> {
    let mut kept = Vec::new();
    let mut free_from = 0;
    for &p in positions {
        if p >= free_from {
            kept.push(p);
            free_from = p + len;
        }
    }
    kept
}

/// Whether `needle` occurs contiguously in `haystack`.
fn contains(haystack: &[u32], needle: &[u32]) -> bool {
    needle.len() <= haystack.len() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn syms(s: &str) -> Vec<u32> {
        s.bytes().map(u32::from).collect()
    }

    fn text(p: &Phase) -> String {
        p.pattern.iter().map(|&c| c as u8 as char).collect()
    }

    #[test]
    fn repeated_triple_ranks_first_and_its_fragments_are_dropped() {
        let phases = find_phases(&syms("ABCABCABCX"), 2, 1, 8, 10);
        let got: Vec<(String, usize, Vec<usize>, u64)> = phases
            .iter()
            .map(|p| (text(p), p.count, p.positions.clone(), p.score))
            .collect();
        assert_eq!(
            got,
            vec![
                ("ABC".into(), 3, vec![0, 3, 6], 27),
                ("BCA".into(), 2, vec![1, 4], 18),
                ("CAB".into(), 2, vec![2, 5], 18),
            ]
        );
        // AB, BC, A, B, C occur exactly as often as ABC, always inside it; BCAB etc.
        // occur once without overlap.
    }

    #[test]
    fn min_support_is_respected() {
        let s = syms("ABCABCABCX");
        assert_eq!(find_phases(&s, 4, 1, 8, 10), vec![]);
        let three = find_phases(&s, 3, 1, 8, 10);
        assert_eq!(three.len(), 1);
        assert_eq!(text(&three[0]), "ABC");
        assert!(find_phases(&s, 2, 1, 8, 10).iter().all(|p| p.count >= 2));
    }

    #[test]
    fn occurrences_are_counted_without_overlap() {
        let phases = find_phases(&syms("AAAA"), 1, 2, 2, 10);
        assert_eq!(phases.len(), 1);
        assert_eq!(text(&phases[0]), "AA");
        assert_eq!(phases[0].count, 2);
        assert_eq!(phases[0].positions, vec![0, 2]);
        assert_eq!(phases[0].score, 8);
        // "AAA" in "AAAAAAA": starts at 0 and 3; the one at 6 would run past the end.
        let p = find_phases(&syms("AAAAAAA"), 2, 3, 3, 10);
        assert_eq!(p[0].positions, vec![0, 3]);
    }

    #[test]
    fn a_longer_repeat_outranks_its_period_but_keeps_it() {
        // ABCABC twice (score 72) beats ABC four times (36); ABC has a different count,
        // so it is not a fragment of ABCABC and stays.
        let phases = find_phases(&syms("ABCABCABCABC"), 2, 3, 6, 2);
        assert_eq!(text(&phases[0]), "ABCABC");
        assert_eq!(phases[0].count, 2);
        assert_eq!(text(&phases[1]), "ABC");
        assert_eq!(phases[1].count, 4);
    }

    #[test]
    fn ties_prefer_longer_then_earlier_and_limit_applies() {
        // AA: 2 x 4 = 8. AB, BC and A all score 4: the two-symbol ones first, AB (at 3)
        // before BC (at 4); A occurs 4 times, AA only twice, so A is no fragment of AA.
        let phases = find_phases(&syms("AAAABC"), 1, 1, 2, 4);
        let got: Vec<(String, u64)> = phases.iter().map(|p| (text(p), p.score)).collect();
        assert_eq!(
            got,
            vec![
                ("AA".into(), 8),
                ("AB".into(), 4),
                ("BC".into(), 4),
                ("A".into(), 4),
            ]
        );
    }

    #[test]
    fn degenerate_inputs() {
        assert!(find_phases(&[], 2, 1, 8, 10).is_empty());
        assert!(find_phases(&[1, 2, 3], 2, 4, 8, 10).is_empty());
        assert!(find_phases(&[1, 1, 1], 2, 1, 8, 0).is_empty());
        // Symbol 0 and u32::MAX hash like any other.
        let p = find_phases(&[0, u32::MAX, 0, u32::MAX], 2, 2, 2, 10);
        assert_eq!(p[0].pattern, vec![0, u32::MAX]);
        assert_eq!(p[0].count, 2);
    }

    #[test]
    fn matches_a_brute_force_count_on_random_strings() {
        let mut x = 0x1234_5678_9abc_def1u64;
        for _ in 0..30 {
            let s: Vec<u32> = (0..200)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    (x % 3) as u32
                })
                .collect();
            for p in find_phases(&s, 2, 1, 6, 50) {
                let len = p.pattern.len();
                let all: Vec<usize> = (0..=s.len() - len)
                    .filter(|&i| s[i..i + len] == p.pattern[..])
                    .collect();
                assert_eq!(p.positions, non_overlapping(&all, len));
                assert_eq!(p.count, p.positions.len());
                assert_eq!(p.score, (p.count * len * len) as u64);
            }
        }
    }

    /// Long strings (100,000 symbols, lengths up to 32: one hashing pass per length).
    /// How fast is for benchmarks: a bound on time here failed a loaded machine (21 s
    /// for 20 while other builds ran).
    #[test]
    fn long_strings_give_their_phases() {
        let s: Vec<u32> = (0..100_000u32).map(|i| (i * 7 + i / 13) % 5).collect();
        let phases = find_phases(&s, 3, 1, 32, 20);
        assert!(!phases.is_empty());
        // Random bits: every short substring repeats, many candidates per length.
        let mut x = 0x9e37_79b9u64;
        let bits: Vec<u32> = (0..100_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x & 1) as u32
            })
            .collect();
        let phases = find_phases(&bits, 2, 1, 32, 20);
        assert_eq!(phases.len(), 20);
    }
}

//! Pairing a thread's call exits with its entries when records are missing: a probe can
//! fail to write an exit (`call_too_deep`, a return probe attached while the thread was
//! inside the call, a longjmp over the call) or an entry. Popping the innermost open call
//! for every exit would then pair every later exit of the thread with the wrong entry;
//! pairing by call id resynchronises the stack at the first exit that disagrees.

use serde::Serialize;

/// The entry an exit closed.
#[derive(Clone, Debug, PartialEq)]
pub struct ClosedCall<T> {
    pub entry: T,
    /// Open calls the closed one had inside it, dropped: their exits are missing.
    pub exits_missing: u64,
}

/// Closes the innermost open call of `id` (`open` holds a thread's open calls, innermost
/// last; `id_of` reads an entry's call id): the calls above it lost their exits, and are
/// dropped. None when no call of `id` is open (its entry is missing): the exit is to be
/// dropped, and `open` is left as it was.
pub(crate) fn close_call<T>(
    open: &mut Vec<T>,
    id: u16,
    id_of: impl Fn(&T) -> u16,
) -> Option<ClosedCall<T>> {
    let at = open.iter().rposition(|e| id_of(e) == id)?;
    let exits_missing = (open.len() - at - 1) as u64;
    open.truncate(at + 1);
    let entry = open.pop()?;
    Some(ClosedCall {
        entry,
        exits_missing,
    })
}

/// Drops the `calls` innermost open calls that the probes found returned without their
/// exits (a `CALLS_UNWOUND` record), as the probes dropped them; returns how many there
/// were.
pub(crate) fn drop_unwound<T>(open: &mut Vec<T>, calls: u32) -> u64 {
    let keep = open.len().saturating_sub(calls as usize);
    let dropped = (open.len() - keep) as u64;
    open.truncate(keep);
    dropped
}

/// How often a stream's calls did not pair up, and the pairing resynchronised.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resynchronised {
    /// Open calls dropped when an exit of a call around them came: their exits are
    /// missing.
    pub exits_missing: u64,
    /// Exits dropped because no call of theirs was open: their entries are missing.
    pub entries_missing: u64,
}

impl Resynchronised {
    /// Whether every call paired (outputs then stay as they were).
    pub fn is_none(&self) -> bool {
        *self == Resynchronised::default()
    }

    /// Counts what closing an exit found (`closed`, from [`close_call`]).
    pub fn count<T>(&mut self, closed: Option<&ClosedCall<T>>) {
        match closed {
            Some(c) => self.exits_missing += c.exits_missing,
            None => self.entries_missing += 1,
        }
    }

    /// Calls whose records did not pair.
    pub fn total(&self) -> u64 {
        self.exits_missing + self.entries_missing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exit_closes_the_innermost_call_of_its_id_and_drops_those_above() {
        // Calls 1 ⊃ 2 ⊃ 3 ⊃ 2 open; the exits of the inner 2 and of 3 are missing.
        let mut open = vec![1u16, 2, 3, 2];
        let mut seen = Resynchronised::default();
        let closed = close_call(&mut open, 2, |&e| e);
        seen.count(closed.as_ref());
        assert_eq!(
            closed,
            Some(ClosedCall {
                entry: 2,
                exits_missing: 0
            })
        );
        assert_eq!(open, [1, 2, 3]);
        let closed = close_call(&mut open, 2, |&e| e);
        seen.count(closed.as_ref());
        assert_eq!(
            closed,
            Some(ClosedCall {
                entry: 2,
                exits_missing: 1
            })
        );
        assert_eq!(open, [1]);
        // An exit with no call of its id open is dropped; the stack stays.
        let closed = close_call(&mut open, 7, |&e| e);
        seen.count(closed.as_ref());
        assert_eq!(closed, None);
        assert_eq!(open, [1]);
        assert_eq!(
            seen,
            Resynchronised {
                exits_missing: 1,
                entries_missing: 1
            }
        );
        assert_eq!(seen.total(), 2);
        assert!(Resynchronised::default().is_none());
    }
}

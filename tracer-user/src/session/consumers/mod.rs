//! The readers of a session's record stream. Each gets every probe, process snapshot
//! and record the sink takes, may flush on the event loop's ticks, and gives its outcome
//! when the session ends. A new one (a stream to a collector, a sampler's attribution)
//! is a file here, an outcome in `consumer`, and a line in `for_session`; the others do
//! not change.

mod consumer;
mod path;
mod recording;
mod session_list;
mod stream;
mod summary;
mod whatif;

pub(in crate::session) use consumer::{ConsumerOutcome, CountsSoFar, RecordConsumer, SessionEnd};
pub(in crate::session) use session_list::{for_session, ConsumerOptions};

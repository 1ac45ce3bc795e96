//! Command-line front end: one file per subcommand; errors become one line with context.

mod agent;
mod analyze;
mod calibrate;
mod commands;
mod dump;
mod export;
mod functions;
mod merge;
mod metrics;
mod path_values;
mod print;
mod record;
mod report;
mod summary;
mod top;
mod whatif;

pub(crate) use commands::{run, Cli};
use print::{print_summary, tell_condition, warn_lost, warn_probe_failures};

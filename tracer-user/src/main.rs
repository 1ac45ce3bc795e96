use std::process::ExitCode;

use clap::Parser;

mod cli;

fn main() -> ExitCode {
    // Milliseconds: the debug log times the start, the holds and the stop.
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format_timestamp_millis()
        .init();
    let args = cli::Cli::parse();
    match cli::run(args) {
        Ok(code) => code,
        Err(e) => {
            {
                use std::io::Write as _;
                // Not eprintln!: a reader of stderr that left must not turn an error into a panic.
                let _ = writeln!(std::io::stderr(), "tracer: error: {e:#}");
            }
            ExitCode::FAILURE
        }
    }
}

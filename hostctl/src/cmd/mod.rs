//! One module per subcommand: its arguments and what it does.

pub mod build;
pub mod compare;
pub mod deploy;
pub mod diff;
pub mod fetch;
pub mod host_symbols;
pub mod latency_report;
pub mod perf_archive;
pub mod record_options;
pub mod report;
pub mod run;
pub mod symbol_args;
pub mod symbols;
pub mod time_range;

//! kprofctl: build and deploy the kprof agent, run captures on a board over ssh, fetch them,
//! and report them against the host's build tree with build-id matched symbols.

mod cmd;
mod debuginfod;
mod discover;
mod files;
mod interrupt;
mod progress;
mod remote;
mod state;
mod term;
mod user_config;

use clap::{Parser, Subcommand};

/// Profile kernel modules, drivers and user code on an embedded Linux board.
///
/// The day on a board: `kprofctl run root@board -- CMD...` then `kprofctl fetch`.
#[derive(Debug, Parser)]
#[command(name = "kprofctl", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Report a capture: functions, call paths, annotated source, flamegraph, HTML.
    Report(cmd::report::ReportArgs),
    /// Show, per image of a capture, its build-id and the symbol file used or why none.
    Symbols(cmd::symbols::SymbolsArgs),
    /// Per-function change between two captures.
    Diff(cmd::diff::DiffArgs),
    /// The top functions of several captures (boards) side by side.
    Compare(cmd::compare::CompareArgs),
    /// Upload the agent to a board and install it.
    Deploy(cmd::deploy::DeployArgs),
    /// Run a capture on one board or several at once: `kprofctl run TARGET... [record options] -- CMD...`.
    Run(cmd::run::RunArgs),
    /// Download new captures from the board and report them.
    Fetch(cmd::fetch::FetchArgs),
    /// Build the agent (or an image) with Yocto, Buildroot or cargo.
    Build(cmd::build::BuildArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Report(args) => cmd::report::run(args),
        Command::Symbols(args) => cmd::symbols::run(args),
        Command::Diff(args) => cmd::diff::run(args),
        Command::Compare(args) => cmd::compare::run(args),
        Command::Deploy(args) => cmd::deploy::run(args),
        Command::Run(args) => cmd::run::run(args),
        Command::Fetch(args) => cmd::fetch::run(args),
        Command::Build(args) => cmd::build::run(args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("kprofctl: {}", term::error_text(&err));
            if err.is::<interrupt::Interrupted>() {
                std::process::ExitCode::from(interrupt::EXIT_STATUS as u8)
            } else {
                std::process::ExitCode::FAILURE
            }
        }
    }
}

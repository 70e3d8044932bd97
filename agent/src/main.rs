//! kprof-agent: see `kprof-agent --help` and docs/agent.md.

use std::io::Write;
use std::process::ExitCode;

use kprof_agent::cli::{self, Command};
use kprof_agent::{info, record, store, Error};

mod glibc_static;

fn run() -> Result<ExitCode, Error> {
    let argv: Vec<String> = std::env::args().collect();
    match cli::parse(&argv[1..])? {
        Command::Help => print_out(&format!("{}\n", cli::USAGE)),
        Command::Version => print_out(&format!("kprof-agent {}\n", kprof_agent::AGENT_VERSION)),
        Command::Record(o) => {
            if let Some(note) = o
                .compression
                .and_then(kprof_agent::zstd_records::level_note)
            {
                eprintln!("kprof-agent: {note}");
            }
            let sealed = record::run(&o, &argv)?;
            // The archive is complete; a closed stdout must not turn that into a failure.
            let _ = writeln!(std::io::stdout(), "{}", sealed.path.display());
            if let Some(why) = sealed.truncated {
                eprintln!(
                    "kprof-agent: capture {} is truncated: {why}",
                    sealed.path.display()
                );
                return Ok(ExitCode::from(record::EXIT_TRUNCATED));
            }
        }
        Command::ElfId(names) => print_out(&kprof_agent::elf_id::run(&names)?),
        Command::Info => {
            let i = info::gather();
            let s = serde_json::to_string_pretty(&i).map_err(|e| Error::Other(e.to_string()))?;
            print_out(&(s + "\n"));
        }
        Command::List { dir, json } => {
            let entries = store::list(&dir)?;
            let text = if json {
                serde_json::to_string_pretty(&entries).map_err(|e| Error::Other(e.to_string()))?
                    + "\n"
            } else {
                store::render(&entries)
            };
            print_out(&text);
        }
        Command::Rm { dir, ids } => {
            for p in store::remove(&dir, &ids)? {
                eprintln!("kprof-agent: removed {}", p.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Writes a report to stdout. A reader that went away (`| head`) is not an error worth a
/// message, and `println!` would panic on it.
fn print_out(text: &str) {
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kprof-agent: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

//! kprof-agent: see `kprof-agent --help` and docs/agent.md.

use std::io::Write;
use std::process::ExitCode;

use kprof_agent::cli::{self, Command};
use kprof_agent::{info, record, store, Error};

fn run() -> Result<(), Error> {
    let argv: Vec<String> = std::env::args().collect();
    match cli::parse(&argv[1..])? {
        Command::Help => println!("{}", cli::USAGE),
        Command::Version => println!("kprof-agent {}", kprof_agent::AGENT_VERSION),
        Command::Record(o) => {
            let path = record::run(&o, &argv)?;
            // The archive is complete; a closed stdout must not turn that into a failure.
            let _ = writeln!(std::io::stdout(), "{}", path.display());
        }
        Command::Info => {
            let i = info::gather();
            let s = serde_json::to_string_pretty(&i).map_err(|e| Error::Other(e.to_string()))?;
            println!("{s}");
        }
        Command::List { dir, json } => {
            let entries = store::list(&dir)?;
            let mut out = std::io::stdout().lock();
            let text = if json {
                serde_json::to_string_pretty(&entries).map_err(|e| Error::Other(e.to_string()))?
                    + "\n"
            } else {
                store::render(&entries)
            };
            // A closed pipe (`| head`) is not an error worth a message.
            let _ = out.write_all(text.as_bytes());
        }
        Command::Rm { dir, ids } => {
            for p in store::remove(&dir, &ids)? {
                eprintln!("kprof-agent: removed {}", p.display());
            }
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kprof-agent: {e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

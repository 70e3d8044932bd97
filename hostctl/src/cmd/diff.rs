//! `kprofctl diff BASE NEW`: per-function change between two captures, computed by
//! [`kprof_report::diff`].

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use kprof_report::diff::{Diff, Side};
use serde_json::json;

use super::symbol_args::SymbolArgs;

/// Output formats of `kprofctl diff`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table for a terminal, largest change first.
    Text,
    /// JSON (schema `kprof-diff`, version 1, in docs/formats.md), for CI gates.
    Json,
}

/// Arguments of `kprofctl diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {
    /// The reference capture (agent archive or perf.data).
    #[arg(value_name = "BASE")]
    pub base: PathBuf,
    /// The capture to compare with it.
    #[arg(value_name = "NEW")]
    pub new: PathBuf,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// The event to compare (default: the first event of BASE); both captures must have it.
    #[arg(long, value_name = "E")]
    pub event: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Rows of the text table (0 = all); JSON always has all.
    #[arg(long, value_name = "N", default_value_t = 40)]
    pub limit: usize,
    /// Write to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: DiffArgs) -> anyhow::Result<()> {
    // report's loader: the same symbol options and progress bars; the second capture finds
    // the build-id index stored by the first.
    let base = super::report::load_on_cpu(&args.base, &args.symbols)?;
    let new = super::report::load_on_cpu(&args.new, &args.symbols)?;
    let event = match &args.event {
        Some(name) => name.clone(),
        None => match base.events.first() {
            Some(e) => e.name.clone(),
            None => bail!("{}: the capture has no sampled events", args.base.display()),
        },
    };
    let diff = Diff::compute(
        &event,
        Side::new(&args.base, &base, &event)?,
        Side::new(&args.new, &new, &event)?,
    );
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(io::BufWriter::new(crate::files::create_private(path)?)),
        None => Box::new(io::BufWriter::new(io::stdout().lock())),
    };
    match args.format {
        Format::Text => {
            for (side, warnings) in [("base", &base.warnings), ("new", &new.warnings)] {
                for warning in warnings {
                    crate::term::warning(format!("{side}: {warning}"));
                }
            }
            diff.write_text(args.limit, &mut out)
                .map_err(anyhow::Error::from)
        }
        Format::Json => {
            let mut value = diff.to_json();
            value["warnings"] = json!({ "base": base.warnings, "new": new.warnings });
            let text = serde_json::to_string_pretty(&value)?;
            out.write_all(kprof_report::escape::json_c1(&text).as_bytes())?;
            writeln!(out).map_err(anyhow::Error::from)
        }
    }
    .and_then(|()| out.flush().map_err(anyhow::Error::from))
    .context("writing the diff")
}

//! `kprofctl compare CAPTURE CAPTURE...`: the top functions of several captures side by side
//! (one per board of a lab run), computed by [`kprof_report::compare`].

use std::io::{self, Write};
use std::path::PathBuf;

use anyhow::{bail, Context};
use kprof_report::compare::{Column, Compare};
use kprof_symbols::profile::Profile;
use serde_json::json;

use super::symbol_args::SymbolArgs;

/// Output formats of `kprofctl compare`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table for a terminal, one column per capture.
    Text,
    /// JSON (schema `kprof-compare`, version 1, in docs/formats.md), for CI gates.
    Json,
    /// One self-contained HTML page (no script, no external resource).
    Html,
}

/// Arguments of `kprofctl compare`.
#[derive(Debug, clap::Args)]
pub struct CompareArgs {
    /// The captures (agent archives or perf.data), one column each, in this order.
    #[arg(value_name = "CAPTURE", num_args = 2.., required = true)]
    pub captures: Vec<PathBuf>,
    /// Symbol options for all captures: each image is matched by its GNU build-id, so one
    /// set covering every board's tree is enough.
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// The event to compare (default: the first event of the first capture); every capture
    /// must have it.
    #[arg(long, value_name = "E")]
    pub event: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Functions shown, largest share in any capture first (0 = all).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: usize,
    /// Write to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
}

pub fn run(args: CompareArgs) -> anyhow::Result<()> {
    // report's loader, as diff uses it: the same symbol options and progress bars; later
    // captures find the build-id index stored by the first. Its errors name the capture.
    let profiles: Vec<Profile> = args
        .captures
        .iter()
        .map(|path| super::report::load_on_cpu(path, &args.symbols))
        .collect::<anyhow::Result<_>>()?;
    let event = match &args.event {
        Some(name) => name.clone(),
        None => match profiles[0].events.first() {
            Some(e) => e.name.clone(),
            None => bail!(
                "{}: the capture has no sampled events",
                args.captures[0].display()
            ),
        },
    };
    let columns = args
        .captures
        .iter()
        .zip(&profiles)
        .map(|(path, profile)| Column::new(path, profile, &event))
        .collect::<Result<Vec<_>, _>>()?;
    let compare = Compare::compute(&event, columns);
    let mut out: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(io::BufWriter::new(crate::files::create_private(path)?)),
        None => Box::new(io::BufWriter::new(io::stdout().lock())),
    };
    match args.format {
        Format::Text | Format::Html => {
            for (i, p) in profiles.iter().enumerate() {
                for warning in &p.warnings {
                    crate::term::warning(format!("#{}: {warning}", i + 1));
                }
            }
            if args.format == Format::Html {
                compare.write_html(args.limit, &mut out)
            } else {
                compare.write_text(args.limit, &mut out)
            }
            .map_err(anyhow::Error::from)
        }
        Format::Json => {
            let mut value = compare.to_json(args.limit);
            for (i, p) in profiles.iter().enumerate() {
                value["captures"][i]["warnings"] = json!(p.warnings);
            }
            let text = serde_json::to_string_pretty(&value)?;
            out.write_all(kprof_report::escape::json_c1(&text).as_bytes())?;
            writeln!(out).map_err(anyhow::Error::from)
        }
    }
    .and_then(|()| out.flush().map_err(anyhow::Error::from))
    .context("writing the comparison")
}

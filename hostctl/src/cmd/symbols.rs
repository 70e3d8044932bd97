//! `kprofctl symbols`: symbol coverage of a capture — per image with samples, its recorded
//! build-id and the file used, or why none.

use super::report::load;
use super::symbol_args::SymbolArgs;
use kprof_report::text::symbol_status;
use kprof_symbols::profile::SymbolSource;
use kprof_symbols::views::{self, Filter};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `kprofctl symbols`.
#[derive(Debug, clap::Args)]
pub struct SymbolsArgs {
    /// A capture: an agent archive (.kprof.tar.gz) or a bare perf.data.
    #[arg(value_name = "CAPTURE")]
    pub capture: PathBuf,
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

// TODO(issue 21 item 6): over 80 lines; split it with the debuginfod work in this file.
#[allow(clippy::too_many_lines)]
pub fn run(args: SymbolsArgs) -> anyhow::Result<()> {
    let l = load(&args.capture, &args.symbols)?;
    let p = &l.profile;
    let rows = views::images(p, &Filter::default());
    let total: u64 = rows
        .iter()
        .map(|r| r.samples.first().copied().unwrap_or(0))
        .sum();
    let mut out = std::io::stdout().lock();
    if args.json {
        let images: Vec<serde_json::Value> = rows
            .iter()
            .map(|r| {
                let img = &p.images[r.image];
                let (status, path) = match &img.symbols {
                    SymbolSource::BuildId { path } => {
                        ("build-id", Some(path.display().to_string()))
                    }
                    SymbolSource::Mismatch { path, .. } => {
                        ("mismatch", Some(path.display().to_string()))
                    }
                    SymbolSource::Kallsyms => ("kallsyms", None),
                    SymbolSource::Missing { .. } => ("missing", None),
                };
                serde_json::json!({
                    "image": img.name,
                    "recorded_path": img.recorded_path,
                    "build_id": img.build_id,
                    "status": status,
                    "file": path,
                    "detail": symbol_status(&img.symbols),
                    "samples": r.samples.first().copied().unwrap_or(0),
                })
            })
            .collect();
        let v = serde_json::json!({
            "schema": "kprof-symbols",
            "version": 1,
            "indexed_files": l.symbolizer.index().len(),
            "images": images,
            "warnings": p.warnings,
        });
        let text = serde_json::to_string_pretty(&v)?;
        out.write_all(kprof_report::escape::json_c1(&text).as_bytes())?;
        writeln!(out)?;
        return Ok(());
    }
    // Image names and paths come from the board: no raw control characters to the terminal.
    let mut out = kprof_report::escape::Escaping::new(out);
    writeln!(
        out,
        "{} ELF files indexed ({} read this time)",
        l.symbolizer.index().len(),
        l.symbolizer.index().files_read
    )?;
    writeln!(
        out,
        "{:>10} {:>7}  {:<24} {:<40}  symbols",
        "samples", "%", "image", "build-id"
    )?;
    let mut covered = 0u64;
    for r in &rows {
        let img = &p.images[r.image];
        let n = r.samples.first().copied().unwrap_or(0);
        if matches!(img.symbols, SymbolSource::BuildId { .. }) {
            covered += n;
        }
        writeln!(
            out,
            "{n:>10} {:>6.2}%  {:<24} {:<40}  {}",
            if total == 0 {
                0.0
            } else {
                n as f64 * 100.0 / total as f64
            },
            img.name,
            img.build_id.as_deref().unwrap_or("(none recorded)"),
            symbol_status(&img.symbols)
        )?;
    }
    writeln!(
        out,
        "{:.1}% of samples are in images with build-id matched symbol files",
        if total == 0 {
            0.0
        } else {
            covered as f64 * 100.0 / total as f64
        }
    )?;
    for w in &p.warnings {
        crate::term::warning(w);
    }
    Ok(())
}

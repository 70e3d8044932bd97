//! `kprofctl symbols`: symbol coverage of a capture — per image with samples, its recorded
//! build-id and the file used, or why none.

use super::report::{load, Loaded};
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

pub fn run(args: SymbolsArgs) -> anyhow::Result<()> {
    let mut l = load(&args.capture, &args.symbols)?;
    args.symbols.add_image_warnings(&mut l.profile);
    let rows = views::images(&l.profile, &Filter::default());
    if args.json {
        return write_json(&l, &rows);
    }
    write_table(&l, &rows)?;
    for w in &l.profile.warnings {
        crate::term::warning(w);
    }
    Ok(())
}

/// Samples of the first event in a row of the images view.
fn samples(r: &views::ImageRow) -> u64 {
    r.samples.first().copied().unwrap_or(0)
}

fn percent(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 * 100.0 / total as f64
    }
}

/// The `kprof-symbols` JSON document (docs/json-schema.md).
fn write_json(l: &Loaded, rows: &[views::ImageRow]) -> anyhow::Result<()> {
    let p = &l.profile;
    let images: Vec<serde_json::Value> = rows
        .iter()
        .map(|r| {
            let img = &p.images[r.image];
            let (status, path, origin) = match &img.symbols {
                SymbolSource::BuildId { path, origin } => ("build-id", Some(path), origin.clone()),
                SymbolSource::Unverified { path } => ("unverified", Some(path), None),
                SymbolSource::Mismatch { path, .. } => ("mismatch", Some(path), None),
                SymbolSource::Kallsyms => ("kallsyms", None, None),
                SymbolSource::Missing { .. } => ("missing", None, None),
            };
            let mut row = serde_json::json!({
                "image": img.name,
                "recorded_path": img.recorded_path,
                "build_id": img.build_id,
                "status": status,
                "file": path.map(|p| p.display().to_string()),
                "origin": origin,
                "detail": symbol_status(&img.symbols),
                "samples": samples(r),
            });
            // A CI gate reads the two ids of a mismatch here, as in the report's JSON.
            if let SymbolSource::Mismatch {
                expected,
                found,
                kallsyms,
                ..
            } = &img.symbols
            {
                row["expected"] = expected.as_str().into();
                row["found"] = found.as_str().into();
                row["kallsyms"] = (*kallsyms).into();
            }
            row
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
    let mut out = std::io::stdout().lock();
    out.write_all(kprof_report::escape::json_c1(&text).as_bytes())?;
    writeln!(out)?;
    Ok(())
}

/// The coverage table: per image its share, build-id and symbol file (or why none).
fn write_table(l: &Loaded, rows: &[views::ImageRow]) -> anyhow::Result<()> {
    let p = &l.profile;
    let total: u64 = rows.iter().map(samples).sum();
    // Image names and paths come from the board: no raw control characters to the terminal.
    let mut out = kprof_report::escape::Escaping::new(std::io::stdout().lock());
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
    let mut unverified = 0u64;
    for r in rows {
        let img = &p.images[r.image];
        let n = samples(r);
        match img.symbols {
            SymbolSource::BuildId { .. } => covered += n,
            SymbolSource::Unverified { .. } => unverified += n,
            _ => {}
        }
        writeln!(
            out,
            "{n:>10} {:>6.2}%  {:<24} {:<40}  {}",
            percent(n, total),
            img.name,
            img.build_id.as_deref().unwrap_or("(none recorded)"),
            symbol_status(&img.symbols)
        )?;
    }
    writeln!(
        out,
        "{:.1}% of samples are in images with build-id matched symbol files",
        percent(covered, total)
    )?;
    if unverified > 0 {
        writeln!(
            out,
            "{:.1}% of samples are in images matched by recorded path only (unverified: no build-id recorded)",
            percent(unverified, total)
        )?;
    }
    Ok(())
}

//! `--format text`: opreport-like tables for a terminal.

use kprof_symbols::annotate::Annotation;
use kprof_symbols::profile::{Profile, SymbolSource};
use kprof_symbols::views::{self, CallNode, Direction, Filter};
use std::io::Write;

use crate::Error;

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        n as f64 * 100.0 / total as f64
    }
}

/// The callers line of a capture whose samples have no call chains: why, and how to get them.
pub const NO_CALL_CHAINS: &str =
    "no caller recorded: call chains were not recorded in this capture \
     (`kprofctl run` records them unless given --no-call-graph; `perf record -g` or --call-graph)";

/// How an image's symbols were found, in a few words.
pub fn symbol_status(s: &SymbolSource) -> String {
    match s {
        SymbolSource::BuildId { path, origin } => match origin {
            Some(origin) => format!("{} ({origin})", path.display()),
            None => path.display().to_string(),
        },
        SymbolSource::Unverified { path } => {
            format!("{} (unverified: no build-id recorded)", path.display())
        }
        SymbolSource::Mismatch {
            path,
            expected,
            found,
            kallsyms,
        } => {
            let names = if *kallsyms {
                "; names from kallsyms, no source lines"
            } else {
                ""
            };
            format!(
                "MISMATCH {} (build-id {found}, recorded {expected}): not used{names}",
                path.display()
            )
        }
        SymbolSource::Kallsyms => "kallsyms (names only, no source lines)".into(),
        SymbolSource::Missing { why } => format!("no symbols: {why}"),
    }
}

/// Display name of a function.
pub fn function_name(p: &Profile, f: usize) -> String {
    let func = &p.functions[f];
    match &func.name {
        Some(n) => n.clone(),
        None => "[unknown]".into(),
    }
}

/// The default view: header, images summary, functions table, of the stacks `filter` keeps.
pub fn write_functions(
    p: &Profile,
    filter: &Filter,
    ratio: Option<(usize, usize)>,
    limit: usize,
    out: &mut dyn Write,
) -> Result<(), Error> {
    // Names come from the board and from binaries: no raw control characters to the terminal.
    let mut out = crate::escape::Escaping::new(out);
    let out: &mut dyn Write = &mut out;
    let columns = Columns {
        p,
        totals: views::totals(p, filter),
        ratio,
        ratio_unknown: ratio.and_then(|(a, b)| views::ratio_unknown(p, a, b)),
    };
    write_header(p, &columns, out)?;
    writeln!(out)?;
    writeln!(out, "Images:")?;
    columns.head(out)?;
    writeln!(out, "image                symbols")?;
    for row in views::images(p, filter) {
        let img = &p.images[row.image];
        columns.counts(out, &row.samples, &row.periods)?;
        writeln!(out, "{:<20} {}", img.name, symbol_status(&img.symbols))?;
    }
    writeln!(out)?;
    write_function_rows(p, filter, &columns, limit, out)
}

/// `--markers`: the header, then every mark in the window in time order: seconds since
/// capture start (µs), CPU, the thread as comm/pid/tid, the event and the mark's text.
pub fn write_markers(p: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    let mut out = crate::escape::Escaping::new(out);
    let out: &mut dyn Write = &mut out;
    let columns = Columns {
        p,
        totals: views::totals(p, &Filter::default()),
        ratio: None,
        ratio_unknown: None,
    };
    write_header(p, &columns, out)?;
    let marks = crate::marks::listed(p);
    writeln!(out)?;
    writeln!(out, "Marks: {}", marks.len())?;
    writeln!(
        out,
        "{:>14}  {:>4}  {:<24} {:<24} text",
        "time (s)", "cpu", "comm/pid/tid", "event"
    )?;
    for l in &marks {
        let cpu = match l.mark.cpu {
            u32::MAX => "-".to_string(),
            c => c.to_string(),
        };
        writeln!(
            out,
            "{:>14.6}  {cpu:>4}  {:<24} {:<24} {}",
            l.time as f64 / 1e9,
            crate::marks::thread_label(l),
            l.mark.event,
            l.mark.text
        )?;
    }
    Ok(())
}

/// Capture, target, window, events with their totals, lost samples and what the ratio
/// column means.
fn write_header(p: &Profile, columns: &Columns, out: &mut dyn Write) -> Result<(), Error> {
    writeln!(out, "Capture: {}", p.meta.capture)?;
    let host: Vec<&str> = [&p.meta.hostname, &p.meta.os_release, &p.meta.arch]
        .into_iter()
        .filter_map(|s| s.as_deref())
        .collect();
    if !host.is_empty() {
        writeln!(out, "Target:  {}", host.join(" "))?;
    }
    let scope = match &p.meta.window {
        Some(w) => {
            writeln!(
                out,
                "Window:  {} (of {:.3} s from capture start)",
                w.describe(),
                p.meta.duration_ns as f64 / 1e9
            )?;
            "in window"
        }
        None => "in capture",
    };
    for (e, t) in p.events.iter().zip(&columns.totals) {
        writeln!(
            out,
            "Event:   {} — {} samples shown ({} {scope})",
            e.name, t, e.total_samples
        )?;
    }
    if p.meta.lost_samples > 0 {
        writeln!(out, "Lost:    {} samples", p.meta.lost_samples)?;
    }
    // Said once, above the tables: the column is a ratio of counts, or why it cannot be.
    if let Some((a, b)) = columns.ratio {
        let (na, nb) = (&p.events[a].name, &p.events[b].name);
        match &columns.ratio_unknown {
            Some(why) => writeln!(out, "Ratio:   {na}/{nb} {why}")?,
            None => writeln!(
                out,
                "Ratio:   {na}/{nb} of event counts, sample-weighted (each sample weighs its period)"
            )?,
        }
    }
    Ok(())
}

/// The functions table: at most `limit` rows, then how many were left out.
fn write_function_rows(
    p: &Profile,
    filter: &Filter,
    columns: &Columns,
    limit: usize,
    out: &mut dyn Write,
) -> Result<(), Error> {
    writeln!(out, "Functions (self samples):")?;
    columns.head(out)?;
    writeln!(
        out,
        "image                function                                  source"
    )?;
    let rows = views::functions(p, filter);
    let n = rows.len();
    for row in rows.iter().take(limit) {
        let f = &p.functions[row.function];
        columns.counts(out, &row.samples, &row.periods)?;
        let src = match (&f.file, f.line) {
            (Some(file), Some(line)) => format!("{}:{line}", p.source_path(file)),
            _ => String::new(),
        };
        let hot = match &row.hot_line {
            Some(h) if Some(h.line) != f.line => {
                format!("  (hot {}:{})", p.source_path(&h.file), h.line)
            }
            _ => String::new(),
        };
        writeln!(
            out,
            "{:<20} {:<41} {src}{hot}",
            p.images[f.image].name,
            function_name(p, row.function)
        )?;
    }
    if n > limit {
        writeln!(
            out,
            "... {} more functions (--limit 0 shows all)",
            n - limit
        )?;
    }
    Ok(())
}

/// The count columns both tables start with: per event count and share, then the ratio.
struct Columns<'a> {
    p: &'a Profile,
    /// Per event, what the shares are of.
    totals: Vec<u64>,
    ratio: Option<(usize, usize)>,
    /// Why the ratio cannot be computed for this capture, when it cannot.
    ratio_unknown: Option<String>,
}

impl Columns<'_> {
    /// The column titles.
    fn head(&self, out: &mut dyn Write) -> std::io::Result<()> {
        let p = self.p;
        for e in &p.events {
            let n: String = e.name.chars().take(20).collect();
            write!(out, "{n:>20}       ")?;
        }
        if let Some((a, b)) = self.ratio {
            write!(
                out,
                "{:>10} ",
                format!(
                    "{}/{}",
                    short_ev(&p.events[a].name),
                    short_ev(&p.events[b].name)
                )
            )?;
        }
        Ok(())
    }

    /// One row's columns.
    fn counts(&self, out: &mut dyn Write, counts: &[u64], periods: &[u64]) -> std::io::Result<()> {
        for (c, t) in counts.iter().zip(&self.totals) {
            write!(out, "{c:>12} {:>6.2}%      ", pct(*c, *t))?;
        }
        if let Some((a, b)) = self.ratio {
            match views::ratio(periods[a], periods[b]) {
                _ if self.ratio_unknown.is_some() => write!(out, "{:>10} ", "unknown")?,
                Some(r) => write!(out, "{r:>10.4} ")?,
                None => write!(out, "{:>10} ", "-")?,
            }
        }
        Ok(())
    }
}

fn short_ev(n: &str) -> String {
    n.chars().take(12).collect()
}

/// `--callers` / `--callees`: an indented tree with shares of the root.
pub fn write_tree(
    p: &Profile,
    root: &CallNode,
    dir: Direction,
    out: &mut dyn Write,
) -> Result<(), Error> {
    // Names come from the board and from binaries: no raw control characters to the terminal.
    let mut out = crate::escape::Escaping::new(out);
    let out: &mut dyn Write = &mut out;
    let what = match dir {
        Direction::Callers => "callers of",
        Direction::Callees => "callees of",
    };
    let ev = p.events.first().map(|e| e.name.as_str()).unwrap_or("");
    writeln!(
        out,
        "{what} {} ({}), {} {ev} samples in stacks through it",
        function_name(p, root.function),
        p.images[p.functions[root.function].image].name,
        root.samples
    )?;
    fn walk(
        p: &Profile,
        n: &CallNode,
        total: u64,
        depth: usize,
        out: &mut dyn Write,
    ) -> std::io::Result<()> {
        for c in &n.children {
            let img = &p.images[p.functions[c.function].image];
            let boundary = if img.kernel { " [k]" } else { "" };
            let site = c
                .top_site()
                .map(|s| format!("  {}:{}", p.source_path(&s.file), s.line))
                .unwrap_or_default();
            writeln!(
                out,
                "{:indent$}{:>6.2}% {:>10}  {} ({}){boundary}{site}",
                "",
                pct(c.samples, total),
                c.samples,
                function_name(p, c.function),
                img.name,
                indent = depth * 2
            )?;
            walk(p, c, total, depth + 1, out)?;
        }
        Ok(())
    }
    walk(p, root, root.samples, 1, out)?;
    let direct: u64 = root.children.iter().map(|c| c.samples).sum();
    if root.samples > direct {
        let none = match dir {
            Direction::Callers if p.meta.call_chains == Some(false) => NO_CALL_CHAINS,
            Direction::Callers => "no caller recorded (stack ends here)",
            Direction::Callees => "self (in the function itself)",
        };
        writeln!(
            out,
            "  {:>6.2}% {:>10}  {none}",
            pct(root.samples - direct, root.samples),
            root.samples - direct
        )?;
    }
    Ok(())
}

/// `--annotate`: source lines with samples, then the disassembly with samples.
pub fn write_annotation(
    p: &Profile,
    anns: &[Annotation],
    out: &mut dyn Write,
) -> Result<(), Error> {
    // Names come from the board and from binaries: no raw control characters to the terminal.
    let mut out = crate::escape::Escaping::new(out);
    let out: &mut dyn Write = &mut out;
    let Some(a) = anns.first() else { return Ok(()) };
    writeln!(
        out,
        "{} ({}) at {:#x}, {} bytes",
        a.function, a.image, a.start, a.size
    )?;
    for (e, ann) in p.events.iter().zip(anns) {
        writeln!(out, "  {}: {} self samples", e.name, ann.total)?;
    }
    for w in &a.warnings {
        writeln!(out, "  note: {w}")?;
    }
    let cells = |out: &mut dyn Write, get: &dyn Fn(&Annotation) -> u64| -> std::io::Result<()> {
        for ann in anns {
            let n = get(ann);
            if n == 0 {
                write!(out, "{:>8} {:>7} ", "", "")?;
            } else {
                write!(out, "{n:>8} {:>6.2}% ", pct(n, ann.total))?;
            }
        }
        Ok(())
    };
    let mut file = None;
    writeln!(out, "\nSource:")?;
    for (i, l) in a.lines.iter().enumerate() {
        if file != Some(&l.file) {
            writeln!(out, "  {}", p.source_path(&l.file))?;
            file = Some(&l.file);
        }
        cells(out, &|ann| ann.lines.get(i).map_or(0, |x| x.samples))?;
        writeln!(out, "{:>6}  {}", l.line, l.text.as_deref().unwrap_or(""))?;
    }
    writeln!(out, "\nDisassembly:")?;
    let mut last_line = None;
    for (i, x) in a.instructions.iter().enumerate() {
        if x.line.is_some() && x.line != last_line {
            writeln!(
                out,
                "{:w$}  ; {}:{}",
                "",
                x.file.as_deref().map(|f| p.source_path(f)).unwrap_or(""),
                x.line.unwrap_or(0),
                w = anns.len() * 17
            )?;
            last_line = x.line;
        }
        cells(out, &|ann| ann.instructions.get(i).map_or(0, |y| y.samples))?;
        writeln!(out, "{:>16x}:  {}", x.address, x.text)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture;

    fn functions(p: &Profile) -> String {
        let mut out = Vec::new();
        write_functions(p, &Filter::default(), Some((0, 1)), 10, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// `--ratio` divides event counts: 70 cpu-clock samples of 1 ms over 7 page faults is
    /// 10^7 (the sample ratio would be 10), and the header says it is a count ratio.
    #[test]
    fn write_functions_text_ratio_of_counts() {
        let out = functions(&fixture::profile());
        assert!(
            out.contains("Ratio:   cpu-clock/page-faults of event counts, sample-weighted"),
            "{out}"
        );
        let compute = out.lines().find(|l| l.contains(" compute ")).expect(&out);
        assert!(compute.contains("10000000.0000"), "{compute}");
    }

    /// An event without known periods makes the column `unknown`, explained once.
    #[test]
    fn write_functions_text_ratio_unknown_explained() {
        let mut p = fixture::profile();
        p.events[1].period_known = false;
        let out = functions(&p);
        assert_eq!(
            out.matches("ratio unknown: the samples of page-faults")
                .count(),
            1
        );
        let compute = out.lines().find(|l| l.contains(" compute ")).expect(&out);
        assert!(compute.contains("unknown"), "{compute}");
    }
}

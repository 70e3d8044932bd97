//! `--format html`: one self-contained viewer page that opens offline.
//!
//! The page is a header (capture, target, events, warnings), a timeline (one track per CPU and
//! per busy thread, a rate chart per event, markers, a row of marks and spans per thread that
//! marked, a row of timed calls and lock waits per thread that had any) and the views as tabs:
//! functions, call tree, flamegraph, source, latency (when the capture timed functions or
//! recorded lock waits), the Log of marks, images. Everything but the header and the images table is drawn by
//! the page's script from one embedded JSON object ([`data`]): per-stack counts, the call
//! paths as a trie and per-bin sparse stack counts. Selecting a time range sums those bins and
//! redraws every view for the window; the window is kept in the URL fragment.
//!
//! CSS, script and data are inline; no URL outside the file is referenced. The page carries a
//! Content-Security-Policy that lets only its own script run (by hash) and loads nothing from
//! anywhere: a report shared with others cannot be made to run a capture's text as script nor
//! to send what it shows (kernel addresses, paths) to a server, even if escaping had a hole.

pub mod blocked;
pub mod data;
pub(crate) mod escape;
pub mod latency;
pub mod marks;
pub mod model;
mod pack;
pub mod source;
#[cfg(test)]
mod tests;
pub mod timeline;

use std::io::{self, Write};

use kprof_symbols::annotate::Annotation;
use kprof_symbols::profile::{Profile, SymbolSource};

use self::escape::Esc;
use self::model::percent;
use crate::Error;

/// What the page shows first, beyond the profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Options {
    /// `--ratio A/B`: indices into `Profile::events` of the timeline's ratio track.
    pub ratio: Option<(usize, usize)>,
    /// Blocked spans of a capture recorded with `--off-cpu` ([`blocked::spans`] of the profile
    /// before its off-CPU events were taken out): drawn on the thread tracks.
    pub blocked: Vec<blocked::Span>,
    /// What the profile's counts are when they are not samples (`report --off-cpu`: blocked
    /// ns): the page names it in every column and says so under the header.
    pub unit: Option<&'static str>,
}

/// Writes the page. `annotation` is the annotated source of one function (`--annotate F`,
/// or the hottest function), shown in the Source tab when given.
pub fn write(
    profile: &Profile,
    annotation: Option<&Annotation>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    write_with(profile, annotation, &Options::default(), out)
}

/// [`write()`] with [`Options`].
pub fn write_with(
    profile: &Profile,
    annotation: Option<&Annotation>,
    options: &Options,
    out: &mut dyn Write,
) -> Result<(), Error> {
    collapsed_check(profile)?;
    let mut out = io::BufWriter::new(out);
    Page {
        profile,
        totals: model::event_totals(profile),
        options,
    }
    .write(annotation, &mut out)
    .and_then(|()| out.flush())
    .map_err(Error::writing("writing the HTML report"))
}

/// Refuses a profile with nothing to show: no sampled event, and no timed call or lock wait
/// (a capture of those alone, `run --no-sample`, has a page of its own).
fn collapsed_check(profile: &Profile) -> Result<(), Error> {
    if profile.latency.is_some() || profile.contention.is_some() {
        return Ok(());
    }
    crate::collapsed::check_event(profile, 0)
}

/// The page's script element text (between `<script>` and `</script>`): the marks' and the
/// latency parts first, as page.js calls them while it starts.
fn script_text() -> String {
    format!(
        "\n{}{}{}",
        include_str!("html/marks.js"),
        include_str!("html/latency.js"),
        include_str!("html/page.js")
    )
}

/// The page's Content-Security-Policy: its own script by SHA-256, inline styles (the script sets
/// `style` attributes), `data:` images, nothing else; no form targets, no `<base>`.
fn content_security_policy(script: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(script));
    format!(
        "default-src 'none'; script-src 'sha256-{hash}'; style-src 'unsafe-inline'; \
         img-src data:; base-uri 'none'; form-action 'none'"
    )
}

/// JSON as the text of a `<script type="application/json">`: `<` escaped so no `</script>`
/// in a function name can end the element.
fn script_json(value: &serde_json::Value) -> String {
    value.to_string().replace('<', "\\u003c")
}

struct Page<'a> {
    profile: &'a Profile,
    /// Samples per event in the profile: the 100 % of every percentage.
    totals: Vec<u64>,
    options: &'a Options,
}

impl Page<'_> {
    fn write(&self, annotation: Option<&Annotation>, out: &mut dyn Write) -> io::Result<()> {
        let events: Vec<&str> = self
            .profile
            .events
            .iter()
            .map(|e| e.name.as_str())
            .collect();
        let title = if events.is_empty() {
            "kprof report: timed calls and lock waits".to_owned()
        } else {
            format!("kprof report: {}", events.join(", "))
        };
        let script = script_text();
        write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"kprofctl {}\">\n<title>{}</title>\n<style>\n{}</style>\n</head>\n<body>\n",
            content_security_policy(&script),
            env!("CARGO_PKG_VERSION"),
            Esc(&title),
            include_str!("html/page.css"),
        )?;
        self.header(&title, out)?;
        out.write_all(include_str!("html/body.html").as_bytes())?;
        self.images(out)?;
        writeln!(out, "</main>")?;
        writeln!(
            out,
            "<script type=\"application/json\" id=\"kprof-data\">{}</script>",
            script_json(&data::build(self.profile, annotation, self.options))
        )?;
        write!(out, "<script>{script}</script>\n</body>\n</html>\n")
    }

    fn header(&self, title: &str, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "<header>\n<h1>{}</h1>", Esc(title))?;
        let meta = &self.profile.meta;
        let mut facts = Vec::new();
        if !meta.capture.is_empty() {
            facts.push(format!("capture <code>{}</code>", Esc(&meta.capture)));
        }
        if let Some(command) = &meta.command {
            facts.push(format!("command <code>{}</code>", Esc(command)));
        }
        let target: Vec<&str> = [&meta.hostname, &meta.os_release, &meta.arch]
            .into_iter()
            .flatten()
            .map(String::as_str)
            .collect();
        if !target.is_empty() {
            facts.push(format!("target {}", Esc(&target.join(" "))));
        }
        if meta.lost_samples > 0 {
            facts.push(format!(
                "<span class=\"bad\">{} samples lost</span>",
                meta.lost_samples
            ));
        }
        if !facts.is_empty() {
            writeln!(out, "<p class=\"meta\">{}</p>", facts.join(" · "))?;
        }
        // A capture of timed calls and lock waits alone has no sampled event to list.
        if !self.profile.events.is_empty() {
            self.events_table(out)?;
        }
        if let Some(unit) = self.options.unit {
            // Blocked ns in a "samples" column would read as a sample count a million times
            // too large.
            writeln!(
                out,
                "<p class=\"unit-note\" id=\"unit-note\">Every count on this page is <strong>{}</strong>, \
                 not samples: widths, columns and percentages weigh time (1 ms = 1000000 ns).</p>",
                Esc(unit)
            )?;
        }
        let warnings = &self.profile.warnings;
        if !warnings.is_empty() {
            // A long list would push the timeline off the first screen: folded past three.
            let open = if warnings.len() <= 3 { " open" } else { "" };
            writeln!(
                out,
                "<details class=\"warnings\" id=\"warnings\"{open}><summary>{} warning(s)</summary><ul>",
                warnings.len()
            )?;
            for warning in warnings {
                writeln!(out, "<li>{}</li>", Esc(warning))?;
            }
            writeln!(out, "</ul></details>")?;
        }
        writeln!(out, "</header>")
    }

    /// The events with their samples shown and captured, and their period sums.
    fn events_table(&self, out: &mut dyn Write) -> io::Result<()> {
        let unit = self.options.unit.unwrap_or("samples");
        let heads = if self.options.unit.is_some() {
            format!(
                "<th class=\"n\">{0} shown</th><th class=\"n\">{0} captured</th>",
                Esc(unit)
            )
        } else {
            "<th class=\"n\">Samples shown</th><th class=\"n\">Samples captured</th>".to_owned()
        };
        writeln!(
            out,
            "<table class=\"events\"><thead><tr><th>Event</th>{heads}\
             <th class=\"n\">Period sum</th></tr></thead><tbody>"
        )?;
        for (event, shown) in self.profile.events.iter().zip(&self.totals) {
            writeln!(
                out,
                "<tr><td><code>{}</code></td><td class=\"n\">{shown}</td><td class=\"n\">{}</td>\
                 <td class=\"n\">{}</td></tr>",
                Esc(&event.name),
                event.total_samples,
                event.total_period
            )?;
        }
        writeln!(out, "</tbody></table>")
    }

    fn images(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "<section id=\"images\" class=\"pane\" hidden>\n<p class=\"note\">Every image of the \
             capture with its symbol status; samples of the whole capture.</p>"
        )?;
        writeln!(
            out,
            "<table class=\"sortable\" id=\"images-table\"><colgroup><col style=\"width:15%\">\
             <col style=\"width:64px\">{}<col style=\"width:18%\"><col style=\"width:112px\"><col>\
             </colgroup><thead><tr><th>Image</th><th>Space</th>{}\
             <th>Recorded path</th><th>Build-id</th><th>Symbols</th></tr></thead><tbody>",
            "<col style=\"width:84px\">".repeat(2 * self.profile.events.len()),
            self.event_heads(&["self", "self %"])
        )?;
        let counts = model::image_counts(self.profile);
        let mut order: Vec<usize> = (0..self.profile.images.len()).collect();
        order.sort_by(|&a, &b| counts[b].first().cmp(&counts[a].first()).then(a.cmp(&b)));
        for i in order {
            let image = &self.profile.images[i];
            let space = match crate::collapsed::frame_kind_of_image(image) {
                crate::collapsed::FrameKind::Kernel => "<span class=\"kernel\">kernel</span>",
                crate::collapsed::FrameKind::Module => "<span class=\"module\">module</span>",
                _ => "<span class=\"user\">user</span>",
            };
            write!(
                out,
                "<tr><td class=\"fn\" title=\"{0}\">{0}</td><td>{space}</td>",
                Esc(&image.name)
            )?;
            for (count, total) in counts[i].iter().zip(&self.totals) {
                write_count_cells(out, *count, *total)?;
            }
            write!(
                out,
                "<td class=\"path\" title=\"{0}\"><bdi>{0}</bdi></td><td class=\"bid\" title=\"{1}\">{1}</td><td>",
                Esc(&image.recorded_path),
                Esc(image.build_id.as_deref().unwrap_or("none recorded"))
            )?;
            write_symbol_status(out, &image.symbols)?;
            writeln!(out, "</td></tr>")?;
        }
        writeln!(out, "</tbody></table>\n</section>")
    }

    /// Header cells `<event> <column>` for every event and column.
    fn event_heads(&self, columns: &[&str]) -> String {
        let mut heads = String::new();
        for event in &self.profile.events {
            for column in columns {
                heads.push_str(&format!(
                    "<th class=\"n\">{} {column}</th>",
                    Esc(&event.name)
                ));
            }
        }
        heads
    }
}

/// A count cell and a percentage cell, both sortable by value.
fn write_count_cells(out: &mut dyn Write, count: u64, total: u64) -> io::Result<()> {
    let pct = percent(count, total);
    write!(
        out,
        "<td class=\"n\" data-v=\"{count}\">{count}</td><td class=\"n\" data-v=\"{pct}\">{pct:.2}%</td>"
    )
}

/// The Symbols cell of an image: how its symbols were found, or why none.
fn write_symbol_status(out: &mut dyn Write, symbols: &SymbolSource) -> io::Result<()> {
    match symbols {
        SymbolSource::BuildId { path, origin } => {
            write!(
                out,
                "<span class=\"ok\">build-id match</span> <code>{}</code>",
                Esc(&path.display().to_string())
            )?;
            if let Some(origin) = origin {
                write!(out, " from {}", Esc(origin))?;
            }
        }
        SymbolSource::Unverified { path } => write!(
            out,
            "<span class=\"weak\">unverified: no build-id recorded</span> <code>{}</code> \
             (found by its recorded path)",
            Esc(&path.display().to_string())
        )?,
        SymbolSource::Mismatch {
            path,
            expected,
            found,
            kallsyms,
        } => write!(
            out,
            "<span class=\"bad\">build-id mismatch, not used</span>: <code>{}</code> has \
             <code>{}</code>, the capture recorded <code>{}</code>{}",
            Esc(&path.display().to_string()),
            Esc(found),
            Esc(expected),
            if *kallsyms {
                "; function names from kallsyms, no source lines"
            } else {
                ""
            }
        )?,
        SymbolSource::Kallsyms => write!(
            out,
            "<span class=\"weak\">kallsyms fallback</span>: function names only, no source lines"
        )?,
        SymbolSource::Missing { why } => {
            write!(out, "<span class=\"bad\">no symbols</span>: {}", Esc(why))?
        }
    }
    Ok(())
}

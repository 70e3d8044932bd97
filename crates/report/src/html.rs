//! `--format html`: one self-contained page that opens offline.
//!
//! Everything is inline: CSS and JavaScript in the page, the flamegraph SVG (with inferno's
//! own zoom and search script) in an `<iframe>` whose source is a `data:` URL, so its script
//! and element ids stay apart from the page's. No URL outside the file is referenced.
//!
//! Sections: events and warnings, images with their symbol status, functions (sortable,
//! filterable, a column group per event), flamegraph per event, call tree (expandable), and
//! annotated source (the given annotation, and the hottest source lines of the profile).

mod escape;
pub mod model;
pub mod source;
#[cfg(test)]
mod tests;

use std::io::{self, Write};

use kprof_symbols::annotate::Annotation;
use kprof_symbols::profile::{Profile, SymbolSource};

use self::escape::{base64, Esc};
use self::model::{percent, CallTree, NodeKey};
use self::source::Listing;
use crate::Error;

/// Rows of the functions table; the rest is summed up in a note (the JSON output has all).
const MAX_FUNCTION_ROWS: usize = 2000;
/// Call tree nodes below this share of every event are folded into a "smaller" line.
const TREE_MIN_PERCENT: f64 = 0.1;
/// Call tree nodes at or above this share of the first event start expanded.
const TREE_OPEN_PERCENT: f64 = 5.0;
/// Hottest source lines listed.
const HOT_LINES: usize = 50;

/// Writes the page. `annotation` is the annotated source of one function (`--annotate F`,
/// or the hottest function), shown in the last section when given.
pub fn write(
    profile: &Profile,
    annotation: Option<&Annotation>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    collapsed_check(profile)?;
    let mut out = io::BufWriter::new(out);
    Page {
        profile,
        totals: model::event_totals(profile),
    }
    .write(annotation, &mut out)
    .and_then(|()| out.flush())
    .map_err(Error::writing("writing the HTML report"))
}

fn collapsed_check(profile: &Profile) -> Result<(), Error> {
    crate::collapsed::check_event(profile, 0)
}

struct Page<'a> {
    profile: &'a Profile,
    /// Samples per event in the profile: the 100 % of every percentage.
    totals: Vec<u64>,
}

impl Page<'_> {
    fn write(&self, annotation: Option<&Annotation>, out: &mut dyn Write) -> io::Result<()> {
        let title = format!(
            "kprof report: {}",
            self.profile
                .events
                .iter()
                .map(|e| e.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
        write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
             <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
             <meta name=\"generator\" content=\"kprofctl {}\">\n<title>{}</title>\n<style>\n{}</style>\n</head>\n<body>\n",
            env!("CARGO_PKG_VERSION"),
            Esc(&title),
            include_str!("html/page.css"),
        )?;
        self.header(&title, out)?;
        writeln!(
            out,
            "<nav><a href=\"#images\">Images</a><a href=\"#functions\">Functions</a>\
             <a href=\"#flamegraph\">Flamegraph</a><a href=\"#calltree\">Call tree</a>\
             <a href=\"#source\">Source</a></nav>"
        )?;
        self.images(out)?;
        self.functions(out)?;
        self.flamegraphs(out)?;
        self.call_tree(out)?;
        self.source(annotation, out)?;
        write!(
            out,
            "<script>\n{}</script>\n</body>\n</html>\n",
            include_str!("html/page.js")
        )
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
        writeln!(
            out,
            "<table class=\"events\"><thead><tr><th>Event</th><th class=\"n\">Samples shown</th>\
             <th class=\"n\">Samples captured</th><th class=\"n\">Period sum</th></tr></thead><tbody>"
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
        writeln!(out, "</tbody></table>\n</header>")?;
        if !self.profile.warnings.is_empty() {
            writeln!(out, "<ul class=\"warnings\" id=\"warnings\">")?;
            for warning in &self.profile.warnings {
                writeln!(out, "<li>{}</li>", Esc(warning))?;
            }
            writeln!(out, "</ul>")?;
        }
        Ok(())
    }

    fn images(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "<section id=\"images\">\n<h2>Images</h2>")?;
        writeln!(
            out,
            "<table class=\"sortable\" id=\"images-table\"><thead><tr><th>Image</th><th>Space</th>{}\
             <th>Recorded path</th><th>Build-id</th><th>Symbols</th></tr></thead><tbody>",
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
                "<tr><td class=\"fn\">{}</td><td>{space}</td>",
                Esc(&image.name)
            )?;
            for (count, total) in counts[i].iter().zip(&self.totals) {
                write_count_cells(out, *count, *total)?;
            }
            write!(
                out,
                "<td class=\"path\">{}</td><td class=\"path\">{}</td><td>",
                Esc(&image.recorded_path),
                Esc(image.build_id.as_deref().unwrap_or("none recorded"))
            )?;
            match &image.symbols {
                SymbolSource::BuildId { path } => write!(
                    out,
                    "<span class=\"ok\">build-id match</span> <code>{}</code>",
                    Esc(&path.display().to_string())
                )?,
                SymbolSource::Mismatch {
                    path,
                    expected,
                    found,
                } => write!(
                    out,
                    "<span class=\"bad\">build-id mismatch, not used</span>: <code>{}</code> has \
                     <code>{}</code>, the capture recorded <code>{}</code>",
                    Esc(&path.display().to_string()),
                    Esc(found),
                    Esc(expected)
                )?,
                SymbolSource::Kallsyms => write!(
                    out,
                    "<span class=\"weak\">kallsyms fallback</span>: function names only, no source lines"
                )?,
                SymbolSource::Missing { why } => {
                    write!(out, "<span class=\"bad\">no symbols</span>: {}", Esc(why))?
                }
            }
            writeln!(out, "</td></tr>")?;
        }
        writeln!(out, "</tbody></table>\n</section>")
    }

    fn functions(&self, out: &mut dyn Write) -> io::Result<()> {
        let rows = model::function_rows(self.profile);
        writeln!(out, "<section id=\"functions\">\n<h2>Functions</h2>")?;
        writeln!(
            out,
            "<p class=\"note\">Self: samples in the function itself. Total: samples with the \
             function anywhere on the call stack. Click a header to sort.</p>\n\
             <input class=\"filter\" type=\"search\" placeholder=\"Filter functions, images, files\" \
             data-table=\"functions-table\">"
        )?;
        writeln!(
            out,
            "<div class=\"scroll\"><table class=\"sortable\" id=\"functions-table\"><thead><tr><th class=\"n\">#</th>\
             <th>Function</th><th>Image</th>{}<th></th><th>Source</th></tr></thead><tbody>",
            self.event_heads(&["self", "self %", "total %"])
        )?;
        for (rank, row) in rows.iter().take(MAX_FUNCTION_ROWS).enumerate() {
            let function = &self.profile.functions[row.function];
            let image = self.profile.images.get(function.image);
            write!(
                out,
                "<tr><td class=\"n\" data-v=\"{}\">{}</td><td class=\"fn\">{}</td><td class=\"fn\">{}</td>",
                rank + 1,
                rank + 1,
                Esc(function.name.as_deref().unwrap_or("[unknown]")),
                Esc(image.map_or("[unknown]", |i| i.name.as_str()))
            )?;
            for ((own, all), total) in row
                .self_counts
                .iter()
                .zip(&row.total_counts)
                .zip(&self.totals)
            {
                let (own_pct, all_pct) = (percent(*own, *total), percent(*all, *total));
                write!(
                    out,
                    "<td class=\"n\" data-v=\"{own}\">{own}</td>\
                     <td class=\"n\" data-v=\"{own_pct}\">{own_pct:.2}%</td>\
                     <td class=\"n\" data-v=\"{all_pct}\">{all_pct:.2}%</td>"
                )?;
            }
            let first = percent(
                row.self_counts.first().copied().unwrap_or(0),
                self.totals.first().copied().unwrap_or(0),
            );
            write!(
                out,
                "<td class=\"bar\" data-v=\"{first}\"><div class=\"bar\"><span style=\"width:{:.1}%\"></span></div></td>",
                first.min(100.0)
            )?;
            match (&function.file, function.line) {
                (Some(file), Some(line)) => writeln!(
                    out,
                    "<td class=\"path\">{}:{line}</td></tr>",
                    Esc(self.profile.source_path(file))
                )?,
                (Some(file), None) => writeln!(
                    out,
                    "<td class=\"path\">{}</td></tr>",
                    Esc(self.profile.source_path(file))
                )?,
                _ => writeln!(out, "<td></td></tr>")?,
            }
        }
        writeln!(out, "</tbody></table></div>")?;
        if rows.len() > MAX_FUNCTION_ROWS {
            writeln!(
                out,
                "<p class=\"note\">{} more functions with fewer samples are not listed; \
                 <code>--format json</code> has them all.</p>",
                rows.len() - MAX_FUNCTION_ROWS
            )?;
        }
        writeln!(out, "</section>")
    }

    fn flamegraphs(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "<section id=\"flamegraph\">\n<h2>Flamegraph</h2>")?;
        writeln!(
            out,
            "<p class=\"note\">Click a frame to zoom, Ctrl-F or the Search button to highlight. \
             Orange: vmlinux, purple: kernel modules, red: user code, aqua: inlined.</p>"
        )?;
        let events = &self.profile.events;
        if events.len() > 1 {
            writeln!(out, "<label>Event <select id=\"flame-event\">")?;
            for (i, event) in events.iter().enumerate() {
                writeln!(out, "<option value=\"{i}\">{}</option>", Esc(&event.name))?;
            }
            writeln!(out, "</select></label>")?;
        }
        for (i, event) in events.iter().enumerate() {
            let hidden = if i == 0 { "" } else { " hidden" };
            writeln!(out, "<div class=\"flame-pane\" data-event=\"{i}\"{hidden}>")?;
            let mut svg = Vec::new();
            match crate::flamegraph::write_svg_event(self.profile, i, &mut svg) {
                Ok(()) => {
                    writeln!(
                        out,
                        "<iframe class=\"flame\" title=\"{} flamegraph\" height=\"{}\" \
                         src=\"data:image/svg+xml;base64,{}\"></iframe>",
                        Esc(&event.name),
                        svg_height(&svg).unwrap_or(600) + 4,
                        base64(&without_prologue(&svg))
                    )?;
                }
                Err(err) => writeln!(
                    out,
                    "<p class=\"note\">No flamegraph for {}: {}</p>",
                    Esc(&event.name),
                    Esc(&err.chain())
                )?,
            }
            writeln!(out, "</div>")?;
        }
        writeln!(out, "</section>")
    }

    fn call_tree(&self, out: &mut dyn Write) -> io::Result<()> {
        let tree = CallTree::build(self.profile);
        writeln!(out, "<section id=\"calltree\">\n<h2>Call tree</h2>")?;
        writeln!(
            out,
            "<p class=\"note\">Top-down, per command; percentages of all samples of {}. \
             Paths under {TREE_MIN_PERCENT}% of every event are folded.</p>\
             <p class=\"tools\"><button data-tree=\"open\">Expand all</button>\
             <button data-tree=\"close\">Collapse all</button></p>\n<div class=\"tree\">",
            Esc(&self.profile.events[0].name)
        )?;
        self.tree_children(&tree, 0, out)?;
        writeln!(out, "</div>\n</section>")
    }

    fn tree_children(&self, tree: &CallTree, node: usize, out: &mut dyn Write) -> io::Result<()> {
        let mut folded = 0usize;
        let mut folded_count = 0u64;
        for &child in &tree.nodes[node].children {
            let c = &tree.nodes[child];
            let shown = c
                .counts
                .iter()
                .zip(&self.totals)
                .any(|(&n, &t)| percent(n, t) >= TREE_MIN_PERCENT);
            if !shown {
                folded += 1;
                folded_count += c.counts.first().copied().unwrap_or(0);
                continue;
            }
            let first = c.counts.first().copied().unwrap_or(0);
            let share = percent(first, self.totals.first().copied().unwrap_or(0));
            let label = self.node_label(tree, child);
            if c.children.is_empty() {
                writeln!(out, "<div class=\"leaf\">{label}</div>")?;
            } else {
                let open = if share >= TREE_OPEN_PERCENT {
                    " open"
                } else {
                    ""
                };
                writeln!(out, "<details{open}><summary>{label}</summary>")?;
                self.tree_children(tree, child, out)?;
                writeln!(out, "</details>")?;
            }
        }
        if folded > 0 {
            writeln!(
                out,
                "<div class=\"leaf note\">{folded} smaller path(s), {folded_count} samples</div>"
            )?;
        }
        Ok(())
    }

    fn node_label(&self, tree: &CallTree, node: usize) -> String {
        let n = &tree.nodes[node];
        let first = n.counts.first().copied().unwrap_or(0);
        let share = percent(first, self.totals.first().copied().unwrap_or(0));
        let mut label =
            format!("<span class=\"pct\">{share:.2}%</span><span class=\"cnt\">{first}</span>");
        match &n.key {
            NodeKey::Comm(comm) => label.push_str(&format!("<b>{}</b>", Esc(comm))),
            NodeKey::Function(f, inlined) => {
                let function = &self.profile.functions[*f];
                let image = self
                    .profile
                    .images
                    .get(function.image)
                    .map_or("[unknown]", |i| i.name.as_str());
                label.push_str(&format!(
                    "{} <span class=\"img\">{}</span>",
                    Esc(function.name.as_deref().unwrap_or("[unknown]")),
                    Esc(image)
                ));
                if *inlined {
                    label.push_str(" <span class=\"inl\">inlined</span>");
                }
            }
        }
        let own = n.self_counts.first().copied().unwrap_or(0);
        if own > 0 && !n.children.is_empty() {
            label.push_str(&format!(" <span class=\"self\">(self {own})</span>"));
        }
        for (event, (count, total)) in self
            .profile
            .events
            .iter()
            .zip(n.counts.iter().zip(&self.totals))
            .skip(1)
        {
            label.push_str(&format!(
                " <span class=\"self\">{}: {:.2}%</span>",
                Esc(&event.name),
                percent(*count, *total)
            ));
        }
        label
    }

    fn source(&self, annotation: Option<&Annotation>, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "<section id=\"source\">\n<h2>Annotated source</h2>")?;
        match annotation {
            Some(annotation) => {
                let mut listing = Listing::from(annotation);
                for heading in listing.source.iter_mut().filter(|r| r.heading) {
                    heading.text = self.profile.source_path(&heading.text).to_string();
                }
                self.listing(&listing, out)?
            }
            None => writeln!(
                out,
                "<p class=\"note\">No function was annotated for this page \
                 (<code>kprofctl report --annotate FUNC --format html</code>).</p>"
            )?,
        }
        self.hot_lines(out)?;
        writeln!(out, "</section>")
    }

    fn listing(&self, listing: &Listing, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "<h3><code>{}</code></h3>\n<p class=\"meta\">{} samples of {} in the function itself; \
             percentages of those.</p>",
            Esc(&listing.function),
            listing.total,
            Esc(&listing.event)
        )?;
        for note in &listing.notes {
            writeln!(out, "<p class=\"note\">{}</p>", Esc(note))?;
        }
        for (heading, rows) in [
            ("Source lines", &listing.source),
            ("Disassembly", &listing.disassembly),
        ] {
            if rows.is_empty() {
                continue;
            }
            let max = rows.iter().map(|r| r.samples).max().unwrap_or(0);
            writeln!(
                out,
                "<h4>{heading}</h4>\n<div class=\"scroll\"><table class=\"listing\"><thead><tr>\
                 <th class=\"n\">samples</th><th class=\"n\">%</th><th></th><th></th></tr></thead><tbody>"
            )?;
            for row in rows {
                if row.heading {
                    writeln!(
                        out,
                        "<tr class=\"file\"><td></td><td></td><td></td><td>{}</td></tr>",
                        Esc(&row.text)
                    )?;
                    continue;
                }
                let class = if max > 0 && row.samples * 2 >= max {
                    " class=\"hot\""
                } else if row.samples > 0 {
                    " class=\"warm\""
                } else {
                    ""
                };
                match row.samples {
                    0 => write!(out, "<tr{class}><td class=\"n\"></td><td class=\"n\"></td>")?,
                    n => write!(
                        out,
                        "<tr{class}><td class=\"n\">{n}</td><td class=\"n\">{:.2}%</td>",
                        percent(n, listing.total)
                    )?,
                }
                writeln!(
                    out,
                    "<td class=\"lbl\">{}</td><td>{}</td></tr>",
                    Esc(&row.label),
                    Esc(&row.text)
                )?;
            }
            writeln!(out, "</tbody></table></div>")?;
        }
        Ok(())
    }

    fn hot_lines(&self, out: &mut dyn Write) -> io::Result<()> {
        let lines = model::hot_lines(self.profile, HOT_LINES);
        writeln!(out, "<h3>Hottest source lines</h3>")?;
        if lines.is_empty() {
            return writeln!(
                out,
                "<p class=\"note\">No sample has a source line: no symbol file with DWARF line \
                 tables matched (see Images).</p>"
            );
        }
        writeln!(
            out,
            "<table class=\"sortable\" id=\"lines-table\"><thead><tr><th>Source line</th>\
             <th>Function</th><th>Image</th>{}</tr></thead><tbody>",
            self.event_heads(&["samples", "%"])
        )?;
        for line in &lines {
            let function = &self.profile.functions[line.function];
            write!(
                out,
                "<tr><td class=\"path\">{}:{}</td><td class=\"fn\">{}</td><td class=\"fn\">{}</td>",
                Esc(self.profile.source_path(&line.file)),
                line.line,
                Esc(function.name.as_deref().unwrap_or("[unknown]")),
                Esc(self
                    .profile
                    .images
                    .get(function.image)
                    .map_or("[unknown]", |i| i.name.as_str()))
            )?;
            for (count, total) in line.counts.iter().zip(&self.totals) {
                write_count_cells(out, *count, *total)?;
            }
            writeln!(out, "</tr>")?;
        }
        writeln!(out, "</tbody></table>")
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

/// The SVG without its DOCTYPE (which names a DTD URL), comments, and the scheme of any URL
/// in inferno's script text (a bug-report link, a reference in a comment), so the page
/// carries no URL but XML namespace names, which browsers never fetch.
fn without_prologue(svg: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(svg);
    let mut rest = text.find("<svg").map_or(&*text, |at| &text[at..]);
    let mut out = String::with_capacity(rest.len());
    while let Some(at) = rest.find("<!--") {
        out.push_str(&rest[..at]);
        rest = rest[at..]
            .find("-->")
            .map_or("", |end| &rest[at + end + 3..]);
    }
    out.push_str(rest);

    let mut clean = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(at) = rest.find("://") {
        let before = &rest[..at];
        let scheme = before.len()
            - before
                .trim_end_matches(|c: char| c.is_ascii_alphabetic())
                .len();
        let attr = before.rfind(' ').map_or(before, |space| &before[space..]);
        if attr.starts_with(" xmlns") {
            clean.push_str(&rest[..at + 3]);
        } else {
            clean.push_str(&before[..before.len() - scheme]);
        }
        rest = &rest[at + 3..];
    }
    clean.push_str(rest);
    clean.into_bytes()
}

/// The `height` of the root `<svg>` element, to size the iframe so it needs no scrollbar.
fn svg_height(svg: &[u8]) -> Option<u32> {
    let text = std::str::from_utf8(svg).ok()?;
    let root = &text[text.find("<svg")?..];
    let root = &root[..root.find('>')?];
    let value = &root[root.find(" height=\"")? + 9..];
    value[..value.find('"')?].parse().ok()
}

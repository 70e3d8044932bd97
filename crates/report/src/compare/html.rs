//! The comparison as one self-contained HTML page: no script, no external resource, a bar
//! per share so each board's hot spots stand out when the page is skimmed.

use std::io::Write;

use super::Compare;
use crate::html::escape::Esc;
use crate::Error;

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.3em}table{border-collapse:collapse}\
th,td{padding:.25em .6em;border-bottom:1px solid #ddd;text-align:right;vertical-align:top}th{vertical-align:bottom}\
th.fn,td.fn{text-align:left;font-family:monospace}\
th small{font-weight:normal;color:#555;display:block}\
.bar{height:.35em;background:#d9534f;margin-top:.15em}\
td.zero{color:#aaa}";

impl Compare {
    /// Writes the page: `limit` rows (0 = all), one column per capture with its board.
    pub fn write_html(&self, limit: usize, out: &mut dyn Write) -> Result<(), Error> {
        let w = Error::writing("writing the HTML comparison");
        self.write_page(limit, out).map_err(w)
    }

    fn write_page(&self, limit: usize, out: &mut dyn Write) -> std::io::Result<()> {
        writeln!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
             <title>kprof compare: {}</title><style>{STYLE}</style></head><body>",
            Esc(&self.event)
        )?;
        writeln!(
            out,
            "<h1>Top functions of {} captures, share of each capture's {} samples</h1>",
            self.columns.len(),
            Esc(&self.event)
        )?;
        writeln!(out, "<table><thead><tr>")?;
        for c in &self.columns {
            writeln!(
                out,
                "<th>{} ({})<small>{}</small><small>{} samples</small></th>",
                Esc(c.hostname.as_deref().unwrap_or("?")),
                Esc(c.arch.as_deref().unwrap_or("?")),
                Esc(&c.side.capture),
                c.side.total
            )?;
        }
        writeln!(out, "<th class=\"fn\">function</th></tr></thead><tbody>")?;
        let shown = if limit == 0 { self.rows.len() } else { limit };
        for row in self.rows.iter().take(shown) {
            write!(out, "<tr>")?;
            for (p, n) in row.percent.iter().zip(&row.samples) {
                let class = if *n == 0 { " class=\"zero\"" } else { "" };
                write!(
                    out,
                    "<td{class} title=\"{n} samples\">{p:.2}%<div class=\"bar\" \
                     style=\"width:{:.1}px\"></div></td>",
                    p.clamp(0.0, 100.0)
                )?;
            }
            writeln!(
                out,
                "<td class=\"fn\">{}:{}</td></tr>",
                Esc(&row.key.image),
                Esc(&row.key.function)
            )?;
        }
        writeln!(out, "</tbody></table>")?;
        if self.rows.len() > shown {
            writeln!(
                out,
                "<p>{} more functions with smaller shares (<code>--limit 0</code> shows all).</p>",
                self.rows.len() - shown
            )?;
        }
        writeln!(out, "</body></html>")
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::compare;

    /// Boards, captures and names are escaped; a column per capture, no script.
    #[test]
    fn compare_html_fixture_escaped_columns() {
        let mut c = compare();
        c.columns[1].hostname = Some("<b>imx8</b>".to_owned());
        let mut out = Vec::new();
        c.write_html(0, &mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(page.contains("&lt;b&gt;imx8&lt;/b&gt; (aarch64)"), "{page}");
        assert!(!page.contains("<script"), "{page}");
        let row = page
            .lines()
            .find(|l| l.contains("mychardrv.ko:mychardrv_checksum"))
            .unwrap();
        assert_eq!(row.matches("<td title=").count(), 2, "{row}");
        assert!(
            row.starts_with("<tr><td title=\"25 samples\">25.00%"),
            "{row}"
        );
    }
}

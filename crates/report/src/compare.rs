//! The comparison behind `kprofctl compare CAPTURE CAPTURE...`: the top functions of several
//! captures side by side, typically one capture per board of a lab run.
//!
//! Functions are matched as [`diff`](crate::diff) matches them (image name and function name,
//! since addresses differ between boards and builds) and shown by their share of each
//! capture's own samples of one event. A row is a function sampled in any capture; rows come
//! by their largest share in any capture, so each board's hot spots are near the top.

use std::io::Write;
use std::path::Path;

use kprof_symbols::profile::Profile;
use serde_json::json;

use crate::diff::{Key, Side};
use crate::json::two_decimals;
use crate::Error;

mod html;

/// One capture's column: its self samples per function and the board it came from.
#[derive(Debug, Clone)]
pub struct Column {
    /// The samples per function and the 100 %.
    pub side: Side,
    /// The board's host name from the manifest or perf.data header, if recorded.
    pub hostname: Option<String>,
    /// The board's architecture (`aarch64`, `x86_64`), if recorded.
    pub arch: Option<String>,
}

impl Column {
    /// Self samples of event `event` per function of `profile`, read from `path`.
    pub fn new(path: &Path, profile: &Profile, event: &str) -> Result<Column, Error> {
        Ok(Column {
            side: Side::new(path, profile, event)?,
            hostname: profile.meta.hostname.clone(),
            arch: profile.meta.arch.clone(),
        })
    }

    fn percent(&self, samples: u64) -> f64 {
        if self.side.total == 0 {
            0.0
        } else {
            samples as f64 * 100.0 / self.side.total as f64
        }
    }

    /// `hostname (arch)`, with `?` for what the capture does not say.
    fn board(&self) -> String {
        format!(
            "{} ({})",
            self.hostname.as_deref().unwrap_or("?"),
            self.arch.as_deref().unwrap_or("?")
        )
    }
}

/// One function across the captures.
#[derive(Debug, Clone)]
pub struct Row {
    /// The function.
    pub key: Key,
    /// Self samples per capture, in the order of [`Compare::columns`].
    pub samples: Vec<u64>,
    /// Share of each capture's samples of the event, in the same order.
    pub percent: Vec<f64>,
}

impl Row {
    /// The largest share in any capture: the sort key.
    pub fn max_percent(&self) -> f64 {
        self.percent.iter().copied().fold(0.0, f64::max)
    }
}

/// The captures side by side.
#[derive(Debug, Clone)]
pub struct Compare {
    /// The compared event.
    pub event: String,
    /// One column per capture, in the order given.
    pub columns: Vec<Column>,
    /// Largest share in any capture first.
    pub rows: Vec<Row>,
}

impl Compare {
    /// Puts the columns of event `event` side by side.
    pub fn compute(event: &str, columns: Vec<Column>) -> Compare {
        let mut keys: Vec<&Key> = columns.iter().flat_map(|c| c.side.samples.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut rows: Vec<Row> = keys
            .into_iter()
            .map(|key| {
                let samples: Vec<u64> = columns
                    .iter()
                    .map(|c| c.side.samples.get(key).copied().unwrap_or(0))
                    .collect();
                let percent = columns
                    .iter()
                    .zip(&samples)
                    .map(|(c, &n)| c.percent(n))
                    .collect();
                Row {
                    key: key.clone(),
                    samples,
                    percent,
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.max_percent()
                .total_cmp(&a.max_percent())
                .then_with(|| a.key.cmp(&b.key))
        });
        Compare {
            event: event.to_owned(),
            columns,
            rows,
        }
    }

    /// Writes the table for a terminal: `limit` rows (0 = all), one column per capture.
    pub fn write_text(&self, limit: usize, out: &mut dyn Write) -> Result<(), Error> {
        // Names come from the boards and from binaries: no raw control characters.
        let mut out = crate::escape::Escaping::new(out);
        let out: &mut dyn Write = &mut out;
        for (i, c) in self.columns.iter().enumerate() {
            writeln!(
                out,
                "#{}: {}  {}  {} samples of {}",
                i + 1,
                c.side.capture,
                c.board(),
                c.side.total,
                self.event
            )?;
        }
        writeln!(out)?;
        for i in 0..self.columns.len() {
            write!(out, "{:>9} ", format!("#{} %", i + 1))?;
        }
        writeln!(out, " FUNCTION")?;
        let shown = if limit == 0 { self.rows.len() } else { limit };
        for row in self.rows.iter().take(shown) {
            for p in &row.percent {
                write!(out, "{:>8.2}% ", p)?;
            }
            writeln!(out, " {}:{}", row.key.image, row.key.function)?;
        }
        if self.rows.len() > shown {
            writeln!(
                out,
                "... {} more functions with smaller shares (--limit 0 shows all)",
                self.rows.len() - shown
            )?;
        }
        Ok(())
    }

    /// The JSON document (schema `kprof-compare`, version 1, in docs/formats.md): the first
    /// `limit` rows (0 = all).
    pub fn to_json(&self, limit: usize) -> serde_json::Value {
        let shown = if limit == 0 { self.rows.len() } else { limit };
        let captures: Vec<serde_json::Value> = self
            .columns
            .iter()
            .map(|c| {
                json!({
                    "capture": c.side.capture,
                    "hostname": c.hostname,
                    "arch": c.arch,
                    "samples": c.side.total,
                })
            })
            .collect();
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .take(shown)
            .map(|r| {
                let shares: Vec<serde_json::Value> = r
                    .samples
                    .iter()
                    .zip(&r.percent)
                    .map(|(n, p)| json!({ "samples": n, "percent": two_decimals(*p) }))
                    .collect();
                json!({
                    "image": r.key.image,
                    "symbol": r.key.function,
                    "captures": shares,
                })
            })
            .collect();
        json!({
            "schema": "kprof-compare",
            "version": 1,
            "event": self.event,
            "captures": captures,
            "functions": rows,
            "more_functions": self.rows.len() - shown.min(self.rows.len()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture;

    /// The fixture with the driver's checksum hotter than the app's loop, on another board.
    fn other_board() -> Profile {
        let mut p = fixture::profile();
        p.stacks[0].counts = vec![10, 2];
        p.stacks[2].counts = vec![80, 3];
        p.meta.hostname = Some("imx8-2".to_owned());
        p.meta.arch = Some("aarch64".to_owned());
        p
    }

    pub(super) fn compare() -> Compare {
        let a = Column::new(Path::new("x86.kprof"), &fixture::profile(), "cpu-clock").unwrap();
        let b = Column::new(Path::new("arm.kprof"), &other_board(), "cpu-clock").unwrap();
        Compare::compute("cpu-clock", vec![a, b])
    }

    /// Rows come by the largest share in any capture, each share of its own capture's total.
    #[test]
    fn compare_fixture_sorted_by_max_share() {
        let c = compare();
        let names: Vec<&str> = c.rows.iter().map(|r| r.key.function.as_str()).collect();
        assert_eq!(names[..2], ["mychardrv_checksum", "compute"]);
        let total_b = c.columns[1].side.total as f64;
        assert_eq!(c.rows[0].samples, [25, 80]);
        assert!((c.rows[0].percent[1] - 8000.0 / total_b).abs() < 1e-9);
        assert!((c.rows[1].percent[0] - 70.0).abs() < 1e-9);
    }

    /// The text table has a header line per capture with its board, and one column each.
    #[test]
    fn compare_text_fixture_columns() {
        let mut out = Vec::new();
        compare().write_text(1, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("#2: arm.kprof  imx8-2 (aarch64)  "), "{text}");
        let row = text
            .lines()
            .find(|l| l.ends_with("mychardrv.ko:mychardrv_checksum"))
            .unwrap();
        assert_eq!(row.matches('%').count(), 2, "{row}");
        assert!(row.starts_with("   25.00% "), "{row}");
        assert!(text.contains("... 2 more functions"), "{text}");
    }

    /// JSON carries the schema tag, the boards, and a share per capture in each row.
    #[test]
    fn compare_json_fixture_fields() {
        let v = compare().to_json(2);
        assert_eq!(v["schema"], "kprof-compare");
        assert_eq!(v["version"], 1);
        assert_eq!(v["captures"][1]["hostname"], "imx8-2");
        assert_eq!(v["captures"][1]["arch"], "aarch64");
        assert_eq!(v["functions"].as_array().unwrap().len(), 2);
        assert_eq!(v["functions"][0]["symbol"], "mychardrv_checksum");
        assert_eq!(v["functions"][0]["captures"][0]["samples"], 25);
        assert_eq!(v["functions"][0]["captures"][1]["samples"], 80);
        assert_eq!(v["more_functions"], 1);
    }

    /// Shares have two decimals, as in the report's and the diff's JSON (80 of 105 is 76.19 %).
    #[test]
    fn compare_json_fixture_percents_two_decimals() {
        let v = compare().to_json(2);
        let total_b = compare().columns[1].side.total;
        assert_eq!(total_b, 105);
        assert_eq!(v["functions"][0]["captures"][1]["percent"], 76.19);
        assert_eq!(v["functions"][0]["captures"][0]["percent"], 25.0);
    }
}

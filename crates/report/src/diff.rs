//! The comparison behind `kprofctl diff BASE NEW`: per-function change between two profiles.
//!
//! Functions are matched by image name and function name (addresses move between builds),
//! compared by their share of all samples of one event (captures differ in length), and
//! listed by the size of the change in percentage points. Functions only in NEW are `new`,
//! only in BASE `vanished`.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use kprof_symbols::profile::Profile;
use kprof_symbols::views::{self, Filter};
use serde_json::json;

use crate::json::two_decimals;
use crate::Error;

/// A function as matched between captures.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    /// The image name (`vmlinux`, `mychardrv.ko`, `libc.so.6`).
    pub image: String,
    /// The function name, `[unknown]` for an address without a symbol.
    pub function: String,
}

/// One capture's view: self samples of the compared event per function.
#[derive(Debug, Clone)]
pub struct Side {
    /// The capture, as shown in the output.
    pub capture: String,
    /// Samples of the event in the capture's stacks: the 100 %.
    pub total: u64,
    /// Self samples per function.
    pub samples: HashMap<Key, u64>,
}

impl Side {
    /// Self samples of event `event` per function of `profile`.
    pub fn new(path: &Path, profile: &Profile, event: &str) -> Result<Side, Error> {
        let Some(index) = profile.events.iter().position(|e| e.name == event) else {
            return Err(Error::EventNotInCapture {
                capture: path.display().to_string(),
                event: event.to_owned(),
                events: profile.events.iter().map(|e| e.name.clone()).collect(),
            });
        };
        let all = Filter::default();
        let mut samples = HashMap::new();
        for row in views::functions(profile, &all) {
            let n = row.samples.get(index).copied().unwrap_or(0);
            if n == 0 {
                continue;
            }
            let f = &profile.functions[row.function];
            let key = Key {
                image: profile
                    .images
                    .get(f.image)
                    .map_or_else(|| "[unknown]".to_owned(), |i| i.name.clone()),
                function: f.name.clone().unwrap_or_else(|| "[unknown]".to_owned()),
            };
            *samples.entry(key).or_insert(0) += n;
        }
        Ok(Side {
            capture: path.display().to_string(),
            total: views::totals(profile, &all)
                .get(index)
                .copied()
                .unwrap_or(0),
            samples,
        })
    }

    fn percent(&self, samples: u64) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            samples as f64 * 100.0 / self.total as f64
        }
    }
}

/// How a function changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Sampled in both captures.
    Changed,
    /// Sampled only in NEW.
    New,
    /// Sampled only in BASE.
    Vanished,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Changed => "changed",
            Status::New => "new",
            Status::Vanished => "vanished",
        }
    }
}

/// One function's change.
#[derive(Debug, Clone)]
pub struct Row {
    /// The function.
    pub key: Key,
    /// Self samples in BASE.
    pub base_samples: u64,
    /// Self samples in NEW.
    pub new_samples: u64,
    /// Share of BASE's samples of the event.
    pub base_percent: f64,
    /// Share of NEW's samples of the event.
    pub new_percent: f64,
    /// `new_percent - base_percent`, in percentage points.
    pub delta: f64,
    /// How it changed.
    pub status: Status,
}

/// The comparison of two captures.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The compared event.
    pub event: String,
    /// The reference capture.
    pub base: Side,
    /// The capture compared with it.
    pub new: Side,
    /// Largest |delta| first.
    pub rows: Vec<Row>,
}

impl Diff {
    /// Compares the sides of event `event`.
    pub fn compute(event: &str, base: Side, new: Side) -> Diff {
        let mut keys: Vec<&Key> = base.samples.keys().chain(new.samples.keys()).collect();
        keys.sort();
        keys.dedup();
        let mut rows: Vec<Row> = keys
            .into_iter()
            .map(|key| {
                let b = base.samples.get(key).copied().unwrap_or(0);
                let n = new.samples.get(key).copied().unwrap_or(0);
                let (bp, np) = (base.percent(b), new.percent(n));
                Row {
                    key: key.clone(),
                    base_samples: b,
                    new_samples: n,
                    base_percent: bp,
                    new_percent: np,
                    delta: np - bp,
                    status: match (b, n) {
                        (0, _) => Status::New,
                        (_, 0) => Status::Vanished,
                        _ => Status::Changed,
                    },
                }
            })
            .collect();
        rows.sort_by(|a, b| {
            b.delta
                .abs()
                .total_cmp(&a.delta.abs())
                .then_with(|| a.key.cmp(&b.key))
        });
        Diff {
            event: event.to_owned(),
            base,
            new,
            rows,
        }
    }

    /// Writes the table for a terminal: `limit` rows (0 = all), largest change first.
    pub fn write_text(&self, limit: usize, out: &mut dyn Write) -> Result<(), Error> {
        // Names come from the board and from binaries: no raw control characters to the terminal.
        let mut out = crate::escape::Escaping::new(out);
        let out: &mut dyn Write = &mut out;
        writeln!(
            out,
            "base: {}  {} samples of {}",
            self.base.capture, self.base.total, self.event
        )?;
        writeln!(
            out,
            "new:  {}  {} samples of {}",
            self.new.capture, self.new.total, self.event
        )?;
        let count = |s: Status| self.rows.iter().filter(|r| r.status == s).count();
        writeln!(
            out,
            "{} functions in both, {} new, {} vanished\n",
            count(Status::Changed),
            count(Status::New),
            count(Status::Vanished)
        )?;
        writeln!(
            out,
            "{:>9} {:>8} {:>8} {:>9} {:>9}  {:<8}  FUNCTION",
            "DELTA pp", "BASE %", "NEW %", "BASE", "NEW", "STATUS"
        )?;
        let shown = if limit == 0 { self.rows.len() } else { limit };
        for row in self.rows.iter().take(shown) {
            writeln!(
                out,
                "{:>+9.2} {:>7.2}% {:>7.2}% {:>9} {:>9}  {:<8}  {}:{}",
                row.delta,
                row.base_percent,
                row.new_percent,
                row.base_samples,
                row.new_samples,
                row.status.name(),
                row.key.image,
                row.key.function
            )?;
        }
        if self.rows.len() > shown {
            writeln!(
                out,
                "... {} more functions with smaller changes (--limit 0 shows all)",
                self.rows.len() - shown
            )?;
        }
        Ok(())
    }

    /// The JSON document (schema `kprof-diff`, version 1, in docs/formats.md).
    pub fn to_json(&self) -> serde_json::Value {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                json!({
                    "image": r.key.image,
                    "symbol": r.key.function,
                    "base": { "samples": r.base_samples, "percent": two_decimals(r.base_percent) },
                    "new": { "samples": r.new_samples, "percent": two_decimals(r.new_percent) },
                    "delta_pp": two_decimals(r.delta),
                    "status": r.status.name(),
                })
            })
            .collect();
        let named = |s: Status| -> Vec<serde_json::Value> {
            self.rows
                .iter()
                .filter(|r| r.status == s)
                .map(|r| json!({ "image": r.key.image, "symbol": r.key.function }))
                .collect()
        };
        json!({
            "schema": "kprof-diff",
            "version": 1,
            "event": self.event,
            "base": { "capture": self.base.capture, "samples": self.base.total },
            "new": { "capture": self.new.capture, "samples": self.new.total },
            "functions": rows,
            "new_functions": named(Status::New),
            "vanished_functions": named(Status::Vanished),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture;
    use kprof_symbols::profile::{Frame, Function, Stack};

    /// The fixture after a change: the hot loop got faster (60 -> 20 samples), the driver's
    /// checksum slower (25 -> 65), the unnamed libc code is gone and `log_stats` is new.
    fn changed() -> Profile {
        let mut p = fixture::profile();
        p.stacks[0].counts = vec![20, 2];
        p.stacks[2].counts = vec![65, 3];
        p.stacks.remove(3);
        p.functions.push(Function {
            image: fixture::APP,
            name: Some("log_stats".to_owned()),
            start: 0x1400,
            size: Some(0x20),
            file: None,
            line: None,
        });
        p.frames.push(Frame {
            function: p.functions.len() - 1,
            address: 0x1404,
            file: None,
            line: None,
            inlined: false,
        });
        let frames = vec![
            p.frames.len() - 1,
            p.stacks[1].frames[1],
            p.stacks[1].frames[2],
        ];
        p.stacks.push(Stack {
            frames,
            thread: 0,
            counts: vec![15, 0],
            periods: vec![15, 0],
        });
        p
    }

    fn diff() -> Diff {
        let base = Side::new(Path::new("base.data"), &fixture::profile(), "cpu-clock").unwrap();
        let new = Side::new(Path::new("new.data"), &changed(), "cpu-clock").unwrap();
        Diff::compute("cpu-clock", base, new)
    }

    /// Rows come largest change first, with shares of each capture's own total.
    #[test]
    fn diff_fixture_sorted_by_delta() {
        let d = diff();
        assert_eq!((d.base.total, d.new.total), (100, 110));
        let names: Vec<(&str, Status)> = d
            .rows
            .iter()
            .map(|r| (r.key.function.as_str(), r.status))
            .collect();
        assert_eq!(
            names,
            [
                ("compute", Status::Changed),
                ("mychardrv_checksum", Status::Changed),
                ("log_stats", Status::New),
                ("[unknown]", Status::Vanished),
            ]
        );
        let checksum = &d.rows[1];
        assert_eq!((checksum.base_samples, checksum.new_samples), (25, 65));
        assert!((checksum.delta - (65.0 / 1.1 - 25.0)).abs() < 1e-9);
        assert!((d.rows[3].delta + 5.0).abs() < 1e-9);
    }

    /// The text table names both captures, counts new and vanished functions, and marks rows.
    #[test]
    fn diff_text_fixture_table() {
        let mut out = Vec::new();
        diff().write_text(0, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("base: base.data  100 samples of cpu-clock\nnew:  new.data  110 samples of cpu-clock\n"), "{text}");
        assert!(
            text.contains("2 functions in both, 1 new, 1 vanished"),
            "{text}"
        );
        let rows: Vec<&str> = text.lines().skip(5).take(2).collect();
        assert_eq!(
            rows,
            [
                "   -42.73   70.00%   27.27%        70        30  changed   app:compute",
                "   +34.09   25.00%   59.09%        25        65  changed   mychardrv.ko:mychardrv_checksum"
            ]
        );
        assert!(text.contains("new       app:log_stats"), "{text}");
        assert!(text.contains("vanished  libc.so.6:[unknown]"), "{text}");
        let mut out = Vec::new();
        diff().write_text(1, &mut out).unwrap();
        assert!(String::from_utf8(out)
            .unwrap()
            .contains("... 3 more functions"));
    }

    /// JSON carries the schema tag, every row, and the new and vanished lists.
    #[test]
    fn diff_json_fixture_fields() {
        let v = diff().to_json();
        assert_eq!(v["schema"], "kprof-diff");
        assert_eq!(v["version"], 1);
        assert_eq!(v["event"], "cpu-clock");
        assert_eq!(v["functions"].as_array().unwrap().len(), 4);
        assert_eq!(v["functions"][0]["symbol"], "compute");
        assert_eq!(v["functions"][0]["base"]["samples"], 70);
        assert_eq!(v["functions"][0]["new"]["samples"], 30);
        assert_eq!(v["functions"][0]["status"], "changed");
    }

    /// Shares and deltas have two decimals, as in docs/formats.md (30 of 110 is 27.27 %).
    #[test]
    fn diff_json_fixture_percents_two_decimals() {
        let v = diff().to_json();
        let row = &v["functions"][0];
        assert_eq!(row["base"]["percent"], 70.0);
        assert_eq!(row["new"]["percent"], 27.27);
        assert_eq!(row["delta_pp"], -42.73);
        assert_eq!(v["functions"][1]["new"]["percent"], 59.09);
        assert_eq!(
            v["new_functions"],
            json!([{ "image": "app", "symbol": "log_stats" }])
        );
        assert_eq!(
            v["vanished_functions"],
            json!([{ "image": "libc.so.6", "symbol": "[unknown]" }])
        );
    }

    /// An event missing from one capture is named with the capture and what it has.
    #[test]
    fn diff_missing_event_fails_clearly() {
        let err = Side::new(Path::new("new.data"), &changed(), "cycles").unwrap_err();
        assert_eq!(
            err.to_string(),
            "new.data: event \"cycles\" is not in the capture; it has: cpu-clock, page-faults \
             (--event picks one every capture has; boards whose default events differ need \
             the same -e when recording)"
        );
    }
}

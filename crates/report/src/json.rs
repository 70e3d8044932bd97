//! `--format json`: the versioned report schema of docs/json-schema.md.
//!
//! Bump [`VERSION`] on any change a consumer of the previous version would misread; adding
//! fields is not such a change.

use kprof_symbols::annotate::Annotation;
use kprof_symbols::profile::{MarkerKind, Profile, SymbolSource};
use kprof_symbols::views::{self, CallNode, Direction, Filter};
use serde_json::{json, Value};
use std::io::Write;

use crate::Error;

/// `schema` of every JSON report.
pub const SCHEMA: &str = "kprof-report";
/// `version` of the schema written.
pub const VERSION: u32 = 3;

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        two_decimals(n as f64 * 100.0 / total as f64)
    }
}

/// A percentage as every kprof JSON document writes it: two decimals are plenty, keep the
/// output stable to diff, and the exact value follows from the samples and totals beside it.
pub(crate) fn two_decimals(percent: f64) -> f64 {
    (percent * 100.0).round() / 100.0
}

fn symbols(s: &SymbolSource) -> Value {
    match s {
        SymbolSource::BuildId { path, origin } => {
            json!({"status": "build-id", "path": path, "origin": origin})
        }
        SymbolSource::Unverified { path } => {
            json!({"status": "unverified", "path": path, "why": "no build-id recorded"})
        }
        SymbolSource::Mismatch {
            path,
            expected,
            found,
            kallsyms,
        } => {
            json!({"status": "mismatch", "path": path, "expected": expected, "found": found,
                   "kallsyms": kallsyms})
        }
        SymbolSource::Kallsyms => json!({"status": "kallsyms"}),
        SymbolSource::Missing { why } => json!({"status": "missing", "why": why}),
    }
}

fn function_ref(p: &Profile, f: usize) -> Value {
    let func = &p.functions[f];
    json!({
        "image": p.images[func.image].name,
        "symbol": func.name.as_deref().unwrap_or("[unknown]"),
    })
}

/// The parts every report has: schema, capture, events, images, warnings.
pub(crate) fn base(p: &Profile) -> serde_json::Map<String, Value> {
    let all = Filter::default();
    let totals = views::totals(p, &all);
    let mut m = serde_json::Map::new();
    m.insert("schema".into(), json!(SCHEMA));
    m.insert("version".into(), json!(VERSION));
    m.insert(
        "capture".into(),
        json!({
            "path": p.meta.capture,
            "hostname": p.meta.hostname,
            "os_release": p.meta.os_release,
            "arch": p.meta.arch,
            "command": p.meta.command,
            "lost_samples": p.meta.lost_samples,
            "start_ns": p.meta.start_ns,
            "duration_ns": p.meta.duration_ns,
        }),
    );
    m.insert(
        "window".into(),
        match &p.meta.window {
            Some(w) => json!({"start_ns": w.start, "end_ns": w.end}),
            None => Value::Null,
        },
    );
    m.insert(
        "events".into(),
        p.events
            .iter()
            .zip(&totals)
            .map(|(e, t)| json!({"name": e.name, "samples": t, "total_samples": e.total_samples, "total_period": e.total_period, "period_known": e.period_known}))
            .collect(),
    );
    let t0 = totals.first().copied().unwrap_or(0);
    m.insert(
        "images".into(),
        views::images(p, &all)
            .iter()
            .map(|r| {
                let img = &p.images[r.image];
                json!({
                    "name": img.name,
                    "path": img.recorded_path,
                    "build_id": img.build_id,
                    "kernel": img.kernel,
                    "symbols": symbols(&img.symbols),
                    "samples": r.samples.first().copied().unwrap_or(0),
                    "percent": pct(r.samples.first().copied().unwrap_or(0), t0),
                    "counts": r.samples,
                })
            })
            .collect(),
    );
    m.insert("warnings".into(), json!(p.warnings));
    // Present whenever the capture has marks, even when none is in the window.
    let has_marks = p
        .meta
        .markers
        .iter()
        .any(|m| matches!(m.kind, MarkerKind::Mark(_)));
    if has_marks {
        let marks = crate::marks::listed(p);
        m.insert(
            "markers".into(),
            marks.iter().map(crate::marks::to_json).collect(),
        );
    }
    m
}

/// `--markers`: the parts every report has, with `markers` always present.
pub fn write_markers(p: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    let mut m = base(p);
    m.entry("markers").or_insert_with(|| json!([]));
    finish(m, out)
}

pub(crate) fn finish(m: serde_json::Map<String, Value>, out: &mut dyn Write) -> Result<(), Error> {
    let text = serde_json::to_string_pretty(&Value::Object(m))?;
    writeln!(out, "{}", crate::escape::json_c1(&text))?;
    Ok(())
}

/// The functions view: every function with self samples, most first.
pub fn write_functions(
    p: &Profile,
    ratio: Option<(usize, usize)>,
    out: &mut dyn Write,
) -> Result<(), Error> {
    let mut m = base(p);
    let all = Filter::default();
    let totals = views::totals(p, &all);
    let t0 = totals.first().copied().unwrap_or(0);
    let ratio_unknown = ratio.and_then(|(a, b)| views::ratio_unknown(p, a, b));
    // Event counts per event, `null` where the samples' periods are unknown.
    let periods = |row: &[u64]| -> Vec<Option<u64>> {
        row.iter()
            .zip(&p.events)
            .map(|(n, e)| e.period_known.then_some(*n))
            .collect()
    };
    let funcs: Vec<Value> = views::functions(p, &all)
        .iter()
        .map(|r| {
            let f = &p.functions[r.function];
            let n = r.samples.first().copied().unwrap_or(0);
            let source = match (&f.file, f.line) {
                (Some(file), Some(line)) => json!({"file": file, "line": line}),
                _ => Value::Null,
            };
            let mut v = json!({
                "image": p.images[f.image].name,
                "symbol": f.name.as_deref().unwrap_or("[unknown]"),
                "samples": n,
                "percent": pct(n, t0),
                "source": source,
                "hot_line": r.hot_line.as_ref().map(|h| json!({"file": h.file, "line": h.line, "samples": h.samples})),
                "address": format!("{:#x}", f.start),
                "counts": r.samples,
                "periods": periods(&r.periods),
            });
            if let Some((a, b)) = ratio {
                v["ratio"] = match ratio_unknown {
                    Some(_) => Value::Null,
                    None => json!(views::ratio(r.periods[a], r.periods[b])),
                };
            }
            v
        })
        .collect();
    if let Some((a, b)) = ratio {
        let (na, nb) = (&p.events[a].name, &p.events[b].name);
        m.insert("ratio".into(), json!(format!("{na}/{nb}")));
        m.insert(
            "ratio_of".into(),
            json!("event counts, sample-weighted (summed sample periods)"),
        );
        let (ta, tb) = (
            views::count_total(p, &all, a),
            views::count_total(p, &all, b),
        );
        m.insert(
            "ratio_total".into(),
            match &ratio_unknown {
                Some(_) => Value::Null,
                None => json!(views::ratio(ta, tb)),
            },
        );
        if let Some(why) = ratio_unknown {
            m.insert("ratio_unknown".into(), json!(why));
        }
    }
    m.insert("functions".into(), Value::Array(funcs));
    finish(m, out)
}

/// `--callers` / `--callees` as a nested tree.
pub fn write_tree(
    p: &Profile,
    root: &CallNode,
    dir: Direction,
    out: &mut dyn Write,
) -> Result<(), Error> {
    fn node(p: &Profile, n: &CallNode, total: u64) -> Value {
        let mut v = function_ref(p, n.function);
        v["samples"] = json!(n.samples);
        v["percent"] = json!(pct(n.samples, total));
        v["kernel"] = json!(p.images[p.functions[n.function].image].kernel);
        v["sites"] = n
            .sites
            .iter()
            .map(|s| json!({"file": s.file, "line": s.line, "samples": s.samples}))
            .collect();
        v["children"] = n.children.iter().map(|c| node(p, c, total)).collect();
        v
    }
    let mut m = base(p);
    m.insert(
        "direction".into(),
        json!(match dir {
            Direction::Callers => "callers",
            Direction::Callees => "callees",
        }),
    );
    m.insert("tree".into(), node(p, root, root.samples));
    if dir == Direction::Callers && p.meta.call_chains == Some(false) {
        m.insert("note".into(), json!(crate::text::NO_CALL_CHAINS));
    }
    finish(m, out)
}

/// `--annotate`: source lines and instructions with counts per event.
pub fn write_annotation(
    p: &Profile,
    anns: &[Annotation],
    out: &mut dyn Write,
) -> Result<(), Error> {
    let mut m = base(p);
    if let Some(a) = anns.first() {
        let lines: Vec<Value> = a
            .lines
            .iter()
            .enumerate()
            .map(|(i, l)| {
                json!({
                    "file": l.file, "line": l.line, "text": l.text,
                    "counts": anns.iter().map(|x| x.lines.get(i).map_or(0, |y| y.samples)).collect::<Vec<_>>(),
                })
            })
            .collect();
        let insns: Vec<Value> = a
            .instructions
            .iter()
            .enumerate()
            .map(|(i, x)| {
                json!({
                    "address": format!("{:#x}", x.address),
                    "bytes": x.bytes.iter().map(|b| format!("{b:02x}")).collect::<String>(),
                    "text": x.text, "file": x.file, "line": x.line,
                    "counts": anns.iter().map(|y| y.instructions.get(i).map_or(0, |z| z.samples)).collect::<Vec<_>>(),
                })
            })
            .collect();
        m.insert(
            "annotation".into(),
            json!({
                "image": a.image, "symbol": a.function,
                "address": format!("{:#x}", a.start), "size": a.size,
                "totals": anns.iter().map(|x| x.total).collect::<Vec<_>>(),
                "lines": lines, "instructions": insns, "notes": a.warnings,
            }),
        );
    }
    finish(m, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture;

    fn functions(p: &Profile) -> Value {
        let mut out = Vec::new();
        write_functions(p, Some((0, 1)), &mut out).unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    /// The JSON carries the count ratio per function and in total, and each function's
    /// summed periods next to its sample counts.
    #[test]
    fn write_functions_json_ratio_and_periods() {
        let v = functions(&fixture::profile());
        assert_eq!(v["ratio"], "cpu-clock/page-faults");
        assert_eq!(v["ratio_total"], 1e7);
        let compute = v["functions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["symbol"] == "compute")
            .unwrap();
        assert_eq!(compute["counts"], json!([70, 7]));
        assert_eq!(compute["periods"], json!([70_000_000u64, 7]));
        assert_eq!(compute["ratio"], 1e7);
        assert!(v.get("ratio_unknown").is_none());
    }

    /// Unknown periods give `null` ratios and periods, and the reason.
    #[test]
    fn write_functions_json_ratio_unknown_null() {
        let mut p = fixture::profile();
        p.events[0].period_known = false;
        let v = functions(&p);
        assert_eq!(v["ratio_total"], Value::Null);
        assert_eq!(v["functions"][0]["ratio"], Value::Null);
        assert_eq!(v["functions"][0]["periods"][0], Value::Null);
        assert!(v["ratio_unknown"].as_str().unwrap().contains("cpu-clock"));
    }
}

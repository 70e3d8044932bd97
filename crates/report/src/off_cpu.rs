//! `report --off-cpu` in text and JSON: where threads blocked and for how long, by function
//! (inclusive) and by call path, in ms and % of the blocked threads' wall time, split by
//! task state (S sleeping, D uninterruptible).

use kprof_symbols::off_cpu::{self, Blocked};
use kprof_symbols::profile::Profile;
use kprof_symbols::views::Filter;
use serde_json::{json, Value};
use std::io::Write;

use crate::text::function_name;
use crate::Error;

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn pct(n: u64, total: u64) -> f64 {
    if total == 0 {
        0.0
    } else {
        (n as f64 * 10000.0 / total as f64).round() / 100.0
    }
}

/// `image:function` of every frame of stack `s`, leaf first.
fn path_names(p: &Profile, s: usize) -> Vec<(String, String)> {
    p.stacks[s]
        .frames
        .iter()
        .map(|fr| {
            let f = p.frames[*fr].function;
            (
                p.images[p.functions[f].image].name.clone(),
                function_name(p, f),
            )
        })
        .collect()
}

fn state(b: &Blocked) -> &'static str {
    match (b.sleeping_ns > 0, b.uninterruptible_ns > 0) {
        (true, true) => "S+D",
        (false, true) => "D",
        _ => "S",
    }
}

/// The off-CPU text report: totals, functions by blocked time, then the top call paths.
pub fn write_text(p: &Profile, limit: usize, out: &mut dyn Write) -> Result<(), Error> {
    // Names come from the board and from binaries: no raw control characters to the terminal.
    let mut out = crate::escape::Escaping::new(out);
    let out: &mut dyn Write = &mut out;
    let all = Filter::default();
    let total = off_cpu::total(p, &all);
    let wall = total.wall_ns;
    writeln!(out, "Capture: {}", p.meta.capture)?;
    if let Some(w) = &p.meta.window {
        writeln!(out, "Window:  {} (switch-outs in it)", w.describe())?;
    }
    let off = p.off_cpu.clone().unwrap_or_default();
    writeln!(
        out,
        "Off-CPU: {:.1} ms blocked (S {:.1} ms, D {:.1} ms) in {} switch-outs of {} context switches; \
         {:.1} % of the blocked threads' wall time ({:.1} ms)",
        ms(total.total_ns()),
        ms(total.sleeping_ns),
        ms(total.uninterruptible_ns),
        total.count,
        off.switches,
        pct(total.total_ns(), wall),
        ms(wall)
    )?;
    if p.meta.lost_samples > 0 {
        writeln!(
            out,
            "Lost:    {} events (context switches among them are missing: blocked time is low)",
            p.meta.lost_samples
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "Functions by blocked time (every function on the path it blocked under):"
    )?;
    writeln!(
        out,
        "{:>11} {:>7} {:>10} {:>10} {:>6}  function  (% wall: of the wall time of the threads that blocked there)",
        "blocked ms", "% wall", "S ms", "D ms", "times"
    )?;
    for (f, b) in off_cpu::functions(p, &all).iter().take(limit) {
        let img = &p.images[p.functions[*f].image].name;
        writeln!(
            out,
            "{:>11.1} {:>7.2} {:>10.1} {:>10.1} {:>6}  {img}:{}",
            ms(b.total_ns()),
            pct(b.total_ns(), b.wall_ns),
            ms(b.sleeping_ns),
            ms(b.uninterruptible_ns),
            b.count,
            function_name(p, *f)
        )?;
    }
    writeln!(out)?;
    writeln!(out, "Call paths by blocked time (leaf first):")?;
    for (s, b) in off_cpu::paths(p, &all).iter().take(limit.min(20)) {
        let t = &p.threads[p.stacks[*s].thread];
        writeln!(
            out,
            "{:>9.1} ms {:>6.2} %  {} x{}  {}[{}]",
            ms(b.total_ns()),
            pct(b.total_ns(), b.wall_ns),
            state(b),
            b.count,
            t.comm,
            t.tid
        )?;
        let names: Vec<String> = path_names(p, *s).into_iter().map(|(_, f)| f).collect();
        writeln!(out, "    {}", names.join(" ← "))?;
    }
    Ok(())
}

fn blocked_json(b: &Blocked) -> serde_json::Map<String, Value> {
    let mut m = serde_json::Map::new();
    m.insert("blocked_ns".into(), json!(b.total_ns()));
    m.insert(
        "blocked_ms".into(),
        json!((ms(b.total_ns()) * 1000.0).round() / 1000.0),
    );
    m.insert(
        "percent_of_wall".into(),
        json!(pct(b.total_ns(), b.wall_ns)),
    );
    m.insert("wall_ns".into(), json!(b.wall_ns));
    m.insert("sleeping_ns".into(), json!(b.sleeping_ns));
    m.insert("uninterruptible_ns".into(), json!(b.uninterruptible_ns));
    m.insert("times".into(), json!(b.count));
    m
}

/// The off-CPU JSON report (docs/json-schema.md, `view: "off-cpu"`).
pub fn write_json(p: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    let all = Filter::default();
    let total = off_cpu::total(p, &all);
    let off = p.off_cpu.clone().unwrap_or_default();
    let mut m = crate::json::base(p);
    m.insert("view".into(), json!("off-cpu"));
    let mut summary = blocked_json(&total);
    summary.insert("switches".into(), json!(off.switches));
    summary.insert("unmatched".into(), json!(off.unmatched));
    summary.insert("missed_switch_ins".into(), json!(off.missed_switch_ins));
    summary.insert(
        "functions".into(),
        off_cpu::functions(p, &all)
            .iter()
            .map(|(f, b)| {
                let mut r = blocked_json(b);
                r.insert("image".into(), json!(p.images[p.functions[*f].image].name));
                r.insert("symbol".into(), json!(function_name(p, *f)));
                Value::Object(r)
            })
            .collect(),
    );
    summary.insert(
        "paths".into(),
        off_cpu::paths(p, &all)
            .iter()
            .map(|(s, b)| {
                let t = &p.threads[p.stacks[*s].thread];
                let mut r = blocked_json(b);
                r.insert("state".into(), json!(state(b)));
                r.insert(
                    "thread".into(),
                    json!({"pid": t.pid, "tid": t.tid, "comm": t.comm}),
                );
                r.insert(
                    "frames".into(),
                    path_names(p, *s)
                        .into_iter()
                        .map(|(i, f)| json!({"image": i, "symbol": f}))
                        .collect(),
                );
                Value::Object(r)
            })
            .collect(),
    );
    m.insert("off_cpu".into(), Value::Object(summary));
    crate::json::finish(m, out)
}

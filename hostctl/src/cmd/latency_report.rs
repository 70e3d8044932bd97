//! `report --latency` (`--contention`): the calls of the functions a capture timed and the
//! lock waits it recorded, in the `--time` window, of the threads `--pid`/`--comm` pick.

use super::report::{Format, ReportArgs};
use anyhow::Context as _;
use kprof_report as render;
use kprof_symbols::profile::Profile;
use std::io::Write as _;

/// Renders the latency view of `p`, or says why the capture has none.
pub fn run(args: &ReportArgs, mut p: Profile) -> anyhow::Result<()> {
    if p.latency.is_none() && p.contention.is_none() {
        anyhow::bail!(
            "{}: the capture timed no function and recorded no lock waits (record them with \
             `kprofctl run --latency FUNC` or `--contention`)",
            args.capture.display()
        );
    }
    if let Some(t) = args.window {
        p = kprof_symbols::views::into_time_window(p, t.start, t.end);
    }
    keep_threads(&mut p, args.pid, args.comm.as_deref());
    for w in &p.warnings {
        crate::term::warning(w);
    }
    let mut out = super::report::output(args)?;
    match args.format {
        Format::Text => render::latency::write_text(&p, args.slowest, &mut out)?,
        Format::Json => render::latency::write_json(&p, args.slowest, &mut out)?,
        other => anyhow::bail!(
            "--latency is text or json; --format {} shows the calls and waits on its own \
             timeline without --latency",
            format!("{other:?}").to_lowercase()
        ),
    }
    out.flush().context("writing the report")?;
    Ok(())
}

/// Keeps the calls and waits of the threads `pid` (a process or thread id) and `comm` name.
fn keep_threads(p: &mut Profile, pid: Option<i32>, comm: Option<&str>) {
    if pid.is_none() && comm.is_none() {
        return;
    }
    let keeps: Vec<bool> = p
        .stacks
        .iter()
        .map(|s| {
            let t = &p.threads[s.thread];
            pid.is_none_or(|x| t.pid == x || t.tid == x) && comm.is_none_or(|c| t.comm == c)
        })
        .collect();
    let kept = |stack: u32| keeps.get(stack as usize).copied().unwrap_or(false);
    if let Some(l) = &mut p.latency {
        for f in &mut l.functions {
            f.calls.retain(|c| kept(c.stack));
        }
    }
    if let Some(c) = &mut p.contention {
        c.waits.retain(|w| kept(w.stack));
    }
}

//! `kprofctl run T1 T2... -- CMD`: the same capture on several boards at once. Each board has
//! its own thread from connecting to the agent's end (so the captures overlap in time and a
//! slow or dead board holds up no other); then, one board after the other, each capture is
//! named, fetched and reported, and a summary says which boards failed and why. A board that
//! fails or drops off costs the others nothing.

use super::{capture, RunArgs, Streamed};
use crate::remote::echo::Echo;
use std::sync::Once;

pub fn run(args: &RunArgs) -> anyhow::Result<()> {
    check_distinct(&args.targets)?;
    let (group, lines) = crate::progress::board_lines(&args.targets);
    crate::term::draw_below(group);
    // Ctrl-C ends kprofctl until the first agent starts, then stops every capture (once the
    // first board starts, leaving would orphan its capture).
    let counting = Once::new();
    let starting = || counting.call_once(crate::remote::detached::count_interrupts);
    let streamed: Vec<anyhow::Result<Streamed>> = std::thread::scope(|scope| {
        let threads: Vec<_> = args
            .targets
            .iter()
            .zip(&lines)
            .map(|(spec, line)| {
                let starting = &starting;
                scope.spawn(move || {
                    line.set_message("connecting");
                    let echo = Echo::labelled(spec, line.clone());
                    let streamed = capture(spec, args, echo, starting);
                    line.finish_with_message(match &streamed {
                        Ok(_) => "capture ended",
                        Err(_) => "failed",
                    });
                    streamed
                })
            })
            .collect();
        threads
            .into_iter()
            .zip(&args.targets)
            .map(|(thread, spec)| {
                thread.join().unwrap_or_else(|_| {
                    Err(anyhow::anyhow!(
                        "{spec}: kprofctl's thread for this board failed"
                    ))
                })
            })
            .collect()
    });
    crate::term::draw_below(None);
    crate::interrupt::exit_on_press();
    remember_first(&args.targets[0])?;
    let outcomes: Vec<anyhow::Result<String>> = streamed
        .into_iter()
        .map(|s| s.and_then(|s| s.finish(args)))
        .collect();
    if args.fetch {
        let here: Vec<&str> = outcomes.iter().flatten().map(String::as_str).collect();
        if here.len() > 1 {
            crate::term::note(format_args!(
                "side by side: `kprofctl compare {}`",
                here.join(" ")
            ));
        }
    }
    summarize(&args.targets, &outcomes)
}

/// Makes the first board named the one `fetch` without a target asks (the boards' threads
/// remembered themselves in whatever order they got there).
fn remember_first(spec: &str) -> anyhow::Result<()> {
    let _lock = super::STATE.lock().unwrap_or_else(|e| e.into_inner());
    let mut state = crate::state::State::load()?;
    if state.targets.contains_key(spec) && state.last_target.as_deref() != Some(spec) {
        state.last_target = Some(spec.to_owned());
        state.save()?;
    }
    Ok(())
}

/// Refuses a board named twice: two agents on one board would sample each other.
fn check_distinct(targets: &[String]) -> anyhow::Result<()> {
    for (i, t) in targets.iter().enumerate() {
        if targets[..i].contains(t) {
            anyhow::bail!(
                "{t} is named twice: one capture per board (two agents on one board would \
                 sample each other)"
            );
        }
    }
    Ok(())
}

/// One line per board, in the order given, then an error naming the boards that failed.
fn summarize(targets: &[String], outcomes: &[anyhow::Result<String>]) -> anyhow::Result<()> {
    let mut failed = Vec::new();
    for (spec, outcome) in targets.iter().zip(outcomes) {
        match outcome {
            Ok(path) => crate::term::note(format_args!("{spec}: ok: {path}")),
            Err(e) => {
                crate::term::note(format_args!(
                    "{spec}: FAILED: {}",
                    crate::term::error_text(e)
                ));
                failed.push(spec.as_str());
            }
        }
    }
    if !failed.is_empty() {
        anyhow::bail!(
            "{} of {} boards failed: {}",
            failed.len(),
            targets.len(),
            failed.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// Every target once is fine; the same target twice is refused by name.
    #[test]
    fn check_distinct_targets_duplicate_named() {
        assert!(check_distinct(&s(&["a", "lg:b", "root@c:22"])).is_ok());
        let err = check_distinct(&s(&["a", "lg:b", "a"])).unwrap_err();
        assert!(err.to_string().starts_with("a is named twice"), "{err}");
    }

    /// The error names the failed boards in the order given and counts them.
    #[test]
    fn summarize_outcomes_failures_named() {
        let targets = s(&["x", "y", "z"]);
        let ok = |p: &str| Ok(p.to_owned());
        assert!(summarize(&targets, &[ok("a"), ok("b"), ok("c")]).is_ok());
        let err = summarize(
            &targets,
            &[
                Err(anyhow::anyhow!("down")),
                ok("b"),
                Err(anyhow::anyhow!("gone")),
            ],
        )
        .unwrap_err();
        assert_eq!(err.to_string(), "2 of 3 boards failed: x, z");
    }
}

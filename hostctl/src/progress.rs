//! Progress bars on stderr, drawn only when stderr is a terminal: a hidden bar takes every
//! update and shows nothing, so callers need not ask.

use std::io::IsTerminal as _;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// What a bar shows besides its label.
#[derive(Debug, Clone, Copy)]
pub enum Counting {
    /// Bytes done and total, rate and time left: transfers (and files indexed).
    Bytes,
    /// A spinner and the percentage done: symbolizing.
    Percent,
}

/// A bar of `len` units labelled `label`, hidden when stderr is not a terminal.
pub fn bar(len: u64, label: &str, counting: Counting) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(match counting {
        Counting::Bytes => ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
        Counting::Percent => ProgressStyle::with_template("{spinner} {msg} [{bar:30}] {percent}%")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    });
    bar.set_message(label.to_owned());
    bar
}

/// A spinner with the time elapsed, labelled `label`, showing the latest message: long
/// builds whose size is unknown. Hidden when stderr is not a terminal.
pub fn spinner(label: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let spinner = ProgressBar::new_spinner();
    spinner.set_style(
        ProgressStyle::with_template("{spinner} [{elapsed}] {prefix}: {wide_msg}")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    spinner.set_prefix(label.to_owned());
    spinner.enable_steady_tick(std::time::Duration::from_millis(120));
    spinner
}

/// One line per board, `LABEL: latest message` with a spinner and the time elapsed, drawn
/// together at the bottom of the terminal; hidden lines and no group when stderr is not a
/// terminal.
pub fn board_lines(labels: &[String]) -> (Option<MultiProgress>, Vec<ProgressBar>) {
    if !std::io::stderr().is_terminal() {
        return (None, labels.iter().map(|_| ProgressBar::hidden()).collect());
    }
    let group = MultiProgress::new();
    let style = ProgressStyle::with_template("{spinner} [{elapsed}] {prefix}: {wide_msg}")
        .unwrap_or_else(|_| ProgressStyle::default_spinner());
    let lines = labels
        .iter()
        .map(|label| {
            let line = group.add(ProgressBar::new_spinner());
            line.set_style(style.clone());
            line.set_prefix(label.clone());
            line.enable_steady_tick(std::time::Duration::from_millis(120));
            line
        })
        .collect();
    (Some(group), lines)
}

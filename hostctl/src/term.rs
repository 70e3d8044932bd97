//! Messages on standard error: names from a capture or a board escaped, error chains without
//! repeats.

use indicatif::MultiProgress;
use kprof_report::escape;
use std::fmt::Display;
use std::sync::Mutex;

/// The progress lines drawn at the bottom of the terminal while several boards capture: every
/// message goes above them.
static BARS: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// Messages go above `bars` from now on (`None`: straight to the terminal again).
pub fn draw_below(bars: Option<MultiProgress>) {
    *BARS.lock().unwrap_or_else(|e| e.into_inner()) = bars;
}

/// One line on stdout (`to_stdout`) or stderr, above the progress lines if any are drawn.
pub fn line(to_stdout: bool, text: &str) {
    let bars = BARS.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let print = || {
        if to_stdout {
            println!("{text}");
        } else {
            eprintln!("{text}");
        }
    };
    match bars {
        Some(bars) => bars.suspend(print),
        None => print(),
    }
}

/// `kprofctl: warning: MSG`, control characters escaped (warnings quote thread, symbol and file
/// names from the capture).
pub fn warning(msg: impl Display) {
    line(
        false,
        &format!(
            "kprofctl: warning: {}",
            escape::controls_but_newline(&msg.to_string())
        ),
    );
}

/// `kprofctl: MSG`, control characters escaped.
pub fn note(msg: impl Display) {
    line(
        false,
        &format!(
            "kprofctl: {}",
            escape::controls_but_newline(&msg.to_string())
        ),
    );
}

/// An error and its causes joined by `: ` (as anyhow's `{:#}`), leaving out a cause whose text
/// the message already ends with: some errors repeat their source in their own message.
pub fn error_text(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let part = cause.to_string();
        if text.is_empty() {
            text = part;
        } else if !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    escape::controls_but_newline(&text).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cause already quoted at the end of the message is printed once; others are kept.
    #[test]
    fn error_text_chain_repeated_cause_once() {
        let io = std::fs::File::open("/nonexistent").unwrap_err();
        let reason = io.to_string();
        let repeated = anyhow::Error::new(std::io::Error::new(io.kind(), reason.clone()))
            .context(format!("/nonexistent: {reason}"));
        let text = error_text(&repeated);
        assert_eq!(text.matches(&reason).count(), 1, "{text}");
        let chained = anyhow::Error::new(io).context("cannot open /nonexistent");
        assert_eq!(
            error_text(&chained),
            format!("cannot open /nonexistent: {reason}")
        );
        let hostile = anyhow::anyhow!("capture `a\x1b[2Jb` is bad");
        assert_eq!(error_text(&hostile), "capture `a\\x1b[2Jb` is bad");
    }
}

//! Where a board's output goes while `run` follows it: copied as it comes (one board), or line
//! by line behind the board's name (several boards at once, whose output would interleave
//! mid-line otherwise), the latest line also shown on the board's progress line.

use std::io::Write as _;

use indicatif::ProgressBar;

/// How the agent's and workload's output reaches this terminal.
pub enum Echo {
    /// Byte for byte to our stdout/stderr.
    Plain,
    /// Whole lines, each behind `LABEL: `.
    Labelled(Labelled),
}

/// The state of [`Echo::Labelled`]: the label, the partial line of each stream, the bar.
pub struct Labelled {
    label: String,
    pending: [Vec<u8>; 2],
    bar: ProgressBar,
}

impl Echo {
    /// Lines behind `label: `, the latest also as `bar`'s message.
    pub fn labelled(label: &str, bar: ProgressBar) -> Echo {
        Echo::Labelled(Labelled {
            label: label.to_owned(),
            pending: [Vec::new(), Vec::new()],
            bar,
        })
    }

    /// `data` from the board's stdout (`stream` 0) or stderr (1).
    pub fn write(&mut self, stream: usize, data: &[u8]) {
        match self {
            Echo::Plain => {
                let _ = if stream == 0 {
                    let mut out = std::io::stdout();
                    out.write_all(data).and_then(|()| out.flush())
                } else {
                    std::io::stderr().write_all(data)
                };
            }
            Echo::Labelled(l) => l.write(stream, data),
        }
    }

    /// Writes out what is left of unfinished lines.
    pub fn flush(&mut self) {
        match self {
            Echo::Plain => {
                let _ = std::io::stderr().flush();
            }
            Echo::Labelled(l) => {
                for stream in 0..2 {
                    if !l.pending[stream].is_empty() {
                        let line = std::mem::take(&mut l.pending[stream]);
                        l.emit(stream, &line);
                    }
                }
            }
        }
    }
}

impl Labelled {
    fn write(&mut self, stream: usize, data: &[u8]) {
        for &b in data {
            if b == b'\n' {
                let line = std::mem::take(&mut self.pending[stream]);
                self.emit(stream, &line);
            } else {
                self.pending[stream].push(b);
            }
        }
    }

    fn emit(&self, stream: usize, line: &[u8]) {
        let text = String::from_utf8_lossy(line);
        let text = text.trim_end_matches('\r');
        let line = format!("{}: {text}", self.label);
        if !text.trim().is_empty() {
            self.bar
                .set_message(kprof_report::escape::controls(text).into_owned());
        }
        crate::term::line(stream == 0, &line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines split across writes come out whole; the unfinished last one at the flush.
    #[test]
    fn write_labelled_split_lines_reassembled() {
        let bar = ProgressBar::hidden();
        let mut echo = Echo::labelled("b", bar.clone());
        echo.write(0, b"hel");
        assert_eq!(bar.message(), "");
        echo.write(0, b"lo\r\nwor");
        assert_eq!(bar.message(), "hello");
        echo.write(1, b"err\n");
        assert_eq!(bar.message(), "err");
        echo.flush();
        assert_eq!(bar.message(), "wor");
        let Echo::Labelled(l) = &echo else {
            unreachable!()
        };
        assert!(l.pending.iter().all(Vec::is_empty));
    }
}

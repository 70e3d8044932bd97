//! Control characters made visible in text meant for a terminal.
//!
//! Thread names, symbol names and paths come from the board and from binaries: a thread named
//! `ESC ] 0 ; … BEL` or `ESC [ 2 J` would retitle or clear the user's terminal if printed raw.
//! Text output shows them escaped, as `\x1b` (C0 and DEL) and `\u{9b}` (C1, which terminals
//! in UTF-8 mode take as controls too: U+009B is CSI), much as GNU `ls -b` does; bidi
//! formatting characters (U+202E and kin) are shown as `\u{202e}` too. JSON and HTML
//! escape by their own rules and do not use this.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io;

/// Whether `c` is a C0 control, DEL, a C1 control, or a bidirectional formatting character
/// (the "Trojan Source" ones, CVE-2021-42574: a board's text must not reorder what the
/// terminal shows around it).
fn is_control(c: char) -> bool {
    matches!(
        c,
        '\0'..='\x1f'
            | '\x7f'
            | '\u{80}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

fn push_escaped(out: &mut String, c: char) {
    if (c as u32) < 0x80 {
        let _ = write!(out, "\\x{:02x}", c as u32);
    } else {
        let _ = write!(out, "\\u{{{:x}}}", c as u32);
    }
}

/// `s` with every control character escaped, newlines and tabs included: for one name or
/// value on one line.
pub fn controls(s: &str) -> Cow<'_, str> {
    escape_if(s, is_control)
}

/// `s` with every control character but newline escaped: for a message of several lines.
pub fn controls_but_newline(s: &str) -> Cow<'_, str> {
    escape_if(s, |c| c != '\n' && is_control(c))
}

fn escape_if(s: &str, escape: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&escape) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if escape(c) {
            push_escaped(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Serialized JSON with C1 controls written as `\u0080`..`\u009f`: serde_json escapes only
/// C0, and a raw U+009B is a CSI to a terminal the JSON is printed on. The same JSON value
/// (C1 characters can only be inside strings).
pub fn json_c1(json: &str) -> Cow<'_, str> {
    let is_c1 = |c: char| matches!(c, '\u{80}'..='\u{9f}');
    if !json.chars().any(is_c1) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 8);
    for c in json.chars() {
        if is_c1(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// A writer that escapes control characters in what goes through it, except newline (the text
/// formats' own line ends) and tab: the last line of defence of every text renderer, whatever
/// field a name arrives in.
pub struct Escaping<W: io::Write> {
    inner: W,
    /// A 0xC2 byte at the end of the last write: a C1 control if the next byte is 0x80..=0x9F.
    pending_c2: bool,
}

impl<W: io::Write> std::fmt::Debug for Escaping<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Escaping")
            .field("pending_c2", &self.pending_c2)
            .finish_non_exhaustive()
    }
}

impl<W: io::Write> Escaping<W> {
    /// Wraps `inner`.
    pub fn new(inner: W) -> Self {
        Escaping {
            inner,
            pending_c2: false,
        }
    }

    /// Writes a lone 0xC2 held back from the last write (input that was not UTF-8).
    fn flush_pending(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.pending_c2) {
            self.inner.write_all(&[0xC2])?;
        }
        Ok(())
    }
}

impl<W: io::Write> io::Write for Escaping<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut out = Vec::with_capacity(buf.len() + 8);
        let mut i = 0;
        if self.pending_c2 {
            self.pending_c2 = false;
            match buf.first() {
                Some(&b @ 0x80..=0x9f) => {
                    out.extend_from_slice(format!("\\u{{{b:x}}}").as_bytes());
                    i = 1;
                }
                _ => out.push(0xC2),
            }
        }
        while i < buf.len() {
            let b = buf[i];
            match b {
                b'\n' | b'\t' => out.push(b),
                0x00..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                // U+0080..U+009F are C2 80..C2 9F in UTF-8.
                0xC2 if i + 1 == buf.len() => self.pending_c2 = true,
                0xC2 if (0x80..=0x9f).contains(&buf[i + 1]) => {
                    out.extend_from_slice(format!("\\u{{{:x}}}", buf[i + 1]).as_bytes());
                    i += 1;
                }
                _ => out.push(b),
            }
            i += 1;
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_pending()?;
        self.inner.flush()
    }
}

impl<W: io::Write> Drop for Escaping<W> {
    fn drop(&mut self) {
        let _ = self.flush_pending();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    const HOSTILE: &str = "a\x1b]0;pwn\x07b\x1b[2Jc\u{9b}31md\x7fe\tf\ng";

    /// Names lose every C0, DEL and C1 control; the rest is kept.
    #[test]
    fn controls_name_escaped() {
        assert_eq!(
            controls(HOSTILE),
            "a\\x1b]0;pwn\\x07b\\x1b[2Jc\\u{9b}31md\\x7fe\\x09f\\x0ag"
        );
        assert!(matches!(controls("plain é ü"), Cow::Borrowed(_)));
        assert_eq!(controls_but_newline("x\ny\x1b"), "x\ny\\x1b");
    }

    /// Bidi overrides and isolates (Trojan Source) are escaped; other non-ASCII is kept.
    #[test]
    fn controls_bidi_escaped() {
        assert_eq!(
            controls("a\u{202e}b\u{2066}c\u{200f}d"),
            "a\\u{202e}b\\u{2066}c\\u{200f}d"
        );
        assert!(matches!(controls("→ é 漢"), Cow::Borrowed(_)));
    }

    /// C1 controls in JSON strings become `\u00XX` escapes of the same value.
    #[test]
    fn json_c1_same_value() {
        let v = serde_json::json!({ "symbol": HOSTILE });
        let text = serde_json::to_string(&v).unwrap();
        let escaped = json_c1(&text);
        assert!(
            !escaped.contains('\u{9b}') && escaped.contains("\\u009b"),
            "{escaped}"
        );
        let back: serde_json::Value = serde_json::from_str(&escaped).unwrap();
        assert_eq!(back, v);
    }

    /// The writer escapes like [`controls`] but keeps newlines and tabs, also when a C1
    /// control is split across two writes.
    #[test]
    fn escaping_writer_text_split_c1() {
        let mut out = Vec::new();
        {
            let mut w = Escaping::new(&mut out);
            let bytes = HOSTILE.as_bytes();
            let split = HOSTILE.find('\u{9b}').unwrap() + 1;
            w.write_all(&bytes[..split]).unwrap();
            w.write_all(&bytes[split..]).unwrap();
            w.write_all("é\u{85}".as_bytes()).unwrap();
            w.flush().unwrap();
        }
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "a\\x1b]0;pwn\\x07b\\x1b[2Jc\\u{9b}31md\\x7fe\tf\ngé\\u{85}"
        );
        assert!(!text.bytes().any(|b| b == 0x1b || b == 0x07 || b == 0xc2));
    }
}

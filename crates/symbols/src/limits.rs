//! How much a capture may make kprofctl read, unpack or decompress: captures come from boards
//! that may be hostile, and a small archive can inflate a thousandfold.
//!
//! One limit, [`max_input_size`], caps every byte count a capture decides: the decompressed
//! archive (and so the perf.data unpacked from it), a capture read from standard input, the
//! records decompressed from `perf record -z` data and the size of a download. Raise it with
//! the environment variable [`ENV`] (`KPROF_MAX_INPUT_SIZE=8G`).

use crate::error::{Error, Result};
use std::cell::Cell;
use std::io::Read;
use std::rc::Rc;

/// The environment variable that sets [`max_input_size`].
pub const ENV: &str = "KPROF_MAX_INPUT_SIZE";

/// 2 GiB: a `--call-graph dwarf` capture of a busy board reaches a few hundred MiB of
/// perf.data; ten times that is still a capture, a thousand times a bomb.
pub const DEFAULT_MAX_INPUT_SIZE: u64 = 2 << 30;

/// The limit: [`ENV`] when set, else [`DEFAULT_MAX_INPUT_SIZE`]. A value that is not a size
/// is an error (a typo must not remove the limit).
pub fn max_input_size() -> Result<u64> {
    match std::env::var(ENV) {
        Ok(v) => parse_size(&v).ok_or_else(|| {
            Error::BadSetting(format!(
                "{ENV}={v:?} is not a size (bytes, or a number with K, M, G or T: 4G)"
            ))
        }),
        Err(std::env::VarError::NotPresent) => Ok(DEFAULT_MAX_INPUT_SIZE),
        Err(std::env::VarError::NotUnicode(v)) => Err(Error::BadSetting(format!(
            "{ENV}={v:?} is not a size (bytes, or a number with K, M, G or T: 4G)"
        ))),
    }
}

/// Parses `123`, `64K`, `512M`, `4G`, `1T` (binary multiples, an optional `iB` or `B`).
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s
        .strip_suffix("iB")
        .or_else(|| s.strip_suffix('B'))
        .unwrap_or(s);
    let (digits, shift) = match s.char_indices().last()? {
        (i, 'k' | 'K') => (&s[..i], 10),
        (i, 'm' | 'M') => (&s[..i], 20),
        (i, 'g' | 'G') => (&s[..i], 30),
        (i, 't' | 'T') => (&s[..i], 40),
        _ => (s, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// A byte count the way the messages about limits say it: `2 GiB`, `64 MiB`, `1000 bytes`.
pub fn human(n: u64) -> String {
    for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{} {unit}", n >> shift);
        }
    }
    format!("{n} bytes")
}

/// How many times the input size limit the records of `perf record -z` data may decompress to
/// in all. They are decompressed as they are read, not stored, so this bounds time, not space:
/// a real `--call-graph dwarf` capture (~32 MB of records per busy CPU-second, compressed
/// 30-50:1) must fit with room, a zstd bomb (thousands to one) must not run for minutes.
pub const RECORDS_PER_INPUT: u64 = 16;

/// What the records of a capture read with input size limit `max_input` may decompress to.
pub fn records_budget(max_input: u64) -> u64 {
    max_input.saturating_mul(RECORDS_PER_INPUT)
}

/// How to raise the limit, for messages.
pub fn how_to_raise(limit: u64) -> String {
    format!(
        "the limit is {} ({ENV}); if the capture is genuine, raise it: {ENV}={}",
        human(limit),
        human_arg(limit.saturating_mul(4))
    )
}

fn human_arg(n: u64) -> String {
    human(n)
        .replace(" GiB", "G")
        .replace(" MiB", "M")
        .replace(" TiB", "T")
        .replace(" KiB", "K")
        .replace(" bytes", "")
}

/// A reader that fails once more than `left` bytes came through, and says so in `hit`: the
/// tar reader wraps the errors of its input, so the flag tells the limit from damage.
pub(crate) struct Limited<R> {
    pub(crate) inner: R,
    pub(crate) left: u64,
    pub(crate) hit: Rc<Cell<bool>>,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if n as u64 > self.left {
            self.hit.set(true);
            return Err(std::io::Error::other("decompressed size limit reached"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes parse with binary suffixes; garbage and overflow do not.
    #[test]
    fn parse_size_suffixes_and_garbage() {
        assert_eq!(parse_size("123"), Some(123));
        assert_eq!(parse_size("64K"), Some(64 << 10));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size("4G"), Some(4 << 30));
        assert_eq!(parse_size("4GiB"), Some(4 << 30));
        assert_eq!(parse_size("1t"), Some(1 << 40));
        assert_eq!(parse_size("lots"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(parse_size("99999999999T"), None);
        assert_eq!(human(2 << 30), "2 GiB");
        assert_eq!(human(1000), "1000 bytes");
    }
}

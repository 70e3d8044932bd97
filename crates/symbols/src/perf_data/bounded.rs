//! The perf.data as the reader is shown it: ending before the first damaged record.
//!
//! linux-perf-data sorts records by time a round (`FINISHED_ROUND`) at a time and drops the
//! round it holds when a record fails to read, so a damaged record would take every good
//! record of its round with it: all of them in a recording perf woke up once for. Shown a
//! data section (or a pipe stream) that ends where the damage starts, it reads the good
//! records to a clean end instead.

use std::io::{Read, Result, Seek, SeekFrom};

/// Where the data section's size sits in `struct perf_file_header`.
const DATA_SIZE_OFFSET: u64 = 48;
/// One entry of the feature table (`struct perf_file_section`).
const FEATURE_ENTRY: u64 = 16;

/// A reader of a perf.data whose records end at a given offset.
pub(crate) struct Bounded<R> {
    inner: R,
    pos: u64,
    /// Bytes shown in place of the file's at an offset: the data section's new size.
    patch: Option<(u64, [u8; 8])>,
    /// The feature table, which the reader looks for right after the data section, shown
    /// after the shortened one: `(shown at, read from, length)`.
    moved: Option<(u64, u64, u64)>,
    /// End of the stream (pipe mode, whose reader takes the end of input as the end).
    end: Option<u64>,
}

/// Where a file's records are, for [`Bounded::file`].
pub(crate) struct DataSection {
    /// Offset of the data section.
    pub offset: u64,
    /// Its end in the file, where the feature table starts.
    pub end: u64,
    /// Number of entries of the feature table.
    pub features: u32,
    /// The header is big-endian.
    pub big_endian: bool,
}

impl<R> Bounded<R> {
    /// The file unchanged.
    pub fn whole(inner: R) -> Self {
        Self {
            inner,
            pos: 0,
            patch: None,
            moved: None,
            end: None,
        }
    }

    /// A file whose data section `data` is shown ending at `end`.
    pub fn file(inner: R, data: &DataSection, end: u64) -> Self {
        let size = end.saturating_sub(data.offset);
        let bytes = if data.big_endian {
            size.to_be_bytes()
        } else {
            size.to_le_bytes()
        };
        Self {
            patch: Some((DATA_SIZE_OFFSET, bytes)),
            moved: Some((end, data.end, u64::from(data.features) * FEATURE_ENTRY)),
            ..Self::whole(inner)
        }
    }

    /// A pipe-mode stream that ends at `end`.
    pub fn pipe(inner: R, end: u64) -> Self {
        Self {
            end: Some(end),
            ..Self::whole(inner)
        }
    }

    /// Where in the inner file the byte shown at `pos` comes from, and how many bytes from
    /// there on come from consecutive places.
    fn source(&self, pos: u64) -> (u64, u64) {
        let Some((at, from, len)) = self.moved else {
            return (pos, u64::MAX);
        };
        if pos < at {
            (pos, at - pos)
        } else if pos < at + len {
            (from + (pos - at), at + len - pos)
        } else {
            (pos, u64::MAX)
        }
    }
}

impl<R: Read + Seek> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> Result<usize> {
        let left = self.end.map_or(u64::MAX, |e| e.saturating_sub(self.pos));
        let (src, run) = self.source(self.pos);
        let room = usize::try_from(left.min(run)).map_or(buf.len(), |r| r.min(buf.len()));
        if self.moved.is_some() {
            self.inner.seek(SeekFrom::Start(src))?;
        }
        let n = self.inner.read(&mut buf[..room])?;
        if let Some((at, bytes)) = self.patch {
            let from = self.pos.max(at);
            let to = (self.pos + n as u64).min(at + bytes.len() as u64);
            for p in from..to {
                buf[(p - self.pos) as usize] = bytes[(p - at) as usize];
            }
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Bounded<R> {
    fn seek(&mut self, to: SeekFrom) -> Result<u64> {
        self.pos = match to {
            SeekFrom::Current(d) => self.pos.checked_add_signed(d).ok_or_else(|| {
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "seek before the start")
            })?,
            other => self.inner.seek(other)?,
        };
        if self.moved.is_none() {
            self.inner.seek(SeekFrom::Start(self.pos))?;
        }
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn read_all(r: &mut impl Read, chunk: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = vec![0; chunk];
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&buf[..n]);
        }
    }

    /// The data size reads as patched and the feature table right after the shortened
    /// section, whatever the read sizes; every other byte unchanged.
    #[test]
    fn read_file_shortened_any_chunking() {
        let file: Vec<u8> = (0..=255u8).collect();
        let data = DataSection {
            offset: 104,
            end: 200,
            features: 2,
            big_endian: false,
        };
        for chunk in [1, 3, 7, 50, 256] {
            let mut r = Bounded::file(Cursor::new(file.clone()), &data, 150);
            let out = read_all(&mut r, chunk);
            let mut want = file.clone();
            want[48..56].copy_from_slice(&46u64.to_le_bytes());
            want.copy_within(200..232, 150);
            assert_eq!(out, want, "chunk {chunk}");
            r.seek(SeekFrom::Start(150)).unwrap();
            let mut entry = [0u8; 16];
            r.read_exact(&mut entry).unwrap();
            assert_eq!(entry[0], 200, "chunk {chunk}");
        }
    }

    /// A pipe ends at its bound, also after a seek back.
    #[test]
    fn read_pipe_bounded_ends_there() {
        let mut r = Bounded::pipe(Cursor::new(vec![7u8; 64]), 20);
        assert_eq!(read_all(&mut r, 8).len(), 20);
        r.seek(SeekFrom::Start(15)).unwrap();
        assert_eq!(read_all(&mut r, 8).len(), 5);
    }
}

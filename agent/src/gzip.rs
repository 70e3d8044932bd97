//! A single-member gzip stream whose parts are either deflated or stored: the archive deflates
//! its text members but stores perf.data, which is zstd-compressed already (deflating it again
//! costs CPU and gains nothing) or uncompressed by the user's choice of least CPU.
//!
//! One member and one deflate stream, so every gzip reader takes it (flate2's `GzDecoder`,
//! which stops after the first member, included). Deflated parts end with a full flush: the
//! output is byte-aligned and the compressor's window reset, so the stored blocks written by
//! hand next to them can neither split a code nor be referred back to.

use std::io::{self, Write};

use flate2::{Compress, Compression, FlushCompress, Status};

/// The most one stored deflate block holds (its length field is a u16).
const MAX_STORED: usize = u16::MAX as usize;

/// gzip's 10-byte header: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255];

/// Writes a gzip stream to `W`; [`GzStream::store`] switches between deflating and storing.
pub struct GzStream<W: Write> {
    out: W,
    deflate: Compress,
    crc: crc32fast::Hasher,
    size: u64,
    stored: bool,
    /// Deflate output between two writes to `out`.
    buf: Vec<u8>,
}

impl<W: Write> std::fmt::Debug for GzStream<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GzStream")
            .field("size", &self.size)
            .field("stored", &self.stored)
            .finish()
    }
}

impl<W: Write> GzStream<W> {
    /// Starts the stream; parts are deflated at `level` until [`GzStream::store`] says otherwise.
    pub fn new(mut out: W, level: Compression) -> io::Result<GzStream<W>> {
        out.write_all(&GZIP_HEADER)?;
        Ok(GzStream {
            out,
            deflate: Compress::new(level, false),
            crc: crc32fast::Hasher::new(),
            size: 0,
            stored: false,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// From now on, bytes are stored (`true`) or deflated (`false`).
    pub fn store(&mut self, stored: bool) -> io::Result<()> {
        if stored && !self.stored {
            self.deflate_all(&[], FlushCompress::Full)?;
        }
        self.stored = stored;
        Ok(())
    }

    /// Ends the deflate stream, writes gzip's trailer and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        // The last block must be a deflated one with the final bit: stored blocks here never
        // carry it.
        self.deflate_all(&[], FlushCompress::Finish)?;
        let crc = self.crc.clone().finalize();
        self.out.write_all(&crc.to_le_bytes())?;
        self.out.write_all(&(self.size as u32).to_le_bytes())?;
        Ok(self.out)
    }

    /// Runs the compressor over `input` with `flush` until it has taken all of it and, for a
    /// flush, written everything out.
    fn deflate_all(&mut self, mut input: &[u8], flush: FlushCompress) -> io::Result<()> {
        let finish = flush == FlushCompress::Finish;
        loop {
            self.buf.clear();
            let before = self.deflate.total_in();
            let status = self
                .deflate
                .compress_vec(input, &mut self.buf, flush)
                .map_err(io::Error::other)?;
            let taken = (self.deflate.total_in() - before) as usize;
            input = &input[taken..];
            self.out.write_all(&self.buf)?;
            // Room left in the output means the compressor had nothing more to give.
            let drained = self.buf.len() < self.buf.capacity();
            match status {
                Status::StreamEnd => return Ok(()),
                _ if input.is_empty() && drained && !finish => return Ok(()),
                Status::BufError if taken == 0 && self.buf.is_empty() => {
                    return Err(io::Error::other("deflate made no progress"))
                }
                _ => {}
            }
        }
    }

    /// Stored blocks, not final: `BFINAL=0 BTYPE=00` in a byte of its own (the stream is
    /// byte-aligned here), then LEN and its complement.
    fn write_stored(&mut self, data: &[u8]) -> io::Result<()> {
        for chunk in data.chunks(MAX_STORED) {
            let len = chunk.len() as u16;
            let mut head = [0u8; 5];
            head[1..3].copy_from_slice(&len.to_le_bytes());
            head[3..5].copy_from_slice(&(!len).to_le_bytes());
            self.out.write_all(&head)?;
            self.out.write_all(chunk)?;
        }
        Ok(())
    }
}

impl<W: Write> Write for GzStream<W> {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.crc.update(data);
        self.size += data.len() as u64;
        if self.stored {
            self.write_stored(data)?;
        } else {
            self.deflate_all(data, FlushCompress::None)?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::GzDecoder;
    use std::io::Read;

    fn text(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"ffffffff81000000 T _text\n"[i % 25])
            .collect()
    }

    fn noise(n: usize) -> Vec<u8> {
        let mut x = 0x2545f4914f6cdd1du64;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect()
    }

    /// Deflated and stored parts in any order read back as one stream with flate2 and with
    /// gzip(1); stored parts cost 5 bytes per 64 KiB, deflated text shrinks.
    #[test]
    fn write_gzip_mixed_parts_readable() {
        let parts: Vec<(bool, Vec<u8>)> = vec![
            (false, text(3000)),
            (true, noise(200_000)),
            (true, text(10)),
            (false, text(500_000)),
            (true, Vec::new()),
            (false, noise(1000)),
        ];
        let mut g = GzStream::new(Vec::new(), Compression::new(1)).unwrap();
        let mut all = Vec::new();
        for (stored, data) in &parts {
            g.store(*stored).unwrap();
            // Odd-sized writes, as tar and io::copy make them.
            for c in data.chunks(8191) {
                g.write_all(c).unwrap();
            }
            all.extend_from_slice(data);
        }
        let gz = g.finish().unwrap();
        let mut back = Vec::new();
        GzDecoder::new(&gz[..]).read_to_end(&mut back).unwrap();
        assert!(back == all, "round trip differs");
        assert!(
            gz.len() < 200_000 + 200_000 / 65535 * 5 + 60_000,
            "{}",
            gz.len()
        );

        let dir = std::env::temp_dir().join(format!("kprof-gzip-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mixed.gz");
        std::fs::write(&path, &gz).unwrap();
        let out = std::process::Command::new("gzip")
            .arg("-dc")
            .arg(&path)
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.stdout == all, "gzip -d differs");
    }

    /// A stream that was only ever stored still ends with a final block gzip accepts.
    #[test]
    fn write_gzip_stored_only_readable() {
        let mut g = GzStream::new(Vec::new(), Compression::new(1)).unwrap();
        g.store(true).unwrap();
        let data = noise(70_000);
        g.write_all(&data).unwrap();
        let gz = g.finish().unwrap();
        let mut back = Vec::new();
        GzDecoder::new(&gz[..]).read_to_end(&mut back).unwrap();
        assert!(back == data);
        assert!(gz.len() < data.len() + 40, "{}", gz.len());
    }
}

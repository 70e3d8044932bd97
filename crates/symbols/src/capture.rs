//! Opening a capture: a kprof archive (`.kprof.tar.gz`) or a bare perf.data.
//!
//! Opened from a path or read from a reader (spooled to a temporary file), an archive's
//! perf.data is unpacked to a temporary file so that memory stays bounded by what the reader
//! buffers, not by the size of the capture; read from bytes, the capture is held in memory.
//! What is unpacked or spooled is capped by the input size limit ([`crate::limits`]). The `/proc/modules` snapshot of an archive is not
//! read: the manifest has the modules with their sections.

use crate::error::{Error, Result};
use kprof_capture::Manifest;
use std::cell::Cell;
use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::rc::Rc;

/// Largest manifest.json accepted; real ones are a few KiB.
const MAX_SMALL_MEMBER: u64 = 64 << 20;
/// Largest kallsyms snapshot accepted; a distro kernel's is ~15 MiB.
const MAX_KALLSYMS: u64 = 128 << 20;
/// What is reserved up front for a member before its bytes arrive: the size comes from the
/// tar header, which the board wrote.
const MAX_RESERVE: u64 = 1 << 20;

/// The parts of a capture.
#[derive(Debug)]
pub struct Capture {
    /// The name the user gave (the path of a capture opened from a file).
    pub path: PathBuf,
    perf_data: PerfData,
    /// The agent's manifest; `None` for a bare perf.data.
    pub manifest: Option<Manifest>,
    /// The `/proc/kallsyms` snapshot, when the archive has one.
    pub kallsyms: Option<String>,
    /// The input size limit it was opened with ([`crate::limits`]): it also caps what its
    /// compressed records decompress to.
    pub(crate) max_input: u64,
}

/// Where the perf.data of a capture is.
#[derive(Debug)]
pub(crate) enum PerfData {
    /// A file: the capture itself, or a temporary file unpacked from the archive.
    File {
        /// The file.
        path: PathBuf,
        /// Deletes the unpacked file when the capture is dropped.
        _temp: Option<tempfile::TempPath>,
    },
    /// In memory, for a capture read from a reader.
    Bytes(Vec<u8>),
}

/// Where an archive's perf.data member goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Unpack {
    /// To a temporary file: memory stays bounded by what the reader buffers.
    TempFile,
    /// To memory.
    Memory,
}

impl Capture {
    /// Opens an archive or a bare perf.data, telling them apart by their first bytes, with
    /// the input size limit of [`crate::limits::max_input_size`].
    pub fn open(path: &Path) -> Result<Self> {
        Self::open_limited(path, crate::limits::max_input_size()?)
    }

    /// [`Capture::open`] with an input size limit of `max_input` bytes.
    pub fn open_limited(path: &Path, max_input: u64) -> Result<Self> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        Self::open_file(path, file, path, None, max_input)
    }

    /// Opens `file` (at `file_path`, kept alive by `temp`), calling it `shown`.
    fn open_file(
        shown: &Path,
        mut file: File,
        file_path: &Path,
        temp: Option<tempfile::TempPath>,
        max_input: u64,
    ) -> Result<Self> {
        let mut magic = [0u8; 8];
        let n = read_up_to(&mut file, &mut magic).map_err(|e| Error::io(shown, e))?;
        let magic = &magic[..n];
        if magic.starts_with(&GZIP_MAGIC) {
            file.seek(SeekFrom::Start(0))
                .map_err(|e| Error::io(shown, e))?;
            Self::read_archive(shown, BufReader::new(file), Unpack::TempFile, max_input)
        } else if is_perf_magic(magic) {
            Ok(Self::bare(
                shown,
                PerfData::File {
                    path: file_path.to_path_buf(),
                    _temp: temp,
                },
                max_input,
            ))
        } else {
            Err(Error::UnknownFormat {
                path: shown.to_path_buf(),
                magic: magic.to_vec(),
            })
        }
    }

    /// Reads an archive or a bare perf.data from `r` (standard input); `name` is what
    /// messages call it. It is spooled to a temporary file, at most
    /// [`crate::limits::max_input_size`] bytes, so that memory stays bounded as for a file.
    pub fn from_reader(name: &Path, r: impl Read) -> Result<Self> {
        Self::from_reader_limited(name, r, crate::limits::max_input_size()?)
    }

    /// [`Capture::from_reader`] with an input size limit of `max_input` bytes.
    pub fn from_reader_limited(name: &Path, r: impl Read, max_input: u64) -> Result<Self> {
        let mut tmp = tempfile::Builder::new()
            .prefix("kprof-input-")
            .tempfile()
            .map_err(|e| Error::io(std::env::temp_dir(), e))?;
        let copied = std::io::copy(
            &mut r.take(max_input.saturating_add(1)),
            &mut std::io::BufWriter::new(tmp.as_file_mut()),
        )
        .map_err(|e| Error::io(name, e))?;
        if copied > max_input {
            return Err(Error::TooLarge {
                path: name.to_path_buf(),
                why: format!("more than {} to read", crate::limits::human(max_input)),
                limit: max_input,
            });
        }
        let (mut file, temp) = tmp.into_parts();
        file.seek(SeekFrom::Start(0))
            .map_err(|e| Error::io(name, e))?;
        let at = temp.to_path_buf();
        Self::open_file(name, file, &at, Some(temp), max_input)
    }

    /// Reads an archive or a bare perf.data held in memory, unpacking into memory, with the
    /// default input size limit.
    pub fn from_bytes(name: &Path, bytes: &[u8]) -> Result<Self> {
        Self::from_bytes_limited(name, bytes, crate::limits::DEFAULT_MAX_INPUT_SIZE)
    }

    /// [`Capture::from_bytes`] with an input size limit of `max_input` bytes.
    pub fn from_bytes_limited(name: &Path, bytes: &[u8], max_input: u64) -> Result<Self> {
        if bytes.starts_with(&GZIP_MAGIC) {
            Self::read_archive(name, bytes, Unpack::Memory, max_input)
        } else if is_perf_magic(bytes.get(..8).unwrap_or(bytes)) {
            if bytes.len() as u64 > max_input {
                return Err(Error::TooLarge {
                    path: name.to_path_buf(),
                    why: format!("{} bytes", bytes.len()),
                    limit: max_input,
                });
            }
            Ok(Self::bare(name, PerfData::Bytes(bytes.to_vec()), max_input))
        } else {
            Err(Error::UnknownFormat {
                path: name.to_path_buf(),
                magic: bytes.get(..8).unwrap_or(bytes).to_vec(),
            })
        }
    }

    /// Where the perf.data is.
    pub(crate) fn perf_data(&self) -> &PerfData {
        &self.perf_data
    }

    fn bare(path: &Path, perf_data: PerfData, max_input: u64) -> Self {
        Self {
            path: path.to_path_buf(),
            perf_data,
            manifest: None,
            kallsyms: None,
            max_input,
        }
    }

    /// Reads an archive, decompressing at most `max_input` bytes of tar stream: a member
    /// claiming more fails at its header, a stream inflating past it fails as it does.
    fn read_archive(path: &Path, r: impl Read, unpack: Unpack, max_input: u64) -> Result<Self> {
        let hit = Rc::new(Cell::new(false));
        let gz = crate::limits::Limited {
            inner: flate2::read::GzDecoder::new(r),
            left: max_input,
            hit: hit.clone(),
        };
        Self::read_tar(path, gz, unpack, max_input).map_err(|e| {
            if hit.get() {
                Error::TooLarge {
                    path: path.to_path_buf(),
                    why: format!(
                        "the archive decompresses to more than {}",
                        crate::limits::human(max_input)
                    ),
                    limit: max_input,
                }
            } else {
                e
            }
        })
    }

    fn read_tar(path: &Path, r: impl Read, unpack: Unpack, max_input: u64) -> Result<Self> {
        let bad = |why: String| Error::BadArchive {
            path: path.to_path_buf(),
            why,
        };
        let mut archive = tar::Archive::new(r);
        let mut perf: Option<(PerfData, u64)> = None;
        let mut perf_sha: Option<String> = None;
        let mut manifest_text = None;
        let mut kallsyms = None;
        let entries = archive
            .entries()
            .map_err(|e| bad(format!("reading the tar stream: {e}")))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| bad(format!("reading the tar stream: {e}")))?;
            let name = entry
                .path()
                .map_err(|e| bad(format!("bad member name: {e}")))?
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let size = entry.header().size().unwrap_or(u64::MAX);
            match name.as_str() {
                kprof_capture::PERF_DATA => {
                    let (data, copied, sha) =
                        unpack_perf_data(path, &mut entry, size, unpack, max_input)?;
                    perf_sha = Some(sha);
                    perf = Some((data, copied));
                }
                kprof_capture::MANIFEST => {
                    manifest_text = Some(
                        read_member(&mut entry, &name, size, MAX_SMALL_MEMBER)
                            .map_err(|e| bad(e.to_string()))?,
                    )
                }
                kprof_capture::KALLSYMS => {
                    kallsyms = Some(
                        read_member(&mut entry, &name, size, MAX_KALLSYMS)
                            .map_err(|e| bad(e.to_string()))?,
                    )
                }
                _ => {}
            }
        }
        let Some((perf_data, perf_size)) = perf else {
            return Err(bad(format!("no {} member", kprof_capture::PERF_DATA)));
        };
        let manifest = match manifest_text {
            Some(text) => Some(parse_manifest(path, &text)?),
            None => None,
        };
        if let Some(m) = &manifest {
            check_perf_data(path, m, perf_size, perf_sha.as_deref())?;
        }
        Ok(Self {
            path: path.to_path_buf(),
            perf_data,
            manifest,
            kallsyms,
            max_input,
        })
    }
}

/// Unpacks the perf.data member `entry` of `size` bytes as `unpack` says, with its SHA-256;
/// fails at the header, before unpacking any of it, when it is larger than `max_input`.
fn unpack_perf_data(
    path: &Path,
    entry: &mut impl Read,
    size: u64,
    unpack: Unpack,
    max_input: u64,
) -> Result<(PerfData, u64, String)> {
    let name = kprof_capture::PERF_DATA;
    let bad = |why: String| Error::BadArchive {
        path: path.to_path_buf(),
        why,
    };
    if size > max_input {
        return Err(Error::TooLarge {
            path: path.to_path_buf(),
            why: format!("its {name} member is {size} bytes"),
            limit: max_input,
        });
    }
    let truncated = |e: std::io::Error| {
        bad(format!(
            "{name}: truncated or corrupted after some bytes: {e}"
        ))
    };
    let (data, copied, sha) = match unpack {
        Unpack::TempFile => {
            let mut tmp = tempfile::Builder::new()
                .prefix("kprof-perf-")
                .suffix(".data")
                .tempfile()
                .map_err(|e| Error::io(std::env::temp_dir(), e))?;
            let mut to = Hashing::new(tmp.as_file_mut());
            let copied = std::io::copy(entry, &mut to).map_err(truncated)?;
            let sha = to.hex();
            let tmp = tmp.into_temp_path();
            let data = PerfData::File {
                path: tmp.to_path_buf(),
                _temp: Some(tmp),
            };
            (data, copied, sha)
        }
        Unpack::Memory => {
            let mut bytes = Vec::with_capacity(size.min(MAX_RESERVE) as usize);
            let mut to = Hashing::new(&mut bytes);
            let copied = std::io::copy(entry, &mut to).map_err(truncated)?;
            let sha = to.hex();
            (PerfData::Bytes(bytes), copied, sha)
        }
    };
    if copied != size {
        return Err(bad(format!(
            "{name}: header says {size} bytes, only {copied} present"
        )));
    }
    Ok((data, copied, sha))
}

/// Checks that the unpacked perf.data (`perf_size` bytes, SHA-256 `perf_sha`) of the archive
/// at `path` is the one its manifest `m` recorded.
fn check_perf_data(
    path: &Path,
    m: &Manifest,
    perf_size: u64,
    perf_sha: Option<&str>,
) -> Result<()> {
    let bad = |why: String| Error::BadArchive {
        path: path.to_path_buf(),
        why,
    };
    if m.perf_data.size != 0 && m.perf_data.size != perf_size {
        return Err(bad(format!(
            "perf.data is {perf_size} bytes, the manifest recorded {}",
            m.perf_data.size
        )));
    }
    // An empty digest: a manifest written without one (hand-made captures).
    let recorded = &m.perf_data.sha256;
    match perf_sha {
        Some(sha) if !recorded.is_empty() && !sha.eq_ignore_ascii_case(recorded) => Err(bad(
            format!("perf.data's SHA-256 is {sha}, the manifest recorded {recorded} (corrupted)"),
        )),
        _ => Ok(()),
    }
}

/// The first bytes of a gzip stream.
const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// perf.data magic, little- or big-endian.
fn is_perf_magic(magic: &[u8]) -> bool {
    magic == b"PERFILE2" || magic == b"2ELIFREP"
}

fn parse_manifest(path: &Path, text: &str) -> Result<Manifest> {
    Manifest::from_json(text.as_bytes()).map_err(|e| Error::BadManifest {
        path: path.to_path_buf(),
        why: e.to_string(),
    })
}

/// Why a text member of the archive (manifest, kallsyms) cannot be read.
#[derive(Debug, thiserror::Error)]
enum MemberError {
    #[error("{name}: {size} bytes is more than the {max} bytes accepted")]
    TooLarge { name: String, size: u64, max: u64 },
    #[error("{name}: truncated or corrupted: {source}")]
    Read {
        name: String,
        source: std::io::Error,
    },
    #[error("{name}: header says {size} bytes, {present} present")]
    Short {
        name: String,
        size: u64,
        present: usize,
    },
    #[error("{name}: not UTF-8 text")]
    NotUtf8 { name: String },
}

fn read_member(
    r: &mut impl Read,
    name: &str,
    size: u64,
    max: u64,
) -> std::result::Result<String, MemberError> {
    let name = || name.to_string();
    if size > max {
        return Err(MemberError::TooLarge {
            name: name(),
            size,
            max,
        });
    }
    let mut buf = Vec::with_capacity(size.min(MAX_RESERVE) as usize);
    r.take(max + 1)
        .read_to_end(&mut buf)
        .map_err(|source| MemberError::Read {
            name: name(),
            source,
        })?;
    if buf.len() as u64 != size {
        return Err(MemberError::Short {
            name: name(),
            size,
            present: buf.len(),
        });
    }
    String::from_utf8(buf).map_err(|_| MemberError::NotUtf8 { name: name() })
}

/// A writer that passes bytes on and hashes them: perf.data's digest is checked as it is
/// unpacked, without reading it twice.
struct Hashing<W> {
    inner: W,
    sha: sha2::Sha256,
}

impl<W: std::io::Write> Hashing<W> {
    fn new(inner: W) -> Self {
        Self {
            inner,
            sha: sha2::Digest::new(),
        }
    }

    fn hex(self) -> String {
        kprof_capture::build_id::hex(&sha2::Digest::finalize(self.sha))
    }
}

impl<W: std::io::Write> std::io::Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        sha2::Digest::update(&mut self.sha, &buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes starting with the perf.data magic are a bare perf.data held in memory.
    #[test]
    fn read_bytes_bare_perf_data_in_memory() {
        let mut bytes = b"PERFILE2".to_vec();
        bytes.extend_from_slice(&[0; 96]);
        let cap = Capture::from_bytes(Path::new("mem.data"), &bytes).unwrap();
        assert!(cap.manifest.is_none() && cap.kallsyms.is_none());
        assert!(matches!(cap.perf_data(), PerfData::Bytes(b) if *b == bytes));
    }

    /// Other first bytes are neither format: the error names them.
    #[test]
    fn read_bytes_unknown_magic_errors() {
        let err = Capture::from_bytes(Path::new("x"), b"hello").unwrap_err();
        assert!(matches!(err, Error::UnknownFormat { ref magic, .. } if magic == b"hello"));
    }

    /// A gzip stream without a perf.data member is a bad archive, not a panic.
    #[test]
    fn read_bytes_archive_without_perf_data_errors() {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        std::io::Write::write_all(&mut gz, &[0; 1024]).unwrap();
        let bytes = gz.finish().unwrap();
        let err = Capture::from_bytes(Path::new("a.kprof.tar.gz"), &bytes).unwrap_err();
        assert!(
            matches!(&err, Error::BadArchive { why, .. } if why.contains("no perf.data member")),
            "{err}"
        );
    }

    /// An archive of a manifest and a perf.data, as the agent writes one.
    fn archive(perf: &[u8], sha256: &str) -> Vec<u8> {
        let m = serde_json::json!({
            "schema": kprof_capture::MANIFEST_SCHEMA, "version": 1, "capture_id": "c",
            "agent_version": "t", "uname": {"sysname": "Linux", "nodename": "b",
            "release": "6.1", "version": "#1", "machine": "aarch64"},
            "events": [], "cpus": [0], "callchain": false, "start_time_ns": 1,
            "stop_time_ns": 2, "stop_reason": "duration", "kernel": {"release": "6.1"},
            "modules": [],
            "perf_data": {"file": "perf.data", "size": perf.len(), "sha256": sha256},
            "sysctl": {}
        });
        let json = serde_json::to_vec(&m).unwrap();
        let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        let mut tar = tar::Builder::new(gz);
        for (name, data) in [(kprof_capture::MANIFEST, &json[..]), ("perf.data", perf)] {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o600);
            tar.append_data(&mut h, name, data).unwrap();
        }
        tar.into_inner().unwrap().finish().unwrap()
    }

    /// perf.data is checked against the manifest's SHA-256 as it is unpacked: a match opens,
    /// a mismatch is a bad archive naming both digests.
    #[test]
    fn read_archive_perf_data_sha256_verified() {
        let mut perf = b"PERFILE2".to_vec();
        perf.extend_from_slice(&[7; 200]);
        let good = kprof_capture::build_id::hex(&sha2::Digest::finalize(
            <sha2::Sha256 as sha2::Digest>::new_with_prefix(&perf),
        ));
        let cap = Capture::from_bytes(Path::new("a.kprof.tar.gz"), &archive(&perf, &good));
        assert!(cap.is_ok(), "{:?}", cap.err());
        let bad = "0".repeat(64);
        let err =
            Capture::from_bytes(Path::new("a.kprof.tar.gz"), &archive(&perf, &bad)).unwrap_err();
        assert!(
            matches!(&err, Error::BadArchive { why, .. }
                if why.contains("SHA-256") && why.contains(&good) && why.contains(&bad)),
            "{err}"
        );
    }
}

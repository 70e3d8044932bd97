//! `perf archive` tarballs (`perf.data.tar.bz2`) as a symbol source: the binaries and debug
//! files of the objects that had samples, stored under `PATH/BUILD-ID/{elf,debug}` with
//! `.build-id/` symlinks to them. They are unpacked once into a cache directory, which is then
//! indexed by build-id like any other symbol path.

use crate::error::{Error, Result};
use sha2::Digest as _;
use std::cell::Cell;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::rc::Rc;

/// The first bytes of a bzip2 stream (`perf archive` compresses with bzip2).
pub const BZIP2_MAGIC: &[u8] = b"BZh";

/// Whether `path` is a file that starts like a bzip2 stream.
pub fn is_perf_archive(path: &Path) -> bool {
    let mut magic = [0u8; 3];
    path.is_file()
        && std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut magic))
            .is_ok()
        && magic == BZIP2_MAGIC
}

fn bad(archive: &Path, why: impl std::fmt::Display) -> Error {
    Error::BadPerfArchive {
        path: archive.to_path_buf(),
        why: why.to_string(),
    }
}

/// The directory below kprofctl's cache `cache` that archives are unpacked into.
pub fn cache_root(cache: &Path) -> PathBuf {
    cache.join("perf-archives")
}

/// Unpacks the `elf` and `debug` members of the tarball `archive` below `cache`, once per
/// version of the file (its path, size and modification time), and returns the directory.
pub fn unpack(archive: &Path, cache: &Path) -> Result<PathBuf> {
    let meta = std::fs::metadata(archive).map_err(|e| Error::io(archive, e))?;
    let canonical = archive
        .canonicalize()
        .unwrap_or_else(|_| archive.to_path_buf());
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let key = sha2::Sha256::digest(format!("{}\0{}\0{mtime}", canonical.display(), meta.len()));
    let hex: String = key[..12].iter().map(|b| format!("{b:02x}")).collect();
    let dir = cache_root(cache).join(hex);
    if dir.join(".complete").is_file() {
        return Ok(dir);
    }
    // The same limit as a capture: the tarball may come from anyone (a bug report), and
    // bzip2 inflates a few KiB of zeros to gigabytes.
    let limit = crate::limits::max_input_size()?;
    // A partial unpack (an earlier run stopped) is started over in a fresh directory.
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
    let file = std::fs::File::open(archive).map_err(|e| Error::io(archive, e))?;
    let reader = bzip2::read::BzDecoder::new(std::io::BufReader::new(file));
    let files = match unpack_members(reader, &dir, archive, limit) {
        Ok(n) => n,
        Err(e) => {
            // Nothing half-unpacked stays to fill the disk.
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    if files == 0 {
        return Err(bad(archive, "no binaries or debug files in it"));
    }
    let complete = dir.join(".complete");
    std::fs::write(&complete, b"").map_err(|e| Error::io(&complete, e))?;
    Ok(dir)
}

/// At most this many tar members (of any kind) are read: `perf archive` stores one file per
/// object that had samples, and a tarball of millions of empty members would run out the
/// file system's inodes or the time, not its bytes.
pub const MAX_MEMBERS: usize = 100_000;

/// Unpacks the regular-file members named `elf` or `debug` of the tar stream `tar` into `dir`
/// and returns how many there were. `archive` names the tarball in errors. The stream read,
/// and so what is written, stays within `limit` bytes; a member whose header claims more than
/// is left is refused before any of it is written.
pub fn unpack_members(tar: impl Read, dir: &Path, archive: &Path, limit: u64) -> Result<usize> {
    let over = Rc::new(Cell::new(false));
    let limited = crate::limits::Limited {
        inner: tar,
        left: limit,
        hit: Rc::clone(&over),
    };
    let mut tar = tar::Archive::new(limited);
    let mut files = 0usize;
    let mut written = 0u64;
    for (n, entry) in tar.entries().map_err(|e| bad(archive, e))?.enumerate() {
        if n >= MAX_MEMBERS {
            return Err(bad(archive, format!("more than {MAX_MEMBERS} members")));
        }
        let mut entry = entry.map_err(|e| read_error(archive, e, over.get(), limit))?;
        // Only regular files: the `.build-id/` symlinks add nothing the index does not find
        // by reading the files, and a symlink member could point outside the directory.
        if !entry.header().entry_type().is_file() {
            continue;
        }
        let path = entry.path().map_err(|e| bad(archive, e))?.into_owned();
        let wanted = path.file_name().is_some_and(|n| n == "elf" || n == "debug");
        if !wanted || !path.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        let size = entry.size();
        written = written.saturating_add(size);
        if written > limit {
            return Err(Error::TooLarge {
                path: archive.to_path_buf(),
                why: format!(
                    "member {} claims {size} bytes, past what it may unpack",
                    path.display()
                ),
                limit,
            });
        }
        if entry
            .unpack_in(dir)
            .map_err(|e| read_error(archive, e, over.get(), limit))?
        {
            files += 1;
        }
    }
    Ok(files)
}

/// The error of reading the stream: past the limit when [`crate::limits::Limited`] said so
/// (`over`; the tar reader wraps the I/O error in its own).
fn read_error(archive: &Path, e: std::io::Error, over: bool, limit: u64) -> Error {
    if over {
        Error::TooLarge {
            path: archive.to_path_buf(),
            why: "it decompresses to more than it may".into(),
            limit,
        }
    } else {
        bad(archive, e)
    }
}

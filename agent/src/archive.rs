//! The capture archive: `ID.kprof.tar.gz`, mode 0600, made visible only once complete
//! (written to a hidden temp name, synced, renamed, directory synced).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::Compression;
use kprof_capture::manifest::Summary;
use kprof_capture::{ARCHIVE_SUFFIX, MANIFEST};

use crate::gzip::GzStream;

/// One member of the archive.
#[derive(Debug)]
pub enum Member<'a> {
    /// Deflated, from memory: its name in the archive and its contents.
    Bytes(&'a str, &'a [u8]),
    /// Deflated.
    File(&'a str, &'a Path),
    /// Stored in the gzip stream as it is: for data compressed already (perf.data with zstd
    /// records) or left uncompressed to spare CPU.
    StoredFile(&'a str, &'a Path),
}

/// Writes `dir/ID.kprof.tar.gz` atomically and returns its path.
/// The manifest goes first so `list` can read it without inflating perf.data.
///
/// With `consume`, the files are given back to the filesystem as they are copied (their
/// copied part is punched out), so that an archive as big as its members fits on a full
/// disk; a failure then leaves them destroyed.
pub fn write(
    dir: &Path,
    id: &str,
    members: &[Member<'_>],
    mtime: u64,
    consume: bool,
) -> io::Result<PathBuf> {
    let final_path = dir.join(format!("{id}{ARCHIVE_SUFFIX}"));
    let tmp_path = dir.join(format!(".{id}{ARCHIVE_SUFFIX}.tmp"));
    let result = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp_path)?;
        // Level 1 for the text members (kallsyms: ~5:1); perf.data is stored.
        let gz = GzStream::new(
            io::BufWriter::with_capacity(256 * 1024, file),
            Compression::new(1),
        )?;
        let mut tar = tar::Builder::new(gz);
        for m in members {
            let mut h = tar::Header::new_gnu();
            h.set_mode(0o600);
            h.set_mtime(mtime);
            h.set_entry_type(tar::EntryType::Regular);
            tar.get_mut().store(matches!(m, Member::StoredFile(..)))?;
            match m {
                Member::Bytes(name, data) => {
                    h.set_size(data.len() as u64);
                    tar.append_data(&mut h, name, *data)?;
                }
                Member::File(name, path) | Member::StoredFile(name, path) => {
                    let f = OpenOptions::new().read(true).write(consume).open(path)?;
                    h.set_size(f.metadata()?.len());
                    if consume {
                        let r = Consuming {
                            f,
                            read: 0,
                            punched: 0,
                        };
                        tar.append_data(&mut h, name, r)?;
                    } else {
                        tar.append_data(&mut h, name, f)?;
                    }
                }
            }
        }
        tar.get_mut().store(false)?;
        let gz = tar.into_inner()?;
        let buf = gz.finish()?;
        let file = buf.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        fs::rename(&tmp_path, &final_path)?;
        File::open(dir)?.sync_all()
    })();
    if let Err(e) = result {
        let _ = fs::remove_file(&tmp_path);
        return Err(e);
    }
    Ok(final_path)
}

/// A file read once, front to back, whose read part is punched out (in steps of
/// [`PUNCH_STEP`]) so that its blocks are free for the archive being written.
struct Consuming {
    f: File,
    read: u64,
    punched: u64,
}

const PUNCH_STEP: u64 = 256 << 10;

impl Read for Consuming {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.f.read(buf)?;
        self.read += n as u64;
        let upto = self.read & !4095;
        if upto >= self.punched + PUNCH_STEP {
            // A filesystem without hole punching only means the archive may not fit.
            let r = crate::lfs::fallocate(
                &self.f,
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                self.punched,
                upto - self.punched,
            );
            if r.is_ok() {
                self.punched = upto;
            }
        }
        Ok(n)
    }
}

/// Reads and checks what `list` shows of `manifest.json` in an archive (it is the first
/// member; later ones are not inflated).
pub fn read_manifest(path: &Path) -> io::Result<Summary> {
    let f = File::open(path)?;
    let mut tar = tar::Archive::new(GzDecoder::new(io::BufReader::new(f)));
    for entry in tar.entries()? {
        let mut entry = entry?;
        if entry.path()?.as_os_str() == MANIFEST {
            let mut json = Vec::new();
            entry.read_to_end(&mut json)?;
            return Summary::from_json(&json)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e));
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        "archive has no manifest.json",
    ))
}

/// Extracts one member into memory.
pub fn read_member(path: &Path, name: &str) -> io::Result<Vec<u8>> {
    let f = File::open(path)?;
    let mut tar = tar::Archive::new(GzDecoder::new(io::BufReader::new(f)));
    for entry in tar.entries()? {
        let mut entry = entry?;
        if entry.path()?.as_os_str() == name {
            let mut v = Vec::new();
            entry.read_to_end(&mut v)?;
            return Ok(v);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!("archive has no {name}"),
    ))
}

/// SHA-256 of a file, lowercase hex.
pub fn sha256_file(path: &Path) -> io::Result<String> {
    use sha2::{Digest, Sha256};
    let mut f = File::open(path)?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(kprof_capture::build_id::hex(&h.finalize()))
}

/// Writes a small file with mode 0600.
pub fn write_private(path: &Path, data: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(data)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    /// The archive is 0600, has no temp file left, keeps member order, and reads back.
    #[test]
    fn write_archive_atomic_private_readable() {
        let dir = std::env::temp_dir().join(format!("kprof-archive-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let extra = dir.join("extra");
        fs::write(&extra, b"kallsyms text").unwrap();
        let path = write(
            &dir,
            "20260101-000000-abcd",
            &[
                Member::Bytes("a.txt", b"first"),
                Member::File("b.txt", &extra),
                Member::StoredFile("c.bin", &extra),
            ],
            0,
            false,
        )
        .unwrap();
        assert_eq!(path, dir.join("20260101-000000-abcd.kprof.tar.gz"));
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(read_member(&path, "b.txt").unwrap(), b"kallsyms text");
        assert_eq!(read_member(&path, "a.txt").unwrap(), b"first");
        assert_eq!(read_member(&path, "c.bin").unwrap(), b"kallsyms text");
        assert!(
            read_manifest(&path).is_err(),
            "no manifest member in this archive"
        );
        // Writing the same id again replaces the archive in one rename.
        let again = write(
            &dir,
            "20260101-000000-abcd",
            &[Member::Bytes("a.txt", b"x")],
            0,
            false,
        );
        assert!(
            again.is_ok(),
            "rename over an existing archive replaces it atomically"
        );
        let names: Vec<String> = fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        fs::remove_dir_all(&dir).unwrap();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    /// Consuming members: the archive holds them whole while their copied part is given
    /// back to the filesystem (the source's allocated blocks drop as it is read).
    #[test]
    fn write_archive_consume_punches_sources() {
        let dir = std::env::temp_dir().join(format!("kprof-consume-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let src = dir.join("perf.data");
        let data: Vec<u8> = (0..(5u32 << 20))
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        fs::write(&src, &data).unwrap();
        let path = write(
            &dir,
            "20260101-000000-abcd",
            &[Member::StoredFile("perf.data", &src)],
            0,
            true,
        )
        .unwrap();
        assert_eq!(read_member(&path, "perf.data").unwrap(), data);
        use std::os::unix::fs::MetadataExt;
        let blocks = fs::metadata(&src).unwrap().blocks() * 512;
        fs::remove_dir_all(&dir).unwrap();
        assert!(
            blocks <= 2 * PUNCH_STEP,
            "{blocks} bytes still allocated of {}",
            data.len()
        );
    }
}

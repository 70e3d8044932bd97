//! The capture archive: `ID.kprof.tar.gz`, mode 0600, made visible only once complete
//! (written to a hidden temp name, synced, renamed, directory synced).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use flate2::read::GzDecoder;
use flate2::Compression;
use kprof_capture::{Manifest, ARCHIVE_SUFFIX, MANIFEST};

use crate::gzip::GzStream;

/// One member of the archive.
#[derive(Debug)]
pub enum Member<'a> {
    Bytes(&'a str, &'a [u8]),
    /// Deflated.
    File(&'a str, &'a Path),
    /// Stored in the gzip stream as it is: for data compressed already (perf.data with zstd
    /// records) or left uncompressed to spare CPU.
    StoredFile(&'a str, &'a Path),
}

/// Writes `dir/ID.kprof.tar.gz` atomically and returns its path.
/// The manifest goes first so `list` can read it without inflating perf.data.
pub fn write(dir: &Path, id: &str, members: &[Member<'_>], mtime: u64) -> io::Result<PathBuf> {
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
                    let f = File::open(path)?;
                    h.set_size(f.metadata()?.len());
                    tar.append_data(&mut h, name, f)?;
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

/// Reads and checks `manifest.json` from an archive (it is the first member; later ones are
/// not inflated).
pub fn read_manifest(path: &Path) -> io::Result<Manifest> {
    let f = File::open(path)?;
    let mut tar = tar::Archive::new(GzDecoder::new(io::BufReader::new(f)));
    for entry in tar.entries()? {
        let mut entry = entry?;
        if entry.path()?.as_os_str() == MANIFEST {
            let mut json = Vec::new();
            entry.read_to_end(&mut json)?;
            return Manifest::from_json(&json)
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
}

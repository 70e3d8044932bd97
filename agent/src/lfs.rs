//! File-size calls whose libc types are 32 bits wide on 32-bit glibc (armhf, i386): there
//! `off_t` and `fsblkcnt_t` are 32-bit unless C code is built with `_FILE_OFFSET_BITS=64`,
//! which the `libc` crate's plain bindings are not. A perf.data past 2 GiB would get its
//! offsets truncated (a hole punched in the wrong place) and `statvfs` fail with EOVERFLOW on
//! a filesystem of more than 2^32 blocks. glibc's `*64` entry points take 64-bit values on
//! every architecture; musl's plain ones are 64-bit already (it has no `*64` in `libc`).

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

/// `fallocate(2)` over `offset..offset + len` of `f` with 64-bit offsets on every libc.
pub fn fallocate(f: &File, mode: libc::c_int, offset: u64, len: u64) -> io::Result<()> {
    let too_big = |what: &str, v: u64| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("fallocate {what} {v} is past the largest file offset (2^63 - 1)"),
        )
    };
    let offset = i64::try_from(offset).map_err(|_| too_big("offset", offset))?;
    let len = i64::try_from(len).map_err(|_| too_big("length", len))?;
    // SAFETY: fallocate on a descriptor the caller's `File` owns; plain integer arguments.
    #[cfg(target_env = "gnu")]
    let r = unsafe { libc::fallocate64(f.as_raw_fd(), mode, offset, len) };
    // SAFETY: as above; off_t is 64-bit on the other Linux libcs the agent is built with.
    #[cfg(not(target_env = "gnu"))]
    let r = unsafe {
        libc::fallocate(
            f.as_raw_fd(),
            mode,
            offset as libc::off_t,
            len as libc::off_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Bytes available to unprivileged users in the filesystem of `path` (`df`'s "Avail").
pub fn available_bytes(path: &CStr) -> io::Result<u64> {
    #[cfg(target_env = "gnu")]
    let (avail, frsize) = {
        // SAFETY: statvfs64 is plain data, filled by the call below.
        let mut st: libc::statvfs64 = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a valid struct pointer.
        if unsafe { libc::statvfs64(path.as_ptr(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        (st.f_bavail, st.f_frsize)
    };
    #[cfg(not(target_env = "gnu"))]
    let (avail, frsize) = {
        // SAFETY: statvfs is plain data, filled by the call below.
        let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: a NUL-terminated path and a valid struct pointer.
        if unsafe { libc::statvfs(path.as_ptr(), &mut st) } != 0 {
            return Err(io::Error::last_os_error());
        }
        (st.f_bavail, st.f_frsize)
    };
    #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
    Ok(u64::from(avail).saturating_mul(frsize as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// A hole punched past 4 GiB lands at its own offset: with a 32-bit `off_t` the offset
    /// would be cut to its low 32 bits and the hole punched over the data at 4 KiB instead.
    #[test]
    fn fallocate_punch_offset_past_4gib() {
        let path = std::env::temp_dir().join(format!("kprof-lfs-{}", std::process::id()));
        let f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let _ = std::fs::remove_file(&path);
        let high = (4u64 << 30) + 4096;
        f.set_len(high + 8192).unwrap();
        f.write_all_at(b"low!", 4096).unwrap();
        f.write_all_at(b"high", high).unwrap();
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        fallocate(&f, mode, high, 4096)
            .unwrap_or_else(|e| panic!("punching a hole in {}: {e}", path.display()));
        let mut buf = [0u8; 4];
        f.read_exact_at(&mut buf, 4096).unwrap();
        assert_eq!(&buf, b"low!");
        f.read_exact_at(&mut buf, high).unwrap();
        assert_eq!(buf, [0; 4]);
        assert_eq!(f.metadata().unwrap().len(), high + 8192);
    }

    /// An offset past `i64::MAX` is refused with the offset in the message, not wrapped.
    #[test]
    fn fallocate_offset_past_i64_refused() {
        let f = File::open("/proc/self/stat").unwrap();
        let e = fallocate(&f, 0, u64::MAX, 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains(&u64::MAX.to_string()), "{e}");
    }

    /// The root filesystem has some bytes available (in whole 512-byte units); a missing
    /// path is the OS error, not zero.
    #[test]
    fn available_bytes_root_and_missing_path() {
        let n = available_bytes(c"/").unwrap();
        let missing = available_bytes(c"/nonexistent/kprof").unwrap_err();
        assert_eq!(missing.raw_os_error(), Some(libc::ENOENT));
        assert!(n > 0 && n % 512 == 0, "{n}");
    }
}

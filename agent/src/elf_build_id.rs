//! Build-ids of files on the board: note files (`/sys/kernel/notes`, `/sys/module/*/notes/*`) and
//! ELF files' `PT_NOTE` segments (or `SHT_NOTE` sections when a file has no usable segment).
//!
//! Everything read from a file is bounds-checked: a malformed or hostile ELF yields `None`,
//! never a panic or a huge allocation.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

use kprof_capture::elf::ElfHeader;
use kprof_capture::{build_id, bytes};

const PT_NOTE: u32 = 4;
const SHT_NOTE: u32 = 7;
/// Notes bigger than this are not build-id notes worth reading.
const MAX_NOTE_BYTES: u64 = 1 << 20;
const MAX_HEADERS: usize = 4096;

/// The build-id in a note stream, owned.
fn build_id_in_notes(data: &[u8], big_endian: bool, align: usize) -> Option<Vec<u8>> {
    build_id::in_notes(data, big_endian, align).map(<[u8]>::to_vec)
}

/// Reads a native-endian note file such as `/sys/kernel/notes`.
pub fn build_id_of_note_file(path: &Path) -> io::Result<Option<Vec<u8>>> {
    let data = std::fs::read(path)?;
    Ok(build_id_in_notes(&data, cfg!(target_endian = "big"), 4))
}

/// The most read from one file looking for its build-id: headers, then a few notes.
const MAX_FILE_BYTES: u64 = 4 << 20;

/// Why a file's build-id was not read.
#[derive(Debug)]
pub enum Unread {
    /// The path names no regular file (now): what it is instead (`FIFO`, `device`...).
    NotRegular(&'static str),
    /// Opening or reading it failed.
    Io(io::Error),
}

impl std::fmt::Display for Unread {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unread::NotRegular(kind) => write!(f, "not a regular file (a {kind})"),
            Unread::Io(e) => write!(f, "{e}"),
        }
    }
}

/// The GNU build-id of an ELF file, `Ok(None)` when it is not ELF or carries none.
///
/// The agent runs as root and the path comes from a process's mappings, which that process's
/// owner can replace: a FIFO must not block the agent and a device must not even be opened
/// (opening /dev/watchdog arms it). So the path is opened with `O_PATH` first, which opens
/// nothing behind it, and only a regular file is opened for reading; at most
/// `MAX_FILE_BYTES` are read.
pub fn elf_build_id(path: &Path) -> Result<Option<Vec<u8>>, Unread> {
    let f = open_regular(path)?;
    let mut r = Bounded {
        inner: f,
        left: MAX_FILE_BYTES,
    };
    Ok(elf_build_id_from(&mut r))
}

/// Opens `path` for reading if it is a regular file, without opening anything else.
pub fn open_regular(path: &Path) -> Result<File, Unread> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Unread::Io(io::Error::from(io::ErrorKind::InvalidInput)))?;
    let read_flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    // SAFETY: open(2) on a NUL-terminated path; the result is checked and owned below.
    // O_NOFOLLOW: the kernel names mapped files by their real path, so a link there was put
    // in place since, by whoever owns the directory; with O_PATH it opens the link itself,
    // which check_regular refuses.
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_PATH | libc::O_CLOEXEC | libc::O_NOFOLLOW,
        )
    };
    let f = if fd >= 0 {
        use std::os::fd::FromRawFd;
        // SAFETY: a new descriptor nobody else owns.
        let opath = unsafe { File::from_raw_fd(fd) };
        check_regular(&opath)?;
        check_file_system(&opath)?;
        // Reopening the O_PATH descriptor opens the very inode just checked, whatever the
        // path names by now.
        let proc_path = format!("/proc/self/fd/{fd}");
        match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(read_flags)
            .open(&proc_path)
        {
            Ok(f) => f,
            // No /proc: open the path itself, still without blocking on a FIFO.
            Err(e) if e.kind() == io::ErrorKind::NotFound => std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(read_flags)
                .open(path)
                .map_err(Unread::Io)?,
            Err(e) => return Err(Unread::Io(e)),
        }
    } else {
        return Err(Unread::Io(io::Error::last_os_error()));
    };
    check_regular(&f)?;
    return Ok(f);

    fn check_regular(f: &File) -> Result<(), Unread> {
        let t = f.metadata().map_err(Unread::Io)?.file_type();
        if t.is_file() {
            return Ok(());
        }
        Err(Unread::NotRegular(if t.is_symlink() {
            "symbolic link"
        } else if t.is_fifo() {
            "FIFO"
        } else if t.is_char_device() || t.is_block_device() {
            "device"
        } else if t.is_dir() {
            "directory"
        } else if t.is_socket() {
            "socket"
        } else {
            "special file"
        }))
    }
}

/// Refuses a file of a pseudo file system: reading a "regular" file of procfs, sysfs,
/// debugfs, tracefs, securityfs or configfs can block, has side effects, or is endless, and
/// none holds an ELF file a process mapped.
fn check_file_system(f: &File) -> Result<(), Unread> {
    use std::os::fd::AsRawFd;
    // The magic numbers of linux/magic.h.
    const PSEUDO: [(i64, &str); 6] = [
        (0x9fa0, "file of procfs"),
        (0x6265_6572, "file of sysfs"),
        (0x6462_6720, "file of debugfs"),
        (0x7472_6163, "file of tracefs"),
        (0x7363_6673, "file of securityfs"),
        (0x6265_6570, "file of configfs"),
    ];
    let mut st = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: fstatfs(2) on an open descriptor (O_PATH is accepted) into a buffer of the
    // right type; it is read only when the call succeeded.
    let rc = unsafe { libc::fstatfs(f.as_raw_fd(), st.as_mut_ptr()) };
    if rc != 0 {
        return Ok(()); // unknown: the regular-file check already passed
    }
    // f_type is an i64 here and an i32 on 32-bit Arm: the conversion is needed there.
    #[allow(clippy::useless_conversion)]
    // SAFETY: fstatfs succeeded and filled it.
    let kind = i64::from(unsafe { st.assume_init() }.f_type);
    match PSEUDO.iter().find(|(magic, _)| *magic == kind) {
        Some((_, what)) => Err(Unread::NotRegular(what)),
        None => Ok(()),
    }
}

/// A reader that fails once it has read `left` bytes.
struct Bounded<R> {
    inner: R,
    left: u64,
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("read limit reached"));
        }
        let n = buf.len().min(self.left.min(usize::MAX as u64) as usize);
        let got = self.inner.read(&mut buf[..n])?;
        self.left -= got as u64;
        Ok(got)
    }
}

impl<R: Seek> Seek for Bounded<R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}

struct Ident {
    is64: bool,
    be: bool,
}

impl Ident {
    fn u32(&self, b: &[u8], o: usize) -> Option<u64> {
        bytes::u32_at(b, o, self.be).map(u64::from)
    }
    fn u64(&self, b: &[u8], o: usize) -> Option<u64> {
        bytes::u64_at(b, o, self.be)
    }
}

/// A note segment's or section's alignment as `in_notes` takes it: 8 means 8-byte padding,
/// anything else 4. `as usize` on 32-bit would turn a corrupt 2^32 + 8 into 8.
fn note_align(align: u64) -> usize {
    usize::try_from(align).unwrap_or(0)
}

fn read_at<R: Read + Seek>(r: &mut R, off: u64, len: u64) -> Option<Vec<u8>> {
    if len > MAX_NOTE_BYTES {
        return None;
    }
    r.seek(SeekFrom::Start(off)).ok()?;
    let mut buf = Vec::new();
    r.take(len).read_to_end(&mut buf).ok()?;
    (buf.len() as u64 == len).then_some(buf)
}

/// Build-id of an ELF image behind any seekable reader; `None` for anything malformed.
pub fn elf_build_id_from<R: Read + Seek>(r: &mut R) -> Option<Vec<u8>> {
    let eh = read_at(r, 0, 64).or_else(|| read_at(r, 0, 52))?;
    let h = ElfHeader::parse(&eh).ok()?;
    let id = Ident {
        is64: h.is_64,
        be: h.big_endian,
    };
    let ph = h.program_headers(&eh)?;
    let sh = h.section_headers(&eh)?;
    let (phoff, phentsize, phnum) = (ph.offset, u64::from(ph.entsize), u64::from(ph.count));
    let (shoff, shentsize, shnum) = (sh.offset, u64::from(sh.entsize), u64::from(sh.count));
    let mut from_segments = || -> Option<Vec<u8>> {
        let min = if id.is64 { 56 } else { 32 };
        if phoff == 0 || phentsize < min || phnum as usize > MAX_HEADERS {
            return None;
        }
        let table = read_at(r, phoff, phentsize.checked_mul(phnum)?)?;
        for i in 0..phnum as usize {
            let p = &table[i * phentsize as usize..];
            if id.u32(p, 0)? as u32 != PT_NOTE {
                continue;
            }
            let (off, filesz, align) = if id.is64 {
                (id.u64(p, 8)?, id.u64(p, 32)?, id.u64(p, 48)?)
            } else {
                (id.u32(p, 4)?, id.u32(p, 16)?, id.u32(p, 28)?)
            };
            if let Some(bid) = read_at(r, off, filesz)
                .and_then(|d| build_id_in_notes(&d, id.be, note_align(align)))
            {
                return Some(bid);
            }
        }
        None
    };
    if let Some(b) = from_segments() {
        return Some(b);
    }
    let min = if id.is64 { 64 } else { 40 };
    if shoff == 0 || shentsize < min || shnum as usize > MAX_HEADERS {
        return None;
    }
    let table = read_at(r, shoff, shentsize.checked_mul(shnum)?)?;
    for i in 0..shnum as usize {
        let s = &table[i * shentsize as usize..];
        if id.u32(s, 4)? as u32 != SHT_NOTE {
            continue;
        }
        let (off, size, align) = if id.is64 {
            (id.u64(s, 24)?, id.u64(s, 32)?, id.u64(s, 48)?)
        } else {
            (id.u32(s, 16)?, id.u32(s, 20)?, id.u32(s, 32)?)
        };
        if let Some(bid) =
            read_at(r, off, size).and_then(|d| build_id_in_notes(&d, id.be, note_align(align)))
        {
            return Some(bid);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// Builds a minimal ELF with one PT_NOTE segment holding a build-id note.
    fn tiny_elf(is64: bool, be: bool, bid: &[u8]) -> Vec<u8> {
        let w16 = |v: u16| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w32 = |v: u32| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let w64 = |v: u64| if be { v.to_be_bytes() } else { v.to_le_bytes() };
        let mut note = Vec::new();
        note.extend(w32(4));
        note.extend(w32(bid.len() as u32));
        note.extend(w32(3));
        note.extend(b"GNU\0");
        note.extend(bid);
        while note.len() % 4 != 0 {
            note.push(0);
        }
        let ehsize = if is64 { 64 } else { 52 };
        let phentsize = if is64 { 56 } else { 32 };
        let note_off = ehsize + phentsize;
        let mut e = vec![
            0x7f,
            b'E',
            b'L',
            b'F',
            if is64 { 2 } else { 1 },
            if be { 2 } else { 1 },
            1,
        ];
        e.resize(16, 0);
        e.extend(w16(2)); // e_type
        e.extend(w16(if is64 { 62 } else { 3 }));
        e.extend(w32(1));
        if is64 {
            e.extend(w64(0)); // entry
            e.extend(w64(ehsize as u64)); // phoff
            e.extend(w64(0)); // shoff
        } else {
            e.extend(w32(0));
            e.extend(w32(ehsize as u32));
            e.extend(w32(0));
        }
        e.extend(w32(0)); // flags
        e.extend(w16(ehsize as u16));
        e.extend(w16(phentsize as u16));
        e.extend(w16(1)); // phnum
        e.extend(w16(0));
        e.extend(w16(0));
        e.extend(w16(0));
        assert_eq!(e.len(), ehsize);
        if is64 {
            e.extend(w32(PT_NOTE));
            e.extend(w32(4));
            e.extend(w64(note_off as u64));
            e.extend(w64(0));
            e.extend(w64(0));
            e.extend(w64(note.len() as u64));
            e.extend(w64(note.len() as u64));
            e.extend(w64(4));
        } else {
            e.extend(w32(PT_NOTE));
            e.extend(w32(note_off as u32));
            e.extend(w32(0));
            e.extend(w32(0));
            e.extend(w32(note.len() as u32));
            e.extend(w32(note.len() as u32));
            e.extend(w32(4));
            e.extend(w32(4));
        }
        e.extend(note);
        e
    }

    /// 32/64-bit and little/big-endian ELF files all yield their build-id.
    #[test]
    fn parse_elf_build_id_all_classes_and_endians() {
        let bid: Vec<u8> = (1..=20).collect();
        for is64 in [false, true] {
            for be in [false, true] {
                let elf = tiny_elf(is64, be, &bid);
                assert_eq!(
                    elf_build_id_from(&mut Cursor::new(elf)),
                    Some(bid.clone()),
                    "{is64} {be}"
                );
            }
        }
    }

    /// A 64-bit ELF whose note alignment is 2^32 + 8 (corrupt) is read with 4-byte padding
    /// as on a 64-bit host, also where usize is 32 bits (it would be cut to 8 there).
    #[test]
    fn parse_elf_build_id_huge_align_not_truncated() {
        let bid: Vec<u8> = (1..=18).collect();
        let mut elf = tiny_elf(true, false, &bid);
        let p_align = 64 + 48;
        elf[p_align..p_align + 8].copy_from_slice(&((1u64 << 32) | 8).to_le_bytes());
        assert_eq!(elf_build_id_from(&mut Cursor::new(elf)), Some(bid));
    }

    /// Truncated and corrupted ELF images give `None` instead of panicking.
    #[test]
    fn parse_elf_build_id_malformed_none() {
        let elf = tiny_elf(true, false, &[7; 20]);
        for n in 0..elf.len() {
            let _ = elf_build_id_from(&mut Cursor::new(elf[..n].to_vec()));
        }
        for i in 0..elf.len() {
            let mut bad = elf.clone();
            bad[i] = bad[i].wrapping_add(0x80);
            let _ = elf_build_id_from(&mut Cursor::new(bad));
        }
        assert_eq!(
            elf_build_id_from(&mut Cursor::new(b"not an elf".to_vec())),
            None
        );
    }

    /// A real ELF on this system (the test binary itself) has a build-id readelf would show.
    #[test]
    fn parse_elf_build_id_running_binary() {
        let exe = std::env::current_exe().unwrap();
        let bid = elf_build_id(&exe).unwrap();
        assert!(bid.is_none_or(|b| b.len() >= 8));
    }

    /// A FIFO (even one with no writer, which a plain open would wait on forever) and a
    /// device are refused without being opened for reading, named for what they are.
    /// Issue 36, item 13: a link put where a mapped file was is not followed (before: it
    /// was, to whatever it named), and files of pseudo file systems are not read.
    #[test]
    fn open_build_id_symlink_and_pseudo_fs_refused() {
        let dir = std::env::temp_dir().join(format!("kprof-bid-link-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let link = dir.join("libc.so.6");
        std::os::unix::fs::symlink(std::env::current_exe().unwrap(), &link).unwrap();
        let why = |p: &Path| match elf_build_id(p) {
            Err(Unread::NotRegular(k)) => k,
            other => panic!("{}: {other:?}", p.display()),
        };
        assert_eq!(why(&link), "symbolic link");
        assert_eq!(why(Path::new("/proc/self/status")), "file of procfs");
        assert_eq!(why(Path::new("/sys/kernel/notes")), "file of sysfs");
        assert!(elf_build_id(&std::env::current_exe().unwrap()).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn open_build_id_fifo_and_device_refused() {
        let dir = std::env::temp_dir().join(format!("kprof-fifo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("lib.so");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        let f2 = fifo.clone();
        std::thread::spawn(move || tx.send(elf_build_id(&f2).map_err(|e| e.to_string())));
        let r = rx
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("reading a FIFO's build-id blocked");
        assert_eq!(r.unwrap_err(), "not a regular file (a FIFO)");
        match elf_build_id(Path::new("/dev/null")) {
            Err(Unread::NotRegular("device")) => {}
            other => panic!("/dev/null: {other:?}"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

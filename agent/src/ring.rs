//! One CPU's perf ring buffer: the mmap'd control page plus 2^n data pages.
//!
//! The consumer protocol is the kernel's (include/uapi/linux/perf_event.h): load `data_head`
//! with acquire ordering, read records up to it, then store `data_tail` with release ordering
//! so the kernel may reuse the space.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Offsets of `data_head` and `data_tail` in `struct perf_event_mmap_page`.
const DATA_HEAD: usize = 1024;
const DATA_TAIL: usize = 1032;

/// A mapped ring buffer; unmapped on drop.
#[derive(Debug)]
pub struct Ring {
    fd: OwnedFd,
    base: *mut u8,
    map_len: usize,
    page: usize,
    data_size: usize,
    /// Records that wrap around the end of the buffer are reassembled here.
    scratch: Vec<u8>,
    /// Batches cut short by a corrupt record header, and the bytes dropped with them.
    dropped_batches: u64,
    dropped_bytes: u64,
}

impl Ring {
    /// Maps `1 + pages` pages of `fd`; `pages` must be a power of two.
    pub fn new(fd: OwnedFd, pages: usize) -> io::Result<Ring> {
        let page = crate::sys::page_size();
        // On 32-bit, --mmap-pages' 2^20 pages of 4 KiB are already past the address space: a
        // wrapped length would map a ring without data pages.
        let map_len = pages
            .checked_add(1)
            .and_then(|n| n.checked_mul(page))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "a ring buffer of {pages} pages of {page} bytes does not fit in this \
                         {}-bit address space: lower --mmap-pages",
                        usize::BITS
                    ),
                )
            })?;
        // SAFETY: mapping a perf event fd with a length of 1+2^n pages is the documented use;
        // the kernel validates everything else and we check for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Ring {
            fd,
            base: base as *mut u8,
            map_len,
            page,
            data_size: map_len - page,
            scratch: Vec::new(),
            dropped_batches: 0,
            dropped_bytes: 0,
        })
    }

    /// The perf event the ring belongs to, for enabling, disabling and polling it.
    pub fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// `(batches, bytes)` dropped so far because a record header was corrupt: the records in
    /// those bytes are lost, and no LOST record counts them.
    pub fn dropped(&self) -> (u64, u64) {
        (self.dropped_batches, self.dropped_bytes)
    }

    fn head(&self) -> &AtomicU64 {
        // SAFETY: the control page is mapped for our lifetime and data_head is an aligned u64
        // the kernel only writes; AtomicU64 has the same layout as u64.
        unsafe { &*(self.base.add(DATA_HEAD) as *const AtomicU64) }
    }

    fn tail(&self) -> &AtomicU64 {
        // SAFETY: as for `head`; data_tail is the u64 the consumer owns.
        unsafe { &*(self.base.add(DATA_TAIL) as *const AtomicU64) }
    }

    /// Whether more than half of the ring holds records not yet drained: the consumer is
    /// falling behind the kernel.
    pub fn behind(&self) -> bool {
        // Positions wrap at the kernel's `unsigned long`, as in `drain`.
        let head = self.head().load(Ordering::Acquire) as usize;
        let tail = self.tail().load(Ordering::Relaxed) as usize;
        head.wrapping_sub(tail) > self.data_size / 2
    }

    /// Hands every complete record to `f` (header included), releasing its space after each.
    /// Returns the number of bytes consumed.
    ///
    /// Positions are counted in the kernel's `unsigned long` (`rb->head`), which a 32-bit
    /// kernel stores into the u64 `data_head` zero-extended: it wraps at 4 GiB there, so the
    /// arithmetic wraps at `usize` (the same width on Linux) instead of comparing u64s.
    pub fn drain<E>(&mut self, mut f: impl FnMut(&[u8]) -> Result<(), E>) -> Result<u64, E> {
        let head = self.head().load(Ordering::Acquire) as usize;
        let start = self.tail().load(Ordering::Relaxed) as usize;
        let mut tail = start;
        let mask = self.data_size - 1;
        // SAFETY: the data area follows the control page and is `data_size` bytes long.
        let data = unsafe { std::slice::from_raw_parts(self.base.add(self.page), self.data_size) };
        let mut result = Ok(());
        while tail != head {
            let pending = head.wrapping_sub(tail);
            let off = tail & mask;
            // Headers are 8-aligned and the buffer size a multiple of 8: never split.
            let size = u16::from_ne_bytes([data[off + 6], data[off + 7]]) as usize;
            if size < 8 || size > pending {
                // A corrupt header would loop forever, and nothing tells where the next record
                // starts: drop what is left of this batch, counted as lost.
                self.dropped_batches += 1;
                self.dropped_bytes += pending as u64;
                tail = head;
                break;
            }
            let end = off + size;
            let rec = if end <= self.data_size {
                &data[off..end]
            } else {
                self.scratch.clear();
                self.scratch.extend_from_slice(&data[off..]);
                self.scratch
                    .extend_from_slice(&data[..end - self.data_size]);
                &self.scratch[..]
            };
            tail = tail.wrapping_add(size);
            if let Err(e) = f(rec) {
                result = Err(e);
                break;
            }
            // Handed over: the kernel may reuse the space now, not only once the whole batch
            // is through (the sink may spend a while compressing in the middle of it).
            self.tail().store(tail as u64, Ordering::Release);
        }
        self.tail().store(tail as u64, Ordering::Release);
        result.map(|()| tail.wrapping_sub(start) as u64)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: base/map_len are exactly what mmap returned and nothing borrows the mapping
        // past this point.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.map_len);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::FromRawFd;

    /// A ring laid out as the kernel's (control page, then `pages` data pages) over a memfd,
    /// so the test writes the records and `data_head` itself.
    fn memfd_ring(pages: usize) -> Ring {
        // SAFETY: memfd_create with a NUL-terminated name; the fd is checked and owned below.
        let fd = unsafe { libc::memfd_create(c"kprof-ring-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
        // SAFETY: a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let len = (pages + 1) * crate::sys::page_size();
        // SAFETY: ftruncate on our own memfd.
        let r = unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) };
        assert_eq!(r, 0);
        Ring::new(fd, pages).unwrap()
    }

    /// Writes a record at data offset `at`, wrapping around the end of the data area as the
    /// kernel does.
    fn put_record(r: &mut Ring, at: usize, ty: u32, size: u16) {
        let mut rec = vec![0u8; size.max(8) as usize];
        rec[..4].copy_from_slice(&ty.to_ne_bytes());
        rec[6..8].copy_from_slice(&size.to_ne_bytes());
        for (i, b) in rec.into_iter().enumerate() {
            let off = (at + i) % r.data_size;
            // SAFETY: `off` lies inside the data area, which we own mapped.
            unsafe { *r.base.add(r.page + off) = b };
        }
    }

    /// A ring larger than the address space is refused with the size and the option to
    /// lower, instead of mapping a wrapped length.
    #[test]
    fn new_ring_past_address_space_refused() {
        // SAFETY: memfd_create with a NUL-terminated name; the fd is checked and owned below.
        let fd = unsafe { libc::memfd_create(c"kprof-ring-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0, "memfd_create: {}", io::Error::last_os_error());
        // SAFETY: a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let pages = 1usize << (usize::BITS - 12);
        let e = Ring::new(fd, pages).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(e.to_string().contains("lower --mmap-pages"), "{e}");
    }

    /// A record header whose size is below 8 drops the rest of the batch (the reader cannot
    /// know where the next record starts) and counts those bytes as lost; the records before
    /// it are handed over and the tail reaches the head.
    #[test]
    fn drain_ring_corrupt_header_counted_lost() {
        let mut r = memfd_ring(1);
        put_record(&mut r, 0, 9, 24);
        put_record(&mut r, 24, 9, 32);
        put_record(&mut r, 56, 9, 4); // corrupt: size 4
        put_record(&mut r, 64, 9, 40); // unreachable behind it
        r.head().store(104, Ordering::Release);
        let mut seen = Vec::new();
        let consumed = r
            .drain(|rec| -> Result<(), ()> {
                seen.push(rec.len());
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, [24, 32]);
        assert_eq!(consumed, 104);
        assert_eq!(r.tail().load(Ordering::Acquire), 104);
        assert_eq!(r.dropped(), (1, 104 - 56));

        // A header claiming more than the kernel has written is corrupt too.
        put_record(&mut r, 104, 9, 200);
        r.head().store(104 + 64, Ordering::Release);
        r.drain(|_| -> Result<(), ()> { panic!("no record is whole") })
            .unwrap();
        assert_eq!(r.dropped(), (2, 48 + 64));
    }

    /// Positions wrap at the width of the kernel's `unsigned long` (4 GiB on a 32-bit
    /// kernel): records written across the wrap, head numerically below tail, are all handed
    /// over in order and the tail follows the head through the wrap.
    #[test]
    fn drain_ring_position_wrap_follows_head() {
        let mut r = memfd_ring(1);
        let start = usize::MAX - 23; // 8-aligned, 24 bytes before the wrap
        let mask = r.data_size - 1;
        put_record(&mut r, start & mask, 9, 16);
        put_record(&mut r, (start + 16) & mask, 9, 24); // crosses the wrap
        let head = start.wrapping_add(40);
        assert!(head < start);
        r.tail().store(start as u64, Ordering::Release);
        r.head().store(head as u64, Ordering::Release);
        let mut seen = Vec::new();
        let consumed = r
            .drain(|rec| -> Result<(), ()> {
                seen.push(rec.len());
                Ok(())
            })
            .unwrap();
        assert_eq!(seen, [16, 24]);
        assert_eq!(consumed, 40);
        assert_eq!(r.tail().load(Ordering::Acquire), head as u64);
        assert_eq!(r.dropped(), (0, 0));
    }
}

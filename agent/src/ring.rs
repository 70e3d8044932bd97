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
}

impl Ring {
    /// Maps `1 + pages` pages of `fd`; `pages` must be a power of two.
    pub fn new(fd: OwnedFd, pages: usize) -> io::Result<Ring> {
        let page = crate::sys::page_size();
        let map_len = (pages + 1) * page;
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
            data_size: pages * page,
            scratch: Vec::new(),
        })
    }

    pub fn fd(&self) -> &OwnedFd {
        &self.fd
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

    /// Hands every complete record to `f` (header included), releasing its space after each.
    /// Returns the number of bytes consumed.
    pub fn drain<E>(&mut self, mut f: impl FnMut(&[u8]) -> Result<(), E>) -> Result<u64, E> {
        let head = self.head().load(Ordering::Acquire);
        let start = self.tail().load(Ordering::Relaxed);
        let mut tail = start;
        let mask = self.data_size as u64 - 1;
        // SAFETY: the data area follows the control page and is `data_size` bytes long.
        let data = unsafe { std::slice::from_raw_parts(self.base.add(self.page), self.data_size) };
        let mut result = Ok(());
        while tail < head {
            let off = (tail & mask) as usize;
            // Headers are 8-aligned and the buffer size a multiple of 8: never split.
            let size = u16::from_ne_bytes([data[off + 6], data[off + 7]]) as u64;
            if size < 8 || tail + size > head {
                // A corrupt header would loop forever: drop what is left of this batch.
                tail = head;
                break;
            }
            let end = off + size as usize;
            let rec = if end <= self.data_size {
                &data[off..end]
            } else {
                self.scratch.clear();
                self.scratch.extend_from_slice(&data[off..]);
                self.scratch
                    .extend_from_slice(&data[..end - self.data_size]);
                &self.scratch[..]
            };
            if let Err(e) = f(rec) {
                result = Err(e);
                tail += size;
                break;
            }
            tail += size;
            // Handed over: the kernel may reuse the space now, not only once the whole batch
            // is through (the sink may spend a while compressing in the middle of it).
            self.tail().store(tail, Ordering::Release);
        }
        self.tail().store(tail, Ordering::Release);
        result.map(|()| tail - start)
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

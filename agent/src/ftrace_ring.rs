//! One page of ftrace's per-CPU ring buffer as `per_cpu/cpuN/trace_pipe_raw` hands it out,
//! parsed without I/O: the page header as tracefs' `events/header_page` describes it, the
//! lost-events flags of its commit word, and its events (`events/header_event`: a 32-bit
//! header of `type_len:5, time_delta:27`, then data or a time stamp), yielding each data
//! event's time and payload. The kernel's reader (kernel/trace/ring_buffer.c,
//! `rb_update_read_stamp`, `rb_event_length`, `ring_buffer_read_page`) is the reference;
//! libtraceevent's kbuffer reads the same layout.
//!
//! Nothing here trusts the page: every length is checked and a malformed page ends the walk
//! (told by [`Events::broken`]) instead of panicking.

use std::fmt;

/// The commit word's flag: events were lost before this page (`RB_MISSED_EVENTS`).
const MISSED_EVENTS: u64 = 1 << 31;
/// The commit word's flag: the lost count is stored after the data (`RB_MISSED_STORED`).
const MISSED_STORED: u64 = 1 << 30;
/// Bits of the commit word below the flags: the bytes of event data.
const COMMIT_MASK: u64 = MISSED_STORED - 1;
/// type_len values above the data lengths (`header_event`).
const TYPE_PADDING: u32 = 29;
const TYPE_TIME_EXTEND: u32 = 30;
const TYPE_TIME_STAMP: u32 = 31;
/// Bits of `time_delta`; a time extend's `array[0]` holds the bits above them.
const TS_SHIFT: u32 = 27;
/// The top bits an absolute time stamp does not carry (`TS_MSB`, `rb_fix_abs_ts`).
const TS_MSB: u64 = 0xf8 << 56;

/// Where the page header's fields sit, from `events/header_page`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLayout {
    /// `u64 timestamp`: offset (its size is 8).
    pub timestamp: usize,
    /// `local_t commit`: offset and size (8 on 64-bit kernels, 4 on 32-bit).
    pub commit: (usize, usize),
    /// `char data`: offset and size (the sub-buffer's room for events).
    pub data: (usize, usize),
}

/// Why `events/header_page` could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LayoutError {
    /// A field the page walk needs is not described (or not with a usable size).
    MissingField(&'static str),
}

impl fmt::Display for LayoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LayoutError::MissingField(name) => write!(
                f,
                "events/header_page describes no usable `{name}` field (an unknown ring \
                 buffer page layout)"
            ),
        }
    }
}

impl std::error::Error for LayoutError {}

impl PageLayout {
    /// Reads the layout from the text of `events/header_page`.
    pub fn parse(header_page: &str) -> Result<PageLayout, LayoutError> {
        let field = |want: &'static str| -> Option<(usize, usize)> {
            header_page.lines().find_map(|l| {
                let decl = l.trim().strip_prefix("field:")?;
                let (decl, rest) = decl.split_once(';')?;
                if decl.split_whitespace().last()? != want {
                    return None;
                }
                let num = |key: &str| -> Option<usize> {
                    let v = rest.split(';').find_map(|p| p.trim().strip_prefix(key))?;
                    v.trim().parse().ok()
                };
                Some((num("offset:")?, num("size:")?))
            })
        };
        let ts = field("timestamp").filter(|&(_, s)| s == 8);
        let commit = field("commit").filter(|&(_, s)| s == 4 || s == 8);
        let data = field("data");
        Ok(PageLayout {
            timestamp: ts.ok_or(LayoutError::MissingField("timestamp"))?.0,
            commit: commit.ok_or(LayoutError::MissingField("commit"))?,
            data: data.ok_or(LayoutError::MissingField("data"))?,
        })
    }

    /// Bytes of one page (sub-buffer) as `trace_pipe_raw` reads it: header and data.
    pub fn page_size(&self) -> usize {
        self.data.0.saturating_add(self.data.1)
    }
}

/// Events lost before a page, as its commit word tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missed {
    /// None.
    None,
    /// Some, how many unknown (no room on the page for the count).
    Unknown,
    /// This many.
    Count(u64),
}

/// Why a page could not be walked at all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PageError {
    /// Shorter than its header.
    Short(usize),
    /// The commit word claims more data than the page holds.
    CommitTooLarge(u64),
}

impl fmt::Display for PageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PageError::Short(n) => {
                write!(f, "ring buffer page of {n} bytes, shorter than its header")
            }
            PageError::CommitTooLarge(c) => {
                write!(f, "ring buffer page commit {c} is beyond the page")
            }
        }
    }
}

impl std::error::Error for PageError {}

/// A page's header and its event data.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// The time of the page's first event delta, in the buffer's `trace_clock`.
    pub timestamp: u64,
    /// Events lost before this page.
    pub missed: Missed,
    data: &'a [u8],
    big_endian: bool,
}

/// One data event: its time and its record bytes (for a trace event: `common_type` and the
/// other fields of its tracefs format; rounded up to 4 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event<'a> {
    /// Its time, in the buffer's `trace_clock`.
    pub timestamp: u64,
    /// Its record.
    pub payload: &'a [u8],
}

fn read_uint(b: &[u8], at: usize, size: usize, big_endian: bool) -> Option<u64> {
    let bytes = b.get(at..at.checked_add(size)?)?;
    let mut v = 0u64;
    if big_endian {
        for &x in bytes {
            v = (v << 8) | u64::from(x);
        }
    } else {
        for &x in bytes.iter().rev() {
            v = (v << 8) | u64::from(x);
        }
    }
    Some(v)
}

impl<'a> Page<'a> {
    /// Parses a page read from `trace_pipe_raw` (written by a kernel of `big_endian` order).
    pub fn parse(l: &PageLayout, bytes: &'a [u8], big_endian: bool) -> Result<Page<'a>, PageError> {
        let short = || PageError::Short(bytes.len());
        let timestamp = read_uint(bytes, l.timestamp, 8, big_endian).ok_or_else(short)?;
        let commit = read_uint(bytes, l.commit.0, l.commit.1, big_endian).ok_or_else(short)?;
        let len = commit & COMMIT_MASK;
        let data = bytes.get(l.data.0..).ok_or_else(short)?;
        if len > l.data.1 as u64 || len > data.len() as u64 {
            return Err(PageError::CommitTooLarge(len));
        }
        let len = len as usize;
        let missed = if commit & MISSED_EVENTS == 0 {
            Missed::None
        } else if commit & MISSED_STORED != 0 {
            // The count is an `unsigned long`, the size of `local_t`.
            read_uint(data, len, l.commit.1, big_endian).map_or(Missed::Unknown, Missed::Count)
        } else {
            Missed::Unknown
        };
        Ok(Page {
            timestamp,
            missed,
            data: &data[..len],
            big_endian,
        })
    }

    /// The page's data events, in order.
    pub fn events(&self) -> Events<'a> {
        Events {
            data: self.data,
            pos: 0,
            ts: self.timestamp,
            big_endian: self.big_endian,
            broken: false,
        }
    }
}

/// The data events of a page; see [`Page::events`].
#[derive(Debug, Clone)]
pub struct Events<'a> {
    data: &'a [u8],
    pos: usize,
    ts: u64,
    big_endian: bool,
    broken: bool,
}

impl Events<'_> {
    /// Whether the walk stopped at a malformed event (a length past the page's data) rather
    /// than at the end of the data.
    pub fn broken(&self) -> bool {
        self.broken
    }

    fn u32_at(&self, at: usize) -> Option<u32> {
        read_uint(self.data, at, 4, self.big_endian).map(|v| v as u32)
    }
}

/// An absolute time stamp carries 59 bits; the top ones come from the time before it.
fn fix_abs_ts(abs: u64, before: u64) -> u64 {
    if before & TS_MSB == 0 {
        return abs;
    }
    let t = abs | (before & TS_MSB);
    if t < before {
        t.wrapping_add(1 << 59)
    } else {
        t
    }
}

impl<'a> Iterator for Events<'a> {
    type Item = Event<'a>;

    fn next(&mut self) -> Option<Event<'a>> {
        loop {
            if self.broken || self.pos >= self.data.len() {
                return None;
            }
            let Some(hdr) = self.u32_at(self.pos) else {
                self.broken = true;
                return None;
            };
            let (type_len, delta) = if self.big_endian {
                (hdr >> TS_SHIFT, hdr & ((1 << TS_SHIFT) - 1))
            } else {
                (hdr & 0x1f, hdr >> 5)
            };
            let array0 = self.u32_at(self.pos + 4);
            let (start, len, advance) = match (type_len, array0) {
                // The rest of the page is padding.
                (TYPE_PADDING, _) if delta == 0 => return None,
                // A discarded event: skipped, its delta not counted (as the kernel's reader).
                (TYPE_PADDING, Some(a)) => (0, 0, 4 + a as usize),
                (TYPE_TIME_EXTEND, Some(a)) => {
                    self.ts = self
                        .ts
                        .wrapping_add((u64::from(a) << TS_SHIFT) + u64::from(delta));
                    (0, 0, 8)
                }
                (TYPE_TIME_STAMP, Some(a)) => {
                    let abs = (u64::from(a) << TS_SHIFT) | u64::from(delta);
                    self.ts = fix_abs_ts(abs, self.ts);
                    (0, 0, 8)
                }
                // array[0] counts itself and the data.
                (0, Some(a)) if a >= 4 => {
                    let len = a as usize - 4;
                    (8, len, 8 + ((len + 3) & !3))
                }
                (1..=28, _) => (4, type_len as usize * 4, 4 + type_len as usize * 4),
                _ => {
                    self.broken = true;
                    return None;
                }
            };
            let at = self.pos;
            let end = at.checked_add(advance).filter(|&e| e <= self.data.len());
            let Some(end) = end else {
                self.broken = true;
                return None;
            };
            self.pos = end;
            if type_len <= 28 {
                self.ts = self.ts.wrapping_add(u64::from(delta));
                return Some(Event {
                    timestamp: self.ts,
                    payload: &self.data[at + start..at + start + len],
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This host's `events/header_page` (x86_64, kernel 6.18).
    const HEADER_PAGE_64: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
        \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
        \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield: char data;\toffset:16;\tsize:4080;\tsigned:0;\n";
    /// A 32-bit kernel's (armhf), where `local_t` is 4 bytes.
    const HEADER_PAGE_32: &str = "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
        \tfield: local_t commit;\toffset:8;\tsize:4;\tsigned:1;\n\
        \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
        \tfield: char data;\toffset:12;\tsize:4084;\tsigned:0;\n";
    /// A page read from `per_cpu/cpu0/trace_pipe_raw` on this host after four trace_marker
    /// writes of one process (pid 28699): `phase one`, `B|28699|frame 12`, 150 `x`s (type_len
    /// 0: longer than 112 bytes), `E|28699|frame 12`, with time extends between them.
    const REAL_PAGE: &[u8] = include_bytes!("../tests/data/ftrace_print_page.bin");

    /// The text of a `print` record: after common fields (8) and ip (8), up to the NUL.
    fn print_text(payload: &[u8]) -> &str {
        let buf = &payload[16..];
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        std::str::from_utf8(&buf[..end]).unwrap()
    }

    /// The layouts of 64- and 32-bit kernels are read from their header_page text.
    #[test]
    fn parse_header_page_64_and_32_bit() {
        let l = PageLayout::parse(HEADER_PAGE_64).unwrap();
        assert_eq!((l.timestamp, l.commit, l.data), (0, (8, 8), (16, 4080)));
        assert_eq!(l.page_size(), 4096);
        let l = PageLayout::parse(HEADER_PAGE_32).unwrap();
        assert_eq!((l.commit, l.data), ((8, 4), (12, 4084)));
        assert_eq!(
            PageLayout::parse("field: u64 timestamp; offset:0; size:8;").unwrap_err(),
            LayoutError::MissingField("commit")
        );
    }

    /// The real page yields the four marker lines in order, with the writer's pid, the
    /// print event's type id 5, and times that grow by the time extends.
    #[test]
    fn parse_page_real_trace_marker_lines() {
        let l = PageLayout::parse(HEADER_PAGE_64).unwrap();
        let page = Page::parse(&l, REAL_PAGE, false).unwrap();
        assert_eq!(page.missed, Missed::None);
        let mut ev = page.events();
        let got: Vec<Event<'_>> = ev.by_ref().collect();
        assert!(!ev.broken());
        let texts: Vec<&str> = got.iter().map(|e| print_text(e.payload)).collect();
        let long = format!("{}\n", "x".repeat(150));
        assert_eq!(
            texts,
            [
                "phase one\n",
                "B|28699|frame 12\n",
                long.as_str(),
                "E|28699|frame 12\n"
            ]
        );
        for e in &got {
            assert_eq!(u16::from_le_bytes([e.payload[0], e.payload[1]]), 5);
            assert_eq!(
                i32::from_le_bytes(e.payload[4..8].try_into().unwrap()),
                28699
            );
        }
        let t: Vec<u64> = got.iter().map(|e| e.timestamp).collect();
        assert!(
            t[0] > page.timestamp && t.windows(2).all(|w| w[0] <= w[1]),
            "{t:?}"
        );
        // The script slept 0.2 s between the second and third line.
        assert!(t[2] - t[1] >= 200_000_000, "{t:?}");
    }

    /// Builds a page: header (64-bit layout) with `commit`, then `data`.
    fn page(ts: u64, commit: u64, data: &[u8]) -> Vec<u8> {
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&ts.to_le_bytes());
        p[8..16].copy_from_slice(&commit.to_le_bytes());
        p[16..16 + data.len()].copy_from_slice(data);
        p
    }

    fn hdr(type_len: u32, delta: u32) -> [u8; 4] {
        (type_len | (delta << 5)).to_le_bytes()
    }

    /// Every type_len class: a short data event (len*4), a long one (length in array[0]),
    /// padding with a length (skipped, delta ignored), a time extend, an absolute time
    /// stamp, and the end-of-page padding after which nothing is read.
    #[test]
    fn parse_page_hand_built_every_type_len() {
        let mut d = Vec::new();
        d.extend_from_slice(&hdr(2, 10)); // 8 bytes of data at 1010
        d.extend_from_slice(b"abcdefgh");
        d.extend_from_slice(&hdr(0, 5)); // array[0] = 4 + 9: 9 bytes (padded to 12) at 1015
        d.extend_from_slice(&13u32.to_le_bytes());
        d.extend_from_slice(b"123456789\0\0\0");
        d.extend_from_slice(&hdr(29, 7)); // discarded: 4 more bytes
        d.extend_from_slice(&4u32.to_le_bytes());
        d.extend_from_slice(&hdr(30, 3)); // extend: + (2 << 27) + 3
        d.extend_from_slice(&2u32.to_le_bytes());
        d.extend_from_slice(&hdr(1, 1)); // at 1015 + (2 << 27) + 3 + 1
        d.extend_from_slice(b"wxyz");
        d.extend_from_slice(&hdr(31, 77)); // absolute: (1 << 27) | 77
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(&hdr(1, 0));
        d.extend_from_slice(b"last");
        let used = d.len() as u64;
        d.extend_from_slice(&hdr(29, 0)); // the rest is padding
        d.extend_from_slice(&hdr(1, 0));
        d.extend_from_slice(b"gone");
        let l = PageLayout::parse(HEADER_PAGE_64).unwrap();
        let bytes = page(1000, used + 12, &d);
        let p = Page::parse(&l, &bytes, false).unwrap();
        let mut ev = p.events();
        let got: Vec<(u64, &[u8])> = ev.by_ref().map(|e| (e.timestamp, e.payload)).collect();
        let extended = 1015 + (2 << 27) + 3 + 1;
        assert_eq!(
            got,
            [
                (1010, &b"abcdefgh"[..]),
                (1015, &b"123456789"[..]),
                (extended, &b"wxyz"[..]),
                ((1 << 27) | 77, &b"last"[..]),
            ]
        );
        assert!(!ev.broken());
    }

    /// The commit word's flags: lost events with the count stored after the data, lost
    /// events without a count, and a commit beyond the page refused.
    #[test]
    fn parse_page_missed_events_flags() {
        let l = PageLayout::parse(HEADER_PAGE_64).unwrap();
        let mut d = hdr(1, 1).to_vec();
        d.extend_from_slice(b"abcd");
        d.extend_from_slice(&42u64.to_le_bytes());
        let p = page(0, 8 | MISSED_EVENTS | MISSED_STORED, &d);
        let p = Page::parse(&l, &p, false).unwrap();
        assert_eq!(p.missed, Missed::Count(42));
        assert_eq!(p.events().count(), 1);
        let p = page(0, 8 | MISSED_EVENTS, &d);
        assert_eq!(Page::parse(&l, &p, false).unwrap().missed, Missed::Unknown);
        let p = page(0, 4081, &d);
        assert_eq!(
            Page::parse(&l, &p, false).unwrap_err(),
            PageError::CommitTooLarge(4081)
        );
        assert_eq!(
            Page::parse(&l, &p[..12], false).unwrap_err(),
            PageError::Short(12)
        );
    }

    /// A big-endian kernel's header puts type_len in the top bits.
    #[test]
    fn parse_page_big_endian_header() {
        let l = PageLayout::parse(HEADER_PAGE_32).unwrap();
        let mut p = vec![0u8; 4096];
        p[..8].copy_from_slice(&100u64.to_be_bytes());
        p[8..12].copy_from_slice(&8u32.to_be_bytes());
        p[12..16].copy_from_slice(&((1u32 << 27) | 5).to_be_bytes());
        p[16..20].copy_from_slice(b"abcd");
        let page = Page::parse(&l, &p, true).unwrap();
        let got: Vec<Event<'_>> = page.events().collect();
        assert_eq!(
            got,
            [Event {
                timestamp: 105,
                payload: b"abcd"
            }]
        );
    }

    /// Truncated and garbled copies of the real page never panic, and every event they
    /// yield lies inside the page.
    #[test]
    fn parse_page_garbled_real_page_no_panic() {
        let layouts = [
            PageLayout::parse(HEADER_PAGE_64).unwrap(),
            PageLayout::parse(HEADER_PAGE_32).unwrap(),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut events = 0usize;
        for round in 0..3000 {
            let mut p = REAL_PAGE.to_vec();
            let cut = (next() % 400) as usize;
            if round % 3 == 0 {
                p.truncate(cut);
            }
            for _ in 0..(next() % 8) {
                let at = (next() % 0x150) as usize;
                if at < p.len() {
                    p[at] = next() as u8;
                }
            }
            for l in &layouts {
                for be in [false, true] {
                    if let Ok(page) = Page::parse(l, &p, be) {
                        for e in page.events() {
                            assert!(e.payload.len() <= p.len());
                            events += 1;
                        }
                    }
                }
            }
        }
        assert!(events > 0);
    }
}

//! `record --markers`: the lines applications write to tracefs `trace_marker`, read from
//! ftrace's own per-CPU ring buffer (the kernel's `tracing_mark_write` never reaches perf's
//! tracepoint hook, so `perf_event_open` of `ftrace:print` records nothing) and written into
//! perf.data as samples of an extra `ftrace:print` event whose RAW payload is the ftrace
//! record, so Linux `perf script` decodes them with the print format in the tracing data.
//!
//! For the capture ftrace's `trace_clock` is `perf` (`local_clock()`, the clock of perf
//! sample times) and `tracing_on` is 1, both put back by [`Settings`]' Drop on every exit
//! path; a buffer never expanded gets (and keeps) its expanded size (docs/markers.md).

use std::collections::HashMap;
use std::fs::{self, File};
use std::io::{self, Read};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use kprof_capture::manifest;

use super::open_events::Opened;
use super::sink::Sink;
use super::tracefs::{Tracefs, Tracepoint};
use super::warn;
use crate::events::EventSpec;
use crate::ftrace_ring::{Missed, Page, PageLayout};
use crate::perf_records;
use crate::sys::{self, flag, PerfEventAttr};
use crate::Error;

/// The manifest's `markers.source`.
pub(super) const SOURCE: &str = "ftrace-trace_marker";
/// The clock ftrace stamps events with during the capture: perf's.
const CLOCK: &str = "perf";
/// Pages read from one CPU in one pass at most, so a flood of markers cannot stall the
/// sampling rings; the rest waits for the next pass.
const PAGES_PER_PASS: usize = 512;
/// The largest record a sample can carry (its size is a u16, with 60 bytes before the
/// record); trace_marker lines are at most 4 KiB, so only a garbled page has larger ones.
const MAX_RAW: usize = u16::MAX as usize - 64;
/// `--markers`' tracefs error starts with this.
pub(super) const NEEDED_FOR: &str = "--markers: ftrace's trace_marker buffer";

/// ftrace settings changed for the capture; put back when dropped.
struct Settings {
    /// (file, what it held) for `trace_clock` and `tracing_on`, in the order they were set.
    saved: Vec<(PathBuf, String)>,
}

impl Settings {
    /// Gives the buffer its working size if it has none yet, sets `trace_clock` to `perf`
    /// and `tracing_on` to 1, remembering what those two held.
    fn apply(tracefs: &Tracefs) -> Result<Settings, Error> {
        let mut s = Settings { saved: Vec::new() };
        let size = tracefs.dir.join("buffer_size_kb");
        // Not put back: as after any tracing use, the buffer stays expanded (a token size
        // written back would be taken as the size wanted, and stay when tracing is enabled).
        if let Some(expanded) = unexpanded(&read(&size)?) {
            set(&size, expanded)?;
        }
        let clock = tracefs.dir.join("trace_clock");
        let old_clock = read(&clock)?;
        let old_clock = bracketed(&old_clock).ok_or_else(|| {
            Error::Other(format!(
                "{NEEDED_FOR}: {} holds no [selected] clock: `{}`",
                clock.display(),
                old_clock.trim()
            ))
        })?;
        set(&clock, CLOCK)?;
        s.saved.push((clock, old_clock.to_string()));
        let on = tracefs.dir.join("tracing_on");
        let old_on = read(&on)?;
        set(&on, "1")?;
        s.saved.push((on, old_on.trim().to_string()));
        Ok(s)
    }
}

impl Drop for Settings {
    fn drop(&mut self) {
        for (path, old) in self.saved.iter().rev() {
            if let Err(e) = fs::write(path, old) {
                warn(format_args!(
                    "cannot put back {} to `{old}`: {e}: write it by hand",
                    path.display()
                ));
            }
        }
    }
}

fn read(p: &Path) -> Result<String, Error> {
    super::tracefs::read_file(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .map_err(|e| Error::io(format!("{NEEDED_FOR}: cannot read {}", p.display()), e))
}

fn set(p: &Path, v: &str) -> Result<(), Error> {
    fs::write(p, v).map_err(|e| {
        Error::io(
            format!("{NEEDED_FOR}: cannot write `{v}` to {}", p.display()),
            e,
        )
    })
}

/// The expanded size of a `buffer_size_kb` of `7 (expanded: 1408)`: a kernel where no
/// tracing was enabled yet keeps a token buffer (a page or two per CPU, which a burst of
/// markers overwrites between two reads) until something enables tracing, which gives it the
/// expanded size; `None` once it has its size.
fn unexpanded(buffer_size_kb: &str) -> Option<&str> {
    let (_, rest) = buffer_size_kb.trim().split_once(" (expanded: ")?;
    Some(rest.strip_suffix(')')?.trim())
}

/// The selected word of a tracefs choice file: `local` of `[local] global counter`.
fn bracketed(text: &str) -> Option<&str> {
    let start = text.find('[')? + 1;
    let end = start + text[start..].find(']')?;
    Some(&text[start..end])
}

/// One CPU's `trace_pipe_raw`, and the lost counters of its `stats` when opened.
struct Pipe {
    cpu: u32,
    file: File,
    stats: PathBuf,
    lost_at_start: u64,
    /// Reading failed (not EAGAIN): told once, not read again.
    failed: bool,
}

/// Reads `trace_marker` lines while a capture runs.
pub(super) struct Markers {
    // Declared before `_settings`: the pipes close before the clock is put back.
    pipes: Vec<Pipe>,
    /// Held for its Drop, which puts ftrace's settings back.
    _settings: Settings,
    tracefs: Tracefs,
    layout: PageLayout,
    print_id: u64,
    /// Where `common_pid` sits in a print record (from its format).
    pid_field: usize,
    /// Where its `ip` sits, when it is 8 bytes (64-bit kernels).
    ip_field: Option<usize>,
    sample_id: u64,
    page: Vec<u8>,
    record: Vec<u8>,
    tgids: HashMap<i32, i32>,
    lines: u64,
    missed: u64,
}

/// The `ftrace:print` tracepoint the lines are recorded as.
pub(super) fn find(tracefs: &Tracefs) -> Result<Tracepoint, Error> {
    tracefs
        .tracepoint("ftrace", "print")
        .map_err(|e| Error::Other(format!("{NEEDED_FOR} is not available: {e}")))
}

impl Markers {
    /// Switches ftrace to the perf clock (which empties its buffer) and opens every online
    /// CPU's `trace_pipe_raw`.
    pub(super) fn start(
        tracefs: &Tracefs,
        print: &Tracepoint,
        online: &[u32],
        sample_id: u64,
    ) -> Result<Markers, Error> {
        let header_page = tracefs.dir.join("events/header_page");
        let layout = PageLayout::parse(&read(&header_page)?)
            .map_err(|e| Error::Other(format!("{NEEDED_FOR}: {}: {e}", header_page.display())))?;
        let format = String::from_utf8_lossy(&print.format);
        let ip_field = field_offset(&format, "ip", 8);
        let pid_field = field_offset(&format, "common_pid", 4).ok_or_else(|| {
            Error::Other(format!(
                "{NEEDED_FOR}: the ftrace:print format has no 4-byte common_pid field"
            ))
        })?;
        let settings = Settings::apply(tracefs)?;
        let mut pipes = Vec::new();
        for &cpu in online {
            let dir = tracefs.dir.join(format!("per_cpu/cpu{cpu}"));
            let path = dir.join("trace_pipe_raw");
            let file = File::options()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&path)
                .map_err(|e| {
                    Error::io(format!("{NEEDED_FOR}: cannot open {}", path.display()), e)
                })?;
            let stats = dir.join("stats");
            pipes.push(Pipe {
                cpu,
                file,
                lost_at_start: lost_in_stats(&stats),
                stats,
                failed: false,
            });
        }
        Ok(Markers {
            pipes,
            _settings: settings,
            tracefs: tracefs.clone(),
            page: vec![0; layout.page_size()],
            layout,
            print_id: print.id,
            pid_field,
            ip_field,
            sample_id,
            record: Vec::new(),
            tgids: HashMap::new(),
            lines: 0,
            missed: 0,
        })
    }

    /// Reads every whole page the CPUs' buffers hold now and writes each `print` event in
    /// them as a sample through `sink`; other ftrace events are skipped. Only writing can
    /// fail: a CPU whose buffer cannot be read is told once and left.
    pub(super) fn read(&mut self, sink: &mut Sink) -> io::Result<()> {
        for k in 0..self.pipes.len() {
            for _ in 0..PAGES_PER_PASS {
                if self.pipes[k].failed {
                    break;
                }
                let n = match self.pipes[k].file.read(&mut self.page) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        let p = &mut self.pipes[k];
                        p.failed = true;
                        warn(format_args!(
                            "--markers: reading CPU {}'s trace_pipe_raw failed ({e}): its later marker lines are not recorded",
                            p.cpu
                        ));
                        break;
                    }
                };
                self.page_to_samples(k, n, sink)?;
            }
        }
        Ok(())
    }

    /// The print events of the page just read from pipe `k` (`n` bytes), as samples.
    fn page_to_samples(&mut self, k: usize, n: usize, sink: &mut Sink) -> io::Result<()> {
        let cpu = self.pipes[k].cpu;
        let big_endian = cfg!(target_endian = "big");
        let page = match Page::parse(&self.layout, &self.page[..n], big_endian) {
            Ok(p) => p,
            Err(e) => {
                warn(format_args!("--markers: CPU {cpu}: {e}: page skipped"));
                return Ok(());
            }
        };
        self.missed += match page.missed {
            Missed::None => 0,
            Missed::Unknown => 1,
            Missed::Count(c) => c,
        };
        for ev in page.events() {
            let p = ev.payload;
            if p.len() > MAX_RAW {
                self.missed += 1;
                continue;
            }
            let common_type = p.get(..2).map(|b| u16::from_ne_bytes([b[0], b[1]]));
            if common_type.map(u64::from) != Some(self.print_id) {
                continue;
            }
            let tid = p
                .get(self.pid_field..self.pid_field + 4)
                .map_or(0, |b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
            let head = SampleHead {
                id: self.sample_id,
                ip: self
                    .ip_field
                    .and_then(|at| perf_records::rd_u64(p, at))
                    .unwrap_or(0),
                pid: tgid(&mut self.tgids, tid),
                tid,
                time: ev.timestamp,
                cpu,
            };
            sample(&mut self.record, &head, p);
            sink.handle(&self.record)?;
            self.lines += 1;
        }
        Ok(())
    }

    /// The manifest entry; the ftrace settings are put back as `self` goes.
    pub(super) fn finish(self) -> manifest::Markers {
        let overrun: u64 = self
            .pipes
            .iter()
            .map(|p| lost_in_stats(&p.stats).saturating_sub(p.lost_at_start))
            .sum();
        manifest::Markers {
            source: SOURCE.into(),
            event: "ftrace:print".into(),
            tracefs: self.tracefs.dir.display().to_string(),
            trace_clock: CLOCK.into(),
            lines: self.lines,
            // The pages' counts and the stats count the same overwritten lines.
            lost: self.missed.max(overrun),
        }
    }
}

/// Lines a CPU's ftrace buffer lost so far: `overrun` (overwritten) plus `dropped events`
/// (buffer full without overwrite), from `per_cpu/cpuN/stats`; 0 when unreadable.
fn lost_in_stats(stats: &Path) -> u64 {
    let Ok(text) = super::tracefs::read_file(stats) else {
        return 0;
    };
    let text = String::from_utf8_lossy(&text);
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            matches!(k.trim(), "overrun" | "dropped events")
                .then(|| v.trim().parse::<u64>().ok())
                .flatten()
        })
        .sum()
}

/// The offset of a field of `size` bytes in a tracefs event format (`field:int common_pid;
/// offset:4; size:4;`).
fn field_offset(format: &str, name: &str, size: usize) -> Option<usize> {
    format.lines().find_map(|l| {
        let (decl, rest) = l.trim().strip_prefix("field:")?.split_once(';')?;
        if decl.split_whitespace().last()? != name {
            return None;
        }
        let num = |key: &str| -> Option<usize> {
            rest.split(';')
                .find_map(|p| p.trim().strip_prefix(key))?
                .trim()
                .parse()
                .ok()
        };
        (num("size:")? == size).then_some(num("offset:")?)
    })
}

/// The process of thread `tid` (its `Tgid:` in /proc, read once per thread); the tid
/// itself when the thread is gone or is 0 (written from interrupt or idle context).
fn tgid(cache: &mut HashMap<i32, i32>, tid: i32) -> i32 {
    if tid <= 0 {
        return tid;
    }
    *cache.entry(tid).or_insert_with(|| {
        fs::read_to_string(format!("/proc/{tid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Tgid:"))
                    .and_then(|v| v.trim().parse().ok())
            })
            .unwrap_or(tid)
    })
}

/// The sample_type of the `ftrace:print` event, in the order of the sample's fields.
const SAMPLE_TYPE: u64 = sys::SAMPLE_IDENTIFIER
    | sys::SAMPLE_IP
    | sys::SAMPLE_TID
    | sys::SAMPLE_TIME
    | sys::SAMPLE_CPU
    | sys::SAMPLE_PERIOD
    | sys::SAMPLE_RAW;

/// What a marker sample says besides its record: sample id, the print event's `ip` (where
/// the kernel wrote it, as a tracepoint sample's IP), pid and tid, time, CPU.
struct SampleHead {
    id: u64,
    ip: u64,
    pid: i32,
    tid: i32,
    time: u64,
    cpu: u32,
}

/// A PERF_RECORD_SAMPLE of [`SAMPLE_TYPE`] with `raw` as its RAW data (padded as the kernel
/// pads it: size word and data end on 8 bytes), written into `out`.
fn sample(out: &mut Vec<u8>, h: &SampleHead, raw: &[u8]) {
    let raw_size = (raw.len() + 4).next_multiple_of(8) - 4;
    let size = 8 + 8 + 8 + 8 + 8 + 8 + 8 + 4 + raw_size;
    out.clear();
    out.extend_from_slice(&perf_records::SAMPLE.to_ne_bytes());
    out.extend_from_slice(&1u16.to_ne_bytes()); // PERF_RECORD_MISC_KERNEL: ip is the kernel's
    out.extend_from_slice(&(size as u16).to_ne_bytes());
    out.extend_from_slice(&h.id.to_ne_bytes());
    out.extend_from_slice(&h.ip.to_ne_bytes());
    let SampleHead {
        pid,
        tid,
        time,
        cpu,
        ..
    } = *h;
    out.extend_from_slice(&pid.to_ne_bytes());
    out.extend_from_slice(&tid.to_ne_bytes());
    out.extend_from_slice(&time.to_ne_bytes());
    out.extend_from_slice(&cpu.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&1u64.to_ne_bytes()); // period
    out.extend_from_slice(&(raw_size as u32).to_ne_bytes());
    out.extend_from_slice(raw);
    out.resize(size, 0);
}

/// The perf.data event of the marker samples: `ftrace:print` as a tracepoint attr (no fds:
/// the agent writes its samples itself) with one sample id unused by the opened events.
pub(super) fn event(print: &Tracepoint, opened: &[Opened]) -> Opened {
    let mut id = u64::MAX - 1;
    while opened.iter().any(|e| e.ids.contains(&id)) {
        id -= 1;
    }
    let spec = EventSpec {
        requested: "--markers".into(),
        name: print.name(),
        attr_type: sys::PERF_TYPE_TRACEPOINT,
        config: print.id,
        period: Some(1),
        freq: None,
        exclude_user: false,
        exclude_kernel: false,
    };
    let attr = PerfEventAttr {
        type_: sys::PERF_TYPE_TRACEPOINT,
        size: sys::ATTR_SIZE,
        config: print.id,
        sample_period_or_freq: 1,
        sample_type: SAMPLE_TYPE,
        read_format: sys::FORMAT_ID,
        // As the opened events: perf reads every event's records alike only then.
        flags: flag::SAMPLE_ID_ALL,
        ..Default::default()
    };
    Opened {
        spec,
        requested: Some("--markers".into()),
        attr,
        fallback: None,
        fds: Vec::new(),
        ids: vec![id],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token buffer is told with its expanded size; a sized one is left alone.
    #[test]
    fn unexpanded_buffer_size_kb_forms() {
        assert_eq!(unexpanded("7 (expanded: 1408)\n"), Some("1408"));
        assert_eq!(unexpanded("1408\n"), None);
        assert_eq!(unexpanded("X\n"), None);
    }

    /// The selected clock is the bracketed word, wherever it stands.
    #[test]
    fn bracketed_trace_clock_selected_word() {
        assert_eq!(bracketed("[local] global counter\n"), Some("local"));
        assert_eq!(bracketed("local global [perf] mono\n"), Some("perf"));
        assert_eq!(bracketed("local global\n"), None);
    }

    /// common_pid's offset comes from the print format; a format without it has none.
    #[test]
    fn field_offset_print_format_common_pid() {
        let f = "name: print\nID: 5\nformat:\n\tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n";
        assert_eq!(field_offset(f, "common_pid", 4), Some(4));
        assert_eq!(field_offset(f, "common_pid", 8), None);
        assert_eq!(field_offset(f, "ip", 8), None);
    }

    /// The sample carries id, pid/tid, time, cpu, period 1 and the raw record padded so the
    /// record ends on 8 bytes, its size word counting the padding.
    #[test]
    fn sample_print_record_layout() {
        let mut out = Vec::new();
        let head = SampleHead {
            id: 77,
            ip: 0xffff_ffff_8149_ab1a,
            pid: 10,
            tid: 11,
            time: 12345,
            cpu: 3,
        };
        sample(&mut out, &head, b"abcdefghijk");
        assert_eq!(out.len() % 8, 0);
        assert_eq!(u16::from_ne_bytes([out[6], out[7]]) as usize, out.len());
        assert_eq!(perf_records::rd_u64(&out, 8), Some(77));
        assert_eq!(perf_records::rd_u64(&out, 16), Some(0xffff_ffff_8149_ab1a));
        assert_eq!(perf_records::rd_u32(&out, 24), Some(10));
        assert_eq!(perf_records::rd_u32(&out, 28), Some(11));
        assert_eq!(perf_records::rd_u64(&out, 32), Some(12345));
        assert_eq!(perf_records::rd_u32(&out, 40), Some(3));
        assert_eq!(perf_records::rd_u64(&out, 48), Some(1));
        assert_eq!(perf_records::rd_u32(&out, 56), Some(12));
        assert_eq!(&out[60..71], b"abcdefghijk");
        assert!(matches!(
            perf_records::classify(&out),
            perf_records::Count::Sample { id: 77 }
        ));
    }
}

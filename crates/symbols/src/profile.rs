//! The symbolized profile: what every report view and output format is rendered from.
//!
//! Samples with equal resolved stacks on the same thread are merged, so the size of a
//! [`Profile`] follows the number of distinct stacks and symbols, not the sample count.
//! Indices into the tables are plain `usize`s into the owning `Vec`s.

use std::path::PathBuf;
use std::sync::Arc;

/// A symbolized capture.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// One per sampled event, in perf.data attribute order; `Stack::counts` is parallel to it.
    pub events: Vec<Event>,
    /// Every image that a sample fell into (kernel, modules, user ELFs, unknown).
    pub images: Vec<Image>,
    /// Every function that a frame resolved to.
    pub functions: Vec<Function>,
    /// Distinct resolved frames (function + address + source position).
    pub frames: Vec<Frame>,
    /// Threads that samples were taken on.
    pub threads: Vec<Thread>,
    /// Merged stacks with their counts.
    pub stacks: Vec<Stack>,
    /// Every sample counted in `stacks`, sorted by time: what the timeline and `--time`
    /// windows are computed from. ~32 bytes each.
    pub samples: Vec<Sample>,
    /// Anything the user must know about the result: mismatched build-ids, kallsyms fallbacks,
    /// lost samples, unreadable files. Never dropped silently.
    pub warnings: Vec<String>,
    /// Warnings about single images (no symbols, no unwind tables...), kept apart from
    /// `warnings` so that a view shows one line per kind for the images its samples touch
    /// ([`crate::image_warnings::grouped`]).
    pub image_warnings: Vec<ImageWarning>,
    /// Where the capture came from.
    pub meta: Meta,
    /// Blocked time, when the capture recorded context switches (`record --off-cpu`, perf's
    /// `-e sched:sched_switch`); its events are apart from the on-CPU ones
    /// ([`crate::off_cpu`]).
    pub off_cpu: Option<OffCpu>,
    /// The calls of the functions timed with entry and return probes (`record --latency`,
    /// [`crate::latency`]); their stacks are in `stacks` without counts of their own.
    pub latency: Option<crate::latency::Latency>,
    /// Lock and futex waits (`record --contention`, [`crate::latency`]).
    pub contention: Option<crate::latency::Contention>,
}

/// What one image lacks, shown grouped with the other images that lack the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageWarning {
    /// What the images of the group lack: the line's text before the image list, the same
    /// for every image of the group.
    pub kind: String,
    /// The image's name ([`Image::name`]).
    pub image: String,
    /// How many stacks or samples it concerns, when counted (unwinds that stopped in it).
    pub count: Option<u64>,
}

/// Off-CPU time of a capture with context switches.
///
/// Each switch-out of a thread in state S (sleeping: interruptible) or D (uninterruptible)
/// becomes one sample of event [`OffCpu::sleeping`] or [`OffCpu::uninterruptible`], at the
/// switch-out's time, with the switch-out's call chain, whose period is the time until the
/// same thread was switched in again, in ns: stack `periods` are blocked ns, `counts` the
/// number of times it blocked there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OffCpu {
    /// Index into [`Profile::events`] of time blocked in state S.
    pub sleeping: usize,
    /// Index into [`Profile::events`] of time blocked in state D.
    pub uninterruptible: usize,
    /// Wall time of each thread (by tid) in the capture: from the first to the last context
    /// switch it took part in, in ns. The denominator of "% of the threads' wall time".
    pub wall_ns: std::collections::BTreeMap<i32, u64>,
    /// Context switches read.
    pub switches: u64,
    /// Switch-outs in S or D whose thread was not switched in again before the capture
    /// ended: their blocked time is unknown and not counted.
    pub unmatched: u64,
    /// Blocked spans whose switch-in the kernel did not report (the thread was switched out
    /// again first): they end at the thread's first on-CPU sample or next switch-out.
    pub missed_switch_ins: u64,
}

impl Profile {
    /// A source file as reports show it: relative to the build tree it came from (the
    /// kernel tree, the module's directory, the package's source directory), i.e. the
    /// longest of [`Meta::source_roots`] it is below; the full path when it is below none.
    pub fn source_path<'a>(&self, file: &'a str) -> &'a str {
        self.meta
            .source_roots
            .iter()
            .filter_map(|root| crate::elf::under_root(file, root).map(|rel| (root.len(), rel)))
            .max_by_key(|(len, _)| *len)
            .map_or(file, |(_, rel)| rel)
    }
}

/// Facts about the capture as a whole.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Meta {
    /// The capture file as given.
    pub capture: String,
    /// Host name, kernel release and architecture of the target, when recorded.
    pub hostname: Option<String>,
    /// Kernel release of the target.
    pub os_release: Option<String>,
    /// Machine of the target (`uname -m`).
    pub arch: Option<String>,
    /// Samples the kernel reported lost.
    pub lost_samples: u64,
    /// The command line that was profiled, when recorded.
    pub command: Option<String>,
    /// Whether the samples carry call chains (PERF_SAMPLE_CALLCHAIN or a user stack copy for
    /// DWARF unwinding) in any event; `None` when not known (a profile not read from a
    /// capture).
    pub call_chains: Option<bool>,
    /// Its process id, when recorded (manifest `command.pid`).
    pub workload_pid: Option<i32>,
    /// The build trees source files are shown relative to (see [`Profile::source_path`]):
    /// the compilation directories of the symbol files used, after `source_prefix`.
    pub source_roots: Vec<String>,
    /// Capture start as an absolute perf-clock timestamp (ns): the earliest timestamp of any
    /// record of the perf.data, samples and side-band alike. `None` when no record has one.
    pub start_ns: Option<u64>,
    /// From capture start to the last timestamped record, in ns.
    pub duration_ns: u64,
    /// Things that happened at a point of the capture, sorted by time.
    pub markers: Vec<Marker>,
    /// The window the profile was restricted to ([`crate::views::into_time_window`]), `None`
    /// for the whole capture.
    pub window: Option<TimeWindow>,
}

/// A half-open window `[start, end)` of ns since capture start; `None` is an open bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// First nanosecond in the window.
    pub start: Option<u64>,
    /// First nanosecond after it.
    pub end: Option<u64>,
}

impl TimeWindow {
    /// `1.000 s .. 2.500 s`, with `start`/`end` for open bounds, as reports print it.
    pub fn describe(&self) -> String {
        let secs = |ns: u64| format!("{:.3} s", ns as f64 / 1e9);
        format!(
            "{} .. {}",
            self.start.map_or("start".into(), secs),
            self.end.map_or("end".into(), secs)
        )
    }
}

/// One sample, as counted in [`Profile::stacks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Nanoseconds since capture start ([`Meta::start_ns`]); 0 for a sample without a
    /// timestamp.
    pub time: u64,
    /// Index into [`Profile::stacks`]; the thread is that stack's.
    pub stack: u32,
    /// Index into [`Profile::events`].
    pub event: u32,
    /// CPU the sample was taken on (`u32::MAX` when not recorded).
    pub cpu: u32,
    /// The events the sample stands for (1 when unknown, as in [`Stack::periods`]).
    pub period: u64,
}

/// Something that happened at one time of the capture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// Nanoseconds since capture start.
    pub time: u64,
    /// What happened.
    pub kind: MarkerKind,
}

/// What a [`Marker`] marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MarkerKind {
    /// The profiled command (manifest `command.pid`) executed.
    WorkloadStart,
    /// The profiled command exited.
    WorkloadExit,
    /// The kernel dropped samples (PERF_RECORD_LOST or PERF_RECORD_LOST_SAMPLES).
    Lost {
        /// How many.
        samples: u64,
    },
    /// The kernel throttled an event (PERF_RECORD_THROTTLE).
    Throttled,
    /// A mark of the profiled system: a line an application wrote to ftrace's `trace_marker`
    /// (`kprof_mark` of `kprof/marker.h`, recorded by `record --markers` as `ftrace:print`
    /// samples), or a tracepoint recorded with `-e SUBSYS:EVENT`, with its decoded fields.
    Mark(Mark),
}

/// One recorded mark: see [`MarkerKind::Mark`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// The event as perf names it: `ftrace:print` for a `trace_marker` line, else the
    /// tracepoint (`mychardrv:cache_traverse`).
    pub event: String,
    /// Process id of the thread that marked (-1 when not recorded).
    pub pid: i32,
    /// Thread id (-1 when not recorded).
    pub tid: i32,
    /// CPU it was recorded on (`u32::MAX` when not recorded).
    pub cpu: u32,
    /// What a person reads: the line written to `trace_marker` (without its final newline),
    /// or a tracepoint's fields as `name=value` separated by spaces, in format order.
    pub text: String,
    /// A tracepoint's decoded fields (name, value as text), in format order, without the
    /// `common_*` ones; empty for `ftrace:print`.
    pub fields: Vec<(String, String)>,
    /// Whether the mark opens or closes a named span (`kprof_mark_begin/end`, written as
    /// atrace's `B|PID|NAME` and `E|PID|NAME`, which Perfetto reads too).
    pub edge: Option<SpanEdge>,
}

/// A mark that opens or closes a span: the spans of a thread are the begin/end pairs of the
/// same name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SpanEdge {
    /// `B|PID|NAME`: the span NAME starts.
    Begin(String),
    /// `E|PID|NAME` (or `E|PID`: closes the thread's innermost open span).
    End(Option<String>),
}

/// A sampled event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// perf's name (`cpu-clock`, `L1-dcache-load-misses`, `r03`).
    pub name: String,
    /// Samples of this event in the capture, including ones not in a selected view.
    pub total_samples: u64,
    /// Sum of the sample periods of this event: the events it counted, when
    /// [`Event::period_known`].
    pub total_period: u64,
    /// Whether each sample's period (how many events it stands for) is known: the samples
    /// carry PERF_SAMPLE_PERIOD, or the event was sampled at a fixed period. Without it
    /// (frequency mode without PERIOD) the kernel varied the period unseen, and counts
    /// derived from samples, such as `--ratio`, are unknown.
    pub period_known: bool,
}

/// How an image's symbols were found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SymbolSource {
    /// A file whose GNU build-id equals the recorded one.
    BuildId {
        /// The file.
        path: PathBuf,
        /// Where a symbol provider got it from (`debuginfod: URL`); `None` for a file found
        /// on this host.
        origin: Option<String>,
    },
    /// No build-id was recorded for the image (perf 6.x `record -z`, pipe mode): a file
    /// found by the recorded path or name, as perf finds it, used unverified.
    Unverified {
        /// The file.
        path: PathBuf,
    },
    /// A file with the right name and another build-id was found and NOT used.
    Mismatch {
        /// The file.
        path: PathBuf,
        /// The build-id recorded in the capture.
        expected: String,
        /// The build-id of the file.
        found: String,
        /// A kernel image whose function names come from kallsyms instead (no lines).
        kallsyms: bool,
    },
    /// Kernel or module names from the capture's kallsyms snapshot: functions, no lines.
    Kallsyms,
    /// Nothing usable; addresses are shown raw.
    Missing {
        /// Why, for the warning.
        why: String,
    },
}

/// A loaded image: `[kernel.kallsyms]`, a module such as `mychardrv.ko`, or a user ELF.
#[derive(Debug, Clone)]
pub struct Image {
    /// Short display name (`vmlinux`, `mychardrv.ko`, `busybox`).
    pub name: String,
    /// Path or name as recorded on the board (`/bin/busybox`, `[mychardrv]`).
    pub recorded_path: String,
    /// Recorded GNU build-id, lowercase hex.
    pub build_id: Option<String>,
    /// Kernel-space image (vmlinux or module).
    pub kernel: bool,
    /// Where its symbols came from, or why none.
    pub symbols: SymbolSource,
}

/// A function (symbol) of an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Function {
    /// Index into [`Profile::images`].
    pub image: usize,
    /// Demangled name; `None` when the address could not be named (rendered as `[unknown]`).
    pub name: Option<String>,
    /// Start of the function in the symbol file's address space.
    pub start: u64,
    /// Size in bytes when known.
    pub size: Option<u64>,
    /// Source file and line of the function's declaration/first line, when DWARF has it.
    pub file: Option<String>,
    /// Line of `file`.
    pub line: Option<u32>,
}

/// One resolved frame. Inlined calls produce several frames for one address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Index into [`Profile::functions`].
    pub function: usize,
    /// Address in the symbol file's address space (after KASLR / module relocation / MMAP
    /// bias), which is what disassembly and `addr2line` use.
    pub address: u64,
    /// Source position of the address in this function. Shared: a capture has millions of
    /// frames and a few thousand source files.
    pub file: Option<Arc<str>>,
    /// Line of `file`.
    pub line: Option<u32>,
    /// This frame is an inlined call inside the next (outer) frame of the same address.
    pub inlined: bool,
}

/// A thread samples were taken on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Thread {
    /// Process id (`-1` when not recorded).
    pub pid: i32,
    /// Thread id.
    pub tid: i32,
    /// Command name at the time of the samples.
    pub comm: String,
}

/// Merged samples with an identical resolved stack on one thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stack {
    /// Indices into [`Profile::frames`], leaf first, inline-expanded, user frames after kernel.
    pub frames: Vec<usize>,
    /// Index into [`Profile::threads`].
    pub thread: usize,
    /// Samples per event, parallel to [`Profile::events`].
    pub counts: Vec<u64>,
    /// Summed sample periods per event (the events these samples stand for), parallel to
    /// `counts`: in frequency mode the kernel varies the period from sample to sample, so
    /// two events' sample counts do not compare, their periods do.
    pub periods: Vec<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_roots(roots: &[&str]) -> Profile {
        Profile {
            meta: Meta {
                source_roots: roots.iter().map(|r| r.to_string()).collect(),
                ..Meta::default()
            },
            ..Profile::default()
        }
    }

    /// A file below nested roots is shown relative to the longest (the deepest tree).
    #[test]
    fn source_path_nested_roots_longest_wins() {
        let p = with_roots(&["/home/me", "/home/me/linux-6.1.192", "/src/mod"]);
        assert_eq!(
            p.source_path("/home/me/linux-6.1.192/arch/x86/lib/clear_page_64.S"),
            "arch/x86/lib/clear_page_64.S"
        );
        assert_eq!(
            p.source_path("/home/me/linux-6.1.192/mm/memory.c"),
            "mm/memory.c"
        );
        assert_eq!(p.source_path("/src/mod/drv.c"), "drv.c");
        assert_eq!(p.source_path("/home/me/app/main.c"), "app/main.c");
    }

    /// A root matches whole path components only; files below no root keep their full path.
    #[test]
    fn source_path_outside_roots_full() {
        let p = with_roots(&["/build/linux"]);
        assert_eq!(
            p.source_path("/build/linux-6.1/mm/memory.c"),
            "/build/linux-6.1/mm/memory.c"
        );
        assert_eq!(p.source_path("/build/linux"), "/build/linux");
        assert_eq!(p.source_path("mm/memory.c"), "mm/memory.c");
        assert_eq!(with_roots(&[]).source_path("/a/b.c"), "/a/b.c");
    }
}

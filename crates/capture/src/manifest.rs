//! `manifest.json`: what was asked, what ran, and which images (by build-id) were live.
//!
//! Addresses are hex strings (`"0xffffffffc0a00000"`): JSON numbers lose precision above 2^53
//! in most readers, and kernel addresses are all above that.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Top level of `manifest.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`crate::MANIFEST_SCHEMA`].
    pub schema: String,
    /// Schema version, [`crate::MANIFEST_VERSION`] when written by this crate.
    pub version: u32,
    /// Capture id, also the archive's base name.
    pub capture_id: String,
    /// Version of the agent that wrote the capture.
    pub agent_version: String,
    /// `uname(2)` of the board.
    pub uname: Uname,
    /// One entry per event that was opened, in perf.data attribute order.
    pub events: Vec<EventRecord>,
    /// The workload the agent ran, if any.
    #[serde(default)]
    pub command: Option<Command>,
    /// Process sampled with `-p`, if any; `None` means system-wide.
    #[serde(default)]
    pub target_pid: Option<i32>,
    /// CPUs sampled.
    pub cpus: Vec<u32>,
    /// Whether call chains were recorded (`-g` or `--call-graph`), in any mode.
    pub callchain: bool,
    /// How call chains were recorded: `fp` (the kernel walked frame pointers) or `dwarf`
    /// (kernel chain, plus user registers and a user stack copy to unwind with CFI). `None`
    /// without call chains, and in captures older than the field (which were `fp` when
    /// `callchain` is true).
    #[serde(default)]
    pub call_graph: Option<String>,
    /// Bytes of user stack copied per sample with `dwarf` (`--call-graph dwarf,SIZE`).
    #[serde(default)]
    pub stack_user_size: Option<u32>,
    /// Start of sampling, nanoseconds since the Unix epoch.
    pub start_time_ns: u64,
    /// End of sampling, nanoseconds since the Unix epoch.
    pub stop_time_ns: u64,
    /// Why the capture stopped: `command-exited`, `duration`, `signal`, `target-exited`, or
    /// `write-error` when writing perf.data failed (then `truncated` is true).
    pub stop_reason: String,
    /// The running kernel.
    pub kernel: Kernel,
    /// Every module loaded when the capture started.
    pub modules: Vec<Module>,
    /// Size and digest of the perf.data in the archive.
    pub perf_data: FileDigest,
    /// `/proc/sys/kernel/perf_event_paranoid`, `kptr_restrict`, `perf_event_max_sample_rate`,
    /// `perf_event_mlock_kb` and `perf_event_max_stack` at capture time.
    #[serde(default)]
    pub sysctl: BTreeMap<String, String>,
    /// Ring buffer size per CPU in pages (`--mmap-pages`).
    #[serde(default)]
    pub mmap_pages: Option<u64>,
    /// Off-CPU recording (`record --off-cpu`), when on; absent otherwise and in older captures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpu>,
    /// Marker recording (`record --markers`), when on; absent otherwise and in older captures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub markers: Option<Markers>,
    /// Writing perf.data failed (disk full, I/O error) and the capture was cut short: the
    /// agent stopped sampling and the workload, and sealed perf.data up to its last complete
    /// record. `false` in complete captures and in those of agents before the field.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Why and how much, when `truncated`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub truncation: Option<Truncation>,
    /// Ring buffer bytes the agent dropped unread because a record header in them was corrupt
    /// (size below 8, or past the kernel's head); the records they held are lost and counted
    /// in no event's `lost`. Absent when none was dropped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring_dropped: Option<RingDropped>,
    /// Mapped files whose build-id was not read because the path no longer named a regular
    /// file at seal time (a FIFO, a device, a directory) or could not be read in time; absent
    /// when none was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped_files: Option<SkippedFiles>,
    /// Where the capture stands among the others of its capture directory, for boards whose
    /// clock does not tell (no RTC, no NTP yet: every time is in 1970). Absent in captures of
    /// agents before the field.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence: Option<Sequence>,
    /// The functions timed with entry and return probes (`record --latency`); empty
    /// otherwise and in older captures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency: Vec<LatencyProbe>,
    /// Lock and futex waits (`record --contention`), when on; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contention: Option<Contention>,
}

/// One function timed by `record --latency` (manifest `latency`): a probe at its entry and
/// one at its return, each an event of `events` sampled at every hit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyProbe {
    /// The function as the user named it (`mychardrv_write`, `mychardrv:mychardrv_read`,
    /// `/usr/bin/mychardrv-writer:write_request`).
    pub function: String,
    /// [`PROBE_KPROBE`] or [`PROBE_UPROBE`].
    pub kind: String,
    /// A kprobe's symbol as the kernel was given it (`mychardrv:mychardrv_read`); an
    /// uprobe's file on the board.
    pub target: String,
    /// An uprobe's file offset of the function's first instruction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// An uprobe's file's GNU build-id, checked on the board before the probe was placed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_id: Option<String>,
    /// The entry probe's event, named as in `events`.
    pub entry_event: String,
    /// The return probe's event, named as in `events`.
    pub return_event: String,
}

/// A kernel function probed through perf's `kprobe` PMU.
pub const PROBE_KPROBE: &str = "kprobe";
/// A user function probed through perf's `uprobe` PMU.
pub const PROBE_UPROBE: &str = "uprobe";

/// What `record --contention` recorded (manifest `contention`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Contention {
    /// `lock:contention_begin` and `lock:contention_end` were recorded.
    pub kernel_locks: bool,
    /// `syscalls:sys_enter_futex` and `syscalls:sys_exit_futex` were recorded.
    pub futex: bool,
    /// What the board lacked, one line each (`no syscalls:sys_enter_futex tracepoint: ...`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
}

/// The capture's place in its capture directory (manifest `sequence`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sequence {
    /// The capture directory's counter: 1 for its first capture, one more for each later one,
    /// across reboots (it is also the id's third field).
    pub number: u64,
    /// `/proc/sys/kernel/random/boot_id` when the capture started; `None` when unreadable.
    #[serde(default)]
    pub boot_id: Option<String>,
    /// `CLOCK_BOOTTIME` when the capture started: nanoseconds since boot, suspend included.
    #[serde(default)]
    pub since_boot_ns: Option<u64>,
}

/// How a truncated capture was cut short (manifest `truncation`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Truncation {
    /// The write error, as the agent reported it (`No space left on device (os error 28)`).
    pub reason: String,
    /// Bytes of records taken from the ring buffers that are not in perf.data (uncompressed
    /// sizes); `None` when unknown.
    #[serde(default)]
    pub lost_bytes: Option<u64>,
    /// Records taken from the ring buffers that are not in perf.data; `None` when unknown.
    #[serde(default)]
    pub lost_records: Option<u64>,
}

/// Ring buffer data dropped because of a corrupt record header (manifest `ring_dropped`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RingDropped {
    /// Times a corrupt header was met (each drops the rest of that drain's batch).
    pub batches: u64,
    /// Bytes dropped.
    pub bytes: u64,
}

/// Mapped files skipped when reading build-ids (manifest `skipped_files`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedFiles {
    /// How many were skipped.
    pub count: u64,
    /// The first few, as `PATH: reason`.
    #[serde(default)]
    pub examples: Vec<String>,
}

/// How context switches were recorded for off-CPU time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpu {
    /// `sched_switch-tracepoint`: the `sched:sched_switch` tracepoint, every switch, with its
    /// raw fields and call chain.
    pub method: String,
    /// The perf.data event carrying the switches (`sched:sched_switch`), named as in `events`.
    pub event: String,
    /// The tracefs directory the tracepoint's id and format were read from.
    pub tracefs: String,
    /// The tracepoint's id (`attr_config` of that event).
    pub tracepoint_id: u64,
}

/// How `trace_marker` lines were recorded (manifest `markers`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Markers {
    /// `ftrace-trace_marker`: the `print` events of ftrace's top-level ring buffer, read from
    /// `per_cpu/cpuN/trace_pipe_raw` while sampling.
    pub source: String,
    /// The perf.data event carrying them (`ftrace:print`), named as in `events`.
    pub event: String,
    /// The tracefs directory read.
    pub tracefs: String,
    /// ftrace's `trace_clock` during the capture (`perf`: the clock of perf samples).
    pub trace_clock: String,
    /// Lines recorded (samples of `event`).
    pub lines: u64,
    /// Lines lost: overwritten in ftrace's ring buffer before they were read (its pages'
    /// missed-events counts and the per-CPU `stats` overrun), or dropped with the buffer full.
    pub lost: u64,
}

/// What `kprof-agent list` shows of a manifest: read without the rest, so that the agent,
/// which fits 1.5 MiB of flash, carries no deserializer of the whole manifest (each field's
/// visitor is code on the board for a listing that needs three).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Summary {
    /// Always [`crate::MANIFEST_SCHEMA`].
    pub schema: String,
    /// Schema version.
    pub version: u32,
    /// The capture's id.
    pub capture_id: String,
    /// Capture start, perf clock ns.
    pub start_time_ns: u64,
    /// The profiled command, when there was one.
    #[serde(default)]
    pub command: Option<SummaryCommand>,
    /// Its place in the capture directory.
    #[serde(default)]
    pub sequence: Option<Sequence>,
}

/// The command of a [`Summary`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct SummaryCommand {
    /// Its argv.
    pub argv: Vec<String>,
}

impl Summary {
    /// Parses the summary of `manifest.json`, refusing what [`Manifest::from_json`] refuses
    /// of its fields.
    pub fn from_json(bytes: &[u8]) -> Result<Summary, ManifestError> {
        let m: Summary = serde_json::from_slice(bytes).map_err(ManifestError::Json)?;
        check_schema(&m.schema, m.version)?;
        path_component("capture_id", &m.capture_id)?;
        Ok(m)
    }
}

/// Refuses other schemas and versions newer than this crate's.
fn check_schema(schema: &str, version: u32) -> Result<(), ManifestError> {
    if schema != crate::MANIFEST_SCHEMA {
        return Err(ManifestError::UnknownSchema(schema.to_string()));
    }
    if version > crate::MANIFEST_VERSION {
        return Err(ManifestError::TooNew(version));
    }
    Ok(())
}

impl Manifest {
    /// Parses `manifest.json`, refusing other schemas and versions newer than this crate's.
    pub fn from_json(bytes: &[u8]) -> Result<Manifest, ManifestError> {
        let m: Manifest = serde_json::from_slice(bytes).map_err(ManifestError::Json)?;
        check_schema(&m.schema, m.version)?;
        m.validate()?;
        Ok(m)
    }

    /// Checks the fields a reader turns into paths, slices or addresses: the board wrote
    /// them and may be hostile. Returns the first field at fault, named as in the JSON.
    pub fn validate(&self) -> Result<(), ManifestError> {
        path_component("capture_id", &self.capture_id)?;
        // The host looks for `vmlinux-RELEASE` next to its vmlinux files.
        path_component("uname.release", &self.uname.release)?;
        path_component("kernel.release", &self.kernel.release)?;
        if let Some(id) = &self.kernel.build_id {
            build_id("kernel.build_id", id)?;
        }
        if let Some(a) = &self.kernel.text_addr {
            address("kernel.text_addr", a)?;
        }
        for (i, md) in self.modules.iter().enumerate() {
            module_name(&format!("modules[{i}].name"), &md.name)?;
            if let Some(id) = &md.build_id {
                build_id(&format!("modules[{i}].build_id"), id)?;
            }
            address(&format!("modules[{i}].base"), &md.base)?;
            for (section, a) in &md.sections {
                address(&format!("modules[{i}].sections[{section:?}]"), a)?;
            }
        }
        if self.perf_data.file != crate::PERF_DATA {
            return Err(invalid(
                "perf_data.file",
                &self.perf_data.file,
                format!("is not {:?}", crate::PERF_DATA),
            ));
        }
        let sha = &self.perf_data.sha256;
        // Empty: hand-made captures written without a digest.
        if !sha.is_empty() && (sha.len() != 64 || !is_lower_hex(sha)) {
            return Err(invalid(
                "perf_data.sha256",
                sha,
                "is not 64 lowercase hex digits",
            ));
        }
        Ok(())
    }
}

/// Longest build-id accepted, in hex digits: GNU ld and lld write 8 (`--build-id=fast`), 16
/// (md5, uuid) or 20 (sha1) bytes; 32 bytes leaves room for a sha256 one.
pub const MAX_BUILD_ID_DIGITS: usize = 64;

/// Longest module name: the kernel's `MODULE_NAME_LEN` is 56 with its NUL.
const MAX_MODULE_NAME: usize = 55;

/// Longest string field a path is made of (`NAME_MAX`).
const MAX_COMPONENT: usize = 255;

fn is_lower_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The value as a message shows it: quoted, control characters escaped, long ones cut.
fn shown(value: &str) -> String {
    let cut: String = value.chars().take(80).collect();
    if cut.len() < value.len() {
        format!("{cut:?}... ({} bytes)", value.len())
    } else {
        format!("{cut:?}")
    }
}

fn invalid(field: &str, value: &str, why: impl std::fmt::Display) -> ManifestError {
    ManifestError::Invalid {
        field: field.to_string(),
        why: format!("{} {why}", shown(value)),
    }
}

/// Why a string is not a build-id; reads after the value (`"xy" is not lowercase hex`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadBuildId {
    /// Empty, or a character other than `0-9a-f`.
    NotLowerHex,
    /// An odd number of hex digits (this many): not whole bytes.
    OddDigits(usize),
    /// More hex digits (this many) than any build-id has.
    TooLong(usize),
}

impl std::fmt::Display for BadBuildId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadBuildId::NotLowerHex => f.write_str("is not lowercase hex"),
            BadBuildId::OddDigits(n) => write!(f, "has an odd number of hex digits ({n})"),
            BadBuildId::TooLong(n) => write!(
                f,
                "has {n} hex digits, more than the {MAX_BUILD_ID_DIGITS} of any build-id"
            ),
        }
    }
}

/// A GNU build-id as perf and debuginfod spell it: lowercase hex, whole bytes, not too long.
/// Both look files up under `.build-id/XX/REST`, so anything else would make a path of it.
pub fn check_build_id(id: &str) -> Result<(), BadBuildId> {
    if id.is_empty() || !is_lower_hex(id) {
        return Err(BadBuildId::NotLowerHex);
    }
    if id.len() % 2 != 0 {
        return Err(BadBuildId::OddDigits(id.len()));
    }
    if id.len() > MAX_BUILD_ID_DIGITS {
        return Err(BadBuildId::TooLong(id.len()));
    }
    Ok(())
}

fn build_id(field: &str, id: &str) -> Result<(), ManifestError> {
    check_build_id(id).map_err(|why| invalid(field, id, why))
}

/// Why a string cannot be one file name; reads after the value (`"a/b" contains `/``).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadPathComponent {
    /// The empty string.
    Empty,
    /// `.` or `..`.
    Dot,
    /// Holds a `/`.
    Slash,
    /// Holds a control character (NUL included).
    Control,
    /// Longer than `NAME_MAX` bytes.
    TooLong,
}

impl std::fmt::Display for BadPathComponent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadPathComponent::Empty => f.write_str("is empty"),
            BadPathComponent::Dot => f.write_str("is not a file name"),
            BadPathComponent::Slash => f.write_str("contains `/`"),
            BadPathComponent::Control => f.write_str("contains a control character"),
            BadPathComponent::TooLong => write!(f, "is longer than {MAX_COMPONENT} bytes"),
        }
    }
}

/// Whether `s` can be joined to a directory as one file name: not empty, `.` or `..`, no
/// `/`, no NUL, no control character, at most `NAME_MAX` bytes.
pub fn check_path_component(s: &str) -> Result<(), BadPathComponent> {
    if s.is_empty() {
        return Err(BadPathComponent::Empty);
    }
    if s == "." || s == ".." {
        return Err(BadPathComponent::Dot);
    }
    if s.contains('/') {
        return Err(BadPathComponent::Slash);
    }
    if s.chars().any(char::is_control) {
        return Err(BadPathComponent::Control);
    }
    if s.len() > MAX_COMPONENT {
        return Err(BadPathComponent::TooLong);
    }
    Ok(())
}

fn path_component(field: &str, s: &str) -> Result<(), ManifestError> {
    check_path_component(s).map_err(|why| invalid(field, s, why))
}

/// A module name as `/proc/modules` has it: letters, digits, `_` and `-`.
fn module_name(field: &str, s: &str) -> Result<(), ManifestError> {
    path_component(field, s)?;
    if s.len() > MAX_MODULE_NAME {
        return Err(invalid(
            field,
            s,
            format!("is longer than the kernel's {MAX_MODULE_NAME} bytes"),
        ));
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(invalid(
            field,
            s,
            "has characters no module name has (letters, digits, `_`, `-`)",
        ));
    }
    Ok(())
}

fn address(field: &str, s: &str) -> Result<(), ManifestError> {
    match parse_hex_addr(s) {
        Some(_) => Ok(()),
        None => Err(invalid(field, s, "is not a hex address")),
    }
}

/// Why a `manifest.json` cannot be used.
#[derive(Debug)]
pub enum ManifestError {
    /// Not JSON of the manifest's shape.
    Json(serde_json::Error),
    /// `schema` is not [`crate::MANIFEST_SCHEMA`].
    UnknownSchema(String),
    /// `version` is newer than [`crate::MANIFEST_VERSION`].
    TooNew(u32),
    /// A field has a value no agent writes (and a reader must not use).
    Invalid {
        /// The field, as in the JSON: `modules[3].build_id`.
        field: String,
        /// The value and what is wrong with it.
        why: String,
    },
}

impl std::fmt::Display for ManifestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ManifestError::Json(e) => write!(f, "{e}"),
            ManifestError::UnknownSchema(s) => write!(f, "unknown schema {s:?}"),
            ManifestError::TooNew(v) => write!(
                f,
                "manifest version {v} is newer than this kprofctl understands ({})",
                crate::MANIFEST_VERSION
            ),
            ManifestError::Invalid { field, why } => write!(f, "{field}: {why}"),
        }
    }
}

impl std::error::Error for ManifestError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ManifestError::Json(e) => Some(e),
            _ => None,
        }
    }
}

/// `uname(2)` fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uname {
    /// `Linux`.
    pub sysname: String,
    /// The board's host name.
    pub nodename: String,
    /// Kernel release (`6.1.0-18-amd64`).
    pub release: String,
    /// Kernel build string (`#1 SMP PREEMPT_DYNAMIC ...`).
    pub version: String,
    /// Machine architecture (`x86_64`, `aarch64`).
    pub machine: String,
}

/// One sampled event and what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// What the user asked for (`cycles`, `r03/period=10000/`), or `None` for the default.
    #[serde(default)]
    pub requested: Option<String>,
    /// perf's name of the event actually opened (`cpu-clock`, `r03`).
    pub name: String,
    /// `perf_event_attr.type`.
    pub attr_type: u32,
    /// `perf_event_attr.config`.
    pub attr_config: u64,
    /// Fixed sample period, when sampling by period (`-c`, `/period=N/`).
    #[serde(default)]
    pub sample_period: Option<u64>,
    /// Sample frequency in Hz, when sampling by frequency (`-F`).
    #[serde(default)]
    pub sample_freq: Option<u64>,
    /// The event that was asked for and could not be opened, when this one replaced it.
    #[serde(default)]
    pub fallback_from: Option<String>,
    /// The kernel's reason the asked-for event could not be opened.
    #[serde(default)]
    pub fallback_reason: Option<String>,
    /// The perf.data sample ids belonging to this event (one per CPU or thread).
    #[serde(default)]
    pub ids: Vec<u64>,
    /// Samples written for this event.
    pub samples: u64,
    /// Samples the kernel reported lost (PERF_RECORD_LOST and LOST_SAMPLES).
    pub lost: u64,
    /// PERF_RECORD_THROTTLE records for this event.
    pub throttled: u64,
    /// The event's counter total read at the end of the capture (all its fds summed):
    /// tells an event that counted nothing from one that counted below its period.
    /// `None` from agents before it was recorded or when the read failed.
    #[serde(default)]
    pub count: Option<u64>,
    /// The event produced no sample: the capture says nothing about it.
    #[serde(default)]
    pub no_samples: bool,
}

/// The workload command and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    /// The command and its arguments as run.
    pub argv: Vec<String>,
    /// Its process id.
    #[serde(default)]
    pub pid: Option<i32>,
    /// Exit code when it exited normally.
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// Signal number when it was killed by a signal.
    #[serde(default)]
    pub signal: Option<i32>,
}

/// The running kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Kernel {
    /// Kernel release, as `uname -r`.
    pub release: String,
    /// GNU build-id from `/sys/kernel/notes`, lowercase hex, `None` when the kernel has none.
    #[serde(default)]
    pub build_id: Option<String>,
    /// Runtime address of `_text` (from kallsyms), hex; the KASLR offset is this minus the
    /// link-time address of `_text` in vmlinux.
    #[serde(default)]
    pub text_addr: Option<String>,
}

/// A loaded module.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    /// Module name as in `/proc/modules`.
    pub name: String,
    /// GNU build-id from `/sys/module/NAME/notes/.note.gnu.build-id`.
    #[serde(default)]
    pub build_id: Option<String>,
    /// Base address from `/proc/modules`, hex.
    pub base: String,
    /// Size from `/proc/modules`.
    pub size: u64,
    /// Section name → load address (hex) from `/sys/module/NAME/sections/`.
    #[serde(default)]
    pub sections: BTreeMap<String, String>,
}

/// Size and SHA-256 of a file in the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// Member name in the archive.
    pub file: String,
    /// Size in bytes.
    pub size: u64,
    /// Lowercase hex SHA-256.
    pub sha256: String,
}

/// Formats an address the way the manifest stores it.
pub fn hex_addr(addr: u64) -> String {
    format!("{addr:#x}")
}

/// Parses an address as the manifest stores it (`0x` prefix optional).
pub fn parse_hex_addr(s: &str) -> Option<u64> {
    let digits = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(digits, 16).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn minimal(schema: &str, version: u32) -> String {
        let m = Manifest {
            schema: schema.into(),
            version,
            capture_id: "c".into(),
            agent_version: "0".into(),
            uname: Uname {
                release: "6.1".into(),
                ..Uname::default()
            },
            events: Vec::new(),
            command: None,
            target_pid: None,
            cpus: vec![0],
            callchain: false,
            call_graph: None,
            stack_user_size: None,
            start_time_ns: 1,
            stop_time_ns: 2,
            stop_reason: "duration".into(),
            kernel: Kernel {
                release: "6.1".into(),
                build_id: None,
                text_addr: None,
            },
            modules: Vec::new(),
            perf_data: FileDigest {
                file: crate::PERF_DATA.into(),
                size: 0,
                sha256: String::new(),
            },
            sysctl: BTreeMap::new(),
            mmap_pages: None,
            off_cpu: None,
            markers: None,
            truncated: false,
            truncation: None,
            ring_dropped: None,
            skipped_files: None,
            sequence: None,
            latency: Vec::new(),
            contention: None,
        };
        serde_json::to_string(&m).unwrap()
    }

    /// A manifest without `markers` (older agents, or no --markers) parses with none and
    /// writes none; one with it round-trips.
    #[test]
    fn parse_manifest_markers_optional() {
        let old = minimal(crate::MANIFEST_SCHEMA, crate::MANIFEST_VERSION);
        assert!(!old.contains("markers"));
        let mut m = Manifest::from_json(old.as_bytes()).unwrap();
        assert_eq!(m.markers, None);
        m.markers = Some(Markers {
            source: "ftrace-trace_marker".into(),
            event: "ftrace:print".into(),
            tracefs: "/sys/kernel/tracing".into(),
            trace_clock: "perf".into(),
            lines: 3,
            lost: 1,
        });
        let json = serde_json::to_string(&m).unwrap();
        assert!(json.contains(r#""lines":3"#), "{json}");
        assert_eq!(Manifest::from_json(json.as_bytes()).unwrap(), m);
    }

    /// A summary is read with what `list` needs and refused as the whole manifest would be.
    #[test]
    fn summary_same_checks_as_the_manifest() {
        let ok = minimal(crate::MANIFEST_SCHEMA, crate::MANIFEST_VERSION);
        let s = Summary::from_json(ok.as_bytes()).unwrap();
        assert_eq!(
            (s.capture_id.as_str(), s.command, s.sequence),
            ("c", None, None)
        );
        let other = minimal("something-else", 1);
        assert!(matches!(
            Summary::from_json(other.as_bytes()),
            Err(ManifestError::UnknownSchema(_))
        ));
        let newer = minimal(crate::MANIFEST_SCHEMA, crate::MANIFEST_VERSION + 1);
        assert!(matches!(
            Summary::from_json(newer.as_bytes()),
            Err(ManifestError::TooNew(_))
        ));
        let escaping = ok.replace("\"capture_id\":\"c\"", "\"capture_id\":\"../x\"");
        assert!(matches!(
            Summary::from_json(escaping.as_bytes()),
            Err(ManifestError::Invalid { .. })
        ));
    }

    /// A manifest of this schema and version parses; another schema, a newer version and
    /// non-JSON are refused with their reason.
    #[test]
    fn parse_manifest_schema_and_version_checked() {
        let ok = minimal(crate::MANIFEST_SCHEMA, crate::MANIFEST_VERSION);
        assert_eq!(Manifest::from_json(ok.as_bytes()).unwrap().capture_id, "c");
        let other = minimal("something-else", 1);
        assert_eq!(
            Manifest::from_json(other.as_bytes())
                .unwrap_err()
                .to_string(),
            "unknown schema \"something-else\""
        );
        let newer = minimal(crate::MANIFEST_SCHEMA, crate::MANIFEST_VERSION + 1);
        assert!(matches!(
            Manifest::from_json(newer.as_bytes()),
            Err(ManifestError::TooNew(_))
        ));
        assert!(matches!(
            Manifest::from_json(b"{"),
            Err(ManifestError::Json(_))
        ));
    }

    /// (JSON pointer, hostile value, what the error must say) of the top-level fields.
    fn hostile_fields() -> Vec<(&'static str, serde_json::Value, &'static str)> {
        vec![
            (
                "/kernel/build_id",
                "ééé".into(),
                "kernel.build_id: \"ééé\" is not lowercase hex",
            ),
            (
                "/kernel/build_id",
                "ABCD".into(),
                "kernel.build_id: \"ABCD\" is not lowercase hex",
            ),
            (
                "/kernel/build_id",
                "abc".into(),
                "kernel.build_id: \"abc\" has an odd number of hex digits (3)",
            ),
            (
                "/kernel/build_id",
                "".into(),
                "kernel.build_id: \"\" is not lowercase hex",
            ),
            (
                "/kernel/build_id",
                "ab".repeat(33).into(),
                "more than the 64",
            ),
            (
                "/kernel/text_addr",
                "0xzz".into(),
                "kernel.text_addr: \"0xzz\" is not a hex address",
            ),
            (
                "/uname/release",
                "../../etc".into(),
                "uname.release: \"../../etc\" contains `/`",
            ),
            (
                "/uname/release",
                "..".into(),
                "uname.release: \"..\" is not a file name",
            ),
            (
                "/uname/release",
                "6.1\u{0}x".into(),
                "uname.release: \"6.1\\0x\" contains a control character",
            ),
            (
                "/kernel/release",
                "".into(),
                "kernel.release: \"\" is empty",
            ),
            (
                "/capture_id",
                "a/b".into(),
                "capture_id: \"a/b\" contains `/`",
            ),
            (
                "/perf_data/file",
                "../x".into(),
                "perf_data.file: \"../x\" is not \"perf.data\"",
            ),
            (
                "/perf_data/sha256",
                "xyz".into(),
                "perf_data.sha256: \"xyz\" is not 64 lowercase hex",
            ),
        ]
    }

    /// (field, hostile value, what the error must say) of the second module entry.
    fn hostile_module_fields() -> Vec<(&'static str, serde_json::Value, &'static str)> {
        vec![
            (
                "build_id",
                "éaé".into(),
                "modules[1].build_id: \"éaé\" is not lowercase hex",
            ),
            (
                "name",
                "../evil".into(),
                "modules[1].name: \"../evil\" contains `/`",
            ),
            (
                "name",
                "a b".into(),
                "modules[1].name: \"a b\" has characters no module name has",
            ),
            (
                "name",
                "m".repeat(56).into(),
                "longer than the kernel's 55 bytes",
            ),
            (
                "base",
                "base".into(),
                "modules[1].base: \"base\" is not a hex address",
            ),
            (
                "sections",
                serde_json::json!({".text": "nope"}),
                "modules[1].sections[\".text\"]: \"nope\" is not a hex address",
            ),
        ]
    }

    /// Every field a reader makes a path, slice or address of is checked at parse time; the
    /// error names the field and shows the value escaped.
    #[test]
    fn parse_manifest_hostile_fields_named() {
        let ok: serde_json::Value =
            serde_json::from_str(&minimal(crate::MANIFEST_SCHEMA, crate::MANIFEST_VERSION))
                .unwrap();
        let module = serde_json::json!({"name": "mychardrv", "base": "0xffffffffc0000000",
            "size": 4096, "build_id": "ab".repeat(20), "sections": {".text": "0xffffffffc0000000"}});
        let cases = hostile_fields();
        for (ptr, value, want) in &cases {
            let mut m = ok.clone();
            *m.pointer_mut(ptr).unwrap() = value.clone();
            let err = Manifest::from_json(&serde_json::to_vec(&m).unwrap()).unwrap_err();
            assert!(err.to_string().contains(want), "{ptr}: {err}");
        }
        let module_cases = hostile_module_fields();
        for (field, value, want) in &module_cases {
            let mut m = ok.clone();
            let mut bad = module.clone();
            bad[*field] = value.clone();
            m["modules"] = serde_json::json!([module.clone(), bad]);
            let err = Manifest::from_json(&serde_json::to_vec(&m).unwrap()).unwrap_err();
            assert!(err.to_string().contains(want), "{field}: {err}");
        }
        let mut m = ok.clone();
        m["modules"] = serde_json::json!([module.clone(), module]);
        m["uname"]["release"] = "6.1.0-18-amd64".into();
        m["kernel"]["build_id"] = "48dc540c8b76393804ca8088dbfa7d42911a9444".into();
        assert!(Manifest::from_json(&serde_json::to_vec(&m).unwrap()).is_ok());
    }

    /// An event entry written before `count` and `no_samples` existed still reads, as
    /// unknown count and not flagged; new entries round-trip.
    #[test]
    fn parse_event_record_without_count_defaults() {
        let old = r#"{"requested":null,"name":"cycles","attr_type":0,"attr_config":0,
            "sample_freq":4000,"ids":[7],"samples":12,"lost":0,"throttled":3}"#;
        let e: EventRecord = serde_json::from_str(old).unwrap();
        assert_eq!((e.count, e.no_samples, e.throttled), (None, false, 3));
        let new = EventRecord {
            count: Some(0),
            no_samples: true,
            ..e
        };
        let back: EventRecord =
            serde_json::from_str(&serde_json::to_string(&new).unwrap()).unwrap();
        assert_eq!(back, new);
    }

    /// Hex addresses round-trip, with or without prefix, and garbage is rejected.
    #[test]
    fn parse_hex_addr_kernel_address_roundtrips() {
        let a = 0xffff_ffff_c0a0_0000;
        assert_eq!(parse_hex_addr(&hex_addr(a)), Some(a));
        assert_eq!(parse_hex_addr("ffffffffc0a00000"), Some(a));
        assert_eq!(parse_hex_addr("0xzz"), None);
        assert_eq!(parse_hex_addr("0x1ffffffffffffffff"), None);
    }
}

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
    /// Whether call chains were recorded (`-g`).
    pub callchain: bool,
    /// Start of sampling, nanoseconds since the Unix epoch.
    pub start_time_ns: u64,
    /// End of sampling, nanoseconds since the Unix epoch.
    pub stop_time_ns: u64,
    /// Why the capture stopped: `command-exited`, `duration`, `signal`, `target-exited`.
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
}

/// `uname(2)` fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Uname {
    pub sysname: String,
    pub nodename: String,
    pub release: String,
    pub version: String,
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
}

/// The workload command and how it ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Command {
    pub argv: Vec<String>,
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
    pub file: String,
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

//! `kprof-agent info`: facts about the board, as JSON.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::manifest::{Kernel, Module, Uname};

/// Value of [`BoardInfo::schema`].
pub const INFO_SCHEMA: &str = "kprof-board-info";

/// What `kprof-agent info` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BoardInfo {
    /// Always [`INFO_SCHEMA`].
    pub schema: String,
    /// Same versioning as the manifest ([`crate::MANIFEST_VERSION`]).
    pub version: u32,
    /// Version of the agent that answered.
    pub agent_version: String,
    /// `uname(2)` of the board.
    pub uname: Uname,
    /// Effective uid the agent ran as: with `perf_event_paranoid` > 1 only root samples the
    /// kernel. `None` from agents that did not report it.
    #[serde(default)]
    pub uid: Option<u32>,
    /// The running kernel.
    pub kernel: Kernel,
    /// Every loaded module.
    pub modules: Vec<Module>,
    /// `perf_event_paranoid`, `kptr_restrict`, `perf_event_max_sample_rate`, ... as read.
    pub sysctl: BTreeMap<String, String>,
    /// Online CPUs.
    pub cpus: Vec<u32>,
    /// PMUs under `/sys/bus/event_source/devices`: name → perf type number.
    pub pmus: BTreeMap<String, u32>,
    /// Generic events probed with perf_event_open: name → `ok` or the kernel's error.
    pub events: BTreeMap<String, String>,
}

//! `kprof-agent info`: board facts for the host (and for a person deciding which events to ask).

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use kprof_capture::info::{BoardInfo, INFO_SCHEMA};

use crate::events;
use crate::procfs;
use crate::sys::{self, PerfEventAttr};

/// PMUs from sysfs: device name → perf type.
fn pmus() -> BTreeMap<String, u32> {
    let mut out = BTreeMap::new();
    let Ok(dir) = fs::read_dir("/sys/bus/event_source/devices") else {
        return out;
    };
    for e in dir.flatten() {
        let ty = fs::read_to_string(e.path().join("type"))
            .ok()
            .and_then(|s| s.trim().parse().ok());
        if let Some(ty) = ty {
            out.insert(e.file_name().to_string_lossy().into_owned(), ty);
        }
    }
    out
}

/// Tries each generic event as a counter on this process: `ok` or the kernel's reason.
fn probe_events() -> BTreeMap<String, String> {
    events::generic_names()
        .map(|name| {
            let spec = events::parse(name).expect("built-in event names parse");
            let attr = PerfEventAttr {
                type_: spec.attr_type,
                size: sys::ATTR_SIZE,
                config: spec.config,
                flags: sys::flag::DISABLED,
                ..Default::default()
            };
            let verdict = match sys::perf_event_open(&attr, 0, -1) {
                Ok(_) => "ok".to_string(),
                Err(e) => e.to_string(),
            };
            (name.to_string(), verdict)
        })
        .collect()
}

/// Gathers everything `info` prints.
pub fn gather() -> BoardInfo {
    let uname = procfs::uname();
    let kallsyms = fs::read_to_string("/proc/kallsyms").unwrap_or_default();
    let modules_text = fs::read_to_string("/proc/modules").unwrap_or_default();
    let sysctl = procfs::sysctls();
    BoardInfo {
        schema: INFO_SCHEMA.into(),
        version: kprof_capture::MANIFEST_VERSION,
        agent_version: crate::AGENT_VERSION.into(),
        kernel: procfs::kernel(&kallsyms, &uname.release),
        uname,
        // SAFETY: geteuid has no preconditions and cannot fail.
        uid: Some(unsafe { libc::geteuid() }),
        modules: procfs::modules_with_details(&modules_text, Path::new("/sys/module")),
        sysctl,
        cpus: procfs::online_cpus().unwrap_or_default(),
        pmus: pmus(),
        events: probe_events(),
    }
}

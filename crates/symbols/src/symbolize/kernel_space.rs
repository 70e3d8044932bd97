//! The kernel's address space as the capture recorded it: where vmlinux's `_text` was (the
//! KASLR offset), the modules with their core ranges and section placement, and kallsyms.
//!
//! The home of KASLR: [`KernelSpace::set_kaslr`] computes the offset once vmlinux is found,
//! [`KernelSpace::vmlinux_address`] takes it off a sampled address.

use super::{CAPTURE_KALLSYMS, HOST_KALLSYMS};
use crate::capture::Capture;
use crate::elf::{Placement, SymbolFile};
use crate::kallsyms::Kallsyms;
use crate::HostKernel;
use kprof_capture::manifest::parse_hex_addr;
use linux_perf_data::DsoKey;
use std::collections::HashMap;

/// A module as recorded.
#[derive(Debug, Clone)]
pub(super) struct Module {
    pub(super) name: String,
    pub(super) build_id: Option<String>,
    pub(super) base: u64,
    pub(super) size: u64,
    pub(super) sections: Placement,
    pub(super) recorded_path: Option<String>,
    /// The profile image, once an address fell into the module.
    pub(super) image: Option<usize>,
}

/// Where a kernel address is, as far as the records tell without opening a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum KernelPlace {
    /// In module `m` (its recorded core range, or kallsyms names it the owner).
    Module(usize),
    /// In vmlinux (its recorded range, or kallsyms says so).
    Vmlinux,
    /// Neither says: the placed module files may (init code, other sections).
    Unknown,
}

/// vmlinux, the modules, kallsyms and the KASLR offset.
#[derive(Debug)]
pub(super) struct KernelSpace {
    /// The symbol table of the capture, or of this host once [`Self::ensure_host_kallsyms`]
    /// found the recorded kernel running here.
    pub(super) kallsyms: Option<Kallsyms>,
    /// Where `kallsyms` comes from, as warnings say it.
    pub(super) kallsyms_origin: &'static str,
    /// vmlinux's build-id from the manifest.
    pub(super) build_id: Option<String>,
    /// The run-time address of `_text`, recorded by the agent or by a
    /// `[kernel.kallsyms]_text` mapping.
    text: Option<u64>,
    /// vmlinux's range from its `[kernel.kallsyms]` mapping.
    range: Option<(u64, u64)>,
    /// The vmlinux image, once an address fell into it.
    pub(super) image: Option<usize>,
    /// Run-time address minus link address of vmlinux.
    kaslr: u64,
    pub(super) modules: Vec<Module>,
}

impl KernelSpace {
    /// The kernel of `capture`: its manifest's vmlinux build-id, `_text` and modules, and
    /// its kallsyms; this host's kallsyms may stand in for a bare perf.data when
    /// `host_kernel` is given. Warns into `warnings` when the kallsyms is unusable.
    pub(super) fn of_capture(
        capture: &Capture,
        host_kernel: bool,
        warnings: &mut Vec<String>,
    ) -> Self {
        let mut kallsyms = None;
        if let Some(text) = &capture.kallsyms {
            kallsyms = Kallsyms::parse(text);
            if kallsyms.is_none() {
                warnings.push("the capture's kallsyms has only zero addresses (kptr_restrict was set on the target)".into());
            }
        }
        let manifest = capture.manifest.as_ref();
        let kallsyms_origin = if kallsyms.is_none() && manifest.is_none() && host_kernel {
            HOST_KALLSYMS
        } else {
            CAPTURE_KALLSYMS
        };
        let modules = manifest.map_or_else(Vec::new, |m| {
            m.modules
                .iter()
                .map(|md| Module {
                    name: md.name.clone(),
                    build_id: md.build_id.clone(),
                    base: parse_hex_addr(&md.base).unwrap_or(0),
                    size: md.size,
                    sections: md
                        .sections
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), parse_hex_addr(v)?)))
                        .collect(),
                    recorded_path: None,
                    image: None,
                })
                .collect()
        });
        Self {
            kallsyms,
            kallsyms_origin,
            build_id: manifest.and_then(|m| m.kernel.build_id.clone()),
            text: manifest.and_then(|m| m.kernel.text_addr.as_deref().and_then(parse_hex_addr)),
            range: None,
            image: None,
            kaslr: 0,
            modules,
        }
    }

    /// Where `addr` is by the recorded module ranges, vmlinux's range and kallsyms.
    pub(super) fn place_of(&self, addr: u64) -> KernelPlace {
        if let Some(m) = self
            .modules
            .iter()
            .position(|m| addr >= m.base && addr < m.base.saturating_add(m.size))
        {
            return KernelPlace::Module(m);
        }
        if let Some((lo, hi)) = self.range {
            if addr >= lo && addr < hi {
                return KernelPlace::Vmlinux;
            }
        }
        if let Some(owner) = self.kallsyms.as_ref().and_then(|k| k.owner_of(addr)) {
            if owner.is_empty() {
                return KernelPlace::Vmlinux;
            }
            if let Some(m) = self.modules.iter().position(|m| m.name == owner) {
                return KernelPlace::Module(m);
            }
        }
        KernelPlace::Unknown
    }

    /// The modules with a section placed within 64 MiB below `addr`: the ones whose file
    /// may hold it.
    pub(super) fn modules_near(&self, addr: u64) -> Vec<usize> {
        (0..self.modules.len())
            .filter(|m| {
                self.modules[*m]
                    .sections
                    .values()
                    .any(|a| addr >= *a && addr - *a < (64 << 20))
            })
            .collect()
    }

    /// `addr` as an address of the vmlinux file: less the KASLR offset when there is a file
    /// (`has_file`); kallsyms has run-time addresses already.
    pub(super) fn vmlinux_address(&self, addr: u64, has_file: bool) -> u64 {
        if has_file {
            addr.wrapping_sub(self.kaslr)
        } else {
            addr
        }
    }

    /// A kernel MMAP: vmlinux's range (and `_text` from a `[kernel.kallsyms]_text` mapping),
    /// or a module, with its build-id from `header_build_ids` when the manifest did not name it.
    pub(super) fn add_mapping(
        &mut self,
        (path, start, len, pgoff): (&str, u64, u64, u64),
        header_build_ids: &HashMap<DsoKey, String>,
    ) {
        if path.starts_with("[kernel.kallsyms]") {
            self.range = Some((start, start.saturating_add(len)));
            if path == "[kernel.kallsyms]_text" && self.text.is_none() {
                self.text = Some(pgoff);
            }
            return;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        let name = file
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches(".ko")
            .replace('-', "_");
        let build_id = header_build_ids
            .iter()
            .find(|(k, _)| matches!(k, DsoKey::KernelModule { name: n } if n.trim_start_matches('[').trim_end_matches(']').replace('-', "_") == name))
            .map(|(_, v)| v.clone());
        match self.modules.iter_mut().find(|m| m.name == name) {
            Some(m) => {
                if m.recorded_path.is_none() && path.starts_with('/') {
                    m.recorded_path = Some(path.to_string());
                }
            }
            None => self.modules.push(Module {
                name,
                build_id,
                base: start,
                size: len,
                sections: Placement::new(),
                recorded_path: path.starts_with('/').then(|| path.to_string()),
                image: None,
            }),
        }
    }

    /// The KASLR offset: where `_text` of `vmlinux` was at run time (recorded by the agent,
    /// from a `[kernel.kallsyms]_text` mapping, or from kallsyms) minus its link address.
    pub(super) fn set_kaslr(&mut self, vmlinux: &SymbolFile, warnings: &mut Vec<String>) {
        let runtime = self.text.or_else(|| {
            self.kallsyms
                .as_ref()
                .and_then(|k| k.kernel_symbol("_text"))
        });
        match (runtime, vmlinux.symbol_address("_text")) {
            (Some(rt), Some(link)) => self.kaslr = rt.wrapping_sub(link),
            _ => warnings.push(
                "vmlinux: the runtime address of _text was not recorded: assuming no KASLR offset"
                    .into(),
            ),
        }
    }

    /// Where the sections of module `m` were loaded, for relocating its file.
    pub(super) fn module_placement(&self, m: usize, warnings: &mut Vec<String>) -> Placement {
        let md = &self.modules[m];
        let mut placement = md.sections.clone();
        if placement.is_empty() {
            // A bare perf.data has only the module's base: perf assumes .text there too.
            placement.insert(".text".into(), md.base);
            warnings.push(format!(
                "{}.ko: section addresses were not recorded: .text placed at the module base {:#x}",
                md.name, md.base
            ));
        }
        placement
    }

    /// Uses this host's kallsyms for a bare perf.data when the running kernel is the
    /// recorded one (same build-id), as `perf report` does.
    pub(super) fn ensure_host_kallsyms(
        &mut self,
        host: Option<&HostKernel>,
        build_id: Option<&str>,
    ) {
        if self.kallsyms.is_some() || self.kallsyms_origin != HOST_KALLSYMS {
            return;
        }
        let Some(host) = host else {
            return;
        };
        let Some(id) = build_id else { return };
        if host.build_id.as_deref() != Some(id) {
            return;
        }
        if let Some(text) = host
            .kallsyms
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
        {
            self.kallsyms = Kallsyms::parse(&text);
        }
    }
}

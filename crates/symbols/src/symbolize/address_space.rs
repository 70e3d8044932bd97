//! The address space of the capture: user mappings per process, kernel modules with their
//! recorded ranges and section placement, and where a kernel address belongs.

use super::resolve::FrameRun;
use super::State;
use crate::elf::{Placement, SymbolFile};
use linux_perf_data::DsoKey;
use std::rc::Rc;

/// A user mapping of a process.
#[derive(Debug, Clone)]
pub(super) struct Mapping {
    pub(super) start: u64,
    pub(super) end: u64,
    pub(super) pgoff: u64,
    pub(super) path: Rc<str>,
    pub(super) build_id: Option<String>,
    /// The profile image, once a sample fell into the mapping.
    pub(super) image: Option<usize>,
}

/// A module as recorded.
#[derive(Debug, Clone)]
pub(super) struct Module {
    pub(super) name: String,
    pub(super) build_id: Option<String>,
    pub(super) base: u64,
    pub(super) size: u64,
    pub(super) sections: Placement,
    pub(super) recorded_path: Option<String>,
    pub(super) image: Option<usize>,
}

impl State<'_> {
    /// Which module, if any, a kernel address belongs to.
    pub(super) fn module_of(&mut self, addr: u64) -> Option<usize> {
        if let Some(m) = self
            .modules
            .iter()
            .position(|m| addr >= m.base && addr < m.base.saturating_add(m.size))
        {
            return Some(m);
        }
        if let Some((lo, hi)) = self.kernel_range {
            if addr >= lo && addr < hi {
                return None;
            }
        }
        if let Some(owner) = self.kallsyms.as_ref().and_then(|k| k.owner_of(addr)) {
            if owner.is_empty() {
                return None;
            }
            if let Some(m) = self.modules.iter().position(|m| m.name == owner) {
                return Some(m);
            }
        }
        // Init code and other sections outside the core range: ask the placed module files.
        for m in 0..self.modules.len() {
            let near = self.modules[m]
                .sections
                .values()
                .any(|a| addr >= *a && addr - *a < (64 << 20));
            if !near {
                continue;
            }
            let img = self.module_image(m);
            if self.files[img]
                .as_ref()
                .is_some_and(|f| f.contains_placed(addr))
            {
                return Some(m);
            }
        }
        None
    }

    pub(super) fn resolve_kernel(&mut self, addr: u64) -> FrameRun {
        let (image, lookup_addr, owner) = self.kernel_lookup(addr);
        self.resolve_in(image, lookup_addr, &owner)
    }

    /// The image of a kernel address, the address to look up in its file (vmlinux: less the
    /// KASLR offset) and the module name kallsyms knows it by.
    pub(super) fn kernel_lookup(&mut self, addr: u64) -> (usize, u64, String) {
        match self.module_of(addr) {
            Some(m) => (self.module_image(m), addr, self.modules[m].name.clone()),
            None => {
                let img = self.kernel_image();
                let a = if self.files[img].is_some() {
                    addr.wrapping_sub(self.kaslr)
                } else {
                    addr
                };
                (img, a, String::new())
            }
        }
    }

    pub(super) fn resolve_user(&mut self, pid: i32, addr: u64) -> FrameRun {
        let Some((img, start, _, pgoff)) = self.mapping_at(pid, addr) else {
            let img = self.unknown_image();
            return self.resolve_in(img, addr, "");
        };
        let offset = (addr - start).wrapping_add(pgoff);
        let svma = self.files[img]
            .as_ref()
            .and_then(|f| f.offset_to_address(offset))
            .unwrap_or(offset);
        self.resolve_in(img, svma, "")
    }

    /// The mapping of `addr` in process `pid`: its image (loaded on first use), start, end
    /// and page offset.
    pub(super) fn mapping_at(&mut self, pid: i32, addr: u64) -> Option<(usize, u64, u64, u64)> {
        let (i, start, end, pgoff, image) = self.procs.get(&pid).and_then(|maps| {
            let i = maps.partition_point(|m| m.start <= addr);
            let m = maps.get(i.checked_sub(1)?)?;
            (addr < m.end).then_some((i - 1, m.start, m.end, m.pgoff, m.image))
        })?;
        let img = match image {
            Some(img) => img,
            None => {
                let map = self.procs[&pid][i].clone();
                let img = self.user_image(&map);
                // Remembered in a list of its own only: a shared one would be copied for it,
                // and `user_image` finds the image again by path and build-id.
                if let Some(m) = self
                    .procs
                    .get_mut(&pid)
                    .and_then(Rc::get_mut)
                    .and_then(|v| v.get_mut(i))
                {
                    m.image = Some(img);
                }
                img
            }
        };
        Some((img, start, end, pgoff))
    }

    pub(super) fn add_mapping(&mut self, pid: i32, map: Mapping) {
        self.unwinders.remove(&pid);
        let maps = Rc::make_mut(self.procs.entry(pid).or_default());
        maps.retain(|m| m.end <= map.start || m.start >= map.end);
        let i = maps.partition_point(|m| m.start < map.start);
        maps.insert(i, map);
    }

    /// A forked process `pid` gets the mappings of `parent` that it has none in the place
    /// of. Its own may be there already: a FORK record can sort after the child's first MMAP2
    /// (the child ran on a CPU whose clock is behind), and those are newer than the parent's.
    /// The child shares the parent's list until one of them changes it.
    pub(super) fn inherit_mappings(&mut self, pid: i32, parent: i32) {
        let Some(inherited) = self.procs.get(&parent).cloned() else {
            return;
        };
        let maps = self.procs.entry(pid).or_default();
        if maps.is_empty() {
            *maps = inherited;
            return;
        }
        self.unwinders.remove(&pid);
        let maps = Rc::make_mut(maps);
        for map in inherited.iter().cloned() {
            let i = maps.partition_point(|m| m.start < map.start);
            let free = maps.get(i).is_none_or(|next| next.start >= map.end)
                && i.checked_sub(1).is_none_or(|j| maps[j].end <= map.start);
            if free {
                maps.insert(i, map);
            }
        }
    }

    pub(super) fn add_kernel_mapping(&mut self, path: &str, start: u64, len: u64, pgoff: u64) {
        if path.starts_with("[kernel.kallsyms]") {
            self.kernel_range = Some((start, start.saturating_add(len)));
            if path == "[kernel.kallsyms]_text" && self.kernel_text.is_none() {
                self.kernel_text = Some(pgoff);
            }
            return;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        let name = file
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches(".ko")
            .replace('-', "_");
        let build_id = self
            .header_build_ids
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
    pub(super) fn set_kaslr(&mut self, vmlinux: &SymbolFile) {
        let runtime = self.kernel_text.or_else(|| {
            self.kallsyms
                .as_ref()
                .and_then(|k| k.kernel_symbol("_text"))
        });
        match (runtime, vmlinux.symbol_address("_text")) {
            (Some(rt), Some(link)) => self.kaslr = rt.wrapping_sub(link),
            _ => self.profile.warnings.push(
                "vmlinux: the runtime address of _text was not recorded: assuming no KASLR offset"
                    .into(),
            ),
        }
    }

    /// Where the sections of module `m` were loaded, for relocating its file.
    pub(super) fn module_placement(&mut self, m: usize) -> Placement {
        let md = &self.modules[m];
        let mut placement = md.sections.clone();
        if placement.is_empty() {
            // A bare perf.data has only the module's base: perf assumes .text there too.
            placement.insert(".text".into(), md.base);
            let warning = format!(
                "{}.ko: section addresses were not recorded: .text placed at the module base {:#x}",
                md.name, md.base
            );
            self.profile.warnings.push(warning);
        }
        placement
    }
}

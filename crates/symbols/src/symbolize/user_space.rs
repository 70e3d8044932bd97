//! User space of the capture: each process's executable mappings, its framehop unwinder, the
//! CFI of each user image, and how the unwinds went.
//!
//! The state of user unwinding lives here; [`super::call_paths`] drives it.

use super::call_paths::UnwindStats;
use crate::arch::Arch;
use crate::elf::SymbolFile;
use crate::profile::Image;
use crate::sources::Sources;
use crate::unwind::{Cfi, ProcessUnwinder};
use std::collections::HashMap;
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

/// Mappings, unwinders and CFI of the processes of a capture.
#[derive(Default)]
pub(super) struct UserSpace {
    /// Shared between a parent and the children it forked until one of them maps or unmaps
    /// something: a FORK copies nothing, so many forks of a process with many mappings cost
    /// one list, not one per child.
    procs: HashMap<i32, Rc<Vec<Mapping>>>,
    /// framehop's unwinder per process, dropped when its mappings change.
    unwinders: HashMap<i32, ProcessUnwinder>,
    /// The CFI of each image, once looked for.
    cfis: HashMap<usize, Option<Rc<Cfi>>>,
    pub(super) stats: UnwindStats,
}

impl UserSpace {
    /// The mapping of `addr` in process `pid`, with its index in the process's list.
    pub(super) fn mapping(&self, pid: i32, addr: u64) -> Option<(usize, &Mapping)> {
        let maps = self.procs.get(&pid)?;
        let i = maps.partition_point(|m| m.start <= addr).checked_sub(1)?;
        let m = maps.get(i)?;
        (addr < m.end).then_some((i, m))
    }

    /// Remembers the image of mapping `i` of `pid`, in a list of its own only: a shared one
    /// would be copied for it, and the image loader finds the image again by path and build-id.
    pub(super) fn remember_image(&mut self, pid: i32, i: usize, image: usize) {
        if let Some(m) = self
            .procs
            .get_mut(&pid)
            .and_then(Rc::get_mut)
            .and_then(|v| v.get_mut(i))
        {
            m.image = Some(image);
        }
    }

    /// Whether any mapping of `pid` is known.
    pub(super) fn maps_known(&self, pid: i32) -> bool {
        self.procs.get(&pid).is_some_and(|m| !m.is_empty())
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

    /// An exec of `pid`: its unwinder knew the old image's modules.
    ///
    /// The mappings seen so far stay, as perf keeps them: the new image's MMAP2 records
    /// replace the old ones they overlap. Clearing them here lost the new image when its exec
    /// COMM sorts after its first MMAP2 (the exec moved to another CPU whose clock is ahead),
    /// and every fp chain through it was cut.
    pub(super) fn exec(&mut self, pid: i32) {
        self.unwinders.remove(&pid);
    }

    /// The unwinder of `pid`, taken out while it asks for the places of addresses; a new one
    /// for `arch` when the process has none. Give it back with [`Self::put_unwinder`].
    pub(super) fn take_unwinder(&mut self, pid: i32, arch: Arch) -> Option<ProcessUnwinder> {
        self.unwinders
            .remove(&pid)
            .or_else(|| ProcessUnwinder::new(arch))
    }

    pub(super) fn put_unwinder(&mut self, pid: i32, unwinder: ProcessUnwinder) {
        self.unwinders.insert(pid, unwinder);
    }

    /// The CFI of image `img`: its symbol file's `file`, else that of another file with its
    /// build-id in `sources` (the stripped binary next to a split debug file keeps
    /// `.eh_frame`).
    pub(super) fn cfi(
        &mut self,
        img: usize,
        file: Option<&SymbolFile>,
        image: &Image,
        sources: &Sources,
    ) -> Option<Rc<Cfi>> {
        if let Some(c) = self.cfis.get(&img) {
            return c.clone();
        }
        let own = file.and_then(SymbolFile::cfi);
        let cfi = own.or_else(|| {
            let id = image.build_id.as_deref()?;
            let recorded = std::path::Path::new(&image.recorded_path);
            sources
                .files_with_build_id(id, Some(recorded))
                .iter()
                .find_map(|p| {
                    let map = crate::elf::map_file(p).ok()?;
                    Cfi::from_elf(&map).map(Rc::new)
                })
        });
        self.cfis.insert(img, cfi.clone());
        cfi
    }
}

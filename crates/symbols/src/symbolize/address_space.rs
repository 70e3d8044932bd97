//! Where a sampled address belongs, joining the parts of the state: a kernel address to
//! vmlinux or a module ([`KernelSpace`](super::kernel_space::KernelSpace)), a user address to
//! a process's mapping ([`UserSpace`](super::user_space::UserSpace)), either to its image
//! ([`ImageLoader`](super::images::ImageLoader)) and its frames
//! ([`Frames`](super::resolve::Frames)).

use super::kernel_space::KernelPlace;
use super::resolve::FrameRun;
use super::State;
use crate::unwind::Cfi;
use std::rc::Rc;

impl State<'_> {
    /// Which module, if any, a kernel address belongs to.
    pub(super) fn module_of(&mut self, addr: u64) -> Option<usize> {
        match self.kernel.place_of(addr) {
            KernelPlace::Module(m) => return Some(m),
            KernelPlace::Vmlinux => return None,
            KernelPlace::Unknown => {}
        }
        // Init code and other sections outside the core range: ask the placed module files.
        self.kernel.modules_near(addr).into_iter().find(|&m| {
            let img = self
                .images
                .module_image(&mut self.kernel, m, &mut self.profile);
            self.images
                .file(img)
                .is_some_and(|f| f.contains_placed(addr))
        })
    }

    pub(super) fn resolve_kernel(&mut self, addr: u64) -> FrameRun {
        let (image, lookup_addr, owner) = self.kernel_lookup(addr);
        self.resolve_in(image, lookup_addr, &owner)
    }

    /// The image of a kernel address, the address to look up in its file (vmlinux: less the
    /// KASLR offset) and the module name kallsyms knows it by.
    pub(super) fn kernel_lookup(&mut self, addr: u64) -> (usize, u64, String) {
        match self.module_of(addr) {
            Some(m) => {
                let img = self
                    .images
                    .module_image(&mut self.kernel, m, &mut self.profile);
                (img, addr, self.kernel.modules[m].name.clone())
            }
            None => {
                let img = self
                    .images
                    .kernel_image(&mut self.kernel, &mut self.profile);
                let has_file = self.images.file(img).is_some();
                (
                    img,
                    self.kernel.vmlinux_address(addr, has_file),
                    String::new(),
                )
            }
        }
    }

    pub(super) fn resolve_user(&mut self, pid: i32, addr: u64) -> FrameRun {
        let Some((img, start, _, pgoff)) = self.mapping_at(pid, addr) else {
            let img = self.images.unknown_image(&mut self.profile);
            return self.resolve_in(img, addr, "");
        };
        let offset = (addr - start).wrapping_add(pgoff);
        let svma = self
            .images
            .file(img)
            .and_then(|f| f.offset_to_address(offset))
            .unwrap_or(offset);
        self.resolve_in(img, svma, "")
    }

    /// The frames of `addr` of `image`.
    fn resolve_in(&mut self, image: usize, addr: u64, kallsyms_owner: &str) -> FrameRun {
        self.frames.resolve_in(
            &mut self.profile,
            (&self.images.files, self.kernel.kallsyms.as_ref()),
            (image, addr),
            kallsyms_owner,
        )
    }

    /// The mapping of `addr` in process `pid`: its image (loaded on first use), start, end
    /// and page offset.
    pub(super) fn mapping_at(&mut self, pid: i32, addr: u64) -> Option<(usize, u64, u64, u64)> {
        let (i, map) = self.user.mapping(pid, addr)?;
        let (start, end, pgoff) = (map.start, map.end, map.pgoff);
        let img = match map.image {
            Some(img) => img,
            None => {
                let map = map.clone();
                let img = self.images.user_image(&map, &mut self.profile);
                self.user.remember_image(pid, i, img);
                img
            }
        };
        Some((img, start, end, pgoff))
    }

    /// The CFI of user image `img`.
    pub(super) fn image_cfi(&mut self, img: usize) -> Option<Rc<Cfi>> {
        self.user.cfi(
            img,
            self.images.file(img),
            &self.profile.images[img],
            self.images.sources(),
        )
    }

    /// The frame of a marked end of a path (`[truncated]`, `[no unwind info: IMAGE]`).
    pub(super) fn marker(&mut self, name: String) -> FrameRun {
        let images = &mut self.images;
        self.frames.marker(&mut self.profile, name, |profile| {
            images.marker_image(profile)
        })
    }
}

//! Call paths of one sample: the kernel part of PERF_SAMPLE_CALLCHAIN joined with the user
//! frames unwound from PERF_SAMPLE_REGS_USER + PERF_SAMPLE_STACK_USER, the marked frames
//! where an unwind stops, and the caller of an aarch64 leaf taken from its link register.

use super::State;
use crate::arch::Arch;
use crate::perf_data::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER};
use crate::profile::ImageWarning;
use crate::unwind::{perf_regs, End, Place, UnwindRegs};
use linux_perf_data::linux_perf_event_reader::{CpuMode, Regs, SampleRecord};

/// Name of the pseudo-image of the marked frames.
pub(super) const MARKER_IMAGE: &str = "[unwind]";
/// The marked frame of a user stack whose copy ran out before its root.
pub(crate) const TRUNCATED: &str = "[truncated]";

/// Functions a thread's stack starts in: the C libraries' process and thread entry code
/// (glibc, musl). A frame-pointer chain that reaches one has reached its root: the entry code
/// is built without frame pointers, so what follows is whatever its frame-pointer register
/// held, not a caller (gdb stops its backtraces there too). Without this, every chain of a
/// program built with frame pointers ended in an invented frame and `[truncated]`.
const STACK_ROOTS: &[&str] = &[
    "__libc_start_call_main",
    "__libc_start_main",
    "__libc_start_main_impl",
    "_start",
    "start_thread",
    "__clone",
    "__clone3",
    "clone3",
    "libc_start_main_stage2",
    "_start_c",
];

/// How user stacks were unwound, for the warnings at the end.
#[derive(Debug, Default)]
pub(super) struct UnwindStats {
    /// Samples with a copied user stack.
    pub(super) unwound: u64,
    /// Of them, ending `[truncated]`.
    pub(super) truncated: u64,
    /// Frame-pointer call chains cut at an address outside every mapping.
    pub(super) fp_cut: u64,
    /// Frame-pointer call chains whose user part is the sampled function alone, not a
    /// thread's entry code: the kernel found no frame to follow.
    pub(super) fp_alone: u64,
    /// Images without CFI where unwinds stopped, with the count.
    pub(super) no_cfi: Vec<(String, u64)>,
    /// Stacks that ended at code its image's CFI does not cover, per image.
    pub(super) uncovered: Vec<(String, u64)>,
}

/// The architecture named by HEADER_ARCH or the manifest's `uname -m`.
fn arch_named(machine: &str) -> Option<Arch> {
    match machine {
        "x86_64" | "amd64" => Some(Arch::X86_64),
        "aarch64" | "arm64" | "aarch64_be" => Some(Arch::Aarch64),
        // 32-bit Arm: armv7l, armv6l, armv5tel, armv8l (AArch32 on a 64-bit kernel), armeb.
        m if m.starts_with("arm") => Some(Arch::Arm),
        _ => None,
    }
}

/// The registers of a sample, as perf numbers them for the sampled architecture.
fn regs_of(arch: Arch, regs: &Regs<'_>) -> Option<UnwindRegs> {
    UnwindRegs::from_perf(arch, |r| regs.get(r))
}

/// The address to look up for the call a return address `ret` returns from: one byte back,
/// inside the call. On 32-bit Arm a return into Thumb code has bit 0 set (it is LR): cleared
/// first, or one back would be the instruction after the call.
fn call_site(arch: Option<Arch>, ret: u64) -> u64 {
    let ret = if arch == Some(Arch::Arm) {
        ret & !1
    } else {
        ret
    };
    ret.saturating_sub(1)
}

/// The callchain of a sample as `(kernel, address to look up)`, innermost first, without
/// its user part when the user stack is `unwound`; without a callchain, the sampled IP.
fn chain_entries(s: &SampleRecord<'_>, arch: Option<Arch>, unwound: bool) -> Vec<(bool, u64)> {
    let mut kernel = matches!(s.cpu_mode, CpuMode::Kernel);
    let mut entries = Vec::new();
    match &s.callchain {
        Some(cc) if !cc.is_empty() => {
            let mut first = true;
            for i in 0..cc.len() {
                let Some(v) = cc.get(i) else { break };
                if v >= PERF_CONTEXT_MAX {
                    // The unwound user frames replace the callchain's user part.
                    if v == PERF_CONTEXT_USER && unwound {
                        break;
                    }
                    kernel = v == PERF_CONTEXT_KERNEL;
                    continue;
                }
                // Return addresses point after the call: look up the call itself.
                let a = if first { v } else { call_site(arch, v) };
                first = false;
                entries.push((kernel, a));
            }
        }
        _ => {
            if let Some(ip) = s.ip {
                if kernel || !unwound {
                    entries.push((kernel, ip));
                }
            }
        }
    }
    entries
}

impl State<'_> {
    /// The architecture of the capture: from its header, else from the sampled registers
    /// (only aarch64's register set has a register 32, its PC).
    fn sample_arch(&self, s: &SampleRecord<'_>) -> Option<Arch> {
        if let Some(a) = self.profile.meta.arch.as_deref().and_then(arch_named) {
            return Some(a);
        }
        let regs = s.user_regs.as_ref().or(s.intr_regs.as_ref())?;
        Some(if regs.get(perf_regs::ARM64_PC).is_some() {
            Arch::Aarch64
        } else {
            Arch::X86_64
        })
    }

    /// The frames of a sample, innermost first, into `stack_buf`.
    pub(super) fn sample_frames(
        &mut self,
        s: &SampleRecord<'_>,
        pid: i32,
        stack_buf: &mut Vec<usize>,
    ) {
        let arch = self.sample_arch(s);
        let unwind = match (&s.user_regs, &s.user_stack, arch) {
            (Some(regs), Some((stack, dyn_size)), Some(arch)) => {
                regs_of(arch, regs).map(|r| (arch, r, stack, *dyn_size))
            }
            _ => None,
        };
        // (kernel, address to look up), innermost first.
        let mut entries = chain_entries(s, arch, unwind.is_some());
        if arch == Some(Arch::Aarch64) {
            self.insert_lr_callers(s, pid, &mut entries, unwind.is_some());
        }
        if arch == Some(Arch::Arm) {
            // The entries after the first are return addresses (call sites).
            for e in entries.iter_mut().skip(1).filter(|e| e.0) {
                e.1 = self.kernel_return_lookup(e.1);
            }
        }
        // A return address of a frame-pointer chain outside every mapping of a process whose
        // mappings are known is no code: the chain followed something that was no frame
        // pointer (code built without them). It ends there, marked, instead of going on with
        // invented callers.
        let maps_known = self.user.maps_known(pid);
        let mut user_frames = 0;
        let mut cut = false;
        let mut rooted = false;
        for (kernel, a) in entries {
            if !kernel {
                if user_frames > 0 && maps_known && self.mapping_at(pid, a).is_none() {
                    cut = true;
                    break;
                }
                user_frames += 1;
            }
            let run = if kernel {
                self.resolve_kernel(a)
            } else {
                self.resolve_user(pid, a)
            };
            stack_buf.extend(run.start..run.end);
            if !kernel && run.end > run.start && self.is_stack_root(run.end - 1) {
                rooted = true;
                break;
            }
        }
        // A recorded chain whose user part is the sampled function alone has unknown
        // callers (the kernel's walk found no frame pointer: code built without them, or
        // Thumb-2 code, whose r7 frames the arm kernel does not follow), unless that
        // function is a thread's entry code.
        let alone = !cut
            && !rooted
            && unwind.is_none()
            && user_frames == 1
            && s.callchain.as_ref().is_some_and(|c| !c.is_empty());
        if cut || alone {
            if cut {
                self.user.stats.fp_cut += 1;
            } else {
                self.user.stats.fp_alone += 1;
            }
            let run = self.marker(TRUNCATED.to_string());
            stack_buf.extend(run.start..run.end);
        }
        if let Some((arch, regs, stack, dyn_size)) = unwind {
            let bytes = stack.as_slice();
            let used = usize::try_from(dyn_size)
                .unwrap_or(usize::MAX)
                .min(bytes.len());
            self.push_unwound(pid, arch, &regs, &bytes[..used], stack_buf);
        }
    }

    /// 32-bit Arm kernel: the call site `site` of a return address, or the return address
    /// itself when it is the start of a function and the byte before it is in no function
    /// symbol (a label at most).
    /// The entry code sets lr with `badr lr, ret_fast_syscall` and jumps to the system call,
    /// so that return address was never after a call: its call site would name whatever
    /// marker symbol precedes (`__entry_text_start`) instead of `ret_fast_syscall`.
    fn kernel_return_lookup(&mut self, site: u64) -> u64 {
        let ra = site.saturating_add(1);
        let (img, look, _) = self.kernel_lookup(ra);
        let Some(f) = self.images.file(img) else {
            return site;
        };
        let starts = f.symbol_at(look).is_some_and(|(_, start, _)| start == look);
        let after_function = look.checked_sub(1).is_some_and(|b| f.in_function(b));
        if starts && !after_function {
            ra
        } else {
            site
        }
    }

    /// Whether frame `f` is in a function that starts a thread's stack ([`STACK_ROOTS`]).
    fn is_stack_root(&self, f: usize) -> bool {
        let p = &self.profile;
        p.frames
            .get(f)
            .and_then(|fr| p.functions.get(fr.function))
            .and_then(|func| func.name.as_deref())
            .is_some_and(|name| STACK_ROOTS.contains(&name))
    }

    /// Unwinds a user stack and appends its frames, and the marked frame where it stops.
    fn push_unwound(
        &mut self,
        pid: i32,
        arch: Arch,
        regs: &UnwindRegs,
        stack: &[u8],
        stack_buf: &mut Vec<usize>,
    ) {
        let Some(mut unwinder) = self.user.take_unwinder(pid, arch) else {
            return;
        };
        let out = unwinder.unwind(regs, stack, &mut |a| self.unwind_place(pid, arch, a));
        self.user.put_unwinder(pid, unwinder);
        self.user.stats.unwound += 1;
        for (i, a) in out.frames.iter().enumerate() {
            let look = if i == 0 {
                *a
            } else {
                call_site(Some(arch), *a)
            };
            let run = self.resolve_user(pid, look);
            stack_buf.extend(run.start..run.end);
        }
        let marker = match out.end {
            End::Root => return,
            End::Truncated => {
                self.user.stats.truncated += 1;
                TRUNCATED.to_string()
            }
            End::NoUnwindInfo(image) => {
                count_image(&mut self.user.stats.no_cfi, &image);
                format!("[no unwind info: {image}]")
            }
            End::Uncovered(image) => {
                count_image(&mut self.user.stats.uncovered, &image);
                format!("[no unwind info: {image}]")
            }
            End::CantUnwind(image) => {
                if stack_buf.last().is_some_and(|f| self.is_stack_root(*f)) {
                    return;
                }
                // The linker's EXIDX_CANTUNWIND for code without an entry of its own: not a
                // root, a path whose callers are unknown.
                count_image(&mut self.user.stats.uncovered, &image);
                format!("[no unwind info: {image}]")
            }
        };
        let run = self.marker(marker);
        stack_buf.extend(run.start..run.end);
    }

    /// Where `avma` of process `pid` is, for the unwinder of `arch`: CFI of another
    /// architecture (an arm32 library of a compat process) counts as none.
    fn unwind_place(&mut self, pid: i32, arch: Arch, avma: u64) -> Place {
        let Some((img, start, end, pgoff)) = self.mapping_at(pid, avma) else {
            return Place::Unmapped;
        };
        let name = self.profile.images[img].name.clone();
        let Some(cfi) = self.image_cfi(img).filter(|c| c.arch() == arch) else {
            return Place::NoCfi(name);
        };
        match cfi.offset_to_address(pgoff) {
            Some(svma) => Place::Cfi {
                name,
                avma: start..end,
                base_avma: start.wrapping_sub(svma),
                cfi,
            },
            None => Place::NoCfi(name),
        }
    }

    /// aarch64 leaf callers from LR: after the kernel leaf (REGS_INTR) and after the user
    /// leaf of a frame-pointer chain (REGS_USER), LR's function is inserted when the CFI at
    /// the leaf's PC says the return address is still in LR and the chain does not already
    /// have that function next. Without CFI nothing is inserted.
    fn insert_lr_callers(
        &mut self,
        s: &SampleRecord<'_>,
        pid: i32,
        entries: &mut Vec<(bool, u64)>,
        user_unwound: bool,
    ) {
        let lr_of = |r: Option<&Regs<'_>>| {
            let r = r?;
            r.get(perf_regs::ARM64_PC)?;
            r.get(perf_regs::ARM64_LR).filter(|lr| *lr != 0)
        };
        if let (Some(lr), Some((true, leaf))) = (lr_of(s.intr_regs.as_ref()), entries.first()) {
            let leaf = *leaf;
            if matches!(s.cpu_mode, CpuMode::Kernel) && self.kernel_ra_in_lr(leaf) == Some(true) {
                self.insert_after(0, (true, lr.saturating_sub(1)), pid, entries);
            }
        }
        if user_unwound {
            return;
        }
        let Some(lr) = lr_of(s.user_regs.as_ref()) else {
            return;
        };
        let Some(j) = entries.iter().position(|(k, _)| !k) else {
            return;
        };
        if self.user_ra_in_lr(pid, entries[j].1) == Some(true) {
            self.insert_after(j, (false, lr.saturating_sub(1)), pid, entries);
        }
    }

    /// Inserts `caller` after `entries[at]` unless the next entry is in the same function.
    fn insert_after(
        &mut self,
        at: usize,
        caller: (bool, u64),
        pid: i32,
        entries: &mut Vec<(bool, u64)>,
    ) {
        let caller_fn = self.outer_function(caller, pid);
        let same = entries
            .get(at + 1)
            .is_some_and(|next| self.outer_function(*next, pid) == caller_fn);
        // The leaf itself as its own caller is recursion the LR cannot prove.
        let leaf_fn = self.outer_function(entries[at], pid);
        if !same && caller_fn != leaf_fn {
            entries.insert(at + 1, caller);
        }
    }

    /// The (outermost, not inlined) function an entry resolves to.
    fn outer_function(&mut self, (kernel, a): (bool, u64), pid: i32) -> usize {
        let run = if kernel {
            self.resolve_kernel(a)
        } else {
            self.resolve_user(pid, a)
        };
        self.profile.frames[run.end - 1].function
    }

    /// Whether the CFI of the kernel code at run-time address `addr` keeps the return
    /// address in LR there.
    fn kernel_ra_in_lr(&mut self, addr: u64) -> Option<bool> {
        let (image, lookup, _) = self.kernel_lookup(addr);
        let cfi = self.images.file(image)?.cfi()?;
        cfi.return_address_in_lr(lookup)
    }

    /// The same for user code of process `pid`.
    fn user_ra_in_lr(&mut self, pid: i32, addr: u64) -> Option<bool> {
        let (img, start, _, pgoff) = self.mapping_at(pid, addr)?;
        let cfi = self.image_cfi(img)?;
        let svma = cfi.offset_to_address((addr - start).wrapping_add(pgoff))?;
        cfi.return_address_in_lr(svma)
    }

    /// The warnings about unwinding, at the end.
    pub(super) fn unwind_warnings(&mut self) {
        let st = std::mem::take(&mut self.user.stats);
        if st.truncated > 0 {
            self.profile.warnings.push(format!(
                "{} of {} user stacks end in {TRUNCATED}: the copied stack (--call-graph dwarf,SIZE) ended before the root, or held no return address",
                st.truncated, st.unwound
            ));
        }
        if st.fp_cut > 0 {
            self.profile.warnings.push(format!(
                "{} frame-pointer call chains end in {TRUNCATED} at a return address outside every mapping: the code was built without frame pointers; record with --call-graph dwarf",
                st.fp_cut
            ));
        }
        if st.fp_alone > 0 {
            self.profile.warnings.push(format!(
                "{} frame-pointer call chains end in {TRUNCATED} after the sampled user function: the kernel found no frame pointer to follow (code built without frame pointers, or Thumb-2 code, whose frames the arm kernel cannot walk); record with --call-graph dwarf",
                st.fp_alone
            ));
        }
        let kinds = [
            (st.no_cfi, "user stacks end in [no unwind info: IMAGE] at images without .eh_frame or .debug_frame (keep .eh_frame when stripping, or add a file with its build-id to the symbol paths); stacks per image"),
            (st.uncovered, "user stacks end in [no unwind info: IMAGE] at code their unwind tables do not cover (hand-written assembly, or code built with -fno-asynchronous-unwind-tables); stacks per image"),
        ];
        for (counts, kind) in kinds {
            self.profile
                .image_warnings
                .extend(counts.into_iter().map(|(image, n)| ImageWarning {
                    kind: kind.to_owned(),
                    image,
                    count: Some(n),
                }));
        }
    }
}

/// One more stack for `image` in a per-image count.
fn count_image(counts: &mut Vec<(String, u64)>, image: &str) {
    match counts.iter_mut().find(|(n, _)| n == image) {
        Some((_, c)) => *c += 1,
        None => counts.push((image.to_owned(), 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A return address is looked up one byte back; on 32-bit Arm a Thumb one (bit 0 set)
    /// lands inside the call too, not on the instruction after it.
    #[test]
    fn call_site_arm32_thumb_return_inside_call() {
        // A 4-byte Thumb `bl` at 0x1000 returns to 0x1004, LR = 0x1005.
        assert_eq!(call_site(Some(Arch::Arm), 0x1005) & !1, 0x1002);
        // A 2-byte Thumb `blx r3` at 0x1000: LR = 0x1003.
        assert_eq!(call_site(Some(Arch::Arm), 0x1003) & !1, 0x1000);
        // An A32 `bl` at 0x1000: LR = 0x1004.
        assert_eq!(call_site(Some(Arch::Arm), 0x1004) & !1, 0x1002);
        assert_eq!(call_site(Some(Arch::X86_64), 0x1005), 0x1004);
        assert_eq!(call_site(None, 0), 0);
    }

    /// The capture's `uname -m` and HEADER_ARCH names map to the instruction set.
    #[test]
    fn arch_named_arm32_names() {
        for m in ["armv7l", "armv6l", "armv5tel", "armv8l", "armeb"] {
            assert_eq!(arch_named(m), Some(Arch::Arm), "{m}");
        }
        assert_eq!(arch_named("arm64"), Some(Arch::Aarch64));
        assert_eq!(arch_named("aarch64"), Some(Arch::Aarch64));
        assert_eq!(arch_named("riscv64"), None);
    }
}

//! The perf_event_open(2) ABI: the attribute struct, the syscall, its ioctls and the mmap'd
//! control page. Written out by hand (rather than bindgen'd) because the same bytes go into
//! perf.data, whose readers (perf 6.1) only accept attributes up to `PERF_ATTR_SIZE_VER7`.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `sizeof(struct perf_event_attr)` as written to the kernel and to perf.data (VER7).
pub const ATTR_SIZE: u32 = 128;

/// `PERF_TYPE_HARDWARE`, a `perf_event_attr.type`.
pub const PERF_TYPE_HARDWARE: u32 = 0;
/// `PERF_TYPE_SOFTWARE`, a `perf_event_attr.type`.
pub const PERF_TYPE_SOFTWARE: u32 = 1;
/// `PERF_TYPE_TRACEPOINT`, a `perf_event_attr.type` (config: the tracefs event id).
pub const PERF_TYPE_TRACEPOINT: u32 = 2;
/// `PERF_TYPE_HW_CACHE`, a `perf_event_attr.type`.
pub const PERF_TYPE_HW_CACHE: u32 = 3;
/// `PERF_TYPE_RAW`, a `perf_event_attr.type`.
pub const PERF_TYPE_RAW: u32 = 4;

/// `PERF_SAMPLE_IP`, a `sample_type` bit.
pub const SAMPLE_IP: u64 = 1 << 0;
/// `PERF_SAMPLE_TID`, a `sample_type` bit.
pub const SAMPLE_TID: u64 = 1 << 1;
/// `PERF_SAMPLE_TIME`, a `sample_type` bit.
pub const SAMPLE_TIME: u64 = 1 << 2;
/// `PERF_SAMPLE_CALLCHAIN`, a `sample_type` bit.
pub const SAMPLE_CALLCHAIN: u64 = 1 << 5;
/// `PERF_SAMPLE_CPU`, a `sample_type` bit.
pub const SAMPLE_CPU: u64 = 1 << 7;
/// `PERF_SAMPLE_PERIOD`, a `sample_type` bit.
pub const SAMPLE_PERIOD: u64 = 1 << 8;
/// `PERF_SAMPLE_RAW`, a `sample_type` bit: a tracepoint's record.
pub const SAMPLE_RAW: u64 = 1 << 10;
/// `PERF_SAMPLE_REGS_USER`, a `sample_type` bit.
pub const SAMPLE_REGS_USER: u64 = 1 << 12;
/// `PERF_SAMPLE_STACK_USER`, a `sample_type` bit.
pub const SAMPLE_STACK_USER: u64 = 1 << 13;
/// `PERF_SAMPLE_IDENTIFIER`, a `sample_type` bit.
pub const SAMPLE_IDENTIFIER: u64 = 1 << 16;
/// `PERF_SAMPLE_REGS_INTR`, a `sample_type` bit.
pub const SAMPLE_REGS_INTR: u64 = 1 << 18;

/// The user registers perf samples for DWARF unwinding (`PERF_REGS_MASK` in
/// tools/perf/arch/x86/include/perf_regs.h): AX..R15 except DS, ES, FS, GS, which the kernel
/// refuses on x86_64.
#[cfg(target_arch = "x86_64")]
pub const DWARF_REGS_USER: u64 = ((1 << 24) - 1) & !(0xf << 12);
/// arm64's `PERF_REGS_MASK`: x0..x30, sp, pc (`PERF_REG_ARM64_MAX` = 33).
#[cfg(target_arch = "aarch64")]
pub const DWARF_REGS_USER: u64 = (1 << 33) - 1;
/// 32-bit Arm's `PERF_REGS_MASK`: r0..r15 (`PERF_REG_ARM_MAX` = 16; fp = r11, ip = r12,
/// sp = r13, lr = r14, pc = r15), what an EHABI or CFI unwinder starts from.
#[cfg(target_arch = "arm")]
pub const DWARF_REGS_USER: u64 = (1 << 16) - 1;
/// No register model for other architectures: `--call-graph dwarf` is refused there.
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64", target_arch = "arm")))]
pub const DWARF_REGS_USER: u64 = 0;

/// arm64 interrupted-context registers for the kernel leaf's caller: lr (x30), sp, pc in perf's
/// arm64 numbering. The host reads the sampled PC's CFI to tell whether the return address
/// still sits in LR (a leaf that has not saved it yet), which the kernel's frame-pointer chain
/// cannot show.
pub const ARM64_REGS_INTR_LR_SP_PC: u64 = (1 << 30) | (1 << 31) | (1 << 32);

/// `PERF_FORMAT_ID`, a `read_format` bit: read(2) returns the event id too.
pub const FORMAT_ID: u64 = 1 << 2;

/// Bit positions in the flags word of `perf_event_attr`.
pub mod flag {
    /// The `disabled` bit of `perf_event_attr`.
    pub const DISABLED: u64 = 1 << 0;
    /// The `inherit` bit of `perf_event_attr`.
    pub const INHERIT: u64 = 1 << 1;
    /// The `exclude_user` bit of `perf_event_attr`.
    pub const EXCLUDE_USER: u64 = 1 << 4;
    /// The `exclude_kernel` bit of `perf_event_attr`.
    pub const EXCLUDE_KERNEL: u64 = 1 << 5;
    /// The `exclude_hv` bit of `perf_event_attr`.
    pub const EXCLUDE_HV: u64 = 1 << 6;
    /// The `mmap` bit of `perf_event_attr`.
    pub const MMAP: u64 = 1 << 8;
    /// The `comm` bit of `perf_event_attr`.
    pub const COMM: u64 = 1 << 9;
    /// The `freq` bit of `perf_event_attr`.
    pub const FREQ: u64 = 1 << 10;
    /// The `task` bit of `perf_event_attr`.
    pub const TASK: u64 = 1 << 13;
    /// The `watermark` bit of `perf_event_attr`.
    pub const WATERMARK: u64 = 1 << 14;
    /// The `mmap_data` bit of `perf_event_attr`.
    pub const MMAP_DATA: u64 = 1 << 17;
    /// The `sample_id_all` bit of `perf_event_attr`.
    pub const SAMPLE_ID_ALL: u64 = 1 << 18;
    /// The `exclude_callchain_user` bit of `perf_event_attr`.
    pub const EXCLUDE_CALLCHAIN_USER: u64 = 1 << 22;
    /// The `mmap2` bit of `perf_event_attr`.
    pub const MMAP2: u64 = 1 << 23;
    /// The `comm_exec` bit of `perf_event_attr`.
    pub const COMM_EXEC: u64 = 1 << 24;
}

const IOC_ENABLE: libc::c_ulong = 0x2400;
const IOC_DISABLE: libc::c_ulong = 0x2401;
const IOC_SET_OUTPUT: libc::c_ulong = 0x2405;
/// `PERF_EVENT_IOC_ID` is `_IOR('$', 7, __u64 *)`: the size field is a pointer's, so the
/// request differs between 64-bit (0x80082407) and 32-bit (0x80042407) kernels.
const IOC_ID: libc::c_ulong = ioc_read(b'$', 7, size_of::<*mut u64>());
const FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// The kernel's generic `_IOR(ty, nr, size)` (asm-generic/ioctl.h, used by x86 and Arm).
const fn ioc_read(ty: u8, nr: u8, size: usize) -> libc::c_ulong {
    (2 << 30) | ((size as libc::c_ulong) << 16) | ((ty as libc::c_ulong) << 8) | nr as libc::c_ulong
}

/// `struct perf_event_attr` up to and including `sig_data` (ABI VER7, 128 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerfEventAttr {
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `perf_event_attr.size`.
    pub size: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// `sample_period`, or `sample_freq` when [`flag::FREQ`] is set.
    pub sample_period_or_freq: u64,
    /// `perf_event_attr.sample_type`.
    pub sample_type: u64,
    /// `perf_event_attr.read_format`.
    pub read_format: u64,
    /// The bitfield word of `perf_event_attr` (`disabled` ... ): [`flag`] bits.
    pub flags: u64,
    /// `wakeup_events`, or `wakeup_watermark` (bytes) when [`flag::WATERMARK`] is set.
    pub wakeup: u32,
    /// `perf_event_attr.bp_type`.
    pub bp_type: u32,
    /// `perf_event_attr.config1`.
    pub config1: u64,
    /// `perf_event_attr.config2`.
    pub config2: u64,
    /// `perf_event_attr.branch_sample_type`.
    pub branch_sample_type: u64,
    /// `perf_event_attr.sample_regs_user`.
    pub sample_regs_user: u64,
    /// `perf_event_attr.sample_stack_user`.
    pub sample_stack_user: u32,
    /// `perf_event_attr.clockid`.
    pub clockid: i32,
    /// `perf_event_attr.sample_regs_intr`.
    pub sample_regs_intr: u64,
    /// `perf_event_attr.aux_watermark`.
    pub aux_watermark: u32,
    /// `perf_event_attr.sample_max_stack`.
    pub sample_max_stack: u16,
    /// `perf_event_attr.reserved_2`.
    pub reserved_2: u16,
    /// `perf_event_attr.aux_sample_size`.
    pub aux_sample_size: u32,
    /// `perf_event_attr.reserved_3`.
    pub reserved_3: u32,
    /// `perf_event_attr.sig_data`.
    pub sig_data: u64,
}

const _: () = assert!(size_of::<PerfEventAttr>() == ATTR_SIZE as usize);

impl PerfEventAttr {
    /// The attribute as the native-endian bytes perf.data stores.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(ATTR_SIZE as usize);
        b.extend_from_slice(&self.type_.to_ne_bytes());
        b.extend_from_slice(&self.size.to_ne_bytes());
        for v in [
            self.config,
            self.sample_period_or_freq,
            self.sample_type,
            self.read_format,
            self.flags,
        ] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&self.wakeup.to_ne_bytes());
        b.extend_from_slice(&self.bp_type.to_ne_bytes());
        for v in [
            self.config1,
            self.config2,
            self.branch_sample_type,
            self.sample_regs_user,
        ] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b.extend_from_slice(&self.sample_stack_user.to_ne_bytes());
        b.extend_from_slice(&self.clockid.to_ne_bytes());
        b.extend_from_slice(&self.sample_regs_intr.to_ne_bytes());
        b.extend_from_slice(&self.aux_watermark.to_ne_bytes());
        b.extend_from_slice(&self.sample_max_stack.to_ne_bytes());
        b.extend_from_slice(&self.reserved_2.to_ne_bytes());
        b.extend_from_slice(&self.aux_sample_size.to_ne_bytes());
        b.extend_from_slice(&self.reserved_3.to_ne_bytes());
        b.extend_from_slice(&self.sig_data.to_ne_bytes());
        debug_assert_eq!(b.len(), ATTR_SIZE as usize);
        b
    }
}

/// perf_event_open(2) with `PERF_FLAG_FD_CLOEXEC`.
pub fn perf_event_open(attr: &PerfEventAttr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    // SAFETY: `attr` is a valid, fully initialised perf_event_attr of `attr.size` bytes that
    // outlives the call; the other arguments are plain integers.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr as *const PerfEventAttr,
            pid as libc::pid_t,
            cpu as libc::c_int,
            -1 as libc::c_int,
            FLAG_FD_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the kernel just returned this descriptor to us and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as libc::c_int) })
}

fn ioctl(fd: libc::c_int, req: libc::c_ulong, arg: libc::c_ulong) -> io::Result<()> {
    // SAFETY: the perf ioctls used here take an integer or a pointer to a u64 owned by the caller.
    let r = unsafe { libc::ioctl(fd, req as _, arg) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `PERF_EVENT_IOC_ENABLE`: starts counting.
pub fn enable(fd: libc::c_int) -> io::Result<()> {
    ioctl(fd, IOC_ENABLE, 0)
}

/// `PERF_EVENT_IOC_DISABLE`: stops counting.
pub fn disable(fd: libc::c_int) -> io::Result<()> {
    ioctl(fd, IOC_DISABLE, 0)
}

/// Redirects `fd`'s records into the ring buffer of `target` (same CPU).
pub fn set_output(fd: libc::c_int, target: libc::c_int) -> io::Result<()> {
    ioctl(fd, IOC_SET_OUTPUT, target as libc::c_ulong)
}

/// The id the kernel puts in `PERF_SAMPLE_IDENTIFIER` for this event.
pub fn event_id(fd: libc::c_int) -> io::Result<u64> {
    let mut id: u64 = 0;
    ioctl(fd, IOC_ID, &mut id as *mut u64 as libc::c_ulong)?;
    Ok(id)
}

/// The counter value and id of an event opened with `read_format` [`FORMAT_ID`] only:
/// read(2) then returns `{ u64 value; u64 id; }`.
pub fn read_count(fd: libc::c_int) -> io::Result<(u64, u64)> {
    let mut buf = [0u64; 2];
    // SAFETY: reading at most 16 bytes into a live 16-byte buffer.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), size_of_val(&buf)) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n as usize != size_of_val(&buf) {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read {n} bytes of a perf counter, expected 16"),
        ));
    }
    Ok((buf[0], buf[1]))
}

/// Reads a sysctl under /proc/sys/kernel as an integer.
pub fn kernel_sysctl(name: &str) -> Option<i64> {
    std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The system page size, the unit of ring-buffer sizes.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `PERF_EVENT_IOC_ID` is the value the target's kernel headers give: its size field is a
    /// pointer's, 8 bytes on 64-bit and 4 on 32-bit Arm (a 64-bit value there is ENOTTY).
    #[test]
    fn ioctl_request_event_id_pointer_sized() {
        #[cfg(target_pointer_width = "64")]
        assert_eq!(IOC_ID, 0x8008_2407);
        #[cfg(target_pointer_width = "32")]
        assert_eq!(IOC_ID, 0x8004_2407);
    }

    /// The attribute's bytes are the kernel's VER7 layout on every target: 128 bytes, the u64
    /// fields at their 64-bit-aligned offsets also where u64 alignment is 4 (i386) or 8 (Arm).
    #[test]
    fn to_bytes_attr_layout_same_on_32bit() {
        let a = PerfEventAttr {
            type_: 1,
            size: ATTR_SIZE,
            config: 0x1122,
            sample_regs_user: DWARF_REGS_USER,
            sample_stack_user: 8192,
            clockid: -7,
            sig_data: 0xdead_beef,
            ..Default::default()
        };
        let b = a.to_bytes();
        let at = |o: usize, n: usize| b[o..o + n].to_vec();
        assert_eq!(b.len(), 128);
        assert_eq!(std::mem::offset_of!(PerfEventAttr, config), 8);
        assert_eq!(at(8, 8), 0x1122u64.to_ne_bytes());
        assert_eq!(std::mem::offset_of!(PerfEventAttr, sample_regs_user), 80);
        assert_eq!(at(80, 8), DWARF_REGS_USER.to_ne_bytes());
        assert_eq!(std::mem::offset_of!(PerfEventAttr, sample_stack_user), 88);
        assert_eq!(at(88, 4), 8192u32.to_ne_bytes());
        assert_eq!(at(92, 4), (-7i32).to_ne_bytes());
        assert_eq!(std::mem::offset_of!(PerfEventAttr, sig_data), 120);
        assert_eq!(at(120, 8), 0xdead_beefu64.to_ne_bytes());
    }
}

//! `record --contention`: the waits of threads for locks. Kernel lock waits are the
//! `lock:contention_begin`/`contention_end` tracepoints (Linux 5.19 and later: every mutex,
//! rwsem, spinlock and rwlock wait that took the slow path, with the lock's address and
//! type); user-space lock waits are futex waits, `syscalls:sys_enter_futex`/`sys_exit_futex`
//! (kernels with `CONFIG_FTRACE_SYSCALLS`). The begin and enter events carry call chains, so
//! the host names where each thread waited. What the board's kernel lacks is skipped with one
//! line saying so; lacking both is an error.

use kprof_capture::manifest::Contention;

use super::tracefs::{Tracefs, Tracepoint};
use crate::sys::{self, PerfEventAttr};
use crate::Error;

/// What a pair of tracepoints records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waits {
    KernelLocks,
    Futex,
}

/// The tracepoint pairs: (system, begin, end, what, what the kernel needs for them). The
/// `_time32` pair is 32-bit kernels' `futex` syscall (240), which glibc still uses for waits
/// without a timeout there; `sys_enter_futex` is `futex_time64` on them. 64-bit kernels have
/// no `_time32` pair, so its absence is not said.
const PAIRS: [(&str, &str, &str, Waits, &str); 3] = [
    (
        "lock",
        "contention_begin",
        "contention_end",
        Waits::KernelLocks,
        "Linux 5.19 or later",
    ),
    (
        "syscalls",
        "sys_enter_futex",
        "sys_exit_futex",
        Waits::Futex,
        "CONFIG_FTRACE_SYSCALLS=y",
    ),
    (
        "syscalls",
        "sys_enter_futex_time32",
        "sys_exit_futex_time32",
        Waits::Futex,
        "",
    ),
];

/// The tracepoints found, the waits' starts first of each pair, and the manifest's entry.
pub(super) fn find(tracefs: &Tracefs) -> Result<(Vec<Tracepoint>, Contention), Error> {
    let mut found = Vec::new();
    let mut c = Contention::default();
    for (system, begin, end, waits, needs) in PAIRS {
        let pair = tracefs
            .tracepoint(system, begin)
            .and_then(|b| Ok((b, tracefs.tracepoint(system, end)?)));
        match pair {
            Ok((b, e)) => {
                found.push(b);
                found.push(e);
                match waits {
                    Waits::KernelLocks => c.kernel_locks = true,
                    Waits::Futex => c.futex = true,
                }
            }
            Err(_) if needs.is_empty() => {}
            Err(e) => c.missing.push(format!(
                "--contention: no {system}:{begin}/{end} ({e}; needs {needs}): {} not recorded",
                match waits {
                    Waits::KernelLocks => "kernel lock waits",
                    Waits::Futex => "futex waits",
                }
            )),
        }
    }
    if found.is_empty() {
        return Err(Error::Other(format!(
            "--contention: the board's kernel has no tracepoint for lock waits: {}",
            c.missing.join("; ")
        )));
    }
    Ok((found, c))
}

/// Whether `t` starts a wait (its samples carry the call chain).
pub(super) fn is_begin(t: &Tracepoint) -> bool {
    PAIRS
        .iter()
        .any(|(s, b, _, _, _)| t.name() == format!("{s}:{b}"))
}

/// A wait's start with its call chain even without `-g`; its end with its fields only.
pub(super) fn adjust(a: &mut PerfEventAttr, begin: bool) {
    a.sample_type |= sys::SAMPLE_RAW;
    if begin {
        a.sample_type |= sys::SAMPLE_CALLCHAIN;
    } else {
        super::open_events::strip_call_chain(a);
    }
}

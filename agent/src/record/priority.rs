//! The agent's scheduling priority while it records.
//!
//! A board profiled at 100 % CPU is the common case, and an agent that shares the CPUs at the
//! load's priority may fall behind and lose samples when its rings fill. gatord raises its own
//! nice value to -19 for that reason and puts its children back to 0. The agent does so only
//! when asked (`--nice`): measured, a -19 agent slowed the profiled load by a further 8-14 %
//! with small rings and lost no fewer samples than at nice 0 (docs/performance.md, "Saturated
//! board"). It raises its priority after forking the workload, so the command profiled keeps
//! the priority it would have had without the agent.

use std::io;

/// Sets the calling process's nice value to `nice` (one thread: on Linux the process's only
/// thread). Returns the value it had, or a notice to print when the kernel refused (no
/// CAP_SYS_NICE, or RLIMIT_NICE below it).
pub(super) fn raise(nice: i32) -> Result<i32, String> {
    let before = current();
    if nice >= before {
        // Lowering the agent's priority below its caller's is never asked for.
        return Ok(before);
    }
    // SAFETY: setpriority on the calling process, with no pointers involved.
    let r = unsafe { libc::setpriority(libc::PRIO_PROCESS, 0, nice) };
    if r != 0 {
        let e = io::Error::last_os_error();
        return Err(format!(
            "cannot raise the agent's priority to nice {nice} ({e}): it runs at nice {before}, \
             and on a fully loaded board it may fall behind and lose samples"
        ));
    }
    Ok(before)
}

/// The calling process's nice value.
fn current() -> i32 {
    // getpriority returns -1 both as a value and as an error: errno tells them apart.
    // SAFETY: errno is thread-local and this thread's.
    unsafe { *libc::__errno_location() = 0 };
    // SAFETY: getpriority on the calling process, with no pointers involved.
    let v = unsafe { libc::getpriority(libc::PRIO_PROCESS, 0) };
    // SAFETY: as above.
    if v == -1 && unsafe { *libc::__errno_location() } != 0 {
        return 0;
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Asking for a nice value at or above the current one changes nothing and succeeds.
    #[test]
    fn raise_priority_not_lower_than_before_unchanged() {
        let before = current();
        assert_eq!(raise(before), Ok(before));
        assert_eq!(raise(19), Ok(before));
        assert_eq!(current(), before);
    }
}

//! The function that waited for a lock: the first frame of a wait's stack outside the locking
//! code.

use kprof_symbols::profile::Profile;

/// Kernel functions of the locking code and of the way into it, skipped to find the waiting
/// function. `perf lock contention` does the same in `lock_contention_caller`
/// (tools/perf/builtin-lock.c): it skips the frames `is_lock_function` finds in the kernel's
/// `.sched.text` (mutex and rwsem slow paths, `schedule`) and `.spinlock.text` (spinlocks)
/// sections. kprof has the frames' names, not the sections, so it names what those sections
/// hold, and adds the futex syscall and the syscall entry a futex wait begins in. A trailing
/// `*` matches a prefix; other entries match the whole name.
pub(crate) const KERNEL_LOCKING: &[&str] = &[
    // The tracepoint itself: its sample's chain starts where the event was emitted.
    "trace_contention_*",
    "__traceiter_*",
    "perf_trace_*",
    "perf_tp_event*",
    "__mutex*",
    "mutex_*",
    "_raw_spin*",
    "_raw_read*",
    "_raw_write*",
    "do_raw_spin*",
    "__down*",
    "down",
    "down_*",
    "rwsem*",
    "__rwsem*",
    "percpu_down*",
    "__percpu_down*",
    "__percpu_rwsem*",
    "rt_mutex*",
    "__rt_mutex*",
    "rt_spin*",
    "rwbase_*",
    "queued_*",
    "native_queued*",
    "__pv_queued*",
    "osq_*",
    "schedule*",
    "__schedule*",
    "preempt_schedule*",
    "io_schedule*",
    "futex_*",
    "__futex*",
    "do_futex*",
    "__x64_sys_futex*",
    "__ia32_sys_futex*",
    "__arm64_sys_futex*",
    "sys_futex*",
    "__se_sys_futex*",
    "__do_sys_futex*",
    "do_syscall_*",
    "entry_SYSCALL*",
    "syscall_trace_enter*",
    "x64_sys_call",
    "el0_svc*",
    "do_el0_svc*",
    "invoke_syscall*",
    "el0t_*",
    "vector_swi",
    "ret_fast_syscall",
];

/// User functions of the C libraries' (glibc, musl) and Rust's locks around the futex call,
/// skipped the same way: a futex wait's stack starts in the `syscall`/`__syscall` wrapper or
/// the lock's slow path, and the waiting function is the one that took the lock.
pub(crate) const USER_LOCKING: &[&str] = &[
    "syscall",
    "__syscall*",
    "__lll_*",
    "__GI___lll_*",
    "lll_*",
    "__futex*",
    "futex_*",
    "pthread_mutex_lock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
    "__pthread_mutex_*",
    "___pthread_mutex_*",
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "pthread_cond_clockwait",
    "__pthread_cond_*",
    "___pthread_cond_*",
    "pthread_rwlock_*",
    "__pthread_rwlock_*",
    "___pthread_rwlock_*",
    "pthread_barrier_wait",
    "__pthread_barrier_wait*",
    "sem_wait",
    "sem_timedwait",
    "sem_clockwait",
    "__new_sem_wait*",
    "do_futex_wait*",
    "__timedwait*",
    "__wait",
    "__lock",
    "std::sys::*",
    "std::sync::*",
    "parking_lot::*",
    "parking_lot_core::*",
];

/// Whether `name` is matched by an entry of `list`.
pub(crate) fn listed(name: &str, list: &[&str]) -> bool {
    list.iter().any(|entry| match entry.strip_suffix('*') {
        Some(prefix) => name.starts_with(prefix),
        None => name == *entry,
    })
}

/// The waiting function of a wait that started on stack `stack`: the name of its first
/// frame, innermost first, that is named and not locking code (kernel frames checked against
/// [`KERNEL_LOCKING`], user frames against [`USER_LOCKING`]). When the chain ends before one
/// (user code without frame pointers ends in `[truncated]`), the outermost locking function
/// it has, which still tells a mutex from a barrier; `[unknown]` when no frame is named.
pub(crate) fn caller(p: &Profile, stack: u32) -> String {
    let mut outermost_locking = None;
    for &fr in super::frames_of(p, stack).iter() {
        let Some(function) = p.frames.get(fr).and_then(|f| p.functions.get(f.function)) else {
            continue;
        };
        // `[truncated]`, `[unknown]`: where the chain ended, not a function.
        let Some(name) = function.name.as_deref().filter(|n| !n.starts_with('[')) else {
            continue;
        };
        let kernel = p.images.get(function.image).is_some_and(|i| i.kernel);
        let list = if kernel { KERNEL_LOCKING } else { USER_LOCKING };
        if !listed(name, list) {
            return name.to_owned();
        }
        outermost_locking = Some(name);
    }
    outermost_locking.unwrap_or("[unknown]").to_owned()
}

//! A hand-built profile for the renderers' unit tests: a user program whose hot loop is
//! inlined, which writes to a character device whose driver module checksums the data.
//!
//! Event 0 `cpu-clock` has 100 samples: 60 in the inlined `hot_loop` (in `compute`), 10 in
//! `compute` itself, 25 in `mychardrv_checksum` under `write(2)`, 5 at an unnamed libc address.
//! Event 1 `page-faults` has 10.

use std::path::PathBuf;

use kprof_symbols::profile::{Event, Frame, Function, Image, Profile, Stack, SymbolSource, Thread};

pub const VMLINUX: usize = 0;
pub const MODULE: usize = 1;
pub const APP: usize = 2;
pub const LIBC: usize = 3;

/// Function indices, in table order.
pub const ENTRY: usize = 0;
pub const DO_SYSCALL: usize = 1;
pub const KSYS_WRITE: usize = 2;
pub const VFS_WRITE: usize = 3;
pub const DRV_WRITE: usize = 4;
pub const DRV_CHECKSUM: usize = 5;
pub const START: usize = 6;
pub const MAIN: usize = 7;
pub const COMPUTE: usize = 8;
pub const HOT_LOOP: usize = 9;
pub const LIBC_WRITE: usize = 10;
pub const LIBC_UNKNOWN: usize = 11;

// The profile model grows fields (capture metadata); their defaults suit every test.
#[allow(clippy::needless_update)]
pub fn profile() -> Profile {
    let mut frames = Vec::new();
    let mut frame = |function: usize, address: u64, src: Option<(&str, u32)>, inlined: bool| {
        frames.push(Frame {
            function,
            address,
            file: src.map(|(f, _)| f.into()),
            line: src.map(|(_, l)| l),
            inlined,
        });
        frames.len() - 1
    };
    let start = frame(START, 0x1010, None, false);
    let main_compute = frame(MAIN, 0x1120, Some(("/src/app/main.c", 42)), false);
    let main_write = frame(MAIN, 0x1140, Some(("/src/app/main.c", 45)), false);
    let main_libc = frame(MAIN, 0x1150, Some(("/src/app/main.c", 47)), false);
    let hot = frame(HOT_LOOP, 0x1230, Some(("/src/app/compute.h", 5)), true);
    let compute_hot = frame(COMPUTE, 0x1230, Some(("/src/app/compute.c", 12)), false);
    let compute_self = frame(COMPUTE, 0x1260, Some(("/src/app/compute.c", 15)), false);
    let libc_write = frame(LIBC_WRITE, 0x9010, None, false);
    let libc_unknown = frame(LIBC_UNKNOWN, 0x9510, None, false);
    let entry = frame(
        ENTRY,
        0xffff_ffff_8100_0040,
        Some(("arch/x86/entry/entry_64.S", 120)),
        false,
    );
    let do_syscall = frame(
        DO_SYSCALL,
        0xffff_ffff_8100_1040,
        Some(("arch/x86/entry/common.c", 80)),
        false,
    );
    let ksys = frame(
        KSYS_WRITE,
        0xffff_ffff_8120_0040,
        Some(("fs/read_write.c", 640)),
        false,
    );
    let vfs = frame(
        VFS_WRITE,
        0xffff_ffff_8120_1040,
        Some(("fs/read_write.c", 584)),
        false,
    );
    let drv_write = frame(DRV_WRITE, 0x140, None, false);
    let drv_sum = frame(DRV_CHECKSUM, 0x220, None, false);

    let stacks = vec![
        stack(vec![hot, compute_hot, main_compute, start], [60, 6]),
        stack(vec![compute_self, main_compute, start], [10, 1]),
        stack(
            vec![
                drv_sum, drv_write, vfs, ksys, do_syscall, entry, libc_write, main_write, start,
            ],
            [25, 3],
        ),
        stack(vec![libc_unknown, main_libc, start], [5, 0]),
    ];
    Profile {
        events: events(),
        images: images(),
        functions: functions(),
        frames,
        threads: vec![Thread {
            pid: 100,
            tid: 100,
            comm: "app".to_owned(),
        }],
        stacks,
        warnings: vec!["libc.so.6: no file with build-id 9 found; addresses shown raw".to_owned()],
        ..Profile::default()
    }
}

/// A stack of thread 0 with `counts` samples of each event: cpu-clock samples stand for 1 ms
/// each, page-faults for one fault.
fn stack(frames: Vec<usize>, counts: [u64; 2]) -> Stack {
    Stack {
        frames,
        thread: 0,
        counts: counts.to_vec(),
        periods: vec![counts[0] * 1_000_000, counts[1]],
    }
}
/// vmlinux (by build-id), the module (kallsyms), the program (by build-id), libc (missing).
fn images() -> Vec<Image> {
    let image = |name: &str, path: &str, kernel: bool, symbols: SymbolSource| Image {
        name: name.to_owned(),
        recorded_path: path.to_owned(),
        build_id: Some(format!("{:0>40}", name.len())),
        kernel,
        symbols,
    };
    vec![
        image(
            "vmlinux",
            "[kernel.kallsyms]",
            true,
            SymbolSource::BuildId {
                path: PathBuf::from("/build/linux/vmlinux"),
                origin: None,
            },
        ),
        image("mychardrv.ko", "[mychardrv]", true, SymbolSource::Kallsyms),
        image(
            "app",
            "/usr/bin/app",
            false,
            SymbolSource::BuildId {
                path: PathBuf::from("/build/app/app"),
                origin: None,
            },
        ),
        image(
            "libc.so.6",
            "/lib/libc.so.6",
            false,
            SymbolSource::Missing {
                why: "no file with build-id 9 found".to_owned(),
            },
        ),
    ]
}

/// The functions, in the order of the index constants.
fn functions() -> Vec<Function> {
    let function =
        |image: usize, name: Option<&str>, start: u64, file: Option<&str>, line| Function {
            image,
            name: name.map(str::to_owned),
            start,
            size: Some(0x40),
            file: file.map(str::to_owned),
            line,
        };
    vec![
        function(
            VMLINUX,
            Some("entry_SYSCALL_64"),
            0xffff_ffff_8100_0000,
            Some("arch/x86/entry/entry_64.S"),
            Some(87),
        ),
        function(
            VMLINUX,
            Some("do_syscall_64"),
            0xffff_ffff_8100_1000,
            Some("arch/x86/entry/common.c"),
            Some(73),
        ),
        function(
            VMLINUX,
            Some("ksys_write"),
            0xffff_ffff_8120_0000,
            Some("fs/read_write.c"),
            Some(630),
        ),
        function(
            VMLINUX,
            Some("vfs_write"),
            0xffff_ffff_8120_1000,
            Some("fs/read_write.c"),
            Some(564),
        ),
        function(MODULE, Some("mychardrv_write"), 0x100, None, None),
        function(MODULE, Some("mychardrv_checksum"), 0x200, None, None),
        function(APP, Some("_start"), 0x1000, None, None),
        function(APP, Some("main"), 0x1100, Some("/src/app/main.c"), Some(40)),
        function(
            APP,
            Some("compute"),
            0x1200,
            Some("/src/app/compute.c"),
            Some(10),
        ),
        function(
            APP,
            Some("hot_loop<int>"),
            0x1200,
            Some("/src/app/compute.h"),
            Some(3),
        ),
        function(LIBC, Some("write"), 0x9000, None, None),
        function(LIBC, None, 0x9500, None, None),
    ]
}

/// cpu-clock (100 samples of 1 ms) and page-faults (10).
fn events() -> Vec<Event> {
    vec![
        Event {
            name: "cpu-clock".to_owned(),
            total_samples: 100,
            total_period: 100_000_000,
            period_known: true,
        },
        Event {
            name: "page-faults".to_owned(),
            total_samples: 10,
            total_period: 10,
            period_known: true,
        },
    ]
}

/// Functions [`add_latency`] appends, in table order after [`LIBC_UNKNOWN`].
pub const MUTEX_LOCK: usize = 12;
pub const MUTEX_SLOW: usize = 13;
pub const SCHEDULE: usize = 14;
pub const LLL_LOCK_WAIT: usize = 15;
pub const PTHREAD_MUTEX_LOCK: usize = 16;
pub const WORKER: usize = 17;

/// Stacks [`add_latency`] appends after the four sampled ones: a call of `mychardrv_write`,
/// (5, a call of `compute`), a kernel mutex wait in `mychardrv_write`, a futex wait of
/// `worker`.
pub const DRV_CALL_STACK: u32 = 4;
pub const MUTEX_WAIT_STACK: u32 = 6;
pub const FUTEX_WAIT_STACK: u32 = 7;

/// `mychardrv_write`'s call durations (ns): a median of 10 µs (funclatency's usecs), every
/// log2 bucket of µs from 0 -> 1 to 16 -> 31 used, then one slow call at 150 µs.
pub const DRV_DURATIONS: [u64; 19] = [
    1_500, 2_500, 3_000, 5_000, 5_000, 5_000, 5_000, 10_000, 10_000, 10_000, 10_000, 10_000,
    10_000, 10_000, 10_000, 20_000, 20_000, 20_000, 150_000,
];

/// `profile()` with what `record --latency mychardrv_write,/usr/bin/app:compute
/// --contention` adds: the two functions' calls (`mychardrv_write` 700–930 ms, its 150 µs
/// call at 916 ms; `compute` in the first 0.6 s, one call nested in another), 3 mutex waits
/// of `mychardrv_write` on `dev+0x0 [mychardrv]` and 2 futex waits of a second thread,
/// `worker` (tid 101, never sampled); and what could not be paired of each.
pub fn add_latency(p: &mut Profile) {
    use kprof_symbols::latency::{Call, Contention, Latency, ProbeKind, TimedFunction};
    let stacks = add_latency_stacks(p);
    let call = |start_ms: f64, duration: u64, stack: u32, depth: u32| Call {
        start: (start_ms * 1e6) as u64,
        duration,
        stack,
        cpu: 1,
        depth,
    };
    let drv = TimedFunction {
        name: "mychardrv_write".to_owned(),
        kind: ProbeKind::Kernel,
        calls: DRV_DURATIONS
            .iter()
            .enumerate()
            .map(|(i, &d)| call(700.0 + 12.0 * i as f64, d, stacks[0], 0))
            .collect(),
        hits: Some(25),
        lost: 3,
        unmatched_returns: 0,
        unfinished: 0,
    };
    let compute = TimedFunction {
        name: "/usr/bin/app:compute".to_owned(),
        kind: ProbeKind::User,
        calls: [(0.0, 2), (100.0, 3), (200.0, 4), (300.0, 20), (305.0, 5)]
            .iter()
            .map(|&(at, ms)| call(at, ms * 1_000_000, stacks[1], u32::from(at == 305.0)))
            .collect(),
        hits: None,
        lost: 0,
        unmatched_returns: 2,
        unfinished: 1,
    };
    p.latency = Some(Latency {
        functions: vec![drv, compute],
    });
    p.contention = Some(Contention {
        kernel_locks: true,
        futex: true,
        waits: fixture_waits(stacks[2], stacks[3]),
        unmatched_ends: 1,
        unfinished: 0,
    });
}

/// 3 mutex waits (50, 30, 10 µs) on the driver's lock, 2 futex waits (2 ms, 1 ms).
fn fixture_waits(mutex: u32, futex: u32) -> Vec<kprof_symbols::latency::Wait> {
    use kprof_symbols::latency::{Wait, WaitKind};
    let mut waits: Vec<Wait> = [(720, 50_000), (760, 30_000), (800, 10_000)]
        .iter()
        .map(|&(ms, ns)| Wait {
            kind: WaitKind::Kernel { flags: 32 },
            address: 0xffff_ffff_c000_2000,
            lock_name: Some("dev+0x0 [mychardrv]".to_owned()),
            start: ms * 1_000_000,
            duration: ns,
            stack: mutex,
            cpu: 1,
        })
        .collect();
    for (ms, ns) in [(100, 2_000_000), (150, 1_000_000)] {
        waits.push(Wait {
            kind: WaitKind::Futex,
            address: 0x7ffd_1000,
            lock_name: None,
            start: ms * 1_000_000,
            duration: ns,
            stack: futex,
            cpu: u32::MAX,
        });
    }
    waits.sort_by_key(|w| w.start);
    waits
}

/// The functions, frames, thread and zero-count stacks of the calls and waits.
fn add_latency_stacks(p: &mut Profile) -> [u32; 4] {
    let function = |image: usize, name: &str, start: u64, file: Option<&str>| Function {
        image,
        name: Some(name.to_owned()),
        start,
        size: Some(0x40),
        file: file.map(str::to_owned),
        line: None,
    };
    let locking = "kernel/locking/mutex.c";
    p.functions.extend([
        function(VMLINUX, "mutex_lock", 0xffff_ffff_8180_0000, Some(locking)),
        function(
            VMLINUX,
            "__mutex_lock.constprop.0",
            0xffff_ffff_8180_1000,
            Some(locking),
        ),
        function(
            VMLINUX,
            "schedule",
            0xffff_ffff_8190_0000,
            Some("kernel/sched/core.c"),
        ),
        function(LIBC, "__lll_lock_wait", 0x9600, None),
        function(LIBC, "pthread_mutex_lock", 0x9700, None),
        function(APP, "worker", 0x1400, Some("/src/app/worker.c")),
    ]);
    let mut frame = |function: usize, address: u64, src: Option<(&str, u32)>| {
        p.frames.push(Frame {
            function,
            address,
            file: src.map(|(f, _)| f.into()),
            line: src.map(|(_, l)| l),
            inlined: false,
        });
        p.frames.len() - 1
    };
    let drv_entry = frame(DRV_WRITE, 0x100, None);
    let compute_entry = frame(COMPUTE, 0x1200, Some(("/src/app/compute.c", 10)));
    let schedule = frame(
        SCHEDULE,
        0xffff_ffff_8190_0040,
        Some(("kernel/sched/core.c", 6600)),
    );
    let slow = frame(MUTEX_SLOW, 0xffff_ffff_8180_1080, Some((locking, 600)));
    let lock = frame(MUTEX_LOCK, 0xffff_ffff_8180_0020, Some((locking, 283)));
    let drv_lock = frame(DRV_WRITE, 0x120, None);
    let lll = frame(LLL_LOCK_WAIT, 0x9620, None);
    let pthread = frame(PTHREAD_MUTEX_LOCK, 0x9740, None);
    let worker = frame(WORKER, 0x1420, Some(("/src/app/worker.c", 21)));
    // The sampled driver stack's frames under mychardrv_write: vfs_write .. _start.
    let below_drv = p.stacks[2].frames[2..].to_vec();
    let start = *below_drv.last().unwrap_or(&0);
    let main_compute = p.stacks[1].frames[1];
    p.threads.push(Thread {
        pid: 100,
        tid: 101,
        comm: "worker".to_owned(),
    });
    let stacks = [
        ([vec![drv_entry], below_drv.clone()].concat(), 0),
        (vec![compute_entry, main_compute, start], 0),
        (
            [vec![schedule, slow, lock, drv_lock], below_drv].concat(),
            0,
        ),
        (vec![lll, pthread, worker, start], 1),
    ];
    let first = p.stacks.len() as u32;
    let events = p.events.len();
    for (frames, thread) in stacks {
        p.stacks.push(Stack {
            frames,
            thread,
            counts: vec![0; events],
            periods: vec![0; events],
        });
    }
    [first, first + 1, first + 2, first + 3]
}

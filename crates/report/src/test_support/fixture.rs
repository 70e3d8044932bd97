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

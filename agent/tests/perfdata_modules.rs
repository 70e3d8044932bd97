//! Module maps and module build-ids as the agent writes them, read by Debian's perf. This
//! machine has no loadable modules, so the records are built with the agent's own writer from
//! a real-format `/proc/modules` line and a build-id note as `/sys/module/*/notes` holds it.

mod common;

use std::fs::File;
use std::path::Path;

use common::*;
use kprof_agent::perf_data_writer::{self, BuildIdEntry, FileAttr, Writer};
use kprof_agent::perf_records;
use kprof_agent::procfs::ProcModule;
use kprof_agent::sys::{self, flag, PerfEventAttr};

/// A SAMPLE record with the agent's sample_type (IDENTIFIER, IP, TID, TIME, CPU, PERIOD).
fn sample(id: u64, ip: u64, pid: i32, time: u64, kernel: bool) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&perf_records::SAMPLE.to_ne_bytes());
    r.extend_from_slice(
        &(if kernel {
            perf_data_writer::MISC_KERNEL
        } else {
            perf_data_writer::MISC_USER
        })
        .to_ne_bytes(),
    );
    r.extend_from_slice(&56u16.to_ne_bytes());
    r.extend_from_slice(&id.to_ne_bytes());
    r.extend_from_slice(&ip.to_ne_bytes());
    r.extend_from_slice(&pid.to_ne_bytes());
    r.extend_from_slice(&pid.to_ne_bytes());
    r.extend_from_slice(&time.to_ne_bytes());
    r.extend_from_slice(&0u64.to_ne_bytes()); // cpu 0, res 0
    r.extend_from_slice(&250_000u64.to_ne_bytes());
    assert_eq!(r.len(), 56);
    r
}

/// The agent's cpu-clock attr: frequency 4000, the sample_type of [`sample`].
fn cpu_clock_attr() -> PerfEventAttr {
    PerfEventAttr {
        type_: sys::PERF_TYPE_SOFTWARE,
        size: sys::ATTR_SIZE,
        sample_period_or_freq: 4000,
        sample_type: sys::SAMPLE_IDENTIFIER
            | sys::SAMPLE_IP
            | sys::SAMPLE_TID
            | sys::SAMPLE_TIME
            | sys::SAMPLE_CPU
            | sys::SAMPLE_PERIOD,
        read_format: sys::FORMAT_ID,
        flags: flag::DISABLED
            | flag::SAMPLE_ID_ALL
            | flag::FREQ
            | flag::MMAP
            | flag::COMM
            | flag::TASK
            | flag::MMAP2,
        ..Default::default()
    }
}

/// perf.data's feature sections: the kernel's and the module's build-ids.
fn features(module_bid: &[u8]) -> perf_data_writer::Features {
    perf_data_writer::Features {
        hostname: "board".into(),
        osrelease: "6.1.0".into(),
        version: "kprof-agent test".into(),
        arch: "x86_64".into(),
        nr_cpus_available: 1,
        nr_cpus_online: 1,
        cmdline: vec!["kprof-agent".into(), "record".into()],
        build_ids: vec![
            BuildIdEntry {
                misc: perf_data_writer::MISC_KERNEL,
                pid: perf_data_writer::HOST_PID,
                build_id: vec![0xab; 20],
                filename: "[kernel.kallsyms]".into(),
            },
            BuildIdEntry {
                misc: perf_data_writer::MISC_KERNEL,
                pid: perf_data_writer::HOST_PID,
                build_id: module_bid.to_vec(),
                filename: "[mychardrv]".into(),
            },
        ],
        tracing_data: None,
    }
}

/// perf.data with the kernel's and module `m`'s maps, and 10 samples in the module.
fn write_module_perf_data(path: &Path, m: &ProcModule, module_bid: &[u8]) {
    let mut w = Writer::create(
        File::create(path).unwrap(),
        vec![FileAttr {
            attr: cpu_clock_attr(),
            name: "cpu-clock".into(),
            ids: vec![7],
        }],
        None,
    )
    .unwrap();
    let text = 0xffff_ffff_8100_0000u64;
    w.write_record(&perf_records::kernel_mmap(
        text,
        0x100_0000,
        text,
        "[kernel.kallsyms]_text",
    ))
    .unwrap();
    w.write_record(&perf_records::kernel_mmap(
        m.base,
        m.size,
        0,
        &format!("[{}]", m.name),
    ))
    .unwrap();
    w.write_record(&perf_records::comm(4242, 4242, "insmod-user"))
        .unwrap();
    for i in 0..10 {
        w.write_record(&sample(7, m.base + 0x40 + i, 4242, 1_000_000 + i, true))
            .unwrap();
    }
    w.write_record(&perf_records::finished_round()).unwrap();
    w.finish(&features(module_bid)).unwrap();
}

/// perf sees `[mychardrv]` as a kernel module map at its /proc/modules base, attributes samples
/// there to it, and lists its build-id from the BUILD_ID table.
#[test]
fn write_perfdata_module_map_perf_reads() {
    let dir = scratch("modules");
    let proc_modules = "mychardrv 16384 0 - Live 0xffffffffc0a00000 (O)\n";
    let m = &kprof_agent::procfs::parse_proc_modules(proc_modules)[0];
    let mut note = vec![4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, b'G', b'N', b'U', 0];
    note.extend((1..=20u8).map(|i| i * 11));
    let module_bid = kprof_capture::build_id::in_notes(&note, cfg!(target_endian = "big"), 4)
        .unwrap()
        .to_vec();

    let path = dir.join("perf.data");
    write_module_perf_data(&path, m, &module_bid);
    let p = path.to_str().unwrap();

    let (list, _) = perf(&["buildid-list", "-i", p]);
    assert!(
        list.lines()
            .any(|l| l == format!("{} [mychardrv]", hex(&module_bid))),
        "{list}"
    );
    assert!(
        list.lines()
            .any(|l| l == format!("{} [kernel.kallsyms]", "ab".repeat(20))),
        "{list}"
    );

    let (script, _) = perf(&[
        "script",
        "-i",
        p,
        "--show-mmap-events",
        "-F",
        "comm,pid,ip,dso",
    ]);
    assert!(
        script.contains("[0xffffffffc0a00000(0x4000) @ 0"),
        "{script}"
    );
    let in_module = script
        .lines()
        .filter(|l| l.contains("insmod-user") && l.contains("[mychardrv]"))
        .count();
    assert_eq!(
        in_module, 10,
        "samples not attributed to the module:\n{script}"
    );

    let (report, _) = perf(&["report", "--stdio", "-i", p, "--sort", "dso"]);
    let row = report
        .lines()
        .find(|l| !l.starts_with('#') && l.contains('%'))
        .unwrap_or("");
    assert!(
        row.contains("100.00%") && row.contains("[mychardrv]"),
        "{report}"
    );

    // linux-perf-data agrees on the map and the build-id.
    let parsed = parse_perf_data(&path);
    assert!(parsed
        .maps
        .iter()
        .any(|mp| mp.path == "[mychardrv]" && mp.start == m.base && mp.len == m.size));
    assert_eq!(parsed.build_ids.get("[mychardrv]"), Some(&hex(&module_bid)));
}

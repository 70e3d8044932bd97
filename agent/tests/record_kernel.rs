//! Must-hold item 3 of issue 2: a kernel-heavy workload's samples resolve against the capture's
//! own kallsyms, with call chains that cross from user space into the kernel.

mod common;

use common::*;

const PERF_CONTEXT_KERNEL: u64 = (-128i64) as u64;
const PERF_CONTEXT_USER: u64 = (-512i64) as u64;

/// read(2) from /dev/zero: kernel samples name kernel functions and their chains reach the program.
#[test]
fn record_perfdata_kernel_heavy_callchains_cross_into_user() {
    let (dir, prog) = workload("kernel", "syscalls");
    let out = record(
        CPU_CLOCK_4K_CALLCHAINS,
        &dir.join("captures"),
        &[prog.to_str().unwrap(), "2"],
    );
    let unpacked = unpack(&archive_of(&out), &dir);
    let m = manifest(&unpacked);
    let pid = m.command.as_ref().unwrap().pid.unwrap();
    let kallsyms = Kallsyms::parse(&std::fs::read_to_string(unpacked.join("kallsyms")).unwrap());
    let text = kprof_capture::manifest::parse_hex_addr(
        m.kernel.text_addr.as_deref().expect("_text in manifest"),
    )
    .unwrap();
    let parsed = parse_perf_data(&unpacked.join("perf.data"));
    let elf = ElfSymbols::load(&prog);
    let prog_path = prog.to_str().unwrap();

    let mine: Vec<&Sample> = parsed.samples.iter().filter(|s| s.pid == pid).collect();
    let kernel: Vec<&Sample> = mine.iter().copied().filter(|s| s.ip >= text).collect();
    assert!(
        kernel.len() >= 20,
        "only {} of {} samples in the kernel",
        kernel.len(),
        mine.len()
    );
    let mut names = std::collections::BTreeSet::new();
    for s in &kernel {
        let name = kallsyms
            .lookup(s.ip)
            .unwrap_or_else(|| panic!("{:#x} not in kallsyms", s.ip));
        names.insert(name.to_string());
    }

    // Chains: [KERNEL marker, kernel ips..., USER marker, user ips...] ending in the program.
    let mut crossing = 0;
    let mut syscall_entry = false;
    for s in &kernel {
        let c = &s.callchain;
        let (Some(k), Some(u)) = (
            c.iter().position(|&a| a == PERF_CONTEXT_KERNEL),
            c.iter().position(|&a| a == PERF_CONTEXT_USER),
        ) else {
            continue;
        };
        if !(k < u && u + 1 < c.len()) {
            continue;
        }
        let kframes: Vec<&str> = c[k + 1..u]
            .iter()
            .filter_map(|&a| kallsyms.lookup(a))
            .collect();
        syscall_entry |= kframes.iter().any(|f| f.contains("read"));
        let user_syms: Vec<&str> = c[u + 1..]
            .iter()
            .filter_map(|&a| {
                let map = map_of(&parsed.maps, pid, a).filter(|m| m.path == prog_path)?;
                elf.lookup(a, map).or_else(|| elf.lookup(a - 1, map))
            })
            .collect();
        // glibc's read() stub keeps no frame, so the frame-pointer walk goes from read() to
        // reader()'s caller: main() (or reader() when the sample hit elsewhere).
        if user_syms.iter().any(|s| *s == "reader" || *s == "main") {
            crossing += 1;
        }
    }
    assert!(
        crossing >= 10,
        "only {crossing} kernel samples with chains into the program; kernel functions: {names:?}"
    );
    assert!(
        syscall_entry,
        "no kernel frame of the read path; kernel functions: {names:?}"
    );
}

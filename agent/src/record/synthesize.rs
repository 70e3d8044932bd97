//! Records describing what already ran when sampling started, written right after the events
//! are enabled (perf's order: nothing falls in between): the kernel and module maps, then a
//! COMM for every thread and an MMAP2 for every executable file map (every file map with
//! `data_maps`).

use std::fs;
use std::io;

use super::kernel_state::KernelState;
use super::sink::Sink;
use crate::perf_records;
use crate::procfs::{self, ProcModule};

/// Writes the kernel's and modules' maps and the processes' (only `only`'s with `-p`);
/// `data_maps`: also their non-executable file maps, for unwinders that read `.eh_frame_hdr`
/// through them (`--call-graph dwarf`, as perf's mmap_data synthesis).
pub(super) fn initial_state(
    sink: &mut Sink,
    k: &KernelState,
    only: Option<i32>,
    data_maps: bool,
) -> io::Result<()> {
    let modules = procfs::parse_proc_modules(&k.proc_modules);
    let (kstart, klen) = kernel_map(k.text, k.etext, &modules);
    sink.write_synthesized(&perf_records::kernel_mmap(
        kstart,
        klen,
        kstart,
        "[kernel.kallsyms]_text",
    ))?;
    for m in &modules {
        if m.base != 0 {
            sink.write_synthesized(&perf_records::kernel_mmap(
                m.base,
                m.size,
                0,
                &k.module_filename(&m.name),
            ))?;
        }
    }
    processes(sink, only, data_maps)
}

/// Start and length of the kernel's map: from `_text` to `_etext`, else to the lowest module
/// above it, else to the end of the address space.
fn kernel_map(text: Option<u64>, etext: Option<u64>, modules: &[ProcModule]) -> (u64, u64) {
    let kstart = text.unwrap_or(0);
    let next_module = modules.iter().map(|m| m.base).filter(|&b| b > kstart).min();
    let kend = etext
        .filter(|&e| e > kstart)
        .or(next_module)
        .unwrap_or(u64::MAX);
    (kstart, kend - kstart)
}

/// COMM for every thread and MMAP2 for every executable (with `data_maps`: every) file map of
/// the running processes.
fn processes(sink: &mut Sink, only: Option<i32>, data_maps: bool) -> io::Result<()> {
    let pids: Vec<i32> = match only {
        Some(p) => vec![p],
        None => fs::read_dir("/proc")?
            .flatten()
            .filter_map(|e| e.file_name().to_str()?.parse().ok())
            .collect(),
    };
    for pid in pids {
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
                continue;
            };
            let Ok(comm) = fs::read_to_string(t.path().join("comm")) else {
                continue;
            };
            sink.write_synthesized(&perf_records::comm(pid, tid, comm.trim_end_matches('\n')))?;
        }
        let Ok(maps) = fs::read_to_string(format!("/proc/{pid}/maps")) else {
            continue;
        };
        for m in maps.lines().filter_map(procfs::parse_maps_line) {
            // Pseudo-files (`[heap]`, `[stack]`) and anonymous maps hold no unwind tables.
            if !(m.exec || data_maps && m.path.starts_with('/')) || m.path.is_empty() {
                continue;
            }
            sink.write_synthesized(&perf_records::mmap2(pid, &m))?;
            if m.exec {
                sink.note_file(m.path.as_bytes());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(base: u64) -> ProcModule {
        ProcModule {
            name: "m".into(),
            size: 4096,
            base,
        }
    }

    /// The kernel map ends at `_etext`, else at the next module above `_text`, else at the top.
    #[test]
    fn kernel_map_end_etext_then_module_then_top() {
        let text = 0xffff_ffff_8100_0000;
        let mods = [module(0xffff_ffff_c000_0000), module(0x1000)];
        assert_eq!(
            kernel_map(Some(text), Some(text + 0x10_0000), &mods),
            (text, 0x10_0000)
        );
        assert_eq!(
            kernel_map(Some(text), None, &mods),
            (text, 0xffff_ffff_c000_0000 - text)
        );
        assert_eq!(
            kernel_map(Some(text), Some(text), &[]),
            (text, u64::MAX - text)
        );
        assert_eq!(kernel_map(None, None, &[]), (0, u64::MAX));
    }
}

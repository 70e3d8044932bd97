//! Side-band records in time order, not file order (issue 13): a real `perf record -g` of the
//! frame-pointer test program, its data section rewritten so that the program's exec COMM
//! and MMAP2 records come where per-CPU ring buffers and CPU clocks can put them. The
//! program's frames must stay in its write(2) call chains.

use kprof_test_support::report::capture;

use kprof_symbols::profile::Profile;
use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

const PERF_RECORD_COMM: u32 = 3;
const PERF_RECORD_SAMPLE: u32 = 9;
const PERF_RECORD_MMAP2: u32 = 10;
const PERF_RECORD_FINISHED_ROUND: u32 = 68;
const PERF_RECORD_MISC_COMM_EXEC: u16 = 1 << 13;
/// `sample_id_all` fields that would follow TIME in a record's trailer (ID, STREAM_ID, CPU,
/// IDENTIFIER): with none of them, TIME is a side-band record's last 8 bytes.
const AFTER_TIME: u64 = (1 << 6) | (1 << 9) | (1 << 7) | (1 << 16);
const SAMPLE_TIME: u64 = 1 << 2;

/// The recording, made once per test binary: `./prog 100 4000` (a few hundred write(2)
/// samples).
fn recorded() -> &'static capture::Recorded {
    static R: OnceLock<capture::Recorded> = OnceLock::new();
    R.get_or_init(|| capture::record(100, 4000))
}

/// One record of the data section: its type, misc and byte range (header included).
#[derive(Debug, Clone)]
struct Rec {
    kind: u32,
    misc: u16,
    at: Range<usize>,
}

/// A PERFILE2 split into what precedes the data section, its records, and what follows.
struct PerfFile {
    bytes: Vec<u8>,
    data: Range<usize>,
    recs: Vec<Rec>,
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

impl PerfFile {
    fn read(path: &Path) -> Self {
        let bytes = std::fs::read(path).unwrap();
        assert_eq!(&bytes[..8], b"PERFILE2", "a perf.data file, not pipe mode");
        // The one attribute's sample_type: TIME must be a side-band record's last field.
        let attrs = u64_at(&bytes, 24) as usize;
        let sample_type = u64_at(&bytes, attrs + 24);
        assert!(
            sample_type & SAMPLE_TIME != 0 && sample_type & AFTER_TIME == 0,
            "sample_type {sample_type:#x}"
        );
        let start = u64_at(&bytes, 40) as usize;
        let data = start..start + u64_at(&bytes, 48) as usize;
        let mut recs = Vec::new();
        let mut at = data.start;
        while at < data.end {
            let kind = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            let misc = u16::from_le_bytes(bytes[at + 4..at + 6].try_into().unwrap());
            let size = u16::from_le_bytes(bytes[at + 6..at + 8].try_into().unwrap()) as usize;
            recs.push(Rec {
                kind,
                misc,
                at: at..at + size,
            });
            at += size;
        }
        Self { bytes, data, recs }
    }

    /// The pid of a COMM, MMAP2 or SAMPLE record (the first field of each with
    /// `IP|TID|...`: COMM and MMAP2 start with pid; a sample with IP then pid).
    fn pid(&self, r: &Rec) -> i32 {
        let at = r.at.start + 8 + if r.kind == PERF_RECORD_SAMPLE { 8 } else { 0 };
        i32::from_le_bytes(self.bytes[at..at + 4].try_into().unwrap())
    }

    /// The timestamp of a side-band record: the last field of its `sample_id_all` trailer.
    fn time_at(&self, r: &Rec) -> usize {
        r.at.end - 8
    }

    fn time(&self, r: &Rec) -> u64 {
        u64_at(&self.bytes, self.time_at(r))
    }

    /// The program's exec COMM and its MMAP2 records (the program's own first).
    fn exec_records(&self) -> (usize, Vec<usize>) {
        let comm = self
            .recs
            .iter()
            .position(|r| r.kind == PERF_RECORD_COMM && r.misc & PERF_RECORD_MISC_COMM_EXEC != 0)
            .expect("the program's exec COMM");
        let pid = self.pid(&self.recs[comm]);
        let mmaps: Vec<usize> = (0..self.recs.len())
            .filter(|&i| self.recs[i].kind == PERF_RECORD_MMAP2 && self.pid(&self.recs[i]) == pid)
            .collect();
        let first = &self.recs[mmaps[0]];
        assert!(
            String::from_utf8_lossy(&self.bytes[first.at.clone()]).contains("/prog\0"),
            "the program's text is its first MMAP2"
        );
        (comm, mmaps)
    }

    /// The file with its data section's records in `order`.
    fn write(&self, order: &[usize], to: &Path) {
        let mut out = self.bytes[..self.data.start].to_vec();
        for &i in order {
            out.extend_from_slice(&self.bytes[self.recs[i].at.clone()]);
        }
        assert_eq!(out.len(), self.data.end, "every record once");
        out.extend_from_slice(&self.bytes[self.data.end..]);
        std::fs::write(to, out).unwrap();
    }
}

fn symbolize(perf_data: &Path) -> Profile {
    symbolize_with(perf_data, recorded().dir.path())
}

/// Symbolizes `perf_data` with the program in `program_dir`, the host's libraries and kernel.
fn symbolize_with(perf_data: &Path, program_dir: &Path) -> Profile {
    let opts = kprof_symbols::Options {
        symbol_paths: vec![program_dir.to_owned()],
        host_files: true,
        debug_roots: vec!["/usr/lib/debug".into()],
        // The capture was made on this host: its kernel names kernel frames (ksys_write).
        host_kernel: Some(kprof_symbols::HostKernel {
            build_id: std::fs::read("/sys/kernel/notes").ok().and_then(|n| {
                let id = kprof_capture::build_id::in_notes(&n, cfg!(target_endian = "big"), 4)?;
                Some(kprof_capture::build_id::hex(id))
            }),
            kallsyms: Some("/proc/kallsyms".into()),
            vmlinux_dir: None,
            nodename: None,
        }),
        ..kprof_symbols::Options::default()
    };
    let mut s = kprof_symbols::Symbolizer::new(opts, &mut |_| {}).unwrap();
    let capture = kprof_symbols::Capture::open(perf_data).unwrap();
    s.symbolize(&capture, &mut |_| {}).unwrap()
}

/// The write(2) stacks (a `ksys_write` frame) have the program's `main` and no marked end,
/// but for at most one sample: the final printf's write to the test's stdout pipe, from libc's
/// stdio code without frame pointers.
fn assert_write_chains_whole(p: &Profile, what: &str) {
    let (mut whole, mut cut) = (0, Vec::new());
    for s in &p.stacks {
        let frames: Vec<(String, String)> = s
            .frames
            .iter()
            .map(|f| {
                let func = &p.functions[p.frames[*f].function];
                (
                    func.name.clone().unwrap_or_default(),
                    p.images[func.image].name.clone(),
                )
            })
            .collect();
        if !frames.iter().any(|(f, _)| f == "ksys_write") {
            continue;
        }
        if frames.iter().any(|(f, img)| f == "main" && img == "prog")
            && !frames.iter().any(|(f, _)| f == "[truncated]")
        {
            whole += s.counts[0];
        } else {
            cut.push((s.counts[0], frames));
        }
    }
    let cut_samples: u64 = cut.iter().map(|(n, _)| n).sum();
    assert!(
        whole > 0 && cut_samples <= 1,
        "{what}: {cut_samples} write(2) samples without the program ({whole} with it): {cut:?}"
    );
}

/// As recorded, the write(2) chains are whole (the check below can pass on this capture).
#[test]
fn symbolize_perfdata_recorded_order_write_chains_whole() {
    let p = symbolize(&recorded().perf_data());
    assert_write_chains_whole(&p, "as recorded");
}

/// The exec COMM timestamped after the program's text MMAP2 (the exec moved to a CPU whose
/// clock is ahead): the program's mapping is kept, its frames stay in the chains.
#[test]
fn symbolize_perfdata_exec_comm_after_its_mmap2_keeps_program() {
    let f = PerfFile::read(&recorded().perf_data());
    let (comm, mmaps) = f.exec_records();
    let text = &f.recs[mmaps[0]];
    let (t_text, t_next) = (f.time(text), f.time(&f.recs[mmaps[1]]));
    assert!(t_text + 1 < t_next, "{t_text} {t_next}");
    let mut bytes = f.bytes.clone();
    let at = f.time_at(&f.recs[comm]);
    bytes[at..at + 8].copy_from_slice(&(t_text + 1).to_le_bytes());
    let out = recorded().dir.path().join("comm-late.data");
    std::fs::write(&out, bytes).unwrap();
    assert_write_chains_whole(&symbolize(&out), "exec COMM after the program's MMAP2");
}

/// Every stack as (function, image) names, innermost first, with its count: sorted, so that
/// two profiles of one recording compare equal whatever order they interned stacks in.
fn named_stacks(p: &Profile) -> Vec<(Vec<(String, String)>, u64)> {
    let mut all: Vec<_> = p
        .stacks
        .iter()
        .map(|s| {
            let frames = s
                .frames
                .iter()
                .map(|f| {
                    let func = &p.functions[p.frames[*f].function];
                    let name = func.name.clone().unwrap_or_default();
                    (name, p.images[func.image].name.clone())
                })
                .collect();
            (frames, s.counts[0])
        })
        .collect();
    all.sort();
    all
}

/// The program's first samples alone in the first round and its exec COMM and MMAP2 records
/// at the start of the second: the samples precede their mappings in the file and follow
/// them in time. The profile is the one of the file as recorded.
#[test]
fn symbolize_perfdata_mmap2_in_next_round_sorted_before_samples() {
    let f = PerfFile::read(&recorded().perf_data());
    let (comm, mmaps) = f.exec_records();
    let pid = f.pid(&f.recs[comm]);
    let rounds: Vec<usize> = (0..f.recs.len())
        .filter(|&i| f.recs[i].kind == PERF_RECORD_FINISHED_ROUND)
        .collect();
    assert!(!rounds.is_empty(), "no FINISHED_ROUND");
    // The second round ends at the next FINISHED_ROUND, or with the file.
    let second_end = rounds.get(1).copied().unwrap_or(f.recs.len());
    // A sample's TIME follows IP and TID.
    let sample_time = |i: usize| u64_at(&f.bytes, f.recs[i].at.start + 24);
    let text_mapped = f.time(&f.recs[mmaps[0]]);
    let first: Vec<usize> = (0..f.recs.len())
        .filter(|&i| f.recs[i].kind == PERF_RECORD_SAMPLE && f.pid(&f.recs[i]) == pid)
        .filter(|&i| sample_time(i) > text_mapped)
        .take(3)
        .collect();
    assert!(
        first.len() == 3 && first[2] < second_end,
        "the program's first samples in the first two rounds"
    );
    let exec: Vec<usize> = std::iter::once(comm)
        .chain(mmaps.iter().copied())
        .filter(|&i| i < second_end)
        .collect();
    // Synthesized records, then the samples, the round's end, the exec's records, the rest.
    let mut order: Vec<usize> = (0..comm)
        .filter(|i| !rounds.contains(i) && !first.contains(i))
        .collect();
    order.extend(&first);
    order.push(rounds[0]);
    order.extend(&exec);
    let placed = order.clone();
    order.extend((0..f.recs.len()).filter(|i| !placed.contains(i)));
    let out = recorded().dir.path().join("mmap-next-round.data");
    f.write(&order, &out);
    assert_eq!(
        named_stacks(&symbolize(&out)),
        named_stacks(&symbolize(&recorded().perf_data()))
    );
}

const PERF_RECORD_FORK: u32 = 7;

/// A program whose child, after fork(), maps a file executable (an MMAP2 of its own) and
/// then writes from the code it shares with its parent.
const FORKER: &str = r#"#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) void chatter(int fd, int rounds) {
    char buf[4096];
    memset(buf, 'x', sizeof buf);
    for (int i = 0; i < rounds; i++)
        if (write(fd, buf, sizeof buf) < 0) exit(1);
}

int main(void) {
    int fd = open("/dev/null", O_WRONLY);
    pid_t child = fork();
    if (child == 0) {
        int self = open("/proc/self/exe", O_RDONLY);
        if (mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, self, 0) == MAP_FAILED) _exit(1);
        chatter(fd, 300000);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    return 0;
}
"#;

/// The child's FORK timestamped after the child's own MMAP2 (the child ran on a CPU whose
/// clock is behind): the child still gets its parent's mappings, and its write(2) chains
/// reach `main`.
#[test]
fn symbolize_perfdata_fork_after_childs_mmap2_inherits_parent() {
    let dir = recorded().dir.path().join("forker");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("forker.c"), FORKER).unwrap();
    kprof_test_support::cc_in(
        &dir,
        &["-O2", "-g", "-fno-omit-frame-pointer"],
        "forker.c",
        "prog",
    );
    capture::run(
        kprof_test_support::system::perf()
            .current_dir(&dir)
            .args(["record", "-q", "-e", "cpu-clock", "-F", "4000", "-g"])
            .args(["-o", "perf.data", "./prog"]),
        "perf record",
    );
    let f = PerfFile::read(&dir.join("perf.data"));
    let fork = f
        .recs
        .iter()
        .position(|r| {
            // pid != ppid: a new process, not a thread.
            let body = r.at.start + 8;
            r.kind == PERF_RECORD_FORK && f.bytes[body..body + 4] != f.bytes[body + 4..body + 8]
        })
        .expect("the child's FORK");
    let child = f.pid(&f.recs[fork]);
    let own = f
        .recs
        .iter()
        .find(|r| r.kind == PERF_RECORD_MMAP2 && f.pid(r) == child)
        .expect("the child's own MMAP2");
    let late = f.time(own) + 1;
    let mut bytes = f.bytes.clone();
    // FORK's own time field (after pid, ppid, tid, ptid) and its sample_id_all TIME.
    let rec = &f.recs[fork];
    for at in [rec.at.start + 8 + 16, f.time_at(rec)] {
        bytes[at..at + 8].copy_from_slice(&late.to_le_bytes());
    }
    let out = dir.join("fork-late.data");
    std::fs::write(&out, bytes).unwrap();
    let p = symbolize_with(&out, &dir);
    assert_write_chains_whole(&p, "FORK after the child's MMAP2");
}

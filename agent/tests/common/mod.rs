//! Helpers shared by the agent's integration tests: building the C workloads, running the
//! agent binary, reading captures with `linux-perf-data`, symbolizing with `object`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kprof_capture::Manifest;
use kprof_test_support::cc;
use linux_perf_data::linux_perf_event_reader::EventRecord;
use linux_perf_data::{PerfFileReader, PerfFileRecord};
use object::{Object, ObjectSegment, ObjectSymbol};

pub const AGENT: &str = env!("CARGO_BIN_EXE_kprof-agent");

/// The tests drive real perf_event_open system-wide: they need root.
pub fn require_root() {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    assert_eq!(
        uid, 0,
        "the kprof-agent integration tests must run as root (system-wide perf_event_open)"
    );
}

/// A fresh directory under the target dir's tmp, removed by nobody (inspect after failures).
pub fn scratch(name: &str) -> PathBuf {
    let base =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&base);
    fs::create_dir_all(&base).unwrap();
    base
}

/// Compiles `tests/data/NAME.c` with frame pointers and debug info.
pub fn build_c(name: &str, dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(format!("{name}.c"));
    cc(
        &["-g", "-O1", "-fno-omit-frame-pointer"],
        &src,
        &dir.join(name),
    )
}

/// Compiles `examples/unwind-demo/unwind_demo.c` as its Makefile does (no frame pointers): the
/// program both the agent's and the host's unwinding tests record.
pub fn build_unwind_demo(dir: &Path) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/unwind-demo/unwind_demo.c");
    cc(
        &["-O2", "-g", "-fomit-frame-pointer"],
        &src,
        &dir.join("unwind_demo"),
    )
}

/// The root check, a scratch directory `name`, and the workload `tests/data/PROG.c` built in it.
pub fn workload(name: &str, prog: &str) -> (PathBuf, PathBuf) {
    require_root();
    let dir = scratch(name);
    let exe = build_c(prog, &dir);
    (dir, exe)
}

/// cpu-clock at 4 kHz with call chains: the options of the captures symbolized frame by frame.
pub const CPU_CLOCK_4K_CALLCHAINS: &[&str] = &["-e", "cpu-clock", "-F", "4000", "-g"];

/// `kprof-agent record OPTIONS -o OUT_DIR`, followed by `-- COMMAND...` when there is one.
pub fn record(options: &[&str], out_dir: &Path, command: &[&str]) -> Output {
    let mut args = vec!["record"];
    args.extend_from_slice(options);
    args.extend(["-o", out_dir.to_str().unwrap()]);
    if !command.is_empty() {
        args.push("--");
        args.extend_from_slice(command);
    }
    run_agent(&args)
}

pub fn run_agent(args: &[&str]) -> Output {
    Command::new(AGENT)
        .args(args)
        .output()
        .expect("run kprof-agent")
}

/// The archive path printed as the last stdout line.
pub fn archive_of(out: &Output) -> PathBuf {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "agent failed: {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let last = stdout.lines().last().expect("agent printed nothing");
    let p = PathBuf::from(last);
    assert!(
        p.is_absolute() && p.is_file(),
        "last stdout line is not an archive: {last}"
    );
    p
}

/// Unpacks an archive into `dir/unpacked` with the system tar (an independent reader).
pub fn unpack(archive: &Path, dir: &Path) -> PathBuf {
    let d = dir.join("unpacked");
    fs::create_dir_all(&d).unwrap();
    let st = Command::new("tar")
        .arg("xzf")
        .arg(archive)
        .arg("-C")
        .arg(&d)
        .status()
        .unwrap();
    assert!(st.success());
    d
}

pub fn manifest(dir: &Path) -> Manifest {
    serde_json::from_slice(&fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// A sample as the tests need it.
#[derive(Debug, Clone)]
pub struct Sample {
    pub attr_index: usize,
    pub pid: i32,
    pub tid: i32,
    pub ip: u64,
    pub callchain: Vec<u64>,
}

/// A file map (MMAP or MMAP2).
#[derive(Debug, Clone)]
pub struct Map {
    pub pid: i32,
    pub start: u64,
    pub len: u64,
    pub pgoff: u64,
    pub path: String,
}

impl Map {
    /// From an MMAP or MMAP2 record's fields: (address, length, page offset) and path.
    fn new(pid: i32, (start, len, pgoff): (u64, u64, u64), path: &[u8]) -> Map {
        Map {
            pid,
            start,
            len,
            pgoff,
            path: String::from_utf8_lossy(path).into_owned(),
        }
    }
}

/// Everything the tests look at in a perf.data, read by linux-perf-data.
#[derive(Debug, Default)]
pub struct Parsed {
    pub event_names: Vec<String>,
    pub samples: Vec<Sample>,
    pub maps: Vec<Map>,
    pub lost: BTreeMap<u64, u64>,
    pub throttles: u64,
    pub build_ids: BTreeMap<String, String>,
}

pub fn parse_perf_data(path: &Path) -> Parsed {
    let file = fs::File::open(path).unwrap();
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(std::io::BufReader::new(file))
        .expect("linux-perf-data parses the file");
    let mut p = Parsed {
        event_names: perf_file
            .event_attributes()
            .iter()
            .map(|a| a.name().unwrap_or("?").to_string())
            .collect(),
        ..Default::default()
    };
    for (_, info) in perf_file.build_ids().expect("BUILD_ID feature parses") {
        p.build_ids.insert(
            String::from_utf8_lossy(&info.path).into_owned(),
            hex(&info.build_id),
        );
    }
    while let Some(rec) = record_iter
        .next_record(&mut perf_file)
        .expect("records parse")
    {
        let PerfFileRecord::EventRecord { attr_index, record } = rec else {
            continue;
        };
        match record.parse().expect("record parses") {
            EventRecord::Sample(s) => p.samples.push(Sample {
                attr_index,
                pid: s.pid.unwrap(),
                tid: s.tid.unwrap(),
                ip: s.ip.unwrap(),
                callchain: s
                    .callchain
                    .map(|c| (0..c.len()).map(|i| c.get(i).unwrap()).collect())
                    .unwrap_or_default(),
            }),
            EventRecord::Mmap2(m) => p.maps.push(Map::new(
                m.pid,
                (m.address, m.length, m.page_offset),
                &m.path.as_slice(),
            )),
            EventRecord::Mmap(m) => p.maps.push(Map::new(
                m.pid,
                (m.address, m.length, m.page_offset),
                &m.path.as_slice(),
            )),
            EventRecord::Lost(l) => *p.lost.entry(l.id).or_default() += l.count,
            EventRecord::Throttle(_) => p.throttles += 1,
            _ => {}
        }
    }
    p
}

pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Function symbols of an ELF file with the file-offset → address translation.
pub struct ElfSymbols {
    syms: Vec<(u64, u64, String)>,
    segs: Vec<(u64, u64, u64)>,
}

impl ElfSymbols {
    pub fn load(path: &Path) -> ElfSymbols {
        let data = fs::read(path).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let mut syms: Vec<(u64, u64, String)> = obj
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
            .map(|s| (s.address(), s.size(), s.name().unwrap_or("").to_string()))
            .collect();
        syms.sort();
        let segs = obj
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        ElfSymbols { syms, segs }
    }

    /// The symbol containing a sampled address, given the map it fell in.
    pub fn lookup(&self, ip: u64, map: &Map) -> Option<&str> {
        let file_off = ip - map.start + map.pgoff;
        let &(off, _, vaddr) = self
            .segs
            .iter()
            .find(|&&(o, s, _)| file_off >= o && file_off < o + s)?;
        let addr = file_off - off + vaddr;
        self.syms
            .iter()
            .find(|(a, s, _)| addr >= *a && addr < a + s)
            .map(|(_, _, n)| n.as_str())
    }
}

/// `/proc/kallsyms`-format text symbolizer (the capture's own snapshot).
pub struct Kallsyms {
    syms: Vec<(u64, String)>,
}

impl Kallsyms {
    pub fn parse(text: &str) -> Kallsyms {
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let a = u64::from_str_radix(it.next()?, 16).ok()?;
                let t = it.next()?;
                let n = it.next()?;
                matches!(t, "t" | "T" | "w" | "W").then(|| (a, n.to_string()))
            })
            .filter(|(a, _)| *a != 0)
            .collect();
        syms.sort();
        Kallsyms { syms }
    }

    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|(a, _)| *a <= addr);
        (i > 0).then(|| self.syms[i - 1].1.as_str())
    }
}

/// The map of `pid` containing `ip`.
pub fn map_of(maps: &[Map], pid: i32, ip: u64) -> Option<&Map> {
    maps.iter()
        .rev()
        .find(|m| m.pid == pid && ip >= m.start && ip < m.start + m.len)
}

/// Runs Debian's perf with the given arguments, returning (stdout, stderr).
pub fn perf(args: &[&str]) -> (String, String) {
    let out = kprof_test_support::system::perf()
        .args(args)
        .output()
        .expect("Debian's perf (linux-perf) must be installed");
    assert!(
        out.status.success(),
        "perf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Files left in a capture dir (archives and anything else), but the sequence counter
/// `.kprof-seq`, which stays on purpose.
pub fn dir_entries(dir: &Path) -> Vec<String> {
    match fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != ".kprof-seq")
            .collect(),
        Err(_) => Vec::new(),
    }
}

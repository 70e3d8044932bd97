//! A kprof archive (perf.data + manifest + kallsyms + modules) with samples at known
//! addresses of a real kbuild module: resolution, build-id mismatch, stripped module and
//! missing vmlinux, each flagged.

mod common;

use common::perfdata::{self, Sample};
use kprof_capture::manifest::{hex_addr, EventRecord, FileDigest, Kernel, Manifest, Module, Uname};
use kprof_symbols::elf::Placement;
use kprof_symbols::profile::{Profile, SymbolSource};
use object::{Object, ObjectSection, ObjectSymbol};
use std::path::{Path, PathBuf};

const KERNEL_TEXT: u64 = 0xffff_ffff_8100_0000;
const KERNEL_BUILD_ID: &str = "0123456789abcdef0123456789abcdef01234567";

/// A sample address in the module with what binutils says about it.
struct Probe {
    addr: u64,
    frames: Vec<(String, String, u32)>,
}

/// Three addresses per function of the module's text sections.
fn probes(ko: &Path, place: &Placement) -> Vec<Probe> {
    let data = std::fs::read(ko).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let mut out = Vec::new();
    for sym in obj
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text && s.size() > 0)
    {
        let sec = obj.section_by_index(sym.section_index().unwrap()).unwrap();
        let name = sec.name().unwrap();
        for off in [0, sym.size() / 2, sym.size() - 1] {
            let so = sym.address() + off;
            out.push(Probe {
                addr: place[name] + so,
                frames: common::binutils_frames(ko, name, so),
            });
        }
    }
    out
}

/// kallsyms as the target would show it: a few kernel symbols and the module's.
fn kallsyms(ko: &Path, place: &Placement) -> String {
    let mut s = format!(
        "{KERNEL_TEXT:016x} T _text\n{:016x} T do_syscall_64\n{:016x} T ksys_write\n",
        KERNEL_TEXT + 0x100,
        KERNEL_TEXT + 0x200
    );
    let data = std::fs::read(ko).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    for sym in obj
        .symbols()
        .filter(|s| s.kind() == object::SymbolKind::Text)
    {
        let sec = obj.section_by_index(sym.section_index().unwrap()).unwrap();
        let addr = place[sec.name().unwrap()] + sym.address();
        s.push_str(&format!(
            "{addr:016x} t {}\t[kprof_testmod]\n",
            sym.name().unwrap()
        ));
    }
    s
}

/// The agent's manifest for the archive: one cpu-clock event, the test kernel and
/// `kprof_testmod` placed at `place` (core base `base`).
fn manifest(
    place: &Placement,
    module_build_id: &str,
    base: u64,
    samples: usize,
    perf_len: usize,
) -> Manifest {
    Manifest {
        schema: kprof_capture::MANIFEST_SCHEMA.into(),
        version: kprof_capture::MANIFEST_VERSION,
        capture_id: "test".into(),
        agent_version: "test".into(),
        uname: Uname {
            sysname: "Linux".into(),
            nodename: "board".into(),
            release: "6.1.0-test".into(),
            version: "#1".into(),
            machine: "x86_64".into(),
        },
        events: vec![EventRecord {
            requested: None,
            name: "cpu-clock".into(),
            attr_type: 1,
            attr_config: 0,
            sample_period: None,
            sample_freq: Some(1000),
            fallback_from: None,
            fallback_reason: None,
            ids: vec![],
            samples: samples as u64,
            lost: 0,
            throttled: 0,
            count: None,
            no_samples: false,
        }],
        command: None,
        target_pid: None,
        cpus: vec![0],
        callchain: true,
        call_graph: None,
        stack_user_size: None,
        start_time_ns: 0,
        stop_time_ns: 1,
        stop_reason: "duration".into(),
        kernel: Kernel {
            release: "6.1.0-test".into(),
            build_id: Some(KERNEL_BUILD_ID.into()),
            text_addr: Some(hex_addr(KERNEL_TEXT)),
        },
        modules: vec![Module {
            name: "kprof_testmod".into(),
            build_id: Some(module_build_id.into()),
            base: hex_addr(base),
            size: 0x4000,
            sections: place
                .iter()
                .map(|(k, v)| (k.clone(), hex_addr(*v)))
                .collect(),
        }],
        perf_data: FileDigest {
            file: "perf.data".into(),
            size: perf_len as u64,
            sha256: String::new(),
        },
        sysctl: Default::default(),
        mmap_pages: None,
        off_cpu: None,
        markers: None,
        truncated: false,
        truncation: None,
        ring_dropped: None,
        skipped_files: None,
        latency: Vec::new(),
        contention: None,
        sequence: None,
    }
}

/// Writes an archive like the agent's and returns its path.
fn archive(dir: &Path, ko: &Path, module_build_id: &str, with_kallsyms: bool) -> PathBuf {
    let place = common::placement(ko);
    let mut samples: Vec<Sample> = probes(ko, &place)
        .iter()
        .map(|p| Sample {
            pid: 0,
            tid: 0,
            kernel: true,
            ip: p.addr,
            callers: vec![KERNEL_TEXT + 0x210],
        })
        .collect();
    samples.push(Sample {
        pid: 0,
        tid: 0,
        kernel: true,
        ip: KERNEL_TEXT + 0x120,
        callers: vec![],
    });
    let perf = perfdata::write(&samples);
    let core: Vec<u64> = place
        .iter()
        .filter(|(k, _)| !k.starts_with(".init"))
        .map(|(_, v)| *v)
        .collect();
    let base = *core.iter().min().unwrap();
    let manifest = manifest(&place, module_build_id, base, samples.len(), perf.len());
    let stage = dir.join("stage");
    std::fs::create_dir_all(&stage).unwrap();
    std::fs::write(stage.join("perf.data"), &perf).unwrap();
    std::fs::write(
        stage.join("manifest.json"),
        serde_json::to_vec(&manifest).unwrap(),
    )
    .unwrap();
    std::fs::write(
        stage.join("modules"),
        format!("kprof_testmod 16384 0 - Live {base:#x}\n"),
    )
    .unwrap();
    let mut members = vec!["perf.data", "manifest.json", "modules"];
    if with_kallsyms {
        std::fs::write(stage.join("kallsyms"), kallsyms(ko, &place)).unwrap();
        members.push("kallsyms");
    }
    let out = dir.join("test.kprof.tar.gz");
    let st = std::process::Command::new("tar")
        .arg("czf")
        .arg(&out)
        .arg("-C")
        .arg(&stage)
        .args(&members)
        .status()
        .unwrap();
    assert!(st.success());
    out
}

fn module_image(p: &Profile) -> &kprof_symbols::profile::Image {
    p.images
        .iter()
        .find(|i| i.name == "kprof_testmod.ko")
        .expect("module image")
}

fn build_id_of(ko: &Path) -> String {
    let data = std::fs::read(ko).unwrap();
    let obj = object::File::parse(&data[..]).unwrap();
    let id = obj.build_id().unwrap().unwrap();
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Every sample in the module resolves to binutils' function and line; vmlinux falls back to
/// kallsyms, flagged.
#[test]
fn symbolize_archive_module_samples_resolve() {
    let ko = common::shared_module();
    let tmp = tempfile::tempdir().unwrap();
    let cap = archive(tmp.path(), ko, &build_id_of(ko), true);
    let (p, _) = common::symbolize(&cap, &[ko.parent().unwrap().to_path_buf()]);
    assert!(matches!(&module_image(&p).symbols, SymbolSource::BuildId { path, .. } if path == ko));
    let place = common::placement(ko);
    let probes = probes(ko, &place);
    let mut checked = 0;
    for probe in &probes {
        let stack = p
            .stacks
            .iter()
            .find(|s| p.frames[s.frames[0]].address == probe.addr)
            .unwrap_or_else(|| panic!("no stack with leaf {:#x}", probe.addr));
        let leaf: Vec<_> = stack
            .frames
            .iter()
            .map(|f| &p.frames[*f])
            .take_while(|f| f.address == probe.addr)
            .collect();
        assert_eq!(leaf.len(), probe.frames.len(), "{:#x}", probe.addr);
        for (f, (func, _, line)) in leaf.iter().zip(&probe.frames) {
            let name = p.functions[f.function].name.as_deref().unwrap();
            assert!(
                name == func || (name == "init_module" && func == "kprof_testmod_init"),
                "{:#x}: {name} vs {func}",
                probe.addr
            );
            assert_eq!(f.line, Some(*line), "{:#x} {func}", probe.addr);
        }
        // The caller frame is in vmlinux, named from kallsyms.
        let caller = &p.frames[*stack.frames.last().unwrap()];
        assert_eq!(
            p.functions[caller.function].name.as_deref(),
            Some("ksys_write")
        );
        checked += 1;
    }
    assert!(checked >= 12);
    let vmlinux = p.images.iter().find(|i| i.name == "vmlinux").unwrap();
    assert_eq!(vmlinux.symbols, SymbolSource::Kallsyms);
    assert!(
        p.warnings.iter().any(|w| w.contains("vmlinux")
            && w.contains("kallsyms")
            && w.contains(KERNEL_BUILD_ID)),
        "{:?}",
        p.warnings
    );
}

/// Source files of an out-of-tree module show relative to the module's directory, kernel
/// headers inlined into it relative to the kernel tree; the frames keep the full paths.
#[test]
fn symbolize_archive_module_source_paths_relative_to_tree() {
    let ko = common::shared_module();
    let tmp = tempfile::tempdir().unwrap();
    let cap = archive(tmp.path(), ko, &build_id_of(ko), true);
    let (p, _) = common::symbolize(&cap, &[ko.parent().unwrap().to_path_buf()]);
    let module_dir = ko.parent().unwrap().to_string_lossy().into_owned();
    let kbuild = common::kbuild_dir().to_string_lossy().into_owned();
    let files: Vec<&str> = p.frames.iter().filter_map(|f| f.file.as_deref()).collect();
    let own = files
        .iter()
        .find(|f| f.ends_with("kprof_testmod.c"))
        .expect("a frame in the module's source");
    assert_eq!(*own, format!("{module_dir}/kprof_testmod.c"));
    assert_eq!(p.source_path(own), "kprof_testmod.c");
    for f in &files {
        let shown = p.source_path(f);
        assert!(!shown.starts_with('/'), "{f} shown as {shown}");
        if let Some(rel) = f.strip_prefix(&format!("{kbuild}/")) {
            assert_eq!(shown, rel, "{f}");
        }
    }
}

/// A module file with another build-id is reported with both ids, not used; kallsyms names it
/// and the status stays a mismatch.
#[test]
fn symbolize_archive_module_mismatch_reported() {
    let ko = common::shared_module();
    let tmp = tempfile::tempdir().unwrap();
    let recorded = "ffffffffffffffffffffffffffffffffffffffff";
    let cap = archive(tmp.path(), ko, recorded, true);
    let (p, _) = common::symbolize(&cap, &[ko.parent().unwrap().to_path_buf()]);
    let actual = build_id_of(ko);
    assert_eq!(
        module_image(&p).symbols,
        SymbolSource::Mismatch {
            path: ko.to_path_buf(),
            expected: recorded.into(),
            found: actual.clone(),
            kallsyms: true,
        }
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains(recorded) && w.contains(&actual) && w.contains("not used")),
        "{:?}",
        p.warnings
    );
    assert!(p
        .functions
        .iter()
        .any(|f| f.name.as_deref() == Some("kprof_hot") && f.file.is_none()));
}

/// A stripped module gives no symbols: kallsyms fallback, flagged.
#[test]
fn symbolize_archive_stripped_module_flagged() {
    let ko = common::shared_module();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("syms");
    std::fs::create_dir_all(&dir).unwrap();
    let stripped = dir.join("kprof_testmod.ko");
    let st = std::process::Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(ko)
        .status()
        .unwrap();
    assert!(st.success());
    assert_eq!(build_id_of(&stripped), build_id_of(ko));
    let cap = archive(tmp.path(), ko, &build_id_of(ko), true);
    let (p, _) = common::symbolize(&cap, &[dir]);
    assert_eq!(module_image(&p).symbols, SymbolSource::Kallsyms);
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("kprof_testmod.ko") && w.contains("is stripped")),
        "{:?}",
        p.warnings
    );
}

/// No vmlinux and no kallsyms: kernel addresses stay raw, and the report says so.
#[test]
fn symbolize_archive_missing_vmlinux_flagged() {
    let ko = common::shared_module();
    let tmp = tempfile::tempdir().unwrap();
    let cap = archive(tmp.path(), ko, &build_id_of(ko), false);
    let (p, _) = common::symbolize(&cap, &[ko.parent().unwrap().to_path_buf()]);
    let vmlinux = p.images.iter().find(|i| i.name == "vmlinux").unwrap();
    assert!(
        matches!(&vmlinux.symbols, SymbolSource::Missing { why } if why.contains(KERNEL_BUILD_ID))
    );
    assert!(
        p.warnings
            .iter()
            .any(|w| w.starts_with("vmlinux: no symbols")),
        "{:?}",
        p.warnings
    );
    // The module still resolves by itself.
    assert!(p
        .functions
        .iter()
        .any(|f| f.name.as_deref() == Some("kprof_hot") && f.line.is_some()));
}

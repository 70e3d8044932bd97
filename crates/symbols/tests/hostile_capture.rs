//! Captures made by a hostile board: fields that would become paths or slices, members and
//! sections claiming more than they hold, archives and records that inflate a thousandfold.
//! Each is refused with a message naming the field or the limit, quickly, without a panic
//! and without holding what the file claims in memory or on disk.

mod common;

use common::perfdata::{self, Sample};
use kprof_symbols::{Capture, Error, Options, Symbolizer};
use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

fn samples() -> Vec<Sample> {
    (0..16)
        .map(|i| Sample {
            pid: 100,
            tid: 100,
            kernel: i % 2 == 0,
            ip: if i % 2 == 0 {
                0xffff_ffff_8100_0000 + i as u64 * 16
            } else {
                0x40_1000 + i as u64 * 8
            },
            callers: vec![0x40_2000],
        })
        .collect()
}

/// A manifest as the agent writes one, for a perf.data of `perf_len` bytes (no digest).
fn manifest(perf_len: usize) -> serde_json::Value {
    serde_json::json!({
        "schema": kprof_capture::MANIFEST_SCHEMA, "version": 1,
        "capture_id": "20261122-152334-13e8", "agent_version": "t",
        "uname": {"sysname": "Linux", "nodename": "b", "release": "6.1.0",
                  "version": "#1", "machine": "x86_64"},
        "events": [], "cpus": [0], "callchain": true, "start_time_ns": 1,
        "stop_time_ns": 2, "stop_reason": "duration",
        "kernel": {"release": "6.1.0", "build_id": "48dc540c8b76393804ca8088dbfa7d42911a9444",
                   "text_addr": "0xffffffff81000000"},
        "modules": [{"name": "mychardrv", "base": "0xffffffffc0000000", "size": 4096,
                     "build_id": "ab".repeat(20), "sections": {".text": "0xffffffffc0000000"}}],
        "perf_data": {"file": "perf.data", "size": perf_len, "sha256": ""},
        "sysctl": {}
    })
}

/// A gzip'd tar of `members`.
fn archive(members: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (name, data) in members {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        tar.append_data(&mut h, name, *data).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

fn in_file(bytes: &[u8], suffix: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(suffix).tempfile().unwrap();
    f.write_all(bytes).unwrap();
    f
}

fn symbolizer(host_files: bool) -> Symbolizer {
    let opts = Options {
        host_files,
        ..Options::default()
    };
    Symbolizer::new(opts, &mut |_| {}).unwrap()
}

/// Opens and symbolizes `path` with `limit`, returning the error.
fn report_error(path: &Path, limit: u64) -> String {
    let err = match Capture::open_limited(path, limit) {
        Err(e) => e,
        Ok(cap) => symbolizer(false)
            .symbolize(&cap, &mut |_| {})
            .expect_err("a hostile capture was reported"),
    };
    err.to_string()
}

/// A manifest whose kernel build-id is not ASCII (a slice at byte 2 would cut the `é`) is
/// refused naming the field; `report` on today's tree panicked in `id.split_at(2)`.
#[test]
fn open_archive_manifest_non_ascii_build_id_refused() {
    let perf = perfdata::write(&samples());
    for (pointer, value, want) in [
        (
            "/kernel/build_id",
            "aébc",
            "kernel.build_id: \"aébc\" is not lowercase hex",
        ),
        (
            "/modules/0/build_id",
            "éé",
            "modules[0].build_id: \"éé\" is not lowercase hex",
        ),
        (
            "/modules/0/name",
            "../../x",
            "modules[0].name: \"../../x\" contains `/`",
        ),
        (
            "/uname/release",
            "../../../tmp",
            "uname.release: \"../../../tmp\" contains `/`",
        ),
    ] {
        let mut m = manifest(perf.len());
        *m.pointer_mut(pointer).unwrap() = value.into();
        let json = serde_json::to_vec(&m).unwrap();
        let f = in_file(
            &archive(&[("manifest.json", &json), ("perf.data", &perf)]),
            ".kprof.tar.gz",
        );
        let err = report_error(f.path(), 1 << 30);
        assert!(
            err.contains("bad manifest.json") && err.contains(want),
            "{pointer}: {err}"
        );
    }
    // The same capture with an honest manifest is reported.
    let json = serde_json::to_vec(&manifest(perf.len())).unwrap();
    let f = in_file(
        &archive(&[("manifest.json", &json), ("perf.data", &perf)]),
        ".kprof.tar.gz",
    );
    let cap = Capture::open(f.path()).unwrap();
    symbolizer(false).symbolize(&cap, &mut |_| {}).unwrap();
}

/// A build-id that is not lowercase hex, from any source, is no lookup and no panic.
#[test]
fn find_symbols_non_hex_build_id_missing() {
    let sources = kprof_symbols::sources::Sources {
        index: kprof_symbols::index::BuildIdIndex::default(),
        perf_cache: Some(std::env::temp_dir()),
        debug_roots: vec![std::env::temp_dir()],
        providers: Vec::new(),
        use_recorded_paths: false,
    };
    for id in ["aébc", "é", "ab/../../etc", "AB12"] {
        match sources.find(Some(id), &[], None) {
            kprof_symbols::sources::Lookup::Missing(why) => {
                assert!(why.contains("is not lowercase hex"), "{why}")
            }
            other => panic!("{id}: {other:?}"),
        }
        assert!(sources.files_with_build_id(id, None).is_empty());
    }
}

/// A mapping recorded at the path of a FIFO on this host is not opened: with the paths of
/// the target tried (a perf.data recorded here), today's tree blocked forever in `open`.
#[test]
fn symbolize_perfdata_recorded_fifo_path_not_opened() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("libfifo.so");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path that lives across the call.
    assert_eq!(unsafe { libc_mkfifo(c.as_ptr(), 0o600) }, 0);
    let mut before = perfdata::mmap2(100, 0x40_0000, 0x10_0000, fifo.to_str().unwrap(), &[7; 20]);
    before.extend(perfdata::mmap2(
        100,
        0x60_0000,
        0x1000,
        "/dev/zero",
        &[8; 20],
    ));
    let mut s = samples();
    s[1].ip = 0x60_0010;
    let f = in_file(&perfdata::write_with(&before, &s), ".data");
    let path = f.path().to_path_buf();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let cap = Capture::open(&path).unwrap();
        let p = symbolizer(true).symbolize(&cap, &mut |_| {});
        tx.send(p.map(|p| p.images.len())).unwrap();
    });
    let images = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("symbolizing blocked on a FIFO named by the capture")
        .unwrap();
    assert!(images >= 2, "{images}");
}

extern "C" {
    #[link_name = "mkfifo"]
    fn libc_mkfifo(path: *const std::ffi::c_char, mode: u32) -> i32;
}

/// A 512-byte tar header claiming a 20 GB perf.data (the start of a 20 MB archive inflating
/// to 20 GB) fails at the header under the default limit, naming it and how to raise it.
#[test]
fn open_archive_member_claims_20g_fails_fast() {
    let mut h = tar::Header::new_gnu();
    h.set_path("perf.data").unwrap();
    h.set_size(20_000_000_000);
    h.set_mode(0o600);
    h.set_cksum();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(h.as_bytes()).unwrap();
    gz.write_all(&vec![0u8; 4 << 20]).unwrap();
    let bytes = gz.finish().unwrap();
    let f = in_file(&bytes, ".kprof.tar.gz");
    let t = Instant::now();
    let err = Capture::open(f.path()).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let msg = err.to_string();
    assert!(matches!(err, Error::TooLarge { .. }), "{msg}");
    assert!(
        msg.contains("perf.data member is 20000000000 bytes")
            && msg.contains("the limit is 2 GiB (KPROF_MAX_INPUT_SIZE)")
            && msg.contains("KPROF_MAX_INPUT_SIZE=8G"),
        "{msg}"
    );
    let err = Capture::from_bytes(Path::new("mem"), &bytes).unwrap_err();
    assert!(matches!(err, Error::TooLarge { .. }), "{err}");
}

/// An archive whose members are each small but inflate to more than the limit in all (here
/// 40 MiB of zeros in 40 KiB, against a 4 MiB limit) stops at the limit, from a file and
/// from memory; the unpacked perf.data never grows past it.
#[test]
fn open_archive_gzip_bomb_limit_named() {
    let perf = perfdata::write(&samples());
    let junk = vec![0u8; 4 << 20];
    let mut members: Vec<(&str, &[u8])> = vec![("perf.data", &perf)];
    for _ in 0..10 {
        members.push(("padding", &junk));
    }
    let bytes = archive(&members);
    assert!(bytes.len() < 200 << 10, "{}", bytes.len());
    let f = in_file(&bytes, ".kprof.tar.gz");
    for err in [
        Capture::open_limited(f.path(), 4 << 20).unwrap_err(),
        Capture::from_bytes_limited(Path::new("mem"), &bytes, 4 << 20).unwrap_err(),
        Capture::from_reader_limited(Path::new("<stdin>"), &bytes[..], 4 << 20).unwrap_err(),
    ] {
        let msg = err.to_string();
        assert!(
            msg.contains("the archive decompresses to more than 4 MiB")
                && msg.contains("KPROF_MAX_INPUT_SIZE=16M"),
            "{msg}"
        );
    }
    // A perf.data member itself larger than the limit fails at its header.
    let big = vec![0u8; 8 << 20];
    let bytes = archive(&[("perf.data", &big)]);
    let err = Capture::from_bytes_limited(Path::new("mem"), &bytes, 4 << 20).unwrap_err();
    assert!(
        err.to_string()
            .contains("perf.data member is 8388608 bytes"),
        "{err}"
    );
}

/// A tar header claiming a 100 MiB kallsyms over 10 bytes is refused as the truncation it
/// is, and one claiming 2^40 bytes as more than kallsyms ever is.
#[test]
fn open_archive_tar_header_claims_huge_member_error() {
    for (claim, want) in [
        (
            100u64 << 20,
            "kallsyms: header says 104857600 bytes, 1034 present",
        ),
        (1 << 40, "kallsyms: 1099511627776 bytes is more than"),
    ] {
        let mut h = tar::Header::new_gnu();
        h.set_path("kallsyms").unwrap();
        h.set_size(claim);
        h.set_mode(0o600);
        h.set_cksum();
        let mut raw = h.as_bytes().to_vec();
        raw.extend_from_slice(b"ffff T _t\n");
        raw.resize(raw.len() + 1024, 0);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        let bytes = gz.finish().unwrap();
        let err = Capture::from_bytes(Path::new("mem"), &bytes).unwrap_err();
        assert!(err.to_string().contains(want), "{err}");
    }
}

/// Header sections claiming more than any perf.data has (in a sparse file that really is
/// that long, so that the file length does not catch them) are refused by size, not read.
#[test]
fn read_perfdata_header_claims_huge_section_error() {
    let seed = perfdata::write(&samples());
    // A hostname feature section of 300 MiB after the data.
    let mut b = seed.clone();
    b[72..80].copy_from_slice(&(1u64 << 2).to_le_bytes());
    let table = b.len() as u64;
    b.extend_from_slice(&(table + 16).to_le_bytes());
    b.extend_from_slice(&(300u64 << 20).to_le_bytes());
    let f = in_file(&b, ".data");
    f.as_file().set_len(table + 16 + (300 << 20)).unwrap();
    let err = report_error(f.path(), 1 << 40);
    assert!(
        err.contains("feature sections of 314572800 bytes in all, more than the 256 MiB"),
        "{err}"
    );
    // An attribute section of 32 MiB: the reader reserves room for 250000 attributes.
    let mut b = seed;
    let len = b.len() as u64;
    let size = 144 * ((32u64 << 20) / 144 + 1);
    b[24..32].copy_from_slice(&len.to_le_bytes());
    b[32..40].copy_from_slice(&size.to_le_bytes());
    let f = in_file(&b, ".data");
    f.as_file().set_len(len + size).unwrap();
    let err = report_error(f.path(), 1 << 40);
    assert!(
        err.contains(&format!(
            "attribute section of {size} bytes is larger than the 16 MiB"
        )),
        "{err}"
    );
}

/// `perf record -z` data decompressing past 16 times the input limit in all (100 MiB of zeros
/// in 10 KiB, each record under the per-record cap) stops there with the limit named.
#[test]
fn read_perfdata_zstd_bomb_limit_named() {
    let bytes = perfdata::write_zeros_compressed(100 << 20);
    assert!(bytes.len() < 64 << 10, "{}", bytes.len());
    let f = in_file(&bytes, ".data");
    let err = report_error(f.path(), 4 << 20);
    assert!(
        err.contains("the compressed records decompress to more than 64 MiB")
            && err.contains("the limit is 4 MiB")
            && err.contains("KPROF_MAX_INPUT_SIZE=16M"),
        "{err}"
    );
}

/// Standard input that never ends is read up to the limit, not into memory until it runs
/// out: `report -` on today's tree read it all with `read_to_end`.
#[test]
fn read_stdin_endless_limit_named() {
    let endless = (&b"PERFILE2"[..]).chain(std::io::repeat(0));
    let t = Instant::now();
    let err = Capture::from_reader_limited(Path::new("<stdin>"), endless, 16 << 20).unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(30));
    let msg = err.to_string();
    assert!(
        msg.starts_with("<stdin>: more than 16 MiB to read: the limit is 16 MiB"),
        "{msg}"
    );
    // Under the limit, a bare perf.data from a reader is reported.
    let perf = perfdata::write(&samples());
    let cap = Capture::from_reader_limited(Path::new("<stdin>"), &perf[..], 16 << 20).unwrap();
    symbolizer(false).symbolize(&cap, &mut |_| {}).unwrap();
}

/// The real capture of the fuzz seeds through the `archive_members` fuzz entry point, with
/// 600 mutations of its manifest and kallsyms text (bytes, and JSON values replaced by
/// hostile ones): errors are fine, a panic fails. CI's share of what the fuzzer does.
#[test]
fn read_archive_members_mutations_no_panic() {
    let seed = std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/seeds/archive_members/kprof-agent-p.bin"),
    )
    .unwrap();
    kprof_symbols::fuzzing::archive_members(&seed);
    let take = |b: &[u8], at: usize| -> (usize, usize) {
        let len = u32::from_le_bytes(b[at..at + 4].try_into().unwrap()) as usize;
        (at + 4, at + 4 + len)
    };
    let (m0, m1) = take(&seed, 1);
    let (k0, k1) = take(&seed, m1);
    let (manifest, kallsyms, perf) = (&seed[m0..m1], &seed[k0..k1], &seed[k1..]);
    let hostile: [serde_json::Value; 8] = [
        "é".into(),
        "aébc".into(),
        "../../..".into(),
        "".into(),
        "\u{0}".into(),
        serde_json::Value::Null,
        u64::MAX.into(),
        "f".repeat(70).into(),
    ];
    let pointers = [
        "/kernel/build_id",
        "/kernel/release",
        "/kernel/text_addr",
        "/uname/release",
        "/capture_id",
        "/perf_data/file",
        "/modules",
    ];
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x as usize
    };
    for i in 0..600 {
        let (m, k) = if i % 2 == 0 {
            let mut v: serde_json::Value = serde_json::from_slice(manifest).unwrap();
            let p = pointers[next() % pointers.len()];
            *v.pointer_mut(p).unwrap() = hostile[next() % hostile.len()].clone();
            (serde_json::to_vec(&v).unwrap(), kallsyms.to_vec())
        } else {
            let mut k = kallsyms.to_vec();
            for _ in 0..1 + next() % 8 {
                let at = next() % k.len();
                k[at] = [b' ', b'\n', b'\t', b'[', b']', 0xff, b'0', b'T'][next() % 8];
            }
            (manifest.to_vec(), k)
        };
        let input = kprof_symbols::fuzzing::archive_members_input((i % 8) as u8, &m, &k, perf);
        kprof_symbols::fuzzing::archive_members(&input);
    }
}

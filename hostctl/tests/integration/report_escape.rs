//! Names from a capture never reach the terminal raw: a program whose thread name, binary
//! name and hottest symbol carry terminal escapes (OSC title, clear screen, C1 CSI), recorded
//! by Linux `perf record`, reported in every text view.

use crate::report_common::kprofctl;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// Sets its thread name to escapes, then burns CPU in `evil_spin` (renamed in the binary).
const PROGRAM: &str = r#"#include <sys/prctl.h>
__attribute__((noinline)) unsigned evil_spin(unsigned n) {
    unsigned acc = 0;
    for (unsigned i = 0; i < n; i++)
        acc += i * 2654435761u ^ (acc >> 3);
    return acc;
}
int main(void) {
    prctl(PR_SET_NAME, "\x1b]0;pwn\x07\x1b[2J", 0, 0, 0);
    unsigned t = 0;
    for (int r = 0; r < 60; r++)
        t += evil_spin(2000000 + r);
    return t == 1;
}
"#;

/// The symbol name `evil_spin` gets: an OSC title, BEL, clear screen and a C1 CSI.
const EVIL_SYMBOL: &[u8] = b"\x1b]0;owned\x07evil\x1b[2J\xc2\x9b31m";
/// How the text output shows it.
const EVIL_SYMBOL_SHOWN: &str = "\\x1b]0;owned\\x07evil\\x1b[2J\\u{9b}31m";
/// The binary's file name (the image name perf records).
const EVIL_BINARY: &[u8] = b"prog\x1b[2J";

fn run_ok(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The directory with the renamed binary and its `perf.data`, made once.
fn recorded() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::Builder::new()
            .prefix("kprof-escape-")
            .tempdir()
            .unwrap()
            .keep();
        std::fs::write(dir.join("prog.c"), PROGRAM).unwrap();
        // No -g: the name comes from .symtab, which objcopy renames.
        kprof_test_support::cc_in(
            &dir,
            &["-O1", "-fno-omit-frame-pointer"],
            "prog.c",
            "prog.o1",
        );
        let mut redefine = b"evil_spin=".to_vec();
        redefine.extend_from_slice(EVIL_SYMBOL);
        run_ok(
            Command::new("objcopy")
                .current_dir(&dir)
                .arg("--redefine-sym")
                .arg(OsStr::from_bytes(&redefine))
                .arg("prog.o1")
                .arg(OsStr::from_bytes(EVIL_BINARY)),
        );
        // Same build-id: the index must find only the renamed copy.
        std::fs::remove_file(dir.join("prog.o1")).unwrap();
        let mut exe = b"./".to_vec();
        exe.extend_from_slice(EVIL_BINARY);
        run_ok(
            kprof_test_support::system::perf()
                .current_dir(&dir)
                .args(["record", "-q", "-e", "cpu-clock", "-F", "2000", "-g"])
                .args(["-o", "perf.data"])
                .arg(OsStr::from_bytes(&exe)),
        );
        dir
    })
}

/// Asserts that `bytes` hold no ESC, BEL or C1 CSI.
fn assert_no_controls(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(
        !bytes.iter().any(|b| *b == 0x1b || *b == 0x07) && !text.contains('\u{9b}'),
        "{what} has raw control characters:\n{text:?}"
    );
}

/// The text report, call trees, annotation, diff and `symbols` show the hostile names escaped;
/// nothing on stdout or stderr has a raw ESC, BEL or CSI.
#[test]
fn report_text_hostile_names_escaped() {
    let dir = recorded();
    let perf = dir.join("perf.data");
    let perf = perf.to_str().unwrap();
    let symbols = dir.to_str().unwrap();
    let evil = String::from_utf8(EVIL_SYMBOL.to_vec()).unwrap();
    let views: [&[&str]; 6] = [
        &["report", perf, "--symbols", symbols],
        &["report", perf, "--symbols", symbols, "--callers", &evil],
        &["report", perf, "--symbols", symbols, "--callees", &evil],
        &["report", perf, "--symbols", symbols, "--annotate", &evil],
        &["diff", perf, perf, "--symbols", symbols],
        &["symbols", perf, "--symbols", symbols],
    ];
    for args in views {
        let out = kprofctl(args);
        let view = format!("{:?}", &args[..args.len().min(5)]);
        assert!(
            out.status.success(),
            "{view}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_no_controls(&format!("{view} stdout"), &out.stdout);
        assert_no_controls(&format!("{view} stderr"), &out.stderr);
        let text = String::from_utf8_lossy(&out.stdout);
        if args[0] == "symbols" {
            assert!(text.contains("prog\\x1b[2J"), "{view}: {text}");
        } else {
            assert!(text.contains(EVIL_SYMBOL_SHOWN), "{view}: {text}");
        }
    }
    // The JSON keeps the real names, escaped by JSON's rules (C1 too: serde_json leaves it raw).
    let out = kprofctl(&["report", perf, "--symbols", symbols, "--format", "json"]);
    assert_no_controls("json", &out.stdout);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["functions"][0]["symbol"], evil.as_str(), "{v}");
}

/// A `--comm` filter naming the hostile thread name finds its samples, and an error quoting a
/// hostile function name shows it escaped.
#[test]
fn report_text_hostile_comm_filter_and_error_escaped() {
    let dir = recorded();
    let perf = dir.join("perf.data");
    let perf = perf.to_str().unwrap();
    let symbols = dir.to_str().unwrap();
    let comm = "\x1b]0;pwn\x07\x1b[2J";
    let out = kprofctl(&["report", perf, "--symbols", symbols, "--comm", comm]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_no_controls("--comm stdout", &out.stdout);
    assert!(String::from_utf8_lossy(&out.stdout).contains(EVIL_SYMBOL_SHOWN));
    let out = kprofctl(&[
        "report",
        perf,
        "--symbols",
        symbols,
        "--callers",
        "\x1b[2Jnope",
    ]);
    assert!(!out.status.success());
    assert_no_controls("error", &out.stderr);
    // Quoted with Rust's `{:?}`, which escapes ESC as `\u{1b}`.
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("\\u{1b}[2Jnope"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

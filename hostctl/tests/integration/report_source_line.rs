//! The source position the report gives a function is where it is declared (its
//! subprogram's `DW_AT_decl_file`/`decl_line`), not the line of its first instruction, which
//! at -O2 can be an inlined callee's.

use crate::report_perf::json;
use std::path::Path;
use std::process::Command;

/// Line number of `marker` in `src`.
fn line_of(src: &Path, marker: &str) -> u32 {
    let text = std::fs::read_to_string(src).unwrap();
    text.lines().position(|l| l.contains(marker)).unwrap() as u32 + 1
}

/// The line binutils' `addr2line` gives the first instruction of `symbol` in `bin`.
fn first_instruction_line(bin: &Path, symbol: &str) -> u32 {
    let nm = Command::new("nm").arg(bin).output().expect("running nm");
    let nm = String::from_utf8_lossy(&nm.stdout);
    let addr = nm
        .lines()
        .find_map(|l| l.strip_suffix(&format!(" T {symbol}")))
        .unwrap_or_else(|| panic!("{symbol} not in nm output:\n{nm}"));
    let out = Command::new("addr2line")
        .arg("-e")
        .arg(bin)
        .arg(format!("0x{addr}"))
        .output()
        .expect("running addr2line");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .rsplit(':')
        .next()
        .and_then(|l| l.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("addr2line: {text}"))
}

/// `scan_ring` (-O2) begins with the inlined `mix`'s code: the report shows the line that
/// declares `scan_ring`, not `mix`'s body, in JSON and text.
#[test]
fn report_json_function_source_is_declaration_line() {
    let dir = tempfile::Builder::new()
        .prefix("kprof-decl-")
        .tempdir()
        .unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/report_data/inlined.c");
    let bin = dir.path().join("inlined");
    kprof_test_support::cc(&["-g", "-O2", "-fno-omit-frame-pointer"], &src, &bin);
    let (decl, body) = (line_of(&src, "SCAN_DECL"), line_of(&src, "MIX_BODY"));
    // The case of the issue: the first instruction is mix's.
    assert_eq!(first_instruction_line(&bin, "scan_ring"), body);
    let out = kprof_test_support::system::perf()
        .current_dir(dir.path())
        .args([
            "record",
            "-e",
            "cpu-clock:u",
            "-c",
            "250000",
            "-o",
            "perf.data",
        ])
        .arg("./inlined")
        .output()
        .expect("running perf (Debian's linux-perf)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let data = dir.path().join("perf.data");
    let v = json(&["report", data.to_str().unwrap(), "--format", "json"]);
    let f = v["functions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["symbol"] == "scan_ring")
        .unwrap_or_else(|| panic!("no scan_ring: {}", v["functions"]));
    assert_eq!(f["source"]["line"], decl, "{f}");
    assert!(
        f["source"]["file"].as_str().unwrap().ends_with("inlined.c"),
        "{f}"
    );
    let out = crate::report_common::kprofctl(&["report", data.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    let row = text
        .lines()
        .find(|l| l.contains(" scan_ring "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains(&format!("inlined.c:{decl}")), "{row}");
}

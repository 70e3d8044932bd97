use super::*;

/// HEADER_TRACING_DATA of `perf record -e sched:sched_process_exec -e cpu-clock -a` (Linux
/// 6.18 x86_64, Debian's perf), the fuzz target's seed.
const REAL: &[u8] = include_bytes!("../../../../fuzz/seeds/tracing_data/perf-sched-exec.bin");

/// tracefs' `events/ftrace/print/format`, as the agent's `--markers` writes it.
const PRINT: &str = "name: print\nID: 5\nformat:\n\
    \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
    \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
    \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
    \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
    \tfield:unsigned long ip;\toffset:8;\tsize:8;\tsigned:0;\n\
    \tfield:char buf[];\toffset:16;\tsize:0;\tsigned:0;\n\n\
    print fmt: \"%ps: %s\", (void *)REC->ip, REC->buf\n";

/// Tracing data of `ftrace` formats and one system, as perf writes it (little-endian).
pub(crate) fn tracing_data(ftrace: &[&str], system: &str, formats: &[&str]) -> Vec<u8> {
    let mut out = b"\x17\x08Dtracing0.6\0\0\x08".to_vec();
    out.extend_from_slice(&4096u32.to_le_bytes());
    for name in ["header_page", "header_event"] {
        out.extend_from_slice(name.as_bytes());
        out.push(0);
        out.extend_from_slice(&2u64.to_le_bytes());
        out.extend_from_slice(b"x\n");
    }
    let sized = |out: &mut Vec<u8>, text: &str| {
        out.extend_from_slice(&(text.len() as u64).to_le_bytes());
        out.extend_from_slice(text.as_bytes());
    };
    out.extend_from_slice(&(ftrace.len() as u32).to_le_bytes());
    for f in ftrace {
        sized(&mut out, f);
    }
    out.extend_from_slice(&1u32.to_le_bytes());
    out.extend_from_slice(system.as_bytes());
    out.push(0);
    out.extend_from_slice(&(formats.len() as u32).to_le_bytes());
    for f in formats {
        sized(&mut out, f);
    }
    out.extend_from_slice(&0u32.to_le_bytes()); // kallsyms
    out.extend_from_slice(&0u32.to_le_bytes()); // printk
    out.extend_from_slice(&0u64.to_le_bytes()); // cmdlines
    out
}

/// A real recording's tracing data: header, an empty ftrace section and
/// sched_process_exec's fields with their shapes.
#[test]
fn parse_tracing_data_real_perf_record_formats() {
    let td = parse(REAL).unwrap();
    assert_eq!(
        (td.version.as_str(), td.big_endian, td.long_size),
        ("0.6", false, 8)
    );
    assert_eq!(td.page_size, 4096);
    assert!(
        td.header_page.contains("field: u64 timestamp"),
        "{}",
        td.header_page
    );
    // perf writes the ftrace section only for recorded ftrace events: none here.
    assert!(td.formats.iter().all(|f| f.system == "sched"), "{td:?}");
    let exec = td.format("sched", "sched_process_exec").unwrap();
    assert_eq!(td.format_by_id(exec.id), Some(exec));
    let names: Vec<_> = exec.fields.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "common_type",
            "common_flags",
            "common_preempt_count",
            "common_pid",
            "filename",
            "pid",
            "old_pid"
        ]
    );
    let filename = exec.field("filename").unwrap();
    assert_eq!(
        (filename.shape, filename.type_text.as_str()),
        (Shape::DataLoc, "char")
    );
    let pid = exec.field("pid").unwrap();
    assert_eq!(
        (pid.offset, pid.size, pid.signed, pid.shape),
        (12, 4, true, Shape::Scalar)
    );
}

/// HEADER_TRACING_DATA of `kprof-agent record --off-cpu --markers -e sched:sched_process_exec`
/// (m-agent's agent, Linux 6.18 x86_64): ftrace's `print` in the ftrace section, `sched`'s
/// two formats.
const AGENT: &[u8] = include_bytes!("../../../../fuzz/seeds/tracing_data/kprof-agent-markers.bin");

/// The agent's tracing data: `ftrace:print` with `ip` and the to-the-end `buf`, found by the
/// id a marks event's attr carries.
#[test]
fn parse_tracing_data_agent_markers_print_format() {
    let td = parse(AGENT).unwrap();
    let print = td.format("ftrace", "print").expect("ftrace:print");
    assert_eq!(td.format_by_id(print.id), Some(print));
    let ip = print.field("ip").unwrap();
    assert_eq!(
        (ip.offset, ip.size, ip.type_text.as_str()),
        (8, 8, "unsigned long")
    );
    let buf = print.field("buf").unwrap();
    assert_eq!(
        (buf.offset, buf.shape, buf.type_text.as_str()),
        (16, Shape::ToEnd, "char")
    );
    assert!(td.format("sched", "sched_switch").is_some());
    assert!(td.format("sched", "sched_process_exec").is_some());
}

/// Every cut of real tracing data is an error naming a section (or the formats before the
/// cut), never a panic.
#[test]
fn parse_tracing_data_truncated_named_error() {
    for real in [REAL, AGENT] {
        let full = parse(real).unwrap();
        for len in 0..real.len() {
            match parse(&real[..len]) {
                Ok(td) => assert!(td.formats.len() <= full.formats.len()),
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
    assert_eq!(parse(b"\x17\x08Dtrac"), Err(TracingDataError::Magic));
    let e = parse(&REAL[..200]).unwrap_err().to_string();
    assert!(
        e.contains("header_page") || e.contains("header_event"),
        "{e}"
    );
}

/// A section size larger than the data is refused, not allocated.
#[test]
fn parse_tracing_data_lying_size_refused() {
    let mut bytes = tracing_data(&[PRINT], "sched", &[]);
    let at = bytes.len() - 4 - 4 - 8 - 4 - 6 - 4 - PRINT.len() - 8;
    bytes[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert_eq!(
        parse(&bytes),
        Err(TracingDataError::Truncated {
            section: "ftrace formats".into()
        })
    );
}

/// An ftrace:print record: `ip` in hex, `buf` to the end of the record up to its NUL.
#[test]
fn decode_print_buf_to_end() {
    let td = parse(&tracing_data(&[PRINT], "sched", &[])).unwrap();
    let print = td.format("ftrace", "print").unwrap();
    let mut raw = vec![5, 0, 0, 0];
    raw.extend_from_slice(&1234i32.to_le_bytes());
    raw.extend_from_slice(&0xffff_ffff_8120_0000u64.to_le_bytes());
    raw.extend_from_slice(b"B|1234|phase_a\n\0\0\0");
    let got: Vec<_> = print
        .decode(&raw, false)
        .into_iter()
        .map(|(f, v)| (f.name.as_str(), v.to_string()))
        .collect();
    assert_eq!(
        got,
        [
            ("common_type", "5".to_string()),
            ("common_flags", "0".into()),
            ("common_preempt_count", "0".into()),
            ("common_pid", "1234".into()),
            ("ip", "0xffffffff81200000".into()),
            ("buf", "B|1234|phase_a\n".into()),
        ]
    );
    // Cut inside `ip`: that field and what follows are missing, nothing panics.
    let cut = print.decode(&raw[..12], false);
    assert_eq!(cut[4].1, FieldValue::Missing);
}

/// Signed integers sign-extend by size, `char[N]` stops at its NUL, other arrays are hex, a
/// `__data_loc` outside the record is missing, big-endian records read big-endian.
#[test]
fn decode_fields_sizes_arrays_endianness() {
    let fmt = parse_format(
        "drv",
        b"name: ev\nID: 9\nformat:\n\
        \tfield:s8 a;\toffset:0;\tsize:1;\tsigned:1;\n\
        \tfield:char comm[4];\toffset:1;\tsize:4;\tsigned:0;\n\
        \tfield:u8 mac[2];\toffset:5;\tsize:2;\tsigned:0;\n\
        \tfield:__data_loc char[] s;\toffset:7;\tsize:4;\tsigned:0;\n\
        \tfield:u16 w;\toffset:11;\tsize:2;\tsigned:0;\n",
    );
    let raw = [
        0xfe, b'a', b'b', 0, b'z', 0xde, 0xad, 13, 0, 2, 0, 0x01, 0x02, b'h', b'i',
    ];
    let text = |raw: &[u8], be: bool| -> Vec<String> {
        fmt.decode(raw, be)
            .iter()
            .map(|(_, v)| v.to_string())
            .collect()
    };
    assert_eq!(text(&raw, false), ["-2", "ab", "dead", "hi", "513"]);
    assert_eq!(text(&raw, true)[4], "258");
    let mut bad = raw;
    bad[7] = 200;
    assert_eq!(text(&bad, false)[3], "?");
}

/// Fuzzer find (issue 36's 600 s runs): a field declaration whose last white space is a
/// multi-byte character (U+3000) was sliced inside it; it splits at the character now.
#[test]
fn parse_field_multibyte_whitespace_no_panic() {
    let f = parse_field("field:int\u{3000}pid;\toffset:4;\tsize:4;\tsigned:1;").unwrap();
    assert_eq!((f.type_text.as_str(), f.name.as_str()), ("int", "pid"));
    assert_eq!((f.offset, f.size, f.signed), (4, 4, true));
}

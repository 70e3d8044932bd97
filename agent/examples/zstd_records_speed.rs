//! The CPU the agent's zstd records cost on a real perf.data: feeds the data records of a
//! (plain) perf.data through `zstd_records::Encoder` as the agent does, a flush per round of
//! ROUND_BYTES, and prints the ratio and the CPU time (getrusage, so other load on the machine
//! counts less than in wall time). Used for the figures in docs/performance.md:
//!
//!   RUSTFLAGS="-C target-feature=+crt-static" cargo build --profile agent -p kprof-agent \
//!     --example zstd_records_speed --target x86_64-unknown-linux-gnu
//!   target/x86_64-unknown-linux-gnu/agent/examples/zstd_records_speed PERF_DATA [LEVEL] [ROUND_BYTES]

use std::process::ExitCode;

use kprof_agent::zstd_records::Encoder;

/// User + system CPU seconds of this process.
fn cpu_seconds() -> f64 {
    // SAFETY: rusage is plain old data; getrusage fills it and cannot fail for RUSAGE_SELF.
    let r = unsafe {
        let mut r: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut r);
        r
    };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(r.ru_utime) + secs(r.ru_stime)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(path) = args.get(1) else {
        eprintln!("usage: zstd_records_speed PERF_DATA [LEVEL] [ROUND_BYTES]");
        return ExitCode::from(2);
    };
    let level: i32 = args.get(2).and_then(|v| v.parse().ok()).unwrap_or(1);
    let round: usize = args.get(3).and_then(|v| v.parse().ok()).unwrap_or(1 << 20);
    let d = match std::fs::read(path) {
        Ok(d) if d.len() >= 104 && &d[..8] == b"PERFILE2" => d,
        Ok(_) => {
            eprintln!("{path}: not a native-endian perf.data");
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let word = |at: usize| u64::from_ne_bytes(d[at..at + 8].try_into().unwrap()) as usize;
    let (off, size) = (word(40), word(48));
    let Some(data) = d.get(off..off + size) else {
        eprintln!("{path}: data section past the end of the file");
        return ExitCode::FAILURE;
    };
    let mut enc = match Encoder::new(level) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("level {level}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut out: Vec<u8> = Vec::with_capacity(size / 2);
    let (mut at, mut since, mut records) = (0, 0, 0u64);
    let start = cpu_seconds();
    while at + 8 <= data.len() {
        let len = u16::from_ne_bytes([data[at + 6], data[at + 7]]) as usize;
        if len < 8 || at + len > data.len() {
            eprintln!("{path}: bad record header at data offset {at}");
            return ExitCode::FAILURE;
        }
        enc.push(&data[at..at + len], &mut out)
            .expect("writing to memory");
        at += len;
        since += len;
        records += 1;
        if since >= round {
            enc.flush(&mut out).expect("writing to memory");
            since = 0;
        }
    }
    enc.flush(&mut out).expect("writing to memory");
    let cpu = cpu_seconds() - start;
    println!(
        "level {level}, rounds of {round} bytes: {size} -> {} bytes ({:.2}x), {cpu:.3} s CPU, {:.0} MB/s, {:.2} us per record ({records} records)",
        out.len(),
        size as f64 / out.len() as f64,
        size as f64 / cpu / 1e6,
        cpu * 1e6 / records as f64
    );
    ExitCode::SUCCESS
}

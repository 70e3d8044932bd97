//! Test-only helpers shared by kprof's crates (a dev-dependency only, never in a shipped build).
//!
//! Standard library only without features: the agent's dev-dependency closure stays what
//! Yocto's `kprof-agent-crates.inc` lists. Feature `report` adds the module `report` (real captures
//! symbolized by kprof-symbols, headless Chromium), for the host crates' tests; feature `board`
//! the module `board` (the QEMU board of kprofctl's board tests); feature `sshd` the module
//! `sshd` (a real OpenSSH server on 127.0.0.1: a board or a jump host); feature `labgrid` the
//! module `labgrid` (a real labgrid coordinator and exporters on 127.0.0.1).
#![warn(missing_docs)]

#[cfg(feature = "board")]
pub mod board;
#[cfg(feature = "debuginfod")]
pub mod debuginfod;
#[cfg(feature = "labgrid")]
pub mod labgrid;
pub mod proxy;
#[cfg(feature = "report")]
pub mod report;
#[cfg(feature = "sshd")]
pub mod sshd;
pub mod system;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A port the kernel just handed out and released.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `kprofctl` (the test's `env!("CARGO_BIN_EXE_kprofctl")`) run in `work` with `home` as HOME,
/// and nothing of the caller's environment or configuration that changes what it does
/// ([`system::isolate`]: no `kprof.toml` found by search, no `KPROF_*`, ssh-agent,
/// `BUILDDIR`, `DEBUGINFOD_*`); stdin is not a terminal. A test that deploys a given agent
/// says so with `--agent` or sets `KPROF_AGENT`.
///
/// The one builder of the integration tests' `Client` and the board tests' `Board`.
pub fn kprofctl(bin: &Path, home: &Path, work: &Path) -> Command {
    let mut cmd = Command::new(bin);
    system::isolate(&mut cmd, home)
        .current_dir(work)
        .stdin(Stdio::null());
    cmd
}

/// `kprofctl` for a test that needs no particular home: [`system::isolate`]d with `HOME` at
/// [`system::NO_HOME`], which does not exist, so nothing of `~` is read and anything kprofctl
/// would write there fails loudly; the test sets `KPROF_CACHE_DIR` (or `HOME`) when it wants a
/// cache.
pub fn kprofctl_command(bin: &Path) -> Command {
    let mut cmd = Command::new(bin);
    system::isolate(&mut cmd, Path::new(system::NO_HOME));
    cmd
}

/// Runs `cmd` (kprofctl, as a rule) and returns (success, stdout, stderr).
pub fn outcome(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().expect("spawn kprofctl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The GNU build-id of an ELF file as binutils' `readelf -n` prints it (lowercase hex); panics
/// naming the file when it has none or readelf cannot run. The tests' one independent reading
/// of build-ids, to compare kprof's with.
pub fn readelf_build_id(elf: &Path) -> String {
    let out = Command::new("readelf")
        .arg("-n")
        .arg(elf)
        .output()
        .unwrap_or_else(|e| panic!("readelf (binutils): {e}"));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: ").map(str::to_owned))
        .unwrap_or_else(|| panic!("{} has no build-id", elf.display()))
}

/// The C compiler of the tests' workloads.
pub const CC: &str = "gcc";

/// `gcc FLAGS -o OUT SRC`, which must succeed; returns `out`.
///
/// Panics with the compiler's stderr when it fails, and with how to install it when it is not
/// there.
pub fn cc(flags: &[&str], src: &Path, out: &Path) -> PathBuf {
    run_cc(None, flags, src, out)
}

/// [`cc`] run in `dir`, with `src` and `out` relative to it: the DWARF names the source as
/// given (`prog.c`, not a temporary directory's absolute path). Returns `dir/out`.
pub fn cc_in(dir: &Path, flags: &[&str], src: &str, out: &str) -> PathBuf {
    run_cc(Some(dir), flags, Path::new(src), Path::new(out))
}

fn run_cc(dir: Option<&Path>, flags: &[&str], src: &Path, out: &Path) -> PathBuf {
    let mut command = Command::new(CC);
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let output = command
        .args(flags)
        .arg("-o")
        .arg(out)
        .arg(src)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "cannot run {CC} ({e}): the tests build C workloads; \
                 install it (apt-get install build-essential)"
            )
        });
    assert!(
        output.status.success(),
        "{CC} {} -o {} {} failed: {}",
        flags.join(" "),
        out.display(),
        src.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    match dir {
        Some(dir) => dir.join(out),
        None => out.to_path_buf(),
    }
}

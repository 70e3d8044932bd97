//! The machine state tests need, set up by the tests themselves and put back afterwards, so
//! that a test passes on a fresh machine and leaves nothing a later run could lean on
//! (issue 34): tracefs mounted, throwaway users, a directory a fake board may install
//! programs in, and commands (kprofctl, perf) that see none of the user's own configuration.
//!
//! `ci/fresh-state` puts a machine back into the state these helpers expect to start from;
//! docs/testing.md lists what each test needs and which helper provides it.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where tracefs is mounted on kernels since 4.1; empty on a fresh machine until something
/// mounts it (systemd does at boot, a bare container or VM does not).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// A tracefs directory for the test's own reads and writes (`trace_clock`, `trace_marker`).
///
/// When [`TRACEFS`] already holds tracefs it is used as it is. Otherwise tracefs is mounted
/// at a private directory of this guard's and unmounted when it drops: every mount of tracefs
/// shows the same kernel state, so the test sees and changes exactly what the agent does,
/// and the machine's mount table is left as the test found it. (The agent mounts tracefs at
/// [`TRACEFS`] by itself when that is empty, as perf does; that is the product's behaviour
/// under test, not the test's setup.)
#[derive(Debug)]
pub struct Tracefs {
    dir: PathBuf,
    private_mount: bool,
}

impl Tracefs {
    /// The machine's tracefs, or a private mount of it; panics naming the kernel option when
    /// the kernel has none.
    pub fn open() -> Tracefs {
        let standard = Path::new(TRACEFS);
        if standard.join("trace_clock").exists() {
            return Tracefs {
                dir: standard.to_path_buf(),
                private_mount: false,
            };
        }
        let dir = std::env::temp_dir().join(format!(
            "kprof-test-tracefs-{}-{}",
            std::process::id(),
            unique()
        ));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let out = Command::new("mount")
            .args(["-t", "tracefs", "nodev"])
            .arg(&dir)
            .output()
            .expect("mount (util-linux)");
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            panic!(
                "cannot mount tracefs at {} ({}): the test needs root and a kernel with \
                 CONFIG_FTRACE",
                dir.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Tracefs {
            dir,
            private_mount: true,
        }
    }

    /// The directory holding `trace_clock`, `trace_marker`, `events/`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `DIR/name`.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The whole of `name`; panics naming it when it cannot be read.
    pub fn read(&self, name: &str) -> String {
        let p = self.path(name);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    /// Writes `value` to `name`; panics naming it when the kernel refuses.
    pub fn write(&self, name: &str, value: &str) {
        let p = self.path(name);
        std::fs::write(&p, value).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    }

    /// The clock selected in `trace_clock` (the one in brackets).
    pub fn selected_clock(&self) -> String {
        let c = self.read("trace_clock");
        let start = c.find('[').map(|i| i + 1).unwrap_or(0);
        let end = c[start..].find(']').map(|i| start + i).unwrap_or(c.len());
        c[start..end].to_string()
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.private_mount {
            // Lazy: a reader the test left open (a child still running) does not keep the
            // mount alive in the table.
            let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
            let _ = std::fs::remove_dir(&self.dir);
        }
    }
}

/// A local user that exists for one test: created (no home, `/bin/sh`) if it is not there,
/// deleted on drop, even when the test panics.
#[derive(Debug)]
pub struct TestUser {
    name: String,
}

impl TestUser {
    /// Creates `name` unless it exists. Names are the tests' own (`kprof…test`), so one left
    /// by a killed run is taken over and deleted at the end like a new one.
    pub fn create(name: &str) -> TestUser {
        let exists = Command::new("id")
            .arg(name)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("id (coreutils)")
            .success();
        if !exists {
            run(Command::new("useradd").args(["-M", "-d", "/nonexistent", "-s", "/bin/sh", name]));
        }
        TestUser {
            name: name.to_string(),
        }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Sets its password (`chpasswd`).
    pub fn set_password(&self, password: &str) {
        use std::io::Write as _;
        let mut chpasswd = Command::new("chpasswd")
            .stdin(Stdio::piped())
            .spawn()
            .expect("chpasswd (passwd)");
        chpasswd
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{}:{password}\n", self.name).as_bytes())
            .unwrap();
        assert!(chpasswd.wait().unwrap().success(), "chpasswd {}", self.name);
    }

    /// Makes its password empty (`passwd -d`).
    pub fn clear_password(&self) {
        run(Command::new("passwd").args(["-d", &self.name]));
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = Command::new("userdel")
            .arg(&self.name)
            .stderr(Stdio::null())
            .status();
    }
}

/// Where fake boards (a local sshd standing in for a board) keep their files and the agent
/// the tests deploy: `/run/kprof-tests`, whose whole path belongs to root and no one else can
/// write. kprofctl rightly refuses to install or run the agent below a directory others can
/// write (`/tmp`, where a checkout, and so cargo's target dir, often lives), so the fake
/// boards cannot live in the target dir. Made on first use; its entries are the tests'
/// temporary directories, removed when they drop.
pub fn board_scratch_dir() -> PathBuf {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let dir = PathBuf::from("/run/kprof-tests");
    match std::fs::DirBuilder::new().mode(0o755).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => panic!(
            "cannot make {} ({e}): the remote tests run as root",
            dir.display()
        ),
    }
    let meta = std::fs::symlink_metadata(&dir).unwrap();
    assert!(
        meta.is_dir() && meta.uid() == 0 && meta.mode() & 0o022 == 0,
        "{} must be a directory owned by root that others cannot write (mode {:o}, uid {})",
        dir.display(),
        meta.mode(),
        meta.uid()
    );
    dir
}

/// Environment variables through which a user's own setup reaches kprofctl or perf: none of
/// them may change what a test sees. `KPROF_*` and `DEBUGINFOD_*` as a whole are removed too.
const USER_SETUP_VARS: &[&str] = &[
    "BUILDDIR",
    "SSH_AUTH_SOCK",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "PERF_BUILDID_DIR",
    "PERF_EXEC_PATH",
    "PERF_PAGER",
    "PAGER",
];

/// A `HOME` that does not exist, for commands that must read nothing of a user's home.
pub const NO_HOME: &str = "/nonexistent/kprof-test-home";

/// Clears from `cmd`'s environment everything of the user's that changes what kprofctl
/// does: `kprof.toml` (searched from the working directory up: `KPROF_CONFIG=/dev/null`, as
/// git's `GIT_CONFIG_GLOBAL=/dev/null`), `KPROF_*`, `DEBUGINFOD_*`, `BUILDDIR`, the ssh-agent,
/// the XDG directories; and sets `HOME` to `home`, so `~/.ssh`, `~/.cache/kprof` and
/// `~/.debug` are the test's. Call it first: a test that wants one of these sets it after
/// this call, which would remove it otherwise.
pub fn isolate<'a>(cmd: &'a mut Command, home: &Path) -> &'a mut Command {
    for (key, _) in std::env::vars_os() {
        let Some(k) = key.to_str() else { continue };
        let user_setup =
            USER_SETUP_VARS.contains(&k) || k.starts_with("DEBUGINFOD_") || k.starts_with("KPROF_");
        if user_setup {
            cmd.env_remove(k);
        }
    }
    cmd.env("HOME", home)
        .env("KPROF_CONFIG", "/dev/null")
        .env("LC_ALL", "C")
}

/// Linux `perf` (Debian's linux-perf) without the user's configuration: no `~/.perfconfig`
/// or `/etc/perfconfig` (`PERF_CONFIG=/dev/null`, which perf documents for this), no pager,
/// the C locale (perf prints numbers per `LC_NUMERIC`).
pub fn perf() -> Command {
    let mut cmd = Command::new("perf");
    cmd.env("PERF_CONFIG", "/dev/null")
        .env("PERF_PAGER", "cat")
        .env("LC_ALL", "C")
        .env_remove("PERF_EXEC_PATH")
        .env_remove("PERF_BUILDID_DIR");
    cmd
}

/// A number no other call in this process returned.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn run(cmd: &mut Command) {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

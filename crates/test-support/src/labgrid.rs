//! A real labgrid lab on 127.0.0.1 (feature `labgrid`): a `labgrid-coordinator` and
//! `labgrid-exporter`s (PyPI's, pinned in ci/pip-packages.txt) that export boards' ssh as
//! places' `NetworkService`, for kprofctl's `lg:PLACE` tests (the integration tests with a
//! local sshd as the board, the board tests with the QEMU boards).

use crate::free_port;
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The labgrid user kprofctl and the test's own labgrid-client act as, unless told otherwise.
pub const USER: &str = "kprof-test";

/// A labgrid coordinator and its exporters; killed on drop.
#[derive(Debug)]
pub struct Lab {
    /// The coordinator's working directory (places.yaml), the exporters' configs, the logs.
    pub dir: tempfile::TempDir,
    /// `127.0.0.1:PORT` of the coordinator.
    pub coordinator: String,
    /// The directory of labgrid's commands.
    pub bin: PathBuf,
    children: Vec<Child>,
}

/// labgrid's `tool` on PATH.
fn on_path(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
}

/// The directory of labgrid's commands; `None` (said on stderr) when labgrid is missing outside
/// CI (a panic in CI, where `ci/setup` installs it).
pub fn labgrid_bin() -> Option<PathBuf> {
    let Some(coordinator) = on_path("labgrid-coordinator") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "labgrid is not installed (labgrid-coordinator not on PATH): ci/setup installs \
             it from ci/pip-packages.txt"
        );
        eprintln!("skipped: labgrid is not installed (python3 -m pip install labgrid)");
        return None;
    };
    Some(coordinator.parent().unwrap().to_path_buf())
}

impl Lab {
    /// Starts a coordinator on a free port; `None` (said on stderr) when labgrid is missing
    /// outside CI.
    pub fn start() -> Option<Lab> {
        let bin = labgrid_bin()?;
        let coordinator = bin.join("labgrid-coordinator");
        let dir = tempfile::tempdir().unwrap();
        for _ in 0..5 {
            let port = free_port();
            let address = format!("127.0.0.1:{port}");
            // The coordinator keeps places.yaml in its working directory.
            let mut child = Command::new(&coordinator)
                .args(["-l", &address])
                .current_dir(dir.path())
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.path().join("coordinator.log")).unwrap())
                .spawn()
                .expect("start labgrid-coordinator");
            if wait_until(
                || TcpStream::connect(("127.0.0.1", port)).is_ok(),
                &mut child,
            ) {
                return Some(Lab {
                    dir,
                    coordinator: address,
                    bin,
                    children: vec![child],
                });
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!(
            "labgrid-coordinator did not start: {}",
            read_log(dir.path(), "coordinator.log")
        );
    }

    /// Starts exporter `name` with `yaml` (`--isolated` if asked) and waits until the
    /// coordinator lists `first_resource` (`GROUP/CLASS`).
    pub fn export(&mut self, name: &str, yaml: &str, isolated: bool, first_resource: &str) {
        let config = self.dir.path().join(format!("{name}.yaml"));
        std::fs::write(&config, yaml).unwrap();
        let mut cmd = Command::new(self.bin.join("labgrid-exporter"));
        cmd.args(["-c", &self.coordinator, "--name", name]);
        if isolated {
            cmd.arg("--isolated");
        }
        let mut child = cmd
            .arg(&config)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.dir.path().join(format!("{name}.log"))).unwrap())
            .spawn()
            .expect("start labgrid-exporter");
        let wanted = format!("{name}/{first_resource}");
        let listed = wait_until(
            || {
                let out = self.client(USER).arg("resources").output().unwrap();
                String::from_utf8_lossy(&out.stdout).contains(&wanted)
            },
            &mut child,
        );
        self.children.push(child);
        assert!(
            listed,
            "exporter {name} did not export {wanted}: {}",
            self.log(&format!("{name}.log"))
        );
    }

    /// `labgrid-client -x COORDINATOR` as labgrid user `user`.
    pub fn client(&self, user: &str) -> Command {
        let mut cmd = Command::new(self.bin.join("labgrid-client"));
        cmd.args(["-x", &self.coordinator])
            .env("LG_USERNAME", user)
            .env_remove("LG_ENV")
            .env_remove("LG_PLACE")
            .stdin(Stdio::null());
        cmd
    }

    /// `labgrid-client -p PLACE ARGS` as `user`, which must succeed.
    pub fn place_cmd(&self, user: &str, place: &str, args: &[&str]) {
        let out = self
            .client(user)
            .args(["-p", place])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "labgrid-client -p {place} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A new place matching `resource` (`EXPORTER/GROUP/CLASS`).
    pub fn place(&self, place: &str, resource: &str) {
        self.place_cmd(USER, place, &["create"]);
        self.place_cmd(USER, place, &["add-match", resource]);
    }

    /// `labgrid-client -p PLACE show`.
    pub fn show(&self, place: &str) -> String {
        let out = self
            .client(USER)
            .args(["-p", place, "show"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Who holds `place` (`HOST/USER`), per `labgrid-client show`.
    pub fn holder(&self, place: &str) -> Option<String> {
        let text = self.show(place);
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("  acquired: "))
            .unwrap_or_else(|| panic!("no `acquired:` in show's output: {text}"));
        (line != "None").then(|| line.to_owned())
    }

    /// The proxy host an isolated exporter publishes for `place`'s resources (its host's
    /// FQDN), which kprofctl reaches as the last jump host.
    pub fn proxy(&self, place: &str) -> String {
        let show = self.show(place);
        show.split_once("'proxy': '")
            .and_then(|(_, rest)| rest.split_once('\''))
            .unwrap_or_else(|| panic!("no proxy in {show}"))
            .0
            .to_owned()
    }

    /// `cmd` (kprofctl) pointed at this lab: `-x COORDINATOR` appended, labgrid user [`USER`],
    /// and labgrid's directory first on PATH.
    pub fn kprofctl(&self, mut cmd: Command) -> Command {
        cmd.args(["-x", &self.coordinator])
            .env("LG_USERNAME", USER)
            .env("PATH", path_with(&self.bin));
        cmd
    }

    /// The log file `name` in the lab's directory (`coordinator.log`, `EXPORTER.log`).
    pub fn log(&self, name: &str) -> String {
        read_log(self.dir.path(), name)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        // Exporters first: a coordinator gone first leaves them retrying.
        for child in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn read_log(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_default()
}

/// PATH with labgrid's directory first, so kprofctl finds the same labgrid-client.
pub fn path_with(bin: &Path) -> std::ffi::OsString {
    let rest = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![bin.to_path_buf()];
    dirs.extend(std::env::split_paths(&rest));
    std::env::join_paths(dirs).unwrap()
}

/// Polls `ready` for up to a minute (python starts slowly on a loaded machine); false when
/// `child` exited or time ran out.
pub fn wait_until(mut ready: impl FnMut() -> bool, child: &mut Child) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        if ready() {
            return true;
        }
        if child.try_wait().unwrap().is_some() {
            return false;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    false
}

/// An exporter config with 127.0.0.1:`port` as `board/NetworkService`, user root.
pub fn network_service_at(port: u16) -> String {
    format!(
        "board:\n  NetworkService:\n    address: 127.0.0.1\n    port: {port}\n    username: root\n"
    )
}

//! Running labgrid's own `labgrid-client` (never its gRPC protocol by hand): found on `PATH`
//! or at `$KPROF_LABGRID_CLIENT`, the coordinator from `-x` or, as labgrid-client takes it,
//! `$LG_COORDINATOR`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The variable naming a `labgrid-client` other than the one on `PATH`.
pub const CLIENT_VAR: &str = "KPROF_LABGRID_CLIENT";

/// How long one labgrid-client call may take: it answers in about a second, but waits without
/// end for a coordinator whose address swallows packets (a lab network behind a VPN that is
/// down).
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// labgrid-client's coordinator when neither `-x` nor `$LG_COORDINATOR` names one.
const DEFAULT_COORDINATOR: &str = "127.0.0.1:20408";

/// A `labgrid-client` and the coordinator it talks to.
#[derive(Debug, Clone)]
pub struct Client {
    program: PathBuf,
    /// `-x` as given to kprofctl; `None` leaves `$LG_COORDINATOR` to labgrid-client.
    coordinator: Option<String>,
}

/// What one labgrid-client call printed and whether it succeeded.
#[derive(Debug)]
pub struct Reply {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Reply {
    /// labgrid-client's messages on one line (it prints an error and hints on several),
    /// without its `labgrid-client: ` prefix: kprofctl's message names it.
    pub fn message(&self) -> String {
        let text: Vec<&str> = self
            .stderr
            .lines()
            .map(|l| {
                let l = l.trim();
                l.strip_prefix("labgrid-client: ").unwrap_or(l)
            })
            .filter(|l| !l.is_empty())
            .collect();
        if text.is_empty() {
            "no message".to_owned()
        } else {
            text.join("; ")
        }
    }
}

impl Client {
    /// Finds labgrid-client; the error says how to install it or point kprofctl at it.
    pub fn find(coordinator: Option<&str>) -> anyhow::Result<Client> {
        let program = match std::env::var_os(CLIENT_VAR) {
            Some(p) if !p.is_empty() => {
                let p = PathBuf::from(p);
                if !p.is_file() {
                    anyhow::bail!(
                        "${CLIENT_VAR} is {}, which is not a file: point it at labgrid-client",
                        p.display()
                    );
                }
                p
            }
            _ => on_path("labgrid-client").ok_or_else(|| {
                anyhow::anyhow!(
                    "labgrid-client is not on PATH: lg:PLACE targets need labgrid's client \
                     (`python3 -m pip install labgrid==26.0.1`, see docs/labgrid.md) or \
                     ${CLIENT_VAR} set to its path"
                )
            })?,
        };
        Ok(Client {
            program,
            coordinator: coordinator.map(str::to_owned),
        })
    }

    /// Which coordinator and where that came from, for messages.
    pub fn coordinator(&self) -> String {
        match (&self.coordinator, std::env::var("LG_COORDINATOR")) {
            (Some(c), _) => format!("coordinator {c} (-x)"),
            (None, Ok(c)) if !c.is_empty() => format!("coordinator {c} ($LG_COORDINATOR)"),
            _ => format!(
                "coordinator {DEFAULT_COORDINATOR} (labgrid-client's default: set \
                 $LG_COORDINATOR or -x HOST:PORT)"
            ),
        }
    }

    /// `labgrid-client [-x COORDINATOR] -p PLACE ARGS...`.
    pub fn run(&self, place: &str, args: &[&str]) -> anyhow::Result<Reply> {
        let mut cmd = Command::new(&self.program);
        if let Some(c) = &self.coordinator {
            cmd.args(["-x", c]);
        }
        // An environment config (LG_ENV) would make `acquire` take its places instead of -p,
        // and LG_PLACE is only a default: the place is the one kprofctl was given.
        cmd.args(["-p", place])
            .args(args)
            .env_remove("LG_ENV")
            .env_remove("LG_PLACE")
            .env_remove("PLACE")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd
            .spawn()
            .map_err(|e| anyhow::anyhow!("cannot run {}: {e}", self.program.display()))?;
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let ok = match wait(&mut child)? {
            Some(ok) => ok,
            None => anyhow::bail!(
                "`{}` did not answer within {} s: is the {} reachable?",
                self.command_line(place, args),
                CALL_TIMEOUT.as_secs(),
                self.coordinator()
            ),
        };
        Ok(Reply {
            ok,
            stdout: stdout.join().unwrap_or_default(),
            stderr: stderr.join().unwrap_or_default(),
        })
    }

    /// The command line of `run(place, args)`, for messages.
    pub fn command_line(&self, place: &str, args: &[&str]) -> String {
        let mut words = vec![self.program.display().to_string()];
        if let Some(c) = &self.coordinator {
            words.extend(["-x".to_owned(), c.clone()]);
        }
        words.extend(["-p".to_owned(), place.to_owned()]);
        words.extend(args.iter().map(|a| (*a).to_owned()));
        words.join(" ")
    }
}

/// Whether the child succeeded, or `None` (killed) after [`CALL_TIMEOUT`].
fn wait(child: &mut Child) -> anyhow::Result<Option<bool>> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status.success()));
        }
        if start.elapsed() > CALL_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads a pipe to its end on a thread, so that a chatty child never blocks on a full pipe.
fn drain(pipe: Option<impl std::io::Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// `name` in a directory of `$PATH`, as a shell finds a command.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

//! What kprofctl asks a board over ssh, in plain POSIX shell that busybox runs: where the agent
//! is, its version, the kernel's build-id, the captures on the board.

use super::session::Remote;
use super::shell::quote;

/// Where `deploy` installs the agent.
pub const AGENT_PATH: &str = "/usr/bin/kprof-agent";
/// Where `deploy` puts the agent when the root file system is read-only.
pub const AGENT_FALLBACK_PATH: &str = "/tmp/kprof-agent";
pub use kprof_capture::CAPTURE_DIR;

/// Finds an executable agent: the remembered path, the install paths, then `$PATH`.
pub fn find_agent(remote: &Remote, remembered: Option<&str>) -> anyhow::Result<Option<String>> {
    let mut candidates: Vec<String> = remembered.map(quote).into_iter().collect();
    candidates.push(AGENT_PATH.into());
    candidates.push("\"$(command -v kprof-agent 2>/dev/null)\"".into());
    candidates.push(AGENT_FALLBACK_PATH.into());
    let script = format!(
        "for a in {}; do if [ -n \"$a\" ] && [ -f \"$a\" ] && [ -x \"$a\" ]; then echo \"$a\"; exit 0; fi; done; exit 1",
        candidates.join(" ")
    );
    let out = remote.exec(&script)?;
    Ok((out.status == 0)
        .then(|| out.stdout_str())
        .filter(|s| !s.is_empty()))
}

/// The error for a board without the agent.
pub fn no_agent_error(remote: &Remote) -> anyhow::Error {
    anyhow::anyhow!(
        "{}: kprof-agent is not installed on the board (looked in {AGENT_PATH}, $PATH and \
         {AGENT_FALLBACK_PATH}): run `kprofctl deploy {}` first",
        remote.target,
        remote.target.spec
    )
}

/// `kprof-agent --version`, trimmed.
pub fn agent_version(remote: &Remote, agent: &str) -> anyhow::Result<String> {
    remote.exec_ok(
        &format!("{} --version 2>&1", quote(agent)),
        &format!("`{agent} --version`"),
    )
}

/// `uname -m`.
pub fn machine(remote: &Remote) -> anyhow::Result<String> {
    remote.exec_ok("uname -m", "`uname -m`")
}

/// Facts the run preflight prints and checks.
#[derive(Debug, Default)]
pub struct Facts {
    pub uid: Option<u32>,
    pub kernel_release: String,
    pub perf_event_paranoid: Option<i32>,
    /// Directories under /sys/bus/event_source/devices (`cpu`, `armv8_pmuv3_0`, `software`...).
    pub pmus: Vec<String>,
    /// Raw `/sys/kernel/notes`.
    pub kernel_notes: Vec<u8>,
}

impl Facts {
    /// Whether a hardware PMU is there (x86 `cpu`, Arm `armv*`/`arm_*`, RISC-V `cpu`).
    pub fn has_hw_pmu(&self) -> bool {
        self.pmus.iter().any(|p| {
            p == "cpu" || p.starts_with("cpu_") || p.starts_with("armv") || p.starts_with("arm_")
        })
    }

    pub fn kernel_build_id(&self) -> Option<String> {
        kprof_capture::build_id::in_notes_either_endian(&self.kernel_notes)
            .map(kprof_capture::build_id::hex)
    }
}

/// One round trip for the small facts, one for the binary notes file.
pub fn facts(remote: &Remote) -> anyhow::Result<Facts> {
    let out = remote.exec(
        "echo \"uid=$(id -u 2>/dev/null)\"; echo \"release=$(uname -r)\"; \
         echo \"paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)\"; \
         echo \"pmus=$(ls /sys/bus/event_source/devices 2>/dev/null | tr '\\n' ' ')\"",
    )?;
    let mut facts = Facts::default();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim();
        match k {
            "uid" => facts.uid = v.parse().ok(),
            "release" => facts.kernel_release = v.to_owned(),
            "paranoid" => facts.perf_event_paranoid = v.parse().ok(),
            "pmus" => facts.pmus = v.split_whitespace().map(str::to_owned).collect(),
            _ => {}
        }
    }
    let notes = remote.exec("cat /sys/kernel/notes")?;
    if notes.status == 0 {
        facts.kernel_notes = notes.stdout;
    }
    Ok(facts)
}

/// A finished capture archive on the board.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteCapture {
    /// Archive name without [`kprof_capture::ARCHIVE_SUFFIX`].
    pub id: String,
    pub path: String,
    pub size: u64,
}

/// Lists `*.kprof.tar.gz` in the given directories (the agent renames an archive into place
/// only when it is complete, so every listed file is whole).
pub fn list_captures(remote: &Remote, dirs: &[String]) -> anyhow::Result<Vec<RemoteCapture>> {
    let suffix = kprof_capture::ARCHIVE_SUFFIX;
    let dirs: Vec<String> = dirs.iter().map(|d| quote(d)).collect();
    let script = format!(
        "for d in {}; do for f in \"$d\"/*{suffix}; do [ -f \"$f\" ] || continue; \
         s=$(stat -c %s \"$f\" 2>/dev/null || wc -c < \"$f\"); echo \"$s $f\"; done; done",
        dirs.join(" ")
    );
    let out = remote.exec(&script)?;
    let mut captures = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some((size, path)) = line.trim().split_once(' ') else {
            continue;
        };
        let Ok(size) = size.trim().parse::<u64>() else {
            continue;
        };
        let name = path.rsplit('/').next().unwrap_or(path);
        let Some(id) = name.strip_suffix(suffix) else {
            continue;
        };
        if captures.iter().any(|c: &RemoteCapture| c.path == path) {
            continue;
        }
        captures.push(RemoteCapture {
            id: id.to_owned(),
            path: path.to_owned(),
            size,
        });
    }
    captures.sort_by(|a, b| a.id.cmp(&b.id));
    Ok(captures)
}

/// `sha256sum` of a board file, or `None` when the board has no sha256sum.
pub fn sha256(remote: &Remote, path: &str) -> anyhow::Result<Option<String>> {
    let out = remote.exec(&format!(
        "command -v sha256sum >/dev/null 2>&1 || exit 127; sha256sum {}",
        quote(path)
    ))?;
    match out.status {
        0 => Ok(out
            .stdout_str()
            .split_whitespace()
            .next()
            .filter(|h| h.len() == 64)
            .map(str::to_ascii_lowercase)),
        127 => Ok(None),
        _ => anyhow::bail!(
            "{}: sha256sum {path} failed: {}",
            remote.target,
            out.stderr_str()
        ),
    }
}

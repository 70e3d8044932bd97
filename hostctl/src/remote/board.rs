//! What kprofctl asks a board over ssh, in plain POSIX shell that busybox runs: where the agent
//! is, its version, what `kprof-agent info` says of the board, the captures on the board.

use kprof_capture::info::{BoardInfo, INFO_SCHEMA};

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

/// `kprof-agent info` of the board's agent: the one source of the facts the run preflight
/// prints and checks (agent version, uid, kernel release and build-id, `perf_event_paranoid`,
/// PMUs, which generic events open), in one round trip.
pub fn info(remote: &Remote, agent: &str) -> anyhow::Result<BoardInfo> {
    let what = format!("`{agent} info`");
    let json = remote.exec_ok(&format!("{} info", quote(agent)), &what)?;
    let info: BoardInfo = serde_json::from_str(&json)
        .ok()
        .filter(|i: &BoardInfo| i.schema == INFO_SCHEMA)
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: {what} printed no board information this kprofctl reads (an agent of \
                 another version?): `kprofctl deploy {}` installs the matching one",
                remote.target,
                remote.target.spec
            )
        })?;
    Ok(info)
}

/// Whether a hardware PMU is there (x86 `cpu`, Arm `armv*`/`arm_*`, RISC-V `cpu`).
pub fn has_hw_pmu(info: &BoardInfo) -> bool {
    info.pmus.keys().any(|p| {
        p == "cpu" || p.starts_with("cpu_") || p.starts_with("armv") || p.starts_with("arm_")
    })
}

/// A finished capture archive on the board.
pub use kprof_capture::listing::Listed as RemoteCapture;

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
    Ok(kprof_capture::listing::parse(&out.stdout))
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

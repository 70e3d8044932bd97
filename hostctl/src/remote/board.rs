//! What kprofctl asks a board over ssh, in plain POSIX shell that busybox runs: where the agent
//! is, its version, what `kprof-agent info` says of the board, the captures on the board.

use kprof_capture::info::{BoardInfo, INFO_SCHEMA};

use super::guard;
use super::session::Remote;
use super::shell::quote;

/// Where `deploy` installs the agent.
pub const AGENT_PATH: &str = "/usr/bin/kprof-agent";
/// Where `deploy` puts the agent when the root file system is read-only: `/run` is a tmpfs
/// that only root can write on read-only images (Yocto `read-only-rootfs`, systemd, busybox
/// init), and [`AGENT_FALLBACK_DIR`] is made 0700 there, so no other local user can plant or
/// replace the file root executes (the old fallback, `/tmp/kprof-agent`, let anyone do so).
pub const AGENT_FALLBACK_PATH: &str = "/run/kprof/kprof-agent";
/// The directory of [`AGENT_FALLBACK_PATH`].
pub const AGENT_FALLBACK_DIR: &str = "/run/kprof";
pub use kprof_capture::CAPTURE_DIR;

/// Finds an executable agent: the remembered path, the install paths, then `$PATH`. A
/// candidate is used only when [`guard::SAFE_PATH_FN`] finds it and every directory above it
/// out of other users' reach (then by its real path, so a symlink swapped later is not
/// followed); others are skipped with a warning naming the path and why, and when nothing else
/// is found that is an error.
pub fn find_agent(remote: &Remote, remembered: Option<&str>) -> anyhow::Result<Option<String>> {
    let t = &remote.target;
    let mut candidates: Vec<String> = remembered.map(quote).into_iter().collect();
    candidates.push(AGENT_PATH.into());
    candidates.push("\"$(command -v kprof-agent 2>/dev/null)\"".into());
    candidates.push(AGENT_FALLBACK_PATH.into());
    let out = remote.exec(&find_agent_script(&candidates))?;
    let (found, refused) = parse_find_agent(&out.stdout_str());
    for (path, why) in &refused {
        if found.is_some() {
            eprintln!("kprofctl: warning: {t}: not running kprof-agent from {path}: {why}");
        }
    }
    match (found, refused.first()) {
        (Some(path), _) => Ok(Some(path)),
        (None, Some((path, why))) => anyhow::bail!(
            "{t}: refusing to run kprof-agent from {path}: {why}; another local user could \
             have put it there. Run `kprofctl deploy {}` to install it in {AGENT_PATH} (or \
             {AGENT_FALLBACK_PATH})",
            t.spec
        ),
        (None, None) => Ok(None),
    }
}

/// The board shell that prints `ok REALPATH` for the first safe executable candidate and
/// `refused PATH: WHY` for each unsafe one before it.
fn find_agent_script(candidates: &[String]) -> String {
    format!(
        "{fun}for a in {}; do if [ -n \"$a\" ] && [ -f \"$a\" ] && [ -x \"$a\" ]; then \
         if kprof_safe_path \"$a\"; then echo \"ok $KPROF_REAL\"; exit 0; fi; \
         echo \"refused $a: $KPROF_WHY\"; fi; done; exit 1",
        candidates.join(" "),
        fun = guard::SAFE_PATH_FN
    )
}

/// (the safe agent, the refused candidates with why) from [`find_agent_script`]'s output.
fn parse_find_agent(out: &str) -> (Option<String>, Vec<(String, String)>) {
    let mut found = None;
    let mut refused = Vec::new();
    for line in out.lines() {
        if let Some(p) = line.strip_prefix("ok ") {
            found = Some(p.to_owned());
        } else if let Some((p, why)) = line
            .strip_prefix("refused ")
            .and_then(|r| r.split_once(": "))
        {
            refused.push((p.to_owned(), why.to_owned()));
        }
    }
    (found, refused)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::guard::tests::sh;
    use std::os::unix::fs::PermissionsExt as _;

    /// An agent planted in a world-writable directory (the old `/tmp/kprof-agent` fallback) is
    /// refused with the reason and never run; a safe one later in the list is found by its
    /// real path.
    #[test]
    fn find_agent_script_world_writable_candidate_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o777)).unwrap();
        let marker = real.join("ran");
        let planted = real.join("kprof-agent");
        std::fs::write(&planted, format!("#!/bin/sh\ntouch {}\n", marker.display())).unwrap();
        std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o755)).unwrap();
        let candidates = [
            quote(planted.to_str().unwrap()),
            "/nonexistent/kprof-agent".to_owned(),
            "/bin/sh".to_owned(),
        ];
        let (out, err, code) = sh(&find_agent_script(&candidates));
        assert_eq!(code, Some(0), "{err}");
        let (found, refused) = parse_find_agent(&out);
        let sh_real = std::fs::canonicalize("/bin/sh").unwrap();
        assert_eq!(found.as_deref(), sh_real.to_str());
        assert_eq!(
            refused,
            [(
                planted.display().to_string(),
                format!(
                    "{} is writable by other users (mode drwxrwxrwx)",
                    real.display()
                )
            )]
        );
        assert!(!marker.exists(), "the planted agent ran");
        // Nothing safe: exit 1 with the refusal alone.
        let (out, _, code) = sh(&find_agent_script(&candidates[..2]));
        assert_eq!(code, Some(1));
        assert_eq!(parse_find_agent(&out).0, None);
    }
}

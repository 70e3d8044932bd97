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
    // Paths and reasons are the board's words: one line each, escaped.
    let refused: Vec<(String, String)> =
        refused.iter().map(|(p, w)| (shown(p), shown(w))).collect();
    for (path, why) in &refused {
        if found.is_some() {
            crate::term::warning(format_args!(
                "{t}: not running kprof-agent from {path}: {why}"
            ));
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

/// A string from the board as it is shown: one line, control and bidi characters escaped.
pub fn shown(s: &str) -> String {
    kprof_report::escape::controls(s).into_owned()
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
/// only when it is complete, so every listed file is whole). A directory that fails the
/// agent's trust rule is skipped with a warning naming it and why: what others can write
/// could hold a FIFO or an archive swapped after it was listed.
pub fn list_captures(remote: &Remote, dirs: &[String]) -> anyhow::Result<Vec<RemoteCapture>> {
    let out = remote.exec(&list_script(dirs))?;
    for line in String::from_utf8_lossy(&out.stderr).lines() {
        if let Some(why) = line.strip_prefix("kprof-refused ") {
            crate::term::warning(format_args!(
                "{}: not listing captures in {}",
                remote.target,
                shown(why)
            ));
        }
    }
    Ok(kprof_capture::listing::parse(&out.stdout))
}

/// The board shell of [`list_captures`]: regular files only (no links, no FIFOs), by the
/// directory's real path.
fn list_script(dirs: &[String]) -> String {
    let suffix = kprof_capture::ARCHIVE_SUFFIX;
    let dirs: Vec<String> = dirs.iter().map(|d| quote(d)).collect();
    format!(
        "{fun}for d in {}; do [ -e \"$d\" ] || continue; \
         if ! kprof_capture_dir_ok \"$d\"; then echo \"kprof-refused $d: $KPROF_WHY\" >&2; continue; fi; \
         for f in \"$KPROF_REAL\"/*{suffix}; do [ -f \"$f\" ] && [ ! -L \"$f\" ] || continue; \
         s=$(stat -c %s \"$f\" 2>/dev/null || wc -c < \"$f\"); echo \"$s $f\"; done; done",
        dirs.join(" "),
        fun = guard::CAPTURE_DIR_FN
    )
}

/// The board shell that writes bytes `offset..` of the capture `path` to stdout, after the
/// same checks as [`list_script`] (the capture dir may have changed since it was listed).
pub fn read_capture_script(path: &str, offset: u64) -> String {
    let dir = match path.rfind('/') {
        Some(0) => "/",
        Some(i) => &path[..i],
        None => ".",
    };
    let read = if offset == 0 {
        format!("cat -- {}", quote(path))
    } else {
        format!("tail -c +{} -- {}", offset + 1, quote(path))
    };
    format!(
        "{fun}kprof_capture_dir_ok {d} || {{ echo \"refusing to read {p}: $KPROF_WHY\" >&2; exit 253; }}; \
         [ -f {p} ] && [ ! -L {p} ] || {{ echo \"refusing to read {p}: not a regular file\" >&2; exit 253; }}; \
         {read}",
        d = quote(dir),
        p = quote(path),
        fun = guard::CAPTURE_DIR_FN
    )
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

    /// Issue 36, item 12: `fetch`'s listing applies the agent's trust rule: a capture dir
    /// others can write is skipped, naming it (before: listed and read); in a good one only
    /// regular files are listed (a planted FIFO or link is not), under a sticky parent too;
    /// reading a listed capture checks again.
    #[test]
    fn list_script_capture_dir_trust() {
        let top = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(top.path()).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let good = real.join("good");
        std::fs::create_dir(&good).unwrap();
        std::fs::set_permissions(&good, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(good.join("a.kprof.tar.gz"), "12345").unwrap();
        std::os::unix::fs::symlink("/etc/shadow", good.join("b.kprof.tar.gz")).unwrap();
        let fifo = std::ffi::CString::new(good.join("c.kprof.tar.gz").to_str().unwrap()).unwrap();
        // SAFETY: `fifo` is a valid NUL-terminated path for the duration of the call.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let shared = real.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::write(shared.join("d.kprof.tar.gz"), "x").unwrap();
        let dirs = [good.display().to_string(), shared.display().to_string()];
        let (out, err, _) = sh(&list_script(&dirs));
        let listed = format!("5 {}/a.kprof.tar.gz\n", good.display());
        assert_eq!(out, listed, "{err}");
        assert!(
            err.contains(&format!(
                "kprof-refused {}: {} is writable by other users",
                dirs[1], dirs[1]
            )),
            "{err}"
        );
        let (out, err, code) = sh(&read_capture_script(
            &format!("{}/a.kprof.tar.gz", dirs[0]),
            2,
        ));
        assert_eq!((out.as_str(), code), ("345", Some(0)), "{err}");
        let (_, err, code) = sh(&read_capture_script(
            &format!("{}/d.kprof.tar.gz", dirs[1]),
            0,
        ));
        assert_eq!(code, Some(253), "{err}");
        let (_, err, code) = sh(&read_capture_script(
            &format!("{}/b.kprof.tar.gz", dirs[0]),
            0,
        ));
        assert_eq!(code, Some(253));
        assert!(err.contains("not a regular file"), "{err}");
    }

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

//! What kprofctl asks a board over ssh, in plain POSIX shell that busybox runs: where the agent
//! is, its version, the kernel's build-id, the captures on the board.

use super::session::Remote;
use super::shell::quote;

/// Where `deploy` installs the agent.
pub const AGENT_PATH: &str = "/usr/bin/kprof-agent";
/// Where `deploy` puts the agent when the root file system is read-only.
pub const AGENT_FALLBACK_PATH: &str = "/tmp/kprof-agent";
/// The agent's default capture directory.
pub const CAPTURE_DIR: &str = "/var/lib/kprof/captures";

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
        gnu_build_id_from_notes(&self.kernel_notes)
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

/// The GNU build-id (note type 3, name "GNU") in an ELF notes blob of either byte order.
pub fn gnu_build_id_from_notes(notes: &[u8]) -> Option<String> {
    for big_endian in [false, true] {
        let rd = |off: usize| -> Option<usize> {
            let b: [u8; 4] = notes.get(off..off + 4)?.try_into().ok()?;
            Some(if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            } as usize)
        };
        let align = |n: usize| n.checked_add(3).map(|n| n & !3);
        let mut off = 0;
        while off + 12 <= notes.len() {
            let (Some(namesz), Some(descsz), Some(kind)) = (rd(off), rd(off + 4), rd(off + 8))
            else {
                break;
            };
            let name_start = off + 12;
            let Some(desc_start) = align(namesz).and_then(|n| name_start.checked_add(n)) else {
                break;
            };
            let Some(next) = align(descsz).and_then(|n| desc_start.checked_add(n)) else {
                break;
            };
            if next > notes.len() {
                break;
            }
            if kind == 3 && notes.get(name_start..name_start + namesz) == Some(b"GNU\0") {
                let desc = &notes[desc_start..desc_start + descsz];
                return Some(desc.iter().map(|b| format!("{b:02x}")).collect());
            }
            off = next;
        }
    }
    None
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The build-id of the host's /bin/sh read from its notes section by hand equals readelf's.
    #[test]
    fn build_id_notes_blob_both_orders() {
        let mut le = Vec::new();
        // A non-GNU note first, then the build-id.
        for (name, kind, desc) in [
            (&b"Xen\0"[..], 1u32, &[1u8, 2, 3][..]),
            (b"GNU\0", 3, &[0xab, 0xcd, 0xef, 0x01]),
        ] {
            le.extend_from_slice(&(name.len() as u32).to_le_bytes());
            le.extend_from_slice(&(desc.len() as u32).to_le_bytes());
            le.extend_from_slice(&kind.to_le_bytes());
            le.extend_from_slice(name);
            le.extend_from_slice(desc);
            while le.len() % 4 != 0 {
                le.push(0);
            }
        }
        assert_eq!(gnu_build_id_from_notes(&le).as_deref(), Some("abcdef01"));
        let be: Vec<u8> = le
            .chunks(4)
            .enumerate()
            .flat_map(|(i, c)| {
                // Swap the three header words of each note (offsets 0..12 and 20..32).
                if i < 3 || (5..8).contains(&i) {
                    c.iter().rev().copied().collect::<Vec<_>>()
                } else {
                    c.to_vec()
                }
            })
            .collect();
        assert_eq!(gnu_build_id_from_notes(&be).as_deref(), Some("abcdef01"));
        assert_eq!(gnu_build_id_from_notes(&le[..20]), None);
        assert_eq!(gnu_build_id_from_notes(&[0xff; 64]), None);
    }
}

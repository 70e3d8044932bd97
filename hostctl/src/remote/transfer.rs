//! Downloading a capture: resumable (`ID.kprof.tar.gz.part` plus `tail -c +OFFSET` on the board),
//! size- and sha256-checked before it gets its final name.

use super::board::{self, RemoteCapture};
use super::session::Remote;
use crate::progress::{self, Counting};
use anyhow::Context as _;
use sha2::Digest as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

/// Suffix of a download in progress.
pub const PART_SUFFIX: &str = ".part";

/// Longest a read of the download waits before Ctrl-C is looked at again.
const TICK_MS: u32 = 200;

/// Fetches `cap` into `dir` (resuming a `.part` left by a cut download) and returns the path
/// of the verified archive.
pub fn download(remote: &Remote, cap: &RemoteCapture, dir: &Path) -> anyhow::Result<PathBuf> {
    let t = &remote.target;
    let name = format!("{}{}", cap.id, kprof_capture::ARCHIVE_SUFFIX);
    let final_path = dir.join(&name);
    let part_path = dir.join(format!("{name}{PART_SUFFIX}"));
    // The size comes from the board: a capture the report would refuse is not downloaded.
    let max = kprof_symbols::limits::max_input_size()?;
    if cap.size > max {
        anyhow::bail!(
            "{t}: {} is {} bytes: {}",
            board::shown(&cap.path),
            cap.size,
            kprof_symbols::limits::how_to_raise(max)
        );
    }
    crate::files::captures_dir(dir)?;

    let mut offset = std::fs::metadata(&part_path).map(|m| m.len()).unwrap_or(0);
    if offset > cap.size {
        eprintln!(
            "kprofctl: {} is larger than {} on the board: downloading it again",
            part_path.display(),
            board::shown(&cap.path)
        );
        std::fs::remove_file(&part_path)
            .with_context(|| format!("cannot remove {}", part_path.display()))?;
        offset = 0;
    } else if offset > 0 {
        eprintln!(
            "kprofctl: resuming {} at {offset} of {} bytes",
            cap.id, cap.size
        );
    }
    if offset < cap.size {
        receive(remote, cap, &part_path, offset)?;
    }

    let got = std::fs::metadata(&part_path)
        .with_context(|| format!("cannot stat {}", part_path.display()))?
        .len();
    if got != cap.size {
        anyhow::bail!(
            "{t}: download of {} stopped at {got} of {} bytes (kept in {}): run `kprofctl fetch` again to resume",
            board::shown(&cap.path),
            cap.size,
            part_path.display()
        );
    }
    let local = sha256_file(&part_path)?;
    match board::sha256(remote, &cap.path)? {
        Some(remote_sum) if remote_sum != local => {
            let _ = std::fs::remove_file(&part_path);
            anyhow::bail!(
                "{t}: {} arrived corrupted (sha256 {local}, the board has {remote_sum}); \
                 the download was discarded: run `kprofctl fetch` again",
                cap.id
            );
        }
        Some(_) => {}
        None => eprintln!(
            "kprofctl: {t}: the board has no sha256sum: {} checked by size only",
            cap.id
        ),
    }
    std::fs::rename(&part_path, &final_path)
        .with_context(|| format!("cannot rename {} into place", part_path.display()))?;
    Ok(final_path)
}

/// Appends bytes `offset..` of the board file to `part`.
fn receive(remote: &Remote, cap: &RemoteCapture, part: &Path, offset: u64) -> anyhow::Result<()> {
    let t = &remote.target;
    let command = board::read_capture_script(&cap.path, offset);
    let mut file = open_part(part)?;
    let bar = progress::bar(cap.size, &cap.id, Counting::Bytes);
    bar.set_position(offset);
    let mut ch = remote.channel(&command)?;
    let mut buf = vec![0u8; 256 * 1024];
    let mut done = offset;
    // Reads wait at most a tick, so that Ctrl-C is seen even while the board sends nothing;
    // the link counts as dead after IO_TIMEOUT_MS without a byte, as in blocking reads.
    let sess = remote.session();
    sess.set_timeout(TICK_MS);
    let mut idle_ms = 0u32;
    let result = loop {
        if crate::interrupt::stop_requested() {
            break Err(anyhow::Error::new(crate::interrupt::Interrupted(format!(
                "interrupted: download of {} stopped at {done} of {} bytes; the part is kept \
                 in {}: `kprofctl fetch` resumes it",
                board::shown(&cap.path),
                cap.size,
                part.display()
            ))));
        }
        match ch.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => {
                // Never write past the size listed: the file on the board is immutable once
                // listed, so more bytes mean something else answered. Stop reading there.
                if n as u64 > cap.size - done {
                    break Err(anyhow::anyhow!(
                        "{t}: the board sent more than the {} bytes it listed for {}: \
                         download stopped (the {done} bytes kept in {} are checked by sha256 \
                         on the next fetch)",
                        cap.size,
                        board::shown(&cap.path),
                        part.display()
                    ));
                }
                if let Err(e) = file.write_all(&buf[..n]) {
                    break Err(anyhow::anyhow!("cannot write {}: {e}", part.display()));
                }
                done += n as u64;
                idle_ms = 0;
                bar.set_position(done);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::TimedOut
                    && idle_ms < super::session::IO_TIMEOUT_MS =>
            {
                idle_ms += TICK_MS;
            }
            Err(e) => {
                let why = e.to_string();
                break Err(anyhow::anyhow!(
                    "{t}: download of {} cut at {done} of {} bytes ({why}); the part is kept in \
                     {}: run `kprofctl fetch` again to resume",
                    board::shown(&cap.path),
                    cap.size,
                    part.display()
                ));
            }
        }
    };
    sess.set_timeout(super::session::IO_TIMEOUT_MS);
    bar.finish_and_clear();
    file.sync_all().ok();
    result?;
    check_sent(remote, &mut ch, cap, done)
}

/// `part` opened for appending, private; a link planted under its name is refused.
fn open_part(part: &Path) -> anyhow::Result<std::fs::File> {
    // Captures hold kallsyms and kernel addresses: 0600 from the first byte, whatever the umask.
    let file = crate::files::open_append_own(part)?;
    // A `.part` of an older kprofctl (0644 by umask) is ours to tighten before more goes in.
    private(&file, part)?;
    Ok(file)
}

/// The exit status of the board's `cat`/`tail` once all `done` bytes came: it read the file.
fn check_sent(
    remote: &Remote,
    ch: &mut ssh2::Channel,
    cap: &RemoteCapture,
    done: u64,
) -> anyhow::Result<()> {
    let out = remote.finish(ch).map_err(|e| {
        anyhow::anyhow!(
            "{e} (download of {} at {done} of {} bytes; run `kprofctl fetch` again to resume)",
            board::shown(&cap.path),
            cap.size
        )
    })?;
    if out.status != 0 {
        anyhow::bail!(
            "{}: reading {} on the board failed: {}",
            remote.target,
            board::shown(&cap.path),
            out.stderr_str()
        );
    }
    Ok(())
}

/// Hex sha256 of a local file.
pub fn sha256_file(path: &Path) -> anyhow::Result<String> {
    let mut file =
        std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Makes an open `.part` mode 0600 when others could read it.
fn private(file: &std::fs::File, part: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let mode = file.metadata()?.permissions().mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))
            .with_context(|| format!("cannot make {} private (mode 0600)", part.display()))?;
    }
    Ok(())
}

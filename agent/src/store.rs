//! `list` and `rm`: the captures in the capture dir.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use kprof_capture::ARCHIVE_SUFFIX;
use serde::Serialize;

use crate::{archive, dir_trust, timefmt, Error};

/// One capture as `list` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Entry {
    /// The capture id: the archive's file name without the suffix.
    pub id: String,
    /// Start of sampling (manifest), or the file's mtime when the manifest is unreadable.
    pub time: String,
    /// Size of the archive file in bytes.
    pub size: u64,
    /// The workload's argv joined by spaces; empty for system-wide captures without one.
    pub command: String,
    /// The capture directory's sequence number (manifest `sequence`, else the id's): what
    /// orders the list where the board's clock does not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sequence: Option<u64>,
    /// Where the archive is.
    pub path: PathBuf,
    /// Why the manifest could not be read, if it could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `dir` canonical and checked by [`dir_trust::check`], or `None` when it does not exist.
fn trusted(dir: &Path) -> Result<Option<PathBuf>, Error> {
    match fs::canonicalize(dir) {
        Ok(d) => dir_trust::check(&d).map(|()| Some(d)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io(
            format!("cannot use capture dir {}", dir.display()),
            e,
        )),
    }
}

/// Captures in `dir`, oldest first. A missing dir is an empty list.
pub fn list(dir: &Path) -> Result<Vec<Entry>, Error> {
    // Archives are opened as root: in a dir others can write, a planted FIFO would block.
    let Some(dir) = trusted(dir)? else {
        return Ok(Vec::new());
    };
    let dir = dir.as_path();
    let rd = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::io(
                format!("cannot read capture dir {}", dir.display()),
                e,
            ))
        }
    };
    let mut out = Vec::new();
    for ent in rd.flatten() {
        let name = ent.file_name().to_string_lossy().into_owned();
        let Some(id) = name.strip_suffix(ARCHIVE_SUFFIX) else {
            continue;
        };
        if id.starts_with('.') {
            continue;
        }
        let path = ent.path();
        let md = ent
            .metadata()
            .map_err(|e| Error::io(path.display().to_string(), e))?;
        let mtime_ns = md
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_nanos() as u64);
        let (time, command, sequence, error) = match archive::read_manifest(&path) {
            Ok(m) => (
                m.start_time_ns,
                m.command.map(|c| c.argv.join(" ")).unwrap_or_default(),
                m.sequence.map(|s| s.number),
                None,
            ),
            Err(e) => (mtime_ns, String::new(), None, Some(e.to_string())),
        };
        out.push(Entry {
            id: id.to_string(),
            time: timefmt::iso8601(time),
            size: md.len(),
            command,
            sequence: sequence.or_else(|| kprof_capture::listing::sequence(id)),
            path,
            error,
        });
    }
    // Older agents' captures (no number) came first; a board without a clock restarts its
    // times at 1970 on every boot.
    out.sort_by(|a, b| (a.sequence, &a.time, &a.id).cmp(&(b.sequence, &b.time, &b.id)));
    Ok(out)
}

/// The table `list` prints.
pub fn render(entries: &[Entry]) -> String {
    let w = entries.iter().map(|e| e.id.len()).max().unwrap_or(2).max(2);
    let mut s = format!(
        "{:<w$}  {:<20}  {:>9}  COMMAND\n",
        "ID", "TIME (UTC)", "SIZE"
    );
    for e in entries {
        let cmd = match &e.error {
            Some(err) => format!("(unreadable: {err})"),
            None if e.command.is_empty() => "(system-wide)".into(),
            None => e.command.clone(),
        };
        s.push_str(&format!(
            "{:<w$}  {:<20}  {:>9}  {cmd}\n",
            e.id,
            e.time,
            crate::cli::human_bytes(e.size)
        ));
    }
    s
}

/// Deletes the named captures. Every id is tried; the first failure is returned.
pub fn remove(dir: &Path, ids: &[String]) -> Result<Vec<PathBuf>, Error> {
    let checked = trusted(dir)?;
    let dir = checked.as_deref().unwrap_or(dir);
    let mut removed = Vec::new();
    let mut first_err = None;
    for id in ids {
        let id = id.strip_suffix(ARCHIVE_SUFFIX).unwrap_or(id);
        if id.is_empty() || id.starts_with('.') || id.contains('/') {
            first_err.get_or_insert(Error::Usage(format!("`{id}` is not a capture id")));
            continue;
        }
        let path = dir.join(format!("{id}{ARCHIVE_SUFFIX}"));
        match fs::remove_file(&path) {
            Ok(()) => removed.push(path),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                first_err.get_or_insert(Error::Other(format!(
                    "no capture `{id}` in {}",
                    dir.display()
                )));
            }
            Err(e) => {
                first_err.get_or_insert(Error::io(format!("cannot remove {}", path.display()), e));
            }
        }
    }
    match first_err {
        Some(e) => {
            for p in &removed {
                eprintln!("kprof-agent: removed {}", p.display());
            }
            Err(e)
        }
        None => Ok(removed),
    }
}

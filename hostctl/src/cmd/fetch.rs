//! `kprofctl fetch`: download the board's captures that are not here yet (resumably, checked by
//! size and sha256), then report each against the local symbols.

use crate::cmd::symbol_args::SymbolArgs;
use crate::remote::board::{self, RemoteCapture};
use crate::remote::labgrid::{self, LabgridArgs};
use crate::remote::{transfer, Remote, SshArgs};
use crate::state::State;
use std::path::{Path, PathBuf};

/// Where captures are downloaded to, relative to the current directory.
pub const DEFAULT_DIR: &str = "kprof-captures";

/// Arguments of `kprofctl fetch`.
#[derive(Debug, clap::Args)]
pub struct FetchArgs {
    /// `[TARGET] [ID...]`: the board (default: the one last used here, from .kprof/state.toml)
    /// and the captures to get (default: every one not downloaded yet). The first word is the
    /// target when it has a `@`, is `lg:PLACE`, is a board used here before, or no board was
    /// used yet.
    #[arg(value_name = "TARGET|ID")]
    pub args: Vec<String>,
    /// Local directory for the captures.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_DIR)]
    pub dest: PathBuf,
    /// Only download and verify; do not report.
    #[arg(long)]
    pub no_report: bool,
    /// Another capture directory on the board to look in (repeatable); the agent's default and
    /// those used with `run -o` here are always looked in.
    #[arg(long = "capture-dir", value_name = "BOARD_DIR")]
    pub capture_dir: Vec<String>,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub lab: LabgridArgs,
    #[command(flatten)]
    pub symbols: SymbolArgs,
}

pub fn run(args: FetchArgs) -> anyhow::Result<()> {
    let state = State::load()?;
    let (spec, ids) = split_target(&args.args, &state)?;
    let (target, _place) = labgrid::resolve(&spec, &args.lab, &args.ssh)?;
    let remote = Remote::connect(&target, &args.ssh)?;

    let mut dirs = vec![board::CAPTURE_DIR.to_owned()];
    if let Some(t) = state.targets.get(&target.spec) {
        dirs.extend(t.capture_dirs.iter().cloned());
    }
    dirs.extend(args.capture_dir.iter().cloned());
    dirs.dedup();
    let all = board::list_captures(&remote, &dirs)?;
    let mut wanted: Vec<RemoteCapture> = Vec::new();
    for id in &ids {
        let hits: Vec<_> = all
            .iter()
            .filter(|c| c.id == *id || c.id.starts_with(id.as_str()))
            .collect();
        match hits.len() {
            0 => anyhow::bail!("{target}: no capture `{id}` in {}", dirs.join(", ")),
            1 => wanted.push(hits[0].clone()),
            _ => anyhow::bail!(
                "{target}: `{id}` names several captures: {}",
                hits.iter()
                    .map(|c| c.id.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
    let explicit = !ids.is_empty();
    if !explicit {
        wanted = all
            .iter()
            .filter(|c| !local_path(&args.dest, c).exists())
            .cloned()
            .collect();
        if wanted.is_empty() {
            eprintln!(
                "kprofctl: {target}: nothing new ({} capture(s) on the board, all in {})",
                all.len(),
                args.dest.display()
            );
            return Ok(());
        }
    }
    fetch_list(&remote, &args, &wanted).map(drop)
}

/// `run --fetch`: the captures at these board paths; where they are here.
pub fn fetch_paths(
    remote: &Remote,
    args: &FetchArgs,
    paths: &[String],
) -> anyhow::Result<Vec<PathBuf>> {
    let mut wanted = Vec::new();
    for path in paths {
        let dir = path.rsplit_once('/').map_or(".", |(d, _)| d).to_owned();
        let listed = board::list_captures(remote, &[dir])?;
        let cap = listed
            .into_iter()
            .find(|c| c.path == *path)
            .ok_or_else(|| {
                anyhow::anyhow!("{}: capture {path} is not on the board", remote.target)
            })?;
        wanted.push(cap);
    }
    fetch_list(remote, args, &wanted)
}

/// Downloads and reports `wanted`; where they are here.
fn fetch_list(
    remote: &Remote,
    args: &FetchArgs,
    wanted: &[RemoteCapture],
) -> anyhow::Result<Vec<PathBuf>> {
    let mut failures = Vec::new();
    let mut fetched = Vec::new();
    // Ctrl-C stops the download at its next chunk, keeping the `.part` for the next fetch.
    crate::interrupt::stop_on_press();
    for cap in wanted {
        let dest = local_path(&args.dest, cap);
        if dest.exists() {
            crate::term::note(format_args!(
                "{} is already here: {} (fetched {})",
                cap.id,
                dest.display(),
                fetched_at(&dest)
            ));
            fetched.push(dest);
            continue;
        }
        match transfer::download(remote, cap, &args.dest) {
            Ok(path) => {
                crate::term::note(format_args!(
                    "fetched {} at {} ({} bytes, sha256 verified)",
                    path.display(),
                    fetched_at(&path),
                    cap.size
                ));
                fetched.push(path);
            }
            Err(e) if e.is::<crate::interrupt::Interrupted>() => return Err(e),
            // A lost link ends everything; other failures only this capture.
            Err(e) => {
                crate::term::note(crate::term::error_text(&e));
                failures.push(cap.id.clone());
                if remote.exec("true").is_err() {
                    break;
                }
            }
        }
    }
    crate::interrupt::exit_on_press();
    if !args.no_report {
        for path in &fetched {
            println!(
                "== {} (fetched {})",
                kprof_report::escape::controls(&path.display().to_string()),
                fetched_at(path)
            );
            if let Err(e) = crate::cmd::report::summarize_fetched(path, &args.symbols) {
                let why = crate::term::error_text(&e);
                let shown = path.display().to_string();
                // Most report errors name the capture already; say it once.
                if why.contains(&shown) {
                    crate::term::note(why);
                } else {
                    crate::term::note(format_args!("{shown}: {why}"));
                }
                failures.push(shown);
            }
        }
    }
    if !failures.is_empty() {
        anyhow::bail!(
            "{}: {} of {} capture(s) failed: {}",
            remote.target,
            failures.len(),
            wanted.len(),
            failures.join(", ")
        );
    }
    Ok(fetched)
}

/// When the capture arrived here, by the host's clock (its file's mtime, set as the download
/// ended), in UTC: the id's date is the board's, which says 1970 on boards without a clock.
fn fetched_at(path: &Path) -> String {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or_else(
            || "time unknown".to_owned(),
            |d| kprof_capture::time::iso8601(d.as_nanos() as u64),
        )
}

fn local_path(dest: &Path, cap: &RemoteCapture) -> PathBuf {
    dest.join(format!("{}{}", cap.id, kprof_capture::ARCHIVE_SUFFIX))
}

/// Tells the target from capture ids in `fetch [TARGET] [ID...]`.
fn split_target(args: &[String], state: &State) -> anyhow::Result<(String, Vec<String>)> {
    let first_is_target = args.first().is_some_and(|a| {
        a.contains('@')
            || a.starts_with(labgrid::PREFIX)
            || state.targets.contains_key(a)
            || state.last_target.is_none()
    });
    if first_is_target {
        return Ok((args[0].clone(), args[1..].to_vec()));
    }
    let target = state.last_target.clone().ok_or_else(|| {
        anyhow::anyhow!(
            "no target: name the board (`kprofctl fetch root@board`); none was used in this \
             directory yet ({})",
            crate::state::STATE_FILE
        )
    })?;
    Ok((target, args.to_vec()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// The remembered target is used unless the first word names a board.
    #[test]
    fn split_target_fetch_args_forms() {
        let mut state = State::default();
        assert!(split_target(&[], &state).is_err());
        assert_eq!(
            split_target(&s(&["board"]), &state).unwrap(),
            ("board".into(), vec![])
        );
        state.remember("board");
        assert_eq!(
            split_target(&s(&["cap1", "cap2"]), &state).unwrap(),
            ("board".into(), s(&["cap1", "cap2"]))
        );
        assert_eq!(
            split_target(&s(&["root@x", "cap1"]), &state).unwrap(),
            ("root@x".into(), s(&["cap1"]))
        );
        assert_eq!(
            split_target(&s(&["board", "c"]), &state).unwrap(),
            ("board".into(), s(&["c"]))
        );
        assert_eq!(split_target(&[], &state).unwrap(), ("board".into(), vec![]));
    }
}

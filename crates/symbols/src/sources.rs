//! Finding the symbol file of an image: by GNU build-id, and by path only when none was recorded.
//!
//! Looked up in order: the build-id index of the user's symbol paths, perf's `~/.debug` cache,
//! `/usr/lib/debug/.build-id`, and the path recorded on the target when it exists here; then
//! the [`SymbolProvider`]s (debuginfod) for what none of them has. A file with the image's name
//! and another build-id is remembered to report the mismatch.
//!
//! An image for which no build-id was recorded (perf 6.x `record -z`, pipe mode) is looked
//! up by its recorded path as perf does ([`Sources::find_by_path`]); what that finds is
//! unverified and labelled so.

use crate::elf::map_file;
use crate::index::BuildIdIndex;
use crate::provider::{FileKind, Provided, SymbolProvider, Unavailable, Wanted};
use kprof_capture::build_id::hex;
use kprof_capture::manifest::check_build_id;
use object::{Object, ObjectSection};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Where a symbol file was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// `path` has the build-id; `debug` is a separate file with its DWARF, when there is one.
    Found {
        /// The file with the build-id.
        path: PathBuf,
        /// Its split debug file.
        debug: Option<PathBuf>,
        /// Where a provider got it from (`debuginfod: URL`); `None` for a file found here.
        origin: Option<String>,
    },
    /// Only a file with another build-id.
    Mismatch {
        /// The file.
        path: PathBuf,
        /// Its build-id.
        found: String,
    },
    /// No build-id was recorded: `path` was found by the recorded path or file name and
    /// could not be checked. `debug` as in `Found`.
    Unverified {
        /// The file found by path.
        path: PathBuf,
        /// Its split debug file (by the file's own build-id), when there is one.
        debug: Option<PathBuf>,
    },
    /// Nothing; the reason.
    Missing(String),
}

/// Facts about one file on disk.
#[derive(Debug, Clone)]
struct FileFacts {
    build_id: Option<String>,
    debug_info: bool,
    /// Has a function symbol table (`.symtab` or at least `.dynsym`).
    symbols: u8,
    debuglink: Option<String>,
    /// `.text` has bytes in the file (a split debug file keeps it as NOBITS).
    code: bool,
}

impl FileFacts {
    /// DWARF beats a full symbol table beats dynamic symbols beats nothing.
    fn rank(&self) -> u8 {
        u8::from(self.debug_info) * 4 + self.symbols
    }
}

fn facts(path: &Path) -> Option<FileFacts> {
    // Paths recorded in the capture are tried as they are: a FIFO would block the open and a
    // device could act on it. Only regular files (after symlinks) are opened.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return None;
    }
    let map = map_file(path).ok()?;
    let obj = object::File::parse(&map[..]).ok()?;
    Some(FileFacts {
        build_id: obj.build_id().ok().flatten().map(hex),
        debug_info: obj.section_by_name(".debug_info").is_some(),
        symbols: if obj.section_by_name(".symtab").is_some() {
            2
        } else {
            u8::from(obj.section_by_name(".dynsym").is_some())
        },
        debuglink: obj
            .gnu_debuglink()
            .ok()
            .flatten()
            .map(|(name, _crc)| String::from_utf8_lossy(name).into_owned()),
        code: obj
            .section_by_name(".text")
            .is_some_and(|s| s.file_range().is_some()),
    })
}

/// The lookup configuration and the index.
#[derive(Debug)]
pub struct Sources {
    /// The build-id index of the symbol paths.
    pub index: BuildIdIndex,
    /// `~/.debug`, perf's build-id cache.
    pub perf_cache: Option<PathBuf>,
    /// `/usr/lib/debug` (a root for `.build-id/` and for debuglink paths).
    pub debug_roots: Vec<PathBuf>,
    /// Try the path recorded on the target (useful for perf.data recorded on this host).
    pub use_recorded_paths: bool,
    /// Asked, in order, for what none of the places above has.
    pub providers: Vec<Arc<dyn SymbolProvider>>,
}

impl Sources {
    /// Looks up the symbol file of an image with the recorded `build_id`, named `names` on
    /// the target (e.g. `vmlinux`, `mychardrv.ko`), recorded at `recorded_path`.
    pub fn find(
        &self,
        build_id: Option<&str>,
        names: &[String],
        recorded_path: Option<&Path>,
    ) -> Lookup {
        let Some(id) = build_id else {
            return Lookup::Missing("no build-id was recorded for it".into());
        };
        // The id comes from the capture and becomes `.build-id/XX/REST`: the manifest's are
        // checked when it is read, and this keeps any other source from making a path of
        // something else (or slicing inside a character).
        if let Err(why) = check_build_id(id) {
            return Lookup::Missing(format!("the recorded build-id {id:?} {why}"));
        }
        if let Some((found, dwarf)) = self.find_here_dwarf(id, recorded_path) {
            // A stripped file here (no DWARF, no split debug file found): the providers may
            // have its debuginfo, as perf and gdb ask debuginfod for it.
            return match &found {
                Lookup::Found { path, .. } if !dwarf => {
                    self.provided_debuginfo(id, path).unwrap_or(found)
                }
                _ => found,
            };
        }
        let mut provider_reasons = Vec::new();
        for p in &self.providers {
            match provided(p.as_ref(), id) {
                Ok(found) => return found,
                Err(why) => provider_reasons.push(why.0),
            }
        }
        if let Some(mismatch) = self.mismatch(id, names, recorded_path) {
            return mismatch;
        }
        let mut why = format!(
            "no file with build-id {id} under the symbol paths ({} ELF files indexed), ~/.debug or /usr/lib/debug",
            self.index.len()
        );
        for r in provider_reasons {
            why.push_str("; ");
            why.push_str(&r);
        }
        Lookup::Missing(why)
    }

    /// The file of an image for which no build-id was recorded, by its `recorded_path`, as
    /// perf finds it: under a symbol path at the recorded path (a sysroot, a target dir),
    /// the recorded path itself when `host_capture` (the capture was made on this host),
    /// then a file with the recorded file name under the symbol paths. The first found wins;
    /// when it has a build-id of its own, the best file with that id (DWARF, split debug)
    /// is used in its place.
    pub fn find_by_path(&self, recorded_path: &Path, host_capture: bool) -> Lookup {
        let name = recorded_path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let relative = recorded_path.strip_prefix("/").unwrap_or(recorded_path);
        let named: Vec<&Path> = self
            .index
            .by_name(&name)
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        let under_root = named
            .iter()
            .filter(|p| !relative.as_os_str().is_empty() && p.ends_with(relative));
        let host = (host_capture && self.use_recorded_paths).then_some(recorded_path);
        let first = under_root
            .copied()
            .chain(host)
            .chain(named.iter().copied())
            .find_map(|p| Some((p, facts(p)?)));
        let Some((path, f)) = first else {
            return Lookup::Missing(format!(
                "no build-id was recorded for it, and no file {name:?} is under the symbol paths{}",
                if host.is_some() {
                    format!(" or at {}", recorded_path.display())
                } else {
                    String::new()
                }
            ));
        };
        let better = f
            .build_id
            .as_deref()
            .filter(|id| check_build_id(id).is_ok())
            .and_then(|id| self.find_here(id, Some(path)));
        match better {
            Some(Lookup::Found { path, debug, .. }) => Lookup::Unverified { path, debug },
            _ => Lookup::Unverified {
                path: path.to_path_buf(),
                debug: None,
            },
        }
    }

    /// The best file with build-id `id` in the local places, and its split debug file.
    fn find_here(&self, id: &str, recorded_path: Option<&Path>) -> Option<Lookup> {
        self.find_here_dwarf(id, recorded_path)
            .map(|(found, _)| found)
    }

    /// [`Sources::find_here`], and whether DWARF comes with what it found (in the file or a
    /// split debug file).
    fn find_here_dwarf(&self, id: &str, recorded_path: Option<&Path>) -> Option<(Lookup, bool)> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        candidates.extend(
            self.index
                .by_build_id(id)
                .into_iter()
                .map(|(p, _)| p.to_path_buf()),
        );
        if let (Some(head), Some(tail)) = (id.get(..2), id.get(2..).filter(|t| !t.is_empty())) {
            if let Some(cache) = &self.perf_cache {
                let d = cache.join(".build-id").join(head).join(tail);
                candidates.push(d.join("debug"));
                candidates.push(d.join("elf"));
            }
            for root in &self.debug_roots {
                candidates.push(
                    root.join(".build-id")
                        .join(head)
                        .join(format!("{tail}.debug")),
                );
            }
        }
        if self.use_recorded_paths {
            if let Some(p) = recorded_path {
                candidates.push(p.to_path_buf());
            }
        }
        let mut best: Option<(PathBuf, FileFacts)> = None;
        for c in &candidates {
            let Some(f) = facts(c) else { continue };
            if f.build_id.as_deref() != Some(id) {
                continue;
            }
            let better = match &best {
                None => true,
                Some((_, b)) => f.rank() > b.rank(),
            };
            if better {
                best = Some((c.clone(), f));
            }
        }
        let (path, f) = best?;
        let debug = if f.debug_info {
            None
        } else {
            self.debuglink_target(&path, recorded_path, f.debuglink.as_deref(), id)
        };
        let dwarf = f.debug_info || debug.is_some();
        let found = Lookup::Found {
            path,
            debug,
            origin: None,
        };
        Some((found, dwarf))
    }

    /// The file found here, `path`, with the first provider's debuginfo for `id` as its split
    /// debug file; `None` when no provider has one.
    fn provided_debuginfo(&self, id: &str, path: &Path) -> Option<Lookup> {
        self.providers.iter().find_map(|p| {
            let got = p.file(id, FileKind::Debuginfo).ok()?;
            let f = checked(&got, id).ok()?;
            f.debug_info.then(|| Lookup::Found {
                path: path.to_path_buf(),
                debug: Some(got.path),
                origin: Some(got.origin),
            })
        })
    }

    /// A file named like the image with another build-id: in the index, or at the recorded
    /// path.
    fn mismatch(&self, id: &str, names: &[String], recorded_path: Option<&Path>) -> Option<Lookup> {
        for name in names {
            for (p, e) in self.index.by_name(name) {
                if let Some(found) = &e.build_id {
                    if found != id {
                        return Some(Lookup::Mismatch {
                            path: p.to_path_buf(),
                            found: found.clone(),
                        });
                    }
                }
            }
        }
        if !self.use_recorded_paths {
            return None;
        }
        let p = recorded_path?;
        let found = facts(p)?.build_id?;
        Some(Lookup::Mismatch {
            path: p.to_path_buf(),
            found,
        })
    }

    /// Asks the providers, all at once, for the files of `images` (`(build-id, name)`) that
    /// the local places do not have: debuginfo first, then the executables of those whose
    /// debuginfo is a split file without code or that have no debuginfo at all.
    pub fn prefetch(&self, images: &[(String, String)]) {
        if self.providers.is_empty() {
            return;
        }
        let mut wanted: Vec<Wanted> = images
            .iter()
            .filter(|(id, _)| check_build_id(id).is_ok())
            .filter(|(id, _)| {
                self.find_here_dwarf(id, None)
                    .is_none_or(|(_, dwarf)| !dwarf)
            })
            .map(|(id, name)| Wanted {
                build_id: id.clone(),
                image: name.clone(),
                kind: FileKind::Debuginfo,
            })
            .collect();
        wanted.sort_by(|a, b| a.build_id.cmp(&b.build_id));
        wanted.dedup_by(|a, b| a.build_id == b.build_id);
        if wanted.is_empty() {
            return;
        }
        for p in &self.providers {
            p.prefetch(&wanted);
            let executables: Vec<Wanted> = wanted
                .iter()
                .filter(|w| match p.file(&w.build_id, FileKind::Debuginfo) {
                    Ok(got) => checked(&got, &w.build_id).is_ok_and(|f| !f.code),
                    Err(_) => true,
                })
                .map(|w| Wanted {
                    kind: FileKind::Executable,
                    ..w.clone()
                })
                .collect();
            if !executables.is_empty() {
                p.prefetch(&executables);
            }
        }
    }

    /// What the providers have to say about this run, once.
    pub fn provider_warnings(&self) -> Vec<String> {
        self.providers.iter().flat_map(|p| p.warnings()).collect()
    }

    /// Source file `path` of the image with `build_id` from the providers, when it is not
    /// on this host's disk.
    pub fn provided_source(&self, build_id: &str, path: &str) -> Result<String, Unavailable> {
        let mut why = Vec::new();
        for p in &self.providers {
            match p.source(build_id, path) {
                Ok(text) => return Ok(text),
                Err(e) => why.push(e),
            }
        }
        Err(Unavailable(
            why.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        ))
    }

    /// Every file with GNU build-id `id` here: in the index, perf's cache, and the recorded
    /// path when that is used; checked by build-id. The unwinder takes `.eh_frame` from one
    /// of them when the symbol file is a split debug file without it.
    pub fn files_with_build_id(&self, id: &str, recorded_path: Option<&Path>) -> Vec<PathBuf> {
        if check_build_id(id).is_err() {
            return Vec::new();
        }
        let mut out: Vec<PathBuf> = self
            .index
            .by_build_id(id)
            .into_iter()
            .map(|(p, _)| p.to_path_buf())
            .collect();
        if let (Some(cache), Some(head), Some(tail)) = (&self.perf_cache, id.get(..2), id.get(2..))
        {
            out.push(cache.join(".build-id").join(head).join(tail).join("elf"));
        }
        if self.use_recorded_paths {
            out.extend(recorded_path.map(Path::to_path_buf));
        }
        out.retain(|p| facts(p).is_some_and(|f| f.build_id.as_deref() == Some(id)));
        if out.is_empty() {
            out.extend(self.providers.iter().find_map(|p| {
                let exe = p.file(id, FileKind::Executable).ok()?;
                checked(&exe, id).ok().map(|_| exe.path)
            }));
        }
        out
    }

    /// The split debug file of a stripped binary, via `.gnu_debuglink`, checked by build-id.
    fn debuglink_target(
        &self,
        binary: &Path,
        recorded: Option<&Path>,
        link: Option<&str>,
        id: &str,
    ) -> Option<PathBuf> {
        let link = link?;
        // The recorded path comes from the capture: with `..` in it, the debug roots joined
        // to its directory would lead out of them.
        let recorded = recorded.filter(|p| {
            p.components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        });
        let mut dirs: Vec<PathBuf> = Vec::new();
        for base in [Some(binary), recorded].into_iter().flatten() {
            if let Some(dir) = base.parent() {
                dirs.push(dir.to_path_buf());
                dirs.push(dir.join(".debug"));
                for root in &self.debug_roots {
                    dirs.push(root.join(dir.strip_prefix("/").unwrap_or(dir)));
                }
            }
        }
        let by_index = self
            .index
            .by_name(link)
            .into_iter()
            .map(|(p, _)| p.to_path_buf());
        dirs.into_iter().map(|d| d.join(link)).chain(by_index).find(
            |p| matches!(facts(p), Some(f) if f.debug_info && f.build_id.as_deref() == Some(id)),
        )
    }
}

/// The facts of a provider's file, when its build-id is `id`; the refusal names both ids.
fn checked(got: &Provided, id: &str) -> Result<FileFacts, Unavailable> {
    let Some(f) = facts(&got.path) else {
        return Err(Unavailable(format!(
            "{}: {} is not a readable ELF file",
            got.origin,
            got.path.display()
        )));
    };
    match f.build_id.as_deref() {
        Some(found) if found == id => Ok(f),
        found => Err(Unavailable(format!(
            "{} served build-id {} for {id}; refused",
            got.origin,
            found.unwrap_or("(none)")
        ))),
    }
}

/// A provider's debuginfo for `id`, checked by build-id; with the provider's executable
/// as the main file when the debuginfo is a split file without code (disassembly and
/// `.eh_frame` live there).
fn provided(p: &dyn SymbolProvider, id: &str) -> Result<Lookup, Unavailable> {
    let got = match p.file(id, FileKind::Debuginfo) {
        Ok(got) => got,
        // No DWARF anywhere (a distribution binary, a stripped build): the executable still
        // has its symbol tables and `.eh_frame`, as perf would use the file itself.
        Err(why) => {
            let exe = p.file(id, FileKind::Executable).map_err(|_| why)?;
            checked(&exe, id)?;
            return Ok(Lookup::Found {
                path: exe.path,
                debug: None,
                origin: Some(exe.origin),
            });
        }
    };
    let f = checked(&got, id)?;
    if f.code {
        return Ok(Lookup::Found {
            path: got.path,
            debug: None,
            origin: Some(got.origin),
        });
    }
    let exe = p
        .file(id, FileKind::Executable)
        .ok()
        .filter(|e| checked(e, id).is_ok());
    Ok(match exe {
        Some(exe) => Lookup::Found {
            path: exe.path,
            debug: Some(got.path),
            origin: Some(got.origin),
        },
        None => Lookup::Found {
            path: got.path,
            debug: None,
            origin: Some(got.origin),
        },
    })
}

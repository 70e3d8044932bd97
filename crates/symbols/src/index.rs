//! The persistent build-id index: every ELF file under the symbol paths, by GNU build-id.
//!
//! Yocto and Buildroot trees have no `.build-id` links, so kprofctl walks them itself. The index
//! is kept on disk keyed by path, mtime and size: a second report only `stat`s the files and
//! reads the ones that changed.

use crate::elf::map_file;
use crate::error::{Error, Result};
use kprof_capture::build_id::hex;
use object::Object;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Index file format version; a file of another version is rebuilt.
const INDEX_VERSION: u32 = 2;

/// What the index knows about one ELF file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Modification time in nanoseconds since the epoch, when indexed.
    pub mtime_ns: u128,
    /// Size in bytes, when indexed.
    pub size: u64,
    /// The file is ELF; other files are remembered too so that they are not reopened.
    #[serde(default = "yes")]
    pub elf: bool,
    /// Lowercase hex, `None` for an ELF without a build-id.
    pub build_id: Option<String>,
    /// Has `.debug_info`.
    pub debug_info: bool,
    /// Has a `.symtab`.
    pub symtab: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Stored {
    version: u32,
    files: HashMap<PathBuf, Entry>,
}

/// Progress of an index update, for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// Files seen so far while walking.
    Walked(u64),
    /// ELF files (re)read so far, of how many not in the index.
    Read {
        /// Files read.
        done: u64,
        /// Files to read.
        total: u64,
    },
}

/// Build-id → files, and file name → files (to report mismatches).
#[derive(Debug, Default)]
pub struct BuildIdIndex {
    files: HashMap<PathBuf, Entry>,
    by_id: HashMap<String, Vec<PathBuf>>,
    by_name: HashMap<String, Vec<PathBuf>>,
    /// Files read (not taken from the stored index) in the last update.
    pub files_read: u64,
    /// Problems while walking, e.g. unreadable directories.
    pub warnings: Vec<String>,
}

impl BuildIdIndex {
    /// Indexes every ELF file under `roots` (files or directories), reusing and then updating
    /// the stored index at `store` when given.
    pub fn update(
        roots: &[PathBuf],
        store: Option<&Path>,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Self> {
        let mut stored = store.map(load_stored).unwrap_or_default();
        let mut seen = Vec::new();
        let mut warnings = Vec::new();
        let mut walked = 0u64;
        for root in roots {
            walk(root, &mut seen, &mut warnings, &mut walked, progress);
        }
        let mut files = HashMap::new();
        let stale: Vec<_> = seen
            .iter()
            .filter(|(p, mtime, size)| {
                !matches!(stored.files.get(p), Some(e) if e.mtime_ns == *mtime && e.size == *size)
            })
            .cloned()
            .collect();
        let total = stale.len() as u64;
        let mut done = 0u64;
        for (path, mtime, size) in &stale {
            done += 1;
            if done.is_multiple_of(64) || done == total {
                progress(Progress::Read { done, total });
            }
            let e = read_entry(path, *mtime, *size).unwrap_or(Entry {
                mtime_ns: *mtime,
                size: *size,
                elf: false,
                build_id: None,
                debug_info: false,
                symtab: false,
            });
            stored.files.insert(path.clone(), e);
        }
        for (path, _, _) in &seen {
            if let Some(e) = stored.files.get(path).filter(|e| e.elf) {
                files.insert(path.clone(), e.clone());
            }
        }
        if let Some(store) = store {
            if total > 0 {
                if let Err(e) = save_stored(store, &stored) {
                    warnings.push(format!("build-id index not saved: {e}"));
                }
            }
        }
        let mut idx = Self {
            files,
            files_read: total,
            warnings,
            ..Self::default()
        };
        idx.rebuild_maps();
        Ok(idx)
    }

    fn rebuild_maps(&mut self) {
        for (path, e) in &self.files {
            if let Some(id) = &e.build_id {
                self.by_id.entry(id.clone()).or_default().push(path.clone());
            }
            if let Some(name) = path.file_name() {
                self.by_name
                    .entry(name.to_string_lossy().into_owned())
                    .or_default()
                    .push(path.clone());
            }
        }
        for v in self.by_id.values_mut().chain(self.by_name.values_mut()) {
            v.sort();
        }
    }

    /// Number of ELF files indexed.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether no ELF file was found.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Files with this build-id, the ones with DWARF first, then with `.symtab`; among equals
    /// a file before a symbolic link to it (busybox, not one of its applet links), then the
    /// shortest path.
    pub fn by_build_id(&self, id: &str) -> Vec<(&Path, &Entry)> {
        let mut v: Vec<(&Path, &Entry)> = self
            .by_id
            .get(id)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p.as_path(), self.files.get(p)?)))
            .collect();
        v.sort_by_cached_key(|(p, e)| {
            let link = std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink());
            (!e.debug_info, !e.symtab, link, p.as_os_str().len())
        });
        v
    }

    /// Files with this file name, with their build-ids.
    pub fn by_name(&self, name: &str) -> Vec<(&Path, &Entry)> {
        self.by_name
            .get(name)
            .into_iter()
            .flatten()
            .filter_map(|p| Some((p.as_path(), self.files.get(p)?)))
            .collect()
    }
}

fn load_stored(path: &Path) -> Stored {
    let Ok(text) = std::fs::read(path) else {
        return Stored::default();
    };
    match serde_json::from_slice::<Stored>(&text) {
        Ok(s) if s.version == INDEX_VERSION => s,
        // A damaged or older index is only a cache: start over.
        _ => Stored::default(),
    }
}

fn save_stored(path: &Path, stored: &Stored) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(|e| Error::io(dir, e))?;
    let s = Stored {
        version: INDEX_VERSION,
        files: stored.files.clone(),
    };
    serde_json::to_writer(std::io::BufWriter::new(tmp.as_file_mut()), &s)
        .map_err(|e| Error::io(path, e.into()))?;
    tmp.persist(path).map_err(|e| Error::io(path, e.error))?;
    Ok(())
}

fn walk(
    root: &Path,
    out: &mut Vec<(PathBuf, u128, u64)>,
    warnings: &mut Vec<String>,
    walked: &mut u64,
    progress: &mut dyn FnMut(Progress),
) {
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        // Roots may be symlinks; below them symlinked directories are not followed (loops).
        let meta = if p == root {
            std::fs::metadata(&p)
        } else {
            std::fs::symlink_metadata(&p)
        };
        let meta = match meta {
            Ok(m) => m,
            Err(e) => {
                if p == root {
                    warnings.push(format!("symbol path {}: {e}", p.display()));
                }
                continue;
            }
        };
        if meta.is_dir() {
            match std::fs::read_dir(&p) {
                Ok(rd) => stack.extend(rd.filter_map(|e| e.ok()).map(|e| e.path())),
                Err(e) => warnings.push(format!("{}: {e}", p.display())),
            }
        } else if meta.is_file() || meta.file_type().is_symlink() {
            let Ok(meta) = std::fs::metadata(&p) else {
                continue;
            };
            if !meta.is_file() || meta.len() < 64 {
                continue;
            }
            *walked += 1;
            if (*walked).is_multiple_of(1024) {
                progress(Progress::Walked(*walked));
            }
            let mtime = meta
                .modified()
                .ok()
                .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            out.push((p, mtime, meta.len()));
        }
    }
}

/// Reads one file's entry; `None` when it is not ELF.
fn read_entry(path: &Path, mtime_ns: u128, size: u64) -> Option<Entry> {
    use std::io::Read;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .ok()?
        .read_exact(&mut magic)
        .ok()?;
    if &magic != b"\x7fELF" {
        return None;
    }
    let map = map_file(path).ok()?;
    let obj = object::File::parse(&map[..]).ok()?;
    Some(Entry {
        mtime_ns,
        size,
        elf: true,
        build_id: obj.build_id().ok().flatten().map(hex),
        debug_info: obj.section_by_name(".debug_info").is_some(),
        symtab: obj.section_by_name(".symtab").is_some(),
    })
}

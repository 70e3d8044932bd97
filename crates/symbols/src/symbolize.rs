//! Reading the samples of a capture and resolving every address to frames of an image.
//!
//! Kernel addresses go to a module (by its recorded core range, its placed sections, or the
//! owner in kallsyms) or to vmlinux (minus the KASLR offset); user addresses go through the
//! process's MMAP/MMAP2 records to a file offset and from there to the ELF's own addresses.
//! Resolutions are cached per image and address, stacks are merged per thread.

use crate::capture::Capture;
use crate::elf::{Placement, RawFrame, SymbolFile};
use crate::error::{Error, Result};
use crate::index::BuildIdIndex;
use crate::kallsyms::Kallsyms;
use crate::perf_header;
use crate::profile::{Event, Frame, Function, Image, Meta, Profile, Stack, SymbolSource, Thread};
use crate::sources::{Lookup, Sources};
use kprof_capture::manifest::parse_hex_addr;
use linux_perf_data::linux_perf_event_reader::{CpuMode, EventRecord, RecordType};
use linux_perf_data::{DsoKey, PerfFileReader, PerfFileRecord};
use std::collections::{HashMap, HashSet};
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
const PERF_RECORD_MISC_MMAP_BUILD_ID: u16 = 1 << 14;
const PROT_EXEC: u32 = 4;
/// End of a chain of stacks with one hash.
const NO_STACK: u32 = u32::MAX;

/// The frames one address resolved to: `profile.frames[start..end]`, innermost inlined
/// call first.
#[derive(Debug, Clone, Copy)]
struct FrameRun {
    start: usize,
    end: usize,
}

/// Where to look for symbols and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// Files and directories to index by build-id (`--symbols`, kprof.toml, Yocto, Buildroot).
    pub symbol_paths: Vec<PathBuf>,
    /// Where the persistent build-id index lives; `None` keeps it in memory only.
    pub index_store: Option<PathBuf>,
    /// Look into `~/.debug` and `/usr/lib/debug`.
    pub system_paths: bool,
    /// Try the path an image had on the target, and this host's kernel (`/proc/kallsyms`,
    /// `/boot/vmlinux-*`) — each used only when its build-id matches.
    pub host_files: bool,
    /// `(old, new)` prefixes rewritten in source paths.
    pub source_prefix: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            symbol_paths: Vec::new(),
            index_store: crate::index::default_store(),
            system_paths: true,
            host_files: true,
            source_prefix: Vec::new(),
        }
    }
}

/// Progress reports for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// Updating the build-id index.
    Index(crate::index::Progress),
    /// Records read from perf.data: bytes done of total.
    Samples { bytes: u64, total: u64 },
}

/// Symbolizes captures against a set of symbol paths.
pub struct Symbolizer {
    sources: Sources,
    opts: Options,
    /// Symbol files of the images of the last profile, parallel to `Profile::images`.
    files: Vec<Option<Rc<SymbolFile>>>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("indexed", &self.sources.index.len())
            .finish()
    }
}

/// Symbolizes one capture with default options plus `symbol_paths`.
pub fn symbolize(capture: &Path, symbol_paths: &[PathBuf]) -> Result<Profile> {
    let opts = Options {
        symbol_paths: symbol_paths.to_vec(),
        ..Options::default()
    };
    let mut s = Symbolizer::new(opts, &mut |_| {})?;
    s.symbolize(&Capture::open(capture)?, &mut |_| {})
}

impl Symbolizer {
    /// Indexes the symbol paths (incrementally, through the stored index).
    pub fn new(opts: Options, progress: &mut dyn FnMut(Progress)) -> Result<Self> {
        let index =
            BuildIdIndex::update(&opts.symbol_paths, opts.index_store.as_deref(), &mut |p| {
                progress(Progress::Index(p))
            })?;
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let sources = Sources {
            index,
            perf_cache: if opts.system_paths {
                home.map(|h| h.join(".debug"))
            } else {
                None
            },
            debug_roots: if opts.system_paths {
                vec![PathBuf::from("/usr/lib/debug")]
            } else {
                Vec::new()
            },
            use_recorded_paths: opts.host_files,
        };
        Ok(Self {
            sources,
            opts,
            files: Vec::new(),
        })
    }

    /// The build-id index in use.
    pub fn index(&self) -> &BuildIdIndex {
        &self.sources.index
    }

    /// The symbol file used for an image of the last profile.
    pub fn symbol_file(&self, image: usize) -> Option<&SymbolFile> {
        self.files.get(image)?.as_deref()
    }

    /// Reads every sample of the capture and resolves it.
    pub fn symbolize(
        &mut self,
        capture: &Capture,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<Profile> {
        let mut st = State::new(&self.sources, &self.opts, capture);
        st.profile
            .warnings
            .extend(self.sources.index.warnings.iter().cloned());
        read_perf_data(&mut st, capture, progress)?;
        let State { profile, files, .. } = st;
        self.files = files;
        Ok(profile)
    }
}

/// A user mapping of a process.
#[derive(Debug, Clone)]
struct Mapping {
    start: u64,
    end: u64,
    pgoff: u64,
    path: Rc<str>,
    build_id: Option<String>,
    /// The profile image, once a sample fell into the mapping.
    image: Option<usize>,
}

/// A module as recorded.
#[derive(Debug, Clone)]
struct Module {
    name: String,
    build_id: Option<String>,
    base: u64,
    size: u64,
    sections: Placement,
    recorded_path: Option<String>,
    image: Option<usize>,
}

struct State<'a> {
    sources: &'a Sources,
    opts: &'a Options,
    profile: Profile,
    files: Vec<Option<Rc<SymbolFile>>>,
    kallsyms: Option<Kallsyms>,
    kallsyms_origin: &'static str,
    kernel_build_id: Option<String>,
    kernel_text: Option<u64>,
    kernel_range: Option<(u64, u64)>,
    kernel_image: Option<usize>,
    kaslr: u64,
    modules: Vec<Module>,
    header_build_ids: HashMap<DsoKey, String>,
    procs: HashMap<i32, Vec<Mapping>>,
    comms: HashMap<i32, String>,
    threads: HashMap<(i32, i32, String), usize>,
    functions: HashMap<(usize, Option<String>), usize>,
    /// `(image, address)` → the run of `profile.frames` it resolved to. A frame's address
    /// is in its image's own address space, so one address of one image gives the same
    /// frames wherever it was mapped: frames need no other deduplication.
    resolved: HashMap<(usize, u64), FrameRun>,
    /// Hash of (thread, frames) → the newest index of `profile.stacks` with that hash;
    /// `stack_chain[i]` is the next older one. The frames are stored once, in the profile,
    /// and this costs 12–16 bytes per distinct stack (a map of vectors cost ~70).
    stacks: HashMap<u64, u32>,
    stack_chain: Vec<u32>,
    files_seen: HashSet<Arc<str>>,
    user_images: HashMap<(Rc<str>, Option<String>), usize>,
    unknown_image: Option<usize>,
    /// User images whose file has symbols but no DWARF lines, and ones without symbols.
    no_lines: Vec<String>,
    stripped: Vec<String>,
}

impl<'a> State<'a> {
    fn new(sources: &'a Sources, opts: &'a Options, capture: &Capture) -> Self {
        let mut profile = Profile {
            meta: Meta {
                capture: capture.path.display().to_string(),
                ..Meta::default()
            },
            ..Profile::default()
        };
        let mut kallsyms = None;
        let mut kallsyms_origin = "the capture's kallsyms";
        if let Some(text) = &capture.kallsyms {
            kallsyms = Kallsyms::parse(text);
            if kallsyms.is_none() {
                profile
                    .warnings
                    .push("the capture's kallsyms has only zero addresses (kptr_restrict was set on the target)".into());
            }
        }
        let mut modules = Vec::new();
        let mut kernel_build_id = None;
        let mut kernel_text = None;
        if let Some(m) = &capture.manifest {
            kernel_build_id = m.kernel.build_id.clone();
            kernel_text = m.kernel.text_addr.as_deref().and_then(parse_hex_addr);
            profile.meta.hostname = Some(m.uname.nodename.clone());
            profile.meta.os_release = Some(m.uname.release.clone());
            profile.meta.arch = Some(m.uname.machine.clone());
            profile.meta.command = m.command.as_ref().map(|c| c.argv.join(" "));
            for md in &m.modules {
                let sections = md
                    .sections
                    .iter()
                    .filter_map(|(k, v)| Some((k.clone(), parse_hex_addr(v)?)))
                    .collect();
                modules.push(Module {
                    name: md.name.clone(),
                    build_id: md.build_id.clone(),
                    base: parse_hex_addr(&md.base).unwrap_or(0),
                    size: md.size,
                    sections,
                    recorded_path: None,
                    image: None,
                });
            }
            for e in &m.events {
                if let Some(from) = &e.fallback_from {
                    profile.warnings.push(format!(
                        "event {from} could not be opened on the target ({}); {} was sampled instead",
                        e.fallback_reason.as_deref().unwrap_or("no reason recorded"),
                        e.name
                    ));
                }
            }
        }
        if kallsyms.is_none() && capture.manifest.is_none() && opts.host_files {
            kallsyms_origin = "this host's /proc/kallsyms";
        }
        Self {
            sources,
            opts,
            profile,
            files: Vec::new(),
            kallsyms,
            kallsyms_origin,
            kernel_build_id,
            kernel_text,
            kernel_range: None,
            kernel_image: None,
            kaslr: 0,
            modules,
            header_build_ids: HashMap::new(),
            procs: HashMap::new(),
            comms: HashMap::new(),
            threads: HashMap::new(),
            functions: HashMap::new(),
            resolved: HashMap::new(),
            stacks: HashMap::new(),
            stack_chain: Vec::new(),
            files_seen: HashSet::new(),
            user_images: HashMap::new(),
            unknown_image: None,
            no_lines: Vec::new(),
            stripped: Vec::new(),
        }
    }

    /// One shared copy of each source file name.
    fn intern_file(&mut self, file: String) -> Arc<str> {
        if let Some(f) = self.files_seen.get(file.as_str()) {
            return f.clone();
        }
        let f: Arc<str> = file.into();
        self.files_seen.insert(f.clone());
        f
    }

    fn rewrite_source(&self, file: Option<String>) -> Option<String> {
        let f = file?;
        for (old, new) in &self.opts.source_prefix {
            if let Some(rest) = f.strip_prefix(old.as_str()) {
                return Some(format!("{new}{rest}"));
            }
        }
        Some(f)
    }

    fn add_image(&mut self, image: Image, file: Option<SymbolFile>) -> usize {
        let name = image.name.clone();
        let quiet = name.starts_with("[vdso") || name == "[vsyscall]" || name == "[unknown]";
        match &image.symbols {
            SymbolSource::BuildId { .. } => {
                if let Some(f) = &file {
                    // User images without DWARF are the rule for distro libraries: one
                    // summary line for them; kernel images get their own.
                    if !f.has_symbols {
                        if image.kernel {
                            self.profile.warnings.push(format!(
                                "{name}: {} is stripped: no function symbols",
                                f.path.display()
                            ));
                        } else {
                            self.stripped.push(name.clone());
                        }
                    } else if !f.has_lines {
                        if image.kernel {
                            self.profile.warnings.push(format!(
                                "{name}: {} has no DWARF line info: functions without source lines",
                                f.path.display()
                            ));
                        } else {
                            self.no_lines.push(name.clone());
                        }
                    }
                }
            }
            SymbolSource::Mismatch { .. } => self
                .profile
                .warnings
                .extend(mismatch_warning(&name, &image.symbols)),
            SymbolSource::Kallsyms => {}
            SymbolSource::Missing { why } if !quiet => self
                .profile
                .warnings
                .push(format!("{name}: no symbols ({why}); addresses shown raw")),
            SymbolSource::Missing { .. } => {}
        }
        self.profile.images.push(image);
        self.files.push(file.map(Rc::new));
        self.profile.images.len() - 1
    }

    /// Opens the file a lookup found; a file that fails to load is reported as missing.
    fn open_found(
        &mut self,
        name: &str,
        lookup: Lookup,
        placement: Option<&Placement>,
    ) -> (SymbolSource, Option<SymbolFile>, Option<String>) {
        match lookup {
            Lookup::Found { path, debug } => {
                match SymbolFile::open(&path, debug.as_deref(), placement) {
                    Ok(f) => (SymbolSource::BuildId { path }, Some(f), None),
                    Err(e) => (
                        SymbolSource::Missing {
                            why: format!("{e}"),
                        },
                        None,
                        Some(format!("{name}: {e}")),
                    ),
                }
            }
            Lookup::Mismatch { path, found } => (
                SymbolSource::Mismatch {
                    path,
                    expected: String::new(),
                    found,
                },
                None,
                None,
            ),
            Lookup::Missing(why) => (SymbolSource::Missing { why }, None, None),
        }
    }

    fn kernel_image(&mut self) -> usize {
        if let Some(i) = self.kernel_image {
            return i;
        }
        let build_id = self
            .kernel_build_id
            .clone()
            .or_else(|| self.header_build_ids.get(&DsoKey::Kernel).cloned());
        let mut names = vec!["vmlinux".to_string()];
        let mut host_candidate = None;
        if self.opts.host_files {
            if let Some(rel) = self.profile.meta.os_release.clone() {
                names.push(format!("vmlinux-{rel}"));
                host_candidate = Some(PathBuf::from(format!("/usr/lib/debug/boot/vmlinux-{rel}")));
            }
        }
        let lookup = self
            .sources
            .find(build_id.as_deref(), &names, host_candidate.as_deref());
        let (mut source, file, err) = self.open_found("vmlinux", lookup, None);
        if let Some(e) = err {
            self.profile.warnings.push(e);
        }
        if let SymbolSource::Mismatch { expected, .. } = &mut source {
            *expected = build_id.clone().unwrap_or_default();
        }
        if let Some(f) = &file {
            let runtime = self.kernel_text.or_else(|| {
                self.kallsyms
                    .as_ref()
                    .and_then(|k| k.kernel_symbol("_text"))
            });
            match (runtime, f.symbol_address("_text")) {
                (Some(rt), Some(link)) => self.kaslr = rt.wrapping_sub(link),
                _ => self.profile.warnings.push(
                    "vmlinux: the runtime address of _text was not recorded: assuming no KASLR offset".into(),
                ),
            }
        }
        if file.is_none() {
            self.ensure_host_kallsyms(build_id.as_deref());
            if self.kallsyms.is_some() {
                let what = match &source {
                    SymbolSource::Missing { why } => why.clone(),
                    SymbolSource::Mismatch { path, found, .. } => {
                        format!("{} has build-id {found}", path.display())
                    }
                    _ => String::new(),
                };
                self.profile
                    .warnings
                    .extend(mismatch_warning("vmlinux", &source));
                self.profile.warnings.push(format!(
                    "vmlinux: no matching vmlinux ({what}): kernel function names from {}, no source lines",
                    self.kallsyms_origin
                ));
                source = SymbolSource::Kallsyms;
            }
        }
        let image = Image {
            name: "vmlinux".into(),
            recorded_path: "[kernel.kallsyms]".into(),
            build_id,
            kernel: true,
            symbols: source,
        };
        let i = self.add_image(image, file);
        self.kernel_image = Some(i);
        i
    }

    /// Uses this host's /proc/kallsyms for a bare perf.data when the running kernel is the
    /// recorded one (same build-id), as `perf report` does.
    fn ensure_host_kallsyms(&mut self, build_id: Option<&str>) {
        if self.kallsyms.is_some()
            || !self.opts.host_files
            || self.kallsyms_origin != "this host's /proc/kallsyms"
        {
            return;
        }
        let Some(id) = build_id else { return };
        if running_kernel_build_id().as_deref() != Some(id) {
            return;
        }
        if let Ok(text) = std::fs::read_to_string("/proc/kallsyms") {
            self.kallsyms = Kallsyms::parse(&text);
        }
    }

    fn module_image(&mut self, m: usize) -> usize {
        if let Some(i) = self.modules[m].image {
            return i;
        }
        let md = self.modules[m].clone();
        let display = format!("{}.ko", md.name);
        let names = vec![display.clone(), format!("{}.ko", md.name.replace('_', "-"))];
        let mut placement = md.sections.clone();
        if placement.is_empty() {
            // A bare perf.data has only the module's base: perf assumes .text there too.
            placement.insert(".text".into(), md.base);
            self.profile.warnings.push(format!(
                "{display}: section addresses were not recorded: .text placed at the module base {:#x}",
                md.base
            ));
        }
        let lookup = self.sources.find(
            md.build_id.as_deref(),
            &names,
            md.recorded_path.as_deref().map(Path::new),
        );
        let (mut source, file, err) = self.open_found(&display, lookup, Some(&placement));
        if let Some(e) = err {
            self.profile.warnings.push(e);
        }
        if let SymbolSource::Mismatch { expected, .. } = &mut source {
            *expected = md.build_id.clone().unwrap_or_default();
        }
        let stripped = file.as_ref().is_some_and(|f| !f.has_symbols);
        if (file.is_none() || stripped)
            && self
                .kallsyms
                .as_ref()
                .is_some_and(|k| k.has_owner(&md.name))
        {
            {
                self.profile
                    .warnings
                    .extend(mismatch_warning(&display, &source));
                let what = match (&file, &source) {
                    (Some(f), _) => {
                        format!("{} has the build-id but is stripped", f.path.display())
                    }
                    (None, SymbolSource::Missing { why }) => why.clone(),
                    _ => "no matching file".into(),
                };
                self.profile.warnings.push(format!(
                    "{display}: {what}: function names from {}, no source lines",
                    self.kallsyms_origin
                ));
                source = SymbolSource::Kallsyms;
            }
        }
        let file = if matches!(source, SymbolSource::Kallsyms) {
            None
        } else {
            file
        };
        let image = Image {
            name: display,
            recorded_path: md
                .recorded_path
                .clone()
                .unwrap_or_else(|| format!("[{}]", md.name)),
            build_id: md.build_id.clone(),
            kernel: true,
            symbols: source,
        };
        let i = self.add_image(image, file);
        self.modules[m].image = Some(i);
        i
    }

    fn unknown_image(&mut self) -> usize {
        if let Some(i) = self.unknown_image {
            return i;
        }
        let i = self.add_image(
            Image {
                name: "[unknown]".into(),
                recorded_path: "[unknown]".into(),
                build_id: None,
                kernel: false,
                symbols: SymbolSource::Missing {
                    why: "the address is in no recorded mapping".into(),
                },
            },
            None,
        );
        self.unknown_image = Some(i);
        i
    }

    fn user_image(&mut self, map: &Mapping) -> usize {
        let key = (map.path.clone(), map.build_id.clone());
        if let Some(i) = self.user_images.get(&key) {
            return *i;
        }
        let path: &str = &map.path;
        let name = path.rsplit('/').next().unwrap_or(path).to_string();
        let special = path.starts_with('[') || path.starts_with("//");
        let build_id = map.build_id.clone().or_else(|| {
            DsoKey::detect(path.as_bytes(), CpuMode::User)
                .and_then(|k| self.header_build_ids.get(&k).cloned())
        });
        let (mut source, file) = if special {
            (
                SymbolSource::Missing {
                    why: "no file on disk".into(),
                },
                None,
            )
        } else {
            let lookup = self.sources.find(
                build_id.as_deref(),
                std::slice::from_ref(&name),
                Some(Path::new(path)),
            );
            let (s, f, err) = self.open_found(&name, lookup, None);
            if let Some(e) = err {
                self.profile.warnings.push(e);
            }
            (s, f)
        };
        if let SymbolSource::Mismatch { expected, .. } = &mut source {
            *expected = build_id.clone().unwrap_or_default();
        }
        let image = Image {
            name,
            recorded_path: path.to_string(),
            build_id,
            kernel: false,
            symbols: source,
        };
        let i = self.add_image(image, file);
        self.user_images.insert(key, i);
        i
    }

    /// Which module, if any, a kernel address belongs to.
    fn module_of(&mut self, addr: u64) -> Option<usize> {
        if let Some(m) = self
            .modules
            .iter()
            .position(|m| addr >= m.base && addr < m.base.saturating_add(m.size))
        {
            return Some(m);
        }
        if let Some((lo, hi)) = self.kernel_range {
            if addr >= lo && addr < hi {
                return None;
            }
        }
        if let Some(owner) = self.kallsyms.as_ref().and_then(|k| k.owner_of(addr)) {
            if owner.is_empty() {
                return None;
            }
            if let Some(m) = self.modules.iter().position(|m| m.name == owner) {
                return Some(m);
            }
        }
        // Init code and other sections outside the core range: ask the placed module files.
        for m in 0..self.modules.len() {
            let near = self.modules[m]
                .sections
                .values()
                .any(|a| addr >= *a && addr - *a < (64 << 20));
            if !near {
                continue;
            }
            let img = self.module_image(m);
            if self.files[img]
                .as_ref()
                .is_some_and(|f| f.contains_placed(addr))
            {
                return Some(m);
            }
        }
        None
    }

    fn resolve_kernel(&mut self, addr: u64) -> FrameRun {
        let (image, lookup_addr, owner) = match self.module_of(addr) {
            Some(m) => (self.module_image(m), addr, self.modules[m].name.clone()),
            None => {
                let img = self.kernel_image();
                let a = if self.files[img].is_some() {
                    addr.wrapping_sub(self.kaslr)
                } else {
                    addr
                };
                (img, a, String::new())
            }
        };
        self.resolve_in(image, lookup_addr, &owner)
    }

    fn resolve_user(&mut self, pid: i32, addr: u64) -> FrameRun {
        let found = self.procs.get(&pid).and_then(|maps| {
            let i = maps.partition_point(|m| m.start <= addr);
            let m = maps.get(i.checked_sub(1)?)?;
            (addr < m.end).then_some((i - 1, m.start, m.pgoff, m.image))
        });
        let Some((i, start, pgoff, image)) = found else {
            let img = self.unknown_image();
            return self.resolve_in(img, addr, "");
        };
        let img = match image {
            Some(img) => img,
            None => {
                let map = self.procs[&pid][i].clone();
                let img = self.user_image(&map);
                if let Some(m) = self.procs.get_mut(&pid).and_then(|v| v.get_mut(i)) {
                    m.image = Some(img);
                }
                img
            }
        };
        let offset = (addr - start).wrapping_add(pgoff);
        let svma = self.files[img]
            .as_ref()
            .and_then(|f| f.offset_to_address(offset))
            .unwrap_or(offset);
        self.resolve_in(img, svma, "")
    }

    fn resolve_in(&mut self, image: usize, addr: u64, kallsyms_owner: &str) -> FrameRun {
        if let Some(r) = self.resolved.get(&(image, addr)) {
            return *r;
        }
        let raw: Vec<RawFrame> = if let Some(f) = &self.files[image] {
            f.frames(addr)
        } else if matches!(self.profile.images[image].symbols, SymbolSource::Kallsyms) {
            let sym = self
                .kallsyms
                .as_ref()
                .and_then(|k| k.lookup(kallsyms_owner, addr));
            vec![RawFrame {
                name: sym.map(|s| s.0.to_string()),
                func_start: sym.map(|s| s.1),
                func_size: sym.and_then(|s| s.2),
                file: None,
                line: None,
                inlined: false,
            }]
        } else {
            vec![RawFrame {
                name: None,
                func_start: None,
                func_size: None,
                file: None,
                line: None,
                inlined: false,
            }]
        };
        let start = self.profile.frames.len();
        for r in raw {
            let func = self.function(image, &r);
            let frame = Frame {
                function: func,
                address: addr,
                file: self.rewrite_source(r.file).map(|f| self.intern_file(f)),
                line: r.line,
                inlined: r.inlined,
            };
            self.profile.frames.push(frame);
        }
        let out = FrameRun {
            start,
            end: self.profile.frames.len(),
        };
        self.resolved.insert((image, addr), out);
        out
    }

    fn function(&mut self, image: usize, r: &RawFrame) -> usize {
        let key = (image, r.name.clone());
        if let Some(i) = self.functions.get(&key) {
            return *i;
        }
        let (file, line) = match (r.func_start, &self.files[image]) {
            (Some(start), Some(f)) => match f.location(start) {
                Some((file, line)) => (Some(file), Some(line)),
                None => (None, None),
            },
            _ => (None, None),
        };
        let f = Function {
            image,
            name: r.name.clone(),
            start: r.func_start.unwrap_or(0),
            size: r.func_size,
            file: self.rewrite_source(file),
            line,
        };
        self.profile.functions.push(f);
        let i = self.profile.functions.len() - 1;
        self.functions.insert(key, i);
        i
    }

    fn thread(&mut self, pid: i32, tid: i32) -> usize {
        let comm = self
            .comms
            .get(&tid)
            .or_else(|| self.comms.get(&pid))
            .cloned()
            .unwrap_or_else(|| {
                if pid == 0 {
                    "swapper".into()
                } else {
                    format!(":{tid}")
                }
            });
        let key = (pid, tid, comm);
        if let Some(i) = self.threads.get(&key) {
            return *i;
        }
        self.profile.threads.push(Thread {
            pid,
            tid,
            comm: key.2.clone(),
        });
        let i = self.profile.threads.len() - 1;
        self.threads.insert(key, i);
        i
    }

    fn add_mapping(&mut self, pid: i32, map: Mapping) {
        let maps = self.procs.entry(pid).or_default();
        maps.retain(|m| m.end <= map.start || m.start >= map.end);
        let i = maps.partition_point(|m| m.start < map.start);
        maps.insert(i, map);
    }

    fn add_kernel_mapping(&mut self, path: &str, start: u64, len: u64, pgoff: u64) {
        if path.starts_with("[kernel.kallsyms]") {
            self.kernel_range = Some((start, start.saturating_add(len)));
            if path == "[kernel.kallsyms]_text" && self.kernel_text.is_none() {
                self.kernel_text = Some(pgoff);
            }
            return;
        }
        let file = path.rsplit('/').next().unwrap_or(path);
        let name = file
            .trim_start_matches('[')
            .trim_end_matches(']')
            .trim_end_matches(".ko")
            .replace('-', "_");
        let build_id = self
            .header_build_ids
            .iter()
            .find(|(k, _)| matches!(k, DsoKey::KernelModule { name: n } if n.trim_start_matches('[').trim_end_matches(']').replace('-', "_") == name))
            .map(|(_, v)| v.clone());
        match self.modules.iter_mut().find(|m| m.name == name) {
            Some(m) => {
                if m.recorded_path.is_none() && path.starts_with('/') {
                    m.recorded_path = Some(path.to_string());
                }
            }
            None => self.modules.push(Module {
                name,
                build_id,
                base: start,
                size: len,
                sections: Placement::new(),
                recorded_path: path.starts_with('/').then(|| path.to_string()),
                image: None,
            }),
        }
    }
}

/// GNU build-id of the running kernel, from /sys/kernel/notes.
fn running_kernel_build_id() -> Option<String> {
    let notes = std::fs::read("/sys/kernel/notes").ok()?;
    let mut p = 0;
    while p + 12 <= notes.len() {
        let rd =
            |o: usize| u32::from_ne_bytes(notes[o..o + 4].try_into().expect("4 bytes")) as usize;
        let (namesz, descsz, kind) = (rd(p), rd(p + 4), rd(p + 8));
        let name_at = p + 12;
        let desc_at = name_at + namesz.div_ceil(4) * 4;
        let end = desc_at + descsz.div_ceil(4) * 4;
        if end > notes.len() {
            return None;
        }
        if kind == 3 && notes.get(name_at..name_at + 3) == Some(b"GNU") {
            return Some(crate::elf::hex(&notes[desc_at..desc_at + descsz]));
        }
        p = end;
    }
    None
}

fn event_name(attr: &linux_perf_data::AttributeDescription, i: usize, capture: &Capture) -> String {
    if let Some(m) = &capture.manifest {
        if let Some(e) = m.events.get(i) {
            return e.name.clone();
        }
    }
    if let Some(n) = &attr.name {
        return n.clone();
    }
    use linux_perf_data::linux_perf_event_reader::PerfEventType;
    match attr.attr.type_ {
        PerfEventType::Software(c) => format!("{c:?}")
            .to_lowercase()
            .replace("cpuclock", "cpu-clock")
            .replace("taskclock", "task-clock"),
        PerfEventType::Hardware(h, _) => format!("{h:?}").to_lowercase(),
        other => format!("{other:?}"),
    }
}

/// Kernel record types (below 64) and perf's own (64 up), with room for new ones, and
/// simpleperf's (from 32768).
fn known_record_type(t: u32) -> bool {
    (1..128).contains(&t) || (32768..32768 + 128).contains(&t)
}

/// Whether a SAMPLE record's call chain length fits in the record; the parser multiplies it
/// unchecked. The READ block before it is walked the way the parser reads it.
fn callchain_fits(record: &linux_perf_data::linux_perf_event_reader::RawEventRecord<'_>) -> bool {
    use linux_perf_data::linux_perf_event_reader::{ReadFormat as R, SampleFormat as F};
    let f = record.parse_info.sample_format;
    if !f.contains(F::CALLCHAIN) {
        return true;
    }
    let data = record.data.as_slice();
    let u64_at = |at: usize| -> Option<u64> {
        let b: [u8; 8] = data.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(match record.parse_info.endian {
            linux_perf_data::Endianness::LittleEndian => u64::from_le_bytes(b),
            linux_perf_data::Endianness::BigEndian => u64::from_be_bytes(b),
        })
    };
    let mut at = [
        F::IDENTIFIER,
        F::IP,
        F::TID,
        F::TIME,
        F::ADDR,
        F::ID,
        F::STREAM_ID,
        F::CPU,
        F::PERIOD,
    ]
    .iter()
    .filter(|x| f.contains(**x))
    .count()
        * 8;
    if f.contains(F::READ) {
        let r = record.parse_info.read_format;
        let times = [R::TOTAL_TIME_ENABLED, R::TOTAL_TIME_RUNNING]
            .iter()
            .filter(|x| r.contains(**x))
            .count()
            * 8;
        let id = if r.contains(R::ID) { 8 } else { 0 };
        if r.contains(R::GROUP) {
            at += 8 + times + id;
        } else {
            let Some(nr) = u64_at(at) else {
                return false;
            };
            let values = usize::try_from(nr)
                .ok()
                .and_then(|nr| nr.checked_mul(8 + id))
                .and_then(|v| v.checked_add(at + 8 + times));
            match values {
                Some(end) if end <= data.len() => at = end,
                _ => return false,
            }
        }
    }
    let Some(nr) = u64_at(at) else {
        return false;
    };
    let room = (data.len() - at - 8) as u64 / 8;
    nr <= room
}

fn read_perf_data(
    st: &mut State<'_>,
    capture: &Capture,
    progress: &mut dyn FnMut(Progress),
) -> Result<()> {
    let path = &capture.perf_data;
    let shown = capture.path.clone();
    let bad = |why: String| Error::BadPerfData {
        path: shown.clone(),
        why,
    };
    let mut file = std::fs::File::open(path).map_err(|e| Error::io(&shown, e))?;
    let len = file.metadata().map_err(|e| Error::io(&shown, e))?.len();
    let header = perf_header::check(&mut file, len).map_err(bad)?;
    let total = header.data.size;
    std::io::Seek::rewind(&mut file).map_err(|e| Error::io(&shown, e))?;
    let reader = BufReader::with_capacity(1 << 20, file);
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(reader).map_err(|e| bad(e.to_string()))?;
    if let Ok(ids) = perf_file.build_ids() {
        for (k, v) in ids {
            st.header_build_ids.insert(k, crate::elf::hex(&v.build_id));
        }
    }
    if st.profile.meta.hostname.is_none() {
        st.profile.meta.hostname = perf_file.hostname().ok().flatten().map(str::to_string);
        st.profile.meta.os_release = perf_file.os_release().ok().flatten().map(str::to_string);
        st.profile.meta.arch = perf_file.arch().ok().flatten().map(str::to_string);
        st.profile.meta.command = perf_file.cmdline().ok().flatten().map(|v| v.join(" "));
    }
    let attrs = perf_file.event_attributes().to_vec();
    if attrs.is_empty() {
        return Err(bad("no event attributes".into()));
    }
    for (i, a) in attrs.iter().enumerate() {
        st.profile.events.push(Event {
            name: event_name(a, i, capture),
            total_samples: 0,
            total_period: 0,
        });
    }
    let nev = attrs.len();
    let mut samples = 0u64;
    let mut bytes = 0u64;
    let mut damaged = None;
    let mut stack_buf: Vec<usize> = Vec::with_capacity(128);
    loop {
        let rec = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                damaged = Some(e.to_string());
                break;
            }
        };
        let record_type = match &rec {
            PerfFileRecord::EventRecord { record, .. } => record.record_type.0,
            PerfFileRecord::UserRecord(u) => u.record_type.record_type().0,
        };
        // The reader stops at the end of the data section without complaint when a damaged
        // size field made it read past it, so an impossible type is the sign left to see.
        if !known_record_type(record_type) {
            damaged.get_or_insert_with(|| format!("record of unknown type {record_type}"));
            continue;
        }
        let PerfFileRecord::EventRecord { attr_index, record } = rec else {
            continue;
        };
        bytes = bytes.saturating_add(record.data.len() as u64 + 8);
        if samples.is_multiple_of(65536) {
            progress(Progress::Samples {
                bytes: bytes.min(total),
                total,
            });
        }
        if record.record_type == RecordType::MMAP2
            && record.misc & PERF_RECORD_MISC_MMAP_BUILD_ID != 0
        {
            // linux-perf-event-reader asserts on a build-id longer than 20 bytes.
            let len_byte = record.data.get(32..33).map(|d| d.as_slice()[0]);
            if len_byte.is_none_or(|l| l > 20) {
                damaged.get_or_insert_with(|| "MMAP2 record with a bad build-id length".into());
                continue;
            }
        }
        if record.record_type == RecordType::SAMPLE && !callchain_fits(&record) {
            damaged.get_or_insert_with(|| "sample with a call chain longer than its record".into());
            continue;
        }
        // The record parser indexes and multiplies lengths from the file; a damaged record
        // must end as a damaged record, not as a crash of the report.
        let parsed = match crate::quiet_panic::catch_quietly(|| record.parse()) {
            Some(Ok(p)) => p,
            Some(Err(e)) => {
                damaged.get_or_insert_with(|| format!("unparsable record: {e}"));
                continue;
            }
            None => {
                damaged.get_or_insert_with(|| "record with impossible lengths".into());
                continue;
            }
        };
        match parsed {
            EventRecord::Sample(s) => {
                let e = attr_index.min(nev - 1);
                samples += 1;
                st.profile.events[e].total_samples += 1;
                st.profile.events[e].total_period = st.profile.events[e]
                    .total_period
                    .saturating_add(s.period.unwrap_or(1));
                let pid = s.pid.unwrap_or(-1);
                let tid = s.tid.unwrap_or(pid);
                let thread = st.thread(pid, tid);
                stack_buf.clear();
                let mut kernel = matches!(s.cpu_mode, CpuMode::Kernel);
                let push =
                    |st: &mut State<'_>, kernel: bool, addr: u64, stack_buf: &mut Vec<usize>| {
                        let frames = if kernel {
                            st.resolve_kernel(addr)
                        } else {
                            st.resolve_user(pid, addr)
                        };
                        stack_buf.extend(frames.start..frames.end);
                    };
                match &s.callchain {
                    Some(cc) if !cc.is_empty() => {
                        let mut first = true;
                        for i in 0..cc.len() {
                            let Some(v) = cc.get(i) else { break };
                            if v >= PERF_CONTEXT_MAX {
                                kernel = v == PERF_CONTEXT_KERNEL;
                                if v != PERF_CONTEXT_KERNEL && v != PERF_CONTEXT_USER {
                                    kernel = false;
                                }
                                continue;
                            }
                            // Return addresses point after the call: look up the call itself.
                            let a = if first { v } else { v.saturating_sub(1) };
                            first = false;
                            push(st, kernel, a, &mut stack_buf);
                        }
                    }
                    _ => {
                        if let Some(ip) = s.ip {
                            push(st, kernel, ip, &mut stack_buf);
                        }
                    }
                }
                let hash = {
                    use std::hash::{Hash, Hasher};
                    let mut h = std::collections::hash_map::DefaultHasher::new();
                    thread.hash(&mut h);
                    stack_buf.hash(&mut h);
                    h.finish()
                };
                let stacks = &st.profile.stacks;
                let head = st.stacks.get(&hash).copied().unwrap_or(NO_STACK);
                let found =
                    std::iter::successors(Some(head), |i| st.stack_chain.get(*i as usize).copied())
                        .take_while(|i| *i != NO_STACK)
                        .map(|i| i as usize)
                        .find(|i| stacks[*i].thread == thread && stacks[*i].frames == stack_buf);
                let idx = match found {
                    Some(i) => i,
                    None => {
                        st.profile.stacks.push(Stack {
                            frames: stack_buf.clone(),
                            thread,
                            counts: vec![0; nev],
                        });
                        let i = st.profile.stacks.len() - 1;
                        st.stack_chain.push(head);
                        if let Ok(i) = u32::try_from(i) {
                            st.stacks.insert(hash, i);
                        }
                        i
                    }
                };
                st.profile.stacks[idx].counts[e] += 1;
            }
            EventRecord::Comm(c) => {
                let name = String::from_utf8_lossy(&c.name.as_slice()).into_owned();
                if c.is_execve {
                    st.procs.remove(&c.pid);
                }
                st.comms.insert(c.tid, name);
            }
            EventRecord::Fork(f) => {
                if f.pid != f.ppid && !st.procs.contains_key(&f.pid) {
                    if let Some(maps) = st.procs.get(&f.ppid).cloned() {
                        st.procs.insert(f.pid, maps);
                    }
                }
                if let Some(c) = st.comms.get(&f.ptid).cloned() {
                    st.comms.entry(f.tid).or_insert(c);
                }
            }
            EventRecord::Mmap(m) => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                if m.pid == -1 || matches!(m.cpu_mode, CpuMode::Kernel) {
                    st.add_kernel_mapping(&path, m.address, m.length, m.page_offset);
                } else if m.is_executable {
                    st.add_mapping(
                        m.pid,
                        Mapping {
                            start: m.address,
                            end: m.address.saturating_add(m.length),
                            pgoff: m.page_offset,
                            path: path.into(),
                            build_id: None,
                            image: None,
                        },
                    );
                }
            }
            EventRecord::Mmap2(m) => {
                let path = String::from_utf8_lossy(&m.path.as_slice()).into_owned();
                if m.pid == -1 || matches!(m.cpu_mode, CpuMode::Kernel) {
                    st.add_kernel_mapping(&path, m.address, m.length, m.page_offset);
                } else if m.protection & PROT_EXEC != 0 {
                    let build_id = match &m.file_id {
                        linux_perf_data::linux_perf_event_reader::Mmap2FileId::BuildId(b) => {
                            Some(crate::elf::hex(b))
                        }
                        _ => None,
                    };
                    st.add_mapping(
                        m.pid,
                        Mapping {
                            start: m.address,
                            end: m.address.saturating_add(m.length),
                            pgoff: m.page_offset,
                            path: path.into(),
                            build_id,
                            image: None,
                        },
                    );
                }
            }
            EventRecord::Lost(l) => {
                st.profile.meta.lost_samples = st.profile.meta.lost_samples.saturating_add(l.count)
            }
            _ => {}
        }
    }
    progress(Progress::Samples {
        bytes: total,
        total,
    });
    for (list, what) in [
        (&st.stripped, "stripped (no function symbols; install their -dbg packages or add unstripped files with --symbols)"),
        (&st.no_lines, "without DWARF line info (functions, no source lines)"),
    ] {
        if !list.is_empty() {
            let mut names = list.iter().take(8).cloned().collect::<Vec<_>>().join(", ");
            if list.len() > 8 {
                names.push_str(&format!(" and {} more", list.len() - 8));
            }
            let n = list.len();
            st.profile.warnings.push(format!("{n} user image(s) {what}: {names}"));
        }
    }
    // perf adds a `dummy` event to system-wide recordings for side-band records only.
    let keep: Vec<usize> = (0..st.profile.events.len())
        .filter(|i| {
            let e = &st.profile.events[*i];
            !(e.total_samples == 0 && e.name.starts_with("dummy"))
        })
        .collect();
    if keep.len() < st.profile.events.len() && !keep.is_empty() {
        st.profile.events = keep.iter().map(|i| st.profile.events[*i].clone()).collect();
        for s in &mut st.profile.stacks {
            s.counts = keep.iter().map(|i| s.counts[*i]).collect();
        }
    }
    if let Some(why) = damaged {
        if samples == 0 {
            return Err(bad(format!("{why} (no sample could be read)")));
        }
        st.profile.warnings.push(format!(
            "{}: perf.data is damaged ({why}); showing the {samples} samples read before it",
            shown.display()
        ));
    }
    if st.profile.meta.lost_samples > 0 {
        st.profile.warnings.push(format!(
            "the kernel lost {} samples (the ring buffer overflowed): lower the frequency or raise the buffer size",
            st.profile.meta.lost_samples
        ));
    }
    if samples == 0 {
        st.profile
            .warnings
            .push("the capture has no samples".into());
    }
    Ok(())
}

/// The warning for a symbol file with the right name and another build-id, which is not used.
fn mismatch_warning(image: &str, source: &SymbolSource) -> Option<String> {
    match source {
        SymbolSource::Mismatch {
            path,
            expected,
            found,
        } => Some(format!(
            "{image}: {} has build-id {found}, the capture recorded {expected}: not used",
            path.display()
        )),
        _ => None,
    }
}

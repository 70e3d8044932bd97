//! Reading the samples of a capture and resolving every address to frames of an image.
//!
//! Kernel addresses go to a module (by its recorded core range, its placed sections, or the
//! owner in kallsyms) or to vmlinux (minus the KASLR offset); user addresses go through the
//! process's MMAP/MMAP2 records to a file offset and from there to the ELF's own addresses.
//! Resolutions are cached per image and address, stacks are merged per thread.
//!
//! - [`records`]: what each perf record does to the state (record dispatch);
//! - [`address_space`]: user mappings, kernel modules, KASLR and module placement;
//! - [`images`]: finding and loading the symbol file of an image by build-id;
//! - [`resolve`]: an address of an image to frames and functions;
//! - [`stacks`]: threads and the interning of sampled stacks;
//! - [`timeline`]: capture start, the samples' times and the markers;
//! - [`unwind`]: kernel callchain + unwound user frames, marked ends, aarch64 LR callers.

mod address_space;
mod call_paths;
mod images;
mod off_cpu;
mod prefetch;
mod records;
mod resolve;
mod stacks;
mod timeline;

use crate::capture::Capture;
use crate::elf::SymbolFile;
use crate::error::Result;
use crate::index::BuildIdIndex;
use crate::kallsyms::Kallsyms;
use crate::profile::{Meta, Profile};
use crate::provider::SymbolProvider;
use crate::sources::Sources;
use address_space::{Mapping, Module};
use kprof_capture::manifest::parse_hex_addr;
use linux_perf_data::DsoKey;
use resolve::FrameRun;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// Where kernel names come from when kallsyms stands in for vmlinux, as warnings say it.
const CAPTURE_KALLSYMS: &str = "the capture's kallsyms";
/// See [`CAPTURE_KALLSYMS`].
const HOST_KALLSYMS: &str = "this host's /proc/kallsyms";

/// Where to look for symbols and how. The library looks only where these say: the caller
/// (kprofctl) decides which host directories and host kernel facts count.
///
/// The default indexes nothing, keeps the index in memory and uses no host file.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Files and directories to index by build-id (`--symbols`, kprof.toml, Yocto, Buildroot).
    pub symbol_paths: Vec<PathBuf>,
    /// Where the persistent build-id index lives; `None` keeps it in memory only.
    pub index_store: Option<PathBuf>,
    /// perf's build-id cache (`~/.debug`), looked up by build-id.
    pub perf_cache: Option<PathBuf>,
    /// Roots of split debug files (`/usr/lib/debug`): their `.build-id/` trees and the
    /// directories `.gnu_debuglink` names are looked up below them.
    pub debug_roots: Vec<PathBuf>,
    /// Try the path an image had on the target, used only when its build-id matches (a
    /// perf.data recorded on this host).
    pub host_files: bool,
    /// This host's kernel, for a bare perf.data recorded on this host; used only when its
    /// build-id is the recorded one.
    pub host_kernel: Option<HostKernel>,
    /// `(old, new)` prefixes rewritten in source paths.
    pub source_prefix: Vec<(String, String)>,
    /// Asked, in order, for the symbol files and sources none of the places above has
    /// (kprofctl's debuginfod client).
    pub providers: Vec<Arc<dyn SymbolProvider>>,
}

/// Facts about the kernel running on this host, gathered by the caller.
#[derive(Debug, Clone, Default)]
pub struct HostKernel {
    /// Its GNU build-id (from `/sys/kernel/notes`), lowercase hex.
    pub build_id: Option<String>,
    /// Its symbol table (`/proc/kallsyms`), read only when the capture's kernel is this one
    /// and no vmlinux matches.
    pub kallsyms: Option<PathBuf>,
    /// Where distributions put the vmlinux of a release (`/usr/lib/debug/boot`): the file
    /// `vmlinux-<release>` there is tried for the capture's release.
    pub vmlinux_dir: Option<PathBuf>,
}

/// Progress reports for a progress bar.
#[derive(Debug, Clone, Copy)]
pub enum Progress {
    /// Updating the build-id index.
    Index(crate::index::Progress),
    /// Records read from perf.data: bytes done of total.
    Samples {
        /// Bytes of records read.
        bytes: u64,
        /// Size of the data section.
        total: u64,
    },
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

/// Symbolizes one capture against `symbol_paths` only (the default [`Options`]).
pub fn symbolize(capture: &Path, symbol_paths: &[PathBuf]) -> Result<Profile> {
    let opts = Options {
        symbol_paths: symbol_paths.to_vec(),
        ..Options::default()
    };
    let mut s = Symbolizer::new(opts, &mut |_| {})?;
    s.symbolize(&Capture::open(capture)?, &mut |_| {})
}

impl crate::annotate::SourceReader for Symbolizer {
    /// This host's disk, then the symbol providers.
    fn read_source(&self, build_id: Option<&str>, path: &str) -> Result<String, String> {
        let disk = match std::fs::read_to_string(path) {
            Ok(text) => return Ok(text),
            Err(e) => e.to_string(),
        };
        match build_id {
            Some(id) if !self.sources.providers.is_empty() => self
                .sources
                .provided_source(id, path)
                .map_err(|why| format!("{disk}; {why}")),
            _ => Err(disk),
        }
    }
}

impl Symbolizer {
    /// Indexes the symbol paths (incrementally, through the stored index).
    pub fn new(opts: Options, progress: &mut dyn FnMut(Progress)) -> Result<Self> {
        let index =
            BuildIdIndex::update(&opts.symbol_paths, opts.index_store.as_deref(), &mut |p| {
                progress(Progress::Index(p))
            })?;
        let sources = Sources {
            index,
            perf_cache: opts.perf_cache.clone(),
            debug_roots: opts.debug_roots.clone(),
            use_recorded_paths: opts.host_files,
            providers: opts.providers.clone(),
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
        records::read_perf_data(&mut st, capture, progress)?;
        st.profile.warnings.extend(self.sources.provider_warnings());
        let State { profile, files, .. } = st;
        self.files = files;
        Ok(profile)
    }
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
    /// Shared between a parent and the children it forked until one of them maps or unmaps
    /// something: a FORK copies nothing, so many forks of a process with many mappings cost
    /// one list, not one per child.
    procs: HashMap<i32, Rc<Vec<Mapping>>>,
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
    /// Per event: the period a sample stands for when samples carry no PERF_SAMPLE_PERIOD
    /// (a fixed `sample_period`); `None` in frequency mode, where it is unknown.
    fixed_periods: Vec<Option<u64>>,
    /// PERF_RECORD_THROTTLE records per event, for a perf.data without a manifest.
    throttles: Vec<u64>,
    /// framehop's unwinder per process, dropped when its mappings change.
    unwinders: HashMap<i32, crate::unwind::ProcessUnwinder>,
    /// The CFI of each image, once looked for.
    cfis: HashMap<usize, Option<Rc<crate::unwind::Cfi>>>,
    /// Marked frames by name, and their pseudo-image.
    markers: HashMap<String, FrameRun>,
    marker_image: Option<usize>,
    unwind_stats: call_paths::UnwindStats,
    clock: timeline::Clock,
    switches: off_cpu::Switches,
}

impl<'a> State<'a> {
    // TODO(issue 21 item 6): over 80 lines; being split in crates/symbols' own branch.
    #[allow(clippy::too_many_lines)]
    fn new(sources: &'a Sources, opts: &'a Options, capture: &Capture) -> Self {
        let mut profile = Profile {
            meta: Meta {
                capture: capture.path.display().to_string(),
                ..Meta::default()
            },
            ..Profile::default()
        };
        let mut kallsyms = None;
        let mut kallsyms_origin = CAPTURE_KALLSYMS;
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
            profile.meta.workload_pid = m.command.as_ref().and_then(|c| c.pid);
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
        if kallsyms.is_none() && capture.manifest.is_none() && opts.host_kernel.is_some() {
            kallsyms_origin = HOST_KALLSYMS;
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
            fixed_periods: Vec::new(),
            throttles: Vec::new(),
            unwinders: HashMap::new(),
            cfis: HashMap::new(),
            markers: HashMap::new(),
            marker_image: None,
            unwind_stats: call_paths::UnwindStats::default(),
            clock: timeline::Clock::new(
                capture
                    .manifest
                    .as_ref()
                    .and_then(|m| m.command.as_ref()?.pid),
            ),
            switches: off_cpu::Switches::default(),
        }
    }
}

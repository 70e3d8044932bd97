//! Reading the samples of a capture and resolving every address to frames of an image.
//!
//! Kernel addresses go to a module (by its recorded core range, its placed sections, or the
//! owner in kallsyms) or to vmlinux (minus the KASLR offset); user addresses go through the
//! process's MMAP/MMAP2 records to a file offset and from there to the ELF's own addresses.
//! Resolutions are cached per image and address, stacks are merged per thread.
//!
//! `State` is the profile being built and the parts that build it, each owning its state and
//! taking what else it needs as arguments:
//!
//! - [`kernel_space`]: `KernelSpace`, vmlinux and the modules as recorded, kallsyms, and
//!   the KASLR offset;
//! - [`user_space`]: `UserSpace`, each process's mappings, its unwinder, the CFI of images;
//! - [`images`]: `ImageLoader`, finding and loading the symbol file of an image by build-id;
//! - [`resolve`]: `Frames`, an address of an image to frames and functions;
//! - [`stacks`]: `StackInterner`, threads and the interning of sampled stacks.
//!
//! And the steps that use them:
//!
//! - [`records`]: what each perf record does to the state (record dispatch);
//! - [`events`]: event names and periods from the header, event warnings at the end;
//! - [`address_space`]: a sampled address to its image and frames, kernel or user;
//! - [`call_paths`]: kernel callchain + unwound user frames, marked ends, aarch64 LR callers;
//! - [`timeline`]: capture start, the samples' times and the markers;
//! - [`off_cpu`]: context switches paired into blocked spans;
//! - [`latency`]: probe and wait samples paired into calls and waits;
//! - [`marks`]: other tracepoint samples (`trace_marker` lines, `-e SUBSYS:EVENT`) as marks.

mod address_space;
mod call_paths;
mod events;
mod images;
mod kernel_space;
mod latency;
mod marks;
mod off_cpu;
mod prefetch;
mod records;
mod resolve;
mod stacks;
mod timeline;
mod user_space;

use crate::capture::Capture;
use crate::elf::SymbolFile;
use crate::error::Result;
use crate::index::BuildIdIndex;
use crate::profile::{Meta, Profile};
use crate::provider::SymbolProvider;
use crate::sources::Sources;
use images::ImageLoader;
use kernel_space::KernelSpace;
use resolve::{Frames, SourcePaths};
use stacks::StackInterner;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;
use user_space::UserSpace;

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
    /// Directories of symbol files that came from elsewhere (unpacked perf archives, the
    /// debuginfod cache): the absolute source paths their debug info names are not read from
    /// this host's disk, only below the directory itself or a `source_prefix` new root (and
    /// from the providers).
    pub foreign_roots: Vec<PathBuf>,
    /// Asked, in order, for the symbol files and sources none of the places above has
    /// (kprofctl's debuginfod client).
    pub providers: Vec<Arc<dyn SymbolProvider>>,
    /// Keep only the merged stacks: [`Profile::samples`] stays empty, so memory follows the
    /// distinct stacks and not the sample count, for callers that show no timeline, `--time`
    /// window or per-sample export. Ignored for a capture with context switches, whose
    /// off-CPU pairing needs the on-CPU sample times.
    pub skip_sample_records: bool,
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
    /// This host's name (`uname -n`): a capture recorded under it was made here, and the
    /// paths it recorded may be opened when it recorded no build-ids.
    pub nodename: Option<String>,
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
    /// This host's disk, then the symbol providers. For a symbol file from elsewhere the
    /// disk is read only below its own directory or a `--source-prefix` root.
    fn read_source(
        &self,
        build_id: Option<&str>,
        path: &str,
    ) -> Result<String, crate::provider::Unavailable> {
        let disk = match self.foreign_root(build_id) {
            Some(root) if !self.named_source_root(Path::new(path), &root) => format!(
                "not read from this host: the symbol file came from {} and names this path \
                 itself",
                root.display()
            ),
            _ => match crate::source_file::read(Path::new(path)) {
                Ok(text) => return Ok(text),
                Err(e) => e.0,
            },
        };
        match build_id {
            Some(id) if !self.sources.providers.is_empty() => self
                .sources
                .provided_source(id, path)
                .map_err(|why| crate::provider::Unavailable(format!("{disk}; {why}"))),
            _ => Err(crate::provider::Unavailable(disk)),
        }
    }
}

impl Symbolizer {
    /// The foreign root ([`Options::foreign_roots`]) the symbol file of `build_id` is in.
    fn foreign_root(&self, build_id: Option<&str>) -> Option<PathBuf> {
        let id = build_id?;
        let file = self
            .files
            .iter()
            .flatten()
            .find(|f| f.build_id.as_deref() == Some(id))?;
        let paths = std::iter::once(&file.path).chain(file.debug_path.as_ref());
        for p in paths {
            let real = p.canonicalize().unwrap_or_else(|_| p.clone());
            for root in &self.opts.foreign_roots {
                let real_root = root.canonicalize().unwrap_or_else(|_| root.clone());
                if p.starts_with(root) || real.starts_with(&real_root) {
                    return Some(root.clone());
                }
            }
        }
        None
    }

    /// Whether `path` is below `root` (an unpacked archive's own files) or a root the user
    /// named with `--source-prefix OLD=NEW`.
    fn named_source_root(&self, path: &Path, root: &Path) -> bool {
        let mut roots: Vec<&Path> = self
            .opts
            .source_prefix
            .iter()
            .map(|(_, new)| Path::new(new.as_str()))
            .filter(|r| !r.as_os_str().is_empty())
            .collect();
        roots.push(root);
        crate::source_file::is_below(path, &roots)
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

    /// The symbol file with GNU build-id `build_id` (a file named `name` on the target),
    /// looked up as a capture's images are: the symbol paths, `~/.debug`, the debug roots,
    /// the providers. Why there is none, in words, otherwise.
    pub fn symbol_file_of(
        &self,
        build_id: &str,
        name: &str,
    ) -> std::result::Result<SymbolFile, String> {
        match self.sources.find(Some(build_id), &[name.to_string()], None) {
            crate::sources::Lookup::Found { path, debug, .. } => {
                SymbolFile::open(&path, debug.as_deref(), None).map_err(|e| e.to_string())
            }
            crate::sources::Lookup::Mismatch { path, found } => Err(format!(
                "only {} has that name, with build-id {found}",
                path.display()
            )),
            crate::sources::Lookup::Unverified { .. } => {
                Err("no file with that build-id".to_string())
            }
            crate::sources::Lookup::Missing(why) => Err(why),
        }
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
        let State {
            mut profile,
            images,
            ..
        } = st;
        for f in images.files.iter().flatten() {
            let deep = f.units_too_deep();
            if deep > 0 {
                profile.warnings.push(format!(
                    "{}: {deep} compilation unit(s) nest DWARF entries deeper than {} levels: \
                     their inlined calls and declarations are not read (function names and \
                     lines still are)",
                    f.debug_path.as_ref().unwrap_or(&f.path).display(),
                    crate::elf::MAX_DIE_DEPTH
                ));
            }
        }
        self.files = images.files;
        Ok(profile)
    }
}

/// What reading the records builds up: the profile, and the parts that resolve addresses
/// into it, each with its own job.
struct State<'a> {
    profile: Profile,
    /// vmlinux, modules, kallsyms, KASLR.
    kernel: KernelSpace,
    /// Each process's mappings, unwinders and CFI.
    user: UserSpace,
    /// Images and their symbol files, found by build-id.
    images: ImageLoader<'a>,
    /// Addresses of images to frames and functions.
    frames: Frames<'a>,
    /// Threads and sampled stacks.
    stacks: StackInterner,
    /// Per event: the period a sample stands for when samples carry no PERF_SAMPLE_PERIOD
    /// (a fixed `sample_period`); `None` in frequency mode, where it is unknown.
    fixed_periods: Vec<Option<u64>>,
    /// PERF_RECORD_THROTTLE records per event, for a perf.data without a manifest.
    throttles: Vec<u64>,
    clock: timeline::Clock,
    switches: off_cpu::Switches,
    /// Tracepoint events that make marks, not samples.
    marks: marks::Marks,
    /// Probe and wait events, paired into calls and waits.
    probes: latency::Probes,
    /// [`Options::skip_sample_records`].
    skip_sample_records: bool,
}

impl<'a> State<'a> {
    fn new(sources: &'a Sources, opts: &'a Options, capture: &Capture) -> Self {
        let mut profile = Profile {
            meta: meta_of(capture),
            ..Profile::default()
        };
        let kernel =
            KernelSpace::of_capture(capture, opts.host_kernel.is_some(), &mut profile.warnings);
        for e in capture.manifest.iter().flat_map(|m| &m.events) {
            if let Some(from) = &e.fallback_from {
                profile.warnings.push(format!(
                    "event {from} could not be opened on the target ({}); {} was sampled instead",
                    e.fallback_reason.as_deref().unwrap_or("no reason recorded"),
                    e.name
                ));
            }
        }
        let source_paths = SourcePaths(&opts.source_prefix);
        let workload_pid = capture
            .manifest
            .as_ref()
            .and_then(|m| m.command.as_ref()?.pid);
        Self {
            profile,
            kernel,
            user: UserSpace::default(),
            images: ImageLoader::new(sources, opts.host_kernel.as_ref(), source_paths),
            frames: Frames::new(source_paths),
            stacks: StackInterner::default(),
            fixed_periods: Vec::new(),
            throttles: Vec::new(),
            clock: timeline::Clock::new(workload_pid),
            switches: off_cpu::Switches::default(),
            marks: marks::Marks::default(),
            probes: latency::Probes::default(),
            skip_sample_records: opts.skip_sample_records,
        }
    }
}

/// What the capture's manifest says about where and what it recorded.
fn meta_of(capture: &Capture) -> Meta {
    let mut meta = Meta {
        capture: capture.path.display().to_string(),
        ..Meta::default()
    };
    if let Some(m) = &capture.manifest {
        meta.hostname = Some(m.uname.nodename.clone());
        meta.os_release = Some(m.uname.release.clone());
        meta.arch = Some(m.uname.machine.clone());
        meta.command = m.command.as_ref().map(|c| c.argv.join(" "));
        meta.workload_pid = m.command.as_ref().and_then(|c| c.pid);
    }
    meta
}

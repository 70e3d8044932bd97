//! Finding and loading the symbol file of each image (vmlinux, a module, a user ELF) by its
//! build-id, with kallsyms as the fallback for kernel images, and the warnings that say
//! which images have no or partial symbols.

use super::call_paths::MARKER_IMAGE;
use super::kernel_space::KernelSpace;
use super::resolve::SourcePaths;
use super::user_space::Mapping;
use crate::elf::{Placement, SymbolFile};
use crate::profile::{Image, ImageWarning, Profile, SymbolSource};
use crate::sources::{Lookup, Sources};
use crate::HostKernel;
use linux_perf_data::linux_perf_event_reader::CpuMode;
use linux_perf_data::DsoKey;
use std::collections::HashMap;
use std::path::Path;
use std::rc::Rc;

/// Kinds of [`ImageWarning`] for user images; kernel images get their own warning lines.
const STRIPPED: &str = "user images stripped (no function symbols; install their -dbg packages or add unstripped files with --symbols)";
const NO_LINES: &str = "user images without DWARF line info (functions, no source lines)";
const UNVERIFIED: &str = "user images matched by recorded path only (unverified: no build-id recorded; perf would use the same files)";

/// Notes that user image `name` lacks what `kind` says, to be shown grouped by kind.
fn note_image(profile: &mut Profile, kind: &str, name: &str) {
    profile.image_warnings.push(ImageWarning {
        kind: kind.to_owned(),
        image: name.to_owned(),
        count: None,
    });
}

/// The images of a profile and their symbol files: each looked for once, by build-id, where
/// `sources` says.
pub(super) struct ImageLoader<'a> {
    sources: &'a Sources,
    host_kernel: Option<&'a HostKernel>,
    source_paths: SourcePaths<'a>,
    /// The symbol file of each image, parallel to `Profile::images`.
    pub(super) files: Vec<Option<Rc<SymbolFile>>>,
    /// Build-ids from the perf.data header (HEADER_BUILD_ID and its records).
    pub(super) header_build_ids: HashMap<DsoKey, String>,
    user_images: HashMap<(Rc<str>, Option<String>), usize>,
    unknown_image: Option<usize>,
    marker_image: Option<usize>,
}

impl<'a> ImageLoader<'a> {
    /// A loader looking where `sources` say, at this host's kernel only when `host_kernel`
    /// is given.
    pub(super) fn new(
        sources: &'a Sources,
        host_kernel: Option<&'a HostKernel>,
        source_paths: SourcePaths<'a>,
    ) -> Self {
        Self {
            sources,
            host_kernel,
            source_paths,
            files: Vec::new(),
            header_build_ids: HashMap::new(),
            user_images: HashMap::new(),
            unknown_image: None,
            marker_image: None,
        }
    }

    /// Where symbol files are looked for.
    pub(super) fn sources(&self) -> &'a Sources {
        self.sources
    }

    /// The symbol file of image `img`, when it has one.
    pub(super) fn file(&self, img: usize) -> Option<&SymbolFile> {
        self.files.get(img)?.as_deref()
    }

    /// Adds `image` with its symbol file to `profile`, with the warnings of what it lacks.
    pub(super) fn add(
        &mut self,
        image: Image,
        file: Option<SymbolFile>,
        profile: &mut Profile,
    ) -> usize {
        let name = image.name.clone();
        let quiet = name.starts_with("[vdso")
            || name == "[vsyscall]"
            || name == "[unknown]"
            || name == MARKER_IMAGE;
        if matches!(image.symbols, SymbolSource::Unverified { .. }) {
            note_image(profile, UNVERIFIED, &name);
        }
        match &image.symbols {
            SymbolSource::BuildId { .. } | SymbolSource::Unverified { .. } => {
                if let Some(f) = &file {
                    // User images without DWARF are the rule for distro libraries: one
                    // summary line for them; kernel images get their own.
                    if !f.has_symbols {
                        if image.kernel {
                            profile.warnings.push(format!(
                                "{name}: {} is stripped: no function symbols",
                                f.path.display()
                            ));
                        } else if self.sources.providers.is_empty() {
                            note_image(profile, STRIPPED, &name);
                        } else {
                            let asked: Vec<String> =
                                self.sources.providers.iter().map(|p| p.name()).collect();
                            let kind = format!(
                                "user images stripped (no function symbols, and no debuginfo \
                                 for them from {}; install their -dbg packages or add \
                                 unstripped files with --symbols)",
                                asked.join(", ")
                            );
                            note_image(profile, &kind, &name);
                        }
                    } else if !f.has_lines {
                        if image.kernel {
                            profile.warnings.push(format!(
                                "{name}: {} has no DWARF line info: functions without source lines",
                                f.path.display()
                            ));
                        } else {
                            note_image(profile, NO_LINES, &name);
                        }
                    }
                }
            }
            SymbolSource::Mismatch { .. } => profile
                .warnings
                .extend(mismatch_warning(&name, &image.symbols)),
            SymbolSource::Kallsyms => {}
            SymbolSource::Missing { why } if image.kernel => profile
                .warnings
                .push(format!("{name}: no symbols ({why}); addresses shown raw")),
            SymbolSource::Missing { why } if !quiet => profile.image_warnings.push(ImageWarning {
                kind: format!("no symbols ({why}); addresses shown raw"),
                image: name.clone(),
                count: None,
            }),
            SymbolSource::Missing { .. } => {}
        }
        if let Some(f) = &file {
            self.source_paths
                .add_roots(&f.source_roots, &mut profile.meta);
        }
        profile.images.push(image);
        self.files.push(file.map(Rc::new));
        profile.images.len() - 1
    }

    /// Opens the file a lookup found; a file that fails to load is reported as missing.
    fn open_found(
        name: &str,
        lookup: Lookup,
        placement: Option<&Placement>,
    ) -> (SymbolSource, Option<SymbolFile>, Option<String>) {
        match lookup {
            Lookup::Found {
                path,
                debug,
                origin,
            } => match SymbolFile::open(&path, debug.as_deref(), placement) {
                Ok(f) => (SymbolSource::BuildId { path, origin }, Some(f), None),
                Err(e) => (
                    SymbolSource::Missing {
                        why: format!("{e}"),
                    },
                    None,
                    Some(format!("{name}: {e}")),
                ),
            },
            Lookup::Unverified { path, debug } => {
                match SymbolFile::open(&path, debug.as_deref(), placement) {
                    Ok(f) => (SymbolSource::Unverified { path }, Some(f), None),
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
                    kallsyms: false,
                },
                None,
                None,
            ),
            Lookup::Missing(why) => (SymbolSource::Missing { why }, None, None),
        }
    }

    /// The vmlinux image: its file by the recorded build-id (which sets the KASLR offset of
    /// `kernel`), else kallsyms.
    pub(super) fn kernel_image(
        &mut self,
        kernel: &mut KernelSpace,
        profile: &mut Profile,
    ) -> usize {
        if let Some(i) = kernel.image {
            return i;
        }
        let build_id = kernel
            .build_id
            .clone()
            .or_else(|| self.header_build_ids.get(&DsoKey::Kernel).cloned());
        let mut names = vec!["vmlinux".to_string()];
        let mut host_candidate = None;
        if let Some(host) = self.host_kernel {
            // The release comes from the capture (manifest, perf.data's OSRELEASE feature):
            // only a plain file name may be joined to the vmlinux directory.
            if let Some(rel) = profile
                .meta
                .os_release
                .clone()
                .filter(|r| kprof_capture::manifest::check_path_component(r).is_ok())
            {
                names.push(format!("vmlinux-{rel}"));
                host_candidate = host
                    .vmlinux_dir
                    .as_ref()
                    .map(|d| d.join(format!("vmlinux-{rel}")));
            }
        }
        let lookup = self
            .sources
            .find(build_id.as_deref(), &names, host_candidate.as_deref());
        let (mut source, file, err) = Self::open_found("vmlinux", lookup, None);
        if let Some(e) = err {
            profile.warnings.push(e);
        }
        if let SymbolSource::Mismatch { expected, .. } = &mut source {
            *expected = build_id.clone().unwrap_or_default();
        }
        if let Some(f) = &file {
            kernel.set_kaslr(f, &mut profile.warnings);
        }
        if file.is_none() {
            kernel.ensure_host_kallsyms(self.host_kernel, build_id.as_deref());
            if kernel.kallsyms.is_some() {
                let what = match &source {
                    SymbolSource::Missing { why } => why.clone(),
                    SymbolSource::Mismatch { path, found, .. } => {
                        format!("{} has build-id {found}", path.display())
                    }
                    _ => String::new(),
                };
                profile
                    .warnings
                    .extend(mismatch_warning("vmlinux", &source));
                profile.warnings.push(format!(
                    "vmlinux: no matching vmlinux ({what}): kernel function names from {}, no source lines",
                    kernel.kallsyms_origin
                ));
                source = with_kallsyms(source);
            }
        }
        let image = Image {
            name: "vmlinux".into(),
            recorded_path: "[kernel.kallsyms]".into(),
            build_id,
            kernel: true,
            symbols: source,
        };
        let i = self.add(image, file, profile);
        kernel.image = Some(i);
        i
    }

    /// The image of module `m` of `kernel`: its file by build-id, placed where the module
    /// was loaded, else kallsyms.
    pub(super) fn module_image(
        &mut self,
        kernel: &mut KernelSpace,
        m: usize,
        profile: &mut Profile,
    ) -> usize {
        if let Some(i) = kernel.modules[m].image {
            return i;
        }
        let md = kernel.modules[m].clone();
        let display = format!("{}.ko", md.name);
        let names = vec![display.clone(), format!("{}.ko", md.name.replace('_', "-"))];
        let placement = kernel.module_placement(m, &mut profile.warnings);
        let lookup = self.sources.find(
            md.build_id.as_deref(),
            &names,
            md.recorded_path.as_deref().map(Path::new),
        );
        let (mut source, file, err) = Self::open_found(&display, lookup, Some(&placement));
        if let Some(e) = err {
            profile.warnings.push(e);
        }
        if let SymbolSource::Mismatch { expected, .. } = &mut source {
            *expected = md.build_id.clone().unwrap_or_default();
        }
        let stripped = file.as_ref().is_some_and(|f| !f.has_symbols);
        if (file.is_none() || stripped)
            && kernel
                .kallsyms
                .as_ref()
                .is_some_and(|k| k.has_owner(&md.name))
        {
            {
                profile.warnings.extend(mismatch_warning(&display, &source));
                let what = match (&file, &source) {
                    (Some(f), _) => {
                        format!("{} has the build-id but is stripped", f.path.display())
                    }
                    (None, SymbolSource::Missing { why }) => why.clone(),
                    _ => "no matching file".into(),
                };
                profile.warnings.push(format!(
                    "{display}: {what}: function names from {}, no source lines",
                    kernel.kallsyms_origin
                ));
                source = with_kallsyms(source);
            }
        }
        let file = if matches!(
            source,
            SymbolSource::Kallsyms | SymbolSource::Mismatch { kallsyms: true, .. }
        ) {
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
        let i = self.add(image, file, profile);
        kernel.modules[m].image = Some(i);
        i
    }

    /// The image of user addresses in no recorded mapping.
    pub(super) fn unknown_image(&mut self, profile: &mut Profile) -> usize {
        if let Some(i) = self.unknown_image {
            return i;
        }
        let i = self.add(
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
            profile,
        );
        self.unknown_image = Some(i);
        i
    }

    /// The image of a user mapping, by its path and build-id (MMAP2's, else the header's).
    pub(super) fn user_image(&mut self, map: &Mapping, profile: &mut Profile) -> usize {
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
            let lookup = if build_id.is_some() {
                self.sources.find(
                    build_id.as_deref(),
                    std::slice::from_ref(&name),
                    Some(Path::new(path)),
                )
            } else {
                let here = self.host_kernel.and_then(|h| h.nodename.as_deref());
                let host_capture = here.is_some() && here == profile.meta.hostname.as_deref();
                self.sources.find_by_path(Path::new(path), host_capture)
            };
            let (s, f, err) = Self::open_found(&name, lookup, None);
            if let Some(e) = err {
                profile.warnings.push(e);
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
        let i = self.add(image, file, profile);
        self.user_images.insert(key, i);
        i
    }

    /// The pseudo-image of the marked frames where unwinding stopped.
    pub(super) fn marker_image(&mut self, profile: &mut Profile) -> usize {
        if let Some(i) = self.marker_image {
            return i;
        }
        let i = self.add(
            Image {
                name: MARKER_IMAGE.into(),
                recorded_path: MARKER_IMAGE.into(),
                build_id: None,
                kernel: false,
                symbols: SymbolSource::Missing {
                    why: "marks where unwinding stopped".into(),
                },
            },
            None,
            profile,
        );
        self.marker_image = Some(i);
        i
    }
}

/// A kernel image's source once kallsyms names its functions: a mismatched file stays a
/// mismatch (the status a CI gate reads), anything else becomes `Kallsyms`.
fn with_kallsyms(source: SymbolSource) -> SymbolSource {
    match source {
        SymbolSource::Mismatch {
            path,
            expected,
            found,
            ..
        } => SymbolSource::Mismatch {
            path,
            expected,
            found,
            kallsyms: true,
        },
        _ => SymbolSource::Kallsyms,
    }
}

/// The warning for a symbol file with the right name and another build-id, which is not used.
fn mismatch_warning(image: &str, source: &SymbolSource) -> Option<String> {
    match source {
        SymbolSource::Mismatch {
            path,
            expected,
            found,
            ..
        } => Some(format!(
            "{image}: {} has build-id {found}, the capture recorded {expected}: not used",
            path.display()
        )),
        _ => None,
    }
}

//! Finding and loading the symbol file of each image (vmlinux, a module, a user ELF) by its
//! build-id, with kallsyms as the fallback for kernel images, and the warnings that say
//! which images have no or partial symbols.

use super::address_space::Mapping;
use super::{State, HOST_KALLSYMS};
use crate::elf::{Placement, SymbolFile};
use crate::kallsyms::Kallsyms;
use crate::profile::{Image, SymbolSource};
use crate::sources::Lookup;
use linux_perf_data::linux_perf_event_reader::CpuMode;
use linux_perf_data::DsoKey;
use std::path::Path;
use std::rc::Rc;

impl State<'_> {
    pub(super) fn add_image(&mut self, image: Image, file: Option<SymbolFile>) -> usize {
        let name = image.name.clone();
        let quiet = name.starts_with("[vdso")
            || name == "[vsyscall]"
            || name == "[unknown]"
            || name == super::call_paths::MARKER_IMAGE;
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
        if let Some(f) = &file {
            self.add_source_roots(&f.source_roots);
        }
        self.profile.images.push(image);
        self.files.push(file.map(Rc::new));
        self.profile.images.len() - 1
    }

    /// Opens the file a lookup found; a file that fails to load is reported as missing.
    pub(super) fn open_found(
        &mut self,
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

    pub(super) fn kernel_image(&mut self) -> usize {
        if let Some(i) = self.kernel_image {
            return i;
        }
        let build_id = self
            .kernel_build_id
            .clone()
            .or_else(|| self.header_build_ids.get(&DsoKey::Kernel).cloned());
        let mut names = vec!["vmlinux".to_string()];
        let mut host_candidate = None;
        if let Some(host) = &self.opts.host_kernel {
            // The release comes from the capture (manifest, perf.data's OSRELEASE feature):
            // only a plain file name may be joined to the vmlinux directory.
            if let Some(rel) = self
                .profile
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
        let (mut source, file, err) = self.open_found("vmlinux", lookup, None);
        if let Some(e) = err {
            self.profile.warnings.push(e);
        }
        if let SymbolSource::Mismatch { expected, .. } = &mut source {
            *expected = build_id.clone().unwrap_or_default();
        }
        if let Some(f) = &file {
            self.set_kaslr(f);
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

    /// Uses this host's kallsyms for a bare perf.data when the running kernel is the
    /// recorded one (same build-id), as `perf report` does.
    pub(super) fn ensure_host_kallsyms(&mut self, build_id: Option<&str>) {
        if self.kallsyms.is_some() || self.kallsyms_origin != HOST_KALLSYMS {
            return;
        }
        let Some(host) = &self.opts.host_kernel else {
            return;
        };
        let Some(id) = build_id else { return };
        if host.build_id.as_deref() != Some(id) {
            return;
        }
        if let Some(text) = host
            .kallsyms
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
        {
            self.kallsyms = Kallsyms::parse(&text);
        }
    }

    pub(super) fn module_image(&mut self, m: usize) -> usize {
        if let Some(i) = self.modules[m].image {
            return i;
        }
        let md = self.modules[m].clone();
        let display = format!("{}.ko", md.name);
        let names = vec![display.clone(), format!("{}.ko", md.name.replace('_', "-"))];
        let placement = self.module_placement(m);
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

    pub(super) fn unknown_image(&mut self) -> usize {
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

    pub(super) fn user_image(&mut self, map: &Mapping) -> usize {
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

//! An address of an image to its frames (innermost inlined call first) and functions,
//! cached per image and address, and the source paths they name.

use crate::elf::{RawFrame, SymbolFile};
use crate::kallsyms::Kallsyms;
use crate::profile::{Frame, Function, Meta, Profile, SymbolSource};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::Arc;

/// The frames one address resolved to: `profile.frames[start..end]`, innermost inlined
/// call first.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrameRun {
    pub(super) start: usize,
    pub(super) end: usize,
}

/// The `(old, new)` prefixes rewritten in source paths (`--source-prefix`).
#[derive(Debug, Clone, Copy)]
pub(super) struct SourcePaths<'a>(pub(super) &'a [(String, String)]);

impl SourcePaths<'_> {
    /// `file` with its first matching prefix rewritten.
    pub(super) fn rewrite(&self, file: Option<String>) -> Option<String> {
        let f = file?;
        for (old, new) in self.0 {
            if let Some(rest) = f.strip_prefix(old.as_str()) {
                return Some(format!("{new}{rest}"));
            }
        }
        Some(f)
    }

    /// Adds a symbol file's build trees to `meta`, rewritten like its source paths.
    pub(super) fn add_roots(&self, roots: &[String], meta: &mut Meta) {
        for root in roots {
            let Some(root) = self.rewrite(Some(root.clone())) else {
                continue;
            };
            let root = root.trim_end_matches('/').to_string();
            if root.len() > 1 && !meta.source_roots.contains(&root) {
                meta.source_roots.push(root);
            }
        }
    }
}

/// Frames and functions of the profile, each added once.
pub(super) struct Frames<'a> {
    source_paths: SourcePaths<'a>,
    functions: HashMap<(usize, Option<String>), usize>,
    /// `(image, address)` → the run of `profile.frames` it resolved to. A frame's address
    /// is in its image's own address space, so one address of one image gives the same
    /// frames wherever it was mapped: frames need no other deduplication.
    resolved: HashMap<(usize, u64), FrameRun>,
    files_seen: HashSet<Arc<str>>,
    /// Marked frames by name.
    markers: HashMap<String, FrameRun>,
}

impl<'a> Frames<'a> {
    pub(super) fn new(source_paths: SourcePaths<'a>) -> Self {
        Self {
            source_paths,
            functions: HashMap::new(),
            resolved: HashMap::new(),
            files_seen: HashSet::new(),
            markers: HashMap::new(),
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

    /// The frames of `addr` of `image`, whose symbol file is `files[image]`; `kallsyms`
    /// names the address when the image's symbols are kallsyms, under `kallsyms_owner`.
    pub(super) fn resolve_in(
        &mut self,
        profile: &mut Profile,
        (files, kallsyms): (&[Option<Rc<SymbolFile>>], Option<&Kallsyms>),
        (image, addr): (usize, u64),
        kallsyms_owner: &str,
    ) -> FrameRun {
        if let Some(r) = self.resolved.get(&(image, addr)) {
            return *r;
        }
        let file = files[image].as_deref();
        let raw: Vec<RawFrame> = if let Some(f) = file {
            f.frames(addr)
        } else if matches!(
            profile.images[image].symbols,
            SymbolSource::Kallsyms | SymbolSource::Mismatch { kallsyms: true, .. }
        ) {
            let sym = kallsyms.and_then(|k| k.lookup(kallsyms_owner, addr));
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
        let start = profile.frames.len();
        for r in raw {
            let func = self.function(profile, file, image, &r);
            let frame = Frame {
                function: func,
                address: addr,
                file: self
                    .source_paths
                    .rewrite(r.file)
                    .map(|f| self.intern_file(f)),
                line: r.line,
                inlined: r.inlined,
            };
            profile.frames.push(frame);
        }
        let out = FrameRun {
            start,
            end: profile.frames.len(),
        };
        self.resolved.insert((image, addr), out);
        out
    }

    /// The function of a raw frame of `image` (symbol file `file`), added when new.
    pub(super) fn function(
        &mut self,
        profile: &mut Profile,
        file: Option<&SymbolFile>,
        image: usize,
        r: &RawFrame,
    ) -> usize {
        let key = (image, r.name.clone());
        if let Some(i) = self.functions.get(&key) {
            return *i;
        }
        let (src, line) = match (r.func_start, file) {
            (Some(start), Some(f)) => match f.declaration(start).or_else(|| f.location(start)) {
                Some((src, line)) => (Some(src), Some(line)),
                None => (None, None),
            },
            _ => (None, None),
        };
        let f = Function {
            image,
            name: r.name.clone(),
            start: r.func_start.unwrap_or(0),
            size: r.func_size,
            file: self.source_paths.rewrite(src),
            line,
        };
        profile.functions.push(f);
        let i = profile.functions.len() - 1;
        self.functions.insert(key, i);
        i
    }

    /// The frame of a marked end of a path (`[truncated]`, `[no unwind info: IMAGE]`) in
    /// the pseudo-image `image`, which `image` creates on first use.
    pub(super) fn marker(
        &mut self,
        profile: &mut Profile,
        name: String,
        image: impl FnOnce(&mut Profile) -> usize,
    ) -> FrameRun {
        if let Some(r) = self.markers.get(&name) {
            return *r;
        }
        let img = image(profile);
        let raw = RawFrame {
            name: Some(name.clone()),
            func_start: None,
            func_size: None,
            file: None,
            line: None,
            inlined: false,
        };
        let function = self.function(profile, None, img, &raw);
        let start = profile.frames.len();
        profile.frames.push(Frame {
            function,
            address: 0,
            file: None,
            line: None,
            inlined: false,
        });
        let run = FrameRun {
            start,
            end: start + 1,
        };
        self.markers.insert(name, run);
        run
    }
}

//! An address of an image to its frames (innermost inlined call first) and functions,
//! cached per image and address.

use super::State;
use crate::elf::RawFrame;
use crate::profile::{Frame, Function, SymbolSource};
use std::sync::Arc;

/// The frames one address resolved to: `profile.frames[start..end]`, innermost inlined
/// call first.
#[derive(Debug, Clone, Copy)]
pub(super) struct FrameRun {
    pub(super) start: usize,
    pub(super) end: usize,
}

impl State<'_> {
    /// One shared copy of each source file name.
    pub(super) fn intern_file(&mut self, file: String) -> Arc<str> {
        if let Some(f) = self.files_seen.get(file.as_str()) {
            return f.clone();
        }
        let f: Arc<str> = file.into();
        self.files_seen.insert(f.clone());
        f
    }

    pub(super) fn rewrite_source(&self, file: Option<String>) -> Option<String> {
        let f = file?;
        for (old, new) in &self.opts.source_prefix {
            if let Some(rest) = f.strip_prefix(old.as_str()) {
                return Some(format!("{new}{rest}"));
            }
        }
        Some(f)
    }
    pub(super) fn resolve_in(&mut self, image: usize, addr: u64, kallsyms_owner: &str) -> FrameRun {
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

    pub(super) fn function(&mut self, image: usize, r: &RawFrame) -> usize {
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

    /// Adds a symbol file's build trees, rewritten like its source paths.
    pub(super) fn add_source_roots(&mut self, roots: &[String]) {
        for root in roots {
            let Some(root) = self.rewrite_source(Some(root.clone())) else {
                continue;
            };
            let root = root.trim_end_matches('/').to_string();
            if root.len() > 1 && !self.profile.meta.source_roots.contains(&root) {
                self.profile.meta.source_roots.push(root);
            }
        }
    }
}

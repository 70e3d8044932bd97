//! The data the viewer page computes every view from, embedded as one JSON object.
//!
//! Nothing here is per sample: call paths are a trie of (parent, function) nodes, stacks are
//! merged where the page cannot tell them apart (same path, thread, self function and source
//! line), and time is a series of bins with sparse per-stack counts. So the file grows with
//! distinct code paths and bins, not with samples, and the page can sum any range of bins into
//! per-stack counts and redo the functions table, call tree, flamegraph and source for it.

use std::collections::HashMap;

use kprof_symbols::annotate::Annotation;
use kprof_symbols::profile::Profile;
use kprof_symbols::views;
use serde_json::{json, Value};

use super::pack::Packed;
use super::source::Listing;
use super::timeline;

/// The JSON object the page reads (`#kprof-data`).
pub fn build(
    profile: &Profile,
    annotation: Option<&Annotation>,
    options: &super::Options,
) -> Value {
    let nev = profile.events.len();
    let (comms, thread_comm) = comms(profile);
    let trie = Trie::build(profile, &thread_comm);
    let ann = annotation.map(|a| AnnotationIndex::new(profile, a));
    let stacks = PageStacks::merge(profile, &trie, ann.as_ref());
    let bins = timeline::Bins::build(
        profile,
        &stacks.page_of,
        &thread_comm,
        options.unit.is_some(),
    );

    json!({
        "events": profile.events.iter().map(|e| json!({
            "name": e.name,
            "samples": e.total_samples,
            "period": e.total_period,
            "period_known": e.period_known,
        })).collect::<Vec<_>>(),
        "comms": comms,
        "threads": profile.threads.iter().zip(&thread_comm).map(|(t, &c)| json!([t.pid, t.tid, c])).collect::<Vec<_>>(),
        "workload_pid": profile.meta.workload_pid,
        "images": profile.images.iter().map(|i| json!([i.name, kind(i)])).collect::<Vec<_>>(),
        "functions": functions_json(profile),
        "nodes": {
            "n": trie.parent.len(),
            "up": trie.parent.iter().enumerate().map(|(i, &p)| (i - p) as u64).collect::<Packed>().finish(),
            "key": trie.key.iter().copied().collect::<Packed>().finish(),
        },
        "stacks": stacks.to_json(),
        "lines": stacks.lines_json(profile),
        "time": bins.to_json(),
        "marks": super::marks::Marks::of(profile).to_json(profile),
        "latency": super::latency::to_json(profile, super::latency::Grid { width: bins.width(), count: bins.count() }),
        "blocked": super::blocked::to_json(&super::blocked::bin(profile, &options.blocked, bins.width(), bins.count())),
        "unit": options.unit,
        "ratio": options.ratio.filter(|&(a, b)| a != b && a.max(b) < nev).map(|(a, b)| [a, b]),
        "annotation": annotation.map(|a| annotation_json(profile, a, ann.as_ref().map(|i| i.function))),
    })
}

/// The page's `functions` object: name, image and `file:line` of each.
fn functions_json(profile: &Profile) -> Value {
    json!({
        "name": profile.functions.iter().map(|f| f.name.as_deref().unwrap_or("[unknown]")).collect::<Vec<_>>(),
        "image": profile.functions.iter().map(|f| f.image as u64).collect::<Packed>().finish(),
        "src": profile.functions.iter().map(|f| match (&f.file, f.line) {
            (Some(file), Some(line)) => format!("{}:{line}", profile.source_path(file)),
            (Some(file), None) => profile.source_path(file).to_owned(),
            _ => String::new(),
        }).collect::<Vec<_>>(),
    })
}

/// Page stacks: profile stacks merged by what the page shows of them — call path node,
/// thread, self function, leaf line, and the annotated function's source and asm rows.
struct PageStacks<'p> {
    /// Distinct (file, line, function) of leaf frames, in first-seen order.
    line_rows: Vec<(&'p str, u32, usize)>,
    /// Per page stack: node, thread, self, line, src, asm (-1 for none).
    keys: Vec<[i64; 6]>,
    /// Per event, per page stack.
    counts: Vec<Vec<u64>>,
    /// The page stack of each profile stack.
    page_of: Vec<u32>,
}

impl<'p> PageStacks<'p> {
    fn merge(profile: &'p Profile, trie: &Trie, ann: Option<&AnnotationIndex>) -> PageStacks<'p> {
        let mut lines: HashMap<(&str, u32, usize), usize> = HashMap::new();
        let mut merged: HashMap<[i64; 6], usize> = HashMap::new();
        let mut out = PageStacks {
            line_rows: Vec::new(),
            keys: Vec::new(),
            counts: vec![Vec::new(); profile.events.len()],
            page_of: Vec::with_capacity(profile.stacks.len()),
        };
        for (i, stack) in profile.stacks.iter().enumerate() {
            let self_frame = views::self_frame(profile, stack);
            let self_fn = self_frame.map_or(-1, |f| profile.frames[f].function as i64);
            let leaf = stack.frames.first().and_then(|&f| profile.frames.get(f));
            let line = match leaf.and_then(|l| Some((l.file.as_deref()?, l.line?, l.function))) {
                Some(key) => *lines.entry(key).or_insert_with(|| {
                    out.line_rows.push(key);
                    out.line_rows.len() - 1
                }) as i64,
                None => -1,
            };
            let (src, asm) = match ann {
                Some(a) if self_fn >= 0 && self_fn as usize == a.function => {
                    let address = self_frame.map(|f| profile.frames[f].address);
                    (
                        leaf.and_then(|l| a.source_row(l.file.as_deref()?, l.line?))
                            .map_or(-1, |r| r as i64),
                        address
                            .and_then(|addr| a.asm_rows.get(&addr).copied())
                            .map_or(-1, |r| r as i64),
                    )
                }
                _ => (-1, -1),
            };
            let key = [
                trie.leaf_of[i] as i64,
                stack.thread as i64,
                self_fn,
                line,
                src,
                asm,
            ];
            let page = *merged.entry(key).or_insert_with(|| {
                out.keys.push(key);
                for c in &mut out.counts {
                    c.push(0);
                }
                out.keys.len() - 1
            });
            for (e, c) in out.counts.iter_mut().enumerate() {
                c[page] += stack.counts.get(e).copied().unwrap_or(0);
            }
            out.page_of.push(page as u32);
        }
        out
    }

    /// Column `k` of the keys, packed.
    fn column(&self, k: usize) -> Packed {
        let mut p = Packed::default();
        for key in &self.keys {
            p.push_signed(key[k]);
        }
        p
    }

    /// The page's `stacks` object.
    fn to_json(&self) -> Value {
        json!({
            "n": self.keys.len(),
            "node": self.column(0).finish(),
            "thread": self.column(1).finish(),
            "self": self.column(2).finish(),
            "line": self.column(3).finish(),
            "src": self.column(4).finish(),
            "asm": self.column(5).finish(),
            "counts": self.counts.iter().map(|c| c.iter().copied().collect::<Packed>().finish()).collect::<Vec<_>>(),
        })
    }

    /// The page's `lines` object.
    fn lines_json(&self, profile: &Profile) -> Value {
        json!({
            "file": self.line_rows.iter().map(|(f, _, _)| profile.source_path(f)).collect::<Vec<_>>(),
            "line": self.line_rows.iter().map(|&(_, l, _)| u64::from(l)).collect::<Packed>().finish(),
            "function": self.line_rows.iter().map(|&(_, _, f)| f as u64).collect::<Packed>().finish(),
        })
    }
}

/// "kernel", "module" or "user": the colour of an image's frames.
fn kind(image: &kprof_symbols::profile::Image) -> &'static str {
    match crate::collapsed::frame_kind_of_image(image) {
        crate::collapsed::FrameKind::Kernel => "kernel",
        crate::collapsed::FrameKind::Module => "module",
        _ => "user",
    }
}

/// Distinct command names, and each thread's index into them.
fn comms(profile: &Profile) -> (Vec<&str>, Vec<usize>) {
    let mut ids: HashMap<&str, usize> = HashMap::new();
    let mut names = Vec::new();
    let of_thread = profile
        .threads
        .iter()
        .map(|t| {
            *ids.entry(t.comm.as_str()).or_insert_with(|| {
                names.push(t.comm.as_str());
                names.len() - 1
            })
        })
        .collect();
    (names, of_thread)
}

/// The top-down call paths: node 0 is the root, its children are commands, theirs functions
/// from the outermost caller to the sampled one. Parents come before children.
struct Trie {
    parent: Vec<usize>,
    /// Command index for children of the root; `function * 2 + inlined` below.
    key: Vec<u64>,
    /// The node each profile stack ends in.
    leaf_of: Vec<usize>,
}

impl Trie {
    fn build(profile: &Profile, thread_comm: &[usize]) -> Trie {
        let mut trie = Trie {
            parent: vec![0],
            key: vec![0],
            leaf_of: Vec::with_capacity(profile.stacks.len()),
        };
        let mut index: HashMap<(usize, u64), usize, _> = HashMap::with_hasher(
            std::hash::BuildHasherDefault::<super::model::IdHasher>::default(),
        );
        let mut child = |trie: &mut Trie, parent: usize, key: u64| -> usize {
            *index.entry((parent, key)).or_insert_with(|| {
                trie.parent.push(parent);
                trie.key.push(key);
                trie.parent.len() - 1
            })
        };
        for stack in &profile.stacks {
            let comm = thread_comm.get(stack.thread).copied().unwrap_or(0);
            let mut at = child(&mut trie, 0, comm as u64);
            for frame in stack
                .frames
                .iter()
                .rev()
                .filter_map(|&f| profile.frames.get(f))
            {
                at = child(
                    &mut trie,
                    at,
                    frame.function as u64 * 2 + u64::from(frame.inlined),
                );
            }
            trie.leaf_of.push(at);
        }
        trie
    }
}

/// Where a sample of the annotated function lands in its listing.
struct AnnotationIndex {
    function: usize,
    /// (file, line) → row of the source listing.
    source: HashMap<(String, u32), usize>,
    /// (file name without directories, line) → row, for paths the listing shows rewritten.
    by_name: HashMap<(String, u32), usize>,
    /// Instruction address → row of the disassembly.
    asm_rows: HashMap<u64, usize>,
}

impl AnnotationIndex {
    fn new(profile: &Profile, a: &Annotation) -> AnnotationIndex {
        let function = profile
            .functions
            .iter()
            .position(|f| {
                f.name.as_deref() == Some(a.function.as_str())
                    && f.start == a.start
                    && profile
                        .images
                        .get(f.image)
                        .is_some_and(|i| i.name == a.image)
            })
            .unwrap_or(usize::MAX);
        let listing = Listing::from(a);
        let mut source = HashMap::new();
        let mut by_name = HashMap::new();
        let mut file = String::new();
        for (row, r) in listing.source.iter().enumerate() {
            if r.heading {
                file = r.text.clone();
                continue;
            }
            let Ok(line) = r.label.parse::<u32>() else {
                continue;
            };
            source.insert((file.clone(), line), row);
            by_name.insert((base_name(&file).to_owned(), line), row);
        }
        let asm_rows = a
            .instructions
            .iter()
            .enumerate()
            .map(|(i, ins)| (ins.address, i))
            .collect();
        AnnotationIndex {
            function,
            source,
            by_name,
            asm_rows,
        }
    }

    fn source_row(&self, file: &str, line: u32) -> Option<usize> {
        self.source
            .get(&(file.to_owned(), line))
            .or_else(|| self.by_name.get(&(base_name(file).to_owned(), line)))
            .copied()
    }
}

fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The listing's rows; the page fills in the samples of the selected window.
fn annotation_json(profile: &Profile, a: &Annotation, function: Option<usize>) -> Value {
    let mut listing = Listing::from(a);
    for heading in listing.source.iter_mut().filter(|r| r.heading) {
        heading.text = profile.source_path(&heading.text).to_string();
    }
    let rows = |rows: &[super::source::Row]| -> Vec<Value> {
        rows.iter()
            .map(|r| json!([r.heading, r.label, r.text, r.samples]))
            .collect()
    };
    json!({
        "function": listing.function,
        "fn": function.filter(|&f| f != usize::MAX),
        "event": profile.events.iter().position(|e| e.name == listing.event).unwrap_or(0),
        "total": listing.total,
        "notes": listing.notes,
        "source": rows(&listing.source),
        "asm": rows(&listing.disassembly),
    })
}

//! Aggregations of a [`Profile`] that the HTML page (and `kprofctl diff`) show: per-function
//! self and total counts, per-image counts, the top-down call tree and the hot source lines.
//!
//! Self samples come from `kprof_symbols::views` (the symbol around the sampled address, as
//! in `perf report`); total samples go to every function on the stack, inlined ones included,
//! once per stack even under recursion.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use kprof_symbols::profile::Profile;
use kprof_symbols::views::{self, Filter};

/// Samples per event over all stacks of the profile: the 100 % of every percentage.
pub fn event_totals(profile: &Profile) -> Vec<u64> {
    views::totals(profile, &Filter::default())
}

/// A row of the functions table: self samples (from the report's own functions view, so the
/// page ranks functions exactly as `--format text` does) and total samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionRow {
    /// Index into [`Profile::functions`].
    pub function: usize,
    /// Samples whose sampled address lies in this function.
    pub self_counts: Vec<u64>,
    /// Samples with this function anywhere on the stack.
    pub total_counts: Vec<u64>,
}

/// Every function with samples: those with self samples in the order of
/// [`views::functions`], then those only on stacks, by total samples of the first event.
pub fn function_rows(profile: &Profile) -> Vec<FunctionRow> {
    let mut totals = total_counts(profile);
    let mut rows: Vec<FunctionRow> = views::functions(profile, &Filter::default())
        .into_iter()
        .map(|row| FunctionRow {
            function: row.function,
            total_counts: totals
                .remove(&row.function)
                .unwrap_or_else(|| row.samples.clone()),
            self_counts: row.samples,
        })
        .collect();
    let mut callers: Vec<FunctionRow> = totals
        .into_iter()
        .map(|(function, total_counts)| FunctionRow {
            function,
            self_counts: vec![0; total_counts.len()],
            total_counts,
        })
        .collect();
    callers.sort_by(|a, b| {
        b.total_counts
            .first()
            .cmp(&a.total_counts.first())
            .then(a.function.cmp(&b.function))
    });
    rows.extend(callers);
    rows
}

/// Samples per function (index into [`Profile::functions`]) with the function anywhere on the
/// stack, inlined calls included, counted once per stack even under recursion.
pub fn total_counts(profile: &Profile) -> HashMap<usize, Vec<u64>> {
    let n = profile.events.len();
    let mut totals: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut seen: Vec<usize> = Vec::new();
    for stack in &profile.stacks {
        seen.clear();
        for frame in stack.frames.iter().filter_map(|&f| profile.frames.get(f)) {
            if !seen.contains(&frame.function) {
                seen.push(frame.function);
            }
        }
        for &function in &seen {
            add(
                totals.entry(function).or_insert_with(|| vec![0; n]),
                &stack.counts,
            );
        }
    }
    totals
}

/// Self samples per image (index into [`Profile::images`]), one entry per event. Images
/// without samples get zeros: an image that was mapped but never sampled is still listed.
pub fn image_counts(profile: &Profile) -> Vec<Vec<u64>> {
    let mut counts = vec![vec![0u64; profile.events.len()]; profile.images.len()];
    for row in views::images(profile, &Filter::default()) {
        if let Some(slot) = counts.get_mut(row.image) {
            add(slot, &row.samples);
        }
    }
    counts
}

/// What a call tree node stands for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NodeKey {
    /// The root of one command's stacks.
    Comm(String),
    /// A function; `true` when it is an inlined call in its parent.
    Function(usize, bool),
}

/// A node of the top-down call tree.
#[derive(Debug, Clone)]
pub struct Node {
    /// What the node stands for.
    pub key: NodeKey,
    /// Samples of stacks through this node, per event.
    pub counts: Vec<u64>,
    /// Samples of stacks that end in this node, per event.
    pub self_counts: Vec<u64>,
    /// Indices into [`CallTree::nodes`], sorted by the first event's count, largest first.
    pub children: Vec<usize>,
}

/// The top-down call tree: command, then frames from the root (`_start`, syscall entry) to
/// the leaf, merged per function.
#[derive(Debug, Clone)]
pub struct CallTree {
    /// Node 0 is the invisible root over all commands.
    pub nodes: Vec<Node>,
}

impl CallTree {
    /// The call tree of every stack of `profile`.
    pub fn build(profile: &Profile) -> CallTree {
        let n = profile.events.len();
        let new_node = |key| Node {
            key,
            counts: vec![0; n],
            self_counts: vec![0; n],
            children: Vec::new(),
        };
        // Children are found by (parent, what) with small integer keys: command names are
        // numbered first, so no string is hashed per frame.
        #[derive(Clone, Copy, PartialEq, Eq, Hash)]
        enum Slot {
            Comm(usize),
            Function(usize, bool),
        }
        let mut comm_ids: HashMap<&str, usize> = HashMap::new();
        let thread_comm: Vec<usize> = profile
            .threads
            .iter()
            .map(|t| {
                let next = comm_ids.len();
                *comm_ids.entry(t.comm.as_str()).or_insert(next)
            })
            .collect();
        let unknown_comm = comm_ids.len();
        let mut comm_names = vec![String::new(); unknown_comm + 1];
        for (name, id) in comm_ids {
            comm_names[id] = name.to_owned();
        }
        comm_names[unknown_comm] = "[unknown]".to_owned();

        let mut nodes = vec![new_node(NodeKey::Comm(String::new()))];
        let mut index: HashMap<(usize, Slot), usize, BuildHasherDefault<IdHasher>> =
            HashMap::default();
        let mut child = |nodes: &mut Vec<Node>, parent: usize, slot: Slot| -> usize {
            *index.entry((parent, slot)).or_insert_with(|| {
                nodes.push(new_node(match slot {
                    Slot::Comm(id) => NodeKey::Comm(comm_names[id].clone()),
                    Slot::Function(f, inlined) => NodeKey::Function(f, inlined),
                }));
                let id = nodes.len() - 1;
                nodes[parent].children.push(id);
                id
            })
        };
        for stack in &profile.stacks {
            add(&mut nodes[0].counts, &stack.counts);
            let comm = thread_comm
                .get(stack.thread)
                .copied()
                .unwrap_or(unknown_comm);
            let mut at = child(&mut nodes, 0, Slot::Comm(comm));
            add(&mut nodes[at].counts, &stack.counts);
            for frame in stack
                .frames
                .iter()
                .rev()
                .filter_map(|&f| profile.frames.get(f))
            {
                at = child(
                    &mut nodes,
                    at,
                    Slot::Function(frame.function, frame.inlined),
                );
                add(&mut nodes[at].counts, &stack.counts);
            }
            add(&mut nodes[at].self_counts, &stack.counts);
        }
        let first: Vec<u64> = nodes
            .iter()
            .map(|node| node.counts.first().copied().unwrap_or(0))
            .collect();
        for node in &mut nodes {
            node.children
                .sort_by(|&a, &b| first[b].cmp(&first[a]).then(a.cmp(&b)));
        }
        CallTree { nodes }
    }
}

/// A hasher for keys made of small integers (FxHash's multiply-rotate): the call tree looks
/// up one child per frame of every stack, and SipHash made that the page's slowest part.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
}

/// Samples at one source line of one function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotLine {
    /// Index into [`Profile::functions`] of the innermost (possibly inlined) function.
    pub function: usize,
    /// The source file, as the line table names it.
    pub file: String,
    /// The line in `file`.
    pub line: u32,
    /// Samples per event.
    pub counts: Vec<u64>,
}

/// Source lines of the sampled addresses (innermost inline frame, which is where the code
/// came from), largest first by the first event, at most `limit` of them.
pub fn hot_lines(profile: &Profile, limit: usize) -> Vec<HotLine> {
    let mut lines: HashMap<(usize, &str, u32), Vec<u64>> = HashMap::new();
    for stack in &profile.stacks {
        let Some(leaf) = stack.frames.first().and_then(|&f| profile.frames.get(f)) else {
            continue;
        };
        let (Some(file), Some(line)) = (leaf.file.as_deref(), leaf.line) else {
            continue;
        };
        let slot = lines
            .entry((leaf.function, file, line))
            .or_insert_with(|| vec![0; profile.events.len()]);
        add(slot, &stack.counts);
    }
    let mut lines: Vec<HotLine> = lines
        .into_iter()
        .map(|((function, file, line), counts)| HotLine {
            function,
            file: file.to_owned(),
            line,
            counts,
        })
        .collect();
    lines.sort_by(|a, b| {
        b.counts
            .first()
            .cmp(&a.counts.first())
            .then_with(|| a.file.cmp(&b.file))
            .then(a.line.cmp(&b.line))
    });
    lines.truncate(limit);
    lines
}

/// `into[i] += from[i]`, tolerating a stack whose counts are shorter or longer than the
/// event list (a malformed profile must not panic a renderer).
fn add(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = a.saturating_add(*b);
    }
}

/// `part` as a percentage of `whole`, 0 when `whole` is 0.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

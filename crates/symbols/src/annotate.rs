//! `--annotate FUNC`: a function's source lines with samples, and its disassembly with
//! samples per instruction.

use crate::elf::SymbolFile;
use crate::profile::Profile;
use crate::provider::Unavailable;
use crate::views::{self_frame, Filter};
use std::collections::{BTreeMap, HashMap};

/// Reads the source files DWARF names. kprofctl passes its [`crate::Symbolizer`], which asks
/// the symbol providers (debuginfod's `/source/`) for a file that is not on this host.
pub trait SourceReader {
    /// The text of source file `path` of the image with `build_id`; the error says why not.
    fn read_source(&self, build_id: Option<&str>, path: &str) -> Result<String, Unavailable>;
}

/// Reads sources from this host's disk only.
#[derive(Debug, Clone, Copy, Default)]
pub struct DiskSources;

impl SourceReader for DiskSources {
    fn read_source(&self, _build_id: Option<&str>, path: &str) -> Result<String, Unavailable> {
        crate::source_file::read(std::path::Path::new(path))
    }
}

/// Most source lines shown per file; a function spanning more is cut with a note.
const MAX_SOURCE_LINES: u32 = 2000;

/// An annotated function.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotation {
    /// Image and function name.
    pub image: String,
    /// Function name.
    pub function: String,
    /// Address range of the function in its symbol file.
    pub start: u64,
    /// Size of the function in bytes.
    pub size: u64,
    /// The event counted.
    pub event: String,
    /// Self samples of the function (the sum of `instructions[].samples`).
    pub total: u64,
    /// Source lines, grouped by file, in line order.
    pub lines: Vec<SourceLine>,
    /// Instructions in address order.
    pub instructions: Vec<Instruction>,
    /// Why parts are missing (no DWARF, source not found, no code bytes).
    pub warnings: Vec<String>,
}

/// A source line with the samples of the instructions generated from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceLine {
    /// Source file, as the frames name it.
    pub file: String,
    /// Line number, 1-based.
    pub line: u32,
    /// The text of the line, when the source file was found.
    pub text: Option<String>,
    /// Self samples of the instructions generated from the line.
    pub samples: u64,
}

/// An instruction with its samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instruction {
    /// Address in the symbol file.
    pub address: u64,
    /// The instruction's bytes.
    pub bytes: Vec<u8>,
    /// Disassembly.
    pub text: String,
    /// Self samples at the address.
    pub samples: u64,
    /// Source position of the instruction.
    pub file: Option<String>,
    /// Line of `file`.
    pub line: Option<u32>,
}

/// Self samples of one function under a filter: per address, per (file, line) of the
/// innermost frame, and in all.
#[derive(Debug, Default)]
struct Counts {
    per_addr: HashMap<u64, u64>,
    per_line: HashMap<(String, u32), u64>,
    total: u64,
}

fn counts(profile: &Profile, filter: &Filter, function: usize, event: usize) -> Counts {
    let mut c = Counts::default();
    for s in profile.stacks.iter().filter(|s| filter.keeps(profile, s)) {
        let Some(fr) = self_frame(profile, s) else {
            continue;
        };
        if profile.frames[fr].function != function {
            continue;
        }
        let n = s.counts.get(event).copied().unwrap_or(0);
        if n == 0 {
            continue;
        }
        c.total += n;
        *c.per_addr.entry(profile.frames[fr].address).or_default() += n;
        // The innermost frame's line: inlined code counts where it is written.
        let leaf = &profile.frames[s.frames[0]];
        if let (Some(file), Some(line)) = (&leaf.file, leaf.line) {
            *c.per_line.entry((file.to_string(), line)).or_default() += n;
        }
    }
    c
}

/// Annotates function `function` of `profile`, counting event `event`, reading code and line
/// tables from `file` (the image's symbol file, when there is one), rewriting source paths
/// with `rewrite` and reading them through `sources`.
pub fn annotate(
    profile: &Profile,
    filter: &Filter,
    function: usize,
    event: usize,
    file: Option<&SymbolFile>,
    rewrite: &dyn Fn(&str) -> String,
    sources: &dyn SourceReader,
) -> Annotation {
    let f = &profile.functions[function];
    let c = counts(profile, filter, function, event);
    let mut warnings = Vec::new();
    let size = f.size.unwrap_or(0);
    let (rows, instructions) = match file {
        None => {
            warnings.push(format!(
                "{}: no symbol file: no disassembly and no source lines",
                profile.images[f.image].name
            ));
            (Vec::new(), Vec::new())
        }
        Some(sf) => disassemble(sf, f.start, size, &c.per_addr, rewrite, &mut warnings),
    };
    let build_id = profile.images[f.image].build_id.as_deref();
    let lines = source_lines(
        &rows,
        &c.per_line,
        rewrite,
        build_id,
        sources,
        &mut warnings,
    );
    Annotation {
        image: profile.images[f.image].name.clone(),
        function: f.name.clone().unwrap_or_else(|| "[unknown]".into()),
        start: f.start,
        size,
        event: profile
            .events
            .get(event)
            .map(|e| e.name.clone())
            .unwrap_or_default(),
        total: c.total,
        lines,
        instructions,
        warnings,
    }
}

/// The line table rows of `start..start+size` in `sf` and its instructions with their
/// samples and source positions.
fn disassemble(
    sf: &SymbolFile,
    start: u64,
    size: u64,
    per_addr: &HashMap<u64, u64>,
    rewrite: &dyn Fn(&str) -> String,
    warnings: &mut Vec<String>,
) -> (Vec<(u64, String, u32)>, Vec<Instruction>) {
    let rows = sf.lines_in(start, start + size);
    if rows.is_empty() {
        warnings.push(format!(
            "{}: no DWARF line table for this function",
            sf.path.display()
        ));
    }
    let mut instructions = Vec::new();
    match sf.code(start, start + size) {
        Some(bytes) if size > 0 => {
            for (addr, len, text) in
                crate::disasm::decode(sf.arch, bytes, start, &sf.arm_runs(start, start + size))
            {
                let i = rows.partition_point(|r| r.0 <= addr);
                let pos = i.checked_sub(1).map(|i| &rows[i]);
                let off = (addr - start) as usize;
                instructions.push(Instruction {
                    address: addr,
                    bytes: bytes[off..(off + len).min(bytes.len())].to_vec(),
                    text,
                    samples: per_addr.get(&addr).copied().unwrap_or(0),
                    file: pos.map(|r| rewrite(&r.1)),
                    line: pos.map(|r| r.2),
                });
            }
            if sf.arch == crate::elf::Arch::Other {
                warnings.push(
                    "disassembly is only available for x86-64, AArch64 and 32-bit Arm".into(),
                );
            }
        }
        _ => warnings.push(format!(
            "{}: no code bytes for this function",
            sf.path.display()
        )),
    }
    (rows, instructions)
}

/// The source lines the function's line table and samples cover, per file, with their text
/// when `sources` has the file.
fn source_lines(
    rows: &[(u64, String, u32)],
    per_line: &HashMap<(String, u32), u64>,
    rewrite: &dyn Fn(&str) -> String,
    build_id: Option<&str>,
    sources: &dyn SourceReader,
    warnings: &mut Vec<String>,
) -> Vec<SourceLine> {
    let mut spans: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    let mut widen = |file: String, line: u32| {
        let e = spans.entry(file).or_insert((line, line));
        e.0 = e.0.min(line);
        e.1 = e.1.max(line);
    };
    for (_, file, line) in rows {
        if *line > 0 {
            widen(rewrite(file), *line);
        }
    }
    for (file, line) in per_line.keys() {
        if *line > 0 {
            widen(file.clone(), *line);
        }
    }
    let mut lines = Vec::new();
    for (file, (lo, hi)) in spans {
        let text = match sources.read_source(build_id, &file) {
            Ok(text) => Some(text),
            Err(why) => {
                warnings.push(format!(
                    "source {file} not found ({why}; use --source-prefix OLD=NEW)"
                ));
                None
            }
        };
        let src: Vec<&str> = text
            .as_deref()
            .map(|t| t.lines().collect())
            .unwrap_or_default();
        let hi = if hi - lo > MAX_SOURCE_LINES {
            warnings.push(format!(
                "{file}: only lines {lo}-{} shown",
                lo + MAX_SOURCE_LINES
            ));
            lo + MAX_SOURCE_LINES
        } else {
            hi
        };
        for line in lo..=hi {
            lines.push(SourceLine {
                file: file.clone(),
                line,
                text: src.get(line as usize - 1).map(|s| s.to_string()),
                samples: per_line.get(&(file.clone(), line)).copied().unwrap_or(0),
            });
        }
    }
    lines
}

//! Where a function is declared: its subprogram's `DW_AT_decl_file`/`DW_AT_decl_line`, as gdb's
//! `info line FUNC` and perf's srcline of a symbol give it. The line of the function's first
//! instruction is not that: at -O2 it is often in an inlined callee.

use super::dwarf::Reader;
use gimli::{AttributeValue, DebuggingInformationEntry, Reader as _, UnitRef};

/// Abstract-origin or specification hops followed at most (a loop in hostile DWARF ends).
const MAX_HOPS: usize = 4;

/// The declared file and line of the out-of-line subprogram of `unit` whose code covers
/// `addr`; `None` when no such subprogram has them.
pub(super) fn declaration(unit: UnitRef<'_, Reader>, addr: u64) -> Option<(String, u32)> {
    let mut entries = unit.entries();
    while let Ok(Some((_, die))) = entries.next_dfs() {
        if die.tag() == gimli::DW_TAG_subprogram && covers(unit, die, addr) {
            return declared(unit, die);
        }
    }
    None
}

/// Whether the code ranges of `die` contain `addr`.
fn covers(unit: UnitRef<'_, Reader>, die: &DebuggingInformationEntry<Reader>, addr: u64) -> bool {
    let Ok(mut ranges) = unit.die_ranges(die) else {
        return false;
    };
    while let Ok(Some(r)) = ranges.next() {
        if r.begin <= addr && addr < r.end {
            return true;
        }
    }
    false
}

/// `decl_file`/`decl_line` of `die`, else of what it is a concrete instance of
/// (`DW_AT_abstract_origin`: an inlinable function also emitted out of line) or defines
/// (`DW_AT_specification`: a C++ member declared in its class).
fn declared(
    unit: UnitRef<'_, Reader>,
    die: &DebuggingInformationEntry<Reader>,
) -> Option<(String, u32)> {
    let mut die = die.clone();
    for _ in 0..MAX_HOPS {
        let line = die
            .attr_value(gimli::DW_AT_decl_line)
            .ok()
            .flatten()
            .and_then(|v| v.udata_value());
        let file = match die.attr_value(gimli::DW_AT_decl_file).ok().flatten() {
            Some(AttributeValue::FileIndex(i)) => Some(i),
            Some(v) => v.udata_value(),
            None => None,
        };
        if let (Some(line), Some(file)) = (line, file) {
            let line = u32::try_from(line).ok().filter(|&l| l > 0)?;
            return Some((file_name(unit, file)?, line));
        }
        let next = [gimli::DW_AT_abstract_origin, gimli::DW_AT_specification]
            .into_iter()
            .find_map(|at| match die.attr_value(at).ok().flatten() {
                Some(AttributeValue::UnitRef(off)) => Some(off),
                _ => None,
            })?;
        die = unit.entry(next).ok()?;
    }
    None
}

/// File `index` of the unit's line table, as addr2line renders it (comp dir, directory,
/// name; an absolute part replaces what came before), so that it matches the frames' files.
fn file_name(unit: UnitRef<'_, Reader>, index: u64) -> Option<String> {
    let program = unit.line_program.as_ref()?;
    let header = program.header();
    let file = header.file(index)?;
    let text = |v: AttributeValue<Reader>| -> Option<String> {
        Some(
            unit.attr_string(v)
                .ok()?
                .to_string_lossy()
                .ok()?
                .into_owned(),
        )
    };
    let mut path = match &unit.comp_dir {
        Some(dir) => dir.to_string_lossy().ok()?.into_owned(),
        None => String::new(),
    };
    if file.directory_index() != 0 {
        if let Some(dir) = file.directory(header) {
            push(&mut path, &text(dir)?);
        }
    }
    push(&mut path, &text(file.path_name())?);
    Some(path)
}

fn push(path: &mut String, part: &str) {
    if part.starts_with('/') {
        *path = part.to_string();
    } else {
        if !path.is_empty() && !path.ends_with('/') {
            path.push('/');
        }
        path.push_str(part);
    }
}

//! The mapping symbols of a 32-bit Arm file (`$a`, `$t`, `$d` and their `$a.N` forms):
//! never function names, but where each run of Arm code, Thumb code and data in a code
//! section starts, kept per section as binutils does to pick a disassembler mode.

use crate::arch::ArmMode;
use std::collections::HashMap;
use std::ops::Range;

/// Whether `name` is a mapping symbol of any architecture (`$a`, `$t`, `$d`, `$x`, alone or
/// followed by `.` and anything), never the name of a function. Names merely starting with
/// `$x` or `$d` count too, as they always have here (assemblers make no others).
pub(super) fn is_mapping_symbol(name: &str) -> bool {
    name.starts_with("$x") || name.starts_with("$d") || arm_mapping_symbol(name).is_some()
}

/// The mode a 32-bit Arm mapping symbol starts.
pub(super) fn arm_mapping_symbol(name: &str) -> Option<ArmMode> {
    let mut b = name.bytes();
    if b.next() != Some(b'$') {
        return None;
    }
    let mode = match b.next()? {
        b'a' => ArmMode::Arm,
        b't' => ArmMode::Thumb,
        b'd' => ArmMode::Data,
        _ => return None,
    };
    matches!(b.next(), None | Some(b'.')).then_some(mode)
}

/// The mapping symbols of one section: its address range and where each mode starts.
#[derive(Debug)]
struct Section {
    range: Range<u64>,
    /// Sorted by address.
    marks: Vec<(u64, ArmMode)>,
}

/// The mapping symbols of a file, per code section, at the addresses of its placed sections.
#[derive(Debug, Default)]
pub(super) struct ModeMap {
    /// Sorted by start; sections without mapping symbols are absent.
    sections: Vec<Section>,
}

/// Collects the mapping symbols of a file, section by section, before they are sorted.
#[derive(Debug, Default)]
pub(super) struct ModeMapBuilder {
    sections: HashMap<(u64, u64), Vec<(u64, ArmMode)>>,
}

impl ModeMapBuilder {
    /// A mapping symbol at `addr` of the section placed at `section`.
    pub(super) fn add(&mut self, section: Range<u64>, addr: u64, mode: ArmMode) {
        self.sections
            .entry((section.start, section.end))
            .or_default()
            .push((addr, mode));
    }

    /// The sorted map.
    pub(super) fn finish(self) -> ModeMap {
        let mut sections: Vec<Section> = self
            .sections
            .into_iter()
            .map(|((start, end), mut marks)| {
                marks.sort_by_key(|m| m.0);
                Section {
                    range: start..end,
                    marks,
                }
            })
            .collect();
        sections.sort_by_key(|s| (s.range.start, s.range.end));
        ModeMap { sections }
    }
}

impl ModeMap {
    /// The section whose range holds `addr`.
    fn section(&self, addr: u64) -> Option<&Section> {
        let i = self.sections.partition_point(|s| s.range.start <= addr);
        let s = self.sections.get(i.checked_sub(1)?)?;
        s.range.contains(&addr).then_some(s)
    }

    /// The mode changes inside `[start, end)` of the section holding `start`, with the one in
    /// effect at `start` first (when there is one), sorted by address.
    pub(super) fn runs(&self, start: u64, end: u64) -> Vec<(u64, ArmMode)> {
        let Some(s) = self.section(start) else {
            return Vec::new();
        };
        let from = s.marks.partition_point(|m| m.0 <= start);
        let to = s.marks.partition_point(|m| m.0 < end);
        let first = from.checked_sub(1).map(|i| (start, s.marks[i].1));
        first
            .into_iter()
            .chain(s.marks[from..to.max(from)].iter().copied())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `$a`, `$t`, `$d` and their `$x.N` forms are mapping symbols; other `$` names are not.
    #[test]
    fn arm_mapping_symbol_names_and_dot_forms() {
        assert_eq!(arm_mapping_symbol("$a"), Some(ArmMode::Arm));
        assert_eq!(arm_mapping_symbol("$t.12"), Some(ArmMode::Thumb));
        assert_eq!(arm_mapping_symbol("$d.realdata"), Some(ArmMode::Data));
        for name in ["$ab", "$tx", "a", "", "$", "$b", "t"] {
            assert_eq!(arm_mapping_symbol(name), None, "{name}");
        }
        assert!(is_mapping_symbol("$x") && is_mapping_symbol("$d.1") && is_mapping_symbol("$a"));
        assert!(!is_mapping_symbol("$tab") && !is_mapping_symbol("main"));
    }

    /// A mode holds from its mapping symbol to the next one in the same section only.
    #[test]
    fn mode_map_lookup_per_section() {
        let mut b = ModeMapBuilder::default();
        b.add(0x1000..0x1100, 0x1040, ArmMode::Data);
        b.add(0x1000..0x1100, 0x1000, ArmMode::Thumb);
        b.add(0x2000..0x2100, 0x2010, ArmMode::Arm);
        let m = b.finish();
        let at = |a: u64| m.runs(a, a + 1).first().map(|r| r.1);
        assert_eq!(at(0x1000), Some(ArmMode::Thumb));
        assert_eq!(at(0x103f), Some(ArmMode::Thumb));
        assert_eq!(at(0x1040), Some(ArmMode::Data));
        assert_eq!(at(0x10ff), Some(ArmMode::Data));
        assert_eq!(at(0x1100), None, "past the section");
        assert_eq!(at(0x2000), None, "before its first mapping symbol");
        assert_eq!(at(0x2050), Some(ArmMode::Arm));
        assert_eq!(
            m.runs(0x1020, 0x1080),
            [(0x1020, ArmMode::Thumb), (0x1040, ArmMode::Data)]
        );
        assert_eq!(m.runs(0x2000, 0x2020), [(0x2010, ArmMode::Arm)]);
        assert!(m.runs(0x3000, 0x3010).is_empty());
    }
}

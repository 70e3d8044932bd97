//! DWARF of a symbol file: sections read in place from the mapping (or decompressed,
//! relocated copies), and the build trees its compilation units name.

use super::placement::{relocate, SectionAddrs};
use object::{Object, ObjectSection};
use std::borrow::Cow;
use std::path::Path;
use std::rc::Rc;

/// DWARF reader type: sections read in place from the mapped file, or, when compressed or
/// relocated (modules), from a reference-counted buffer.
pub type Reader = gimli::EndianReader<gimli::RunTimeEndian, SectionBytes>;

/// The bytes of one DWARF section.
#[derive(Clone)]
pub enum SectionBytes {
    /// A range of a mapped file: uncompressed sections are not copied, which halves the
    /// memory a large debug file costs.
    Mapped {
        /// The mapping of the whole file.
        map: Rc<memmap2::Mmap>,
        /// Offset of the section in the file.
        start: usize,
        /// Length of the section.
        len: usize,
    },
    /// Decompressed or relocated contents.
    Owned(Rc<[u8]>),
}

impl std::fmt::Debug for SectionBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SectionBytes({} bytes)", self.len())
    }
}

impl std::ops::Deref for SectionBytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Self::Mapped { map, start, len } => &map[*start..*start + *len],
            Self::Owned(b) => b,
        }
    }
}

// SAFETY: the bytes live in an `Rc`-owned mapping or buffer that is never moved, resized or
// unmapped while any clone of this value exists, so the slice address is stable across moves
// and clones.
unsafe impl gimli::StableDeref for SectionBytes {}
// SAFETY: as above; a clone shares the same `Rc` and so points at the same bytes.
unsafe impl gimli::CloneStableDeref for SectionBytes {}

/// The build trees of the compilation units: each unit's `DW_AT_comp_dir` (the kernel tree
/// for the kernel and kbuild modules, the package's build directory for user code), and the
/// directory of a unit whose absolute name is outside it (an out-of-tree module: kbuild
/// compiles it in the kernel tree, from the module's own directory).
fn build_trees(d: &gimli::Dwarf<Reader>) -> Vec<String> {
    let text = |r: &Option<Reader>| {
        r.as_ref().and_then(|r| {
            gimli::Reader::to_string_lossy(r)
                .ok()
                .map(|c| c.into_owned())
        })
    };
    let mut roots = std::collections::BTreeSet::new();
    let mut units = d.units();
    while let Ok(Some(header)) = units.next() {
        let Ok(unit) = d.unit(header) else { continue };
        let comp_dir = text(&unit.comp_dir).map(|c| c.trim_end_matches('/').to_string());
        let name: Option<String> = text(&unit.name).filter(|n| n.starts_with('/'));
        if let Some(name) = name {
            let inside = comp_dir
                .as_deref()
                .is_some_and(|c| under_root(&name, c).is_some());
            if !inside {
                if let Some(dir) = Path::new(&name).parent() {
                    roots.insert(dir.to_string_lossy().into_owned());
                }
            }
        }
        roots.extend(comp_dir);
    }
    roots.into_iter().filter(|r| r.len() > 1).collect()
}

/// `path` relative to `root`, when it is below it.
pub fn under_root<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    path.strip_prefix(root)?
        .strip_prefix('/')
        .filter(|rest| !rest.is_empty())
}

/// Loads DWARF; for a relocatable file applies the relocations of each debug section using the
/// section addresses in `reloc`.
fn load_dwarf(
    obj: &object::File<'_>,
    map: &Rc<memmap2::Mmap>,
    reloc: Option<&SectionAddrs>,
) -> Result<gimli::Dwarf<Reader>, DwarfError> {
    let endian = if obj.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let load = |id: gimli::SectionId| -> Result<Reader, DwarfError> {
        let Some(sec) = obj.section_by_name(id.name()) else {
            return Ok(Reader::new(SectionBytes::Owned(Rc::from(&[][..])), endian));
        };
        let data: Cow<'_, [u8]> = sec
            .uncompressed_data()
            .map_err(|error| DwarfError::Section {
                section: id.name(),
                error,
            })?;
        let data = match reloc {
            Some(addrs) => Cow::Owned(relocate(obj, &sec, data.into_owned(), addrs)),
            None => data,
        };
        let bytes = match data {
            Cow::Borrowed(b) => match (b.as_ptr() as usize).checked_sub(map.as_ptr() as usize) {
                Some(start) if start + b.len() <= map.len() => SectionBytes::Mapped {
                    map: map.clone(),
                    start,
                    len: b.len(),
                },
                _ => SectionBytes::Owned(Rc::from(b)),
            },
            Cow::Owned(v) => SectionBytes::Owned(v.into()),
        };
        Ok(Reader::new(bytes, endian))
    };
    gimli::Dwarf::load(load)
}

/// Why the DWARF of a file cannot be read; the caller names the file.
#[derive(Debug, thiserror::Error)]
pub(super) enum DwarfError {
    /// A debug section could not be read or decompressed.
    #[error("{section}: {error}")]
    Section {
        /// Its name (`.debug_info`).
        section: &'static str,
        /// Why.
        error: object::Error,
    },
    /// The sections do not parse as DWARF.
    #[error("{0}")]
    Parse(gimli::Error),
}

/// What a lookup needs of a file's DWARF: its context, the build trees it names, and the
/// guard against units nested too deep for addr2line.
pub(super) type Loaded = (
    addr2line::Context<Reader>,
    Vec<String>,
    super::die_depth::DepthGuard,
);

/// The DWARF of `obj` (mapped at `map`), `None` when it has no `.debug_info`; a relocatable
/// file's debug sections relocated with `reloc` first.
pub(super) fn load(
    obj: &object::File<'_>,
    map: &Rc<memmap2::Mmap>,
    reloc: Option<&SectionAddrs>,
) -> Result<Option<Loaded>, DwarfError> {
    if obj.section_by_name(".debug_info").is_none() {
        return Ok(None);
    }
    let d = load_dwarf(obj, map, reloc)?;
    let roots = build_trees(&d);
    let guard = super::die_depth::DepthGuard::new(load_dwarf(obj, map, reloc)?);
    let context = addr2line::Context::from_dwarf(d).map_err(DwarfError::Parse)?;
    Ok(Some((context, roots, guard)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path is under a root only below it, at a component boundary.
    #[test]
    fn under_root_path_component_boundary() {
        assert_eq!(
            under_root("/src/linux/kernel/sched.c", "/src/linux"),
            Some("kernel/sched.c")
        );
        assert_eq!(under_root("/src/linux-6.1/a.c", "/src/linux"), None);
        assert_eq!(under_root("/src/linux", "/src/linux"), None);
        assert_eq!(under_root("/src/linux/", "/src/linux"), None);
        assert_eq!(under_root("rel/a.c", "/src"), None);
    }
}

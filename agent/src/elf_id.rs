//! `kprof-agent elf-id NAME...`: the file each program or library name stands for on the
//! board and its GNU build-id, for kprofctl to resolve `--latency PROGRAM:FUNC` against the
//! symbol file of that build on the host before it asks for an uprobe.

use std::path::{Path, PathBuf};

use crate::Error;

/// Where a library named by its soname (`libc.so.6`) is looked for, in the dynamic
/// loader's default order; multiarch directories below them are tried too.
const LIBRARY_DIRS: [&str; 4] = ["/lib", "/usr/lib", "/lib64", "/usr/lib64"];

/// One line per name: `PATH<TAB>BUILD_ID` (`-` when the file has none). An error names the
/// first name that is no readable ELF file.
pub fn run(names: &[String]) -> Result<String, Error> {
    let mut out = String::new();
    for name in names {
        let path = resolve(name).ok_or_else(|| {
            Error::Other(format!(
                "elf-id: no file `{name}` (an absolute path, or a library or program name \
                 found in {} or $PATH)",
                LIBRARY_DIRS.join(", ")
            ))
        })?;
        let id = crate::elf_build_id::elf_build_id(&path)
            .map_err(|e| Error::Other(format!("elf-id: {}: {e}", path.display())))?;
        let id = id.map_or_else(|| "-".to_string(), |b| kprof_capture::build_id::hex(&b));
        out.push_str(&format!("{}\t{id}\n", path.display()));
    }
    Ok(out)
}

/// The real path of `name`: itself when absolute, else the first library directory (or
/// multiarch directory below one) or `$PATH` entry holding it.
fn resolve(name: &str) -> Option<PathBuf> {
    if name.starts_with('/') {
        return std::fs::canonicalize(name).ok().filter(|p| p.is_file());
    }
    if name.contains('/') || name.is_empty() {
        return None;
    }
    let mut dirs: Vec<PathBuf> = Vec::new();
    for d in LIBRARY_DIRS {
        dirs.push(PathBuf::from(d));
        dirs.extend(multiarch_dirs(Path::new(d)));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/sbin:/usr/bin:/sbin:/bin".into());
    dirs.extend(std::env::split_paths(&path));
    dirs.iter()
        .map(|d| d.join(name))
        .find(|p| p.is_file())
        .and_then(|p| std::fs::canonicalize(p).ok())
}

/// `DIR/<triplet>` directories (`/usr/lib/aarch64-linux-gnu`).
fn multiarch_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains("-linux-"))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    out.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary names itself by absolute path; a library of this host resolves by
    /// soname; junk does not.
    #[test]
    fn resolve_paths_sonames_and_junk() {
        let me = std::env::current_exe().unwrap();
        assert_eq!(
            resolve(me.to_str().unwrap()),
            std::fs::canonicalize(&me).ok()
        );
        let libc = resolve("libc.so.6").expect("this host's libc");
        assert!(libc.is_absolute(), "{}", libc.display());
        assert_eq!(resolve("no-such-library.so.42"), None);
        assert_eq!(resolve("a/b"), None);
        let out = run(&[me.to_string_lossy().into_owned()]).unwrap();
        let (_, id) = out.trim_end().split_once('\t').unwrap();
        assert!(id == "-" || id.len() >= 16, "{out}");
    }
}

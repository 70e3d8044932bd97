//! Parsers for the /proc and /sys files the agent snapshots. Each parser takes text so it can be
//! tested against real-format fixtures; the readers around them only do the I/O.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::Path;

use kprof_capture::build_id;
use kprof_capture::manifest::{Kernel, Module, Uname};

use crate::elf_build_id;

/// One line of `/proc/modules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcModule {
    /// Module name as the kernel spells it (`snd_hda`).
    pub name: String,
    /// Size in bytes, as `/proc/modules` gives it.
    pub size: u64,
    /// Load address; 0 when kptr_restrict hides it.
    pub base: u64,
}

/// Parses `/proc/modules`: `name size refcount deps state address [taints]`.
/// Lines that do not have that shape are skipped.
pub fn parse_proc_modules(text: &str) -> Vec<ProcModule> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 6 {
                return None;
            }
            let size = f[1].parse().ok()?;
            let base = kprof_capture::manifest::parse_hex_addr(f[5])?;
            Some(ProcModule {
                name: f[0].to_string(),
                size,
                base,
            })
        })
        .collect()
}

/// Address of a symbol in `/proc/kallsyms` text (`ADDR TYPE NAME [module]`).
pub fn kallsyms_lookup(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let mut it = line.split_whitespace();
        let addr = it.next()?;
        let _ty = it.next()?;
        (it.next()? == name && it.next().is_none())
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
    })
}

/// One line of `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapLine {
    /// First address of the mapping.
    pub start: u64,
    /// First address past the mapping.
    pub end: u64,
    /// `r` permission.
    pub read: bool,
    /// `w` permission.
    pub write: bool,
    /// `x` permission.
    pub exec: bool,
    /// `s` (shared) rather than `p` (private).
    pub shared: bool,
    /// Offset in the file of `start`.
    pub offset: u64,
    /// Major number of the file's device.
    pub major: u32,
    /// Minor number of the file's device.
    pub minor: u32,
    /// The file's inode; 0 for anonymous maps.
    pub inode: u64,
    /// Path or pseudo-name (`[vdso]`); empty for anonymous maps.
    pub path: String,
}

/// Parses `start-end perms offset maj:min inode [path]`.
pub fn parse_maps_line(line: &str) -> Option<MapLine> {
    let mut it = line.splitn(6, ' ');
    let (start, end) = it.next()?.split_once('-')?;
    let perms = it.next()?.as_bytes();
    let offset = it.next()?;
    let (maj, min) = it.next()?.split_once(':')?;
    let inode = it.next()?;
    let path = it.next().unwrap_or("").trim_start().to_string();
    if perms.len() < 4 {
        return None;
    }
    Some(MapLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        read: perms[0] == b'r',
        write: perms[1] == b'w',
        exec: perms[2] == b'x',
        shared: perms[3] == b's',
        offset: u64::from_str_radix(offset, 16).ok()?,
        major: u32::from_str_radix(maj, 16).ok()?,
        minor: u32::from_str_radix(min, 16).ok()?,
        inode: inode.parse().ok()?,
        path,
    })
}

/// Parses a CPU list such as `0-3,6,8-9` (sysfs `online` format and `-C`).
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                if a > b || b - a > 65536 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.parse().ok()?),
        }
    }
    out.sort_unstable();
    out.dedup();
    (!out.is_empty()).then_some(out)
}

/// The state letter of `/proc/PID/stat` (after the parenthesised comm, which may hold spaces).
pub fn parse_stat_state(stat: &str) -> Option<char> {
    stat.get(stat.rfind(')')? + 1..)?
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// Whether a process still runs: a zombie (exited, not yet reaped by its parent) does not.
pub fn process_running(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => !matches!(
            parse_stat_state(&s),
            Some('Z') | Some('X') | Some('x') | None
        ),
        Err(_) => false,
    }
}

/// Online CPUs from sysfs.
pub fn online_cpus() -> io::Result<Vec<u32>> {
    let s = fs::read_to_string("/sys/devices/system/cpu/online")?;
    parse_cpu_list(&s).ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad cpu list"))
}

/// Parses one file of `/sys/module/NAME/sections/` (`0xffffffffc0a02000\n`).
pub fn parse_section_addr(text: &str) -> Option<u64> {
    kprof_capture::manifest::parse_hex_addr(text.trim())
}

/// Reads one section file with a single read(2): the kernel's handler (`module_sect_read`)
/// answers EINVAL to any read at a non-zero offset, so a read-to-end loop would fail.
fn read_section_file(path: &Path) -> Option<String> {
    use std::io::Read;
    let mut buf = [0u8; 64];
    let n = fs::File::open(path).ok()?.read(&mut buf).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// Reads `/sys/module/NAME/sections/*` into section name → address.
pub fn module_sections(sys_module: &Path, name: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let Ok(dir) = fs::read_dir(sys_module.join(name).join("sections")) else {
        return out;
    };
    for ent in dir.flatten() {
        let sec = ent.file_name().to_string_lossy().into_owned();
        if let Some(addr) = read_section_file(&ent.path())
            .as_deref()
            .and_then(parse_section_addr)
        {
            out.insert(sec, addr);
        }
    }
    out
}

/// Build-id of a loaded module from `/sys/module/NAME/notes/.note.gnu.build-id`.
pub fn module_build_id(sys_module: &Path, name: &str) -> Option<Vec<u8>> {
    let p = sys_module
        .join(name)
        .join("notes")
        .join(".note.gnu.build-id");
    elf_build_id::build_id_of_note_file(&p).ok().flatten()
}

/// Every loaded module with its build-id and section addresses.
pub fn modules_with_details(proc_modules: &str, sys_module: &Path) -> Vec<Module> {
    parse_proc_modules(proc_modules)
        .into_iter()
        .map(|m| Module {
            build_id: module_build_id(sys_module, &m.name).map(|b| build_id::hex(&b)),
            sections: module_sections(sys_module, &m.name)
                .into_iter()
                .map(|(k, v)| (k, kprof_capture::manifest::hex_addr(v)))
                .collect(),
            base: kprof_capture::manifest::hex_addr(m.base),
            size: m.size,
            name: m.name,
        })
        .collect()
}

/// `uname(2)`.
/// Module name → file under `dir` (`/lib/modules/<release>`), as perf names module maps: the
/// name is the file's with `-` as `_`, `.ko` and any compression suffix removed. Symbolic links
/// (`build`, `source`) are not followed; an unreadable directory gives what was found so far.
pub fn module_files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() {
                todo.push(path);
            } else if kind.is_file() {
                let file = e.file_name().to_string_lossy().into_owned();
                if let Some(name) = module_name_of_file(&file) {
                    out.entry(name)
                        .or_insert_with(|| path.to_string_lossy().into_owned());
                }
            }
        }
    }
    out
}

/// `mychardrv.ko` and `snd-hda.ko.xz` → `mychardrv`, `snd_hda`; `None` for other files.
fn module_name_of_file(file: &str) -> Option<String> {
    let stem = [".ko", ".ko.xz", ".ko.gz", ".ko.zst"]
        .iter()
        .find_map(|ext| file.strip_suffix(ext))?;
    (!stem.is_empty()).then(|| stem.replace('-', "_"))
}

/// The running system's `uname(2)`; empty fields when the call fails.
pub fn uname() -> Uname {
    // SAFETY: utsname is plain old data; zeroed is a valid value for uname to fill in.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: `u` is a valid, writable utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return Uname::default();
    }
    let s = |f: &[libc::c_char]| -> String {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Uname {
        sysname: s(&u.sysname),
        nodename: s(&u.nodename),
        release: s(&u.release),
        version: s(&u.version),
        machine: s(&u.machine),
    }
}

/// The running kernel: release, build-id from /sys/kernel/notes, `_text` from kallsyms.
pub fn kernel(kallsyms: &str, release: &str) -> Kernel {
    Kernel {
        release: release.to_string(),
        build_id: kernel_build_id().map(|b| build_id::hex(&b)),
        text_addr: kallsyms_lookup(kallsyms, "_text")
            .filter(|&a| a != 0)
            .map(kprof_capture::manifest::hex_addr),
    }
}

/// The running kernel's GNU build-id from `/sys/kernel/notes`; `None` when unreadable or absent.
pub fn kernel_build_id() -> Option<Vec<u8>> {
    elf_build_id::build_id_of_note_file(Path::new("/sys/kernel/notes"))
        .ok()
        .flatten()
}

/// The kernel settings that decide what perf_event_open may do and see, as recorded in the
/// manifest and printed by `info`; unreadable ones are left out.
pub fn sysctls() -> BTreeMap<String, String> {
    [
        "perf_event_paranoid",
        "kptr_restrict",
        "perf_event_max_sample_rate",
        "perf_event_mlock_kb",
        "perf_event_max_stack",
    ]
    .iter()
    .filter_map(|k| {
        let v = fs::read_to_string(format!("/proc/sys/kernel/{k}")).ok()?;
        Some((k.to_string(), v.trim().to_string()))
    })
    .collect()
}

#[cfg(test)]
mod tests {

    /// Module files are found in subdirectories, compressed or not, `-` named as `_`.
    #[test]
    fn module_files_lib_modules_tree_names_as_perf() {
        let d = std::env::temp_dir().join(format!("kprof-modfiles-{}", std::process::id()));
        fs::create_dir_all(d.join("kernel/sound")).unwrap();
        fs::create_dir_all(d.join("extra")).unwrap();
        fs::write(d.join("extra/mychardrv.ko"), b"").unwrap();
        fs::write(d.join("kernel/sound/snd-hda.ko.xz"), b"").unwrap();
        fs::write(d.join("modules.dep"), b"").unwrap();
        let m = module_files(&d);
        fs::remove_dir_all(&d).unwrap();
        assert_eq!(m.len(), 2, "{m:?}");
        assert!(m["mychardrv"].ends_with("extra/mychardrv.ko"));
        assert!(m["snd_hda"].ends_with("kernel/sound/snd-hda.ko.xz"));
    }

    use super::*;

    /// Real `/proc/modules` lines (with and without taint flags, unloading state) parse.
    #[test]
    fn parse_proc_modules_real_lines() {
        let text = "mychardrv 16384 0 - Live 0xffffffffc0a00000 (O)\n\
                    nf_tables 356352 0 - Live 0xffffffffc0b0e000\n\
                    libcrc32c 12288 2 nf_tables,btrfs, Live 0xffffffffc0042000\n\
                    garbage line\n\
                    dying 4096 0 - Unloading 0x0000000000000000 (OE)\n";
        let m = parse_proc_modules(text);
        assert_eq!(m.len(), 4);
        assert_eq!(
            m[0],
            ProcModule {
                name: "mychardrv".into(),
                size: 16384,
                base: 0xffff_ffff_c0a0_0000
            }
        );
        assert_eq!(m[2].base, 0xffff_ffff_c004_2000);
        assert_eq!(m[3].base, 0);
    }

    /// `_text` is found in kallsyms; module symbols with the same name are not confused.
    #[test]
    fn parse_kallsyms_text_symbol() {
        let text = "ffffffffc0a00010 t _text\t[mychardrv]\n\
                    ffffffff81000000 T _text\n\
                    ffffffff81000000 T startup_64\n";
        assert_eq!(kallsyms_lookup(text, "_text"), Some(0xffff_ffff_8100_0000));
        assert_eq!(kallsyms_lookup(text, "nope"), None);
    }

    /// Real /proc/PID/maps lines, including anonymous and pseudo maps, parse.
    #[test]
    fn parse_maps_real_lines() {
        let l = parse_maps_line(
            "7f3b1c228000-7f3b1c3bd000 r-xp 00026000 fe:01 1313856                    /usr/lib/x86_64-linux-gnu/libc.so.6",
        )
        .unwrap();
        assert!(l.exec && l.read && !l.write && !l.shared);
        assert_eq!(
            (l.start, l.offset, l.major, l.minor, l.inode),
            (0x7f3b1c228000, 0x26000, 0xfe, 1, 1313856)
        );
        assert_eq!(l.path, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let a = parse_maps_line(
            "7ffd5a9e1000-7ffd5a9e3000 r-xp 00000000 00:00 0                          [vdso]",
        )
        .unwrap();
        assert_eq!(a.path, "[vdso]");
        let b = parse_maps_line("7f3b1c000000-7f3b1c021000 rw-p 00000000 00:00 0 ").unwrap();
        assert_eq!(b.path, "");
        let d =
            parse_maps_line("00400000-00401000 r-xp 00000000 08:01 42 /tmp/a b (deleted)").unwrap();
        assert_eq!(d.path, "/tmp/a b (deleted)");
        assert!(parse_maps_line("zz").is_none());
    }

    /// The state of a real /proc/PID/stat line is found even with `)` and spaces in comm.
    #[test]
    fn parse_stat_state_real_lines() {
        assert_eq!(
            parse_stat_state("20741 (busy) Z 20720 20720 1 0 -1 4227084"),
            Some('Z')
        );
        assert_eq!(parse_stat_state("7 (a) b) R 1 7 7 0"), Some('R'));
        assert_eq!(parse_stat_state("garbage"), None);
        assert!(process_running(std::process::id() as i32));
    }

    /// CPU lists in sysfs format parse; malformed ones are rejected.
    #[test]
    fn parse_cpu_list_sysfs_format() {
        assert_eq!(parse_cpu_list("0-3,6\n"), Some(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list("1"), Some(vec![1]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
        assert_eq!(parse_cpu_list(""), None);
    }

    /// A fake /sys/module tree laid out like the kernel's (sections files, binary notes).
    #[test]
    fn read_sys_module_tree_real_layout() {
        let dir = std::env::temp_dir().join(format!("kprof-sysmod-{}", std::process::id()));
        let m = dir.join("mychardrv");
        fs::create_dir_all(m.join("sections")).unwrap();
        fs::create_dir_all(m.join("notes")).unwrap();
        fs::write(m.join("sections/.text"), "0xffffffffc0a00000\n").unwrap();
        fs::write(m.join("sections/.data"), "0xffffffffc0a02000\n").unwrap();
        fs::write(
            m.join("sections/.gnu.linkonce.this_module"),
            "0xffffffffc0a02100\n",
        )
        .unwrap();
        let mut note = vec![4, 0, 0, 0, 20, 0, 0, 0, 3, 0, 0, 0, b'G', b'N', b'U', 0];
        note.extend((0..20u8).map(|i| i * 7));
        fs::write(m.join("notes/.note.gnu.build-id"), &note).unwrap();
        let mods = modules_with_details("mychardrv 16384 0 - Live 0xffffffffc0a00000 (O)\n", &dir);
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!(mods.len(), 1);
        assert_eq!(mods[0].sections[".text"], "0xffffffffc0a00000");
        assert_eq!(mods[0].sections.len(), 3);
        assert_eq!(
            mods[0].build_id.as_deref(),
            Some(build_id::hex(&note[16..]).as_str())
        );
    }
}

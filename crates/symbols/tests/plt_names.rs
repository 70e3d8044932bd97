//! Samples in a PLT are named like perf names them (`realloc@plt`, `@plt` for entries without
//! a symbol such as glibc's IRELATIVE ones), not `[unknown]`.

use kprof_symbols::elf::SymbolFile;
use std::path::Path;
use std::process::Command;

/// `(address, name)` of each PLT entry as binutils' objdump labels it, `*ABS*+0x…@plt` as
/// perf's `@plt`.
fn objdump_plt(objdump: &str, file: &Path) -> Vec<(u64, String)> {
    let out = Command::new(objdump)
        .args(["-d", "-j", ".plt"])
        .arg(file)
        .output()
        .unwrap_or_else(|e| panic!("{objdump}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .filter_map(|l| {
            let (addr, rest) = l.split_once(" <")?;
            let label = rest.strip_suffix(">:")?;
            let addr = u64::from_str_radix(addr, 16).ok()?;
            let name = label.strip_suffix("@plt")?;
            let name = if name.starts_with("*ABS*") { "" } else { name };
            Some((addr, format!("{name}@plt")))
        })
        .collect()
}

fn check_plt(file: &Path, entries: &[(u64, String)]) {
    let sf = SymbolFile::open(file, None, None).unwrap();
    for (addr, name) in entries {
        for at in [*addr, addr + 6] {
            let got = sf.symbol_at(at).map(|s| s.0.to_string());
            assert_eq!(got.as_deref(), Some(name.as_str()), "{at:#x}");
        }
    }
}

/// Every PLT entry of the host's libc has the name binutils gives it, at entry start and
/// inside the entry (the IRELATIVE ones included: `.rela.plt` is not in entry order).
#[test]
fn symbol_at_elf_plt_entries_named_as_objdump() {
    let libc = Path::new("/lib/x86_64-linux-gnu/libc.so.6");
    let entries = objdump_plt("objdump", libc);
    assert!(
        entries.len() > 10,
        "objdump listed {} PLT entries",
        entries.len()
    );
    assert!(entries.iter().any(|(_, n)| n == "@plt"));
    assert!(entries.iter().any(|(_, n)| n.len() > 4));
    check_plt(libc, &entries);
}

/// An AArch64 program's PLT entries (adrp/ldr of the GOT slot) are named like binutils names
/// them.
#[test]
fn symbol_at_elf_aarch64_plt_entries_named_as_objdump() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("p.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
         int main(int c, char **v) { char *p = malloc(c * 8); strcpy(p, v[0]);\n\
         printf(\"%s %zu\\n\", p, strlen(p)); free(p); return 0; }\n",
    )
    .unwrap();
    let exe = tmp.path().join("p");
    let out = Command::new("aarch64-linux-gnu-gcc")
        .args(["-O2", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("aarch64-linux-gnu-gcc (gcc-aarch64-linux-gnu)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = objdump_plt("aarch64-linux-gnu-objdump", &exe);
    for f in ["malloc@plt", "free@plt", "printf@plt"] {
        assert!(
            entries.iter().any(|(_, n)| n == f),
            "{f} not in {entries:?}"
        );
    }
    check_plt(&exe, &entries);
}

/// 32-bit Arm PLT entries (`add ip, pc; add ip, ip; ldr pc`, some after a Thumb `bx pc`
/// stub) are named like binutils names them: Debian's armhf libc and a `-mthumb` program.
#[test]
fn symbol_at_elf_arm32_plt_entries_named_as_objdump() {
    let libc = Path::new("/usr/arm-linux-gnueabihf/lib/libc.so.6");
    let entries = objdump_plt("arm-linux-gnueabihf-objdump", libc);
    assert!(entries.len() > 10, "objdump listed {entries:?}");
    check_plt(libc, &entries);
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("p.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n\
         int main(int c, char **v) { char *p = malloc(c * 8); strcpy(p, v[0]);\n\
         printf(\"%s %zu\\n\", p, strlen(p)); free(p); return 0; }\n",
    )
    .unwrap();
    let exe = tmp.path().join("p");
    let out = Command::new("arm-linux-gnueabihf-gcc")
        .args(["-O2", "-mthumb", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("arm-linux-gnueabihf-gcc (gcc-arm-linux-gnueabihf)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let entries = objdump_plt("arm-linux-gnueabihf-objdump", &exe);
    for f in ["malloc@plt", "free@plt", "printf@plt"] {
        assert!(
            entries.iter().any(|(_, n)| n == f),
            "{f} not in {entries:?}"
        );
    }
    check_plt(&exe, &entries);
}

//! `/proc/kallsyms` snapshots: kernel and module function names without source lines.

use std::collections::HashMap;

/// Text symbols of a kallsyms snapshot, per owner (`""` = the kernel image, else a module).
#[derive(Debug, Default, Clone)]
pub struct Kallsyms {
    /// Owner → symbols sorted by address: start and the name's place in `names`.
    owners: HashMap<String, Vec<(u64, Name)>>,
    /// Every symbol name, one after the other: a host's ~100k names as separate `String`s
    /// cost twice the memory.
    names: String,
    /// All text symbols sorted by address, with their owner index into `names`.
    all: Vec<(u64, u32)>,
    owner_names: Vec<String>,
}

/// Offset and length of a name in [`Kallsyms::names`].
type Name = (u32, u32);

impl Kallsyms {
    /// Parses the text of `/proc/kallsyms`; lines that do not parse are skipped.
    /// Returns `None` when every address is zero (read with `kptr_restrict` in force), or
    /// when the names pass 4 GiB.
    pub fn parse(text: &str) -> Option<Self> {
        let mut owners: HashMap<String, Vec<(u64, Name)>> = HashMap::new();
        let mut names = String::new();
        let mut any_nonzero = false;
        for line in text.lines() {
            let mut it = line.split_ascii_whitespace();
            let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                continue;
            };
            any_nonzero |= addr != 0;
            let owner = it
                .next()
                .map(|m| m.trim_start_matches('[').trim_end_matches(']'))
                .unwrap_or_default();
            let at = (
                u32::try_from(names.len()).ok()?,
                u32::try_from(name.len()).ok()?,
            );
            names.push_str(name);
            match owners.get_mut(owner) {
                Some(syms) => syms.push((addr, at)),
                None => {
                    owners.insert(owner.to_string(), vec![(addr, at)]);
                }
            }
        }
        if !any_nonzero {
            return None;
        }
        let mut owner_names: Vec<String> = owners.keys().cloned().collect();
        owner_names.sort();
        let mut all = Vec::new();
        for (i, o) in owner_names.iter().enumerate() {
            let syms = owners.get_mut(o).expect("owner");
            // By address, then name: of the names of one address the last one is used.
            syms.sort_by(|a, b| {
                a.0.cmp(&b.0)
                    .then_with(|| name_in(&names, a.1).cmp(name_in(&names, b.1)))
            });
            all.extend(syms.iter().map(|(a, _)| (*a, i as u32)));
        }
        all.sort();
        Some(Self {
            owners,
            names,
            all,
            owner_names,
        })
    }

    /// Address of a kernel symbol, e.g. `_text`.
    pub fn kernel_symbol(&self, name: &str) -> Option<u64> {
        self.owners
            .get("")?
            .iter()
            .find(|(_, n)| name_in(&self.names, *n) == name)
            .map(|(a, _)| *a)
    }

    /// The owner (`""` for the kernel, else the module name) of the closest symbol at or below.
    pub fn owner_of(&self, addr: u64) -> Option<&str> {
        let i = self.all.partition_point(|(a, _)| *a <= addr);
        let (_, o) = self.all.get(i.checked_sub(1)?)?;
        Some(&self.owner_names[*o as usize])
    }

    /// The symbol of `owner` at or below `addr`: `(name, start, size to the next symbol)`.
    pub fn lookup(&self, owner: &str, addr: u64) -> Option<(&str, u64, Option<u64>)> {
        let syms = self.owners.get(owner)?;
        let i = syms.partition_point(|(a, _)| *a <= addr);
        let (start, name) = syms.get(i.checked_sub(1)?)?;
        let size = syms.get(i).map(|(n, _)| n - start);
        Some((name_in(&self.names, *name), *start, size))
    }

    /// Whether a module has symbols in the snapshot.
    pub fn has_owner(&self, owner: &str) -> bool {
        self.owners.contains_key(owner)
    }
}

/// The largest offset into a data symbol named as such: kallsyms has no sizes, and the next
/// symbol can be far past the object (after the last object of `.bss`).
const MAX_OBJECT: u64 = 1 << 20;

/// Names kernel data addresses (a lock's) by the data symbols of a kallsyms text (`d`, `D`,
/// `b`, `B`, `r`, `R`, which [`Kallsyms`] leaves out): `dev+0x8 [mychardrv]`. An address is
/// named only when it lies before the next symbol, so an address between two objects'
/// symbols (a heap object's lock) gets no name rather than a wrong one.
pub fn name_data_addresses(text: &str, addrs: &[u64]) -> HashMap<u64, String> {
    let mut syms: Vec<(u64, &str, &str)> = Vec::new();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let (Some(addr), Some(kind), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let data = matches!(kind, "d" | "D" | "b" | "B" | "r" | "R");
        // Every symbol bounds the one before it, data or not.
        syms.push((addr, if data { name } else { "" }, it.next().unwrap_or("")));
    }
    // Of the names of one address the one taken is the last: a data symbol that is no
    // compiler-made local (`__key.4`, the lock class key `mutex_init` puts at the address of
    // the object it initialises when lockdep is off: size 0) wins.
    syms.sort_by_key(|s| (s.0, !s.1.is_empty() && !s.1.contains('.')));
    let mut out = HashMap::new();
    for &a in addrs {
        let i = syms.partition_point(|s| s.0 <= a);
        let Some(&(start, name, owner)) = i.checked_sub(1).and_then(|i| syms.get(i)) else {
            continue;
        };
        let bounded = syms.get(i).is_some_and(|next| a < next.0);
        // Section bounds are no objects, and past them is the heap: a lock there (on 32-bit
        // Arm the heap lies above `__bss_stop`, below the vectors' symbols; on x86_64 a
        // task's spinlock showed as `__start_init_stack+0x9a40`) gets no name.
        let marker = matches!(name, "_end" | "__bss_stop" | "_edata" | "__end_rodata")
            || ["__end_", "__start_", "__stop_"]
                .iter()
                .any(|p| name.starts_with(p));
        if name.is_empty() || start == 0 || !bounded || marker || a - start > MAX_OBJECT {
            continue;
        }
        let owner = if owner.is_empty() {
            String::new()
        } else {
            format!(" {owner}")
        };
        out.insert(a, format!("{name}+{:#x}{owner}", a - start));
    }
    out
}

/// The text of `name` in `names` (empty if out of range, which parse never makes).
fn name_in(names: &str, (off, len): Name) -> &str {
    let (off, len) = (off as usize, len as usize);
    names.get(off..off + len).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::Kallsyms;

    /// Kernel and module symbols are told apart and looked up by nearest lower address.
    #[test]
    fn lookup_kallsyms_module_and_kernel() {
        let k = Kallsyms::parse(
            "ffffffff81000000 T _text\nffffffff81000100 t do_thing\nffffffff81000200 D data\n\
             ffffffffc0000000 t drv_read\t[mychardrv]\nffffffffc0000040 t drv_write\t[mychardrv]\n",
        )
        .unwrap();
        assert_eq!(k.kernel_symbol("_text"), Some(0xffffffff81000000));
        assert_eq!(k.owner_of(0xffffffffc0000044), Some("mychardrv"));
        assert_eq!(
            k.lookup("mychardrv", 0xffffffffc0000010),
            Some(("drv_read", 0xffffffffc0000000, Some(0x40)))
        );
        assert_eq!(k.lookup("", 0xffffffff81000150).unwrap().0, "do_thing");
        assert!(Kallsyms::parse("0000000000000000 T _text\n").is_none());
    }

    /// A static lock in a module's data is named by its object; one past every symbol, or
    /// after a function symbol, is not.
    #[test]
    fn name_data_addresses_bounded_by_next_symbol() {
        let text = "ffffffffc0002000 t mychardrv_write\t[mychardrv]\n\
                    ffffffffc0004000 b dev\t[mychardrv]\n\
                    ffffffffc0004000 b __key.4\t[mychardrv]\n\
                    ffffffffc0005000 b other\t[mychardrv]\n\
                    ffffffff82000000 D jiffies\n\
                    ffffffff82000008 D next\n\
                    c1000000 B __bss_stop\n\
                    c2000000 D __start_init_stack\n\
                    ffff0000 t vector_rst\n";
        let names = super::name_data_addresses(
            text,
            &[
                0xffffffffc0004000,
                0xffffffffc0004020,
                0xffffffff82000000,
                0xffffffffc0002010,
                0xffffffffc0009000,
                0xc1001000,
                0xc2009a40,
            ],
        );
        assert_eq!(names[&0xffffffffc0004000], "dev+0x0 [mychardrv]");
        assert_eq!(names[&0xffffffffc0004020], "dev+0x20 [mychardrv]");
        assert_eq!(names[&0xffffffff82000000], "jiffies+0x0");
        assert_eq!(names.len(), 3, "{names:?}");
    }
}

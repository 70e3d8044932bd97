//! The kernel's state at the start of a capture: `/proc/kallsyms` and `/proc/modules` copied
//! into the work dir, module details from `/sys/module`, `uname` and the kernel's build-id.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, BufRead, BufReader, Write};
use std::path::Path;

use kprof_capture::manifest::{self, Kernel, Module, Uname};

use super::capture_dir::WorkDir;
use crate::{archive, procfs, sys, Error};

/// Where module sections and notes are read from.
pub(super) const SYS_MODULE: &str = "/sys/module";

/// What the capture records about the kernel it ran on.
pub(super) struct KernelState {
    /// Runtime `_text`, when kallsyms shows addresses.
    pub(super) text: Option<u64>,
    /// Runtime `_etext`, when kallsyms shows addresses.
    pub(super) etext: Option<u64>,
    /// `/proc/modules` as read.
    pub(super) proc_modules: String,
    pub(super) modules: Vec<Module>,
    /// Module name → its file under `/lib/modules/<release>`, for the names of module maps.
    module_files: BTreeMap<String, String>,
    pub(super) uname: Uname,
    pub(super) kernel: Kernel,
}

/// Snapshots kallsyms and modules into the work dir and gathers the manifest's kernel facts.
/// A kallsyms without addresses is no error; it is pushed to `notices`.
pub(super) fn snapshot(work: &WorkDir, notices: &mut Vec<String>) -> Result<KernelState, Error> {
    let (text, etext) = snapshot_kallsyms(&work.member(kprof_capture::KALLSYMS))
        .map_err(|e| Error::io("cannot snapshot /proc/kallsyms", e))?;
    if text.is_none() {
        notices.push(format!(
            "/proc/kallsyms shows no addresses (kernel.kptr_restrict={}): kernel samples will not resolve to symbols",
            sys::kernel_sysctl("kptr_restrict").map_or("?".to_string(), |v| v.to_string())
        ));
    }
    let proc_modules = fs::read_to_string("/proc/modules").unwrap_or_default();
    archive::write_private(
        &work.member(kprof_capture::MODULES),
        proc_modules.as_bytes(),
    )
    .map_err(|e| Error::io("cannot write the modules snapshot", e))?;
    let modules = procfs::modules_with_details(&proc_modules, Path::new(SYS_MODULE));
    let uname = procfs::uname();
    let module_files = procfs::module_files(&Path::new("/lib/modules").join(&uname.release));
    let kernel = Kernel {
        text_addr: text.map(manifest::hex_addr),
        ..procfs::kernel("", &uname.release)
    };
    Ok(KernelState {
        text,
        etext,
        proc_modules,
        modules,
        module_files,
        uname,
        kernel,
    })
}

impl KernelState {
    /// The file name of module `name`'s map and build-id entry: its path under /lib/modules,
    /// as `perf record` writes it (Linux perf looks a module up by that path, in the build-id
    /// cache or under `--symfs`; it cannot find one named `[name]`), else `[name]`.
    pub(super) fn module_filename(&self, name: &str) -> String {
        self.module_files
            .get(&name.replace('-', "_"))
            .cloned()
            .unwrap_or_else(|| format!("[{name}]"))
    }
}

/// Copies /proc/kallsyms into the capture, keeping the symbols the kernel map needs.
fn snapshot_kallsyms(dst: &Path) -> io::Result<(Option<u64>, Option<u64>)> {
    let src = BufReader::new(File::open("/proc/kallsyms")?);
    let mut out = io::BufWriter::new(File::create(dst)?);
    let (mut text, mut etext) = (None, None);
    for line in src.split(b'\n') {
        let line = line?;
        out.write_all(&line)?;
        out.write_all(b"\n")?;
        // Only the two lines that can name them are parsed: decoding every one of the ~100k
        // lines was a sixth of the agent's CPU in a 10 s capture.
        if (text.is_none() || etext.is_none())
            && (line.ends_with(b" _text") || line.ends_with(b" _etext"))
        {
            let s = String::from_utf8_lossy(&line);
            if let Some(a) = procfs::kallsyms_lookup(&s, "_text") {
                text = Some(a);
            } else if let Some(a) = procfs::kallsyms_lookup(&s, "_etext") {
                etext = Some(a);
            }
        }
    }
    out.flush()?;
    Ok((text.filter(|&a| a != 0), etext.filter(|&a| a != 0)))
}

//! `kprofctl deploy`: check that the agent binary suits the board, upload and install it.

use crate::progress::{self, Counting};
use crate::remote::labgrid::{self, LabgridArgs};
use crate::remote::{board, elf, guard, shell::quote, transfer, Remote, SshArgs};
use crate::state::State;
use anyhow::Context as _;
use std::path::{Path, PathBuf};

/// Arguments of `kprofctl deploy`.
#[derive(Debug, clap::Args)]
pub struct DeployArgs {
    /// The board: [user@]host[:port], an ~/.ssh/config alias or lg:PLACE (labgrid).
    // The text is clap's help, where brackets mean optional parts, not links.
    #[allow(rustdoc::broken_intra_doc_links)]
    #[arg(value_name = "TARGET")]
    pub target: String,
    /// The agent binary to install (default: $KPROF_AGENT, or the static kprof-agent built by
    /// ci/build-agent next to kprofctl that matches the board's machine).
    #[arg(long, value_name = "PATH")]
    pub agent: Option<PathBuf>,
    /// Where to install it on the board; /run/kprof/kprof-agent is used if this is
    /// read-only. The directory must be out of other users' reach (owned by root or the login
    /// user, not group- or world-writable, nor any directory above it).
    #[arg(long, value_name = "BOARD_PATH", default_value = board::AGENT_PATH)]
    pub install_path: String,
    #[command(flatten)]
    pub ssh: SshArgs,
    #[command(flatten)]
    pub lab: LabgridArgs,
}

pub fn run(args: DeployArgs) -> anyhow::Result<()> {
    let (target, _place) = labgrid::resolve(&args.target, &args.lab, &args.ssh)?;
    let remote = Remote::connect(&target, &args.ssh)?;
    let installed = deploy(&remote, args.agent.as_deref(), &args.install_path)?;
    let mut state = State::load()?;
    state.remember(&target.spec).agent = Some(installed.path.clone());
    state.save()?;
    // The version and path come from the board.
    println!(
        "{}",
        kprof_report::escape::controls_but_newline(&format!(
            "{}: {} installed at {}",
            target, installed.version, installed.path
        ))
    );
    Ok(())
}

/// An agent on the board.
#[derive(Debug)]
pub struct Installed {
    pub path: String,
    pub version: String,
}

/// Checks, uploads and installs the agent; returns where it went and what it says it is.
pub fn deploy(
    remote: &Remote,
    agent: Option<&Path>,
    install_path: &str,
) -> anyhow::Result<Installed> {
    let t = &remote.target;
    let uname = board::machine(remote)?;
    let local = match agent {
        Some(p) => p.to_path_buf(),
        None => find_local_agent(&uname)?,
    };
    let bytes =
        std::fs::read(&local).with_context(|| format!("cannot read agent {}", local.display()))?;
    let kind =
        elf::parse(&bytes).map_err(|why| anyhow::anyhow!("agent {}: {why}", local.display()))?;
    if let Some(why) = elf::mismatch(&kind, &uname) {
        anyhow::bail!(
            "agent {} cannot run on {t}: {why}; build it for the board (ci/build-agent \
             <rust-target>) and pass --agent",
            local.display()
        );
    }
    if elf::expected_for_uname(&uname).is_none() {
        crate::term::note(format_args!(
            "{t}: unknown machine `{uname}`: cannot check the agent's ELF machine ({})",
            kind.describe()
        ));
    }
    if let Some(interp) = &kind.interpreter {
        eprintln!(
            "kprofctl: warning: {} is dynamically linked (needs {interp} on the board); \
             ci/build-agent makes the static build boards need",
            local.display()
        );
    }
    let sum = transfer::sha256_file(&local)?;

    let installed = match upload(remote, &bytes, install_path, &sum) {
        Ok(installed) => installed,
        // A directory others can write is refused, not worked around: the user named it. An
        // agent that does not run would not run from the fallback either.
        Err(first)
            if install_path != board::AGENT_FALLBACK_PATH
                && first.downcast_ref::<Refused>().is_none()
                && first.downcast_ref::<DoesNotRun>().is_none() =>
        {
            crate::term::note(format_args!(
                "{t}: cannot install to {install_path} ({first:#}); \
                 installing to {} instead (lost at reboot)",
                board::AGENT_FALLBACK_PATH
            ));
            upload(remote, &bytes, board::AGENT_FALLBACK_PATH, &sum)?
        }
        Err(e) => return Err(e),
    };
    Ok(installed)
}

/// An install directory other local users could write to (or own): never used.
#[derive(Debug)]
struct Refused(String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// The board shell that makes `dir` (0700 for the fallback directory, else 0755), checks it
/// is out of other users' reach, creates the empty staging file `NAME.kprof-new` in it and
/// prints `dir REALDIR`; exit 253 with the reason when the directory is not safe.
fn prepare_script(dir: &str, name: &str) -> String {
    let umask = if dir == board::AGENT_FALLBACK_DIR {
        "077"
    } else {
        "022"
    };
    // The nearest existing directory is checked before `mkdir -p` makes anything below it:
    // created first, a planted link on the way would have had root make directories where
    // it pointed.
    format!(
        "umask {umask}; {fun}{links}\
         kprof_no_foreign_links {d} || {{ echo \"refusing to install kprof-agent in {shown}: $KPROF_WHY\" >&2; exit 253; }}; \
         kprof_e={d}; while [ ! -e \"$kprof_e\" ] && [ ! -L \"$kprof_e\" ]; do \
         kprof_e=${{kprof_e%/*}}; [ -n \"$kprof_e\" ] || kprof_e=/; done; \
         kprof_safe_path \"$kprof_e\" || {{ echo \"refusing to install kprof-agent in {shown}: $KPROF_WHY\" >&2; exit 253; }}; \
         mkdir -p {d} || exit 1; \
         kprof_safe_path {d} || {{ echo \"refusing to install kprof-agent in {shown}: $KPROF_WHY\" >&2; exit 253; }}; \
         t=\"$KPROF_REAL\"/{n}.kprof-new; rm -f \"$t\" && : > \"$t\" && chmod 700 \"$t\" || exit 1; \
         echo \"dir $KPROF_REAL\"",
        d = quote(dir),
        n = quote(name),
        shown = dir.replace(['"', '`', '$', '\\'], "?"),
        fun = guard::SAFE_PATH_FN,
        links = guard::NO_FOREIGN_LINKS_FN
    )
}

/// Writes `bytes` next to `dest` under a temporary name, so a cut upload never leaves a broken
/// agent in place, checks what arrived and moves it to `dest`. Staging and install go through
/// the directory's real path, checked first (never a directory others can write). The staged
/// file must run (`--version`) before it replaces anything. Returns the installed agent.
fn upload(remote: &Remote, bytes: &[u8], dest: &str, sha256: &str) -> anyhow::Result<Installed> {
    let dest_path = Path::new(dest);
    let (Some(dir), Some(name)) = (dest_path.parent(), dest_path.file_name()) else {
        anyhow::bail!("--install-path {dest}: not a file path on the board");
    };
    let (dir, name) = (dir.to_string_lossy(), name.to_string_lossy());
    // Fails fast on a read-only, foreign or unsafe directory, before any byte is sent.
    let prepare = remote.exec(&prepare_script(
        if dir.is_empty() { "/" } else { &dir },
        &name,
    ))?;
    if prepare.status == 253 {
        return Err(Refused(format!("{}: {}", remote.target, prepare.stderr_str())).into());
    }
    let real_dir = prepare
        .stdout_str()
        .lines()
        .find_map(|l| l.strip_prefix("dir "))
        .map(str::to_owned);
    let Some(real_dir) = real_dir.filter(|_| prepare.status == 0) else {
        anyhow::bail!("{}", prepare.stderr_first_line());
    };
    let dest = format!("{}/{name}", real_dir.trim_end_matches('/'));
    let tmp = format!("{dest}.kprof-new");
    let command = format!(
        "cat > {tmp} && chmod 755 {tmp} && \
         {{ if command -v sha256sum >/dev/null 2>&1; then sha256sum {tmp}; else echo \"- $(wc -c < {tmp})\"; fi; }}",
        tmp = quote(&tmp)
    );
    let bar = progress::bar(bytes.len() as u64, "kprof-agent", Counting::Bytes);
    let out = remote.exec_with_input(&command, &mut &bytes[..], |n| bar.inc(n));
    bar.finish_and_clear();
    let out = out?;
    if out.status != 0 {
        let _ = remote.exec(&format!("rm -f {}", quote(&tmp)));
        anyhow::bail!("{}", out.stderr_first_line());
    }
    let reply = out.stdout_str();
    let mut fields = reply.split_whitespace();
    let ok = match (fields.next(), fields.next()) {
        (Some("-"), Some(size)) => size == bytes.len().to_string(),
        (Some(sum), _) => sum.eq_ignore_ascii_case(sha256),
        _ => false,
    };
    if !ok {
        let _ = remote.exec(&format!("rm -f {}", quote(&tmp)));
        anyhow::bail!("the uploaded agent does not match the local file (board says `{reply}`)");
    }
    let version = match check_runs(remote, &tmp) {
        Ok(v) => v,
        Err(e) => {
            let _ = remote.exec(&format!("rm -f {}", quote(&tmp)));
            return Err(e);
        }
    };
    remote.exec_ok(
        &format!("mv -f {} {}", quote(&tmp), quote(&dest)),
        &format!("installing {dest}"),
    )?;
    Ok(Installed {
        path: dest,
        version,
    })
}

/// Lines of the board's output shown when the staged agent does not run.
const SHOWN_LINES: usize = 5;

/// Runs the staged agent's `--version` where it landed, so that one that cannot run there (a
/// dynamically linked build missing a library, a noexec mount) never replaces a working one.
/// The error carries what the board printed: the loader names the missing library.
fn check_runs(remote: &Remote, staged: &str) -> anyhow::Result<String> {
    let out = remote.exec(&format!("{} --version </dev/null 2>&1", quote(staged)))?;
    let said = out.stdout_str();
    if out.status == 0 {
        return Ok(said.trim().to_owned());
    }
    let lines: Vec<&str> = said.lines().filter(|l| !l.trim().is_empty()).collect();
    let shown = match lines.len() {
        0 => "no output".to_owned(),
        n if n <= SHOWN_LINES => lines.join("\n"),
        n => format!(
            "{}\n({} more lines)",
            lines[..SHOWN_LINES].join("\n"),
            n - SHOWN_LINES
        ),
    };
    Err(DoesNotRun(format!(
        "{}: the uploaded agent does not run on the board (`{staged} --version` exit status \
         {}):\n{shown}\nthe agent installed there before, if any, is untouched; \
         ci/build-agent builds the static agent boards need",
        remote.target, out.status
    ))
    .into())
}

/// The staged agent failed its check: the binary is at fault, not the directory, so no other
/// install directory is tried.
#[derive(Debug)]
struct DoesNotRun(String);

impl std::fmt::Display for DoesNotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DoesNotRun {}

fn subdirs(dir: &Path) -> impl Iterator<Item = PathBuf> {
    std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
}

/// `$KPROF_AGENT`, else a kprof-agent for the board's machine next to kprofctl or in the cargo
/// target directory kprofctl runs from (`target/<rust-target>/agent/kprof-agent` or
/// `target/<dir>/<rust-target>/agent/kprof-agent`, where ci/build-agent puts it). Static
/// builds are preferred.
pub fn find_local_agent(uname: &str) -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("KPROF_AGENT") {
        return Ok(PathBuf::from(p));
    }
    let mut candidates = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        if let Some(dir) = exe.parent() {
            candidates.push(dir.join("kprof-agent"));
            if let Some(target_dir) = dir.parent() {
                // target/<rust-target>/agent, and one level deeper for the target dirs of
                // other toolchains (ci/build-agent builds aarch64 in target/rust-web/).
                for entry in subdirs(target_dir) {
                    candidates.push(entry.join("agent/kprof-agent"));
                    candidates.push(entry.join("release/kprof-agent"));
                    for inner in subdirs(&entry) {
                        candidates.push(inner.join("agent/kprof-agent"));
                    }
                }
                candidates.push(target_dir.join("agent/kprof-agent"));
            }
        }
    }
    let mut best: Option<(PathBuf, bool)> = None;
    for path in candidates.iter().filter(|p| p.is_file()) {
        let Ok(bytes) = std::fs::read(path) else {
            continue;
        };
        let Ok(kind) = elf::parse(&bytes) else {
            continue;
        };
        if elf::mismatch(&kind, uname).is_some() {
            continue;
        }
        let is_static = kind.interpreter.is_none();
        if best.as_ref().is_none_or(|(_, s)| is_static && !s) {
            best = Some((path.clone(), is_static));
        }
    }
    best.map(|(p, _)| p).ok_or_else(|| {
        anyhow::anyhow!(
            "no kprof-agent for a `{}` board found next to kprofctl: build one with \
             `ci/build-agent {}` and pass its path with --agent",
            uname.trim(),
            rust_target_for_uname(uname).unwrap_or("RUST_TARGET")
        )
    })
}

/// The Rust target ci/build-agent builds a static agent for, by the board's `uname -m`.
/// 32-bit Arm boards that say `armv7l` (or `armv8l`: an arm64 kernel running 32-bit) get
/// the hard-float armv7 build, as Debian's armhf and the default Yocto/Buildroot armv7 images.
pub fn rust_target_for_uname(uname: &str) -> Option<&'static str> {
    Some(match uname.trim() {
        "x86_64" | "amd64" => "x86_64-unknown-linux-gnu",
        "aarch64" | "arm64" => "aarch64-unknown-linux-gnu",
        "armv7l" | "armv7" | "armv8l" | "armhf" => "armv7-unknown-linux-gnueabihf",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 32-bit Arm board (`uname -m` armv7l) is told to build the armhf agent; machines
    /// ci/build-agent has no build for get the placeholder.
    #[test]
    fn rust_target_for_uname_armv7l_armhf() {
        assert_eq!(
            rust_target_for_uname("armv7l\n"),
            Some("armv7-unknown-linux-gnueabihf")
        );
        assert_eq!(
            rust_target_for_uname("aarch64"),
            Some("aarch64-unknown-linux-gnu")
        );
        assert_eq!(rust_target_for_uname("armv5tel"), None);
        assert_eq!(rust_target_for_uname("riscv64"), None);
    }
    use crate::remote::guard::tests::sh;
    use std::os::unix::fs::PermissionsExt as _;

    /// Staging in a world-writable directory (the old `/tmp/kprof-agent.kprof-new`) is
    /// refused with the directory's name and mode, without touching a planted staging file.
    #[test]
    fn prepare_script_world_writable_dir_refused() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let victim = real.join("shadow");
        std::fs::write(&victim, "secret\n").unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o1777)).unwrap();
        std::os::unix::fs::symlink(&victim, real.join("kprof-agent.kprof-new")).unwrap();
        let d = real.to_str().unwrap();
        let (out, err, code) = sh(&prepare_script(d, "kprof-agent"));
        assert_eq!((out.as_str(), code), ("", Some(253)), "{err}");
        assert_eq!(
            err.trim(),
            format!(
                "refusing to install kprof-agent in {d}: {d} is writable by other users \
                 (mode drwxrwxrwt)"
            )
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "secret\n");
    }

    /// Issue 36, item 11: an install path below a directory others can write is refused
    /// before anything is made in it (before: `mkdir -p` created `sub/bin` first), and one
    /// through a link another user planted there creates nothing where it points.
    #[test]
    fn prepare_script_checks_before_mkdir() {
        let dir = tempfile::tempdir().unwrap();
        let real = std::fs::canonicalize(dir.path()).unwrap();
        let shared = real.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let victim = real.join("victim");
        std::fs::create_dir(&victim).unwrap();
        let link = shared.join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let refused = |sub: &str, why: &str| {
            let d = shared.join(sub);
            let (out, err, code) = sh(&prepare_script(d.to_str().unwrap(), "kprof-agent"));
            assert_eq!((out.as_str(), code), ("", Some(253)), "{err}");
            assert!(err.contains(why), "{err}");
        };
        refused("sub/bin", "is writable by other users");
        if crate::files::effective_uid() == 0 {
            std::os::unix::fs::lchown(&link, Some(65534), None).unwrap();
            let why = format!("{} is a symbolic link owned by uid 65534", link.display());
            refused("link/bin", &why);
        }
        assert!(!shared.join("sub").exists(), "created before the check");
        assert!(!victim.join("bin").exists(), "created through the link");
    }
}

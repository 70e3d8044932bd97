//! `kprofctl build`: builds the agent (or a whole image) with whatever build system the
//! current directory belongs to.
//!
//! - Yocto build directory (`$BUILDDIR`, or `conf/bblayers.conf` here): `bitbake kprof-agent`,
//!   or `bitbake IMAGE` with `--image IMAGE`; bitbake must be on `PATH` (oe-init-build-env).
//! - Buildroot output directory (`.config` with `BR2_` options and a `Makefile`):
//!   `make kprof-rebuild`, or `make` with `--image`.
//! - Otherwise, inside the kprof source tree: the static agent with cargo, what
//!   `ci/build-agent` does (`--profile agent`, `crt-static`, `--target`).
//!
//! The tool's whole output goes to a log file; the terminal shows a spinner with its last
//! line, and on failure the log's path and its tail.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Instant;

use anyhow::{bail, Context};

use crate::discover::{is_buildroot_dir, is_yocto_builddir};

/// Arguments of `kprofctl build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {
    /// Build an image instead of only the agent. Yocto: the image recipe (e.g.
    /// core-image-minimal); Buildroot: the whole configuration (`make`), no name needed.
    #[arg(long, value_name = "IMAGE", num_args = 0..=1, default_missing_value = "")]
    pub image: Option<String>,
    /// Directory to build in (default: the current one; for Yocto, $BUILDDIR when set).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<PathBuf>,
    /// Rust target of the agent, for a cargo build outside Yocto and Buildroot.
    #[arg(
        long,
        value_name = "TRIPLE",
        default_value = "x86_64-unknown-linux-gnu"
    )]
    pub target: String,
    /// Where the tool's output goes (default: kprof-build.log in the build directory).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
}

/// The build system found, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// A Yocto build directory (TOPDIR).
    Yocto(PathBuf),
    /// A Buildroot output directory (or the top of an in-tree build).
    Buildroot(PathBuf),
    /// The kprof cargo workspace.
    Cargo(PathBuf),
}

/// Finds the build system for `dir`; `builddir_env` is `$BUILDDIR` (set by oe-init-build-env).
pub fn detect(dir: &Path, builddir_env: Option<&Path>) -> anyhow::Result<Backend> {
    if let Some(b) = builddir_env.filter(|b| is_yocto_builddir(b)) {
        // oe-init-build-env leaves the shell in BUILDDIR; a build started from elsewhere
        // (say the kprof tree) with the environment still set builds there too.
        if dir.starts_with(b) || !is_buildroot_dir(dir) {
            return Ok(Backend::Yocto(b.to_path_buf()));
        }
    }
    if is_yocto_builddir(dir) {
        return Ok(Backend::Yocto(dir.to_path_buf()));
    }
    if is_buildroot_dir(dir) {
        return Ok(Backend::Buildroot(dir.to_path_buf()));
    }
    for d in dir.ancestors() {
        if is_kprof_workspace(d) {
            return Ok(Backend::Cargo(d.to_path_buf()));
        }
    }
    bail!(
        "{}: not a Yocto build directory (conf/bblayers.conf), a Buildroot output directory \
         (.config with BR2_ options and Makefile) or inside the kprof source tree",
        dir.display()
    )
}

/// Buildroot: `make kprof-rebuild`, whose result is the agent it installed (cargo install into
/// the target directory), what `kprofctl deploy --agent` takes; `make` with `--image`, whose
/// result is `images/`.
fn buildroot_plan(dir: &Path, image: Option<&str>) -> Plan {
    // In-tree builds (make in Buildroot's top) put everything in output/.
    let out = if dir.join("build").is_dir() || !dir.join("output").is_dir() {
        dir.to_path_buf()
    } else {
        dir.join("output")
    };
    // With per-package directories, `kprof-rebuild` installs into the package's own target
    // directory; the global one is assembled only when the image is made.
    let target = if buildroot_option(&out, "BR2_PER_PACKAGE_DIRECTORIES") {
        out.join("per-package/kprof/target")
    } else {
        out.join("target")
    };
    let (args, result) = match image {
        None => (
            vec!["kprof-rebuild".to_string()],
            target.join("usr/bin/kprof-agent"),
        ),
        Some(_) => (Vec::new(), out.join("images")),
    };
    Plan {
        program: "make".into(),
        what: format!(
            "make {}",
            if args.is_empty() {
                "(all)".to_string()
            } else {
                args.join(" ")
            }
        ),
        args,
        env: Vec::new(),
        cwd: dir.to_path_buf(),
        result: Some(result),
    }
}

/// Whether the Buildroot configuration of output directory `out` sets `option=y`.
fn buildroot_option(out: &Path, option: &str) -> bool {
    let wanted = format!("{option}=y");
    std::fs::read_to_string(out.join(".config")).is_ok_and(|c| c.lines().any(|l| l == wanted))
}

fn is_kprof_workspace(d: &Path) -> bool {
    std::fs::read_to_string(d.join("agent").join("Cargo.toml"))
        .is_ok_and(|t| t.contains("name = \"kprof-agent\""))
        && d.join("Cargo.lock").is_file()
}

/// One tool run: program, arguments, environment additions, working directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub program: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// What is being built, for messages.
    pub what: String,
    /// Where the result is, printed on success.
    pub result: Option<PathBuf>,
}

/// The command that builds what `image` asks for with `backend`.
pub fn plan(backend: &Backend, image: Option<&str>, target: &str) -> anyhow::Result<Plan> {
    Ok(match backend {
        Backend::Yocto(dir) => {
            let recipe = match image {
                None => "kprof-agent".to_string(),
                Some("") => bail!(
                    "--image: name the image recipe for bitbake, e.g. --image core-image-minimal"
                ),
                Some(i) => i.to_string(),
            };
            Plan {
                program: "bitbake".into(),
                args: vec![recipe.clone()],
                env: Vec::new(),
                cwd: dir.clone(),
                what: format!("bitbake {recipe}"),
                // Where bitbake put it depends on TMPDIR and the machine: bitbake says.
                result: None,
            }
        }
        Backend::Buildroot(dir) => buildroot_plan(dir, image),
        Backend::Cargo(top) => {
            if image.is_some() {
                bail!("--image needs a Yocto build directory or a Buildroot output directory; here only the agent can be built (cargo)");
            }
            let target_dir = std::env::var_os("CARGO_TARGET_DIR")
                .map(PathBuf::from)
                .unwrap_or_else(|| top.join("target"));
            Plan {
                program: "cargo".into(),
                args: [
                    "build",
                    "--locked",
                    "--profile",
                    "agent",
                    "-p",
                    "kprof-agent",
                    "--target",
                    target,
                ]
                .iter()
                .map(|s| s.to_string())
                .collect(),
                env: static_agent_env(target),
                cwd: top.clone(),
                what: format!("kprof-agent for {target} (cargo)"),
                result: Some(target_dir.join(target).join("agent").join("kprof-agent")),
            }
        }
    })
}

/// The environment of ci/build-agent's static agent build: static so that it runs on any
/// board libc (--target keeps crt-static away from build scripts and proc-macros, which
/// cannot be static), and its size options (issue 26; ci/build-agent's comments say why).
fn static_agent_env(target: &str) -> Vec<(String, String)> {
    let rustflags = format!(
        "{} -C target-feature=+crt-static -C relocation-model=static \
         -C link-arg=-Wl,--no-eh-frame-hdr",
        std::env::var("RUSTFLAGS").unwrap_or_default()
    );
    let cflags_var = format!("CFLAGS_{}", target.replace('-', "_"));
    let mut cflags = format!(
        "{} -DDYNAMIC_BMI2=0 -DHUF_FORCE_DECOMPRESS_X1=1 \
         -DZSTD_FORCE_DECOMPRESS_SEQUENCES_SHORT=1",
        std::env::var(&cflags_var).unwrap_or_default()
    );
    for s in [
        "DFAST", "GREEDY", "LAZY", "LAZY2", "BTLAZY2", "BTOPT", "BTULTRA",
    ] {
        cflags.push_str(&format!(" -DZSTD_EXCLUDE_{s}_BLOCK_COMPRESSOR"));
    }
    vec![
        ("RUSTFLAGS".into(), rustflags.trim().to_string()),
        (cflags_var, cflags.trim().to_string()),
        ("KPROF_ZSTD_MAX_STRATEGY_LEVEL".into(), "2".into()),
    ]
}

pub fn run(args: BuildArgs) -> anyhow::Result<()> {
    let dir = match &args.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("current directory")?,
    };
    let dir = dir
        .canonicalize()
        .with_context(|| format!("--dir {}", dir.display()))?;
    let builddir_env = std::env::var_os("BUILDDIR")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from);
    let backend = detect(
        &dir,
        if args.dir.is_some() {
            None
        } else {
            builddir_env.as_deref()
        },
    )?;
    let plan = plan(&backend, args.image.as_deref(), &args.target)?;
    let log = args
        .log
        .clone()
        .unwrap_or_else(|| plan.cwd.join("kprof-build.log"));
    let status = execute(&plan, &log)?;
    if !status.success() {
        let tail = log_tail(&log, 15);
        bail!(
            "{} failed ({status}); last lines:\n{tail}\nfull output: {}",
            plan.what,
            log.display()
        );
    }
    eprintln!("kprofctl: {} done; output in {}", plan.what, log.display());
    if let Some(r) = &plan.result {
        println!("{}", r.display());
    }
    Ok(())
}

/// Runs the plan with its output going to `log`; a spinner shows the latest line.
fn execute(plan: &Plan, log: &Path) -> anyhow::Result<ExitStatus> {
    which(&plan.program).with_context(|| match plan.program.as_str() {
        "bitbake" => {
            "bitbake is not on PATH: `source oe-init-build-env` in this shell first".to_string()
        }
        p => format!("{p} is not on PATH"),
    })?;
    let mut logf =
        File::create(log).with_context(|| format!("creating the build log {}", log.display()))?;
    writeln!(
        logf,
        "$ cd {} && {} {}",
        plan.cwd.display(),
        plan.program,
        plan.args.join(" ")
    )?;
    let mut child = Command::new(&plan.program)
        .args(&plan.args)
        .envs(plan.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&plan.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", plan.program))?;
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let readers = line_readers(&mut child, &tx);
    drop(tx);

    let spinner = crate::progress::spinner(&plan.what);
    let started = Instant::now();
    let mut write_error = None;
    for chunk in rx {
        if write_error.is_none() {
            if let Err(e) = logf.write_all(&chunk) {
                write_error = Some(e);
            }
        }
        let text = String::from_utf8_lossy(&chunk);
        let last = text.rsplit('\r').map(str::trim).find(|s| !s.is_empty());
        if let Some(last) = last {
            spinner.set_message(last.to_string());
        }
    }
    for r in readers {
        let _ = r.join();
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for {}", plan.program))?;
    spinner.finish_and_clear();
    writeln!(
        logf,
        "# {status} after {:.1} s",
        started.elapsed().as_secs_f64()
    )?;
    if let Some(e) = write_error {
        return Err(e).with_context(|| format!("writing the build log {}", log.display()));
    }
    Ok(status)
}

/// One thread per output stream of `child`, sending its lines to `tx`.
fn line_readers(child: &mut Child, tx: &mpsc::Sender<Vec<u8>>) -> Vec<JoinHandle<()>> {
    [
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    ]
    .into_iter()
    .flatten()
    .map(|stream| {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stream);
            let mut line = Vec::new();
            // Lines, and also carriage-return-separated progress updates.
            while r.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                if tx.send(std::mem::take(&mut line)).is_err() {
                    break;
                }
            }
        })
    })
    .collect()
}

fn which(program: &str) -> anyhow::Result<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
        .ok_or_else(|| anyhow::anyhow!("{program}: not found"))
}

/// The last `n` lines of the log, for the failure message.
fn log_tail(log: &Path, n: usize) -> String {
    let Ok(text) = std::fs::read(log) else {
        return String::new();
    };
    let text = String::from_utf8_lossy(&text);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(root: &Path, files: &[(&str, &str)]) {
        for (p, c) in files {
            let f = root.join(p);
            std::fs::create_dir_all(f.parent().unwrap()).unwrap();
            std::fs::write(f, c).unwrap();
        }
    }

    /// A directory oe-init-build-env set up is Yocto, and bitbake builds kprof-agent there.
    #[test]
    fn detect_yocto_builddir_plans_bitbake_agent() {
        let d = tempfile::tempdir().unwrap();
        tree(
            d.path(),
            &[
                ("conf/local.conf", "MACHINE ??= \"qemux86-64\"\n"),
                ("conf/bblayers.conf", "BBLAYERS ?= \"\"\n"),
            ],
        );
        let b = detect(d.path(), None).unwrap();
        assert_eq!(b, Backend::Yocto(d.path().to_path_buf()));
        let p = plan(&b, None, "x").unwrap();
        assert_eq!(
            (p.program.as_str(), p.args.clone()),
            ("bitbake", vec!["kprof-agent".to_string()])
        );
        assert_eq!(
            plan(&b, Some("core-image-minimal"), "x").unwrap().args,
            vec!["core-image-minimal"]
        );
        assert!(plan(&b, Some(""), "x")
            .unwrap_err()
            .to_string()
            .contains("name the image recipe"));
    }

    /// $BUILDDIR wins over the current directory when that is not a Buildroot tree.
    #[test]
    fn detect_yocto_builddir_env_from_elsewhere() {
        let d = tempfile::tempdir().unwrap();
        tree(
            d.path(),
            &[
                ("build/conf/local.conf", ""),
                ("build/conf/bblayers.conf", ""),
                ("src/x", ""),
            ],
        );
        let b = detect(&d.path().join("src"), Some(&d.path().join("build"))).unwrap();
        assert_eq!(b, Backend::Yocto(d.path().join("build")));
    }

    /// A Buildroot output directory rebuilds the kprof package (the result: the agent it
    /// installed, to deploy; in the package's own target directory with per-package
    /// directories), or everything with --image (the images).
    #[test]
    fn detect_buildroot_output_plans_make() {
        let d = tempfile::tempdir().unwrap();
        tree(
            d.path(),
            &[
                (".config", "BR2_x86_64=y\nBR2_PACKAGE_KPROF=y\n"),
                ("Makefile", "all:\n"),
            ],
        );
        let b = detect(d.path(), None).unwrap();
        assert_eq!(b, Backend::Buildroot(d.path().to_path_buf()));
        let agent = plan(&b, None, "x").unwrap();
        assert_eq!(agent.args, vec!["kprof-rebuild"]);
        assert_eq!(
            agent.result,
            Some(d.path().join("target/usr/bin/kprof-agent"))
        );
        let image = plan(&b, Some(""), "x").unwrap();
        assert!(image.args.is_empty());
        assert_eq!(image.result, Some(d.path().join("images")));
        // Per-package directories: the rebuilt agent is in the package's target directory.
        std::fs::write(
            d.path().join(".config"),
            "BR2_x86_64=y\nBR2_PACKAGE_KPROF=y\nBR2_PER_PACKAGE_DIRECTORIES=y\n",
        )
        .unwrap();
        assert_eq!(
            plan(&b, None, "x").unwrap().result,
            Some(
                d.path()
                    .join("per-package/kprof/target/usr/bin/kprof-agent")
            )
        );
    }

    /// A kernel tree's .config (CONFIG_ only) is not Buildroot.
    #[test]
    fn detect_kernel_tree_is_not_buildroot() {
        let d = tempfile::tempdir().unwrap();
        tree(
            d.path(),
            &[
                (".config", "CONFIG_PERF_EVENTS=y\n"),
                ("Makefile", "all:\n"),
            ],
        );
        let err = detect(d.path(), None).unwrap_err().to_string();
        assert!(err.contains("not a Yocto build directory"), "{err}");
    }

    /// Inside the kprof tree, the agent is built static with the agent profile.
    #[test]
    fn detect_cargo_workspace_plans_static_agent() {
        let d = tempfile::tempdir().unwrap();
        tree(
            d.path(),
            &[
                ("agent/Cargo.toml", "[package]\nname = \"kprof-agent\"\n"),
                ("Cargo.lock", ""),
                ("agent/src/main.rs", ""),
            ],
        );
        let b = detect(&d.path().join("agent/src"), None).unwrap();
        assert_eq!(b, Backend::Cargo(d.path().to_path_buf()));
        let p = plan(&b, None, "aarch64-unknown-linux-gnu").unwrap();
        assert_eq!(
            p.args,
            [
                "build",
                "--locked",
                "--profile",
                "agent",
                "-p",
                "kprof-agent",
                "--target",
                "aarch64-unknown-linux-gnu"
            ]
        );
        assert!(p
            .env
            .iter()
            .any(|(k, v)| k == "RUSTFLAGS" && v.contains("+crt-static")));
        assert!(p
            .env
            .iter()
            .any(|(k, v)| k == "RUSTFLAGS" && v.contains("-C relocation-model=static")));
        assert!(p.env.iter().any(
            |(k, v)| k == "CFLAGS_aarch64_unknown_linux_gnu" && v.contains("-DDYNAMIC_BMI2=0")
        ));
        assert!(p
            .result
            .unwrap()
            .ends_with("aarch64-unknown-linux-gnu/agent/kprof-agent"));
        assert!(plan(&b, Some("core-image-minimal"), "x").is_err());
    }
}

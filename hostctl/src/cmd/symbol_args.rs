//! Options that say where symbol files are, shared by `report`, `symbols`, `diff` and `fetch`.

use crate::discover::Bitbake;
use crate::user_config::{ConfigFile, Origin};
use anyhow::Context;
use std::path::{Path, PathBuf};

/// Where to look for symbol files (matched by build-id only).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SymbolArgs {
    /// A symbol file or a directory to index (repeatable): vmlinux, unstripped .ko, ELF, .debug,
    /// or a `perf archive` tarball (perf.data.tar.bz2).
    #[arg(long = "symbols", value_name = "PATH")]
    pub symbols: Vec<PathBuf>,
    /// A Yocto build directory (default: $BUILDDIR when set).
    #[arg(long, value_name = "BUILDDIR")]
    pub yocto: Option<PathBuf>,
    /// A Buildroot output directory.
    #[arg(long, value_name = "OUTPUT")]
    pub buildroot: Option<PathBuf>,
    /// Rewrite source paths recorded at build time (repeatable), e.g. /build/linux=/home/me/linux.
    #[arg(long = "source-prefix", value_name = "OLD=NEW")]
    pub source_prefix: Vec<String>,
    /// Ask no debuginfod server (`DEBUGINFOD_URLS`); files already in the debuginfod cache
    /// are still used.
    #[arg(long)]
    pub offline: bool,
    /// Name every image in the warnings about images (without, each kind names the four
    /// most concerned and counts the rest).
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Whether the user's setup adds to the command line: a `kprof.toml` (`$KPROF_CONFIG`, or
    /// found from the working directory up) and `$BUILDDIR`. The command line reads them;
    /// `SymbolArgs::default()` does not, so that code built from it (the unit tests) sees only
    /// what it was given.
    #[arg(skip = UserSetup::Read)]
    pub user_setup: UserSetup,
}

/// Whether [`SymbolArgs`] reads the user's `kprof.toml` and `$BUILDDIR`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UserSetup {
    /// Read them (every kprofctl command line).
    Read,
    /// Only the fields given.
    #[default]
    Ignore,
}

impl SymbolArgs {
    /// Appends to `p`'s warnings one line per kind of its image warnings, for the images its
    /// (filtered) samples touch; call it once the profile is cut to what is shown.
    pub fn add_image_warnings(&self, p: &mut kprof_symbols::profile::Profile) {
        let named = (!self.verbose).then_some(kprof_symbols::image_warnings::NAMED);
        let lines = kprof_symbols::image_warnings::grouped(p, named);
        p.warnings.extend(lines);
        p.image_warnings.clear();
    }
}

/// `kprof.toml` as far as symbols go.
#[derive(Debug, Default, serde::Deserialize)]
struct Config {
    #[serde(default)]
    symbols: ConfigSymbols,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigSymbols {
    /// As `--symbols`.
    #[serde(default)]
    paths: Vec<PathBuf>,
    /// As `--buildroot`, when the command line gives none.
    buildroot: Option<PathBuf>,
    /// As `--yocto`, when the command line gives none (before `$BUILDDIR`).
    yocto: Option<PathBuf>,
}

/// `kprof.toml`'s `[symbols]` (see [`crate::user_config`]), its relative paths made relative
/// to the file, not to where kprofctl runs; empty without a file.
fn config_symbols() -> anyhow::Result<(ConfigSymbols, Option<ConfigFile>)> {
    match crate::user_config::find()? {
        Some(file) => Ok((read_config(&file.path, &file.text)?, Some(file))),
        None => Ok((ConfigSymbols::default(), None)),
    }
}

fn read_config(file: &Path, text: &str) -> anyhow::Result<ConfigSymbols> {
    let cfg: Config =
        toml::from_str(text).with_context(|| format!("{}: bad kprof.toml", file.display()))?;
    let base = file.parent().unwrap_or(Path::new("."));
    let mut symbols = cfg.symbols;
    for p in symbols
        .paths
        .iter_mut()
        .chain(&mut symbols.buildroot)
        .chain(&mut symbols.yocto)
    {
        *p = base.join(&*p);
    }
    Ok(symbols)
}

/// Whether the Yocto directory of `file` may be handed to bitbake.
fn bitbake_for(file: Option<&ConfigFile>) -> Bitbake {
    match file {
        Some(f) if f.origin == Origin::Found => Bitbake::NotFromFoundFile(f.path.clone()),
        _ => Bitbake::MayRun,
    }
}

impl SymbolArgs {
    /// Every path to index: `--symbols`, kprof.toml, the Yocto and Buildroot trees.
    /// Trees that cannot be read as such are errors: the user asked for them.
    pub fn paths(&self) -> anyhow::Result<Vec<PathBuf>> {
        let mut out = Vec::new();
        for p in &self.symbols {
            if !p.exists() {
                anyhow::bail!("--symbols {}: no such file or directory", p.display());
            }
            if crate::cmd::perf_archive::is_perf_archive(p) {
                let cache = crate::cmd::host_symbols::cache_dir().with_context(|| {
                    format!(
                        "--symbols {}: no cache directory to unpack it to (set KPROF_CACHE_DIR)",
                        p.display()
                    )
                })?;
                out.push(crate::cmd::perf_archive::unpack(p, &cache)?);
            } else {
                out.push(p.clone());
            }
        }
        let ((config, file), builddir) = match self.user_setup {
            UserSetup::Read => (
                config_symbols()?,
                std::env::var_os("BUILDDIR")
                    .filter(|v| !v.is_empty())
                    .map(PathBuf::from),
            ),
            UserSetup::Ignore => ((ConfigSymbols::default(), None), None),
        };
        out.extend(config.paths);
        // bitbake runs Python from the build directory's conf/: only in one the user named
        // (the command line, $BUILDDIR, $KPROF_CONFIG), never one from a file found by search.
        let yocto = match (&self.yocto, config.yocto, builddir) {
            (Some(y), _, _) => Some((y.clone(), Bitbake::MayRun)),
            (None, Some(y), _) => Some((y, bitbake_for(file.as_ref()))),
            (None, None, b) => b.map(|b| (b, Bitbake::MayRun)),
        };
        if let Some((y, bitbake)) = yocto {
            let found = crate::discover::yocto_symbol_paths(&y, bitbake)
                .with_context(|| format!("Yocto build directory {}", y.display()))?;
            out.extend(found);
        }
        if let Some(b) = self.buildroot.as_ref().or(config.buildroot.as_ref()) {
            let found = crate::discover::buildroot_symbol_paths(b)
                .with_context(|| format!("Buildroot output directory {}", b.display()))?;
            out.extend(found);
        }
        Ok(out)
    }

    /// Where symbol files from elsewhere are: the perf archives unpacked into kprofctl's
    /// cache and debuginfod's cache. Their debug info does not choose which of this host's
    /// files a report shows.
    fn foreign_roots() -> Vec<PathBuf> {
        let mut roots: Vec<PathBuf> = crate::cmd::host_symbols::cache_dir()
            .map(|c| kprof_symbols::perf_archive::cache_root(&c))
            .into_iter()
            .collect();
        if let Ok(Some(config)) = kprof_debuginfod::Config::from_env() {
            roots.push(config.cache_dir);
        }
        roots
    }

    /// `--source-prefix OLD=NEW` pairs.
    pub fn prefixes(&self) -> anyhow::Result<Vec<(String, String)>> {
        self.source_prefix
            .iter()
            .map(|s| match s.split_once('=') {
                Some((a, b)) if !a.is_empty() => Ok((a.to_string(), b.to_string())),
                _ => anyhow::bail!("--source-prefix {s:?}: expected OLD=NEW"),
            })
            .collect()
    }

    /// Symbolizer options for these arguments, looking into this host too.
    pub fn options(&self) -> anyhow::Result<kprof_symbols::Options> {
        let paths = self.paths()?;
        Ok(kprof_symbols::Options {
            source_prefix: self.prefixes()?,
            foreign_roots: Self::foreign_roots(),
            providers: crate::debuginfod::from_env(self.offline)?
                .into_iter()
                .collect(),
            ..super::host_symbols::options(paths)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `[symbols]` of kprof.toml: paths, buildroot and yocto relative to the file; an unknown
    /// key is an error naming the file.
    #[test]
    fn read_config_kprof_toml_relative_to_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("kprof.toml");
        std::fs::write(
            &file,
            "[symbols]\npaths = [\"syms\", \"/abs\"]\nbuildroot = \"br/output\"\nyocto = \"/y\"\n",
        )
        .unwrap();
        let read = |f: &Path| read_config(f, &std::fs::read_to_string(f).unwrap());
        let c = read(&file).unwrap();
        assert_eq!(c.paths, [dir.path().join("syms"), PathBuf::from("/abs")]);
        assert_eq!(c.buildroot, Some(dir.path().join("br/output")));
        assert_eq!(c.yocto, Some(PathBuf::from("/y")));
        std::fs::write(&file, "[symbols]\nbuildrot = \"x\"\n").unwrap();
        let err = format!("{:#}", read(&file).unwrap_err());
        assert!(
            err.contains("kprof.toml") && err.contains("buildrot"),
            "{err}"
        );
    }
}

//! Options that say where symbol files are, shared by `report`, `symbols`, `diff` and `fetch`.

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
}

/// `kprof.toml` as far as symbols go.
#[derive(Debug, Default, serde::Deserialize)]
struct Config {
    #[serde(default)]
    symbols: ConfigSymbols,
}

#[derive(Debug, Default, serde::Deserialize)]
struct ConfigSymbols {
    #[serde(default)]
    paths: Vec<PathBuf>,
}

/// The nearest `kprof.toml` in the working directory or above; `$KPROF_CONFIG` overrides.
fn config_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("KPROF_CONFIG") {
        return Some(PathBuf::from(p));
    }
    let mut dir = std::env::current_dir().ok()?;
    loop {
        let c = dir.join("kprof.toml");
        if c.is_file() {
            return Some(c);
        }
        if !dir.pop() {
            return None;
        }
    }
}

fn config_paths() -> anyhow::Result<Vec<PathBuf>> {
    let Some(file) = config_file() else {
        return Ok(Vec::new());
    };
    let text =
        std::fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let cfg: Config =
        toml::from_str(&text).with_context(|| format!("{}: bad kprof.toml", file.display()))?;
    let base = file.parent().unwrap_or(Path::new("."));
    // Relative paths in kprof.toml are relative to the file, not to where kprofctl runs.
    Ok(cfg
        .symbols
        .paths
        .into_iter()
        .map(|p| base.join(p))
        .collect())
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
        out.extend(config_paths()?);
        let yocto = self.yocto.clone().or_else(|| {
            std::env::var_os("BUILDDIR")
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        });
        if let Some(y) = yocto {
            let found = crate::discover::yocto_symbol_paths(&y)
                .with_context(|| format!("Yocto build directory {}", y.display()))?;
            out.extend(found);
        }
        if let Some(b) = &self.buildroot {
            let found = crate::discover::buildroot_symbol_paths(b)
                .with_context(|| format!("Buildroot output directory {}", b.display()))?;
            out.extend(found);
        }
        Ok(out)
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
            providers: crate::debuginfod::from_env(self.offline)?
                .into_iter()
                .collect(),
            ..super::host_symbols::options(paths)
        })
    }
}

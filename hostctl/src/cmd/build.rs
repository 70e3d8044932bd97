//! `kprofctl build`.

/// Arguments of `kprofctl build`.
#[derive(Debug, clap::Args)]
pub struct BuildArgs {}

pub fn run(_args: BuildArgs) -> anyhow::Result<()> {
    anyhow::bail!("`kprofctl build` is not available in this build")
}

//! `kprofctl run`.

/// Arguments of `kprofctl run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {}

pub fn run(_args: RunArgs) -> anyhow::Result<()> {
    anyhow::bail!("`kprofctl run` is not available in this build")
}

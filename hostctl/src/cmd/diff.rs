//! `kprofctl diff`.

/// Arguments of `kprofctl diff`.
#[derive(Debug, clap::Args)]
pub struct DiffArgs {}

pub fn run(_args: DiffArgs) -> anyhow::Result<()> {
    anyhow::bail!("`kprofctl diff` is not available in this build")
}

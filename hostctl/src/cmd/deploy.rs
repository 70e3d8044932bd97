//! `kprofctl deploy`.

/// Arguments of `kprofctl deploy`.
#[derive(Debug, clap::Args)]
pub struct DeployArgs {}

pub fn run(_args: DeployArgs) -> anyhow::Result<()> {
    anyhow::bail!("`kprofctl deploy` is not available in this build")
}

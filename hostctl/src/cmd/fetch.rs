//! `kprofctl fetch`.

/// Arguments of `kprofctl fetch`.
#[derive(Debug, clap::Args)]
pub struct FetchArgs {}

pub fn run(_args: FetchArgs) -> anyhow::Result<()> {
    anyhow::bail!("`kprofctl fetch` is not available in this build")
}

//! `kprofctl report`.

/// Arguments of `kprofctl report`.
#[derive(Debug, clap::Args)]
pub struct ReportArgs {}

pub fn run(_args: ReportArgs) -> anyhow::Result<()> {
    anyhow::bail!("`kprofctl report` is not available in this build")
}

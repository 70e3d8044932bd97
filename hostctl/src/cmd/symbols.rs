//! `kprofctl symbols`.

/// Arguments of `kprofctl symbols`.
#[derive(Debug, clap::Args)]
pub struct SymbolsArgs {}

pub fn run(_args: SymbolsArgs) -> anyhow::Result<()> {
    anyhow::bail!("`kprofctl symbols` is not available in this build")
}

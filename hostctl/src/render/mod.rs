//! Output formats of `kprofctl report`, each rendered from a `kprof_symbols::profile::Profile`.

pub mod collapsed;
pub mod flamegraph;
pub mod html;
pub mod json;
pub mod pprof;
pub mod text;

//! The library's error type: every variant names the file or thing at fault.

use std::path::PathBuf;

/// Errors of reading a capture or a symbol file.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing a file failed.
    ///
    /// The message already ends with the reason, so the I/O error is deliberately not the
    /// [`source`](std::error::Error::source): a chain printer (`{:#}` of anyhow) would repeat
    /// it ("No such file or directory (os error 2): No such file or directory (os error 2)").
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: std::io::Error,
    },
    /// The capture is neither a kprof archive nor a perf.data file.
    #[error("{}: not a kprof capture (.kprof.tar.gz) nor a perf.data file (first bytes {magic:02x?})", path.display())]
    UnknownFormat {
        /// The file.
        path: PathBuf,
        /// Its first bytes.
        magic: Vec<u8>,
    },
    /// The archive is damaged or misses a member.
    #[error("{}: bad kprof archive: {why}", path.display())]
    BadArchive {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The perf.data header or records are damaged.
    #[error("{}: bad perf.data: {why}", path.display())]
    BadPerfData {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The manifest does not parse or has an unknown schema.
    #[error("{}: bad manifest.json: {why}", path.display())]
    BadManifest {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// An ELF file could not be parsed.
    #[error("{}: bad ELF file: {why}", path.display())]
    BadElf {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// The capture would make kprofctl read, unpack or decompress more than the limit
    /// ([`crate::limits`]).
    #[error("{}: {why}: {}", path.display(), crate::limits::how_to_raise(*limit))]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// What went past the limit.
        why: String,
        /// The limit in bytes.
        limit: u64,
    },
    /// A setting (an environment variable) has a value that cannot be used.
    #[error("{0}")]
    BadSetting(String),
    /// A `perf archive` tarball is damaged or holds no symbol files.
    #[error("{}: bad perf archive: {why}", path.display())]
    BadPerfArchive {
        /// The tarball.
        path: PathBuf,
        /// What is wrong.
        why: String,
    },
    /// A requested function or item is not in the profile.
    #[error("{0}")]
    NotFound(String),
}

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>, error: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            error,
        }
    }
}

/// Result with the library's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// The message and its chain of sources, joined as anyhow's `{:#}` prints them.
    fn chain(e: &dyn std::error::Error) -> String {
        let mut text = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            text.push_str(&format!(": {c}"));
            cause = c.source();
        }
        text
    }

    /// A missing file's reason appears once in the printed chain.
    #[test]
    fn io_error_chain_reason_once() {
        let e = Error::io(
            "/nonexistent",
            std::fs::File::open("/nonexistent").unwrap_err(),
        );
        let text = chain(&e);
        assert_eq!(
            text.matches("No such file or directory").count(),
            1,
            "{text}"
        );
        assert!(text.starts_with("/nonexistent: "), "{text}");
    }
}

//! Errors of [`Client::new`](crate::Client::new) and [`Client::fetch`](crate::Client::fetch).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// The client could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The cache directory or its settings files cannot be created or read.
    #[error(
        "debuginfod cache {}: {source}; make it writable or set DEBUGINFOD_CACHE_PATH to a \
         writable directory",
        path.display()
    )]
    Cache {
        /// The cache directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// One file could not be had.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// No server has it (every one asked answered 404), or a miss for it was recorded in the
    /// cache less than `cache_miss_s` ago (then `tried` is empty: no server was asked).
    #[error("{}", not_found(build_id, tried))]
    NotFound {
        /// The build-id asked for.
        build_id: String,
        /// The servers asked, in order.
        tried: Vec<String>,
    },
    /// A server sent an ELF file whose GNU build-id is not the one asked for (a misconfigured
    /// server or proxy); it was not cached and is never used.
    #[error(
        "{url} served build-id {} for {wanted}; refused (the server indexes another file under \
         this build-id)",
        found.as_deref().unwrap_or("none (not an ELF file with a build-id)")
    )]
    WrongBuildId {
        /// The URL it came from.
        url: String,
        /// The build-id asked for.
        wanted: String,
        /// The build-id of the file served; `None` when it is not ELF or has none.
        found: Option<String>,
    },
    /// Larger than `DEBUGINFOD_MAXSIZE`.
    #[error(
        "{url}: {} is over DEBUGINFOD_MAXSIZE={max} bytes; raise or unset DEBUGINFOD_MAXSIZE",
        size.map_or("the file".to_string(), |s| format!("{s} bytes"))
    )]
    TooLarge {
        /// The URL.
        url: String,
        /// Its size when known (`Content-Length`, or at least the bytes received); `None` when
        /// the server refused it by its own check (HTTP 406).
        size: Option<u64>,
        /// The limit.
        max: u64,
    },
    /// The download took longer than `DEBUGINFOD_MAXTIME`; the server is still asked for
    /// other files.
    #[error(
        "{url}: not downloaded within DEBUGINFOD_MAXTIME={}s; raise or unset DEBUGINFOD_MAXTIME",
        max_time.as_secs()
    )]
    TooSlow {
        /// The URL.
        url: String,
        /// The limit.
        max_time: Duration,
    },
    /// Every server failed for transport reasons ([`Client::server_failures`](crate::Client::server_failures)
    /// says why), so nobody could be asked.
    #[error("no debuginfod server could be reached (see the warnings for each); nothing asked")]
    Offline,
    /// The build-id is not lowercase hex of even length, 2 to 64 characters.
    #[error("build-id {build_id:?}: {reason}")]
    InvalidBuildId {
        /// As given.
        build_id: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A source path that the protocol cannot carry (not absolute, or with a NUL).
    #[error("source path {path:?}: debuginfod needs the absolute path as the DWARF names it")]
    InvalidSourcePath {
        /// As given.
        path: String,
    },
    /// Reading or writing the cache failed.
    #[error("debuginfod cache {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

fn not_found(build_id: &str, tried: &[String]) -> String {
    if tried.is_empty() {
        format!("build-id {build_id}: no server had it (a recent miss recorded in the cache)")
    } else {
        format!("build-id {build_id}: not on {}", tried.join(", "))
    }
}

impl FetchError {
    /// A copy for identical requests of [`Client::fetch_all`](crate::Client::fetch_all) (an
    /// `io::Error` is not `Clone`: its kind and message are kept).
    pub(crate) fn duplicate(&self) -> FetchError {
        match self {
            FetchError::NotFound { build_id, tried } => FetchError::NotFound {
                build_id: build_id.clone(),
                tried: tried.clone(),
            },
            FetchError::WrongBuildId { url, wanted, found } => FetchError::WrongBuildId {
                url: url.clone(),
                wanted: wanted.clone(),
                found: found.clone(),
            },
            FetchError::TooLarge { url, size, max } => FetchError::TooLarge {
                url: url.clone(),
                size: *size,
                max: *max,
            },
            FetchError::TooSlow { url, max_time } => FetchError::TooSlow {
                url: url.clone(),
                max_time: *max_time,
            },
            FetchError::Offline => FetchError::Offline,
            FetchError::InvalidBuildId { build_id, reason } => FetchError::InvalidBuildId {
                build_id: build_id.clone(),
                reason: reason.clone(),
            },
            FetchError::InvalidSourcePath { path } => {
                FetchError::InvalidSourcePath { path: path.clone() }
            }
            FetchError::Io { path, source } => FetchError::Io {
                path: path.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
        }
    }
}

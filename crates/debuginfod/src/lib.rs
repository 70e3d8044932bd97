//! A debuginfod client for kprofctl: fetches `debuginfo`, `executable` and `source/PATH` by GNU
//! build-id from the servers in `DEBUGINFOD_URLS`, into the cache gdb, perf and
//! `debuginfod-find` use, and refuses any ELF file whose build-id is not the one asked for.
//!
//! # Why a thin client on `ureq`
//!
//! The `debuginfod` crate (by blazesym's author) was read and not taken: its errors are
//! `anyhow` (a library here uses its own error types, so kprofctl can say *which* server and
//! build-id failed and why), its HTTP backend is `reqwest`'s blocking client (a tokio runtime
//! under the hood), it fetches `debuginfo` only (kprof also needs `executable` for `.eh_frame`
//! and `source/PATH` for `--annotate`), and its cache stores `ID/debuginfo` without elfutils'
//! negative-cache entries, `cache_miss_s`, file modes or source file names, so it would not share
//! misses with gdb and perf. This crate is a thin client on `ureq` 3 (blocking, maintained,
//! rustls, checked against the host's CA bundle as libcurl does, so a company CA installed on
//! the host works), with elfutils' cache layout implemented here (module `cache`,
//! described in `docs/debuginfod.md`).
//!
//! # What it does
//!
//! - [`Config::from_env`] reads the `DEBUGINFOD_*` variables as elfutils does; a malformed value
//!   is a [`ConfigError`] naming the variable and value.
//! - [`Client::fetch`] looks in the cache first (elfutils' negative cache honoured), then asks
//!   each server in turn; a server that fails for transport reasons (refused, timeout, TLS, 5xx)
//!   is not asked again by that [`Client`] ([`Client::server_failures`]).
//! - Every ELF artifact is parsed and its GNU build-id compared with the requested one before it
//!   is renamed into the cache: another id is [`FetchError::WrongBuildId`] and nothing is cached.
//! - [`Client::fetch_all`] fetches many files on `jobs` threads, reporting [`Progress`].
#![warn(missing_docs)]

mod build_id;
mod cache;
mod clean;
mod client;
mod config;
mod error;
mod fetch_all;
mod http;
mod tls;
mod url;

pub use build_id::validate_build_id;
pub use client::Client;
pub use config::{Config, ConfigError};
pub use error::{Error, FetchError};

use std::path::PathBuf;

/// What to fetch for a build-id: the three artifacts of the debuginfod protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Artifact<'a> {
    /// `/buildid/ID/debuginfo`: the file with the DWARF (split debug file or unstripped ELF).
    Debuginfo,
    /// `/buildid/ID/executable`: the file that ran (for `.eh_frame` when the debuginfo is split).
    Executable,
    /// `/buildid/ID/source/PATH`: a source file, by its absolute path as the DWARF names it.
    Source(&'a str),
}

impl Artifact<'_> {
    /// The protocol's name of the artifact type (`debuginfo`, `executable`, `source`).
    pub fn kind(&self) -> &'static str {
        match self {
            Artifact::Debuginfo => "debuginfo",
            Artifact::Executable => "executable",
            Artifact::Source(_) => "source",
        }
    }

    /// The owned form, for a [`Request`].
    pub fn to_owned_artifact(&self) -> OwnedArtifact {
        match self {
            Artifact::Debuginfo => OwnedArtifact::Debuginfo,
            Artifact::Executable => OwnedArtifact::Executable,
            Artifact::Source(path) => OwnedArtifact::Source((*path).to_string()),
        }
    }
}

/// [`Artifact`] owning its source path, for [`Request`]s.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum OwnedArtifact {
    /// See [`Artifact::Debuginfo`].
    Debuginfo,
    /// See [`Artifact::Executable`].
    Executable,
    /// See [`Artifact::Source`].
    Source(String),
}

impl OwnedArtifact {
    /// The borrowed form that [`Client::fetch`] takes.
    pub fn as_artifact(&self) -> Artifact<'_> {
        match self {
            OwnedArtifact::Debuginfo => Artifact::Debuginfo,
            OwnedArtifact::Executable => Artifact::Executable,
            OwnedArtifact::Source(path) => Artifact::Source(path),
        }
    }
}

/// One file wanted by [`Client::fetch_all`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Request {
    /// Lowercase hex GNU build-id.
    pub build_id: String,
    /// What to fetch for it.
    pub artifact: OwnedArtifact,
}

/// A file in the cache, ready to use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// Its path in the debuginfod client cache.
    pub path: PathBuf,
    /// The server URL (as in `DEBUGINFOD_URLS`) it was downloaded from in this call; `None`
    /// when it was already in the cache.
    pub server: Option<String>,
}

/// What [`Client::fetch_all`] reports while it works.
///
/// `file` is the index in the request slice of the first request for that file (identical
/// requests are fetched once and share it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// Before any work: how many distinct files will be looked for.
    Started {
        /// Distinct files (identical requests counted once).
        files: usize,
    },
    /// After each chunk received.
    Bytes {
        /// Index of the request.
        file: usize,
        /// Bytes received so far for this file (from this server).
        done: u64,
        /// The size the server announced, if it did.
        total: Option<u64>,
    },
    /// The file is done: found, cached, or failed.
    Finished {
        /// Index of the request.
        file: usize,
    },
}

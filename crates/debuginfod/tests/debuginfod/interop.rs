//! The cache is elfutils': Debian's `debuginfod-find` (0.188) finds what kprof downloaded and
//! kprof finds what `debuginfod-find` downloaded, hits and misses, with the server stopped.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kprof_debuginfod::{Artifact, FetchError};

use crate::support::{self, Server};

const FIND: &str = "debuginfod-find";

/// `debuginfod-find ARGS` with only `urls` and `cache` as its debuginfod environment.
fn find(urls: &str, cache: &Path, args: &[&str]) -> Output {
    Command::new(FIND)
        .args(args)
        .env("DEBUGINFOD_URLS", urls)
        .env("DEBUGINFOD_CACHE_PATH", cache)
        .env("DEBUGINFOD_TIMEOUT", "10")
        .env_remove("DEBUGINFOD_PROGRESS")
        .env_remove("DEBUGINFOD_VERBOSE")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {FIND} ({e}): apt-get install debuginfod"))
}

fn found_path(output: &Output) -> PathBuf {
    assert!(
        output.status.success(),
        "{FIND} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&output.stdout).trim())
}

/// What kprof downloaded (debuginfo, executable, source) `debuginfod-find` returns from the
/// cache with the server stopped, at the same paths.
#[test]
fn fetch_artifacts_debuginfod_find_reads_cache() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "kprofput", 0x31, 1);
    let elf = &elfs[0];
    let mut server = Server::debuginfod(dir.path(), &[elf]);
    let cache = tempfile::tempdir().unwrap();
    let client = support::client(&[&server.url], cache.path());
    let debuginfo = client.fetch(&elf.build_id, Artifact::Debuginfo).unwrap();
    let executable = client.fetch(&elf.build_id, Artifact::Executable).unwrap();
    let source = client
        .fetch(&elf.build_id, Artifact::Source(&elf.source))
        .unwrap();
    server.stop();

    let id = elf.build_id.as_str();
    let found = find(&server.url, cache.path(), &["debuginfo", id]);
    assert_eq!(found_path(&found), debuginfo.path);
    let found = find(&server.url, cache.path(), &["executable", id]);
    assert_eq!(found_path(&found), executable.path);
    let found = find(&server.url, cache.path(), &["source", id, &elf.source]);
    assert_eq!(found_path(&found), source.path);
}

/// What `debuginfod-find` downloaded kprof returns from the cache with the server stopped.
#[test]
fn fetch_artifacts_reads_debuginfod_find_cache() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "findput", 0x32, 1);
    let elf = &elfs[0];
    let mut server = Server::debuginfod(dir.path(), &[elf]);
    let cache = tempfile::tempdir().unwrap();
    let id = elf.build_id.as_str();
    let debuginfo = found_path(&find(&server.url, cache.path(), &["debuginfo", id]));
    let source = found_path(&find(
        &server.url,
        cache.path(),
        &["source", id, &elf.source],
    ));
    server.stop();

    let client = support::client(&[&server.url], cache.path());
    let fetched = client.fetch(id, Artifact::Debuginfo).unwrap();
    assert_eq!((fetched.path, fetched.server), (debuginfo, None));
    let fetched = client.fetch(id, Artifact::Source(&elf.source)).unwrap();
    assert_eq!((fetched.path, fetched.server), (source, None));
    assert!(client.server_failures().is_empty());
}

/// Misses are shared both ways: within cache_miss_s, a miss recorded by either client is a
/// miss for the other with the server stopped (no connection error from either).
#[test]
fn fetch_missing_negative_cache_shared_with_debuginfod_find() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "miss", 0x33, 1);
    let mut server = Server::debuginfod(dir.path(), &[&elfs[0]]);
    let cache = tempfile::tempdir().unwrap();
    let by_kprof = "33aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    let by_find = "33bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";
    let client = support::client(&[&server.url], cache.path());
    let first = client.fetch(by_kprof, Artifact::Debuginfo);
    assert!(
        matches!(first, Err(FetchError::NotFound { .. })),
        "{first:?}"
    );
    let missed = find(&server.url, cache.path(), &["debuginfo", by_find]);
    assert!(!missed.status.success());
    server.stop();

    let stopped = find(&server.url, cache.path(), &["debuginfo", by_kprof]);
    let stderr = String::from_utf8_lossy(&stopped.stderr);
    assert!(!stopped.status.success());
    assert!(
        stderr.contains("No such file"),
        "not the cached miss: {stderr}"
    );
    let refused = find(&server.url, cache.path(), &["executable", by_kprof]);
    let refused_err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused_err.contains("No such file"),
        "server not stopped: {refused_err}"
    );

    let client = support::client(&[&server.url], cache.path());
    let result = client.fetch(by_find, Artifact::Debuginfo);
    match result {
        Err(FetchError::NotFound { tried, .. }) => assert!(tried.is_empty(), "{tried:?}"),
        other => panic!("expected the cached miss, got {other:?}"),
    }
    assert!(client.server_failures().is_empty());
}

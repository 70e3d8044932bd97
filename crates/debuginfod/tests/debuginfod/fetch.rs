//! Downloads, cache hits and misses against Debian's `debuginfod`.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;

use kprof_debuginfod::{Artifact, FetchError, OwnedArtifact, Progress, Request};

use crate::support::{self, Server};

/// debuginfo, executable and source come from the server into elfutils' cache paths, each
/// byte for byte the server's file, read-only.
#[test]
fn fetch_artifacts_from_server_verified() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "prog", 0x11, 1);
    let elf = &elfs[0];
    let server = Server::debuginfod(dir.path(), &[elf]);
    let cache = tempfile::tempdir().unwrap();
    let client = support::client(&[&server.url], cache.path());

    let debuginfo = client.fetch(&elf.build_id, Artifact::Debuginfo).unwrap();
    assert_eq!(debuginfo.server.as_deref(), Some(server.url.as_str()));
    assert_eq!(
        debuginfo.path,
        cache.path().join(&elf.build_id).join("debuginfo")
    );
    assert_eq!(
        fs::read(&debuginfo.path).unwrap(),
        fs::read(&elf.path).unwrap()
    );
    let mode = fs::metadata(&debuginfo.path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o400);

    let executable = client.fetch(&elf.build_id, Artifact::Executable).unwrap();
    assert_eq!(
        executable.path,
        cache.path().join(&elf.build_id).join("executable")
    );
    assert_eq!(
        fs::read(&executable.path).unwrap(),
        fs::read(&elf.path).unwrap()
    );

    let source = client
        .fetch(&elf.build_id, Artifact::Source(&elf.source))
        .unwrap();
    let escaped = format!("source{}", elf.source.replace('/', "##"));
    assert_eq!(source.path, cache.path().join(&elf.build_id).join(escaped));
    assert_eq!(
        fs::read(&source.path).unwrap(),
        fs::read(&elf.source).unwrap()
    );
    assert!(client.server_failures().is_empty());
}

/// With the server stopped, what was downloaded comes from the cache (`server: None`) and no
/// server is contacted (none marked failed).
#[test]
fn fetch_debuginfo_server_stopped_cache_hit() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "hit", 0x12, 1);
    let mut server = Server::debuginfod(dir.path(), &[&elfs[0]]);
    let cache = tempfile::tempdir().unwrap();
    let id = &elfs[0].build_id;
    let first = support::client(&[&server.url], cache.path())
        .fetch(id, Artifact::Debuginfo)
        .unwrap();
    server.stop();

    let client = support::client(&[&server.url], cache.path());
    assert_eq!(
        client.cached(id, Artifact::Debuginfo),
        Some(first.path.clone())
    );
    let again = client.fetch(id, Artifact::Debuginfo).unwrap();
    assert_eq!((again.path, again.server), (first.path, None));
    assert!(client.server_failures().is_empty());
}

/// A build-id no server has leaves an empty file in the cache; within cache_miss_s the next
/// request asks no server: with the server stopped it is still NotFound (not Offline) and no
/// server is marked failed.
#[test]
fn fetch_missing_negative_cache_asks_no_server() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "neg", 0x13, 1);
    let mut server = Server::debuginfod(dir.path(), &[&elfs[0]]);
    let cache = tempfile::tempdir().unwrap();
    let missing = "13ffffffffffffffffffffffffffffffffffffff";
    let client = support::client(&[&server.url], cache.path());
    match client.fetch(missing, Artifact::Debuginfo) {
        Err(FetchError::NotFound { build_id, tried }) => {
            assert_eq!(
                (build_id.as_str(), tried),
                (missing, vec![server.url.clone()])
            );
        }
        other => panic!("expected NotFound, got {other:?}"),
    }
    let mark = cache.path().join(missing).join("debuginfo");
    assert_eq!(fs::metadata(&mark).unwrap().len(), 0);
    server.stop();

    let client = support::client(&[&server.url], cache.path());
    match client.fetch(missing, Artifact::Debuginfo) {
        Err(FetchError::NotFound { tried, .. }) => assert!(tried.is_empty(), "{tried:?}"),
        other => panic!("expected NotFound from the negative cache, got {other:?}"),
    }
    assert!(
        client.server_failures().is_empty(),
        "{:?}",
        client.server_failures()
    );
    assert_eq!(client.cached(missing, Artifact::Debuginfo), None);
}

/// fetch_all over 24 ELF files (each asked for twice) fetches every one once, results in
/// request order, with progress for each distinct file.
#[test]
fn fetch_all_many_elfs_all_fetched() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "many", 0x14, 24);
    let all: Vec<_> = elfs.iter().collect();
    let server = Server::debuginfod(dir.path(), &all);
    let cache = tempfile::tempdir().unwrap();
    let client = support::client(&[&server.url], cache.path());
    let mut wanted: Vec<Request> = elfs
        .iter()
        .map(|e| Request {
            build_id: e.build_id.clone(),
            artifact: OwnedArtifact::Debuginfo,
        })
        .collect();
    wanted.extend(wanted.clone());
    let events = Mutex::new(Vec::new());
    let results = client.fetch_all(&wanted, &|p| events.lock().unwrap().push(p));

    assert_eq!(results.len(), 48);
    for (request, result) in wanted.iter().zip(&results) {
        let fetched = result.as_ref().unwrap();
        assert_eq!(
            fetched.path,
            cache.path().join(&request.build_id).join("debuginfo")
        );
    }
    for (elf, result) in elfs.iter().zip(&results) {
        let path = &result.as_ref().unwrap().path;
        assert_eq!(fs::read(path).unwrap(), fs::read(&elf.path).unwrap());
    }
    let events = events.into_inner().unwrap();
    assert_eq!(events[0], Progress::Started { files: 24 });
    let mut finished: Vec<usize> = events
        .iter()
        .filter_map(|p| match p {
            Progress::Finished { file } => Some(*file),
            _ => None,
        })
        .collect();
    finished.sort_unstable();
    assert_eq!(finished, (0..24).collect::<Vec<_>>());
    assert!(events
        .iter()
        .any(|p| matches!(p, Progress::Bytes { done, .. } if *done > 0)));
}

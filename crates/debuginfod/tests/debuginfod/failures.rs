//! Servers that are down, hung, refuse a size, or serve the wrong file.

use std::fs;
use std::net::TcpListener;
use std::time::Duration;

use kprof_debuginfod::{Artifact, Client, FetchError};

use crate::support::{self, Server, Silent};

/// A refused connection marks that server failed once; the next server serves the file, and
/// later requests do not try the failed one again (a listener started on its port afterwards
/// is never connected to).
#[test]
fn fetch_debuginfo_refused_server_skipped() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "refused", 0x21, 2);
    let server = Server::debuginfod(dir.path(), &[&elfs[0], &elfs[1]]);
    let port = support::free_port();
    let dead = format!("http://127.0.0.1:{port}");
    let cache = tempfile::tempdir().unwrap();
    let client = support::client(&[&dead, &server.url], cache.path());

    let first = client
        .fetch(&elfs[0].build_id, Artifact::Debuginfo)
        .unwrap();
    assert_eq!(first.server.as_deref(), Some(server.url.as_str()));
    let failures = client.server_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, dead);

    let late = TcpListener::bind(("127.0.0.1", port)).unwrap();
    late.set_nonblocking(true).unwrap();
    let second = client
        .fetch(&elfs[1].build_id, Artifact::Debuginfo)
        .unwrap();
    assert_eq!(second.server.as_deref(), Some(server.url.as_str()));
    assert!(late.accept().is_err(), "the failed server was asked again");
    assert_eq!(client.server_failures(), failures);
}

/// A server that accepts and never answers costs one DEBUGINFOD_TIMEOUT: the fetch returns
/// with a timeout reason, the server is marked failed, and no miss is recorded.
#[test]
fn fetch_debuginfo_hung_server_times_out() {
    let silent = Silent::start();
    let cache = tempfile::tempdir().unwrap();
    let mut config = support::config(&[&silent.url], cache.path());
    config.timeout = Duration::from_secs(2);
    let client = Client::new(config).unwrap();
    let id = "22aa000000000000000000000000000000000001";
    let result = client.fetch(id, Artifact::Debuginfo);
    assert!(matches!(result, Err(FetchError::Offline)), "{result:?}");
    let failures = client.server_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(failures[0].1.contains("timed out"), "{failures:?}");
    assert!(!cache.path().join(id).join("debuginfo").exists());
    // asked no more this run
    let again = client.fetch(
        "22aa000000000000000000000000000000000002",
        Artifact::Debuginfo,
    );
    assert!(matches!(again, Err(FetchError::Offline)), "{again:?}");
    assert_eq!(client.server_failures().len(), 1);
}

/// A file over DEBUGINFOD_MAXSIZE is TooLarge and not cached.
#[test]
fn fetch_debuginfo_over_maxsize_too_large() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "big", 0x23, 1);
    let server = Server::debuginfod(dir.path(), &[&elfs[0]]);
    let cache = tempfile::tempdir().unwrap();
    let mut config = support::config(&[&server.url], cache.path());
    config.max_size = Some(100);
    let client = Client::new(config).unwrap();
    let result = client.fetch(&elfs[0].build_id, Artifact::Debuginfo);
    match result {
        Err(FetchError::TooLarge { url, max, .. }) => {
            assert_eq!(max, 100);
            assert!(
                url.ends_with(&format!("{}/debuginfo", elfs[0].build_id)),
                "{url}"
            );
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(!cache
        .path()
        .join(&elfs[0].build_id)
        .join("debuginfo")
        .exists());
    assert!(client.server_failures().is_empty());
}

/// A plain HTTP server whose `buildid/ID/debuginfo` holds another ELF file: refused with both
/// ids and the URL, nothing cached, and no miss recorded.
#[test]
fn fetch_debuginfo_wrong_file_refused() {
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "wrong", 0x24, 2);
    let (wanted, other) = (&elfs[0].build_id, &elfs[1]);
    let root = dir.path().join("www");
    let served = root.join("buildid").join(wanted).join("debuginfo");
    fs::create_dir_all(served.parent().unwrap()).unwrap();
    fs::copy(&other.path, &served).unwrap();
    let server = Server::python(&root);
    let cache = tempfile::tempdir().unwrap();
    let client = support::client(&[&server.url], cache.path());

    match client.fetch(wanted, Artifact::Debuginfo) {
        Err(e @ FetchError::WrongBuildId { .. }) => {
            let text = e.to_string();
            let FetchError::WrongBuildId {
                url,
                wanted: w,
                found,
            } = e
            else {
                unreachable!()
            };
            assert_eq!(url, format!("{}/buildid/{wanted}/debuginfo", server.url));
            assert_eq!((&w, found.as_ref()), (wanted, Some(&other.build_id)));
            assert!(
                text.contains(wanted) && text.contains(&other.build_id),
                "{text}"
            );
        }
        other => panic!("expected WrongBuildId, got {other:?}"),
    }
    let entry = cache.path().join(wanted);
    let left: Vec<_> = fs::read_dir(&entry)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "cached: {left:?}");
    assert_eq!(client.cached(wanted, Artifact::Debuginfo), None);
}

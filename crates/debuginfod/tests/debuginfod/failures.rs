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

/// A server answering 503 is marked failed with that status, the next server serves the file;
/// with only that server the fetch is Offline and no miss is recorded.
#[test]
fn fetch_debuginfo_5xx_server_marked_failed() {
    if !support::have_debuginfod() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "five", 0x25, 2);
    let server = Server::debuginfod(dir.path(), &[&elfs[0]]);
    let bad = Server::misbehaving(dir.path(), false);
    let bad_url = format!("{}/503", bad.url);
    let cache = tempfile::tempdir().unwrap();
    let client = support::client(&[&bad_url, &server.url], cache.path());
    let fetched = client
        .fetch(&elfs[0].build_id, Artifact::Debuginfo)
        .unwrap();
    assert_eq!(fetched.server.as_deref(), Some(server.url.as_str()));
    let failures = client.server_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0].0, bad_url);
    assert!(failures[0].1.contains("503"), "{failures:?}");

    let client = support::client(&[&bad_url], cache.path());
    let result = client.fetch(&elfs[1].build_id, Artifact::Debuginfo);
    assert!(matches!(result, Err(FetchError::Offline)), "{result:?}");
    assert!(!cache
        .path()
        .join(&elfs[1].build_id)
        .join("debuginfo")
        .exists());
}

/// A body cut short (the connection closes before Content-Length bytes) is a transport
/// failure: nothing cached, no temp file left, no miss recorded.
#[test]
fn fetch_debuginfo_truncated_body_not_cached() {
    let cache = tempfile::tempdir().unwrap();
    let bad = Server::misbehaving(cache.path(), false);
    let url = format!("{}/truncated", bad.url);
    let client = support::client(&[&url], cache.path());
    let id = "26aa000000000000000000000000000000000001";
    let result = client.fetch(id, Artifact::Debuginfo);
    assert!(matches!(result, Err(FetchError::Offline)), "{result:?}");
    assert_eq!(client.server_failures().len(), 1);
    let left: Vec<_> = fs::read_dir(cache.path().join(id))
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "left in the cache: {left:?}");
}

/// An HTTPS server whose certificate no trusted CA signed (a private CA not installed) is a TLS failure of that server,
/// named in server_failures; nothing is downloaded from it.
#[test]
fn fetch_debuginfo_untrusted_tls_refused() {
    let cache = tempfile::tempdir().unwrap();
    let bad = Server::misbehaving(cache.path(), true);
    let client = support::client(&[&bad.url], cache.path());
    let result = client.fetch(
        "27aa000000000000000000000000000000000001",
        Artifact::Debuginfo,
    );
    assert!(matches!(result, Err(FetchError::Offline)), "{result:?}");
    let failures = client.server_failures();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert!(
        failures[0].1.to_lowercase().contains("certificate"),
        "{failures:?}"
    );
}

/// Over HTTPS with the server's CA in `SSL_CERT_FILE` (the host's CA bundle, as libcurl reads
/// it), the file is fetched and verified. Runs in a child process of this test binary: the
/// variable is set for that process only.
#[test]
fn fetch_debuginfo_https_trusted_ca_fetched() {
    if let Some(url) = std::env::var_os("KPROF_TEST_HTTPS_URL") {
        let url = url.into_string().unwrap();
        let id = std::env::var("KPROF_TEST_HTTPS_ID").unwrap();
        let cache = tempfile::tempdir().unwrap();
        let client = support::client(&[&url], cache.path());
        let fetched = client
            .fetch(&id, Artifact::Debuginfo)
            .unwrap_or_else(|e| panic!("{e}: {:?}", client.server_failures()));
        assert_eq!(fetched.server.as_deref(), Some(url.as_str()));
        assert!(client.server_failures().is_empty());
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let elfs = support::elfs(dir.path(), "tls", 0x28, 1);
    let served = dir.path().join("buildid").join(&elfs[0].build_id);
    fs::create_dir_all(&served).unwrap();
    fs::copy(&elfs[0].path, served.join("debuginfo")).unwrap();
    let server = Server::misbehaving(dir.path(), true);
    let child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "failures::fetch_debuginfo_https_trusted_ca_fetched",
            "--nocapture",
        ])
        .env("KPROF_TEST_HTTPS_URL", &server.url)
        .env("KPROF_TEST_HTTPS_ID", &elfs[0].build_id)
        .env("SSL_CERT_FILE", server.state().join("ca.pem"))
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&child.stdout);
    assert!(
        child.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&child.stderr)
    );
    assert!(out.contains("1 passed"), "the child ran no test: {out}");
}

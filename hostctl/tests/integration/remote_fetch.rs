//! `fetch` of several captures against a real local sshd with the real agent: a capture the
//! board recorded without samples is reported as such and is not a failure.

use crate::remote_day::{capture_dir, deploy, fetch_from, run_script};
use crate::remote_support::board;
use kprof_test_support::outcome;

/// `fetch` of a capture with samples and one without: both downloaded and reported, exit 0,
/// the empty one named in a single "no samples" warning with the event's reason.
#[test]
fn fetch_captures_no_samples_warns_once() {
    let (sshd, client) = board();
    deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    let busy = "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done";
    let (ok, _, err) = outcome(&mut run_script(
        &client,
        &["run", &sshd.target()],
        &caps,
        busy,
    ));
    assert!(ok, "{err}");
    // x86 and arm64 Linux fix up unaligned accesses in hardware: the event never fires.
    let (ok, _, err) = outcome(client.keyed(&["run", &sshd.target()]).args([
        "-e",
        "alignment-faults",
        "-o",
        &caps,
        "--",
        "true",
    ]));
    assert!(ok, "{err}");
    assert!(err.contains("produced no samples"), "{err}");
    let (ok, out, err) =
        outcome(&mut client.keyed(&["fetch", &sshd.target(), "--capture-dir", &caps]));
    assert!(ok, "exit status not 0:\n{out}\n{err}");
    let fetched: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("sha256 verified"))
        .collect();
    assert_eq!(fetched.len(), 2, "{err}");
    let empty: Vec<&str> = err.lines().filter(|l| l.contains("no samples")).collect();
    assert_eq!(empty.len(), 1, "{err}");
    let line = empty[0];
    assert!(
        line.starts_with("kprofctl: warning: kprof-captures/")
            && line.matches(".kprof.tar.gz").count() == 1
            && line.contains("the capture has no samples (event alignment-faults has no samples: "),
        "{line}"
    );
    assert_eq!(out.matches("HTML report: ").count(), 1, "{out}");
    assert!(!err.contains("failed"), "{err}");
}

/// Captures of one board directory come in the order the board made them (the sequence
/// number in their ids), each shown with the host's fetch time; one asked for again is
/// "already here" with the time it was fetched.
#[test]
fn fetch_captures_sequence_order_fetch_time() {
    let (sshd, client) = board();
    deploy(&sshd, &client);
    let caps = capture_dir(&sshd);
    for _ in 0..3 {
        let (ok, _, err) = outcome(&mut run_script(
            &client,
            &["run", &sshd.target()],
            &caps,
            "true",
        ));
        assert!(ok, "{err}");
    }
    let before = std::time::SystemTime::now();
    let (ok, _, err) = outcome(&mut fetch_from(&client, &sshd.target(), &[], &caps));
    assert!(ok, "{err}");
    let fetched: Vec<&str> = err
        .lines()
        .filter_map(|l| l.strip_prefix("kprofctl: fetched kprof-captures/"))
        .collect();
    let numbers: Vec<Option<u64>> = fetched
        .iter()
        .map(|l| kprof_capture::listing::sequence(l.split(".kprof.tar.gz").next().unwrap()))
        .collect();
    assert_eq!(numbers, [Some(1), Some(2), Some(3)], "{err}");
    let after = utc(std::time::SystemTime::now());
    let before = utc(before);
    let times: Vec<&str> = fetched
        .iter()
        .map(|line| {
            line.split(".kprof.tar.gz at ")
                .nth(1)
                .and_then(|rest| rest.split(' ').next())
                .unwrap_or_else(|| panic!("no fetch time in {line}"))
        })
        .collect();
    for at in &times {
        // ISO 8601 UTC times of one width sort as text.
        assert!(
            before.as_str() <= *at && *at <= after.as_str(),
            "{before} {at} {after}"
        );
    }
    let second = fetched[1].split(".kprof.tar.gz").next().unwrap();
    let (ok, _, err) = outcome(&mut fetch_from(&client, &sshd.target(), &[second], &caps));
    assert!(ok, "{err}");
    let already = format!(
        "{second} is already here: kprof-captures/{second}.kprof.tar.gz (fetched {})",
        times[1]
    );
    assert!(err.contains(&already), "{err}");
}

/// `2026-11-26T19:40:12Z` of a system time.
fn utc(t: std::time::SystemTime) -> String {
    let ns = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    kprof_capture::time::iso8601(ns)
}

//! `fetch` of several captures against a real local sshd with the real agent: a capture the
//! board recorded without samples is reported as such and is not a failure.

use crate::remote_day::{capture_dir, deploy_cmd, install_path, run_script};
use crate::remote_support::{agent_binary, board};
use kprof_test_support::outcome;

/// `fetch` of a capture with samples and one without: both downloaded and reported, exit 0,
/// the empty one named in a single "no samples" warning with the event's reason.
#[test]
fn fetch_captures_no_samples_warns_once() {
    let (sshd, client) = board();
    let dest = install_path(&sshd);
    let (ok, _, err) = outcome(&mut deploy_cmd(
        &client,
        &["deploy", &sshd.target()],
        &agent_binary(),
        &dest,
    ));
    assert!(ok, "{err}");
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

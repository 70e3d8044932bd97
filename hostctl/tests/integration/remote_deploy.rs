//! `deploy` against a real local sshd: an agent that cannot run on the board is checked where
//! it lands and never replaces the working one.

use crate::remote_day::{deploy, deploy_cmd};
use crate::remote_support::{board, run_ok};
use kprof_test_support::outcome;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A program linked against `libkprofgone.so`, which is deleted after the link: the board's
/// loader cannot start it.
fn program_missing_library(dir: &Path) -> PathBuf {
    std::fs::write(dir.join("gone.c"), "int kprof_gone(void) { return 0; }\n").unwrap();
    std::fs::write(
        dir.join("main.c"),
        "int kprof_gone(void);\nint main(void) { return kprof_gone(); }\n",
    )
    .unwrap();
    let lib = dir.join("libkprofgone.so");
    run_ok(
        Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(&lib)
            .arg(dir.join("gone.c")),
    );
    let prog = dir.join("kprof-agent-dynamic");
    run_ok(
        Command::new("cc")
            .arg("-o")
            .arg(&prog)
            .arg(dir.join("main.c"))
            .arg("-L")
            .arg(dir)
            .arg("-lkprofgone"),
    );
    std::fs::remove_file(&lib).unwrap();
    prog
}

/// `deploy` of a binary the board's loader refuses: exit status not 0, the loader's message
/// shown, the installed agent unchanged and still running, no staging file left.
#[test]
fn deploy_agent_missing_library_keeps_installed() {
    let (sshd, client) = board();
    let dest = deploy(&sshd, &client);
    let good = std::fs::read(&dest).unwrap();

    let bad = program_missing_library(client.work.path());
    let (ok, out, err) = outcome(&mut deploy_cmd(
        &client,
        &["deploy", &sshd.target()],
        &bad,
        &dest,
    ));
    assert!(!ok, "deploy succeeded:\n{out}\n{err}");
    assert!(
        err.contains("the uploaded agent does not run on the board")
            && err.contains("libkprofgone.so: cannot open shared object file")
            && err.contains("the agent installed there before, if any, is untouched"),
        "{err}"
    );
    assert!(!err.contains("instead (lost at reboot)"), "{err}");
    assert!(
        std::fs::read(&dest).unwrap() == good,
        "the installed agent was replaced"
    );
    let version = run_ok(Command::new(&dest).arg("--version"));
    assert!(
        String::from_utf8_lossy(&version.stdout).starts_with("kprof-agent "),
        "{version:?}"
    );
    let staged = dest.with_file_name("kprof-agent.kprof-new");
    assert!(!staged.exists(), "{} left behind", staged.display());
}

//! Ctrl-C, one handler for the whole run (the `ctrlc` crate installs only one): during a
//! capture each press is counted and [`crate::remote::detached::stream`] turns them into a
//! stop, then a detach; during a download the first press asks the transfer to stop (it keeps
//! its resumable `.part`) and a second one exits at once; at any other time a press exits.
//! Every exit on Ctrl-C has status 130, as a shell reports a process ended by SIGINT.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Mutex, Once};

/// The exit status after Ctrl-C (128 + SIGINT).
pub const EXIT_STATUS: i32 = 130;

const EXIT: u8 = 0;
const COUNT: u8 = 1;
const STOP: u8 = 2;

static MODE: AtomicU8 = AtomicU8::new(EXIT);
static PRESSES: AtomicUsize = AtomicUsize::new(0);
static INSTALL: Once = Once::new();
/// Run before an exit on Ctrl-C: what kprofctl must undo elsewhere (a labgrid place it booked).
static BEFORE_EXIT: Mutex<Vec<fn()>> = Mutex::new(Vec::new());

fn install() {
    INSTALL.call_once(|| {
        let _ = ctrlc::set_handler(|| {
            let presses = PRESSES.fetch_add(1, Ordering::SeqCst) + 1;
            match MODE.load(Ordering::SeqCst) {
                COUNT => {}
                STOP if presses < 2 => {}
                _ => {
                    eprintln!("\nkprofctl: interrupted");
                    let hooks = BEFORE_EXIT.lock().map(|h| h.clone()).unwrap_or_default();
                    for hook in hooks {
                        hook();
                    }
                    std::process::exit(EXIT_STATUS);
                }
            }
        });
    });
}

/// Runs `hook` before an exit on Ctrl-C (register it once), and catches Ctrl-C from now on,
/// which exits by default.
pub fn before_exit(hook: fn()) {
    install();
    BEFORE_EXIT
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(hook);
}

/// Ctrl-C presses since the last change of mode.
pub fn presses() -> usize {
    PRESSES.load(Ordering::SeqCst)
}

fn set(mode: u8) {
    install();
    PRESSES.store(0, Ordering::SeqCst);
    MODE.store(mode, Ordering::SeqCst);
}

/// From now on Ctrl-C presses are only counted ([`presses`]): the capture's streaming loop
/// acts on them.
pub fn count() {
    set(COUNT);
}

/// From now on the first Ctrl-C only sets [`stop_requested`] (a download in progress stops
/// at its next chunk and keeps what it has); a second exits.
pub fn stop_on_press() {
    set(STOP);
}

/// Whether Ctrl-C was pressed since [`stop_on_press`].
pub fn stop_requested() -> bool {
    MODE.load(Ordering::SeqCst) == STOP && presses() > 0
}

/// From now on Ctrl-C exits with status 130 (the default once a capture or download is over).
pub fn exit_on_press() {
    set(EXIT);
}

/// The error of an operation stopped by Ctrl-C: kprofctl exits with [`EXIT_STATUS`].
#[derive(Debug)]
pub struct Interrupted(pub String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

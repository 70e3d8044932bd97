//! Termination signals as a descriptor: SIGINT, SIGTERM, SIGHUP and SIGCHLD are blocked and
//! read from a signalfd, so the streaming loop sees them at its next poll.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use crate::Error;

/// The blocked signals' descriptor and the mask to give back to the workload before exec.
pub(super) struct Signals {
    fd: OwnedFd,
    old_mask: libc::sigset_t,
}

impl Signals {
    /// Blocks the signals and opens their signalfd. Called first thing: a Ctrl-C during setup
    /// then stops the capture at its first poll instead of killing the agent half-way.
    pub(super) fn block() -> Result<Signals, Error> {
        // SAFETY: sigset_t is plain data initialised by sigemptyset/sigaddset below.
        let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above; pthread_sigmask fills it.
        let mut old_mask: libc::sigset_t = unsafe { std::mem::zeroed() };
        // SAFETY: valid sigset pointers.
        unsafe {
            libc::sigemptyset(&mut set);
            for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGCHLD] {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, &mut old_mask);
        }
        // SAFETY: signalfd with a valid, initialised sigset.
        let fd = unsafe { libc::signalfd(-1, &set, libc::SFD_CLOEXEC | libc::SFD_NONBLOCK) };
        if fd < 0 {
            return Err(Error::io("signalfd", io::Error::last_os_error()));
        }
        // SAFETY: a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Signals { fd, old_mask })
    }

    /// The descriptor to poll.
    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// The signal mask the agent had before [`Signals::block`].
    pub(super) fn old_mask(&self) -> &libc::sigset_t {
        &self.old_mask
    }

    /// Reads every pending signal; returns the first terminating one (SIGCHLD only wakes).
    pub(super) fn take_terminating(&self) -> Option<i32> {
        let mut found = None;
        loop {
            // SAFETY: signalfd_siginfo is plain data; read fills it or fails.
            let mut si: libc::signalfd_siginfo = unsafe { std::mem::zeroed() };
            let sz = size_of::<libc::signalfd_siginfo>();
            // SAFETY: reading at most `sz` bytes into `si`.
            let n = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    &mut si as *mut _ as *mut libc::c_void,
                    sz,
                )
            };
            if n != sz as isize {
                return found;
            }
            let sig = si.ssi_signo as i32;
            if sig != libc::SIGCHLD && found.is_none() {
                found = Some(sig);
            }
        }
    }
}

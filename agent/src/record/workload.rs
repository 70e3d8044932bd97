//! The workload command: resolved as execvp would before sampling starts, forked at once and
//! held before exec until the events are live, reaped and stopped when the capture ends.

use std::ffi::CString;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kprof_capture::manifest::Command;

use crate::Error;

/// The workload: forked at once, held before exec until the events are live.
pub(super) struct Workload {
    pid: i32,
    go: Option<OwnedFd>,
    exec_err: OwnedFd,
    status: Option<i32>,
}

impl Workload {
    pub(super) fn spawn(
        argv: &[String],
        path: &Path,
        old_mask: &libc::sigset_t,
    ) -> Result<Workload, Error> {
        let prog = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::Usage(format!("cannot run `{}`: NUL in name", argv[0])))?;
        let args: Vec<CString> = argv
            .iter()
            .map(|a| CString::new(a.as_bytes()))
            .collect::<Result<_, _>>()
            .map_err(|_| Error::Usage("command arguments must not contain NUL bytes".into()))?;
        let mut ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        ptrs.push(std::ptr::null());
        let (go_r, go_w) = pipe().map_err(|e| Error::io("pipe", e))?;
        let (err_r, err_w) = pipe().map_err(|e| Error::io("pipe", e))?;
        // SAFETY: the child only calls async-signal-safe functions (read, sigprocmask, execv,
        // write, _exit) on memory prepared before the fork.
        let pid = unsafe { libc::fork() };
        if pid < 0 {
            return Err(Error::io("fork", io::Error::last_os_error()));
        }
        if pid == 0 {
            // SAFETY: see above; all pointers stay valid in the child's copy of memory.
            unsafe {
                let mut b = 0u8;
                if libc::read(go_r.as_raw_fd(), &mut b as *mut u8 as *mut libc::c_void, 1) != 1 {
                    libc::_exit(127);
                }
                libc::sigprocmask(libc::SIG_SETMASK, old_mask, std::ptr::null_mut());
                libc::execv(prog.as_ptr(), ptrs.as_ptr());
                let errno = *libc::__errno_location();
                libc::write(
                    err_w.as_raw_fd(),
                    &errno as *const i32 as *const libc::c_void,
                    4,
                );
                libc::_exit(127);
            }
        }
        drop(go_r);
        drop(err_w);
        Ok(Workload {
            pid,
            go: Some(go_w),
            exec_err: err_r,
            status: None,
        })
    }

    /// Lets the child exec; returns the exec error if it could not.
    pub(super) fn release(&mut self) -> io::Result<()> {
        if let Some(go) = self.go.take() {
            let b = [1u8];
            // SAFETY: writing one byte from a live buffer to a pipe we own.
            unsafe { libc::write(go.as_raw_fd(), b.as_ptr() as *const libc::c_void, 1) };
        }
        let mut errno = [0u8; 4];
        // SAFETY: reading into a live 4-byte buffer from a pipe we own; EOF means exec worked.
        let n = unsafe {
            libc::read(
                self.exec_err.as_raw_fd(),
                errno.as_mut_ptr() as *mut libc::c_void,
                4,
            )
        };
        if n == 4 {
            self.wait(true);
            return Err(io::Error::from_raw_os_error(i32::from_ne_bytes(errno)));
        }
        Ok(())
    }

    /// Reaps the child if it ended (or waits for it when `block`). True once it has ended.
    pub(super) fn wait(&mut self, block: bool) -> bool {
        if self.status.is_some() {
            return true;
        }
        let mut st = 0;
        // SAFETY: waitpid on our own child with a valid status pointer.
        let r = unsafe { libc::waitpid(self.pid, &mut st, if block { 0 } else { libc::WNOHANG }) };
        if r == self.pid {
            self.status = Some(st);
            true
        } else {
            r < 0
        }
    }

    /// Ends a workload still running when the capture stops: SIGTERM, then SIGKILL after 2 s.
    pub(super) fn terminate(&mut self) {
        if self.wait(false) {
            return;
        }
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.pid, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(2);
        while Instant::now() < until {
            if self.wait(false) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
        self.wait(true);
    }

    /// The manifest's description of the command and how it ended.
    pub(super) fn manifest(&self, argv: &[String]) -> Command {
        let (exit_code, signal) = match self.status {
            Some(st) if libc::WIFEXITED(st) => (Some(libc::WEXITSTATUS(st)), None),
            Some(st) if libc::WIFSIGNALED(st) => (None, Some(libc::WTERMSIG(st))),
            _ => (None, None),
        };
        Command {
            argv: argv.to_vec(),
            pid: Some(self.pid),
            exit_code,
            signal,
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if self.go.take().is_some() {
            // Never released: closing the pipe makes it exit without running the command.
            self.wait(true);
        }
    }
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into the array we pass.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are new and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Finds the program as execvp would, so a missing command is reported before sampling.
pub(super) fn resolve_command(cmd: &str) -> Result<PathBuf, Error> {
    let check = |p: &Path| -> io::Result<()> {
        let c = CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
        let md = fs::metadata(p)?;
        if md.is_dir() {
            return Err(io::Error::from_raw_os_error(libc::EISDIR));
        }
        // SAFETY: access(2) on a valid NUL-terminated path.
        if unsafe { libc::access(c.as_ptr(), libc::X_OK) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    if cmd.is_empty() {
        return Err(Error::Usage("empty command".into()));
    }
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return check(&p)
            .map(|()| p)
            .map_err(|e| Error::Other(format!("cannot run `{cmd}`: {e}")));
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    for dir in std::env::split_paths(&path) {
        let p = dir.join(cmd);
        if check(&p).is_ok() {
            return Ok(p);
        }
    }
    Err(Error::Other(format!(
        "cannot run `{cmd}`: command not found in PATH"
    )))
}

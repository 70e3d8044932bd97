//! A jump host's `direct-tcpip` channel turned into a socket the next ssh session can run on.
//!
//! libssh2 sends and receives on a file descriptor, not through a Rust stream, so the channel
//! is bridged to one end of a `UnixStream::pair()` by a thread that owns the jump session (in
//! non-blocking mode) and moves bytes both ways; the next session gets the other end. The
//! thread ends when either side closes or fails, and closing its end is what the next session
//! sees: a dropped jump link ends the board's operations with the usual link errors.

use super::session::link_error;
use super::target::Target;
use ssh2::{BlockDirections, Channel, Session};
use std::io::{ErrorKind, Read as _, Write as _};
use std::os::fd::{AsRawFd as _, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// Bytes held per direction before the pump stops reading that side (backpressure).
const BUFFER: usize = 256 * 1024;

/// How long the pump sleeps in `poll` with nothing to do; bounds how late keepalives go out.
const POLL_MS: i32 = 1000;

/// A running pump; it ends by itself when either side closes, so dropping this detaches it.
#[derive(Debug)]
pub struct Tunnel {
    _thread: std::thread::JoinHandle<()>,
}

/// Opens a `direct-tcpip` channel on `sess` (logged in to `hop`, running on `sess_fd`) to
/// `next`, and returns the pump and the socket end to run `next`'s session on.
pub fn open(
    sess: Session,
    sess_fd: RawFd,
    hop: &Target,
    next: &Target,
) -> anyhow::Result<(Tunnel, UnixStream)> {
    let ch = sess
        .channel_direct_tcpip(&next.host, next.port, None)
        .map_err(|e| {
            link_error(
                hop,
                &format!(
                    "the jump host did not forward to {}:{} (its sshd needs AllowTcpForwarding \
                     yes, and the address must be reachable from it)",
                    next.host, next.port
                ),
                e,
            )
        })?;
    let (mine, theirs) = UnixStream::pair()
        .map_err(|e| anyhow::anyhow!("{hop}: cannot create a socket pair for the jump: {e}"))?;
    mine.set_nonblocking(true)
        .map_err(|e| anyhow::anyhow!("{hop}: cannot set up the jump socket: {e}"))?;
    sess.set_blocking(false);
    let thread = std::thread::Builder::new()
        .name("kprofctl-jump".to_owned())
        .spawn(move || Pump::new(sess, ch, mine, sess_fd).run())
        .map_err(|e| anyhow::anyhow!("{hop}: cannot start the jump thread: {e}"))?;
    Ok((Tunnel { _thread: thread }, theirs))
}

/// Whether one pass moved anything or the pump is done.
#[derive(Debug, PartialEq, Eq)]
enum Step {
    Idle,
    Moved,
    Done,
}

/// A channel operation libssh2 left half-sent. libssh2 refuses to send any other packet
/// until the same call is repeated (`LIBSSH2_ERROR_BAD_USE`), and a read may send one (a
/// window adjust), so nothing else is tried on the channel until it is through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    Read,
    Write,
}

/// What one channel call did.
enum Io {
    Moved,
    Blocked,
    Eof,
    Failed,
}

struct Pump {
    sess: Session,
    ch: Channel,
    local: UnixStream,
    sess_fd: RawFd,
    /// From the next session, waiting to go into the channel.
    up: Vec<u8>,
    /// From the channel, waiting to go to the next session.
    down: Vec<u8>,
    local_eof: bool,
    remote_eof: bool,
    pending: Option<Pending>,
}

impl Pump {
    fn new(sess: Session, ch: Channel, local: UnixStream, sess_fd: RawFd) -> Pump {
        Pump {
            sess,
            ch,
            local,
            sess_fd,
            up: Vec::new(),
            down: Vec::new(),
            local_eof: false,
            remote_eof: false,
            pending: None,
        }
    }

    fn run(mut self) {
        // The jump session sees no traffic of its own: keepalives keep NAT and idle timers
        // from dropping it under a quiet capture, as for the board's session.
        self.sess.set_keepalive(false, 15);
        loop {
            match self.step() {
                Step::Done => break,
                Step::Moved => continue,
                Step::Idle => {
                    if self.pending.is_none() {
                        let _ = self.sess.keepalive_send();
                    }
                    self.wait();
                }
            }
        }
        // Best effort: tell the jump host the forwarding is over; the socket closes anyway.
        self.sess.set_timeout(2000);
        self.sess.set_blocking(true);
        let _ = self.ch.send_eof();
        let _ = self.ch.close();
    }

    /// Moves what can be moved without blocking, in both directions.
    fn step(&mut self) -> Step {
        let mut moved = false;
        if self.pending != Some(Pending::Write) {
            match self.read_channel() {
                Io::Moved => moved = true,
                Io::Failed => return Step::Done,
                Io::Blocked | Io::Eof => {}
            }
        }
        match write_all_ready(&mut self.local, &mut self.down) {
            Io::Moved => moved = true,
            Io::Failed => return Step::Done,
            Io::Blocked | Io::Eof => {}
        }
        if !self.local_eof && self.up.len() < BUFFER {
            let mut buf = [0u8; 32 * 1024];
            match self.local.read(&mut buf) {
                Ok(0) => self.local_eof = true,
                Ok(n) => {
                    self.up.extend_from_slice(&buf[..n]);
                    moved = true;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(_) => return Step::Done,
            }
        }
        if self.pending != Some(Pending::Read) {
            match self.write_channel() {
                Io::Moved => moved = true,
                Io::Failed => return Step::Done,
                Io::Blocked | Io::Eof => {}
            }
        }
        let flushed_up = self.local_eof && self.up.is_empty();
        let flushed_down = self.remote_eof && self.down.is_empty();
        if (flushed_up || flushed_down) && self.pending.is_none() {
            Step::Done
        } else if moved {
            Step::Moved
        } else {
            Step::Idle
        }
    }

    /// Reads the channel into `down`, unless it is full or at its end.
    fn read_channel(&mut self) -> Io {
        if self.remote_eof || self.down.len() >= BUFFER {
            return Io::Blocked;
        }
        let mut buf = [0u8; 32 * 1024];
        let io = match self.ch.read(&mut buf) {
            Ok(0) if self.ch.eof() => {
                self.remote_eof = true;
                Io::Eof
            }
            Ok(0) => Io::Blocked,
            Ok(n) => {
                self.down.extend_from_slice(&buf[..n]);
                Io::Moved
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => Io::Blocked,
            Err(_) => Io::Failed,
        };
        self.note_pending(&io, Pending::Read);
        io
    }

    /// Writes from `up` into the channel.
    fn write_channel(&mut self) -> Io {
        if self.up.is_empty() {
            return Io::Blocked;
        }
        let chunk = self.up.len().min(32 * 1024);
        let io = match self.ch.write(&self.up[..chunk]) {
            Ok(0) => Io::Blocked,
            Ok(n) => {
                self.up.drain(..n);
                Io::Moved
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => Io::Blocked,
            Err(_) => Io::Failed,
        };
        self.note_pending(&io, Pending::Write);
        io
    }

    /// Remembers `op` as half-sent when it blocked on sending.
    fn note_pending(&mut self, io: &Io, op: Pending) {
        let sending = matches!(
            self.sess.block_directions(),
            BlockDirections::Outbound | BlockDirections::Both
        );
        self.pending = match io {
            Io::Blocked if sending => Some(op),
            _ => None,
        };
    }

    /// Sleeps until either socket can make progress, or [`POLL_MS`].
    fn wait(&self) {
        let mut sess_events = libc::POLLIN;
        if matches!(
            self.sess.block_directions(),
            BlockDirections::Outbound | BlockDirections::Both
        ) {
            sess_events |= libc::POLLOUT;
        }
        let mut local_events = 0;
        if !self.local_eof && self.up.len() < BUFFER {
            local_events |= libc::POLLIN;
        }
        if !self.down.is_empty() {
            local_events |= libc::POLLOUT;
        }
        let mut fds = [
            libc::pollfd {
                fd: self.sess_fd,
                events: sess_events,
                revents: 0,
            },
            libc::pollfd {
                fd: self.local.as_raw_fd(),
                events: local_events,
                revents: 0,
            },
        ];
        // SAFETY: `fds` is a valid array of two pollfd for the duration of the call, and both
        // descriptors stay open: the session owns the first, `self.local` the second.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_MS) };
        if n < 0 {
            // EINTR or the like: try again after a short pause rather than spin.
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Writes what `buf` holds to the non-blocking `to` as far as it takes it.
fn write_all_ready(to: &mut UnixStream, buf: &mut Vec<u8>) -> Io {
    if buf.is_empty() {
        return Io::Blocked;
    }
    match to.write(buf) {
        Ok(0) => Io::Failed,
        Ok(n) => {
            buf.drain(..n);
            Io::Moved
        }
        Err(e) if e.kind() == ErrorKind::WouldBlock => Io::Blocked,
        Err(_) => Io::Failed,
    }
}

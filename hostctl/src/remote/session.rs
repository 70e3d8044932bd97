//! One authenticated ssh connection to a board, and running commands over it.

use super::auth;
use super::known_hosts::{HostKey, HostKeyCheck, KnownHosts};
use super::target::Target;
use super::tunnel::{self, Tunnel};
use anyhow::Context as _;
use ssh2::{MethodType, Session};
use std::io::Read as _;
use std::net::{TcpStream, ToSocketAddrs as _};
use std::os::fd::{AsRawFd as _, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

/// How to log in, shared by `deploy`, `run` and `fetch`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SshArgs {
    /// Private key to try first (repeatable); then ssh-agent, ~/.ssh/config's IdentityFile or
    /// ~/.ssh/id_{ed25519,ecdsa,rsa}, an empty password, $KPROF_PASSWORD or a prompt.
    #[arg(short = 'i', long = "identity", value_name = "FILE", global = false)]
    pub identity: Vec<PathBuf>,
    /// Trust a host key ~/.ssh/known_hosts does not list yet, and add it there. A key that
    /// differs from the listed one is refused regardless.
    #[arg(long)]
    pub accept_new_host_key: bool,
    /// Reach the board through these jump hosts, in order, as `ssh -J` does
    /// (`[user@]host[:port][,...]`, each resolved through ~/.ssh/config; `none` for a direct
    /// connection). Overrides the config's ProxyJump. Host keys are checked on every hop.
    #[arg(short = 'J', long = "jump", value_name = "HOSTS")]
    pub jump: Option<String>,
}

impl SshArgs {
    /// The board `spec` names, reached through `-J` if given, else the config's ProxyJump.
    pub fn resolve(&self, spec: &str) -> anyhow::Result<Target> {
        match self.jump.as_deref() {
            None => Target::resolve(spec),
            jump => Target::resolve_jump(spec, jump),
        }
    }
}

/// Seconds a blocking ssh operation may wait for the board before the link counts as dead.
pub(crate) const IO_TIMEOUT_MS: u32 = 60_000;

/// An authenticated session. Every error it returns names the target.
pub struct Remote {
    sess: Session,
    pub target: Target,
    /// The jump hosts' pumps the session runs over; they end when `sess` closes its socket.
    _tunnels: Vec<Tunnel>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Remote")
            .field("target", &self.target)
            .finish()
    }
}

/// What a command printed and how it ended.
#[derive(Debug)]
pub struct Output {
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl Output {
    pub fn stdout_str(&self) -> String {
        String::from_utf8_lossy(&self.stdout).trim().to_owned()
    }

    /// The board's stderr for a message: control and bidi characters escaped, newlines too,
    /// so that it stays one line (a board must not forge a `kprofctl:` line of its own).
    pub fn stderr_str(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        kprof_report::escape::controls(text.trim()).into_owned()
    }

    /// The first line of the board's stderr, escaped as [`Output::stderr_str`].
    pub fn stderr_first_line(&self) -> String {
        let text = String::from_utf8_lossy(&self.stderr);
        let first = text.trim().lines().next().unwrap_or_default();
        kprof_report::escape::controls(first).into_owned()
    }
}

impl Remote {
    /// Connects (through `target.jump`'s hosts in order, if any), checks each host key
    /// against `~/.ssh/known_hosts` and logs in. A hop's failure names the hop.
    pub fn connect(target: &Target, args: &SshArgs) -> anyhow::Result<Remote> {
        let home = super::ssh_config::home_dir()
            .ok_or_else(|| anyhow::anyhow!("$HOME is not set: cannot find ~/.ssh/known_hosts"))?;
        let mut tunnels = Vec::new();
        let mut via: Option<UnixStream> = None;
        let hops = target.jump.len();
        for (i, hop) in target.jump.iter().enumerate() {
            let next = target.jump.get(i + 1).unwrap_or(target);
            let (tunnel, end) = login(hop, via.take(), &home, args, auth::Hop::Jump)
                .and_then(|(sess, fd)| tunnel::open(sess, fd, hop, next))
                .map_err(|e| {
                    e.context(format!(
                        "{target}: jump host {} of {hops} (`{}`) failed",
                        i + 1,
                        hop.spec
                    ))
                })?;
            tunnels.push(tunnel);
            via = Some(end);
        }
        let (sess, _) = login(target, via, &home, args, auth::Hop::Board)?;
        // Keeps NAT and the board's idle timers from dropping a quiet capture.
        sess.set_keepalive(false, 15);
        Ok(Remote {
            sess,
            target: target.clone(),
            _tunnels: tunnels,
        })
    }

    pub fn session(&self) -> &Session {
        &self.sess
    }

    /// Opens a session channel running `command` under the login shell.
    pub fn channel(&self, command: &str) -> anyhow::Result<ssh2::Channel> {
        let t = &self.target;
        let mut ch = self
            .sess
            .channel_session()
            .map_err(|e| link_error(t, "cannot open a channel", e))?;
        ch.exec(command)
            .map_err(|e| link_error(t, "cannot start a command", e))?;
        Ok(ch)
    }

    /// Runs `command` and collects its output (for short outputs: stdout is read before stderr).
    pub fn exec(&self, command: &str) -> anyhow::Result<Output> {
        let mut ch = self.channel(command)?;
        self.finish(&mut ch)
    }

    /// Runs `command` feeding it `input` on stdin.
    pub fn exec_with_input(
        &self,
        command: &str,
        input: &mut dyn std::io::Read,
        mut progress: impl FnMut(u64),
    ) -> anyhow::Result<Output> {
        let t = &self.target;
        let mut ch = self.channel(command)?;
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            if ch.eof() {
                // The command ended early (no space left, permissions): its stderr says why.
                break;
            }
            let n = input
                .read(&mut buf)
                .with_context(|| format!("{t}: reading the local input failed"))?;
            if n == 0 {
                break;
            }
            if let Err(e) = std::io::Write::write_all(&mut ch, &buf[..n]) {
                if ch.eof() {
                    break;
                }
                return Err(io_link_error(t, "upload interrupted", &e));
            }
            progress(n as u64);
        }
        // The command may have gone already; what it printed decides.
        let _ = ch.send_eof();
        self.finish(&mut ch)
    }

    /// Runs `command`; a non-zero exit is an error carrying its stderr. Returns trimmed stdout.
    pub fn exec_ok(&self, command: &str, what: &str) -> anyhow::Result<String> {
        let out = self.exec(command)?;
        if out.status != 0 {
            let err = out.stderr_str();
            anyhow::bail!(
                "{}: {what} failed (exit status {}){}",
                self.target,
                out.status,
                if err.is_empty() {
                    String::new()
                } else {
                    format!(": {err}")
                }
            );
        }
        Ok(out.stdout_str())
    }

    /// Reads a channel to its end and returns what the command printed and its exit status.
    /// Output past [`MAX_COMMAND_OUTPUT`] is an error: a board that keeps talking must not
    /// fill the host's memory.
    pub fn finish(&self, ch: &mut ssh2::Channel) -> anyhow::Result<Output> {
        let t = &self.target;
        let stdout = read_bounded(t, ch, "output")?;
        let stderr = read_bounded(t, &mut ch.stderr(), "error output")?;
        ch.wait_close()
            .map_err(|e| link_error(t, "connection lost", e))?;
        let status = ch
            .exit_status()
            .map_err(|e| link_error(t, "connection lost", e))?;
        Ok(Output {
            status,
            stdout,
            stderr,
        })
    }
}

/// The most a board command may print on stdout or stderr: the listings and `info` JSON
/// read this way are a few KiB; captures are downloaded in a stream, not through here.
pub const MAX_COMMAND_OUTPUT: u64 = 16 << 20;

fn read_bounded(t: &Target, r: &mut impl std::io::Read, what: &str) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    r.take(MAX_COMMAND_OUTPUT + 1)
        .read_to_end(&mut out)
        .map_err(|e| io_link_error(t, "connection lost", &e))?;
    if out.len() as u64 > MAX_COMMAND_OUTPUT {
        anyhow::bail!(
            "{t}: a board command printed more than {} MiB of {what}, more than any kprof \
             command prints: not read further",
            MAX_COMMAND_OUTPUT >> 20
        );
    }
    Ok(out)
}

/// An ssh-level failure worded for a person: which board, what was going on, what went wrong.
pub fn link_error(target: &Target, doing: &str, err: ssh2::Error) -> anyhow::Error {
    let why = match err.code() {
        ssh2::ErrorCode::Session(-9) => "timed out waiting for the board".to_owned(),
        ssh2::ErrorCode::Session(-7 | -13 | -43) => "the connection was closed".to_owned(),
        _ => err.message().to_owned(),
    };
    anyhow::anyhow!("{target}: {doing}: {why}")
}

/// [`link_error`] for the `std::io` errors channel reads and writes give.
pub fn io_link_error(target: &Target, doing: &str, err: &std::io::Error) -> anyhow::Error {
    anyhow::anyhow!("{target}: {doing}: {err}")
}

/// An ssh session to `target`, over `via` (a jump's socket) or a new TCP connection: host key
/// checked, logged in. Returns the session and the descriptor it runs on.
fn login(
    target: &Target,
    via: Option<UnixStream>,
    home: &std::path::Path,
    args: &SshArgs,
    hop: auth::Hop,
) -> anyhow::Result<(Session, RawFd)> {
    let mut sess = Session::new().with_context(|| format!("{target}: cannot start ssh"))?;
    let fd = match via {
        Some(sock) => {
            let fd = sock.as_raw_fd();
            sess.set_tcp_stream(sock);
            fd
        }
        None => {
            let tcp = tcp_connect(target)?;
            let fd = tcp.as_raw_fd();
            sess.set_tcp_stream(tcp);
            fd
        }
    };
    sess.set_timeout(IO_TIMEOUT_MS);
    // What OpenSSH reads for this host: the user's and the system's known_hosts, or the
    // files its ~/.ssh/config names.
    let known_hosts = &KnownHosts::for_host(home, &target.trust);
    let name = target.known_hosts_name();
    let asked = prefer_known_key_types(&sess, &known_hosts.known_types(&name)?);
    sess.handshake()
        .with_context(|| format!("{target}: ssh handshake failed"))?;
    let accept_new = args.accept_new_host_key || target.trust.accept_new;
    verify_host_key(&sess, target, known_hosts, &asked, accept_new)?;
    auth::authenticate(&sess, target, &args.identity, hop)?;
    Ok((sess, fd))
}

fn tcp_connect(target: &Target) -> anyhow::Result<TcpStream> {
    let addrs: Vec<_> = (target.host.as_str(), target.port)
        .to_socket_addrs()
        .with_context(|| format!("{target}: cannot resolve host `{}`", target.host))?
        .collect();
    let mut last = None;
    for addr in &addrs {
        match TcpStream::connect_timeout(addr, Duration::from_secs(10)) {
            Ok(tcp) => {
                tune_socket(&tcp);
                return Ok(tcp);
            }
            Err(e) => last = Some(e),
        }
    }
    match last {
        Some(e) => Err(anyhow::anyhow!("{target}: cannot connect: {e}")),
        None => Err(anyhow::anyhow!(
            "{target}: host `{}` has no address",
            target.host
        )),
    }
}

/// TCP keepalive and a user timeout, so that a pulled cable ends in an error, not a hang.
fn tune_socket(tcp: &TcpStream) {
    let sock = socket2::SockRef::from(tcp);
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(15))
        .with_interval(Duration::from_secs(5))
        .with_retries(4);
    // Best effort: a socket without these options still works, it only notices a dead link later.
    let _ = sock.set_tcp_keepalive(&keepalive);
    let _ = sock.set_tcp_user_timeout(Some(Duration::from_secs(45)));
    let _ = sock.set_tcp_nodelay(true);
}

/// Puts the key types known_hosts already has for this host first, so that a known host is
/// not asked for a type we have never seen (OpenSSH orders its proposal the same way).
/// Returns the known types this libssh2 can negotiate: a board that has one of them gets to
/// present it, so presenting another type instead is a change, not a new host.
fn prefer_known_key_types(sess: &Session, known: &[String]) -> Vec<String> {
    if known.is_empty() {
        return Vec::new();
    }
    let Ok(supported) = sess.supported_algs(MethodType::HostKey) else {
        return Vec::new();
    };
    let mut order: Vec<&str> = Vec::new();
    let mut asked = Vec::new();
    for key_type in known {
        let algs: &[&str] = match key_type.as_str() {
            "ssh-rsa" => &["rsa-sha2-512", "rsa-sha2-256", "ssh-rsa"],
            other => &[other][..],
        };
        for alg in algs {
            if let Some(s) = supported.iter().find(|s| *s == alg) {
                if !order.contains(s) {
                    order.push(s);
                }
                if !asked.contains(key_type) {
                    asked.push(key_type.clone());
                }
            }
        }
    }
    for s in &supported {
        if !order.contains(s) {
            order.push(s);
        }
    }
    if sess
        .method_pref(MethodType::HostKey, &order.join(","))
        .is_err()
    {
        // The known types were not proposed first: a board presenting another type may
        // simply have been asked for it.
        return Vec::new();
    }
    asked
}

fn verify_host_key(
    sess: &Session,
    target: &Target,
    known_hosts: &KnownHosts,
    asked: &[String],
    accept_new: bool,
) -> anyhow::Result<()> {
    let key = sess
        .host_key()
        .and_then(|(blob, _)| HostKey::from_blob(blob))
        .ok_or_else(|| anyhow::anyhow!("{target}: the board sent no usable host key"))?;
    let name = target.known_hosts_name();
    match known_hosts.check(&name, &key)? {
        HostKeyCheck::Known => Ok(()),
        // The board offers another type than the one it is known by, although that type was
        // proposed first: a man in the middle who cannot show the known key would do just
        // this. OpenSSH's accept-new would add the new key; kprofctl refuses like a changed key.
        HostKeyCheck::OtherType {
            path,
            line,
            known_type,
        } if asked.contains(&known_type) => anyhow::bail!(
            "{target}: HOST KEY TYPE CHANGED: {} line {line} lists {name} with a {known_type} key, \
             but the board offers only a {} key ({}). Someone may be intercepting the \
             connection, or the board was reflashed with new host keys. If you know it was \
             reflashed, remove the old key with `ssh-keygen -R '{name}'` and connect again",
            path.display(),
            key.key_type,
            key.fingerprint(),
        ),
        // Known only with a type this libssh2 cannot ask for: nothing tells a change from a
        // new key, as for an unknown host.
        check @ (HostKeyCheck::Unknown | HostKeyCheck::OtherType { .. }) => {
            let note = match &check {
                HostKeyCheck::OtherType {
                    path,
                    line,
                    known_type,
                } => format!(
                    " ({} line {line} lists it with a {known_type} key, a type kprofctl cannot \
                     negotiate)",
                    path.display()
                ),
                _ => String::new(),
            };
            if !accept_new {
                let into = known_hosts.primary().map_or_else(
                    |e| format!("known_hosts ({e})"),
                    |p| p.display().to_string(),
                );
                anyhow::bail!(
                    "{target}: host key not known: {} key fingerprint is {}{note}; if this is \
                     your board, rerun with --accept-new-host-key to trust it and add it to \
                     {into}",
                    key.key_type,
                    key.fingerprint(),
                );
            }
            known_hosts.append(&name, &key)?;
            eprintln!(
                "kprofctl: added {name} {} key {} to {}{note}",
                key.key_type,
                key.fingerprint(),
                known_hosts.primary()?.display(),
            );
            Ok(())
        }
        HostKeyCheck::Changed { path, line } => anyhow::bail!(
            "{target}: HOST KEY CHANGED: the board presents {} key {}, but {} line {line} lists \
             another one for {name}. Someone may be intercepting the connection, or the board \
             was reflashed with a new key. If you know it was reflashed, remove the old key with \
             `ssh-keygen -R '{name}'` and connect again",
            key.key_type,
            key.fingerprint(),
            path.display()
        ),
        HostKeyCheck::CertAuthority { path, line } => anyhow::bail!(
            "{target}: {name} is trusted through host certificates (@cert-authority at {} line \
             {line}), which kprofctl cannot check, and its {} key {} is not listed itself: \
             refusing to connect. Add the board's key to known_hosts (`ssh-keyscan`, checked \
             against the board's console) to use kprofctl with it",
            path.display(),
            key.key_type,
            key.fingerprint()
        ),
        HostKeyCheck::Revoked { path, line } => anyhow::bail!(
            "{target}: host key {} is revoked ({} line {line}): refusing to connect",
            key.fingerprint(),
            path.display()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The board's stderr in a message is one line with control and bidi characters
    /// escaped: a board cannot forge a `kprofctl:` line or reorder what the terminal shows
    /// (before: the newline and U+202E went out raw).
    #[test]
    fn stderr_str_one_line_escaped() {
        let out = Output {
            status: 1,
            stdout: Vec::new(),
            stderr: "no space\nkprofctl: capture OK \u{202e}gnp.exe\x1b[2J\n".into(),
        };
        let s = out.stderr_str();
        assert_eq!(
            s,
            "no space\\x0akprofctl: capture OK \\u{202e}gnp.exe\\x1b[2J"
        );
        assert_eq!(out.stderr_first_line(), "no space");
    }

    /// A board command that never stops printing is read up to the bound, then refused;
    /// output up to the bound is kept whole.
    #[test]
    fn read_board_output_endless_bounded() {
        let t = Target::resolve_with("root@board", &Default::default()).unwrap();
        let err = read_bounded(&t, &mut std::io::repeat(b'x'), "output").unwrap_err();
        assert!(
            err.to_string()
                .contains("root@board:22: a board command printed more than 16 MiB of output"),
            "{err}"
        );
        let exact = vec![b'y'; MAX_COMMAND_OUTPUT as usize];
        assert_eq!(read_bounded(&t, &mut &exact[..], "output").unwrap(), exact);
    }
}

//! A TCP proxy between kprofctl and an ssh server that drops the link on cue or slows it:
//! the remote tests' broken and slow links (the local sshd's and the QEMU board's).

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

/// A TCP forwarder to `127.0.0.1:to` that cuts both directions once `limit` bytes went from
/// the server to the client, or when [`CuttingProxy::cut`] is called: a link dropping in the
/// middle of a transfer or a capture.
#[derive(Debug)]
pub struct CuttingProxy {
    /// Where clients connect: `127.0.0.1:port`.
    pub port: u16,
    cut: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl CuttingProxy {
    /// A proxy to `127.0.0.1:to` that cuts after `limit` bytes to the client, if given.
    pub fn start(to: u16, limit: Option<u64>) -> CuttingProxy {
        CuttingProxy::spawn(to, limit, None)
    }

    /// A proxy that passes at most `bytes_per_sec` from the server to the client: a slow link,
    /// for a download that is still running when the test acts.
    pub fn throttled(to: u16, bytes_per_sec: u64) -> CuttingProxy {
        CuttingProxy::spawn(to, None, Some(bytes_per_sec))
    }

    fn spawn(to: u16, limit: Option<u64>, rate: Option<u64>) -> CuttingProxy {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::Arc;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let cut2 = cut.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(server) = TcpStream::connect(("127.0.0.1", to)) else {
                    return;
                };
                let sent = Arc::new(AtomicU64::new(0));
                for (from, into, counted) in [
                    (
                        client.try_clone().unwrap(),
                        server.try_clone().unwrap(),
                        false,
                    ),
                    (server, client, true),
                ] {
                    let (cut, sent) = (cut2.clone(), sent.clone());
                    std::thread::spawn(move || {
                        let (mut from, mut into) = (from, into);
                        from.set_read_timeout(Some(Duration::from_millis(50)))
                            .unwrap();
                        let mut buf = [0u8; 16384];
                        let chunk = match (counted, rate) {
                            (true, Some(r)) => (r as usize / 20).clamp(1, buf.len()),
                            _ => buf.len(),
                        };
                        loop {
                            if cut.load(Ordering::SeqCst) {
                                break;
                            }
                            let n = match from.read(&mut buf[..chunk]) {
                                Ok(0) => break,
                                Ok(n) => n,
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        std::io::ErrorKind::WouldBlock
                                            | std::io::ErrorKind::TimedOut
                                    ) =>
                                {
                                    continue
                                }
                                Err(_) => break,
                            };
                            let mut n = n as u64;
                            if counted {
                                if let Some(limit) = limit {
                                    let before = sent.fetch_add(n, Ordering::SeqCst);
                                    n = n.min(limit.saturating_sub(before));
                                    if before + n >= limit {
                                        let _ = into.write_all(&buf[..n as usize]);
                                        cut.store(true, Ordering::SeqCst);
                                        break;
                                    }
                                }
                            }
                            if into.write_all(&buf[..n as usize]).is_err() {
                                break;
                            }
                            if let (true, Some(r)) = (counted, rate) {
                                std::thread::sleep(Duration::from_secs_f64(n as f64 / r as f64));
                            }
                        }
                        let _ = into.shutdown(std::net::Shutdown::Both);
                        let _ = from.shutdown(std::net::Shutdown::Both);
                    });
                }
            }
        });
        CuttingProxy { port, cut }
    }

    /// Drops every connection through the proxy now (and any later one).
    pub fn cut(&self) {
        self.cut.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

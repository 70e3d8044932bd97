//! `~/.ssh/known_hosts`, read the way OpenSSH reads it: plain and hashed (`|1|salt|hmac`) host
//! fields, `[host]:port` names, wildcard and negated patterns, `@revoked` lines.
//!
//! kprofctl does this itself rather than through libssh2's reader, which stops at the first line
//! it cannot parse (e.g. `@cert-authority`) and knows nothing of `@revoked`. A host covered by
//! a `@cert-authority` line is trusted through certificates, which libssh2 cannot check: it
//! is refused with a message saying so, never taken as unknown.

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine as _;
use hmac::{KeyInit as _, Mac as _};
use sha2::Digest as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

/// What `known_hosts` says about the key a host presented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostKeyCheck {
    /// A line lists this host with this very key.
    Known,
    /// No line lists this host at all.
    Unknown,
    /// No line lists this host with a key of the offered type, but one lists it with a key of
    /// another type (the first such line): the board stopped offering the key it is known by.
    OtherType {
        path: PathBuf,
        line: usize,
        known_type: String,
    },
    /// The host is listed with another key of the same type: possibly an attack.
    Changed { path: PathBuf, line: usize },
    /// An `@revoked` line names this key.
    Revoked { path: PathBuf, line: usize },
    /// No line lists this very key, but a `@cert-authority` line covers the host: it is
    /// trusted through host certificates, which kprofctl cannot check.
    CertAuthority { path: PathBuf, line: usize },
}

/// One usable line of a known_hosts file.
#[derive(Debug, Clone)]
struct Entry {
    line: usize,
    revoked: bool,
    cert_authority: bool,
    hosts: String,
    key_type: String,
    key: Vec<u8>,
}

/// The host key a server presented: its wire blob (which starts with its type name).
#[derive(Debug, Clone)]
pub struct HostKey {
    pub key_type: String,
    pub blob: Vec<u8>,
}

impl HostKey {
    /// Takes the type name from the blob itself, so it is the type the server really sent.
    pub fn from_blob(blob: &[u8]) -> Option<HostKey> {
        let len = u32::from_be_bytes(blob.get(..4)?.try_into().ok()?) as usize;
        let name = std::str::from_utf8(blob.get(4..4usize.checked_add(len)?)?).ok()?;
        Some(HostKey {
            key_type: name.to_owned(),
            blob: blob.to_vec(),
        })
    }

    /// `SHA256:...`, as `ssh-keygen -lf` and OpenSSH's prompts print it.
    pub fn fingerprint(&self) -> String {
        let digest = sha2::Sha256::digest(&self.blob);
        format!("SHA256:{}", STANDARD_NO_PAD.encode(digest))
    }
}

/// The known_hosts files OpenSSH reads for a host: the user's (`~/.ssh/known_hosts`, where
/// new keys are written, and `known_hosts2`, or `UserKnownHostsFile`) and the system's
/// (`/etc/ssh/ssh_known_hosts` and `ssh_known_hosts2`, or `GlobalKnownHostsFile`).
#[derive(Debug, Clone)]
pub struct KnownHosts {
    pub files: Vec<PathBuf>,
    /// Where new keys go: the first user file (`None` with `UserKnownHostsFile none`).
    written: Option<PathBuf>,
}

impl KnownHosts {
    /// The user files of `home` only (no system file): what the tests use.
    #[cfg(test)]
    pub fn for_home(home: &Path) -> KnownHosts {
        let files = vec![
            home.join(".ssh/known_hosts"),
            home.join(".ssh/known_hosts2"),
        ];
        KnownHosts {
            written: files.first().cloned(),
            files,
        }
    }

    /// The files OpenSSH reads for a host with `trust` from `~/.ssh/config`.
    pub fn for_host(home: &Path, trust: &super::target::HostTrust) -> KnownHosts {
        let user = trust.user_files.clone().unwrap_or_else(|| {
            vec![
                home.join(".ssh/known_hosts"),
                home.join(".ssh/known_hosts2"),
            ]
        });
        let global = trust.global_files.clone().unwrap_or_else(|| {
            vec![
                PathBuf::from("/etc/ssh/ssh_known_hosts"),
                PathBuf::from("/etc/ssh/ssh_known_hosts2"),
            ]
        });
        KnownHosts {
            written: user.first().cloned(),
            files: user.into_iter().chain(global).collect(),
        }
    }

    /// The file new keys are appended to.
    pub fn primary(&self) -> anyhow::Result<&Path> {
        self.written
            .as_deref()
            .ok_or_else(|| anyhow::anyhow!("UserKnownHostsFile is none: no file to add the key to"))
    }

    /// Key types `name` is known with, for ordering the host key algorithms before the handshake.
    pub fn known_types(&self, name: &str) -> anyhow::Result<Vec<String>> {
        let mut types = Vec::new();
        for (_, entry) in self.entries()? {
            if !entry.revoked
                && !entry.cert_authority
                && hosts_match(&entry.hosts, name)
                && !types.contains(&entry.key_type)
            {
                types.push(entry.key_type);
            }
        }
        Ok(types)
    }

    /// Looks `key` up for the host `name` (`host` or `[host]:port`).
    pub fn check(&self, name: &str, key: &HostKey) -> anyhow::Result<HostKeyCheck> {
        let mut known = false;
        let mut changed = None;
        let mut other_type = None;
        let mut authority = None;
        for (path, entry) in self.entries()? {
            if entry.cert_authority {
                if !entry.revoked && hosts_match(&entry.hosts, name) {
                    authority.get_or_insert((path, entry.line));
                }
                continue;
            }
            if entry.revoked {
                if entry.key == key.blob {
                    return Ok(HostKeyCheck::Revoked {
                        path,
                        line: entry.line,
                    });
                }
                continue;
            }
            if !hosts_match(&entry.hosts, name) {
                continue;
            }
            if entry.key == key.blob {
                known = true;
            } else if entry.key_type == key.key_type {
                changed.get_or_insert((path, entry.line));
            } else if other_type.is_none() {
                other_type = Some((path, entry.line, entry.key_type));
            }
        }
        if let (false, Some((path, line))) = (known, authority) {
            return Ok(HostKeyCheck::CertAuthority { path, line });
        }
        Ok(match (known, changed, other_type) {
            (true, _, _) => HostKeyCheck::Known,
            (false, Some((path, line)), _) => HostKeyCheck::Changed { path, line },
            (false, None, Some((path, line, known_type))) => HostKeyCheck::OtherType {
                path,
                line,
                known_type,
            },
            (false, None, None) => HostKeyCheck::Unknown,
        })
    }

    /// Appends `name key_type base64` to the primary file, creating `~/.ssh` (0700) and the
    /// file (0600) when missing.
    pub fn append(&self, name: &str, key: &HostKey) -> anyhow::Result<()> {
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let path = self.primary()?;
        if let Some(dir) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| anyhow::anyhow!("cannot create {}: {e}", dir.display()))?;
        }
        // Start on a new line if the file does not end with one.
        let needs_newline = std::fs::read(path)
            .map(|b| b.last().is_some_and(|c| *c != b'\n'))
            .unwrap_or(false);
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)
            .map_err(|e| anyhow::anyhow!("cannot open {}: {e}", path.display()))?;
        let line = format!(
            "{}{} {} {}\n",
            if needs_newline { "\n" } else { "" },
            name,
            key.key_type,
            STANDARD.encode(&key.blob)
        );
        file.write_all(line.as_bytes())
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
    }

    fn entries(&self) -> anyhow::Result<Vec<(PathBuf, Entry)>> {
        let mut out = Vec::new();
        for path in &self.files {
            let text = match std::fs::read(path) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
            };
            out.extend(parse(&text).into_iter().map(|entry| (path.clone(), entry)));
        }
        Ok(out)
    }
}

/// Lines that cannot be used (comments, unknown markers, bad base64) are skipped, as OpenSSH
/// does.
fn parse(text: &str) -> Vec<Entry> {
    let mut entries = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split_whitespace();
        let mut first = fields.next().unwrap_or_default();
        let mut revoked = false;
        let mut cert_authority = false;
        if let Some(marker) = first.strip_prefix('@') {
            match marker {
                "revoked" => revoked = true,
                "cert-authority" => cert_authority = true,
                _ => continue,
            }
            first = fields.next().unwrap_or_default();
        }
        let (Some(key_type), Some(key_b64)) = (fields.next(), fields.next()) else {
            continue;
        };
        let Ok(key) = STANDARD.decode(key_b64) else {
            continue;
        };
        entries.push(Entry {
            line: n + 1,
            revoked,
            cert_authority,
            hosts: first.to_owned(),
            key_type: key_type.to_owned(),
            key,
        });
    }
    entries
}

/// A known_hosts host field against a name: a hashed `|1|salt|hash` or a comma list of
/// patterns where a matching `!pattern` vetoes.
fn hosts_match(field: &str, name: &str) -> bool {
    if let Some(hashed) = field.strip_prefix("|1|") {
        return hashed_match(hashed, name);
    }
    let mut matched = false;
    for pattern in field.split(',') {
        if let Some(neg) = pattern.strip_prefix('!') {
            if super::ssh_config::glob_match(neg, name) {
                return false;
            }
        } else if super::ssh_config::glob_match(pattern, name) {
            matched = true;
        }
    }
    matched
}

fn hashed_match(salt_and_hash: &str, name: &str) -> bool {
    let Some((salt, hash)) = salt_and_hash.split_once('|') else {
        return false;
    };
    let (Ok(salt), Ok(hash)) = (STANDARD.decode(salt), STANDARD.decode(hash)) else {
        return false;
    };
    let Ok(mut mac) = hmac::Hmac::<sha1::Sha1>::new_from_slice(&salt) else {
        return false;
    };
    mac.update(name.as_bytes());
    mac.verify_slice(&hash).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(seed: u8) -> HostKey {
        let mut blob = vec![0, 0, 0, 11];
        blob.extend_from_slice(b"ssh-ed25519");
        blob.extend_from_slice(&[0, 0, 0, 32]);
        blob.extend(std::iter::repeat_n(seed, 32));
        HostKey::from_blob(&blob).unwrap()
    }

    fn line(host: &str, k: &HostKey) -> String {
        format!("{host} {} {}\n", k.key_type, STANDARD.encode(&k.blob))
    }

    fn hashed(name: &str, salt: &[u8]) -> String {
        let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(salt).unwrap();
        mac.update(name.as_bytes());
        let hash = mac.finalize().into_bytes();
        format!("|1|{}|{}", STANDARD.encode(salt), STANDARD.encode(hash))
    }

    fn hosts_with(text: &str) -> (tempfile::TempDir, KnownHosts) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join(".ssh")).unwrap();
        std::fs::write(dir.path().join(".ssh/known_hosts"), text).unwrap();
        let kh = KnownHosts::for_home(dir.path());
        (dir, kh)
    }

    /// A plain `[host]:port` line with the same key is known; another key of its type changed.
    #[test]
    fn check_known_hosts_plain_port_form() {
        let text = format!(
            "# c\n@cert-authority * x y\n{}",
            line("[10.0.0.7]:2222", &key(1))
        );
        let (_d, kh) = hosts_with(&text);
        assert_eq!(
            kh.check("[10.0.0.7]:2222", &key(1)).unwrap(),
            HostKeyCheck::Known
        );
        assert!(matches!(
            kh.check("[10.0.0.7]:2222", &key(2)).unwrap(),
            HostKeyCheck::Changed { line: 3, .. }
        ));
        // Port 22 is written without brackets, so it is another host here.
        assert_eq!(
            kh.check("10.0.0.7", &key(1)).unwrap(),
            HostKeyCheck::Unknown
        );
    }

    /// Hashed host fields (HashKnownHosts yes, Debian's default) match by HMAC-SHA1.
    #[test]
    fn check_known_hosts_hashed_entry() {
        let text = line(
            &hashed("[127.0.0.1]:2200", b"0123456789abcdefghij"),
            &key(3),
        );
        let (_d, kh) = hosts_with(&text);
        assert_eq!(
            kh.check("[127.0.0.1]:2200", &key(3)).unwrap(),
            HostKeyCheck::Known
        );
        assert!(matches!(
            kh.check("[127.0.0.1]:2201", &key(3)).unwrap(),
            HostKeyCheck::Unknown
        ));
    }

    /// A host listed only with an ed25519 key that offers an RSA key is not "unknown": the
    /// check names the line and the type it is known with.
    #[test]
    fn check_known_hosts_other_key_type_named() {
        let mut blob = vec![0, 0, 0, 7];
        blob.extend_from_slice(b"ssh-rsa");
        blob.extend_from_slice(&[0, 0, 0, 1, 3, 0, 0, 0, 2, 1, 1]);
        let rsa = HostKey::from_blob(&blob).unwrap();
        let text = format!("{}{}", line("other", &key(8)), line("[b]:2222", &key(9)));
        let (_d, kh) = hosts_with(&text);
        match kh.check("[b]:2222", &rsa).unwrap() {
            HostKeyCheck::OtherType {
                path,
                line,
                known_type,
            } => {
                assert_eq!((line, known_type.as_str()), (2, "ssh-ed25519"));
                assert_eq!(path, kh.primary().unwrap());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(kh.check("[c]:2222", &rsa).unwrap(), HostKeyCheck::Unknown);
    }

    /// Wildcards, negation and `@revoked` behave as in OpenSSH.
    #[test]
    fn check_known_hosts_patterns_and_revoked() {
        let text = format!(
            "{}@revoked * {} {}\n",
            line("*.lab,!bad.lab", &key(4)),
            key(5).key_type,
            STANDARD.encode(&key(5).blob)
        );
        let (_d, kh) = hosts_with(&text);
        assert_eq!(kh.check("b1.lab", &key(4)).unwrap(), HostKeyCheck::Known);
        assert!(matches!(
            kh.check("bad.lab", &key(4)).unwrap(),
            HostKeyCheck::Unknown
        ));
        assert!(matches!(
            kh.check("b1.lab", &key(5)).unwrap(),
            HostKeyCheck::Revoked { line: 2, .. }
        ));
    }

    /// Appending creates ~/.ssh and the file, and the appended key is then known.
    #[test]
    fn append_known_hosts_creates_file() {
        let dir = tempfile::tempdir().unwrap();
        let kh = KnownHosts::for_home(dir.path());
        kh.append("[h]:2", &key(6)).unwrap();
        assert_eq!(kh.check("[h]:2", &key(6)).unwrap(), HostKeyCheck::Known);
        assert_eq!(
            kh.known_types("[h]:2").unwrap(),
            vec!["ssh-ed25519".to_owned()]
        );
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(kh.primary().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    /// The fingerprint has ssh-keygen's form.
    /// Issue 36, item 6: a host pinned in the system's file (or a `GlobalKnownHostsFile`) with
    /// another key is changed, not unknown; a host covered by `@cert-authority` whose own key
    /// is not listed is refused as such (before: the line was skipped and the host unknown).
    #[test]
    fn check_known_hosts_global_file_and_cert_authority() {
        let dir = tempfile::tempdir().unwrap();
        let global = dir.path().join("ssh_known_hosts");
        std::fs::write(&global, line("[b.lab]:2222", &key(1)) + "\n").unwrap();
        let trust = crate::remote::target::HostTrust {
            user_files: Some(vec![dir.path().join("user")]),
            global_files: Some(vec![global.clone()]),
            ..Default::default()
        };
        let kh = KnownHosts::for_host(dir.path(), &trust);
        assert_eq!(kh.primary().unwrap(), dir.path().join("user"));
        assert_eq!(
            kh.check("[b.lab]:2222", &key(2)).unwrap(),
            HostKeyCheck::Changed {
                path: global.clone(),
                line: 1
            }
        );
        let ca = format!(
            "@cert-authority *.lab {} {}\n",
            key(3).key_type,
            STANDARD.encode(&key(3).blob)
        );
        std::fs::write(&global, ca + &line("known.lab", &key(4)) + "\n").unwrap();
        assert_eq!(
            kh.check("c.lab", &key(5)).unwrap(),
            HostKeyCheck::CertAuthority {
                path: global.clone(),
                line: 1
            }
        );
        assert_eq!(kh.check("known.lab", &key(4)).unwrap(), HostKeyCheck::Known);
        assert_eq!(
            kh.check("other.example", &key(5)).unwrap(),
            HostKeyCheck::Unknown
        );
        let none = crate::remote::target::HostTrust {
            user_files: Some(Vec::new()),
            ..trust
        };
        let err = KnownHosts::for_host(dir.path(), &none)
            .primary()
            .unwrap_err();
        assert!(
            err.to_string().contains("UserKnownHostsFile is none"),
            "{err}"
        );
    }

    #[test]
    fn fingerprint_host_key_sha256_form() {
        let fp = key(7).fingerprint();
        assert!(fp.starts_with("SHA256:") && fp.len() == 7 + 43, "{fp}");
    }
}

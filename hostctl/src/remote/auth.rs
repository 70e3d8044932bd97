//! Logging in, in the order a board user expects: keys first, then what development images allow
//! (an empty root password: Yocto's debug-tweaks, Buildroot's default), then a password.

use super::ssh_config::expand_tilde;
use super::target::Target;
use ssh2::Session;
use std::io::IsTerminal as _;
use std::path::{Path, PathBuf};

/// Environment variable holding a password, for scripts and CI (never logged).
pub const PASSWORD_ENV: &str = "KPROF_PASSWORD";

/// Which host of the route a login is to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hop {
    /// A jump host (`-J`, `ProxyJump`): `$KPROF_PASSWORD` is the board's and is never offered
    /// to one (a jump host run by someone else would learn it), as OpenSSH's `-J` asks each
    /// host for its own password.
    Jump,
    /// The board itself.
    Board,
}

/// Tries ssh-agent, identity files, the empty password, then `$KPROF_PASSWORD` (the board
/// only) or a prompt on the terminal. The error lists what was tried.
pub fn authenticate(
    sess: &Session,
    target: &Target,
    extra: &[PathBuf],
    hop: Hop,
) -> anyhow::Result<()> {
    let user = target.user.as_str();
    // Asking for the method list sends the "none" method, which some boards accept outright.
    let methods = match sess.auth_methods(user) {
        Ok(m) => m.to_owned(),
        Err(_) if sess.authenticated() => return Ok(()),
        Err(e) => anyhow::bail!("{target}: the board closed the login: {}", e.message()),
    };
    if sess.authenticated() {
        return Ok(());
    }
    let offers = |m: &str| methods.split(',').any(|x| x == m);
    let mut tried: Vec<String> = Vec::new();

    if offers("publickey") {
        if std::env::var_os("SSH_AUTH_SOCK").is_some() {
            if sess.userauth_agent(user).is_ok() && sess.authenticated() {
                return Ok(());
            }
            tried.push("ssh-agent".into());
        }
        for file in identity_files(target, extra) {
            if try_key_file(sess, user, &file)? {
                return Ok(());
            }
            tried.push(file.display().to_string());
        }
    }
    if offers("password") {
        if sess.userauth_password(user, "").is_ok() && sess.authenticated() {
            return Ok(());
        }
        tried.push("empty password".into());
    }
    if offers("keyboard-interactive") {
        let mut empty = Answer(String::new());
        if sess.userauth_keyboard_interactive(user, &mut empty).is_ok() && sess.authenticated() {
            return Ok(());
        }
        if !offers("password") {
            tried.push("empty password".into());
        }
    }
    let tried = if tried.is_empty() {
        "nothing the board offers".to_owned()
    } else {
        tried.join(", ")
    };
    if !offers("password") && !offers("keyboard-interactive") {
        anyhow::bail!(
            "{target}: login refused for user {user} (tried {tried}; the board accepts only: \
             {methods}). Load a key into ssh-agent or pass --identity FILE"
        );
    }
    let from_env = std::env::var_os(PASSWORD_ENV).filter(|_| hop == Hop::Board);
    if let Some(password) = from_env {
        let password = password.to_string_lossy().into_owned();
        if try_password(sess, user, &password) {
            return Ok(());
        }
        anyhow::bail!("{target}: password from ${PASSWORD_ENV} refused for user {user}");
    }
    if !std::io::stdin().is_terminal() {
        let or_env = match hop {
            Hop::Board => format!(", or set ${PASSWORD_ENV}"),
            Hop::Jump => {
                format!(" (${PASSWORD_ENV} is the board's: it is never sent to a jump host)")
            }
        };
        anyhow::bail!(
            "{target}: login refused for user {user} (tried {tried}), and there is no terminal \
             to ask for a password: load a key into ssh-agent or pass --identity FILE{or_env}"
        );
    }
    for _ in 0..3 {
        let password = rpassword::prompt_password(format!("{target} password: "))
            .map_err(|e| anyhow::anyhow!("{target}: cannot read a password: {e}"))?;
        if try_password(sess, user, &password) {
            return Ok(());
        }
        eprintln!("kprofctl: {target}: password refused");
    }
    anyhow::bail!("{target}: password refused for user {user} three times")
}

/// `--identity` files, then `IdentityFile`s from ~/.ssh/config, or OpenSSH's default keys when
/// the config names none — the files that exist.
fn identity_files(target: &Target, extra: &[PathBuf]) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = extra.to_vec();
    if target.identity_files.is_empty() {
        for name in ["id_ed25519", "id_ecdsa", "id_rsa"] {
            files.push(expand_tilde(&format!("~/.ssh/{name}")));
        }
    } else {
        files.extend(target.identity_files.iter().cloned());
    }
    let mut seen = Vec::new();
    files.retain(|f| {
        let keep = f.is_file() && !seen.contains(f);
        seen.push(f.clone());
        keep
    });
    files
}

/// Offers one key file; asks for its passphrase on the terminal when it is encrypted.
fn try_key_file(sess: &Session, user: &str, file: &Path) -> anyhow::Result<bool> {
    match sess.userauth_pubkey_file(user, None, file, None) {
        Ok(()) if sess.authenticated() => return Ok(true),
        Ok(()) => return Ok(false),
        Err(_) if !is_encrypted(file) || !std::io::stdin().is_terminal() => return Ok(false),
        Err(_) => {}
    }
    let passphrase = rpassword::prompt_password(format!("passphrase for {}: ", file.display()))
        .map_err(|e| anyhow::anyhow!("cannot read a passphrase: {e}"))?;
    Ok(sess
        .userauth_pubkey_file(user, None, file, Some(&passphrase))
        .is_ok()
        && sess.authenticated())
}

/// PEM `ENCRYPTED` headers or an OpenSSH key whose cipher is not `none`.
fn is_encrypted(file: &Path) -> bool {
    let Ok(text) = std::fs::read_to_string(file) else {
        return false;
    };
    if text.contains("ENCRYPTED") {
        return true;
    }
    use base64::Engine as _;
    let body: String = text.lines().filter(|l| !l.starts_with("-----")).collect();
    base64::engine::general_purpose::STANDARD
        .decode(body.trim())
        .ok()
        .and_then(|raw| {
            let rest = raw.strip_prefix(b"openssh-key-v1\0")?;
            let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
            Some(rest.get(4..4 + len)? != b"none")
        })
        .unwrap_or(false)
}

fn try_password(sess: &Session, user: &str, password: &str) -> bool {
    if sess.userauth_password(user, password).is_ok() && sess.authenticated() {
        return true;
    }
    let mut answer = Answer(password.to_owned());
    sess.userauth_keyboard_interactive(user, &mut answer)
        .is_ok()
        && sess.authenticated()
}

/// Answers every keyboard-interactive prompt with the same secret.
struct Answer(String);

impl ssh2::KeyboardInteractivePrompt for Answer {
    fn prompt<'a>(
        &mut self,
        _username: &str,
        _instructions: &str,
        prompts: &[ssh2::Prompt<'a>],
    ) -> Vec<String> {
        prompts.iter().map(|_| self.0.clone()).collect()
    }
}

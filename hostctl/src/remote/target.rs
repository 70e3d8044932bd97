//! A board named on the command line: `[user@]host[:port]` or an `~/.ssh/config` alias.

use super::ssh_config::{self, HostConfig};
use std::fmt;
use std::path::PathBuf;

/// Where to connect and as whom, after `~/.ssh/config` was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// What the user typed; the key under which kprofctl remembers the board.
    pub spec: String,
    /// Remote user name.
    pub user: String,
    /// Host name or address to connect to (`HostName` when the spec is an alias).
    pub host: String,
    pub port: u16,
    /// `IdentityFile`s from the config, expanded, in order.
    pub identity_files: Vec<PathBuf>,
}

impl Target {
    /// Parses `spec` and applies `~/.ssh/config` (`$HOME/.ssh/config`) to its host part.
    pub fn resolve(spec: &str) -> anyhow::Result<Target> {
        let config = match ssh_config::home_dir() {
            Some(home) => ssh_config::lookup_file(&home.join(".ssh/config"), host_of(spec)?)?,
            None => HostConfig::default(),
        };
        Self::resolve_with(spec, &config)
    }

    /// [`Target::resolve`] with the config already looked up.
    pub fn resolve_with(spec: &str, config: &HostConfig) -> anyhow::Result<Target> {
        let parsed = parse_spec(spec)?;
        let user = parsed
            .user
            .or_else(|| config.user.clone())
            .unwrap_or_else(ssh_config::local_user);
        let host = config.hostname.clone().unwrap_or(parsed.host);
        let port = parsed.port.or(config.port).unwrap_or(22);
        let identity_files = config
            .identity_files
            .iter()
            .map(|f| {
                let f = ssh_config::expand_tokens(f, &host, &user, port);
                ssh_config::expand_tilde(&f)
            })
            .collect();
        Ok(Target {
            spec: spec.to_owned(),
            user,
            host,
            port,
            identity_files,
        })
    }

    /// The host as `known_hosts` names it: `host`, or `[host]:port` off port 22.
    pub fn known_hosts_name(&self) -> String {
        if self.port == 22 {
            self.host.clone()
        } else {
            format!("[{}]:{}", self.host, self.port)
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        write!(f, "{}@{}:{}", self.user, host, self.port)
    }
}

#[derive(Debug, PartialEq, Eq)]
struct Spec {
    user: Option<String>,
    host: String,
    port: Option<u16>,
}

/// The host part of a spec, for the config lookup.
fn host_of(spec: &str) -> anyhow::Result<&str> {
    let rest = spec.rsplit_once('@').map_or(spec, |(_, h)| h);
    if let Some(inner) = rest.strip_prefix('[') {
        return Ok(inner.split(']').next().unwrap_or(inner));
    }
    if rest.matches(':').count() == 1 {
        return Ok(rest.split(':').next().unwrap_or(rest));
    }
    Ok(rest)
}

fn parse_spec(spec: &str) -> anyhow::Result<Spec> {
    let bad = |why: &str| {
        anyhow::anyhow!(
            "bad target `{spec}`: {why} (expected [user@]host[:port] or an ~/.ssh/config alias)"
        )
    };
    if spec.is_empty() || spec.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("empty or contains spaces"));
    }
    let (user, rest) = match spec.rsplit_once('@') {
        Some(("", _)) => return Err(bad("empty user name")),
        Some((u, r)) => (Some(u.to_owned()), r),
        None => (None, spec),
    };
    let (host, port) = if let Some(inner) = rest.strip_prefix('[') {
        let (host, after) = inner.split_once(']').ok_or_else(|| bad("missing `]`"))?;
        match after {
            "" => (host, None),
            _ => (
                host,
                Some(
                    after
                        .strip_prefix(':')
                        .ok_or_else(|| bad("junk after `]`"))?,
                ),
            ),
        }
    } else if rest.matches(':').count() == 1 {
        let (h, p) = rest.split_once(':').unwrap_or((rest, ""));
        (h, Some(p))
    } else {
        // No colon, or a bare IPv6 address (several colons, no port).
        (rest, None)
    };
    if host.is_empty() {
        return Err(bad("empty host"));
    }
    let port = match port {
        None => None,
        Some(p) => Some(
            p.parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| bad(&format!("bad port `{p}`")))?,
        ),
    };
    Ok(Spec {
        user,
        host: host.to_owned(),
        port,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(user: Option<&str>, host: &str, port: Option<u16>) -> Spec {
        Spec {
            user: user.map(str::to_owned),
            host: host.to_owned(),
            port,
        }
    }

    /// The forms a board is named by on the command line.
    #[test]
    fn parse_target_user_host_port_forms() {
        assert_eq!(
            parse_spec("root@127.0.0.1:2222").unwrap(),
            spec(Some("root"), "127.0.0.1", Some(2222))
        );
        assert_eq!(parse_spec("board").unwrap(), spec(None, "board", None));
        assert_eq!(
            parse_spec("me@[::1]:22").unwrap(),
            spec(Some("me"), "::1", Some(22))
        );
        assert_eq!(parse_spec("fe80::1").unwrap(), spec(None, "fe80::1", None));
    }

    /// Malformed targets are refused with the reason.
    #[test]
    fn parse_target_bad_input_errors() {
        for (bad, why) in [
            ("root@", "empty host"),
            ("@h", "empty user"),
            ("h:0", "bad port `0`"),
            ("h:x", "bad port `x`"),
            ("[::1", "missing `]`"),
            ("a b", "spaces"),
        ] {
            let err = parse_spec(bad).unwrap_err().to_string();
            assert!(err.contains(why), "{bad}: {err}");
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
    }

    /// Values typed on the command line win over the config, the config over defaults.
    #[test]
    fn resolve_target_config_alias_precedence() {
        let cfg = HostConfig {
            hostname: Some("10.0.0.7".into()),
            user: Some("root".into()),
            port: Some(2222),
            identity_files: vec!["/k/%h_%p".into()],
        };
        let t = Target::resolve_with("board", &cfg).unwrap();
        assert_eq!(t.to_string(), "root@10.0.0.7:2222");
        assert_eq!(t.identity_files, vec![PathBuf::from("/k/10.0.0.7_2222")]);
        assert_eq!(t.known_hosts_name(), "[10.0.0.7]:2222");
        let t = Target::resolve_with("dev@board:22", &cfg).unwrap();
        assert_eq!(t.to_string(), "dev@10.0.0.7:22");
        assert_eq!(t.known_hosts_name(), "10.0.0.7");
        assert_eq!(host_of("dev@board:22").unwrap(), "board");
    }
}

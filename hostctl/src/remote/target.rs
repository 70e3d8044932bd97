//! A board named on the command line: `[user@]host[:port]` or an `~/.ssh/config` alias, and
//! the jump hosts (`-J`, `ProxyJump`) it is reached through.

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
    /// Jump hosts in the order they are traversed (first is connected to directly); empty for
    /// a direct connection. The hops themselves have no `jump` of their own: a chain is flat.
    pub jump: Vec<Target>,
    /// Where this host's key is looked up and under which name (`~/.ssh/config`).
    pub trust: HostTrust,
}

/// What `~/.ssh/config` says about checking one host's key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostTrust {
    /// `UserKnownHostsFile`, expanded (`None`: OpenSSH's `~/.ssh/known_hosts` and
    /// `known_hosts2`; an empty list: `none`).
    pub user_files: Option<Vec<PathBuf>>,
    /// `GlobalKnownHostsFile`, expanded (`None`: `/etc/ssh/ssh_known_hosts` and
    /// `ssh_known_hosts2`).
    pub global_files: Option<Vec<PathBuf>>,
    /// `HostKeyAlias`.
    pub alias: Option<String>,
    /// `StrictHostKeyChecking accept-new`.
    pub accept_new: bool,
}

/// Most hops one chain may have, counting those a first hop's own `ProxyJump` adds: a config
/// whose `ProxyJump`s refer to each other would otherwise never end.
const MAX_HOPS: usize = 8;

impl Target {
    /// Parses `spec` and applies `~/.ssh/config` (`$HOME/.ssh/config`) to its host part,
    /// including its `ProxyJump`.
    pub fn resolve(spec: &str) -> anyhow::Result<Target> {
        Self::resolve_jump(spec, None)
    }

    /// [`Target::resolve`], reached through `jump` (`-J [user@]host[:port][,...]` or `none`)
    /// instead of the config's `ProxyJump` when given. Every hop is resolved through
    /// `~/.ssh/config` too.
    pub fn resolve_jump(spec: &str, jump: Option<&str>) -> anyhow::Result<Target> {
        let lookup = |alias: &str| match ssh_config::home_dir() {
            Some(home) => ssh_config::lookup_file(&home.join(".ssh/config"), alias),
            None => Ok(HostConfig::default()),
        };
        resolve_chain(spec, jump, &lookup, 0)
    }

    /// [`Target::resolve`] with the config already looked up; `ProxyJump` is not followed.
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
        let files = |list: &Option<Vec<String>>| {
            list.as_ref().map(|l| {
                l.iter()
                    .filter(|f| !f.eq_ignore_ascii_case("none"))
                    .map(|f| {
                        let f = ssh_config::expand_tokens(f, &host, &user, port);
                        ssh_config::expand_tilde(&f)
                    })
                    .collect()
            })
        };
        let trust = HostTrust {
            user_files: files(&config.user_known_hosts),
            global_files: files(&config.global_known_hosts),
            alias: config.host_key_alias.clone(),
            accept_new: config.accept_new,
        };
        Ok(Target {
            spec: spec.to_owned(),
            user,
            host,
            port,
            identity_files,
            jump: Vec::new(),
            trust,
        })
    }

    /// The host as `known_hosts` names it: its `HostKeyAlias`, else `host`, or `[host]:port`
    /// off port 22.
    pub fn known_hosts_name(&self) -> String {
        if let Some(alias) = &self.trust.alias {
            return alias.clone();
        }
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

/// Resolves `spec` with `lookup` giving the config of an alias, and its jump chain: `jump`
/// when given, else the config's `ProxyJump`. `depth` counts the hops already in the chain.
fn resolve_chain(
    spec: &str,
    jump: Option<&str>,
    lookup: &dyn Fn(&str) -> anyhow::Result<HostConfig>,
    depth: usize,
) -> anyhow::Result<Target> {
    let config = lookup(host_of(spec)?)?;
    let mut target = Target::resolve_with(spec, &config)?;
    let list = jump.or(config.proxy_jump.as_deref());
    if let Some(list) = list.filter(|l| !l.eq_ignore_ascii_case("none")) {
        target.jump = resolve_hops(&target, list, lookup, depth)?;
    }
    Ok(target)
}

/// The hops of a `-J`/`ProxyJump` list, flattened. As with OpenSSH (which reaches the last hop
/// by `ssh -J REST -W`), the first hop's own `ProxyJump` applies and comes before it; the
/// later hops' own are overridden by the list.
fn resolve_hops(
    target: &Target,
    list: &str,
    lookup: &dyn Fn(&str) -> anyhow::Result<HostConfig>,
    depth: usize,
) -> anyhow::Result<Vec<Target>> {
    let spec = &target.spec;
    let names: Vec<&str> = list.split(',').collect();
    if names.iter().any(|n| n.is_empty()) {
        anyhow::bail!(
            "bad jump host list `{list}` for `{spec}`: an empty hop (expected \
             [user@]host[:port][,...] or none)"
        );
    }
    let mut hops = Vec::new();
    for (i, name) in names.iter().enumerate() {
        if depth + hops.len() >= MAX_HOPS {
            anyhow::bail!(
                "`{spec}`: more than {MAX_HOPS} jump hosts (do the ProxyJump lines in \
                 ~/.ssh/config refer to each other?)"
            );
        }
        let mut hop = if i == 0 {
            let direct = Target::resolve_with(name, &lookup(host_of(name)?)?)?;
            if (&direct.user, &direct.host, direct.port)
                == (&target.user, &target.host, target.port)
            {
                // What OpenSSH calls a "jumphost loop": typically a `Host *` ProxyJump that
                // also matches the jump host itself.
                anyhow::bail!(
                    "`{spec}`: jump host loop via `{name}` ({direct}), which would be its own \
                     jump host; exclude it from a wildcard's ProxyJump (`Host * !{name}`)"
                );
            }
            resolve_chain(name, None, lookup, depth + 1)?
        } else {
            Target::resolve_with(name, &lookup(host_of(name)?)?)?
        };
        hops.append(&mut hop.jump);
        hops.push(hop);
    }
    Ok(hops)
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
            proxy_jump: Some("gw".into()),
            ..HostConfig::default()
        };
        let t = Target::resolve_with("board", &cfg).unwrap();
        assert_eq!(t.to_string(), "root@10.0.0.7:2222");
        assert_eq!(t.identity_files, vec![PathBuf::from("/k/10.0.0.7_2222")]);
        assert_eq!(t.known_hosts_name(), "[10.0.0.7]:2222");
        let t = Target::resolve_with("dev@board:22", &cfg).unwrap();
        assert_eq!(t.to_string(), "dev@10.0.0.7:22");
        assert_eq!(t.known_hosts_name(), "10.0.0.7");
        assert_eq!(host_of("dev@board:22").unwrap(), "board");
        assert!(t.jump.is_empty(), "resolve_with does not follow ProxyJump");
    }

    /// A config where `board` jumps via `gw,lab`, `gw` itself via `edge`, `lab` via `nowhere`
    /// (overridden, as OpenSSH does), `edge` and `lan` never, `ping` and `pong` via each
    /// other, everything else via `loop`, which is therefore its own jump host.
    fn lab_config(alias: &str) -> anyhow::Result<HostConfig> {
        let (hostname, user, jump) = match alias {
            "board" => (Some("10.0.0.7"), Some("root"), Some("gw,lab")),
            "gw" => (Some("gw.example.org"), Some("me"), Some("edge:2022")),
            "lab" => (None, Some("lab"), Some("nowhere")),
            "edge" => (None, Some("ops"), None),
            "ping" => (None, None, Some("pong")),
            "pong" => (None, None, Some("ping")),
            "lan" => (None, None, Some("none")),
            _ => (None, None, Some("loop")),
        };
        Ok(HostConfig {
            hostname: hostname.map(Into::into),
            user: user.map(Into::into),
            port: None,
            identity_files: Vec::new(),
            proxy_jump: jump.map(Into::into),
            ..HostConfig::default()
        })
    }

    fn chain(t: &Target) -> Vec<String> {
        t.jump.iter().map(ToString::to_string).collect()
    }

    /// ProxyJump hops are resolved through the config; the first hop's own ProxyJump comes
    /// first, later hops' are overridden; `-J` replaces the config's list; `none` turns it off.
    #[test]
    fn resolve_jump_config_chain_order_override() {
        let t = resolve_chain("board", None, &lab_config, 0).unwrap();
        assert_eq!(t.to_string(), "root@10.0.0.7:22");
        assert_eq!(
            chain(&t),
            ["ops@edge:2022", "me@gw.example.org:22", "lab@lab:22"]
        );
        assert!(t.jump.iter().all(|h| h.jump.is_empty()));
        let t = resolve_chain("board", Some("lab@lan:2200"), &lab_config, 0).unwrap();
        assert_eq!(chain(&t), ["lab@lan:2200"]);
        let t = resolve_chain("board", Some("none"), &lab_config, 0).unwrap();
        assert!(t.jump.is_empty());
        let t = resolve_chain("lan", None, &lab_config, 0).unwrap();
        assert!(t.jump.is_empty());
    }

    /// A host that is its own jump host, a ProxyJump cycle and an empty hop are errors naming
    /// the host, not a hang.
    #[test]
    fn resolve_jump_loop_and_empty_hop_errors() {
        let err = resolve_chain("x", None, &lab_config, 0).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("`loop`: jump host loop via `loop`"),
            "{err}"
        );
        let err = resolve_chain("ping", None, &lab_config, 0).unwrap_err();
        assert!(err.to_string().contains("more than 8 jump hosts"), "{err}");
        let err = resolve_chain("lan", Some("gw,,lab"), &lab_config, 0).unwrap_err();
        assert!(err.to_string().contains("`gw,,lab`"), "{err}");
        assert!(err.to_string().contains("empty hop"), "{err}");
    }
}

//! The part of `~/.ssh/config` that says how to reach a board and whom to trust: `Host` and
//! `Match` blocks with `HostName`, `User`, `Port`, `IdentityFile`, `ProxyJump`,
//! `UserKnownHostsFile`, `GlobalKnownHostsFile`, `HostKeyAlias` and `StrictHostKeyChecking`,
//! plus `Include`.
//!
//! OpenSSH semantics: the first value obtained for a keyword wins, `IdentityFile` accumulates,
//! `Host` patterns take `*`, `?` and `!negation`. `Match` evaluates `all`, `host`,
//! `originalhost` and `localuser`; a block whose condition kprofctl cannot evaluate (`exec`,
//! `canonical`, `final`, `tagged`, `localnetwork`, `user`...) is skipped unless it sets one of
//! the keywords above, which is an error naming it: a setting that changes the route or the
//! trust is never silently dropped. So are `ProxyCommand` (other than `none`) and
//! `StrictHostKeyChecking no`, which kprofctl does not implement.

use std::path::{Path, PathBuf};

/// Settings found for one host alias. `None` means "not set in the config".
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct HostConfig {
    pub hostname: Option<String>,
    pub user: Option<String>,
    pub port: Option<u16>,
    /// Raw `IdentityFile` values in config order (still with `~` and `%` tokens).
    pub identity_files: Vec<String>,
    /// Raw `ProxyJump` value: `[user@]host[:port][,...]` or `none`.
    pub proxy_jump: Option<String>,
    /// Raw `UserKnownHostsFile` values (`none` for no file).
    pub user_known_hosts: Option<Vec<String>>,
    /// Raw `GlobalKnownHostsFile` values (`none` for no file).
    pub global_known_hosts: Option<Vec<String>>,
    /// `HostKeyAlias`: the name the host key is looked up and recorded under.
    pub host_key_alias: Option<String>,
    /// `StrictHostKeyChecking accept-new`: an unknown host key is added, as with
    /// `--accept-new-host-key` (`yes` and `ask` are what kprofctl does anyway).
    pub accept_new: bool,
    /// A `StrictHostKeyChecking` was seen (the first one wins).
    pub strict_seen: bool,
}

/// Keywords whose value kprofctl uses or refuses: a `Match` it cannot evaluate must not
/// decide them.
const ROUTE_AND_TRUST: &[&str] = &[
    "hostname",
    "user",
    "port",
    "identityfile",
    "proxyjump",
    "proxycommand",
    "userknownhostsfile",
    "globalknownhostsfile",
    "hostkeyalias",
    "stricthostkeychecking",
];

/// Reads `path` (and its `Include`s) and returns what applies to `alias`. A missing file gives
/// the empty config; an unreadable or malformed one is an error naming the file and line.
pub fn lookup_file(path: &Path, alias: &str) -> anyhow::Result<HostConfig> {
    let mut cfg = HostConfig::default();
    if !path.exists() {
        return Ok(cfg);
    }
    apply_file(path, alias, &mut cfg, 0)?;
    Ok(cfg)
}

/// Like [`lookup_file`] on text already read; `origin` names it in errors.
#[cfg(test)]
pub fn lookup_str(text: &str, origin: &Path, alias: &str) -> anyhow::Result<HostConfig> {
    let mut cfg = HostConfig::default();
    let mut state = BlockState::Applies;
    apply_text(text, origin, alias, &mut cfg, &mut state, 0)?;
    Ok(cfg)
}

/// Whether the lines being read apply to the alias.
#[derive(Debug, Clone, PartialEq, Eq)]
enum BlockState {
    Applies,
    Skipped,
    /// A `Match` whose condition kprofctl cannot evaluate: where it is and which criterion.
    Undecided {
        line: usize,
        criterion: String,
    },
}

fn apply_file(path: &Path, alias: &str, cfg: &mut HostConfig, depth: u32) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read ssh config {}: {e}", path.display()))?;
    let mut state = BlockState::Applies;
    apply_text(&text, path, alias, cfg, &mut state, depth)
}

fn apply_text(
    text: &str,
    origin: &Path,
    alias: &str,
    cfg: &mut HostConfig,
    state: &mut BlockState,
    depth: u32,
) -> anyhow::Result<()> {
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (keyword, rest) = split_keyword(line);
        let args = split_args(rest)
            .map_err(|e| anyhow::anyhow!("ssh config {} line {}: {e}", origin.display(), n + 1))?;
        let keyword = keyword.to_ascii_lowercase();
        match keyword.as_str() {
            "host" => {
                *state = if host_matches(&args, alias) {
                    BlockState::Applies
                } else {
                    BlockState::Skipped
                };
                continue;
            }
            "match" => {
                *state = match_state(&args, alias, cfg, n + 1);
                continue;
            }
            _ => {}
        }
        if let BlockState::Undecided { line, criterion } = &*state {
            if ROUTE_AND_TRUST.contains(&keyword.as_str()) && would_set(cfg, &keyword) {
                anyhow::bail!(
                    "ssh config {} line {}: `Match {criterion}` (line {line}) decides whether \
                     this {keyword} applies, and kprofctl cannot evaluate it; give the board \
                     a Host block of its own",
                    origin.display(),
                    n + 1
                );
            }
            continue;
        }
        if *state == BlockState::Skipped {
            continue;
        }
        let at = Line { origin, n: n + 1 };
        apply_keyword(&keyword, &args, at, alias, cfg, state, depth)?;
    }
    Ok(())
}

/// Where a line is, for errors.
#[derive(Clone, Copy)]
struct Line<'a> {
    origin: &'a Path,
    n: usize,
}

/// One keyword line that applies: sets what it sets in `cfg` (the first value wins), or
/// refuses what kprofctl does not implement.
fn apply_keyword(
    keyword: &str,
    args: &[String],
    at: Line<'_>,
    alias: &str,
    cfg: &mut HostConfig,
    state: &mut BlockState,
    depth: u32,
) -> anyhow::Result<()> {
    let first = args.first().cloned().unwrap_or_default();
    match keyword {
        "hostname" if cfg.hostname.is_none() => cfg.hostname = Some(first),
        "user" if cfg.user.is_none() => cfg.user = Some(first),
        "port" if cfg.port.is_none() => {
            let port = first
                .parse::<u16>()
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "ssh config {} line {}: bad Port `{first}`",
                        at.origin.display(),
                        at.n
                    )
                })?;
            cfg.port = Some(port);
        }
        "identityfile" => cfg.identity_files.push(first),
        "proxyjump" if cfg.proxy_jump.is_none() => cfg.proxy_jump = Some(first),
        "proxycommand" if !first.eq_ignore_ascii_case("none") => anyhow::bail!(
            "ssh config {} line {}: ProxyCommand is not supported by kprofctl (it would \
             change the route to the board); use ProxyJump, or -J",
            at.origin.display(),
            at.n
        ),
        "userknownhostsfile" if cfg.user_known_hosts.is_none() => {
            cfg.user_known_hosts = Some(args.to_vec())
        }
        "globalknownhostsfile" if cfg.global_known_hosts.is_none() => {
            cfg.global_known_hosts = Some(args.to_vec())
        }
        "hostkeyalias" if cfg.host_key_alias.is_none() => cfg.host_key_alias = Some(first),
        "stricthostkeychecking" if !cfg.strict_seen => {
            cfg.strict_seen = true;
            match first.to_ascii_lowercase().as_str() {
                "yes" | "ask" => {}
                "accept-new" => cfg.accept_new = true,
                other => anyhow::bail!(
                    "ssh config {} line {}: StrictHostKeyChecking {other}: kprofctl always \
                     checks host keys (an unknown one is refused unless \
                     --accept-new-host-key or StrictHostKeyChecking accept-new)",
                    at.origin.display(),
                    at.n
                ),
            }
        }
        "include" if depth < 8 => {
            for pattern in args {
                for path in expand_include(pattern, at.origin) {
                    // An Include keeps the state of the block it appears in.
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        anyhow::anyhow!("cannot read ssh config {}: {e}", path.display())
                    })?;
                    apply_text(&text, &path, alias, cfg, state, depth + 1)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// `Keyword value` or `Keyword=value`.
fn split_keyword(line: &str) -> (&str, &str) {
    let end = line
        .find(|c: char| c.is_whitespace() || c == '=')
        .unwrap_or(line.len());
    let keyword = &line[..end];
    let rest = line[end..].trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
    (keyword, rest)
}

/// The one way a line's arguments fail to split: a `"` with no closing one.
#[derive(Debug)]
struct UnterminatedQuote;

impl std::fmt::Display for UnterminatedQuote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("unterminated quote")
    }
}

/// Whitespace-separated arguments, `"double quoted"` ones may hold spaces.
fn split_args(rest: &str) -> Result<Vec<String>, UnterminatedQuote> {
    let mut args = Vec::new();
    let mut chars = rest.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        let Some(&c) = chars.peek() else { break };
        if c == '#' {
            break;
        }
        let mut arg = String::new();
        if c == '"' {
            chars.next();
            loop {
                match chars.next() {
                    Some('"') => break,
                    Some(c) => arg.push(c),
                    None => return Err(UnterminatedQuote),
                }
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                arg.push(c);
                chars.next();
            }
        }
        args.push(arg);
    }
    Ok(args)
}

/// Whether `keyword` on a line that applies would change `cfg`: the first value of a
/// keyword wins, so one already set cannot be changed any more (`IdentityFile` accumulates;
/// `ProxyCommand` and `StrictHostKeyChecking` may be refusals).
fn would_set(cfg: &HostConfig, keyword: &str) -> bool {
    match keyword {
        "hostname" => cfg.hostname.is_none(),
        "user" => cfg.user.is_none(),
        "port" => cfg.port.is_none(),
        "proxyjump" => cfg.proxy_jump.is_none(),
        "userknownhostsfile" => cfg.user_known_hosts.is_none(),
        "globalknownhostsfile" => cfg.global_known_hosts.is_none(),
        "hostkeyalias" => cfg.host_key_alias.is_none(),
        "stricthostkeychecking" => !cfg.strict_seen,
        _ => true,
    }
}

/// The state a `Match` line puts the following lines in. Criteria are ANDed, as OpenSSH does;
/// `host` is the name connected to (`HostName` if set by then), `originalhost` the alias.
fn match_state(args: &[String], alias: &str, cfg: &HostConfig, line: usize) -> BlockState {
    let mut applies = true;
    let mut i = 0;
    while i < args.len() {
        let criterion = args[i].to_ascii_lowercase();
        let (negated, name) = match criterion.strip_prefix('!') {
            Some(c) => (true, c.to_string()),
            None => (false, criterion.clone()),
        };
        if name == "all" {
            i += 1;
            continue;
        }
        let Some(value) = args.get(i + 1) else {
            return BlockState::Undecided {
                line,
                criterion: name,
            };
        };
        let patterns: Vec<String> = value.split(',').map(str::to_owned).collect();
        let subject = match name.as_str() {
            "host" => cfg.hostname.clone().unwrap_or_else(|| alias.to_string()),
            "originalhost" => alias.to_string(),
            "localuser" => local_user(),
            _ => {
                return BlockState::Undecided {
                    line,
                    criterion: format!("{name} {value}"),
                }
            }
        };
        if host_matches(&patterns, &subject) == negated {
            applies = false;
        }
        i += 2;
    }
    if applies {
        BlockState::Applies
    } else {
        BlockState::Skipped
    }
}

/// OpenSSH `Host` matching: any positive pattern matches and no negated one does.
fn host_matches(patterns: &[String], alias: &str) -> bool {
    let mut matched = false;
    for p in patterns {
        if let Some(neg) = p.strip_prefix('!') {
            if glob_match(neg, alias) {
                return false;
            }
        } else if glob_match(p, alias) {
            matched = true;
        }
    }
    matched
}

/// `*` and `?` wildcards, ASCII case-insensitive as host names are.
pub fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.to_ascii_lowercase().chars().collect();
    let t: Vec<char> = text.to_ascii_lowercase().chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Files named by an `Include` argument: relative paths are under `~/.ssh`, and a `*`/`?` in
/// the last component is matched against that directory's entries (sorted, as OpenSSH does).
fn expand_include(pattern: &str, origin: &Path) -> Vec<PathBuf> {
    let expanded = expand_tilde(pattern);
    let path = if expanded.is_absolute() {
        expanded
    } else {
        let base = home_dir()
            .map(|h| h.join(".ssh"))
            .or_else(|| origin.parent().map(Path::to_path_buf))
            .unwrap_or_default();
        base.join(expanded)
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    if !name.contains(['*', '?']) {
        return if path.is_file() { vec![path] } else { vec![] };
    }
    let Some(dir) = path.parent() else {
        return vec![];
    };
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| glob_match(&name, &e.file_name().to_string_lossy()))
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// The user's home directory from `$HOME` (what OpenSSH uses too when it is set).
pub fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
}

/// `~/x` to `$HOME/x`.
pub fn expand_tilde(path: &str) -> PathBuf {
    match (path.strip_prefix("~/"), home_dir()) {
        (Some(rest), Some(home)) => home.join(rest),
        _ if path == "~" => home_dir().unwrap_or_else(|| PathBuf::from(path)),
        _ => PathBuf::from(path),
    }
}

/// Expands the `%` tokens OpenSSH allows in `IdentityFile`: `%d` home, `%h` host name, `%r`
/// remote user, `%u` local user, `%p` port, `%%`.
pub fn expand_tokens(value: &str, host: &str, user: &str, port: u16) -> String {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str(&home_dir().unwrap_or_default().to_string_lossy()),
            Some('h') => out.push_str(host),
            Some('r') => out.push_str(user),
            Some('u') => out.push_str(&local_user()),
            Some('p') => out.push_str(&port.to_string()),
            Some('%') => out.push('%'),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The local login name, as OpenSSH's default remote user.
pub fn local_user() -> String {
    std::env::var("USER")
        .or_else(|_| std::env::var("LOGNAME"))
        .unwrap_or_else(|_| "root".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 36, item 6: the trust and route keywords are read, and those kprofctl does not
    /// implement are errors naming the line (before: silently dropped).
    #[test]
    fn lookup_trust_keywords_and_refusals() {
        let origin = Path::new("/c");
        let cfg = lookup_str(
            "Host b\n  UserKnownHostsFile ~/kh /x/kh2\n  GlobalKnownHostsFile none\n  \
             HostKeyAlias board-a\n  StrictHostKeyChecking accept-new\n",
            origin,
            "b",
        )
        .unwrap();
        assert_eq!(
            cfg.user_known_hosts,
            Some(vec!["~/kh".into(), "/x/kh2".into()])
        );
        assert_eq!(cfg.global_known_hosts, Some(vec!["none".into()]));
        assert_eq!(cfg.host_key_alias.as_deref(), Some("board-a"));
        assert!(cfg.accept_new);
        let err = |text: &str| lookup_str(text, origin, "b").unwrap_err().to_string();
        let e = err("Host b\n  ProxyCommand nc %h %p\n");
        assert!(
            e.contains("/c line 2: ProxyCommand is not supported"),
            "{e}"
        );
        let e = err("Host *\n  StrictHostKeyChecking no\n");
        assert!(e.contains("line 2: StrictHostKeyChecking no"), "{e}");
        let e = err("Match exec \"true\"\n  HostName evil\n");
        assert!(
            e.contains("`Match exec true` (line 1) decides whether this hostname"),
            "{e}"
        );
        assert!(lookup_str("Host b\n  ProxyCommand none\n", origin, "b").is_ok());
        // Unrelated settings under an undecidable Match are skipped, as before.
        let cfg = lookup_str(
            "Match exec \"true\"\n  ServerAliveInterval 5\nHost b\n  User u\n",
            origin,
            "b",
        )
        .unwrap();
        assert_eq!(cfg.user.as_deref(), Some("u"));
        // Match host/originalhost are evaluated.
        let text = "Match originalhost b\n  Port 2022\nMatch host other\n  User x\n";
        let cfg = lookup_str(text, origin, "b").unwrap();
        assert_eq!((cfg.port, cfg.user), (Some(2022), None));
    }

    const CONFIG: &str = "\
# boards
Host board imx8 !imx8-old
    HostName 10.0.0.7
    User root
    Port 2222
    IdentityFile ~/.ssh/board_key
Host imx8*
    HostName=imx8.lab
    IdentityFile \"/keys/with space\"
Host imx8-old
    ProxyJump none
Host *
    User fallback
    ProxyJump gw,lab
    Port 22
    IdentityFile ~/.ssh/id_ed25519
Match exec \"false\"
    User nobody
";

    /// An alias gets the first value of each keyword and every IdentityFile in order.
    #[test]
    fn lookup_config_alias_first_value_wins() {
        let cfg = lookup_str(CONFIG, Path::new("cfg"), "board").unwrap();
        assert_eq!(cfg.hostname.as_deref(), Some("10.0.0.7"));
        assert_eq!(cfg.user.as_deref(), Some("root"));
        assert_eq!(cfg.port, Some(2222));
        assert_eq!(
            cfg.identity_files,
            vec!["~/.ssh/board_key", "~/.ssh/id_ed25519"]
        );
    }

    /// A negated pattern excludes a host that a wildcard in another block still matches.
    #[test]
    fn lookup_config_negated_pattern_skips_block() {
        let cfg = lookup_str(CONFIG, Path::new("cfg"), "imx8-old").unwrap();
        assert_eq!(cfg.hostname.as_deref(), Some("imx8.lab"));
        assert_eq!(cfg.user.as_deref(), Some("fallback"));
        assert_eq!(cfg.port, Some(22));
        assert_eq!(cfg.proxy_jump.as_deref(), Some("none"));
        assert_eq!(
            cfg.identity_files,
            vec!["/keys/with space", "~/.ssh/id_ed25519"]
        );
    }

    /// A host no block names gets only the `Host *` settings; the `Match exec` after it can
    /// no longer change its `User` (the first value wins), so it needs no evaluating.
    #[test]
    fn lookup_config_unknown_host_gets_wildcard() {
        let cfg = lookup_str(CONFIG, Path::new("cfg"), "other").unwrap();
        assert_eq!(cfg.hostname, None);
        assert_eq!(cfg.user.as_deref(), Some("fallback"));
        assert_eq!(cfg.proxy_jump.as_deref(), Some("gw,lab"));
    }

    /// A bad Port is an error naming the file and line.
    #[test]
    fn lookup_config_bad_port_names_line() {
        let err = lookup_str("Host x\n  Port none\n", Path::new("/c"), "x").unwrap_err();
        assert_eq!(err.to_string(), "ssh config /c line 2: bad Port `none`");
    }

    /// `%` tokens in IdentityFile expand like OpenSSH's.
    #[test]
    fn expand_identity_tokens_host_user_port() {
        assert_eq!(
            expand_tokens("/k/%r@%h:%p%%", "b", "root", 22),
            "/k/root@b:22%"
        );
    }

    /// Wildcards match across characters and `?` one character only.
    #[test]
    fn glob_pattern_wildcards() {
        assert!(glob_match("imx8*", "imx8-old"));
        assert!(glob_match("*", ""));
        assert!(glob_match("b?ard", "BOARD"));
        assert!(!glob_match("b?ard", "bard"));
        assert!(glob_match("*.lab", "x.y.lab"));
        assert!(!glob_match("*.lab", "x.lab2"));
    }
}

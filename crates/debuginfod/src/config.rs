//! `DEBUGINFOD_*` environment variables, read as elfutils' client reads them.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// elfutils' `default_timeout` (seconds).
const DEFAULT_TIMEOUT_S: u64 = 90;
/// Parallel downloads when the caller does not say.
const DEFAULT_JOBS: usize = 8;

/// The largest file downloaded when `DEBUGINFOD_MAXSIZE` is not set: 4 GiB, over the
/// debuginfo of a distribution kernel with every module (about 1 GiB) or a browser (about
/// 3 GiB), and under what a server that streams without end could fill a disk with.
/// elfutils sets no limit by default; `DEBUGINFOD_MAXSIZE=0` gives that back.
pub const DEFAULT_MAX_SIZE: u64 = 4 << 30;

/// How the client talks to the servers and where it caches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Server base URLs in order (`DEBUGINFOD_URLS`, space separated), trailing `/` trimmed,
    /// duplicates dropped as elfutils drops them.
    pub urls: Vec<String>,
    /// The client cache: `$DEBUGINFOD_CACHE_PATH`, else `~/.debuginfod_client_cache` when that
    /// exists (elfutils' old location, still preferred by it), else
    /// `${XDG_CACHE_HOME:-~/.cache}/debuginfod_client`.
    pub cache_dir: PathBuf,
    /// `DEBUGINFOD_TIMEOUT` (seconds, default 90): the limit for connecting and for any wait
    /// without data. Zero means none, as in elfutils.
    pub timeout: Duration,
    /// `DEBUGINFOD_MAXSIZE` (bytes; default 4 GiB, 0 for no limit): larger
    /// files are refused (sent to the server as `X-DEBUGINFOD-MAXSIZE`, checked against
    /// `Content-Length` and while receiving).
    pub max_size: Option<u64>,
    /// `DEBUGINFOD_MAXTIME` (seconds): the longest one download may take.
    pub max_time: Option<Duration>,
    /// Parallel downloads of [`Client::fetch_all`](crate::Client::fetch_all) (default 8).
    pub jobs: usize,
}

/// A `DEBUGINFOD_*` variable whose value kprof cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable, e.g. `DEBUGINFOD_TIMEOUT`.
    pub variable: &'static str,
    /// Its value as found.
    pub value: String,
    /// What is wrong and what it should be.
    pub reason: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}={:?}: {}; fix or unset {}",
            self.variable, self.value, self.reason, self.variable
        )
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// The configuration from the environment; `Ok(None)` when `DEBUGINFOD_URLS` is unset or
    /// empty (debuginfod is off, as for elfutils' client).
    pub fn from_env() -> Result<Option<Config>, ConfigError> {
        Config::from_vars(|name| std::env::var_os(name))
    }

    /// [`Config::from_env`] over any variable source (tests, or a caller's own overrides).
    pub fn from_vars(
        var: impl Fn(&str) -> Option<OsString>,
    ) -> Result<Option<Config>, ConfigError> {
        let text = |name: &'static str| -> Result<Option<String>, ConfigError> {
            match var(name) {
                None => Ok(None),
                Some(v) => v.into_string().map(Some).map_err(|v| ConfigError {
                    variable: name,
                    value: v.to_string_lossy().into_owned(),
                    reason: "not valid UTF-8".to_string(),
                }),
            }
        };
        let Some(urls) = text("DEBUGINFOD_URLS")? else {
            return Ok(None);
        };
        let urls = parse_urls(&urls)?;
        if urls.is_empty() {
            return Ok(None);
        }
        let seconds = |name| -> Result<Option<u64>, ConfigError> {
            text(name)?.map(|v| parse_number(name, &v)).transpose()
        };
        let timeout = seconds("DEBUGINFOD_TIMEOUT")?.unwrap_or(DEFAULT_TIMEOUT_S);
        Ok(Some(Config {
            urls,
            cache_dir: cache_dir(&var),
            timeout: Duration::from_secs(timeout),
            max_size: match seconds("DEBUGINFOD_MAXSIZE")? {
                None => Some(DEFAULT_MAX_SIZE),
                Some(0) => None,
                Some(n) => Some(n),
            },
            max_time: seconds("DEBUGINFOD_MAXTIME")?
                .filter(|&n| n > 0)
                .map(Duration::from_secs),
            jobs: DEFAULT_JOBS,
        }))
    }
}

/// The URLs of `DEBUGINFOD_URLS`: split on white space, trailing `/` trimmed, duplicates
/// dropped, each an `http://` or `https://` URL with a host.
fn parse_urls(value: &str) -> Result<Vec<String>, ConfigError> {
    let mut urls: Vec<String> = Vec::new();
    for word in value.split_ascii_whitespace() {
        let url = word.trim_end_matches('/');
        let lower = word.to_ascii_lowercase();
        let rest = lower
            .strip_prefix("http://")
            .or_else(|| lower.strip_prefix("https://"))
            .map(|rest| rest.trim_end_matches('/'));
        let reason = match rest {
            None if lower.starts_with("file://") => Some(
                "file:// servers are not supported by kprof; serve the directory with \
                 `debuginfod -F DIR` and use its http:// URL",
            ),
            None => Some("each URL must start with http:// or https://"),
            Some("") => Some("a URL without a host"),
            Some(_) => None,
        };
        if let Some(reason) = reason {
            return Err(ConfigError {
                variable: "DEBUGINFOD_URLS",
                value: value.to_string(),
                reason: format!("{word}: {reason}"),
            });
        }
        if !urls.iter().any(|u| u == url) {
            urls.push(url.to_string());
        }
    }
    Ok(urls)
}

fn parse_number(variable: &'static str, value: &str) -> Result<u64, ConfigError> {
    value.trim().parse::<u64>().map_err(|_| ConfigError {
        variable,
        value: value.to_string(),
        reason: "not a whole non-negative number".to_string(),
    })
}

/// elfutils' choice of cache directory (`debuginfod_query_server` in 0.188, `make_cache_path`
/// later): `$DEBUGINFOD_CACHE_PATH`; else `$HOME/.debuginfod_client_cache` if it exists; else
/// `$XDG_CACHE_HOME/debuginfod_client`; else `$HOME/.cache/debuginfod_client` (`/` for an unset
/// `HOME`). Empty values count as unset.
fn cache_dir(var: &impl Fn(&str) -> Option<OsString>) -> PathBuf {
    let set = |name| var(name).filter(|v: &OsString| !v.is_empty());
    if let Some(path) = set("DEBUGINFOD_CACHE_PATH") {
        return PathBuf::from(path);
    }
    let home = PathBuf::from(set("HOME").unwrap_or_else(|| "/".into()));
    let legacy = home.join(".debuginfod_client_cache");
    if legacy.exists() {
        return legacy;
    }
    match set("XDG_CACHE_HOME") {
        Some(xdg) => PathBuf::from(xdg).join("debuginfod_client"),
        None => home.join(".cache").join("debuginfod_client"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn config(vars: &[(&str, &str)]) -> Result<Option<Config>, ConfigError> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_vars(|name| map.get(name).cloned())
    }

    /// Unset, empty and blank `DEBUGINFOD_URLS` all mean off.
    #[test]
    fn from_vars_urls_unset_or_empty_none() {
        assert_eq!(config(&[]).unwrap(), None);
        assert_eq!(config(&[("DEBUGINFOD_URLS", "")]).unwrap(), None);
        assert_eq!(config(&[("DEBUGINFOD_URLS", "  ")]).unwrap(), None);
    }

    /// URLs split on spaces, trailing slashes trimmed, duplicates dropped; defaults as elfutils.
    #[test]
    fn from_vars_urls_split_trimmed_defaults() {
        let c = config(&[
            (
                "DEBUGINFOD_URLS",
                "http://a:8002/ https://b.example/x  http://a:8002",
            ),
            ("HOME", "/home/u"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.urls, ["http://a:8002", "https://b.example/x"]);
        assert_eq!(c.timeout, Duration::from_secs(90));
        assert_eq!(
            (c.max_size, c.max_time, c.jobs),
            (Some(DEFAULT_MAX_SIZE), None, 8)
        );
        assert_eq!(
            c.cache_dir,
            PathBuf::from("/home/u/.cache/debuginfod_client")
        );
    }

    /// `DEBUGINFOD_CACHE_PATH` wins over `XDG_CACHE_HOME`, which wins over `HOME`.
    #[test]
    fn from_vars_cache_dir_precedence() {
        let urls = ("DEBUGINFOD_URLS", "http://s");
        let c = |v: &[(&str, &str)]| config(v).unwrap().unwrap().cache_dir;
        assert_eq!(
            c(&[
                urls,
                ("XDG_CACHE_HOME", "/x"),
                ("HOME", "/nonexistent-home")
            ]),
            PathBuf::from("/x/debuginfod_client")
        );
        assert_eq!(
            c(&[
                urls,
                ("DEBUGINFOD_CACHE_PATH", "/c"),
                ("XDG_CACHE_HOME", "/x")
            ]),
            PathBuf::from("/c")
        );
    }

    /// Limits parse as numbers; 0 means no limit for size and time.
    #[test]
    fn from_vars_limits_parsed() {
        let c = config(&[
            ("DEBUGINFOD_URLS", "http://s"),
            ("DEBUGINFOD_TIMEOUT", "5"),
            ("DEBUGINFOD_MAXSIZE", "1000"),
            ("DEBUGINFOD_MAXTIME", "0"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(c.timeout, Duration::from_secs(5));
        assert_eq!((c.max_size, c.max_time), (Some(1000), None));
    }

    /// A malformed value names the variable and the value.
    #[test]
    fn from_vars_malformed_value_named() {
        let e = config(&[
            ("DEBUGINFOD_URLS", "http://s"),
            ("DEBUGINFOD_TIMEOUT", "10s"),
        ])
        .unwrap_err();
        assert_eq!(
            (e.variable, e.value.as_str()),
            ("DEBUGINFOD_TIMEOUT", "10s")
        );
        assert!(e.to_string().contains("DEBUGINFOD_TIMEOUT=\"10s\""), "{e}");
        let e = config(&[("DEBUGINFOD_URLS", "http://s ftp://t")]).unwrap_err();
        assert_eq!(e.variable, "DEBUGINFOD_URLS");
        assert!(e.reason.contains("ftp://t"), "{e}");
        let e = config(&[("DEBUGINFOD_URLS", "http://")]).unwrap_err();
        assert!(e.reason.contains("without a host"), "{e}");
    }
}

//! One GET of one artifact from one server, streamed into a cache temp file.

use std::io::{self, Read, Write};
use std::time::{Duration, Instant, SystemTime};

use ureq::http::StatusCode;
use ureq::tls::TlsConfig;
use ureq::Agent;

use crate::Config;

/// What one server said about one file.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The body is in the sink; `mtime` from `Last-Modified`.
    Got { mtime: Option<SystemTime> },
    /// 404 (or another 4xx but 406): this server does not have it.
    Missing,
    /// Over `DEBUGINFOD_MAXSIZE` (406 from the server, `Content-Length`, or bytes received).
    TooLarge { size: Option<u64> },
    /// Over `DEBUGINFOD_MAXTIME`.
    TooSlow,
    /// The server cannot be used: refused, timeout, TLS, 5xx, dropped connection.
    Failed(String),
    /// Writing the temp file failed.
    Local(io::Error),
}

/// The agent every request of one client shares (connection reuse across threads).
pub(crate) fn agent(config: &Config) -> Agent {
    let limit = (!config.timeout.is_zero()).then_some(config.timeout);
    Agent::config_builder()
        .http_status_as_error(false)
        .user_agent(concat!("kprof-debuginfod/", env!("CARGO_PKG_VERSION")))
        .tls_config(
            TlsConfig::builder()
                .root_certs(crate::tls::root_certs())
                .build(),
        )
        .timeout_resolve(limit)
        .timeout_connect(limit)
        .timeout_per_read(limit)
        .timeout_per_write(limit)
        .timeout_global(config.max_time)
        // Redirects are followed by `get`, which refuses one that leaves https.
        .max_redirects(0)
        .build()
        .into()
}

/// GETs `url` into `sink`; `progress(done, total)` after each chunk.
pub(crate) fn get(
    agent: &Agent,
    url: &str,
    config: &Config,
    sink: &mut impl Write,
    progress: &dyn Fn(u64, Option<u64>),
) -> Outcome {
    let mut current = url.to_string();
    let mut hops = 0;
    let mut response = loop {
        let mut request = agent.get(&current);
        if let Some(max) = config.max_size {
            request = request.header("X-DEBUGINFOD-MAXSIZE", max.to_string());
        }
        let response = match request.call() {
            Ok(response) => response,
            Err(e) => return transport_failure(e, config),
        };
        if !response.status().is_redirection() || response.status() == StatusCode::NOT_MODIFIED {
            break response;
        }
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let Some(next) = location.and_then(|l| redirect_target(&current, &l)) else {
            return Outcome::Failed(format!(
                "HTTP {} from {current} without a usable Location",
                response.status()
            ));
        };
        if let Err(why) = redirect_allowed(&current, &next) {
            return Outcome::Failed(why);
        }
        hops += 1;
        if hops > MAX_REDIRECTS {
            return Outcome::Failed(format!("more than {MAX_REDIRECTS} redirects from {url}"));
        }
        current = next;
    };
    let status = response.status();
    // elfutils' server answers 406 to a file over the client's X-DEBUGINFOD-MAXSIZE.
    if status == StatusCode::NOT_ACCEPTABLE && config.max_size.is_some() {
        return Outcome::TooLarge { size: None };
    }
    if status.is_client_error() {
        return Outcome::Missing;
    }
    if status != StatusCode::OK {
        return Outcome::Failed(format!("HTTP {status}"));
    }
    let mtime = response
        .headers()
        .get("last-modified")
        .and_then(|v| v.to_str().ok())
        .and_then(parse_http_date);
    let total = response.body().content_length();
    if let (Some(size), Some(max)) = (total, config.max_size) {
        if size > max {
            return Outcome::TooLarge { size: Some(size) };
        }
    }
    let reader = response.body_mut().with_config().limit(u64::MAX).reader();
    match copy(reader, sink, config, total, progress) {
        Ok(()) => Outcome::Got { mtime },
        Err(outcome) => outcome,
    }
}

/// Redirects followed for one file, as curl's default of elfutils' client allows a few.
const MAX_REDIRECTS: u32 = 8;

/// The absolute URL a `Location` names, relative to `base`.
fn redirect_target(base: &str, location: &str) -> Option<String> {
    let lower = location.to_ascii_lowercase();
    if lower.starts_with("http://") || lower.starts_with("https://") {
        return Some(location.to_string());
    }
    let (scheme, rest) = base.split_once("://")?;
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    if let Some(net) = location.strip_prefix("//") {
        return Some(format!("{scheme}://{net}"));
    }
    if location.starts_with('/') {
        return Some(format!("{scheme}://{authority}{location}"));
    }
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    let dir = if dir.is_empty() { "/" } else { dir };
    Some(format!("{scheme}://{authority}{dir}{location}"))
}

/// A redirect keeps the scheme, or goes from http to https; never from https to http (a
/// server reached over TLS must not hand the download to an unauthenticated one).
fn redirect_allowed(from: &str, to: &str) -> Result<(), String> {
    let scheme = |u: &str| u.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
    match (scheme(from).as_deref(), scheme(to).as_deref()) {
        (Some(a), Some(b)) if a == b => Ok(()),
        (Some("http"), Some("https")) => Ok(()),
        _ => Err(format!(
            "{from} redirected to {to}: refused (a redirect may not leave https)"
        )),
    }
}

fn copy(
    mut reader: impl Read,
    sink: &mut impl Write,
    config: &Config,
    total: Option<u64>,
    progress: &dyn Fn(u64, Option<u64>),
) -> Result<(), Outcome> {
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let mut done = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(transport_failure(ureq::Error::from(e), config)),
        };
        done += n as u64;
        if let Some(max) = config.max_size.filter(|&max| done > max) {
            return Err(Outcome::TooLarge {
                size: Some(total.unwrap_or(done).max(max + 1)),
            });
        }
        if config.max_time.is_some_and(|max| start.elapsed() > max) {
            return Err(Outcome::TooSlow);
        }
        sink.write_all(&buf[..n]).map_err(Outcome::Local)?;
        progress(done, total);
    }
}

fn transport_failure(error: ureq::Error, config: &Config) -> Outcome {
    match error {
        ureq::Error::Timeout(ureq::Timeout::Global) if config.max_time.is_some() => {
            Outcome::TooSlow
        }
        ureq::Error::Timeout(which) => Outcome::Failed(format!(
            "timed out ({which}) after {}s (DEBUGINFOD_TIMEOUT)",
            config.timeout.as_secs()
        )),
        other => Outcome::Failed(other.to_string()),
    }
}

/// An IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), the form HTTP servers send.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let fields: Vec<&str> = text.split_ascii_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = fields[..] else {
        return None;
    };
    let day: u64 = day.parse().ok()?;
    let month = MONTHS.iter().position(|m| *m == month)? as u64 + 1;
    let year: u64 = year.parse().ok()?;
    let mut hms = time.split(':').map(|f| f.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if year < 1970 || !(1..=31).contains(&day) || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let seconds = days_from_civil(year, month, day) * 86400 + h * 3600 + m * 60 + s;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(seconds))
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
fn days_from_civil(year: u64, month: u64, day: u64) -> u64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HTTP dates become the instant they name; other forms are ignored.
    #[test]
    fn redirect_target_forms_and_downgrade_refused() {
        let base = "https://d.example.org/buildid/ab/debuginfo";
        assert_eq!(
            redirect_target(base, "/x/y").as_deref(),
            Some("https://d.example.org/x/y")
        );
        assert_eq!(
            redirect_target(base, "other").as_deref(),
            Some("https://d.example.org/buildid/ab/other")
        );
        assert_eq!(
            redirect_target(base, "//m.example.org/z").as_deref(),
            Some("https://m.example.org/z")
        );
        assert!(redirect_allowed(base, "https://m.example.org/z").is_ok());
        assert!(redirect_allowed("http://a/x", "https://b/y").is_ok());
        let why = redirect_allowed(base, "http://evil.example.org/z").unwrap_err();
        assert!(why.contains("may not leave https"), "{why}");
    }

    #[test]
    fn parse_http_date_imf_fixdate() {
        let t = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT").unwrap();
        assert_eq!(
            t.duration_since(SystemTime::UNIX_EPOCH).unwrap().as_secs(),
            784111777
        );
        let t = parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT").unwrap();
        assert_eq!(t, SystemTime::UNIX_EPOCH);
        assert_eq!(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT"), None);
        assert_eq!(parse_http_date("yesterday"), None);
    }
}

//! Event names as `perf record -e` spells them, turned into perf_event_attr type/config.

use crate::sys::{
    PERF_TYPE_HARDWARE, PERF_TYPE_HW_CACHE, PERF_TYPE_RAW, PERF_TYPE_SOFTWARE, PERF_TYPE_TRACEPOINT,
};
use crate::Error;

/// One `-e` entry after parsing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// Exactly what the user wrote, for messages and the manifest.
    pub requested: String,
    /// perf's canonical name, written to EVENT_DESC (`cpu-clock`, `r03`, `L1-dcache-load-misses`).
    pub name: String,
    /// `perf_event_attr.type` (`PERF_TYPE_HARDWARE`, `PERF_TYPE_RAW`, ...).
    pub attr_type: u32,
    /// `perf_event_attr.config`: which event of that type. For a tracepoint
    /// (`PERF_TYPE_TRACEPOINT`) 0 until `record` looks its id up in tracefs.
    pub config: u64,
    /// `/period=N/`: a fixed period for this event only.
    pub period: Option<u64>,
    /// `/freq=N/`: a frequency for this event only.
    pub freq: Option<u64>,
    /// `:k` without `:u`: count kernel mode only.
    pub exclude_user: bool,
    /// `:u` without `:k`: count user mode only.
    pub exclude_kernel: bool,
}

const HARDWARE: &[(&str, u64)] = &[
    ("cycles", 0),
    ("cpu-cycles", 0),
    ("instructions", 1),
    ("cache-references", 2),
    ("cache-misses", 3),
    ("branch-instructions", 4),
    ("branches", 4),
    ("branch-misses", 5),
    ("bus-cycles", 6),
    ("stalled-cycles-frontend", 7),
    ("stalled-cycles-backend", 8),
    ("ref-cycles", 9),
];

const SOFTWARE: &[(&str, u64)] = &[
    ("cpu-clock", 0),
    ("task-clock", 1),
    ("page-faults", 2),
    ("faults", 2),
    ("context-switches", 3),
    ("cs", 3),
    ("cpu-migrations", 4),
    ("migrations", 4),
    ("minor-faults", 5),
    ("major-faults", 6),
    ("alignment-faults", 7),
    ("emulation-faults", 8),
];

const CACHES: &[(&str, u64)] = &[
    ("L1-dcache", 0),
    ("L1-icache", 1),
    ("LLC", 2),
    ("dTLB", 3),
    ("iTLB", 4),
    ("branch", 5),
    ("node", 6),
];

/// (suffix, op, result) for hardware cache events, as perf names them.
const CACHE_OPS: &[(&str, u64, u64)] = &[
    ("loads", 0, 0),
    ("load-misses", 0, 1),
    ("stores", 1, 0),
    ("store-misses", 1, 1),
    ("prefetches", 2, 0),
    ("prefetch-misses", 2, 1),
];

/// The names `info` probes and the help lists.
pub fn generic_names() -> impl Iterator<Item = &'static str> {
    [
        "cycles",
        "instructions",
        "cache-references",
        "cache-misses",
        "branch-misses",
    ]
    .into_iter()
    .chain(["cpu-clock", "task-clock", "page-faults", "context-switches"])
}

/// Parses a comma-separated `-e` argument. Commas inside `/.../` belong to the event.
pub fn parse_list(arg: &str) -> Result<Vec<EventSpec>, Error> {
    let mut out = Vec::new();
    let mut depth_slash = false;
    let mut start = 0;
    for (i, c) in arg.char_indices() {
        match c {
            '/' => depth_slash = !depth_slash,
            ',' if !depth_slash => {
                out.push(parse(&arg[start..i])?);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(parse(&arg[start..])?);
    Ok(out)
}

/// Parses one event: `NAME[/term=value,.../][:MODIFIERS]`.
pub fn parse(spec: &str) -> Result<EventSpec, Error> {
    let bad = |why: &str| Error::Usage(format!("unknown event `{spec}`: {why}"));
    if spec.is_empty() {
        return Err(bad("empty event name"));
    }
    let (base, terms, modifiers) = split_spec(spec).ok_or_else(|| bad("malformed"))?;
    if let Some(tp) = tracepoint(spec, base, terms, modifiers) {
        return Ok(tp);
    }
    let (attr_type, config, name) = lookup(base).ok_or_else(|| {
        bad("not a known software, hardware, cache, raw (rNNNN) or tracepoint (SUBSYS:EVENT) event")
    })?;
    let mut ev = EventSpec {
        requested: spec.to_string(),
        name,
        attr_type,
        config,
        period: None,
        freq: None,
        exclude_user: false,
        exclude_kernel: false,
    };
    for term in terms.split(',').filter(|t| !t.is_empty()) {
        let (k, v) = term
            .split_once('=')
            .ok_or_else(|| bad(&format!("term `{term}` needs a value")))?;
        let n: u64 = parse_number(v).ok_or_else(|| bad(&format!("`{v}` is not a number")))?;
        if n == 0 {
            return Err(bad(&format!("{k} must be greater than 0")));
        }
        match k {
            "period" => ev.period = Some(n),
            "freq" => ev.freq = Some(n),
            _ => return Err(bad(&format!("unsupported term `{k}` (period, freq)"))),
        }
    }
    if ev.period.is_some() && ev.freq.is_some() {
        return Err(bad("period and freq are exclusive"));
    }
    if !modifiers.is_empty() {
        let (mut u, mut k) = (false, false);
        for m in modifiers.chars() {
            match m {
                'u' => u = true,
                'k' => k = true,
                _ => return Err(bad(&format!("unsupported modifier `{m}` (u, k)"))),
            }
        }
        ev.exclude_kernel = u && !k;
        ev.exclude_user = k && !u;
    }
    Ok(ev)
}

/// `SUBSYS:EVENT` of a tracepoint (perf's syntax, e.g. `sched:sched_process_exec`), when
/// `base` is no other kind of event: recorded at every hit (period 1) with its raw fields;
/// its id is looked up in tracefs when recording starts.
fn tracepoint(spec: &str, base: &str, terms: &str, event: &str) -> Option<EventSpec> {
    let name_like = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
            && s != "."
            && s != ".."
    };
    if !terms.is_empty() || !name_like(base) || !name_like(event) || lookup(base).is_some() {
        return None;
    }
    Some(EventSpec {
        requested: spec.to_string(),
        name: spec.to_string(),
        attr_type: PERF_TYPE_TRACEPOINT,
        config: 0,
        period: Some(1),
        freq: None,
        exclude_user: false,
        exclude_kernel: false,
    })
}

/// Splits `name/terms/:mods` into its three parts.
fn split_spec(spec: &str) -> Option<(&str, &str, &str)> {
    if let Some(slash) = spec.find('/') {
        let base = &spec[..slash];
        let rest = &spec[slash + 1..];
        let end = rest.find('/')?;
        let terms = &rest[..end];
        let after = &rest[end + 1..];
        let mods = match after {
            "" => "",
            _ => after.strip_prefix(':')?,
        };
        Some((base, terms, mods))
    } else if let Some((base, mods)) = spec.split_once(':') {
        Some((base, "", mods))
    } else {
        Some((spec, "", ""))
    }
}

fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

fn lookup(name: &str) -> Option<(u32, u64, String)> {
    if let Some(&(_, c)) = HARDWARE.iter().find(|(n, _)| *n == name) {
        return Some((PERF_TYPE_HARDWARE, c, name.to_string()));
    }
    if let Some(&(_, c)) = SOFTWARE.iter().find(|(n, _)| *n == name) {
        return Some((PERF_TYPE_SOFTWARE, c, name.to_string()));
    }
    if let Some(hex) = name.strip_prefix('r') {
        if !hex.is_empty() && hex.len() <= 16 && hex.chars().all(|c| c.is_ascii_hexdigit()) {
            let c = u64::from_str_radix(hex, 16).ok()?;
            return Some((PERF_TYPE_RAW, c, name.to_string()));
        }
    }
    for &(cache, id) in CACHES {
        let Some(rest) = name.strip_prefix(cache).and_then(|r| r.strip_prefix('-')) else {
            continue;
        };
        if let Some(&(_, op, res)) = CACHE_OPS.iter().find(|(s, _, _)| *s == rest) {
            return Some((
                PERF_TYPE_HW_CACHE,
                id | (op << 8) | (res << 16),
                name.to_string(),
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Software, hardware, cache and raw names map to perf's type/config pairs.
    #[test]
    fn parse_event_names_known_kinds() {
        let e = parse("cpu-clock").unwrap();
        assert_eq!((e.attr_type, e.config), (PERF_TYPE_SOFTWARE, 0));
        let e = parse("cycles").unwrap();
        assert_eq!((e.attr_type, e.config), (PERF_TYPE_HARDWARE, 0));
        let e = parse("L1-dcache-load-misses").unwrap();
        assert_eq!((e.attr_type, e.config), (PERF_TYPE_HW_CACHE, 0x10000));
        let e = parse("LLC-store-misses").unwrap();
        assert_eq!((e.attr_type, e.config), (PERF_TYPE_HW_CACHE, 0x10102));
        let e = parse("r03").unwrap();
        assert_eq!(
            (e.attr_type, e.config, e.name.as_str()),
            (PERF_TYPE_RAW, 3, "r03")
        );
        let e = parse("alignment-faults").unwrap();
        assert_eq!((e.attr_type, e.config), (PERF_TYPE_SOFTWARE, 7));
        let e = parse("emulation-faults").unwrap();
        assert_eq!((e.attr_type, e.config), (PERF_TYPE_SOFTWARE, 8));
    }

    /// A raw event number and a hardware event with a period term parse as the board's
    /// tests spell them.
    #[test]
    fn parse_event_raw_and_period_term() {
        let e = parse("r11").unwrap();
        assert_eq!(
            (e.attr_type, e.config, e.name.as_str()),
            (PERF_TYPE_RAW, 0x11, "r11")
        );
        let e = parse("cycles/period=100000/").unwrap();
        assert_eq!(
            (e.attr_type, e.config, e.name.as_str(), e.period),
            (PERF_TYPE_HARDWARE, 0, "cycles", Some(100_000))
        );
        assert_eq!(e.requested, "cycles/period=100000/");
    }

    /// Per-event period terms and u/k modifiers are honoured; commas inside terms do not split.
    #[test]
    fn parse_event_list_with_terms() {
        let v = parse_list("r03/period=10000/,r04/period=20000/:u,cpu-clock").unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[0].period, Some(10000));
        assert_eq!(v[1].period, Some(20000));
        assert!(v[1].exclude_kernel && !v[1].exclude_user);
        assert_eq!(v[2].name, "cpu-clock");
    }

    /// `SUBSYS:EVENT` is a tracepoint at period 1 (id looked up later); a known event with
    /// a modifier is not.
    #[test]
    fn parse_event_tracepoint_names() {
        let e = parse("sched:sched_process_exec").unwrap();
        assert_eq!(
            (e.attr_type, e.config, e.name.as_str(), e.period),
            (PERF_TYPE_TRACEPOINT, 0, "sched:sched_process_exec", Some(1))
        );
        let e = parse("mychardrv:cache_traverse").unwrap();
        assert_eq!(e.attr_type, PERF_TYPE_TRACEPOINT);
        let v = parse_list("cycles:u,sched:sched_switch").unwrap();
        assert_eq!(v[0].attr_type, PERF_TYPE_HARDWARE);
        assert_eq!(v[1].attr_type, PERF_TYPE_TRACEPOINT);
        for bad in ["sched:", "sched:a/b", "sched:..", "cycles:x"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// Unknown names, bad terms and zero periods are errors naming the event.
    #[test]
    fn parse_event_invalid_rejected() {
        for bad in [
            "bogus",
            "r",
            "rXYZ",
            "cpu-clock/period=0/",
            "r03/period=x/",
            "r03/foo=1/",
            "",
        ] {
            let err = parse_list(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("`{bad}`")), "{err}");
        }
    }
}

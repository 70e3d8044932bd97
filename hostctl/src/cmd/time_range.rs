//! `--time START..END`: a window of seconds since capture start, parsed to exact
//! nanoseconds (decimal digits, never through a float, so `0.1` is 100000000 ns); either
//! bound may instead be a mark's text (the first mark with exactly that text), and `--time
//! NAME` is the first span NAME (a `B|PID|NAME` mark to the thread's matching end). Names are
//! resolved against the loaded profile's marks ([`TimeSpec::resolve`]).

use anyhow::Context;
use kprof_symbols::profile::{Mark, MarkerKind, Profile, SpanEdge};

/// A half-open window `[start, end)` in ns since capture start; `None` is an open bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeRange {
    /// First nanosecond in the window.
    pub start: Option<u64>,
    /// First nanosecond after the window.
    pub end: Option<u64>,
}

/// One bound of `--time` as typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// Left open.
    Open,
    /// Seconds since capture start, in ns.
    Ns(u64),
    /// The time of the first mark with exactly this text.
    Mark(String),
}

/// `--time` as typed: two bounds, or the name of a span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TimeSpec {
    /// `START..END`.
    Range(Bound, Bound),
    /// `NAME`: the first span NAME.
    Span(String),
}

impl std::str::FromStr for TimeSpec {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        let Some((a, b)) = s.split_once("..") else {
            if s.trim().is_empty() {
                anyhow::bail!("--time needs START..END (seconds since capture start, e.g. 1.5..3, ..2, 2..; or marks' texts) or a span's name");
            }
            return Ok(Self::Span(s.to_string()));
        };
        let bound = |v: &str| -> anyhow::Result<Bound> {
            let t = v.trim();
            if t.is_empty() {
                return Ok(Bound::Open);
            }
            // Digits and a dot are seconds; anything else names a mark.
            if t.bytes().all(|c| c.is_ascii_digit() || c == b'.') {
                return seconds_to_ns(t).map(Bound::Ns);
            }
            Ok(Bound::Mark(v.to_string()))
        };
        let (start, end) = (bound(a)?, bound(b)?);
        if let (Bound::Ns(a), Bound::Ns(b)) = (&start, &end) {
            if b <= a {
                anyhow::bail!("{s:?} is empty: END must be after START");
            }
        }
        Ok(Self::Range(start, end))
    }
}

impl TimeSpec {
    /// The window in ns, with mark texts and span names looked up in `p`'s marks.
    pub fn resolve(&self, p: &Profile) -> anyhow::Result<TimeRange> {
        let marks = || {
            p.meta.markers.iter().filter_map(|m| match &m.kind {
                MarkerKind::Mark(k) => Some((m.time, k)),
                _ => None,
            })
        };
        let range = match self {
            Self::Span(name) => {
                let (start, end) = kprof_symbols::marks::first_span(p, name).ok_or_else(|| {
                    anyhow::anyhow!(
                        "--time {name:?} is not START..END (seconds since capture start, e.g. 1.5..3, ..2, 2..; or marks' texts) and no span (begin and end marks of one thread) is called {name:?}; {}",
                        available(marks().map(|(_, k)| k), true)
                    )
                })?;
                TimeRange {
                    start: Some(start),
                    end: Some(end),
                }
            }
            Self::Range(a, b) => {
                let at = |b: &Bound| -> anyhow::Result<Option<u64>> {
                    match b {
                        Bound::Open => Ok(None),
                        Bound::Ns(ns) => Ok(Some(*ns)),
                        Bound::Mark(text) => marks()
                            .find(|(_, k)| k.text == *text)
                            .map(|(t, _)| Some(t))
                            .with_context(|| {
                                format!(
                                    "--time: {text:?} is not a number of seconds and no mark has the text {text:?}; {}",
                                    available(marks().map(|(_, k)| k), false)
                                )
                            }),
                    }
                };
                TimeRange {
                    start: at(a)?,
                    end: at(b)?,
                }
            }
        };
        if let (Some(a), Some(b)) = (range.start, range.end) {
            if b <= a {
                anyhow::bail!(
                    "--time: the window {:.6} s..{:.6} s is empty: its end is not after its start",
                    a as f64 / 1e9,
                    b as f64 / 1e9
                );
            }
        }
        Ok(range)
    }
}

/// Up to 10 mark texts (and span names) the capture has, for an error.
fn available<'a>(marks: impl Iterator<Item = &'a Mark>, spans: bool) -> String {
    let mut names: Vec<String> = Vec::new();
    for m in marks {
        let n = match (&m.edge, spans) {
            (Some(SpanEdge::Begin(n)), true) => format!("{n:?}"),
            (_, true) => continue,
            (_, false) => format!("{:?}", m.text),
        };
        if !names.contains(&n) {
            names.push(n);
        }
        // One more than shown says there are more; a capture may have millions of marks.
        if names.len() > 10 {
            break;
        }
    }
    if names.is_empty() {
        let what = if spans { "spans" } else { "marks" };
        return format!("the capture has no {what} (record with --markers, or -e SUBSYS:EVENT for a tracepoint)");
    }
    let more = if names.len() > 10 { ", ..." } else { "" };
    names.truncate(10);
    let what = if spans { "spans" } else { "mark texts" };
    format!("its {what}: {}{more}", names.join(", "))
}

/// Decimal seconds (`2`, `0.25`, `1.000000001`) to nanoseconds.
fn seconds_to_ns(v: &str) -> anyhow::Result<u64> {
    let bad = || anyhow::anyhow!("{v:?} is not a number of seconds (digits, at most 9 decimals)");
    let (whole, frac) = v.split_once('.').unwrap_or((v, ""));
    let digits = |d: &str| d.bytes().all(|c| c.is_ascii_digit());
    if (whole.is_empty() && frac.is_empty()) || !digits(whole) || !digits(frac) || frac.len() > 9 {
        return Err(bad());
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| bad())?
    };
    let frac_ns: u64 = format!("{frac:0<9}").parse().map_err(|_| bad())?;
    whole
        .checked_mul(1_000_000_000)
        .and_then(|ns| ns.checked_add(frac_ns))
        .ok_or_else(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain seconds resolve without marks.
    fn parse(s: &str) -> anyhow::Result<TimeRange> {
        s.parse::<TimeSpec>()?.resolve(&Profile::default())
    }

    /// Bounds are exact nanoseconds and either may be left open.
    #[test]
    fn parse_time_range_bounds_exact_ns() {
        let r = parse("0.1..1.000000001").unwrap();
        assert_eq!((r.start, r.end), (Some(100_000_000), Some(1_000_000_001)));
        assert_eq!(parse("..2").unwrap().start, None);
        assert_eq!(parse("..2").unwrap().end, Some(2_000_000_000));
        assert_eq!(parse("3..").unwrap().end, None);
        assert_eq!(
            parse("..").unwrap(),
            TimeRange {
                start: None,
                end: None
            }
        );
        assert_eq!(parse(".5..").unwrap().start, Some(500_000_000));
    }

    /// Malformed or empty windows are refused with the text at fault.
    #[test]
    fn parse_time_range_malformed_refused() {
        for (bad, needle) in [
            ("1.5", "is not START..END"),
            ("a..2", "\"a\" is not a number of seconds"),
            ("-1..2", "\"-1\" is not a number"),
            ("1.2.3..", "\"1.2.3\" is not a number"),
            ("1.0000000001..", "at most 9 decimals"),
            ("2..1", "END must be after START"),
            ("1..1", "is empty"),
            ("99999999999999999999..", "is not a number"),
        ] {
            let e = format!("{:#}", parse(bad).unwrap_err());
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    fn with_marks(marks: &[(u64, i32, &str)]) -> Profile {
        let mut p = Profile::default();
        p.meta.markers = marks
            .iter()
            .map(|(time, tid, text)| kprof_symbols::profile::Marker {
                time: *time,
                kind: MarkerKind::Mark(Mark {
                    event: "ftrace:print".into(),
                    pid: 1,
                    tid: *tid,
                    cpu: 0,
                    text: text.to_string(),
                    fields: Vec::new(),
                    edge: match text.split('|').collect::<Vec<_>>()[..] {
                        ["B", _, n] => Some(SpanEdge::Begin(n.into())),
                        ["E", _, n] => Some(SpanEdge::End(Some(n.into()))),
                        ["E", ..] => Some(SpanEdge::End(None)),
                        _ => None,
                    },
                }),
            })
            .collect();
        p
    }

    /// Bounds naming marks take the first mark with that exact text; seconds mix with them.
    #[test]
    fn resolve_time_marks_first_exact_text() {
        let p = with_marks(&[
            (10, 1, "go"),
            (20, 1, "stop"),
            (30, 1, "go"),
            (40, 1, "stop now"),
        ]);
        let r = |s: &str| s.parse::<TimeSpec>().unwrap().resolve(&p).unwrap();
        assert_eq!(
            r("go..stop"),
            TimeRange {
                start: Some(10),
                end: Some(20)
            }
        );
        assert_eq!(
            r("go..stop now"),
            TimeRange {
                start: Some(10),
                end: Some(40)
            }
        );
        assert_eq!(
            r("..go"),
            TimeRange {
                start: None,
                end: Some(10)
            }
        );
        assert_eq!(
            r("go..0.000001"),
            TimeRange {
                start: Some(10),
                end: Some(1000)
            }
        );
        let e = format!(
            "{:#}",
            "stop..go"
                .parse::<TimeSpec>()
                .unwrap()
                .resolve(&p)
                .unwrap_err()
        );
        assert!(e.contains("is empty"), "{e}");
    }

    /// An unknown name lists 10 texts and says there are more, in the capture's order.
    #[test]
    fn resolve_time_unknown_lists_ten_texts() {
        let texts: Vec<String> = (0..25).map(|i| format!("m{i}")).collect();
        let marks: Vec<(u64, i32, &str)> = texts
            .iter()
            .enumerate()
            .map(|(i, t)| (i as u64, 1, t.as_str()))
            .collect();
        let p = with_marks(&marks);
        let e = format!(
            "{:#}",
            "x..".parse::<TimeSpec>().unwrap().resolve(&p).unwrap_err()
        );
        assert!(e.ends_with("its mark texts: \"m0\", \"m1\", \"m2\", \"m3\", \"m4\", \"m5\", \"m6\", \"m7\", \"m8\", \"m9\", ..."), "{e}");
    }

    /// `--time NAME` is the first span NAME of one thread, nested spans and a bare `E`
    /// closing the innermost; a name that is no span lists the span names there are.
    #[test]
    fn resolve_time_span_name_same_thread() {
        let p = with_marks(&[
            (5, 2, "B|1|phase_a"),
            (10, 1, "B|1|phase_a"),
            (12, 1, "B|1|inner"),
            (15, 1, "E|1"),
            (20, 2, "B|1|phase_b"),
            (25, 1, "E|1|phase_a"),
            (30, 2, "E|1|phase_a"),
        ]);
        let r = |s: &str| s.parse::<TimeSpec>().unwrap().resolve(&p);
        assert_eq!(
            r("inner").unwrap(),
            TimeRange {
                start: Some(12),
                end: Some(15)
            }
        );
        // Thread 2's phase_a began first, though thread 1's closed first.
        assert_eq!(
            r("phase_a").unwrap(),
            TimeRange {
                start: Some(5),
                end: Some(30)
            }
        );
        let e = format!("{:#}", r("phase_c").unwrap_err());
        assert!(
            e.contains("no span (begin and end marks of one thread) is called \"phase_c\"")
                && e.contains("\"phase_a\", \"inner\", \"phase_b\""),
            "{e}"
        );
        let e = format!("{:#}", r("nothing..E|1").unwrap_err());
        assert!(
            e.contains("no mark has the text \"nothing\"") && e.contains("\"B|1|phase_a\""),
            "{e}"
        );
        let none = format!(
            "{:#}",
            "x.."
                .parse::<TimeSpec>()
                .unwrap()
                .resolve(&Profile::default())
                .unwrap_err()
        );
        assert!(none.contains("the capture has no marks"), "{none}");
    }
}

//! The events of a capture: their names and periods from the perf.data header (and the
//! manifest), the `dummy` events dropped at the end, and the warnings about events that
//! produced no or too few samples or were throttled.

use super::records::RecordsError;
use super::State;
use crate::capture::Capture;
use crate::profile::Event;
use kprof_capture::build_id::hex;

/// The name of event `i`: the manifest's, else EVENT_DESC's, else its type's as perf
/// spells it.
fn event_name(attr: &linux_perf_data::AttributeDescription, i: usize, capture: &Capture) -> String {
    if let Some(m) = &capture.manifest {
        if let Some(e) = m.events.get(i) {
            return e.name.clone();
        }
    }
    // An EVENT_DESC entry may carry an empty name: the type names it then.
    if let Some(n) = attr.name.as_ref().filter(|n| !n.is_empty()) {
        return n.clone();
    }
    use linux_perf_data::linux_perf_event_reader::PerfEventType;
    match attr.attr.type_ {
        PerfEventType::Software(c) => format!("{c:?}")
            .to_lowercase()
            .replace("cpuclock", "cpu-clock")
            .replace("taskclock", "task-clock"),
        PerfEventType::Hardware(h, _) => format!("{h:?}").to_lowercase(),
        // perf names it by its format: read_header does when the file has one.
        PerfEventType::Tracepoint(id) => format!("tracepoint:{id}"),
        other => format!("{other:?}"),
    }
}

impl State<'_> {
    /// Host facts, events and their names from the header and feature sections.
    pub(super) fn read_header(
        &mut self,
        perf_file: &linux_perf_data::PerfFile,
        capture: &Capture,
    ) -> Result<(), RecordsError> {
        if let Ok(ids) = perf_file.build_ids() {
            for (k, v) in ids {
                self.images.header_build_ids.insert(k, hex(&v.build_id));
            }
        }
        if self.profile.meta.hostname.is_none() {
            self.profile.meta.hostname = perf_file.hostname().ok().flatten().map(str::to_string);
            self.profile.meta.os_release =
                perf_file.os_release().ok().flatten().map(str::to_string);
            self.profile.meta.arch = perf_file.arch().ok().flatten().map(str::to_string);
            self.profile.meta.command = perf_file.cmdline().ok().flatten().map(|v| v.join(" "));
        }
        let attrs = perf_file.event_attributes();
        if attrs.is_empty() {
            return Err(RecordsError::NoEvents);
        }
        use linux_perf_data::linux_perf_event_reader::{SampleFormat, SamplingPolicy};
        self.profile.meta.call_chains = Some(attrs.iter().any(|a| {
            a.attr
                .sample_format
                .intersects(SampleFormat::CALLCHAIN | SampleFormat::STACK_USER)
        }));
        for (i, a) in attrs.iter().enumerate() {
            let has_period = a.attr.sample_format.contains(SampleFormat::PERIOD);
            let fixed = match a.attr.sampling_policy {
                SamplingPolicy::Period(n) => Some(n.get()),
                _ => None,
            };
            self.profile.events.push(Event {
                name: event_name(a, i, capture),
                total_samples: 0,
                total_period: 0,
                period_known: has_period || fixed.is_some(),
            });
            self.fixed_periods.push(fixed);
            self.throttles.push(0);
        }
        let tracing = self.tracing_data(perf_file);
        use linux_perf_data::linux_perf_event_reader::PerfEventType;
        let tracepoints = || {
            attrs
                .iter()
                .enumerate()
                .filter_map(|(i, a)| match a.attr.type_ {
                    PerfEventType::Tracepoint(id) => Some((i, id)),
                    _ => None,
                })
        };
        for (i, id) in tracepoints() {
            // A file without event names (no EVENT_DESC) names it as perf does, by its format.
            let unnamed = self.profile.events[i].name == format!("tracepoint:{id}");
            if let Some(f) = tracing
                .as_ref()
                .and_then(|t| t.format_by_id(id))
                .filter(|_| unnamed)
            {
                self.profile.events[i].name = f.event_name();
            }
        }
        self.probe_events(capture, tracing.as_ref());
        for (i, id) in tracepoints() {
            if self.probes.is_probe(i) {
                continue;
            }
            if self.profile.events[i].name == super::off_cpu::SWITCH_EVENT
                && self.switches.event.is_none()
            {
                self.off_cpu_event(i, tracing.as_ref());
            } else {
                self.mark_event(i, id, tracing.as_ref());
            }
        }
        Ok(())
    }

    /// The capture's HEADER_TRACING_DATA, when it has one; a warning when it is unreadable.
    fn tracing_data(
        &mut self,
        perf_file: &linux_perf_data::PerfFile,
    ) -> Option<crate::tracing_data::TracingData> {
        let data = perf_file.feature_section_data(linux_perf_data::Feature::TRACING_DATA)?;
        crate::tracing_data::parse(data)
            .map_err(|e| {
                self.profile.warnings.push(format!(
                    "perf.data's tracing data (the formats of its tracepoints) is unreadable: {e}"
                ))
            })
            .ok()
    }

    /// Drops the events that are not sampling events: the ones without samples that perf
    /// adds for side-band records only, and the mark events (their samples are marks on the
    /// timeline); gives the samples, stacks and off-CPU events the new indices.
    pub(super) fn drop_dummy_events(&mut self) {
        // perf adds a `dummy` event to system-wide recordings for side-band records only.
        let dummy = |e: &Event| e.total_samples == 0 && e.name.starts_with("dummy");
        let sampling = |i: &usize| !self.marks.is_mark(*i) && !self.probes.is_probe(*i);
        let mut keep: Vec<usize> = (0..self.profile.events.len())
            .filter(|i| sampling(i) && !dummy(&self.profile.events[*i]))
            .collect();
        // A capture of dummy events only keeps them: it shows as one without samples.
        if keep.is_empty() {
            keep = (0..self.profile.events.len()).filter(sampling).collect();
        }
        if keep.len() < self.profile.events.len() {
            self.profile.events = keep
                .iter()
                .map(|i| self.profile.events[*i].clone())
                .collect();
            for s in &mut self.profile.stacks {
                s.counts = keep.iter().map(|i| s.counts[*i]).collect();
                s.periods = keep.iter().map(|i| s.periods[*i]).collect();
            }
            // Dropped events have no samples: every sample's event has a new index.
            let mut new_index = vec![0u32; keep.last().map_or(0, |l| l + 1)];
            for (new, old) in keep.iter().enumerate() {
                new_index[*old] = new as u32;
            }
            for s in &mut self.profile.samples {
                s.event = new_index.get(s.event as usize).copied().unwrap_or(0);
            }
            if let Some(off) = &mut self.profile.off_cpu {
                off.sleeping = new_index[off.sleeping] as usize;
                off.uninterruptible = new_index[off.uninterruptible] as usize;
            }
        }
    }

    /// Events that produced no sample, and events the kernel throttled: from the manifest's
    /// counter totals and throttle counts when there is one, else from the file itself.
    pub(super) fn event_warnings(&mut self, capture: &Capture) {
        let manifest = capture.manifest.as_ref();
        let max_rate = manifest
            .and_then(|m| m.sysctl.get("perf_event_max_sample_rate"))
            .map(|v| format!(" (kernel.perf_event_max_sample_rate = {})", v.trim()))
            .unwrap_or_default();
        for (i, e) in self.profile.events.iter().enumerate() {
            let recorded = manifest.and_then(|m| m.events.get(i));
            // perf's side-band `dummy` event never samples, by design.
            // Off-CPU events count blocked spans, not samples: a capture may have no D at all.
            if e.name.starts_with("off-cpu:") || self.marks.is_mark(i) || self.probes.is_probe(i) {
                continue;
            }
            if e.total_samples == 0 && !e.name.starts_with("dummy") {
                let why = match recorded.and_then(|r| r.count.map(|c| (c, r))) {
                    // PERF_TYPE_SOFTWARE: no PMU involved, nothing of the kind happened.
                    Some((0, r)) if r.attr_type == 1 => {
                        "it counted nothing (counter total 0; nothing of its kind happened while sampling)".to_string()
                    }
                    Some((0, _)) => "it counted nothing (counter total 0; the PMU accepted it but it never fired: check the event number for this CPU)".to_string(),
                    Some((c, r)) => match r.sample_period {
                        Some(p) if c < p => format!("it counted {c}, below its period {p}"),
                        _ => format!("its counter read {c} but no sample reached the file"),
                    },
                    None if manifest.is_some() => "the agent did not read its counter".into(),
                    None => "no sample of it is in the file".into(),
                };
                self.profile
                    .warnings
                    .push(format!("event {} has no samples: {why}", e.name));
            }
            let throttled = match recorded {
                Some(r) => r.throttled,
                None => self.throttles.get(i).copied().unwrap_or(0),
            };
            // The samples' periods add up to what the counters counted, unless samples were
            // lost with their counts: then every count and ratio of this event is an
            // underestimate, by this much.
            if let Some(c) = recorded.and_then(|r| r.count).filter(|&c| c > 0) {
                if e.total_samples >= 100 && (e.total_period as f64) < 0.9 * c as f64 {
                    let fixed = self.fixed_periods.get(i).copied().flatten().is_some();
                    let cause = coverage_cause(throttled, fixed, self.profile.meta.lost_samples);
                    self.profile.warnings.push(format!(
                        "event {}: its samples account for {:.0}% of the {c} events its counters counted ({cause}): its counts, and ratios with it, are low by that much",
                        e.name,
                        100.0 * e.total_period as f64 / c as f64
                    ));
                }
            }
            if throttled > 0 {
                self.profile.warnings.push(format!(
                    "event {} was throttled {throttled} times by the kernel{max_rate}: samples are missing where it was busiest; lower -F or raise /proc/sys/kernel/perf_event_max_sample_rate",
                    e.name
                ));
            }
        }
    }
}

/// What dropped the counts an event's samples do not cover, as far as the capture tells:
/// throttling, lost samples, frequency mode's period changes; else unknown.
fn coverage_cause(throttled: u64, fixed_period: bool, lost_samples: u64) -> String {
    let mut causes = Vec::new();
    if throttled > 0 {
        causes.push(format!("the kernel throttled it {throttled} times"));
    }
    if lost_samples > 0 {
        causes.push(format!("{lost_samples} samples were lost"));
    }
    if !fixed_period {
        causes.push("frequency mode changed its period between samples".to_string());
    }
    if causes.is_empty() {
        return "cause unknown: its period was fixed, it was not throttled and no sample was lost"
            .into();
    }
    format!("{} dropped the rest", causes.join("; "))
}

#[cfg(test)]
mod tests {
    use crate::capture::Capture;
    use crate::profile::{MarkerKind, Profile};
    use crate::synthetic_perf_data::{attr, file, u64s, ATTR_SIZE};
    use crate::views::{self, Filter};
    use crate::{Options, Symbolizer};
    use std::path::Path;

    const SAMPLE_IP: u64 = 1;
    const SAMPLE_TID: u64 = 2;
    const SAMPLE_PERIOD: u64 = 256;
    const SAMPLE_IDENTIFIER: u64 = 1 << 16;

    /// A software event of a synthetic perf.data: its config, fixed period or frequency,
    /// whether samples carry PERIOD, and `(ip, period)` of each sample.
    struct Ev {
        config: u64,
        period: Option<u64>,
        with_period: bool,
        samples: Vec<(u64, u64)>,
        /// PERF_RECORD_THROTTLE records of the event, after its samples.
        throttles: usize,
    }

    /// A PERFILE2 of `evs`, one attribute each (id = index + 1), samples identified by
    /// PERF_SAMPLE_IDENTIFIER, all on pid/tid 7. The ids are in an EVENT_DESC feature
    /// section, where readers take them from (as perf and the agent write them).
    fn perf_data(evs: &[Ev]) -> Vec<u8> {
        let mut attrs = Vec::new();
        let mut data = Vec::new();
        for (i, e) in evs.iter().enumerate() {
            let id = i as u64 + 1;
            let sample_type = SAMPLE_IDENTIFIER
                | SAMPLE_IP
                | SAMPLE_TID
                | if e.with_period { SAMPLE_PERIOD } else { 0 };
            let freq = if e.period.is_none() { 1u64 << 10 } else { 0 };
            // PERF_TYPE_SOFTWARE; sample_id_all
            let a = attr(
                1,
                e.config,
                e.period.unwrap_or(1000),
                sample_type,
                freq | 1 << 18,
            );
            attrs.push((a, id));
            event_records(e, id, &mut data);
        }
        file(&attrs, &data)
    }

    /// The samples, then the PERF_RECORD_THROTTLE records, of event `e` with id `id`.
    fn event_records(e: &Ev, id: u64, data: &mut Vec<u8>) {
        for (ip, period) in &e.samples {
            let mut body = Vec::new();
            u64s(&mut body, id);
            u64s(&mut body, *ip);
            body.extend_from_slice(&7i32.to_le_bytes());
            body.extend_from_slice(&7i32.to_le_bytes());
            if e.with_period {
                u64s(&mut body, *period);
            }
            data.extend_from_slice(&9u32.to_le_bytes()); // PERF_RECORD_SAMPLE
            data.extend_from_slice(&2u16.to_le_bytes()); // user
            data.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
            data.extend_from_slice(&body);
        }
        for n in 0..e.throttles {
            // time, id, stream_id, then the sample_id trailer: pid/tid and IDENTIFIER.
            let mut body = Vec::new();
            u64s(&mut body, 1000 + n as u64);
            u64s(&mut body, id);
            u64s(&mut body, id);
            body.extend_from_slice(&7i32.to_le_bytes());
            body.extend_from_slice(&7i32.to_le_bytes());
            u64s(&mut body, id);
            data.extend_from_slice(&5u32.to_le_bytes()); // PERF_RECORD_THROTTLE
            data.extend_from_slice(&0u16.to_le_bytes());
            data.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
            data.extend_from_slice(&body);
        }
    }

    fn symbolize(evs: &[Ev]) -> Profile {
        symbolize_with(evs, None)
    }

    /// [`symbolize`] with a manifest, as an archive of the agent has.
    fn symbolize_with(evs: &[Ev], manifest: Option<kprof_capture::Manifest>) -> Profile {
        let mut c = Capture::from_bytes(Path::new("t.data"), &perf_data(evs)).unwrap();
        c.manifest = manifest;
        let mut s = Symbolizer::new(Options::default(), &mut |_| {}).unwrap();
        s.symbolize(&c, &mut |_| {}).unwrap()
    }

    /// `n` samples at each of two addresses, each standing for `period` events.
    fn at_two_ips(n: usize, period: u64) -> Vec<(u64, u64)> {
        (0..2 * n)
            .map(|i| (0x1000 + (i % 2) as u64 * 0x100, period))
            .collect()
    }

    /// Two events with equal sample counts per function, one sampled every 1000 events and
    /// one every 10: their count ratio is 100, not the sample ratio 1.
    #[test]
    fn ratio_perfdata_periods_not_samples() {
        let p = symbolize(&[
            Ev {
                config: 0,
                period: Some(1000),
                with_period: true,
                samples: at_two_ips(5, 1000),
                throttles: 0,
            },
            Ev {
                config: 1,
                period: Some(10),
                with_period: true,
                samples: at_two_ips(5, 10),
                throttles: 0,
            },
        ]);
        assert_eq!(views::ratio_unknown(&p, 0, 1), None);
        let rows = views::functions(&p, &Filter::default());
        assert!(!rows.is_empty());
        for r in &rows {
            assert_eq!(r.samples[0], r.samples[1], "equal samples per function");
            assert_eq!(views::ratio(r.periods[0], r.periods[1]), Some(100.0));
        }
        assert_eq!(
            (p.events[0].total_period, p.events[1].total_period),
            (10_000, 100)
        );
    }

    /// Without PERIOD in the samples a fixed period still weighs them; frequency mode
    /// without PERIOD makes the ratio unknown rather than a ratio of samples.
    #[test]
    fn ratio_perfdata_without_period_fixed_or_unknown() {
        let fixed = symbolize(&[
            Ev {
                config: 0,
                period: Some(500),
                with_period: false,
                samples: at_two_ips(3, 0),
                throttles: 0,
            },
            Ev {
                config: 1,
                period: Some(5),
                with_period: false,
                samples: at_two_ips(3, 0),
                throttles: 0,
            },
        ]);
        assert_eq!(views::ratio_unknown(&fixed, 0, 1), None);
        assert_eq!(fixed.events[0].total_period, 3000);
        let by_freq = symbolize(&[
            Ev {
                config: 0,
                period: None,
                with_period: false,
                samples: at_two_ips(3, 0),
                throttles: 0,
            },
            Ev {
                config: 1,
                period: Some(5),
                with_period: true,
                samples: at_two_ips(3, 5),
                throttles: 0,
            },
        ]);
        let why = views::ratio_unknown(&by_freq, 0, 1).expect("unknown");
        assert!(
            why.contains("cpu-clock") && !why.contains("task-clock"),
            "{why}"
        );
    }

    /// An event of a plain perf.data without any sample is named in a warning.
    #[test]
    fn symbolize_perfdata_event_without_samples_warned() {
        let p = symbolize(&[
            Ev {
                config: 0,
                period: Some(1000),
                with_period: true,
                samples: at_two_ips(2, 1000),
                throttles: 0,
            },
            Ev {
                config: 1,
                period: Some(1000),
                with_period: true,
                samples: Vec::new(),
                throttles: 0,
            },
        ]);
        assert!(
            p.warnings
                .iter()
                .any(|w| w.starts_with("event task-clock has no samples")),
            "{:?}",
            p.warnings
        );
        assert!(!p.warnings.iter().any(|w| w.contains("event cpu-clock")));
    }

    /// With a manifest, an event without samples is explained by its counter total (a raw
    /// event at 0 points at the event number) and a throttled one names the sysctl.
    #[test]
    fn symbolize_manifest_zero_count_and_throttle_warned() {
        let ev = |name: &str, t: u32, samples: u64, throttled: u64, count: u64| {
            serde_json::json!({"name": name, "attr_type": t, "attr_config": 3,
                "sample_period": 1000, "samples": samples, "lost": 0,
                "throttled": throttled, "count": count, "no_samples": samples == 0})
        };
        let m = serde_json::json!({
            "schema": kprof_capture::MANIFEST_SCHEMA, "version": 1, "capture_id": "c",
            "agent_version": "t", "uname": {"sysname": "Linux", "nodename": "b",
            "release": "6.1", "version": "#1", "machine": "aarch64"},
            "events": [ev("cycles", 0, 4, 7, 4200), ev("r03", 4, 0, 0, 0), ev("r04", 4, 0, 0, 40)],
            "cpus": [0], "callchain": false, "start_time_ns": 1, "stop_time_ns": 2,
            "stop_reason": "duration", "kernel": {"release": "6.1"}, "modules": [],
            "perf_data": {"file": "perf.data", "size": 0, "sha256": ""},
            "sysctl": {"perf_event_max_sample_rate": "25000\n"}
        });
        let m: kprof_capture::Manifest = serde_json::from_value(m).unwrap();
        let ev = |config, samples| Ev {
            config,
            period: Some(1000),
            with_period: true,
            samples,
            throttles: 0,
        };
        let p = symbolize_with(
            &[
                ev(0, at_two_ips(2, 1000)),
                ev(1, Vec::new()),
                ev(2, Vec::new()),
            ],
            Some(m),
        );
        let has = |needle: &str| {
            assert!(
                p.warnings.iter().any(|w| w.contains(needle)),
                "no {needle:?} in {:?}",
                p.warnings
            )
        };
        has("event r03 has no samples: it counted nothing (counter total 0; the PMU accepted it");
        has("event r04 has no samples: it counted 40, below its period 1000");
        has("event cycles was throttled 7 times by the kernel (kernel.perf_event_max_sample_rate = 25000)");
        assert!(!p
            .warnings
            .iter()
            .any(|w| w.contains("cycles has no samples")));
    }

    /// Two events with 100 samples each at period 1000, and a manifest listing `events`
    /// (their counter totals and throttling).
    fn two_events_at_period_1000(events: Vec<serde_json::Value>) -> Profile {
        let m = serde_json::json!({
            "schema": kprof_capture::MANIFEST_SCHEMA, "version": 1, "capture_id": "c",
            "agent_version": "t", "uname": {"sysname": "Linux", "nodename": "b",
            "release": "6.1", "version": "#1", "machine": "aarch64"},
            "events": events,
            "cpus": [0], "callchain": false, "start_time_ns": 1, "stop_time_ns": 2,
            "stop_reason": "duration", "kernel": {"release": "6.1"}, "modules": [],
            "perf_data": {"file": "perf.data", "size": 0, "sha256": ""}
        });
        let m: kprof_capture::Manifest = serde_json::from_value(m).unwrap();
        let ev = |config| Ev {
            config,
            period: Some(1000),
            with_period: true,
            samples: at_two_ips(100, 1000),
            throttles: 0,
        };
        symbolize_with(&[ev(0), ev(1)], Some(m))
    }

    /// An event whose samples' periods add up to far less than its counter total is flagged
    /// with the share they cover; one that covers its count is not.
    #[test]
    fn symbolize_manifest_samples_cover_half_count_warned() {
        let ev = |name: &str, count: u64| {
            serde_json::json!({"name": name, "attr_type": 4, "attr_config": 17,
                "sample_period": 1000, "samples": 200, "lost": 0,
                "throttled": 0, "count": count, "no_samples": false})
        };
        let p = two_events_at_period_1000(vec![ev("r11", 400_000), ev("cycles", 200_500)]);
        assert!(
            p.warnings
                .iter()
                .any(|w| w
                    .starts_with("event r11: its samples account for 50% of the 400000 events")),
            "{:?}",
            p.warnings
        );
        assert!(!p.warnings.iter().any(|w| w.starts_with("event cycles:")));
    }

    /// The coverage warning names the cause that applies: unknown for a fixed period without
    /// throttling or lost samples (not "throttling or frequency adjustment"), throttling when
    /// the kernel throttled the event.
    #[test]
    fn symbolize_manifest_coverage_warning_names_cause() {
        let ev = |name: &str, throttled: u64| {
            serde_json::json!({"name": name, "attr_type": 4, "attr_config": 17,
                "sample_period": 1000, "samples": 200, "lost": 0,
                "throttled": throttled, "count": 400_000, "no_samples": false})
        };
        let p = two_events_at_period_1000(vec![ev("r11", 0), ev("r12", 5)]);
        let warning = |name: &str| {
            p.warnings
                .iter()
                .find(|w| w.starts_with(&format!("event {name}: its samples account")))
                .unwrap_or_else(|| panic!("no coverage warning for {name}: {:?}", p.warnings))
                .clone()
        };
        let fixed = warning("r11");
        assert!(fixed.contains("cause unknown"), "{fixed}");
        assert!(
            !fixed.contains("throttl") || fixed.contains("not throttled"),
            "{fixed}"
        );
        assert!(!fixed.contains("frequency"), "{fixed}");
        let throttled = warning("r12");
        assert!(
            throttled.contains("the kernel throttled it 5 times"),
            "{throttled}"
        );
        assert!(!throttled.contains("frequency"), "{throttled}");
    }

    /// A plain perf.data's THROTTLE records warn about their event, with the hint.
    #[test]
    fn symbolize_perfdata_throttle_records_warned() {
        let ev = |config, throttles| Ev {
            config,
            period: Some(1000),
            with_period: true,
            samples: at_two_ips(2, 1000),
            throttles,
        };
        let p = symbolize(&[ev(0, 0), ev(1, 3)]);
        let marked: Vec<(u64, &MarkerKind)> =
            p.meta.markers.iter().map(|m| (m.time, &m.kind)).collect();
        let t = MarkerKind::Throttled;
        assert_eq!(
            marked,
            vec![(0, &t), (1, &t), (2, &t)],
            "at their body times"
        );
        let throttled: Vec<&String> = p
            .warnings
            .iter()
            .filter(|w| w.contains("throttled"))
            .collect();
        assert_eq!(throttled.len(), 1, "{:?}", p.warnings);
        assert!(
            throttled[0].starts_with("event task-clock was throttled 3 times by the kernel: ")
                && throttled[0]
                    .contains("lower -F or raise /proc/sys/kernel/perf_event_max_sample_rate"),
            "{}",
            throttled[0]
        );
    }

    /// Samples without PERF_SAMPLE_TIME are all kept, at capture start, with a warning;
    /// each counted sample is in `samples` with its stack, event and period.
    #[test]
    fn symbolize_perfdata_untimed_samples_at_start_warned() {
        let ev = |config, period| Ev {
            config,
            period: Some(period),
            with_period: true,
            samples: at_two_ips(3, period),
            throttles: 0,
        };
        let p = symbolize(&[ev(0, 1000), ev(1, 10)]);
        assert_eq!(p.samples.len(), 12);
        assert!(p.samples.iter().all(|s| s.time == 0 && s.cpu == u32::MAX));
        for (e, period) in [(0u32, 1000u64), (1, 10)] {
            let of: Vec<_> = p.samples.iter().filter(|s| s.event == e).collect();
            assert_eq!(of.len(), 6);
            assert!(of.iter().all(|s| s.period == period));
        }
        let again = views::time_window(&p, None, None);
        assert_eq!(again.stacks, p.stacks, "the samples add up to the stacks");
        assert_eq!((p.meta.start_ns, p.meta.duration_ns), (None, 0));
        assert!(
            p.warnings.iter().any(|w| w.starts_with(
                "the samples carry no timestamps (recorded without PERF_SAMPLE_TIME)"
            )),
            "{:?}",
            p.warnings
        );
    }

    /// With `skip_sample_records` no sample is kept, yet the merged stacks, the totals and
    /// the untimed warning are those of the full profile.
    #[test]
    fn symbolize_perfdata_skip_sample_records_same_stacks() {
        let ev = |config, period| Ev {
            config,
            period: Some(period),
            with_period: true,
            samples: at_two_ips(3, period),
            throttles: 0,
        };
        let data = perf_data(&[ev(0, 1000), ev(1, 10)]);
        let c = Capture::from_bytes(Path::new("t.data"), &data).unwrap();
        let opts = Options {
            skip_sample_records: true,
            ..Options::default()
        };
        let lean = Symbolizer::new(opts, &mut |_| {})
            .unwrap()
            .symbolize(&c, &mut |_| {})
            .unwrap();
        let full = symbolize(&[ev(0, 1000), ev(1, 10)]);
        assert!(lean.samples.is_empty() && full.samples.len() == 12);
        assert_eq!(lean.stacks, full.stacks);
        assert_eq!(lean.events, full.events);
        assert_eq!(
            lean.warnings, full.warnings,
            "the untimed warning counts all 12"
        );
    }

    /// Records damaged before the first sample are an error naming the file, the damage
    /// and that no sample could be read, not an empty profile.
    #[test]
    fn symbolize_perfdata_damaged_before_samples_error() {
        let mut data = perf_data(&[Ev {
            config: 0,
            period: Some(1000),
            with_period: true,
            samples: at_two_ips(2, 1000),
            throttles: 0,
        }]);
        // The first record's size, smaller than its own header.
        let size_at = 104 + ATTR_SIZE + 16 + 6;
        data[size_at..size_at + 2].copy_from_slice(&4u16.to_le_bytes());
        let c = Capture::from_bytes(Path::new("t.data"), &data).unwrap();
        let mut s = Symbolizer::new(Options::default(), &mut |_| {}).unwrap();
        let e = s.symbolize(&c, &mut |_| {}).unwrap_err();
        assert!(matches!(e, crate::Error::BadPerfData { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.starts_with("t.data: bad perf.data: ")
                && text.ends_with(" (no sample could be read)"),
            "{text}"
        );
    }
}

//! kprof's markers (workload start and exit, lost samples, throttling) as one Firefox
//! Profiler marker type, and the profiled system's marks (`trace_marker` lines, spans,
//! tracepoints) as another, shown in the timeline overview, the marker chart and the table.

use fxprof_processed_profile::{
    CategoryHandle, MarkerFieldFlags, MarkerFieldFormat, MarkerLocations, Profile,
    StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
};
use kprof_symbols::profile::MarkerKind;

/// A marker of the capture: its name and the number it carries (lost samples; else 0).
#[derive(Debug, Clone)]
pub struct KprofMarker {
    name: StringHandle,
    samples: f64,
}

impl KprofMarker {
    /// The marker of `kind`, its name interned in `fx`.
    pub fn new(fx: &mut Profile, kind: &MarkerKind) -> Self {
        let (name, samples) = match kind {
            MarkerKind::WorkloadStart => ("workload start", 0),
            MarkerKind::WorkloadExit => ("workload exit", 0),
            MarkerKind::Lost { samples } => ("lost samples", *samples),
            MarkerKind::Throttled => ("throttled", 0),
            // Marks go on their own thread as [`MarkMarker`]s.
            MarkerKind::Mark(mark) => (mark.text.as_str(), 0),
        };
        Self {
            name: fx.intern_string(name),
            samples: samples as f64,
        }
    }
}

impl StaticSchemaMarker for KprofMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "kprof";
    const DESCRIPTION: Option<&'static str> =
        Some("Events of the capture: the profiled command's start and exit, samples the kernel lost, throttling");
    const LOCATIONS: MarkerLocations = MarkerLocations::MARKER_CHART
        .union(MarkerLocations::MARKER_TABLE)
        .union(MarkerLocations::TIMELINE_OVERVIEW);
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name} {marker.data.samples}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[StaticSchemaMarkerField {
        key: "samples",
        label: "Samples lost",
        format: MarkerFieldFormat::Integer,
        flags: MarkerFieldFlags::empty(),
    }];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        // The schema has no string field; the crate asks only for the fields it has.
        self.name
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.samples
    }
}

/// A mark of the profiled system on its thread: a plain `trace_marker` line (named by its
/// text), a span (named by its name, an interval from its begin to its end mark), or a
/// tracepoint (named by the event, its decoded fields as text).
#[derive(Debug, Clone)]
pub struct MarkMarker {
    /// What the chart shows on the marker.
    pub name: StringHandle,
    /// The perf event (`ftrace:print`, `sched:sched_process_exec`).
    pub event: StringHandle,
    /// The mark's text (the line as written, or `field=value ...`).
    pub text: StringHandle,
}

impl StaticSchemaMarker for MarkMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "kprof-mark";
    const DESCRIPTION: Option<&'static str> = Some(
        "Marks of the profiled system: trace_marker lines (kprof_mark), spans between kprof_mark_begin and kprof_mark_end, tracepoints with their fields",
    );
    const LOCATIONS: MarkerLocations = MarkerLocations::MARKER_CHART
        .union(MarkerLocations::MARKER_TABLE)
        .union(MarkerLocations::TIMELINE_OVERVIEW);
    const CHART_LABEL: Option<&'static str> = Some("{marker.name}");
    const TOOLTIP_LABEL: Option<&'static str> = Some("{marker.data.event}: {marker.data.text}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.data.event}: {marker.data.text}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "event",
            label: "Event",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "text",
            label: "Text",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
    ];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        CategoryHandle::OTHER
    }

    fn string_field_value(&self, field_index: u32) -> StringHandle {
        match field_index {
            0 => self.event,
            _ => self.text,
        }
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        // The schema has no number field; the crate asks only for the fields it has.
        0.0
    }
}

//! kprof's markers (workload start and exit, lost samples, throttling) as one Firefox
//! Profiler marker type, shown in the timeline overview, the marker chart and the table.

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

//! `--format pprof`: a gzipped `perftools.profiles.Profile` (pprof's profile.proto), which
//! `go tool pprof`, Pyroscope and Parca read.
//!
//! Mapping of the [`Profile`] (see docs/formats.md):
//! - per event two sample values: the sample count (`count`) and the period (`nanoseconds`
//!   for the software clocks, `events` otherwise). The first event's pair is named
//!   `samples`/`count` and, for `cpu-clock`/`task-clock`, `cpu`/`nanoseconds`, as in a Go CPU
//!   profile; other events are `<event>_samples`/`count` and `<event>`/unit.
//! - one mapping per image with its recorded path and build-id; locations per distinct
//!   inline-expanded address, lines innermost first; one function per symbol with its file.
//! - sample labels `comm` (string), `pid` and `tid` (numbers); warnings become comments.
//!
//! The profile carries resolved names and lines, and every mapping says `has_functions`, so
//! pprof never re-symbolizes an address against a host file of the same name.

use std::collections::HashMap;
use std::io::Write;

use flate2::{write::GzEncoder, Compression};
use kprof_symbols::profile::{Profile, SymbolSource};
use prost::Message;

use crate::{collapsed, Error};

/// Writes the gzipped protobuf.
pub fn write(profile: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    let message = build(profile)?;
    let mut gz = GzEncoder::new(out, Compression::default());
    gz.write_all(&message.encode_to_vec())
        .and_then(|()| gz.finish().map(drop))
        .map_err(Error::writing("writing the pprof profile"))
}

/// The protobuf message of a profile.
pub fn build(profile: &Profile) -> Result<proto::Profile, Error> {
    collapsed::check_event(profile, 0)?;
    let mut b = Builder {
        profile,
        strings: Strings::default(),
        out: proto::Profile::default(),
        locations: HashMap::new(),
        labels: HashMap::new(),
        mappings: HashMap::new(),
        functions: HashMap::new(),
    };
    b.strings.id("");
    b.sample_types();
    b.mappings_in_order();
    for stack in &profile.stacks {
        b.sample(stack);
    }
    for warning in &profile.warnings {
        let id = b.strings.id(warning);
        b.out.comment.push(id);
    }
    let mut out = b.out;
    out.string_table = b.strings.table;
    Ok(out)
}

/// The value types and period of event `event`: `(count type, period type, period unit)`.
fn value_names(profile: &Profile, event: usize) -> (String, String, &'static str) {
    let name = &profile.events[event].name;
    let clock = matches!(name.as_str(), "cpu-clock" | "task-clock");
    // An off-CPU profile (kprof_symbols::off_cpu::merged): periods are blocked ns.
    let unit = if clock || name == "off_cpu_ns" {
        "nanoseconds"
    } else {
        "events"
    };
    if event == 0 {
        let period = if clock {
            "cpu".to_owned()
        } else {
            name.clone()
        };
        ("samples".to_owned(), period, unit)
    } else {
        (format!("{name}_samples"), name.clone(), unit)
    }
}

struct Builder<'a> {
    profile: &'a Profile,
    strings: Strings,
    out: proto::Profile,
    /// Inline-expanded frame run (first and last index into `Profile::frames`, length) to
    /// location id.
    locations: HashMap<(usize, usize, usize), u64>,
    /// Thread index to its sample labels.
    labels: HashMap<usize, Vec<proto::Label>>,
    /// Image index to mapping id.
    mappings: HashMap<usize, u64>,
    /// Function index to function id.
    functions: HashMap<usize, u64>,
}

impl Builder<'_> {
    fn sample_types(&mut self) {
        for (i, event) in self.profile.events.iter().enumerate() {
            let (count, period, unit) = value_names(self.profile, i);
            let count = proto::ValueType {
                r#type: self.strings.id(&count),
                unit: self.strings.id("count"),
            };
            let period = proto::ValueType {
                r#type: self.strings.id(&period),
                unit: self.strings.id(unit),
            };
            if i == 0 {
                self.out.period_type = Some(period);
                self.out.period = mean_period(event.total_period, event.total_samples);
                self.out.default_sample_type = period.r#type;
            }
            self.out.sample_type.extend([count, period]);
        }
    }

    /// Creates the mappings before any location, so that mapping 1, which pprof takes for
    /// "the main binary", is the user image with the most samples of the first event.
    fn mappings_in_order(&mut self) {
        let profile = self.profile;
        let counts = crate::html::model::image_counts(profile);
        let mut used = vec![false; profile.images.len()];
        for stack in profile
            .stacks
            .iter()
            .filter(|s| s.counts.iter().any(|&c| c > 0))
        {
            for frame in stack.frames.iter().filter_map(|&f| profile.frames.get(f)) {
                if let Some(f) = profile.functions.get(frame.function) {
                    if let Some(slot) = used.get_mut(f.image) {
                        *slot = true;
                    }
                }
            }
        }
        let mut order: Vec<usize> = (0..profile.images.len()).filter(|&i| used[i]).collect();
        order.sort_by_key(|&i| {
            let first = counts[i].first().copied().unwrap_or(0);
            (profile.images[i].kernel, std::cmp::Reverse(first), i)
        });
        for image in order {
            self.mapping(image, None);
        }
    }

    fn sample(&mut self, stack: &kprof_symbols::profile::Stack) {
        if stack.counts.iter().all(|&c| c == 0) {
            return;
        }
        let mut location_id = Vec::new();
        let mut start = 0;
        for (i, &frame) in stack.frames.iter().enumerate() {
            // An inlined frame belongs to the location of the next, outer frame.
            let inlined = self.profile.frames.get(frame).is_some_and(|f| f.inlined);
            if !inlined {
                location_id.extend(self.location(&stack.frames[start..=i]));
                start = i + 1;
            }
        }
        if start < stack.frames.len() {
            location_id.extend(self.location(&stack.frames[start..]));
        }
        let mut value = Vec::with_capacity(self.profile.events.len() * 2);
        for (i, event) in self.profile.events.iter().enumerate() {
            let count = stack.counts.get(i).copied().unwrap_or(0);
            let period = u128::from(count) * u128::from(event.total_period)
                / u128::from(event.total_samples.max(1));
            value.push(i64::try_from(count).unwrap_or(i64::MAX));
            value.push(i64::try_from(period).unwrap_or(i64::MAX));
        }
        let label = self.labels(stack.thread);
        self.out.sample.push(proto::Sample {
            location_id,
            value,
            label,
        });
    }

    /// The labels of samples of thread `thread`: `comm`, `pid`, `tid`.
    fn labels(&mut self, thread: usize) -> Vec<proto::Label> {
        if let Some(labels) = self.labels.get(&thread) {
            return labels.clone();
        }
        let mut labels = Vec::new();
        if let Some(t) = self.profile.threads.get(thread) {
            labels.push(proto::Label {
                key: self.strings.id("comm"),
                str: self.strings.id(&t.comm),
                ..Default::default()
            });
            for (key, num) in [("pid", t.pid), ("tid", t.tid)] {
                labels.push(proto::Label {
                    key: self.strings.id(key),
                    num: i64::from(num),
                    ..Default::default()
                });
            }
        }
        self.labels.insert(thread, labels.clone());
        labels
    }

    /// The location of a run of frames at one address: inlined frames, then their caller.
    /// `None` when the run names no frame of the profile.
    fn location(&mut self, run: &[usize]) -> Option<u64> {
        let profile = self.profile;
        let frames = &profile.frames;
        // The inline chain of an address is fixed, so its two ends identify the run.
        let key = (*run.first()?, *run.last()?, run.len());
        if let Some(&id) = self.locations.get(&key) {
            return Some(id);
        }
        if run.iter().any(|&f| f >= frames.len()) {
            return None;
        }
        let outer = &frames[key.1];
        let mapping_id = profile
            .functions
            .get(outer.function)
            .map_or(0, |f| self.mapping(f.image, Some(outer.address)));
        let mut line = Vec::with_capacity(run.len());
        for &frame in run {
            let f = &frames[frame];
            line.push(proto::Line {
                function_id: self.function(f.function),
                line: f.line.map_or(0, i64::from),
                column: 0,
            });
        }
        let id = self.out.location.len() as u64 + 1;
        self.out.location.push(proto::Location {
            id,
            mapping_id,
            address: outer.address,
            line,
            is_folded: false,
        });
        self.locations.insert(key, id);
        Some(id)
    }

    /// The mapping of image `image`, widened to cover `address`.
    fn mapping(&mut self, image: usize, address: Option<u64>) -> u64 {
        let profile = self.profile;
        let Some(img) = profile.images.get(image) else {
            return 0;
        };
        if let Some(&id) = self.mappings.get(&image) {
            let m = &mut self.out.mapping[id as usize - 1];
            if let Some(address) = address {
                m.memory_start = m.memory_start.min(address);
                m.memory_limit = m.memory_limit.max(address.saturating_add(1));
            }
            return id;
        }
        let with_lines = matches!(
            img.symbols,
            SymbolSource::BuildId { .. } | SymbolSource::Unverified { .. }
        );
        let filename = if img.recorded_path.is_empty() {
            &img.name
        } else {
            &img.recorded_path
        };
        let id = self.out.mapping.len() as u64 + 1;
        let mapping = proto::Mapping {
            id,
            // Empty (start above limit) until the first address widens it.
            memory_start: address.unwrap_or(u64::MAX),
            memory_limit: address.map_or(0, |a| a.saturating_add(1)),
            file_offset: 0,
            filename: self.strings.id(filename),
            build_id: self.strings.id(img.build_id.as_deref().unwrap_or("")),
            has_functions: true,
            has_filenames: with_lines,
            has_line_numbers: with_lines,
            has_inline_frames: with_lines,
        };
        self.out.mapping.push(mapping);
        self.mappings.insert(image, id);
        id
    }

    fn function(&mut self, function: usize) -> u64 {
        if let Some(&id) = self.functions.get(&function) {
            return id;
        }
        let profile = self.profile;
        let f = &profile.functions[function];
        let name = self.strings.id(f.name.as_deref().unwrap_or("[unknown]"));
        let filename = match (&f.file, f.name.is_some()) {
            (Some(file), _) => self.strings.id(file),
            // Unnamed code of different images must stay apart in pprof's function views.
            (None, false) => {
                let image = profile.images.get(f.image).map_or("", |i| i.name.as_str());
                self.strings.id(image)
            }
            (None, true) => 0,
        };
        let id = self.out.function.len() as u64 + 1;
        self.out.function.push(proto::Function {
            id,
            name,
            system_name: name,
            filename,
            start_line: f.line.map_or(0, i64::from),
        });
        self.functions.insert(function, id);
        id
    }
}

fn mean_period(total_period: u64, total_samples: u64) -> i64 {
    i64::try_from(total_period / total_samples.max(1)).unwrap_or(i64::MAX)
}

/// The string table: index 0 is "", every string stored once.
#[derive(Default)]
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn id(&mut self, s: &str) -> i64 {
        if let Some(&id) = self.index.get(s) {
            return id;
        }
        let id = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), id);
        id
    }
}

/// The messages of pprof's `profile.proto` (package `perftools.profiles`), with its field
/// numbers, written out by hand so the build needs no `protoc`.
// The fields are `profile.proto`'s, documented there under the same names.
#[allow(missing_docs)]
pub mod proto {
    /// `perftools.profiles.Profile`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        #[prost(message, repeated, tag = "3")]
        pub mapping: Vec<Mapping>,
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        #[prost(int64, tag = "7")]
        pub drop_frames: i64,
        #[prost(int64, tag = "8")]
        pub keep_frames: i64,
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        #[prost(int64, tag = "12")]
        pub period: i64,
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    /// `perftools.profiles.ValueType`.
    #[derive(Clone, Copy, PartialEq, Eq, prost::Message)]
    pub struct ValueType {
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    /// `perftools.profiles.Sample`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    /// `perftools.profiles.Label`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        #[prost(int64, tag = "1")]
        pub key: i64,
        #[prost(int64, tag = "2")]
        pub str: i64,
        #[prost(int64, tag = "3")]
        pub num: i64,
        #[prost(int64, tag = "4")]
        pub num_unit: i64,
    }

    /// `perftools.profiles.Mapping`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Mapping {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub memory_start: u64,
        #[prost(uint64, tag = "3")]
        pub memory_limit: u64,
        #[prost(uint64, tag = "4")]
        pub file_offset: u64,
        #[prost(int64, tag = "5")]
        pub filename: i64,
        #[prost(int64, tag = "6")]
        pub build_id: i64,
        #[prost(bool, tag = "7")]
        pub has_functions: bool,
        #[prost(bool, tag = "8")]
        pub has_filenames: bool,
        #[prost(bool, tag = "9")]
        pub has_line_numbers: bool,
        #[prost(bool, tag = "10")]
        pub has_inline_frames: bool,
    }

    /// `perftools.profiles.Location`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(uint64, tag = "2")]
        pub mapping_id: u64,
        #[prost(uint64, tag = "3")]
        pub address: u64,
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
        #[prost(bool, tag = "5")]
        pub is_folded: bool,
    }

    /// `perftools.profiles.Line`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        #[prost(int64, tag = "2")]
        pub line: i64,
        #[prost(int64, tag = "3")]
        pub column: i64,
    }

    /// `perftools.profiles.Function`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        #[prost(uint64, tag = "1")]
        pub id: u64,
        #[prost(int64, tag = "2")]
        pub name: i64,
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        #[prost(int64, tag = "4")]
        pub filename: i64,
        #[prost(int64, tag = "5")]
        pub start_line: i64,
    }
}

#[cfg(test)]
mod tests;

//! Where every record goes: the perf.data writer, plus the per-event counters and the set of
//! mapped files whose build-ids the capture will need.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::Path;

use super::open_events::Opened;
use crate::perf_data_writer::{FileAttr, Writer};
use crate::perf_records::{self, Count, StackLayout};
use crate::Error;

/// Per-event counters kept while streaming.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Counters {
    pub(super) samples: u64,
    pub(super) lost: u64,
    pub(super) throttled: u64,
}

/// Receives every record: counts it, notes mapped files, writes it.
pub(super) struct Sink {
    w: Writer,
    /// (sample id, index of its event in `counts`), sorted by id: one entry per event and
    /// CPU, few enough that a binary search beats hashing every sample's id.
    id_event: Vec<(u64, usize)>,
    counts: Vec<Counters>,
    /// Absolute paths of mapped files, raw bytes as the kernel wrote them.
    files: BTreeSet<Vec<u8>>,
    /// Per event, where its samples' user stack copies sit (`--call-graph dwarf`).
    stacks: Vec<Option<StackLayout>>,
    /// A trimmed sample, reused.
    scratch: Vec<u8>,
}

impl Sink {
    /// Creates `path` as a perf.data describing the opened events, its records
    /// zstd-compressed at `zstd_level` if given.
    pub(super) fn create(
        path: &Path,
        opened: &[Opened],
        zstd_level: Option<i32>,
    ) -> Result<Sink, Error> {
        // Readable too: after a write error the writer reads back what reached the file.
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io(format!("cannot create {}", path.display()), e))?;
        let file_attrs: Vec<FileAttr> = opened
            .iter()
            .map(|e| FileAttr {
                attr: e.attr,
                name: e.spec.name.clone(),
                ids: e.ids.clone(),
            })
            .collect();
        let w = Writer::create(file, file_attrs, zstd_level)
            .map_err(|e| Error::io("cannot write perf.data", e))?;
        let mut id_event: Vec<(u64, usize)> = opened
            .iter()
            .enumerate()
            .flat_map(|(i, e)| e.ids.iter().map(move |&id| (id, i)))
            .collect();
        id_event.sort_unstable();
        Ok(Sink {
            w,
            id_event,
            counts: vec![Counters::default(); opened.len()],
            files: BTreeSet::new(),
            stacks: opened
                .iter()
                .map(|e| StackLayout::new(e.attr.sample_type, e.attr.sample_regs_user))
                .collect(),
            scratch: Vec::new(),
        })
    }

    fn event_of(&self, id: u64) -> usize {
        match self.id_event.binary_search_by_key(&id, |&(id, _)| id) {
            Ok(k) => self.id_event[k].1,
            Err(_) => 0,
        }
    }

    /// Takes one record from a ring buffer.
    pub(super) fn handle(&mut self, rec: &[u8]) -> io::Result<()> {
        match perf_records::classify(rec) {
            Count::Sample { id } => {
                let e = self.event_of(id);
                self.counts[e].samples += 1;
                if let Some(layout) = &self.stacks[e] {
                    if layout.trim(rec, &mut self.scratch) {
                        return self.w.write_record(&self.scratch);
                    }
                }
            }
            Count::Lost { id, lost } => {
                let e = self.event_of(id);
                self.counts[e].lost += lost;
            }
            Count::Throttle { id } => {
                let e = self.event_of(id);
                self.counts[e].throttled += 1;
            }
            Count::Other => {
                if let Some((_, name)) = perf_records::mmap2_filename(rec) {
                    self.note_file(name);
                }
            }
        }
        self.w.write_record(rec)
    }

    /// Writes a record the agent made itself; it is counted nowhere.
    pub(super) fn write_synthesized(&mut self, rec: &[u8]) -> io::Result<()> {
        self.w.write_record(rec)
    }

    /// Compresses this round at the level for catching up (`behind`) or the file's.
    pub(super) fn behind_round(&mut self, behind: bool) -> io::Result<()> {
        self.w.behind_round(behind)
    }

    /// Closes a round of draining with the record that says so (FINISHED_ROUND); with zstd,
    /// this is when the round's records reach the file.
    pub(super) fn end_round(&mut self, rec: &[u8]) -> io::Result<()> {
        self.w.end_round(rec)
    }

    /// Remembers a mapped file, if its name is an absolute path.
    pub(super) fn note_file(&mut self, name: &[u8]) {
        if name.first() == Some(&b'/') && !self.files.contains(name) {
            self.files.insert(name.to_vec());
        }
    }

    /// Ends the data section; the caller writes the features with the returned writer.
    pub(super) fn into_parts(self) -> (Writer, Vec<Counters>, BTreeSet<Vec<u8>>) {
        (self.w, self.counts, self.files)
    }
}

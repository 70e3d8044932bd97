//! Aggregations of a [`Profile`] that the HTML page (and the pprof writer) compute on the host:
//! event totals and per-image counts; the functions table, call tree and hot lines are computed
//! by the page itself from the embedded stacks (data.rs).

use std::hash::Hasher;

use kprof_symbols::profile::Profile;
use kprof_symbols::views::{self, Filter};

/// Samples per event over all stacks of the profile: the 100 % of every percentage.
pub fn event_totals(profile: &Profile) -> Vec<u64> {
    views::totals(profile, &Filter::default())
}

/// Self samples per image (index into [`Profile::images`]), one entry per event. Images
/// without samples get zeros: an image that was mapped but never sampled is still listed.
pub fn image_counts(profile: &Profile) -> Vec<Vec<u64>> {
    let mut counts = vec![vec![0u64; profile.events.len()]; profile.images.len()];
    for row in views::images(profile, &Filter::default()) {
        if let Some(slot) = counts.get_mut(row.image) {
            add(slot, &row.samples);
        }
    }
    counts
}

/// A hasher for keys made of small integers (FxHash's multiply-rotate): the page's stack trie
/// looks up one child per frame of every stack, and SipHash made that the slowest part.
#[derive(Debug, Default, Clone, Copy)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u8(&mut self, n: u8) {
        self.write_u64(u64::from(n));
    }

    fn write_isize(&mut self, n: isize) {
        self.write_u64(n as u64);
    }
}

/// `into[i] += from[i]`, tolerating a stack whose counts are shorter or longer than the
/// event list (a malformed profile must not panic a renderer).
fn add(into: &mut [u64], from: &[u64]) {
    for (a, b) in into.iter_mut().zip(from) {
        *a = a.saturating_add(*b);
    }
}

/// `part` as a percentage of `whole`, 0 when `whole` is 0.
pub fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

//! Warnings about single images, shown one line per kind: a system-wide capture touches
//! dozens of images without symbols or unwind tables, and a line for each buried the report
//! under them. Only the images the shown samples touch are named, the most concerned first.

use crate::profile::Profile;
use std::collections::HashSet;

/// Images a group line names before it says how many more there are.
pub const NAMED: usize = 4;

/// One line per kind of [`Profile::image_warnings`] for the images `p`'s stacks touch, in the
/// order the kinds first appear; each names the images with the highest counts first, at
/// most `named` of them (`None`: all) and says how many more there are.
pub fn grouped(p: &Profile, named: Option<usize>) -> Vec<String> {
    let touched = touched_images(p);
    let mut kinds: Vec<&str> = Vec::new();
    for w in &p.image_warnings {
        if touched.contains(w.image.as_str()) && !kinds.contains(&w.kind.as_str()) {
            kinds.push(&w.kind);
        }
    }
    kinds
        .into_iter()
        .map(|kind| {
            let mut images: Vec<(&str, Option<u64>)> = p
                .image_warnings
                .iter()
                .filter(|w| w.kind == kind && touched.contains(w.image.as_str()))
                .map(|w| (w.image.as_str(), w.count))
                .collect();
            images.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            images.dedup_by(|a, b| a.0 == b.0);
            line(kind, &images, named)
        })
        .collect()
}

/// `KIND: a (12), b (3) and N more (--verbose lists them)`.
fn line(kind: &str, images: &[(&str, Option<u64>)], named: Option<usize>) -> String {
    let shown = named.unwrap_or(usize::MAX).min(images.len());
    let names: Vec<String> = images[..shown]
        .iter()
        .map(|(name, count)| match count {
            Some(n) => format!("{name} ({n})"),
            None => (*name).to_owned(),
        })
        .collect();
    let more = images.len() - shown;
    let more = if more > 0 {
        format!(" and {more} more (--verbose lists them)")
    } else {
        String::new()
    };
    format!("{kind}: {}{more}", names.join(", "))
}

/// Names of the images that a frame of a stack of `p` is in.
fn touched_images(p: &Profile) -> HashSet<&str> {
    let mut seen = vec![false; p.images.len()];
    for s in &p.stacks {
        for &f in &s.frames {
            if let Some(img) = p
                .frames
                .get(f)
                .and_then(|fr| p.functions.get(fr.function))
                .map(|func| func.image)
            {
                if let Some(slot) = seen.get_mut(img) {
                    *slot = true;
                }
            }
        }
    }
    p.images
        .iter()
        .zip(seen)
        .filter(|(_, s)| *s)
        .map(|(i, _)| i.name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::{Frame, Function, Image, ImageWarning, Stack, SymbolSource};

    fn image(name: &str) -> Image {
        Image {
            name: name.into(),
            recorded_path: format!("/bin/{name}"),
            build_id: None,
            kernel: false,
            symbols: SymbolSource::Missing { why: "x".into() },
        }
    }

    /// A profile with samples in images 0..touched of `names`, and `warnings` (kind, image,
    /// count).
    fn profile(names: &[&str], touched: usize, warnings: &[(&str, &str, Option<u64>)]) -> Profile {
        Profile {
            images: names.iter().map(|n| image(n)).collect(),
            functions: (0..names.len())
                .map(|i| Function {
                    image: i,
                    name: None,
                    start: 0,
                    size: None,
                    file: None,
                    line: None,
                })
                .collect(),
            frames: (0..names.len())
                .map(|i| Frame {
                    function: i,
                    address: 0,
                    file: None,
                    line: None,
                    inlined: false,
                })
                .collect(),
            stacks: (0..touched)
                .map(|i| Stack {
                    frames: vec![i],
                    thread: 0,
                    counts: vec![1],
                    periods: vec![1],
                })
                .collect(),
            image_warnings: warnings
                .iter()
                .map(|(k, i, c)| ImageWarning {
                    kind: (*k).into(),
                    image: (*i).into(),
                    count: *c,
                })
                .collect(),
            ..Profile::default()
        }
    }

    /// One line per kind, images by count, only those with samples, the rest counted.
    #[test]
    fn grouped_image_warnings_kinds_counts_touched() {
        let p = profile(
            &["a", "b", "c", "d", "e", "f", "quiet"],
            6,
            &[
                ("no symbols", "a", None),
                ("no unwind", "b", Some(3)),
                ("no symbols", "c", None),
                ("no unwind", "a", Some(40)),
                ("no symbols", "quiet", None),
                ("no symbols", "d", None),
                ("no symbols", "e", None),
                ("no symbols", "f", None),
            ],
        );
        assert_eq!(
            grouped(&p, Some(NAMED)),
            [
                "no symbols: a, c, d, e and 1 more (--verbose lists them)",
                "no unwind: a (40), b (3)",
            ]
        );
        assert_eq!(grouped(&p, None)[0], "no symbols: a, c, d, e, f");
        let untouched = profile(&["a"], 0, &[("no symbols", "a", None)]);
        assert!(grouped(&untouched, Some(NAMED)).is_empty());
    }
}

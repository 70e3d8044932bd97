//! `--format svg`: an interactive flamegraph drawn by `inferno` from the folded stacks.
//!
//! Colours say where the time goes: orange for vmlinux, purple for kernel modules (the
//! drivers kprof is about), red for user code, aqua for user functions inlined into their
//! caller. Colours are chosen from a hash of the name, so two reports of the same code look
//! the same.

use std::io::Write;

use inferno::flamegraph::{self, color::PaletteMap, Options};
use kprof_symbols::profile::Profile;

use crate::{collapsed, Error};

/// Writes the flamegraph of the first event.
pub fn write_svg(profile: &Profile, out: &mut dyn Write) -> Result<(), Error> {
    write_svg_event(profile, 0, out)
}

/// Writes the flamegraph of event `event` (index into [`Profile::events`]).
pub fn write_svg_event(profile: &Profile, event: usize, out: &mut dyn Write) -> Result<(), Error> {
    let folded = collapsed::fold(profile, event)?;
    let name = &profile.events[event].name;
    let samples: u64 = folded.values().sum();
    if samples == 0 {
        return Err(Error::NoSamples(name.clone()));
    }

    let mut palette = PaletteMap::default();
    for (label, kind) in collapsed::FrameLabels::new(profile).kinds(profile) {
        if palette.get(label).is_none() {
            palette.insert(label, colour(kind, label));
        }
    }

    // Command names are the roots: a neutral colour, so the code above them stands out.
    for thread in &profile.threads {
        let mut label = String::new();
        collapsed::push_frame_name_parts(&mut label, &thread.comm, None);
        if palette.get(&label).is_none() {
            let v = shade(&label);
            let grey = 200 + (30.0 * v) as u8;
            palette.insert(
                &label,
                flamegraph::color::Color {
                    r: grey,
                    g: grey,
                    b: grey - 20,
                },
            );
        }
    }

    let mut options = Options::default();
    options.title = format!("{name} flamegraph");
    options.subtitle = Some(format!(
        "{samples} samples of {name} · orange: vmlinux · purple: kernel modules · red: user · aqua: inlined"
    ));
    options.count_name = "samples".to_owned();
    options.name_type = "Function:".to_owned();
    options.hash = true;
    options.deterministic = true;
    options.palette_map = Some(&mut palette);

    let lines: Vec<String> = folded
        .into_iter()
        .map(|(stack, count)| format!("{stack} {count}"))
        .collect();
    flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), out)
        .map_err(Error::writing("drawing the flamegraph"))?;
    Ok(())
}

/// The fill colour of a frame: a hue per kind, a shade from a hash of the name.
fn colour(kind: collapsed::FrameKind, name: &str) -> flamegraph::color::Color {
    use collapsed::FrameKind;
    let v = shade(name);
    let scale = |base: u8, span: u8| base.saturating_add((f32::from(span) * v) as u8);
    let (r, g, b) = match kind {
        FrameKind::Kernel => (scale(205, 50), scale(110, 70), scale(0, 40)),
        FrameKind::Module => (scale(160, 60), scale(90, 60), scale(200, 55)),
        FrameKind::User => (scale(200, 55), scale(50, 80), scale(50, 70)),
        FrameKind::Inlined => (scale(50, 60), scale(170, 55), scale(170, 55)),
        FrameKind::Unknown => (scale(160, 40), scale(160, 40), scale(160, 40)),
    };
    flamegraph::color::Color { r, g, b }
}

/// A stable value in `[0, 1)` from a name (FNV-1a), so colours do not change between runs.
fn shade(name: &str) -> f32 {
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    (hash % 1000) as f32 / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::fixture;

    fn svg(profile: &Profile, event: usize) -> String {
        let mut out = Vec::new();
        write_svg_event(profile, event, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    /// The fill colour of the frame whose tooltip starts with `title`.
    fn fill(svg: &str, title: &str) -> (u8, u8, u8) {
        let at = svg
            .find(&format!("<title>{title} ("))
            .unwrap_or_else(|| panic!("no frame {title}"));
        let rgb = &svg[at..];
        let rgb = &rgb[rgb.find("fill=\"rgb(").unwrap() + 10..];
        let rgb: Vec<u8> = rgb[..rgb.find(')').unwrap()]
            .split(',')
            .map(|c| c.trim().parse().unwrap())
            .collect();
        (rgb[0], rgb[1], rgb[2])
    }

    /// Title names the event; frames are image-qualified with their sample counts.
    #[test]
    fn write_svg_fixture_names_event_and_frames() {
        let svg = svg(&fixture::profile(), 0);
        assert!(svg.starts_with("<?xml"), "an SVG document");
        assert!(svg.contains(">cpu-clock flamegraph<"));
        assert!(svg.contains("<title>vmlinux:ksys_write (25 samples, 25.00%)</title>"));
        assert!(svg.contains("<title>app:compute (70 samples, 70.00%)</title>"));
        // Suffixes only steer colour; the tooltip shows the plain name.
        assert!(svg.contains("<title>app:hot_loop&lt;int&gt; (60 samples, 60.00%)</title>"));
        let other = self::svg(&fixture::profile(), 1);
        assert!(other.contains(">page-faults flamegraph<"));
        assert!(other.contains("<title>vmlinux:ksys_write (3 samples, 30.00%)</title>"));
    }

    /// Kernel frames are orange, module frames purple, user frames red, inlined aqua.
    #[test]
    fn write_svg_fixture_colours_by_space() {
        let svg = svg(&fixture::profile(), 0);
        let (r, g, b) = fill(&svg, "vmlinux:vfs_write");
        assert!(r > g && g > b && b < 60, "kernel {r},{g},{b}");
        let (r, g, b) = fill(&svg, "mychardrv.ko:mychardrv_checksum");
        assert!(b > 180 && g < 160 && r > 150, "module {r},{g},{b}");
        let (r, g, b) = fill(&svg, "app:main");
        assert!(r >= 200 && g < 140 && b < 130, "user {r},{g},{b}");
        let (r, g, b) = fill(&svg, "app:hot_loop&lt;int&gt;");
        assert!(g > 160 && b > 160 && r < 120, "inlined {r},{g},{b}");
    }

    /// An event without samples is an error that names it, not an empty picture.
    #[test]
    fn write_svg_event_without_samples_fails_clearly() {
        let mut profile = fixture::profile();
        for stack in &mut profile.stacks {
            stack.counts[1] = 0;
        }
        let err = write_svg_event(&profile, 1, &mut Vec::new()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no samples of event page-faults to draw a flamegraph from"
        );
    }
}

//! `kprofctl report --format svg` on a real capture with user and kernel stacks.

use crate::render_support::{capture, report};

/// The flamegraph names the event, has the program's frames image-qualified with the same
/// counts as the collapsed stacks, and colours kernel frames apart from user frames.
#[test]
fn report_svg_real_capture_user_and_kernel_frames() {
    let recorded = capture::record(100, 400);
    let dir = recorded.dir.path();
    let svg = report(dir, "svg", None);
    assert!(svg.starts_with("<?xml") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains(">cpu-clock flamegraph<"));

    let collapsed = report(dir, "collapsed", None);
    // The widest spin box: samples of all stacks through one path to spin.
    let mut boxes = std::collections::HashMap::<&str, u64>::new();
    for line in collapsed.lines() {
        let (stack, count) = line.rsplit_once(' ').unwrap();
        if let Some(at) = stack.find(";prog:spin") {
            *boxes.entry(&stack[..at]).or_default() += count.parse::<u64>().unwrap();
        }
    }
    let spin = boxes.values().copied().max().expect("spin sampled");
    let title = format!("<title>prog:spin ({spin} samples,");
    assert!(svg.contains(&title), "{title} not in the SVG");

    let fill = |frame: &str| -> (u8, u8, u8) {
        let at = svg
            .find(&format!("<title>{frame} ("))
            .unwrap_or_else(|| panic!("no frame {frame}"));
        let rgb = &svg[at..];
        let rgb = &rgb[rgb.find("fill=\"rgb(").unwrap() + 10..];
        let v: Vec<u8> = rgb[..rgb.find(')').unwrap()]
            .split(',')
            .map(|c| c.trim().parse().unwrap())
            .collect();
        (v[0], v[1], v[2])
    };
    let (r, g, b) = fill("vmlinux:ksys_write");
    assert!(r > g && g > b && b < 60, "kernel frame orange: {r},{g},{b}");
    let (r, g, b) = fill("prog:spin");
    assert!(
        r >= 200 && g < 140 && b < 130,
        "user frame red: {r},{g},{b}"
    );
}

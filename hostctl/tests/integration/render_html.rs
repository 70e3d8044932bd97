//! `kprofctl report --format html` on a real `perf record -g` capture, opened in headless
//! Chromium.

use crate::render_support::chromium::{assert_non_blank_png, chromium};
use crate::render_support::{capture, report};

/// The page renders offline (non-blank screenshot), its functions table starts with the
/// workload's hot function, the hottest function is annotated, and no URL is in the file.
#[test]
fn report_html_real_capture_renders_in_chromium() {
    let recorded = capture::record(300, 100);
    let dir = recorded.dir.path();
    let html_path = dir.join("report.html");
    report(dir, "html", Some("report.html"));
    let html = std::fs::read_to_string(&html_path).unwrap();
    for section in [
        "timeline",
        "images",
        "functions",
        "flamegraph",
        "calltree",
        "source",
    ] {
        assert!(
            html.contains(&format!("<section id=\"{section}\"")),
            "{section}"
        );
    }
    if let Some(at) = html.find("://") {
        panic!(
            "a URL in the page: {}",
            &html[at.saturating_sub(40)..at + 40]
        );
    }

    let png = dir.join("report.png");
    let dom = chromium(&html_path, &png, dir);
    assert_non_blank_png(&png);
    let table = &dom[dom.find("id=\"functions-table\"").expect("functions table")..];
    let body = &table[table.find("<tbody>").unwrap()..];
    let first = &body[..body.find("</tr>").unwrap()];
    assert!(
        first.contains(">spin<") && first.contains(">prog<"),
        "{first}"
    );
    assert!(
        dom.contains("build-id match"),
        "the program's symbols are matched by build-id"
    );
    assert!(
        dom.contains("<h3><code>prog:spin</code></h3>"),
        "hottest function annotated"
    );
}

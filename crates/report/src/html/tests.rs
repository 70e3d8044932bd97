//! Tests of the HTML page on the hand-built profile, in headless Chromium too.
use kprof_symbols::annotate::{Instruction, SourceLine};

use super::*;
use crate::test_support::chromium::{assert_non_blank_png, chromium, chromium_url};
use crate::test_support::{capture, fixture};

fn page(annotation: Option<&Annotation>) -> String {
    let mut out = Vec::new();
    write(&fixture::profile(), annotation, &mut out).expect("the page renders");
    String::from_utf8(out).expect("the page is UTF-8")
}

fn annotation() -> Annotation {
    let line = |file: &str, line: u32, text: &str, samples: u64| SourceLine {
        file: file.to_owned(),
        line,
        text: Some(text.to_owned()),
        samples,
    };
    Annotation {
        image: "app".to_owned(),
        function: "compute".to_owned(),
        start: 0x1200,
        size: 0x80,
        event: "cpu-clock".to_owned(),
        total: 70,
        lines: vec![
            line("/src/app/compute.c", 11, "for (i = 0; i < n; i++)", 0),
            line(
                "/src/app/compute.c",
                12,
                "    acc += hot_loop(v[i]); // <kprof-hot>",
                0,
            ),
            line("/src/app/compute.c", 15, "return acc;", 10),
            line("/src/app/compute.h", 5, "return x * x;", 60),
        ],
        instructions: vec![Instruction {
            address: 0x1230,
            bytes: vec![0x01, 0xc3],
            text: "add %eax,%ebx".to_owned(),
            samples: 60,
            file: Some("/src/app/compute.h".to_owned()),
            line: Some(5),
        }],
        warnings: vec![
            "source /src/app/other.c not found (use --source-prefix OLD=NEW)".to_owned(),
        ],
    }
}

/// Every section is on the page and the hottest self function heads the functions table.
#[test]
fn write_html_fixture_has_every_section() {
    let mut profile = fixture::profile();
    profile.meta.capture = "run-1.kprof.tar.gz".to_owned();
    profile.meta.lost_samples = 3;
    let mut out = Vec::new();
    write(&profile, None, &mut out).unwrap();
    let html = String::from_utf8(out).unwrap();
    assert!(html.contains("capture <code>run-1.kprof.tar.gz</code>"));
    assert!(html.contains("3 samples lost"));
    for id in [
        "images",
        "functions",
        "flamegraph",
        "calltree",
        "source",
        "warnings",
    ] {
        assert!(
            html.contains(&format!("id=\"{id}\"")),
            "section {id} missing"
        );
    }
    let first_row = first_body_row(&html, "functions-table");
    assert!(first_row.contains(">compute<"), "{first_row}");
    assert!(
        first_row.contains(">70<") && first_row.contains("70.00%"),
        "{first_row}"
    );
    // Symbol status of every image is spelled out.
    assert!(html.contains("kallsyms fallback"));
    assert!(html.contains("no symbols</span>: no file with build-id 9 found"));
    assert!(html.contains("build-id match</span> <code>/build/linux/vmlinux</code>"));
    // Markup in names is escaped.
    assert!(html.contains("hot_loop&lt;int&gt;"));
    assert!(!html.contains("hot_loop<int>"));
}

/// The page references nothing outside itself: no http(s) URL but SVG/XLink namespace names,
/// no stylesheet or script links, and the flamegraph is a `data:` URL.
#[test]
fn write_html_fixture_is_self_contained() {
    let html = page(Some(&annotation()));
    let mut texts = vec![html.clone()];
    for part in html.split("src=\"data:image/svg+xml;base64,").skip(1) {
        let b64 = &part[..part.find('"').unwrap()];
        texts.push(String::from_utf8(decode_base64(b64)).unwrap());
    }
    assert_eq!(texts.len(), 3, "one flamegraph per event");
    for text in &texts {
        // Namespace names identify XML vocabularies; browsers never fetch them.
        for (at, _) in text.match_indices("://") {
            let before = &text[..at];
            let attr_start = before.rfind(' ').unwrap_or(0);
            let attr = &before[attr_start..];
            assert!(
                attr.starts_with(" xmlns") && attr.ends_with("=\"http"),
                "URL outside a namespace declaration: {}",
                &text[attr_start..(at + 40).min(text.len())]
            );
        }
        assert!(!text.contains("<link"), "a <link> element");
        assert!(!text.contains("<script src"), "an external script");
    }
    assert!(texts[1].contains("cpu-clock flamegraph"));
    assert!(texts[2].contains("page-faults flamegraph"));
}

/// The annotation is listed per file with its per-line samples, the hottest line highlighted
/// and percentages of the function's own samples.
#[test]
fn write_html_annotation_lists_lines_and_instructions() {
    let html = page(Some(&annotation()));
    let listing = &html[html
        .find("<h3><code>app:compute</code></h3>")
        .expect("heading")..];
    assert!(listing.contains("70 samples of cpu-clock in the function itself"));
    assert!(listing.contains("Source lines") && listing.contains("Disassembly"));
    assert!(listing.contains("source /src/app/other.c not found"));
    let files: Vec<&str> = listing
        .match_indices("<tr class=\"file\">")
        .map(|(i, _)| &listing[i..i + 120])
        .collect();
    assert_eq!(files.len(), 2, "one heading per file");
    assert!(files[1].contains("/src/app/compute.h"));
    let hot = &listing[listing.find("<tr class=\"hot\">").unwrap()..];
    let hot = &hot[..hot.find("</tr>").unwrap()];
    assert!(
        hot.contains(">60<") && hot.contains("85.71%") && hot.contains("return x * x;"),
        "{hot}"
    );
    let warm = &listing[listing.find("<tr class=\"warm\">").unwrap()..];
    assert!(warm[..warm.find("</tr>").unwrap()].contains("return acc;"));
    let asm = &listing[listing.find("Disassembly").unwrap()..];
    assert!(asm.contains(">1230<") && asm.contains("add %eax,%ebx") && asm.contains("; line 5"));
    let page = page(None);
    assert!(page.contains("No function was annotated"));
}

/// The hottest source line comes from the innermost inline frame.
#[test]
fn write_html_hot_lines_use_innermost_frame() {
    let html = page(None);
    let first = first_body_row(&html, "lines-table");
    assert!(first.contains("/src/app/compute.h:5"), "{first}");
    assert!(first.contains("hot_loop&lt;int&gt;"), "{first}");
}

/// A profile without events is refused with a message, not rendered empty.
#[test]
fn write_html_no_events_fails_clearly() {
    let mut out = Vec::new();
    let err = write(&Profile::default(), None, &mut out).unwrap_err();
    assert!(format!("{err:#}").contains("no sampled events"), "{err:#}");
}

/// Headless Chromium renders the page: a non-blank screenshot, the top function in the DOM.
#[test]
fn render_html_chromium_shows_top_function() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, page(Some(&annotation()))).unwrap();
    let shot = dir.path().join("report.png");
    let dom = chromium(&path, &shot, dir.path());
    assert_non_blank_png(&shot);
    let table = &dom[dom
        .find("id=\"functions-table\"")
        .expect("functions table in the DOM")..];
    let first_row = &table[..table.find("</tr>\n").unwrap_or(table.len()).min(4000)];
    assert!(
        first_row.contains("compute"),
        "top function not first in the DOM"
    );
}

/// The page's script sorts tables: a `#sort=` link sorts the functions by rank, descending,
/// and by name, ascending.
#[test]
fn render_html_chromium_sorts_functions_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, page(None)).unwrap();
    let shot = dir.path().join("sorted.png");
    let url = format!("file://{}#sort=functions-table:0", path.display());
    let dom = chromium_url(&url, &shot, dir.path());
    let row = first_body_row(&dom, "functions-table");
    assert!(row.contains("data-v=\"12\">12<"), "last rank first: {row}");

    let url = format!("file://{}#sort=functions-table:1:asc", path.display());
    let dom = chromium_url(&url, &shot, dir.path());
    let table = &dom[dom.find("id=\"functions-table\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    // Column 1 of each row: the first `fn` cell after the rank cell.
    let names: Vec<String> = table
        .split("<tr>")
        .skip(2)
        .filter_map(|row| {
            let cell = &row[row.find("<td class=\"fn\">")? + 15..];
            Some(cell[..cell.find('<')?].to_lowercase())
        })
        .filter(|name| name.starts_with(|c: char| c.is_ascii_alphabetic()))
        .collect();
    assert_eq!(names.len(), 10, "{names:?}");
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "function names ascending");
}

/// The text of the first row in the body of the table with id `id`.
fn first_body_row<'a>(html: &'a str, id: &str) -> &'a str {
    let table = &html[html.find(&format!("id=\"{id}\"")).expect("the table")..];
    let body = &table[table.find("<tbody>").expect("a body")..];
    &body[..body.find("</tr>").expect("a row")]
}

fn decode_base64(s: &str) -> Vec<u8> {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// On a real `perf record -g` capture of a C program, the page's top function is the one
/// `perf report` puts first, Chromium renders it, and the annotation of that function
/// highlights a line of its hot loop.
#[test]
fn render_html_real_capture_matches_perf_report() {
    let recorded = capture::record(300, 100);
    let (symbolizer, profile) = recorded.symbolize();
    let perf_top = capture::perf_report_symbols(&recorded.perf_data());
    assert_eq!(
        perf_top[0].0, "spin",
        "the workload's hot function: {perf_top:?}"
    );

    let spin = kprof_symbols::views::find_functions(&profile, "spin");
    assert_eq!(spin.len(), 1, "one spin in the profile");
    let image = profile.functions[spin[0]].image;
    let annotation = kprof_symbols::annotate::annotate(
        &profile,
        &kprof_symbols::views::Filter::default(),
        spin[0],
        0,
        symbolizer.symbol_file(image),
        &|path| path.to_owned(),
    );
    let mut html = Vec::new();
    write(&profile, Some(&annotation), &mut html).unwrap();
    let html = String::from_utf8(html).unwrap();

    let path = recorded.dir.path().join("report.html");
    std::fs::write(&path, &html).unwrap();
    let shot = recorded.dir.path().join("report.png");
    let dom = chromium(&path, &shot, recorded.dir.path());
    assert_non_blank_png(&shot);
    let row = first_body_row(&dom, "functions-table");
    assert!(row.contains(">spin<") && row.contains(">prog<"), "{row}");
    // The share perf reports for spin, to the rounding of its two decimals.
    let ours: f64 = {
        let pct = &row[..row.rfind("%</td>").unwrap()];
        let pct = &pct[..pct.rfind("%</td>").unwrap()];
        pct[pct.rfind('>').unwrap() + 1..].parse().unwrap()
    };
    assert!(
        (ours - perf_top[0].1).abs() < 0.01,
        "ours {ours}, perf {}",
        perf_top[0].1
    );

    let listing = &html[html
        .find("<h3><code>prog:spin</code></h3>")
        .expect("annotation")..];
    let hot = &listing[listing.find("<tr class=\"hot\">").expect("a hot line")..];
    let hot = &hot[..hot.find("</tr>").unwrap()];
    assert!(
        hot.contains("mix("),
        "the hot line is the loop or the inlined mix: {hot}"
    );
    assert!(
        listing.contains("imul"),
        "the disassembly has the loop's multiply"
    );
    if let Some(keep) = std::env::var_os("KPROF_KEEP_SCREENSHOT") {
        std::fs::copy(&shot, &keep).unwrap();
        std::fs::copy(&path, std::path::Path::new(&keep).with_extension("html")).unwrap();
    }
}

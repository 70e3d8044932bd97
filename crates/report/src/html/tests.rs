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

/// The page's embedded data, parsed.
pub(crate) fn data_of(html: &str) -> serde_json::Value {
    let open = "id=\"kprof-data\">";
    let at = html.find(open).expect("the data element") + open.len();
    let text = &html[at..];
    serde_json::from_str(&text[..text.find("</script>").unwrap()]).expect("the data is JSON")
}

/// Every section is on the page, the header carries capture facts and warnings, and the data
/// names every function with markup escaped.
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
        "timeline",
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
    // The header and the timeline come before the views.
    assert!(html.find("id=\"timeline\"") < html.find("id=\"functions\""));
    // Symbol status of every image is spelled out.
    assert!(html.contains("kallsyms fallback"));
    assert!(html.contains("no symbols</span>: no file with build-id 9 found"));
    assert!(html.contains("build-id match</span> <code>/build/linux/vmlinux</code>"));
    // Markup in names is escaped: the data has it as a JSON escape, never raw.
    assert!(!html.contains("hot_loop<int>"));
    let data = data_of(&html);
    let names = data["functions"]["name"].as_array().unwrap();
    assert_eq!(names.len(), 12);
    assert!(names.iter().any(|n| n == "hot_loop<int>"));
    // No per-sample times in the fixture: no bins.
    assert_eq!(data["time"]["count"], 0);
}

/// The page references nothing outside itself: no URL, no stylesheet or script links.
#[test]
fn write_html_fixture_is_self_contained() {
    let html = page(Some(&annotation()));
    assert!(!html.contains("://"), "a URL in the page");
    assert!(!html.contains("<link"), "a <link> element");
    assert!(!html.contains("<script src"), "an external script");
    assert!(!html.contains("<iframe"), "an iframe");
}

/// The annotation's rows are in the data; Chromium draws them per file with their samples,
/// the hottest line highlighted and percentages of the function's own samples.
#[test]
fn render_html_chromium_annotation_lists_lines_and_instructions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, page(Some(&annotation()))).unwrap();
    let dom = chromium(&path, &dir.path().join("a.png"), dir.path());
    let listing = &dom[dom
        .find("<h3><code>app:compute</code></h3>")
        .expect("heading")..];
    assert!(listing.contains("70 samples of cpu-clock in the function itself"));
    assert!(listing.contains("Source lines") && listing.contains("Disassembly"));
    assert!(listing.contains("source /src/app/other.c not found"));
    let files = listing.matches("<tr class=\"file\">").count();
    assert_eq!(files, 2, "one heading per file");
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
    let path = dir.path().join("plain.html");
    std::fs::write(&path, page(None)).unwrap();
    let dom = chromium(&path, &dir.path().join("b.png"), dir.path());
    assert!(dom.contains("No function was annotated"));
}

/// The hottest source line comes from the innermost inline frame.
#[test]
fn render_html_chromium_hot_lines_use_innermost_frame() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, page(None)).unwrap();
    let html = chromium(&path, &dir.path().join("a.png"), dir.path());
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

/// The page's script sorts the functions table: a `#sort=` link sorts it by rank,
/// descending, and by name, ascending.
#[test]
fn render_html_chromium_sorts_functions_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, page(None)).unwrap();
    let shot = dir.path().join("sorted.png");
    let url = format!("file://{}#sort=0", path.display());
    let dom = chromium_url(&url, &shot, dir.path());
    let row = first_body_row(&dom, "functions-table");
    assert!(
        row.starts_with("<tbody><tr><td class=\"n\">12</td>"),
        "last rank first: {row}"
    );

    let url = format!("file://{}#sort=1:asc", path.display());
    let dom = chromium_url(&url, &shot, dir.path());
    let table = &dom[dom.find("id=\"functions-table\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    // Column 1 of each row: the first `fn` cell after the rank cell.
    let names: Vec<String> = table
        .split("<tr>")
        .skip(1)
        .filter_map(|row| {
            let cell = &row[row.find("<td class=\"fn\"")?..];
            let cell = &cell[cell.find('>')? + 1..];
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

/// The varints of a packed array (html/pack.rs).
pub(crate) fn unpack(b64: &serde_json::Value) -> Vec<u64> {
    pack::tests::decode(b64.as_str().expect("a packed array is a string"))
}

/// One event's per-bin (bin, stack) runs summed per stack, and the last bin they reach.
fn stack_sums(event: &serde_json::Value, stacks: usize) -> (Vec<u64>, u64) {
    let (runs, ids, counts) = (
        unpack(&event["bin"]),
        unpack(&event["stack"]),
        unpack(&event["count"]),
    );
    let mut sums = vec![0u64; stacks];
    let (mut bin, mut stack) = (0, 0);
    for ((db, ds), c) in runs.iter().zip(&ids).zip(&counts) {
        if *db != 0 {
            (bin, stack) = (bin + db, 0);
        }
        stack += ds;
        sums[stack as usize] += c;
    }
    (sums, bin)
}

/// On a real capture, the per-bin stack counts of every event add up, stack by stack, to the
/// whole capture's counts: a window of all bins is the whole capture, and no sample is lost
/// or counted twice between bins.
#[test]
fn write_html_real_capture_bins_sum_to_stack_counts() {
    let (_, profile) = capture::shared();
    assert!(
        !profile.samples.is_empty(),
        "the capture has per-sample times"
    );
    let mut html = Vec::new();
    write(profile, None, &mut html).unwrap();
    let data = data_of(&String::from_utf8(html).unwrap());
    let time = &data["time"];
    let bins = time["count"].as_u64().unwrap();
    assert!(bins > 10 && bins <= timeline::MAX_BINS, "{bins} bins");
    assert!(time["width"].as_u64().unwrap() * bins > profile.samples.last().unwrap().time);
    let stacks = data["stacks"]["n"].as_u64().unwrap() as usize;
    for (e, event) in time["events"].as_array().unwrap().iter().enumerate() {
        let (sums, last_bin) = stack_sums(event, stacks);
        assert!(last_bin < bins);
        assert_eq!(sums, unpack(&data["stacks"]["counts"][e]), "event {e}");
        assert_eq!(sums.iter().sum::<u64>(), profile.events[e].total_samples);
    }
    // One CPU track per CPU that sampled (none when perf did not record CPUs).
    let mut cpus: Vec<u32> = profile
        .samples
        .iter()
        .map(|s| s.cpu)
        .filter(|&c| c != u32::MAX)
        .collect();
    cpus.sort_unstable();
    cpus.dedup();
    assert_eq!(time["cpus"].as_array().unwrap().len(), cpus.len());
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
        &symbolizer,
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

    let listing = &dom[dom
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

/// The fixture with sample times over 1 s: `compute` (stack 0) alone on CPU 0 for the first
/// 0.6 s, the other stacks after it on CPU 1; page-faults samples alongside; workload
/// start/exit and a lost-samples marker.
pub(crate) fn timed_fixture() -> Profile {
    use kprof_symbols::profile::{Marker, MarkerKind, Sample};
    let mut profile = fixture::profile();
    let mut samples = Vec::new();
    let mut at = 0u64;
    for (stack, counts) in profile.stacks.iter().enumerate() {
        let cpu = u32::from(stack != 0);
        for _ in 0..counts.counts[0] {
            samples.push(Sample {
                time: at,
                stack: stack as u32,
                event: 0,
                cpu,
                period: 1_000_000,
            });
            at += 10_000_000;
        }
        for k in 0..counts.counts[1] {
            samples.push(Sample {
                time: at.saturating_sub(1 + k),
                stack: stack as u32,
                event: 1,
                cpu,
                period: 1,
            });
        }
    }
    samples.sort_by_key(|s| s.time);
    profile.samples = samples;
    profile.meta.duration_ns = 1_000_000_000;
    profile.meta.markers = vec![
        Marker {
            time: 0,
            kind: MarkerKind::WorkloadStart,
        },
        Marker {
            time: 500_000_000,
            kind: MarkerKind::Lost { samples: 7 },
        },
        Marker {
            time: 999_000_000,
            kind: MarkerKind::WorkloadExit,
        },
    ];
    profile
}

/// A page with sample times draws one track per CPU and every marker, and a `#window=` link
/// (as the range selection writes it) restricts the functions table to that window.
#[test]
fn render_html_chromium_window_link_filters_functions() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    let mut html = Vec::new();
    write(&timed_fixture(), None, &mut html).unwrap();
    std::fs::write(&path, html).unwrap();

    let shot = dir.path().join("whole.png");
    let dom = chromium(&path, &shot, dir.path());
    assert_eq!(
        dom.matches("class=\"track cpu\"").count(),
        2,
        "one track per CPU"
    );
    for kind in ["start", "exit", "lost"] {
        assert!(
            dom.contains(&format!("class=\"marker {kind}\"")),
            "{kind} marker"
        );
    }
    let row = first_body_row(&dom, "functions-table");
    assert!(row.contains(">compute<") && row.contains(">70<"), "{row}");

    let url = format!("file://{}#window=0.000000000..0.600000000", path.display());
    let dom = chromium_url(&url, &shot, dir.path());
    assert!(
        dom.contains("Window 0.000000000 s .. 0.600000000 s"),
        "the window's bounds are shown"
    );
    let table = &dom[dom.find("id=\"functions-table\"").unwrap()..];
    let table = &table[..table.find("</table>").unwrap()];
    let row = first_body_row(&dom, "functions-table");
    assert!(
        row.contains(">compute<") && row.contains(">60<") && row.contains("100.00%"),
        "only compute's first 60 samples: {row}"
    );
    assert!(
        !table.contains(">mychardrv_checksum<"),
        "the driver ran after the window"
    );
}

/// With a unit (`report --off-cpu`'s blocked ns as counts), the bins weigh each sample by its
/// period: stack by stack they sum to the counts, so a window of all bins is the whole page.
#[test]
fn write_html_unit_bins_weigh_periods() {
    let mut profile = timed_fixture();
    let nev = profile.events.len();
    for st in &mut profile.stacks {
        st.counts = vec![0; nev];
    }
    for s in &profile.samples {
        profile.stacks[s.stack as usize].counts[s.event as usize] += s.period;
    }
    for (e, ev) in profile.events.iter_mut().enumerate() {
        ev.total_samples = profile.stacks.iter().map(|s| s.counts[e]).sum();
    }
    let options = Options {
        unit: Some("blocked ns"),
        ..Options::default()
    };
    let mut html = Vec::new();
    write_with(&profile, None, &options, &mut html).unwrap();
    let html = String::from_utf8(html).unwrap();
    assert!(html.contains("id=\"unit-note\"") && html.contains("blocked ns shown</th>"));
    let data = data_of(&html);
    assert_eq!(data["unit"], "blocked ns");
    let stacks = data["stacks"]["n"].as_u64().unwrap() as usize;
    for (e, event) in data["time"]["events"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let (sums, _) = stack_sums(event, stacks);
        assert_eq!(sums, unpack(&data["stacks"]["counts"][e]), "event {e}");
    }
    assert!(unpack(&data["stacks"]["counts"][0])
        .iter()
        .any(|c| *c >= 1_000_000));
}

/// The page's Content-Security-Policy names the SHA-256 of the one script it runs, so Chromium
/// runs that script and nothing else.
#[test]
fn write_html_fixture_csp_hashes_its_script() {
    use base64::Engine as _;
    use sha2::Digest as _;
    let html = page(None);
    let csp = html
        .split("http-equiv=\"Content-Security-Policy\" content=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSP meta element");
    assert!(csp.starts_with("default-src 'none';"), "{csp}");
    let start = html.rfind("<script>").expect("the page script") + "<script>".len();
    let end = start + html[start..].find("</script>").unwrap();
    let hash = base64::engine::general_purpose::STANDARD
        .encode(sha2::Sha256::digest(&html.as_bytes()[start..end]));
    assert!(
        csp.contains(&format!("script-src 'sha256-{hash}'")),
        "{csp}"
    );
    assert_eq!(html.matches("<script>").count(), 1, "one executable script");
}

/// Function and thread names that carry markup stay text: Chromium shows them escaped and runs
/// none of them, while the page's own script still draws the tables.
#[test]
fn render_html_chromium_hostile_names_stay_text() {
    let mut profile = fixture::profile();
    profile.functions[fixture::COMPUTE].name =
        Some("<img src=x onerror=\"document.body.setAttribute('data-pwned','img')\">".to_owned());
    profile.functions[fixture::HOT_LOOP].name = Some(
        "</script><script>document.body.setAttribute('data-pwned','script')</script>".to_owned(),
    );
    let mut out = Vec::new();
    write(&profile, None, &mut out).expect("the page renders");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    std::fs::write(&path, out).unwrap();
    let dom = chromium(&path, &dir.path().join("a.png"), dir.path());
    let body = &dom[dom.find("<body").unwrap()..];
    let body_tag = &body[..body.find('>').unwrap()];
    assert!(
        !body_tag.contains("data-pwned"),
        "a name ran as script: {body_tag}"
    );
    assert!(!dom.contains("<img src=\"x\""), "a name became an element");
    assert!(
        dom.contains("&lt;img src=x onerror="),
        "the name is not shown as text"
    );
    assert!(
        dom.contains("&lt;/script&gt;&lt;script&gt;document.body"),
        "the script-tag name is not shown as text"
    );
    let first = first_body_row(&dom, "functions-table");
    assert!(
        first.contains("&lt;img src=x"),
        "the page script drew no table: {first}"
    );
}

/// A mark of `text` at `ms` ms on thread (`pid`, `tid`).
fn mark(ms: u64, pid: i32, tid: i32, event: &str, text: &str) -> kprof_symbols::profile::Marker {
    use kprof_symbols::profile::{Mark, Marker, MarkerKind, SpanEdge};
    // atrace's convention, as the symbols crate decodes it.
    let edge = match text.split('|').collect::<Vec<_>>()[..] {
        ["B", _, name] => Some(SpanEdge::Begin(name.to_owned())),
        ["E", _, name] => Some(SpanEdge::End(Some(name.to_owned()))),
        _ => None,
    };
    Marker {
        time: ms * 1_000_000,
        kind: MarkerKind::Mark(Mark {
            event: event.to_owned(),
            pid,
            tid,
            cpu: u32::from(tid != 100),
            text: text.to_owned(),
            fields: Vec::new(),
            edge,
        }),
    }
}

/// A mark whose text is markup: the page must show it as text.
const HOSTILE_MARK: &str = "</script><img src=x onerror=\"document.title='pwned'\"> & more";

/// [`timed_fixture`] with marks: three phases as spans on the app thread (0–600 ms compute,
/// 700–950 ms the driver's checksum, 950–999 ms libc), a span nested in phase 2, a frame mark
/// every 50 ms, an end that closes nothing, a begin never closed, a line of markup, and a
/// driver tracepoint on a thread that has no samples.
fn marked_fixture() -> Profile {
    let mut profile = timed_fixture();
    let print = "ftrace:print";
    let mut marks = vec![
        mark(0, 100, 100, print, "B|100|phase 1"),
        mark(600, 100, 100, print, "E|100|phase 1"),
        mark(700, 100, 100, print, "B|100|phase 2"),
        mark(750, 100, 100, print, "B|100|load"),
        mark(800, 100, 100, print, "E|100|load"),
        mark(950, 100, 100, print, "E|100|phase 2"),
        mark(950, 100, 100, print, "B|100|phase 3"),
        mark(990, 100, 100, print, "E|100|phase 3"),
        mark(960, 100, 100, print, "E|100|orphan"),
        mark(970, 100, 100, print, "B|100|never ends"),
        mark(820, 200, 201, "mychardrv:cache_traverse", "len=4096 hits=3"),
        mark(400, 100, 100, print, HOSTILE_MARK),
    ];
    for frame in 0..20 {
        marks.push(mark(
            frame * 50 + 5,
            100,
            100,
            print,
            &format!("frame {frame}"),
        ));
    }
    profile.meta.markers.extend(marks);
    profile.meta.markers.sort_by_key(|m| m.time);
    profile
}

/// The page's marks, decoded: (time ns, thread index, text) of each, and the spans as
/// (name, begin mark, end mark or -1, lane).
type PageMarks = (Vec<(u64, u64, String)>, Vec<(String, u64, i64, u64)>);

fn page_marks(data: &serde_json::Value) -> PageMarks {
    let m = &data["marks"];
    let n = m["n"].as_u64().unwrap() as usize;
    let time = unpack(&m["time"]);
    let thread = unpack(&m["thread"]);
    let text = unpack(&m["text"]);
    assert_eq!((time.len(), thread.len(), text.len()), (n, n, n));
    let mut at = 0;
    let marks = (0..n)
        .map(|i| {
            at += time[i];
            (
                at,
                thread[i],
                m["texts"][text[i] as usize].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let s = &m["spans"];
    let zigzag = |v: u64| (v >> 1) as i64 ^ -((v & 1) as i64);
    let (begin, end, name, lane) = (
        unpack(&s["begin"]),
        unpack(&s["end"]),
        unpack(&s["name"]),
        unpack(&s["lane"]),
    );
    let spans = (0..s["n"].as_u64().unwrap() as usize)
        .map(|i| {
            (
                s["names"][name[i] as usize].as_str().unwrap().to_owned(),
                begin[i],
                zigzag(end[i]),
                lane[i],
            )
        })
        .collect();
    (marks, spans)
}

/// The marks are in the page's data in time order with their threads (the app's sampled
/// thread, and the tracepoint's thread that has no samples) and text; begin/end pairs are
/// spans of their thread, nested ones in the next lane, an unclosed one open; the capture's
/// own markers (start, lost, exit) stay the timeline's full-height lines.
#[test]
fn write_html_marks_in_data_spans_paired_per_thread() {
    let mut out = Vec::new();
    write(&marked_fixture(), None, &mut out).unwrap();
    let data = data_of(&String::from_utf8(out).unwrap());
    let (marks, spans) = page_marks(&data);
    assert_eq!(marks.len(), 32);
    assert!(marks.windows(2).all(|w| w[0].0 <= w[1].0), "time order");
    assert_eq!(marks[0], (0, 0, "B|100|phase 1".to_owned()));
    let tp = marks.iter().find(|m| m.2 == "len=4096 hits=3").unwrap();
    assert_eq!(tp.0, 820_000_000);
    // pid 100 tid 100 is the profile's thread 0; 200/201 was never sampled.
    assert_eq!(
        data["marks"]["threads"],
        serde_json::json!([[100, 100, 0], [200, 201, -1]])
    );
    assert_eq!(tp.1, 1);
    assert_eq!(
        data["marks"]["events"],
        serde_json::json!(["ftrace:print", "mychardrv:cache_traverse"])
    );
    let text_of = |i: i64| marks[i as usize].2.clone();
    let named: Vec<(String, String, String, u64)> = spans
        .iter()
        .map(|(name, b, e, lane)| {
            let end = if *e < 0 {
                "open".to_owned()
            } else {
                text_of(*e)
            };
            (name.clone(), text_of(*b as i64), end, *lane)
        })
        .collect();
    let want = |n: &str, b: &str, e: &str, l: u64| (n.to_owned(), b.to_owned(), e.to_owned(), l);
    assert_eq!(
        named,
        vec![
            want("phase 1", "B|100|phase 1", "E|100|phase 1", 0),
            want("phase 2", "B|100|phase 2", "E|100|phase 2", 0),
            want("load", "B|100|load", "E|100|load", 1),
            want("phase 3", "B|100|phase 3", "E|100|phase 3", 0),
            want("never ends", "B|100|never ends", "open", 1),
        ]
    );
    let kinds: Vec<&str> = data["time"]["markers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m[1].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["start", "lost", "exit"]);
}

/// 10,000 marks (a frame loop's begin/end pairs and a plain mark per frame, texts all
/// different) keep the page small: the marks' columns and strings, not an object per mark.
#[test]
fn write_html_10k_marks_page_stays_compact() {
    let base = {
        let mut out = Vec::new();
        write(&timed_fixture(), None, &mut out).unwrap();
        out.len()
    };
    let mut profile = timed_fixture();
    for frame in 0..3334u64 {
        let at = frame * 290;
        for (k, text) in [
            "B|100|frame".to_owned(),
            format!("frame {frame} queued 17 buffers"),
            "E|100|frame".to_owned(),
        ]
        .iter()
        .enumerate()
        {
            profile
                .meta
                .markers
                .push(mark(0, 100, 100, "ftrace:print", text));
            profile.meta.markers.last_mut().unwrap().time = at * 1000 + k as u64 * 90_000;
        }
    }
    profile.meta.markers.sort_by_key(|m| m.time);
    let mut out = Vec::new();
    write(&profile, None, &mut out).unwrap();
    let data = data_of(&String::from_utf8(out.clone()).unwrap());
    let (marks, spans) = page_marks(&data);
    assert_eq!((marks.len(), spans.len()), (10_002, 3334));
    let per_mark = (out.len() - base) as f64 / marks.len() as f64;
    eprintln!(
        "10,002 marks: page {} bytes, {} without marks, {per_mark:.1} bytes per mark",
        out.len(),
        base
    );
    // A JSON object per mark ({"t":..,"cpu":..,"tid":..,"text":".."}) takes about 80.
    assert!(per_mark < 40.0, "{per_mark:.1} bytes per mark");
}

/// Runs marks_check.py (chromium-driver, selenium) on `page` with `args`; what it found.
fn marks_check(
    page: &std::path::Path,
    shots: &std::path::Path,
    args: &[&str],
) -> serde_json::Value {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/src/html/marks_check.py");
    // Debian's python3: python3-selenium is installed for it, not for other interpreters.
    let out = std::process::Command::new("/usr/bin/python3")
        .arg(script)
        .arg(page)
        .arg(shots)
        .args(args)
        .output()
        .expect("/usr/bin/python3 runs (apt-get install python3-selenium chromium-driver)");
    assert!(
        out.status.success(),
        "marks_check.py failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("marks_check.py prints JSON")
}

/// The mark rows of [`marked_fixture`]'s page: the app thread's with its spans and ticks and
/// the tracepoint thread's, both painted; hovering names the span under the pointer.
fn mark_rows_ok(got: &serde_json::Value) {
    let rows = got["markRows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "a mark row per marking thread: {rows:?}");
    // Ticks: 20 frames, the end that closed nothing, the markup line.
    assert_eq!(
        (rows[0]["spans"].as_u64(), rows[0]["ticks"].as_u64()),
        (Some(5), Some(22)),
        "{rows:?}"
    );
    assert!(rows[0]["label"].as_str().unwrap().starts_with("app 100"));
    assert!(rows.iter().all(|r| r["paintedPixels"].as_u64() > Some(0)));
    let tip = got["tip"].as_str().expect("a tip over the mark row");
    assert!(tip.contains("span phase 1 600.000 ms"), "{tip}");
}

/// In Chromium at 1366×768 (chromium-driver, selenium): the app thread's mark row shows the
/// three phases as spans and hovering it names what is under the pointer; the Log tab lists
/// every mark, its filter keeps the phases' marks, and clicking phase 2's begin selects
/// 0.70..0.95 s on the timeline, so the functions table shows that phase's driver checksum
/// on top; clicking a plain mark selects 5 bins either side of its bin.
#[test]
fn render_html_chromium_log_click_selects_span() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("report.html");
    let mut html = Vec::new();
    write(&marked_fixture(), None, &mut html).unwrap();
    std::fs::write(&path, html).unwrap();
    let shots = std::env::var_os("KPROF_KEEP_SCREENSHOT_DIR")
        .map_or_else(|| dir.path().to_owned(), std::path::PathBuf::from);
    std::fs::create_dir_all(&shots).unwrap();
    let args = ["1366x768", "phase", "B|100|phase 2", "frame 6"];
    let got = marks_check(&path, &shots, &args);
    mark_rows_ok(&got);

    let all = got["logAll"].as_array().unwrap();
    assert_eq!(all.len(), 32);
    assert!(
        all.iter().any(|r| r[4] == HOSTILE_MARK),
        "markup shown as text"
    );
    assert_ne!(got["title"], "pwned");
    let layout = &got["logLayout"];
    assert!(
        layout["scrollWidth"].as_u64() <= layout["clientWidth"].as_u64(),
        "the Log tab overflows: {layout}"
    );
    let filtered = got["logFiltered"].as_array().unwrap();
    assert_eq!(filtered.len(), 6, "{filtered:?}");
    assert_eq!(got["count"], "6 of 32 marks");
    assert_eq!(filtered[2][0], "0.700000000");
    assert_eq!(filtered[2][4], "B|100|phase 2");

    assert_eq!(got["before"]["window"]["start"], 0);
    let window = &got["after"]["window"];
    assert_eq!(
        (window["start"].as_u64(), window["end"].as_u64()),
        (Some(700_000_000), Some(950_000_000))
    );
    assert_eq!(
        got["after"]["hash"],
        "#window=0.700000000..0.950000000&tab=log"
    );
    assert_eq!(
        got["after"]["self"],
        serde_json::json!({"mychardrv.ko:mychardrv_checksum": 25})
    );
    let selected = got["selectedRow"].as_str().unwrap();
    assert!(selected.contains("B|100|phase 2"), "{selected}");
    let first = got["firstFunction"].as_str().unwrap();
    assert!(first.contains("mychardrv_checksum"), "{first}");
    // frame 6 at 305 ms is in bin 152 of 2 ms: bins 147..158.
    let window = &got["afterMark"]["window"];
    assert_eq!(
        (window["start"].as_u64(), window["end"].as_u64()),
        (Some(294_000_000), Some(316_000_000))
    );
    let console: Vec<&serde_json::Value> = got["console"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["level"] == "SEVERE" || e["level"] == "WARNING")
        .collect();
    assert!(console.is_empty(), "console messages: {console:?}");
}

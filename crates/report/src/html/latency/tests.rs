//! The page's latency data, and the Latency tab and timeline rows in headless Chromium.

use kprof_symbols::latency::Call;
use serde_json::Value;

use super::*;
use crate::html::tests::{data_of, timed_fixture, unpack};
use crate::test_support::chromium::{assert_non_blank_png, chromium_url};
use crate::test_support::fixture;

/// [`timed_fixture`] (samples over 1 s: `compute` first, the driver at 0.70–0.95 s) with the
/// fixture's timed calls and lock waits.
fn latency_fixture() -> Profile {
    let mut p = timed_fixture();
    fixture::add_latency(&mut p);
    p
}

fn page_data(p: &Profile) -> (String, Value) {
    let mut out = Vec::new();
    crate::html::write(p, None, &mut out).unwrap();
    let html = String::from_utf8(out).unwrap();
    let data = data_of(&html);
    (html, data)
}

/// Bin-major columns of a function's bins summed: (count, total, max).
fn bin_sums(b: &Value) -> (u64, u64, u64) {
    let c = unpack(&b["c"]);
    let total: u64 = unpack(&b["total"]).iter().sum();
    let max = unpack(&b["max"]).into_iter().max().unwrap_or(0);
    (c.iter().sum(), total, max)
}

/// Every call is in the data as a span with its thread and lane (a nested call in the next
/// lane), and the bins sum to the whole capture's statistics; the waits carry their labels
/// and their groups' bins.
#[test]
fn write_html_latency_data_spans_and_bins() {
    let (_, data) = page_data(&latency_fixture());
    let l = &data["latency"];
    let drv = &l["functions"][0];
    assert_eq!(
        (drv["name"].as_str(), drv["unit"].as_str()),
        (Some("mychardrv_write"), Some("µs"))
    );
    assert_eq!(drv["stats"]["count"], 19);
    assert_eq!(drv["spans"]["n"], 19);
    assert_eq!(drv["dropped"], 0);
    assert_eq!(bin_sums(&drv["bins"]), (19, 317_000, 150_000));
    assert_eq!(drv["hist"][0], serde_json::json!([0, 1, 1]));
    let compute = &l["functions"][1];
    let lanes = unpack(&compute["spans"]["lane"]);
    let depth = unpack(&compute["spans"]["depth"]);
    // 0, 100, 200, 300 (20 ms) and 305 ms (inside it): the nested one in lane 1.
    assert_eq!((lanes, depth), (vec![0, 0, 0, 0, 1], vec![0, 0, 0, 0, 1]));
    assert_eq!(
        unpack(&compute["spans"]["thread"]),
        [0; 5],
        "zigzag 0: thread 0"
    );
    let w = &l["waits"];
    assert_eq!(w["spans"]["n"], 5);
    assert_eq!(
        w["labels"],
        serde_json::json!(["futex 0x7ffd1000", "mutex dev+0x0 [mychardrv]"])
    );
    // thread 1 (worker) zigzag-encoded is 2.
    assert_eq!(unpack(&w["spans"]["thread"]), [2, 2, 0, 0, 0]);
    assert_eq!(w["locks"][0]["name"], "0x7ffd1000");
    assert_eq!(
        unpack(&w["locks"][1]["bins"]["count"]).iter().sum::<u64>(),
        3
    );
    assert_eq!(w["callers"][1]["name"], "mychardrv_write");
    assert_eq!(w["callers"][1]["path"][3], "mychardrv_write [mychardrv.ko]");
    // Without calls or waits: null.
    let (_, data) = page_data(&timed_fixture());
    assert!(data["latency"].is_null());
}

/// Past [`MAX_SPANS`] calls, the slowest are drawn and the rest counted; the bins still
/// count every call.
#[test]
fn write_html_latency_spans_capped_slowest_kept() {
    let mut p = latency_fixture();
    let f = &mut p.latency.as_mut().unwrap().functions[0];
    let stack = f.calls[0].stack;
    f.calls = (0..MAX_SPANS as u64 + 7)
        .map(|i| Call {
            start: i * 50_000,
            duration: 1_000 + (i * 7919) % 100_000,
            stack,
            cpu: 0,
            depth: 0,
        })
        .collect();
    let mut all: Vec<u64> = f.calls.iter().map(|c| c.duration).collect();
    all.sort_unstable();
    let (html, data) = page_data(&p);
    let drv = &data["latency"]["functions"][0];
    assert_eq!(
        (drv["spans"]["n"].as_u64(), drv["dropped"].as_u64()),
        (Some(MAX_SPANS as u64), Some(7))
    );
    let kept_min = unpack(&drv["spans"]["dur"]).into_iter().min().unwrap();
    assert!(kept_min >= all[6], "the 7 fastest left out");
    assert_eq!(bin_sums(&drv["bins"]).0, MAX_SPANS as u64 + 7);
    eprintln!("page with 10,007 calls: {} bytes", html.len());
    assert!(html.len() < 400_000, "{} bytes", html.len());
}

/// The lines of the DOM's element whose start tag contains `open`, to its `close`.
fn element<'a>(dom: &'a str, open: &str, close: &str) -> &'a str {
    let at = dom
        .find(open)
        .unwrap_or_else(|| panic!("{open} in the DOM"));
    let rest = &dom[at..];
    &rest[..rest.find(close).map_or(rest.len(), |e| e + close.len())]
}

/// Where screenshots go: `KPROF_KEEP_SCREENSHOT_DIR` to look at them, else the test's dir.
fn shots(dir: &std::path::Path) -> std::path::PathBuf {
    let shots = std::env::var_os("KPROF_KEEP_SCREENSHOT_DIR")
        .map_or_else(|| dir.to_owned(), std::path::PathBuf::from);
    std::fs::create_dir_all(&shots).unwrap();
    shots
}

/// The whole capture's Latency tab: each function's statistics and histogram, the lock
/// tables with the callers' paths.
fn latency_tab_whole_ok(dom: &str) {
    assert!(
        dom.contains(
            "<button data-pane=\"latency\" id=\"latency-tab\" class=\"on\">Latency</button>"
        ),
        "the tab is shown and on"
    );
    let drv = element(
        dom,
        "<div class=\"lat-fn\" data-function=\"mychardrv_write\"",
        "</svg>",
    );
    assert!(
        drv.contains(
            "19 calls, total 317 µs, mean 16.7 µs, p50 10.0 µs, p90 20.0 µs, p99 150 µs, \
             max 150 µs"
        ),
        "{drv}"
    );
    assert!(drv.contains("the kernel lost 3 of its entry and return records"));
    let bars = drv.matches("<g class=\"bar\">").count();
    assert_eq!(bars, 8, "a bar per bucket, 0 -> 255 µs: {drv}");
    assert!(drv.contains("<title>8 – 15 µs: 8 calls</title>"), "{drv}");
    let compute = element(dom, "data-function=\"/usr/bin/app:compute\"", "</div>");
    assert!(
        compute.contains("2 calls began before the capture"),
        "{compute}"
    );
    let locks = element(
        dom,
        "<table class=\"lat-locks\" data-what=\"Lock\"",
        "</table>",
    );
    assert!(
        locks.contains("<code>0x7ffd1000</code>") && locks.contains("<td class=\"n\">3.00 ms</td>"),
        "{locks}"
    );
    let callers = element(
        dom,
        "<table class=\"lat-locks\" data-what=\"Caller\"",
        "</table>",
    );
    assert!(
        callers.contains("<code>worker</code>")
            && callers.contains("worker [app] /src/app/worker.c:21"),
        "{callers}"
    );
}

/// The timeline's latency rows: the app thread's right under its sample track, the worker's
/// (never sampled) after the tracks; both painted.
fn latency_rows_ok(dom: &str) {
    let rows: Vec<&str> = dom
        .match_indices("class=\"track latency\"")
        .map(|(at, _)| element(&dom[at..], "class", ">"))
        .collect();
    assert_eq!(
        rows.len(),
        2,
        "a row for the app thread and the worker: {rows:?}"
    );
    let counts = [
        "data-lat-thread=\"0\" data-calls=\"24\" data-waits=\"3\"",
        "data-lat-thread=\"1\" data-calls=\"0\" data-waits=\"2\"",
    ];
    for (row, want) in rows.iter().zip(counts) {
        assert!(row.contains(want), "{row}");
        let drawn = row
            .split("data-drawn=\"")
            .nth(1)
            .and_then(|s| s.split('"').next())
            .and_then(|n| n.parse::<u32>().ok());
        assert!(drawn.is_some_and(|n| n > 0), "spans painted: {row}");
    }
    let track = dom.find("data-thread=\"0\"").unwrap();
    let lat = dom.find("data-lat-thread=\"0\"").unwrap();
    // Between the two attributes: the latency row's own start tag only.
    assert!(
        track < lat && dom[track..lat].matches("class=\"track ").count() == 1,
        "latency row under the thread's track"
    );
}

/// In Chromium, the Latency tab shows each function's statistics and histogram and the lock
/// tables; the timeline has a row of calls and waits under the app thread's track and one
/// for the worker thread, painted; a `#window=` link (as the drag-selection writes it)
/// filters the tab to the calls and waits that began in it.
#[test]
fn render_html_chromium_latency_tab_and_timeline_rows() {
    let dir = tempfile::tempdir().unwrap();
    let shots = shots(dir.path());
    // Beside its screenshots, to look at it too.
    let path = shots.join("latency.html");
    let mut html = Vec::new();
    crate::html::write(&latency_fixture(), None, &mut html).unwrap();
    std::fs::write(&path, html).unwrap();
    let shot = shots.join("latency-whole.png");
    let url = format!("file://{}#tab=latency", path.display());
    let dom = chromium_url(&url, &shot, dir.path());
    assert_non_blank_png(&shot);
    latency_tab_whole_ok(&dom);
    latency_rows_ok(&dom);

    let url = format!(
        "file://{}#window=0.700000000..0.950000000&tab=latency",
        path.display()
    );
    let shot = shots.join("latency-window.png");
    let dom = chromium_url(&url, &shot, dir.path());
    let drv = element(&dom, "data-function=\"mychardrv_write\"", ">");
    assert!(drv.contains("data-count=\"19\""), "{drv}");
    let compute = element(&dom, "data-function=\"/usr/bin/app:compute\"", "</div>");
    assert!(
        compute.contains("no calls began in the window")
            && compute.contains("(a count of the whole capture)"),
        "{compute}"
    );
    let locks = element(
        &dom,
        "<table class=\"lat-locks\" data-what=\"Lock\"",
        "</table>",
    );
    assert!(
        !locks.contains("0x7ffd1000") && locks.contains("dev+0x0 [mychardrv]"),
        "only the driver's waits: {locks}"
    );
}

/// A capture of timed calls and waits alone (`run --no-sample`: no sampled event) still gets
/// a page: its timeline spans the calls, the Latency tab is the one shown, the sample views'
/// tabs are hidden.
#[test]
fn render_html_chromium_latency_without_samples() {
    let mut p = latency_fixture();
    p.events.clear();
    p.samples.clear();
    for s in &mut p.stacks {
        (s.counts, s.periods) = (Vec::new(), Vec::new());
    }
    p.meta.duration_ns = 0;
    p.meta.markers.clear();
    // Names from the command line and the kernel's symbols stay text.
    let hostile = "</script><img src=x onerror=\"document.title='pwned'\">";
    p.latency.as_mut().unwrap().functions[1].name = hostile.to_owned();
    p.contention.as_mut().unwrap().waits[4].lock_name = Some(hostile.to_owned());
    let (html, data) = page_data(&p);
    assert!(html.contains("<title>kprof report: timed calls and lock waits</title>"));
    assert!(
        data["time"]["count"].as_u64() > Some(0),
        "a timeline over the calls"
    );
    assert_eq!(
        crate::html::timeline::duration(&p),
        916_150_000,
        "the last call's end"
    );

    let dir = tempfile::tempdir().unwrap();
    let shots = shots(dir.path());
    let path = shots.join("latency-no-samples.html");
    std::fs::write(&path, &html).unwrap();
    let shot = shots.join("latency-no-samples.png");
    let dom = chromium_url(&format!("file://{}", path.display()), &shot, dir.path());
    assert!(
        dom.contains("data-ready=\"1\""),
        "the script ran to its end"
    );
    assert!(
        dom.contains("id=\"latency-tab\" class=\"on\""),
        "the Latency tab first"
    );
    assert!(
        dom.contains("<button data-pane=\"functions\" class=\"\" hidden=\"\">"),
        "{}",
        element(&dom, "<nav", "</nav>")
    );
    latency_rows_ok_without_tracks(&dom);
    assert!(dom.contains("19 calls, total 317 µs"));
    assert!(
        !dom.contains("<img src=x") && dom.contains("&lt;img src=x"),
        "markup shown as text"
    );
    assert!(!dom.contains("<title>pwned</title>"));
    // Nothing at all: still refused.
    let mut out = Vec::new();
    assert!(crate::html::write(&Profile::default(), None, &mut out).is_err());
}

/// Rows for both threads, painted, with no sample track above them.
fn latency_rows_ok_without_tracks(dom: &str) {
    assert!(!dom.contains("class=\"track thread\""));
    let rows = dom.matches("class=\"track latency\"").count();
    assert_eq!(rows, 2);
    assert!(!dom.contains("data-drawn=\"0\""), "every row painted");
}

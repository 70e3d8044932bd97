#!/usr/bin/python3
"""Drives the HTML viewer in Debian's chromium through chromium-driver (selenium), as a person
would: loads the page, checks its layout at a width, drags ranges on the timeline with the
mouse, and prints what it found as one JSON object. The Rust test judges it.

Usage: viewer_check.py PAGE.html SHOTS_DIR WIDTHxHEIGHT [FROM:TO ...]
  FROM:TO are drags across the timeline as fractions of its width (0.05:0.45).
"""
import json
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait


def driver(width, height):
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--force-device-scale-factor=1",
                "--window-size=%d,%d" % (width, height)):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_page_load_timeout(120)
    d.set_script_timeout(120)
    # The window size above includes browser chrome in some versions: set the viewport itself.
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    return d


def full_shot(d, path):
    """A screenshot of the whole page, not just the viewport."""
    import base64
    shot = d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))


LAYOUT = """
var out = {};
var root = document.documentElement;
out.scrollWidth = root.scrollWidth; out.clientWidth = root.clientWidth;
// Elements reaching past the right edge of the viewport, outside scroll boxes.
var wide = [];
document.querySelectorAll('body *').forEach(function (el) {
  if (el.closest('.scroll, .tree') || !el.getClientRects().length) return;
  var r = el.getBoundingClientRect();
  if (r.right > root.clientWidth + 1) wide.push(el.tagName + (el.id ? '#' + el.id : '') + '.' + el.className + ' ' + Math.round(r.right));
});
out.wide = wide.slice(0, 10);
var rows = document.querySelectorAll('#functions-table tbody tr');
out.rowHeights = Array.prototype.map.call(rows, function (r) { return r.getBoundingClientRect().height; });
var cell = document.querySelector('#functions-table tbody td');
out.lineHeight = cell ? parseFloat(getComputedStyle(cell).lineHeight) || 18 : 0;
out.headCells = document.querySelectorAll('#functions-table thead th').length;
out.bodyCells = rows.length ? rows[0].cells.length : 0;
out.cpuTracks = document.querySelectorAll('#tl .track.cpu').length;
out.threadTracks = Array.prototype.map.call(document.querySelectorAll('#tl .track.thread'), function (t) {
  var cv = t.querySelector('canvas'), g = cv.getContext('2d');
  var px = g.getImageData(0, 0, cv.width, cv.height).data, n = 0;
  for (var i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
  // Blocked time (captures recorded with --off-cpu): what the track draws in its lower strip.
  var bs = t.getAttribute('data-blocked-s-ns'), bd = t.getAttribute('data-blocked-d-ns');
  return {thread: +t.getAttribute('data-thread'), label: t.textContent, paintedPixels: n,
          blockedS: bs === null ? null : +bs, blockedD: bd === null ? null : +bd,
          title: t.querySelector('.lbl').title};
});
out.legend = (document.querySelector('#tl .legend') || {}).textContent || '';
out.unitNote = (document.getElementById('unit-note') || {}).textContent || '';
out.heads = Array.prototype.map.call(document.querySelectorAll('#functions-table thead th'), function (h) { return h.textContent; });
out.firstRow = rows.length ? rows[0].textContent : '';
out.timelineDrawn = performance.getEntriesByName('kprof-timeline-drawn').length > 0;
return out;
"""


FLAME = """
var c = document.getElementById('flame').getBoundingClientRect();
var b = document.getElementById('flame-box').getBoundingClientRect();
var bottom = Math.min(b.bottom, window.innerHeight), top = Math.max(b.top, 0);
// The roots' row: the top one (an icicle).
return {canvasHeight: c.height, viewport: window.innerHeight, rootsTop: c.top,
        rootsVisible: c.top >= top - 1 && c.top + 19 <= bottom + 1};
"""


def layout(d):
    return d.execute_script(LAYOUT)


def drag(d, frm, to):
    # The timeline is redrawn (and its layer replaced) after a window changes or the page
    # settles: an element found just before may be stale by the time it is measured.
    for attempt in range(5):
        try:
            return drag_once(d, frm, to)
        except StaleElementReferenceException:
            if attempt == 4:
                raise
            time.sleep(0.2)


def drag_once(d, frm, to):
    layer = d.find_element(By.ID, "tl-layer")
    w = layer.size["width"]
    h = layer.size["height"]
    # Offsets are from the element's centre in selenium 4.
    x0 = int(w * frm) - w // 2
    x1 = int(w * to) - w // 2
    y = min(30, h // 2) - h // 2
    ActionChains(d).move_to_element_with_offset(layer, x0, y).click_and_hold() \
        .move_by_offset((x1 - x0) // 2, 0).move_by_offset(x1 - x0 - (x1 - x0) // 2, 0).release().perform()
    return d.execute_script(
        "return {window: kprofView.window(), self: kprofView.selfCounts(0), totals: kprofView.totals(),"
        " hash: location.hash, first: (document.querySelector('#functions-table tbody tr') || {}).textContent,"
        " label: document.getElementById('window').textContent};")


def main():
    page, shots, size = sys.argv[1], sys.argv[2], sys.argv[3]
    width, height = (int(v) for v in size.split("x"))
    d = driver(width, height)
    result = {"width": width}
    try:
        d.get("file://" + page)
        WebDriverWait(d, 120).until(lambda d: d.execute_script("return document.body.getAttribute('data-ready')"))
        result["layout"] = layout(d)
        d.save_screenshot("%s/viewer-%d-first-screen.png" % (shots, width))
        full_shot(d, "%s/viewer-%d.png" % (shots, width))
        tabs = {}
        for tab in ("calltree", "flamegraph", "source", "log", "images", "functions"):
            d.find_element(By.CSS_SELECTOR, "#tabs button[data-pane=%s]" % tab).click()
            lay = d.execute_script("return {scrollWidth: document.documentElement.scrollWidth,"
                                   " clientWidth: document.documentElement.clientWidth};")
            tabs[tab] = lay
            if tab == "flamegraph":
                # Where the flame graph opens: its roots on the first screen, without
                # scrolling the page.
                lay["flame"] = d.execute_script(FLAME)
                d.save_screenshot("%s/viewer-%d-flamegraph-first-screen.png" % (shots, width))
            if tab != "functions":
                full_shot(d, "%s/viewer-%d-%s.png" % (shots, width, tab))
        result["tabs"] = tabs
        result["drags"] = []
        for spec in sys.argv[4:]:
            frm, to = (float(v) for v in spec.split(":"))
            got = drag(d, frm, to)
            full_shot(d, "%s/viewer-%d-window-%s.png" % (shots, width, spec.replace(":", "-")))
            # The fragment keeps the window: a reload shows the same one.
            d.refresh()
            WebDriverWait(d, 120).until(lambda d: d.execute_script("return document.body.getAttribute('data-ready')"))
            got["afterReload"] = d.execute_script("return kprofView.window();")
            result["drags"].append(got)
        # The idle loop put back (the window of the last drag stays): the CLI's counts
        # without --no-idle.
        d.find_element(By.ID, "show-idle").click()
        result["idle"] = d.execute_script(
            "return {window: kprofView.window(), self: kprofView.selfCounts(0), hash: location.hash};")
        result["console"] = [e for e in d.get_log("browser")]
    finally:
        d.quit()
    json.dump(result, sys.stdout)


if __name__ == "__main__":
    main()

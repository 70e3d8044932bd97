#!/usr/bin/python3
"""Drives the HTML page's marks in Debian's chromium through chromium-driver (selenium), as a
person would: loads the page at a size, screenshots it, opens the Log tab, filters it, clicks
the row whose text is ROW_TEXT and prints what it found as one JSON object (the Rust test in
html/tests.rs judges it).

Usage: marks_check.py PAGE.html SHOTS_DIR WIDTHxHEIGHT FILTER ROW_TEXT [MARK_TEXT]
  MARK_TEXT: then the Log is filtered to that text and its first row clicked too.
"""
import base64
import json
import sys

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
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
    # The window size includes browser chrome in some versions: set the viewport itself.
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    return d


def full_shot(d, path):
    shot = d.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    with open(path, "wb") as f:
        f.write(base64.b64decode(shot["data"]))


ROWS = """
return Array.prototype.map.call(document.querySelectorAll('#log-table tbody tr'), function (tr) {
  return Array.prototype.map.call(tr.cells, function (td) { return td.textContent; });
});
"""

MARK_ROWS = """
return Array.prototype.map.call(document.querySelectorAll('#tl .track.marks'), function (t) {
  var cv = t.querySelector('canvas'), g = cv.getContext('2d');
  var px = g.getImageData(0, 0, cv.width, cv.height).data, n = 0;
  for (var i = 3; i < px.length; i += 4) if (px[i] > 0) n++;
  return {label: t.textContent, ticks: +t.getAttribute('data-ticks'), spans: +t.getAttribute('data-spans'),
          paintedPixels: n};
});
"""


def view(d):
    return d.execute_script(
        "return {window: kprofView.window(), self: kprofView.selfCounts(0), hash: location.hash,"
        " label: document.getElementById('window').textContent, marks: kprofView.marks()};")


def main():
    page, shots, size, query, row_text = sys.argv[1:6]
    width, height = (int(v) for v in size.split("x"))
    d = driver(width, height)
    out = {}
    try:
        d.get("file://" + page)
        WebDriverWait(d, 120).until(lambda d: d.execute_script("return document.body.getAttribute('data-ready')"))
        d.save_screenshot("%s/marks-%d-first-screen.png" % (shots, width))
        out["markRows"] = d.execute_script(MARK_ROWS)
        out["before"] = view(d)
        # Hovering a mark row's first span lane (under the 6 px tick strip) shows what is there.
        layer = d.find_element(By.ID, "tl-layer")
        row = d.find_element(By.CSS_SELECTOR, "#tl .track.marks")
        lr, rr = layer.rect, row.rect
        # Offsets are from the element's centre in selenium 4.
        ActionChains(d).move_to_element_with_offset(
            layer, int(lr["width"] * 0.3 - lr["width"] / 2), int(rr["y"] - lr["y"] + 12 - lr["height"] / 2)).perform()
        out["tip"] = d.execute_script("var t = document.getElementById('tl-tip'); return t && !t.hidden ? t.textContent : null;")
        d.find_element(By.CSS_SELECTOR, "#tabs button[data-pane=log]").click()
        out["logAll"] = d.execute_script(ROWS)
        out["title"] = d.title
        out["logLayout"] = d.execute_script("return {scrollWidth: document.documentElement.scrollWidth,"
                                            " clientWidth: document.documentElement.clientWidth};")
        d.find_element(By.ID, "log-filter").send_keys(query)
        out["logFiltered"] = d.execute_script(ROWS)
        out["count"] = d.find_element(By.ID, "log-count").text
        target = [tr for tr in d.find_elements(By.CSS_SELECTOR, "#log-table tbody tr")
                  if row_text in tr.text][0]
        target.click()
        out["after"] = view(d)
        out["selectedRow"] = d.execute_script(
            "var r = document.querySelector('#log-table tbody tr.on'); return r ? r.textContent : null;")
        full_shot(d, "%s/marks-%d-log.png" % (shots, width))
        d.find_element(By.CSS_SELECTOR, "#tabs button[data-pane=functions]").click()
        out["firstFunction"] = d.execute_script(
            "return (document.querySelector('#functions-table tbody tr') || {}).textContent;")
        d.execute_script("window.scrollTo(0, 0);")
        d.save_screenshot("%s/marks-%d-selected.png" % (shots, width))
        if len(sys.argv) > 6:
            d.find_element(By.CSS_SELECTOR, "#tabs button[data-pane=log]").click()
            box = d.find_element(By.ID, "log-filter")
            box.clear()
            box.send_keys(sys.argv[6])
            d.find_element(By.CSS_SELECTOR, "#log-table tbody tr").click()
            out["afterMark"] = view(d)
        out["console"] = [e for e in d.get_log("browser")]
    finally:
        d.quit()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()

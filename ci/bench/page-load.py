#!/usr/bin/python3
"""Opens a page in headless Debian chromium (chromium-driver + selenium) RUNS times and prints
one line per run: the ms from navigation start until the page is ready (MODE "viewer": the
kprof viewer's `kprof-timeline-drawn` performance mark, set once the timeline is drawn and the
views are computed; MODE "load": the load event, for a page without that mark, such as an SVG).

Usage: page-load.py FILE RUNS MODE
"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def main():
    page, runs, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1366,768"):
        opts.add_argument(arg)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_page_load_timeout(600)
    try:
        for _ in range(runs):
            d.get("about:blank")
            d.get("file://" + page)  # returns after the load event
            if mode == "viewer":
                deadline = time.time() + 600
                while True:
                    ms = d.execute_script(
                        "var m = performance.getEntriesByName('kprof-timeline-drawn');"
                        "return m.length ? m[0].startTime : null;")
                    if ms is not None or time.time() > deadline:
                        break
                    time.sleep(0.05)
                views = d.execute_script(
                    "var m = performance.getEntriesByName('kprof-views-ready');"
                    "return m.length ? m[0].startTime : null;")
                print("%.0f ms timeline, %.0f ms all views" % (ms, views))
            else:
                ms = d.execute_script(
                    "var t = performance.getEntriesByType('navigation')[0]; return t.loadEventEnd;")
                print("%.0f ms" % ms)
            sys.stdout.flush()
    finally:
        d.quit()


if __name__ == "__main__":
    main()

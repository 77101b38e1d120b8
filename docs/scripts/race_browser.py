"""The landing race as a person runs it: start app.py, open the page in headless Chromium (Debian's) on this same
machine, click Race N times (default 3) with the page's defaults and read the cards (speculative and plain tok/s,
speedup). A screenshot of the last race goes to out/screenshots/race-browser.png.
THEORY=1 then opens the Theory tab and screenshots out/screenshots/theory-browser.png. COMPARE=1 opens the Compare
tab, clicks Compare ▶ once with its defaults (the Race tab's prompt, every method), prints the wall time from the click to "Done", the table and the verdict, and screenshots out/screenshots/compare.png.
It races once the page has measured the cost profile (WAIT_PROFILE=0: at once, racing beside the measurement).
Run from the repo root: N=3 python docs/scripts/race_browser.py   (under ../shared/tools/avx2 for the AVX2 setting)"""
import os
import re
import time

from playwright.sync_api import sync_playwright

from serve import app_server

with app_server() as url:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector("text=Models ready", timeout=900_000)
        if os.environ.get("WAIT_PROFILE", "1") == "1":  # race once the cost profile is measured (0: at once)
            page.wait_for_function("!document.body.innerText.includes('Measuring this machine')", timeout=900_000)
        os.makedirs("out/screenshots", exist_ok=True)
        for i in range(int(os.environ.get("N", "3"))):
            page.get_by_role("button", name="Race ▶").click()
            page.wait_for_function("!document.body.innerText.includes('Done. Timed')", timeout=60_000)
            page.wait_for_selector("text=Done. Timed", timeout=900_000)
            text = page.inner_text("body")
            spec, plain, speedup = (re.search(rf"([\d.]+)×?\s*\n\s*{label}", text).group(1)
                                    for label in ("speculative tok/s", "plain tok/s", "speedup"))
            print(f"race {i}: speculative {spec} tok/s, plain {plain} tok/s, speedup {speedup}x", flush=True)
        page.screenshot(path="out/screenshots/race-browser.png", full_page=True)
        if os.environ.get("THEORY") == "1":  # the Theory tab after the races: the cost curves and the device bars
            page.get_by_role("tab", name="Theory").click()
            page.wait_for_selector("text=carried to each device", timeout=120_000)
            page.wait_for_timeout(2000)
            page.screenshot(path="out/screenshots/theory-browser.png", full_page=True)
        if os.environ.get("COMPARE") == "1":
            page.get_by_role("tab", name="Compare").click()
            t = time.time()
            page.get_by_role("button", name="Compare ▶").click()
            page.wait_for_selector("text=/Done: \\d+ runs/", timeout=1_800_000)
            print(f"compare: {time.time() - t:.0f} s from the click to Done", flush=True)
            page.wait_for_timeout(2000)
            panel = page.get_by_role("tabpanel").first.inner_text()
            print(panel[:3000], flush=True)
            page.screenshot(path="out/screenshots/compare.png", full_page=True)
        browser.close()

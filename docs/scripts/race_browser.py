"""The landing race as a person runs it: start app.py, open the page in headless Chromium (Debian's) on this same
machine, click Race N times (default 3) with the page's defaults and read the cards (speculative and plain tok/s,
speedup). A screenshot of the last race goes to out/screenshots/race-browser.png.
Run from the repo root: N=3 python docs/scripts/race_browser.py   (under ../shared/tools/avx2 for the AVX2 setting)"""
import os
import re

from playwright.sync_api import sync_playwright

from serve import app_server

with app_server() as url:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium",
                                     args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(url)
        page.wait_for_selector("text=Models ready", timeout=900_000)
        for i in range(int(os.environ.get("N", "3"))):
            page.get_by_role("button", name="Race ▶").click()
            page.wait_for_function("!document.body.innerText.includes('Done. Timed')", timeout=60_000)
            page.wait_for_selector("text=Done. Timed", timeout=900_000)
            text = page.inner_text("body")
            spec, plain, speedup = (re.search(rf"([\d.]+)×?\s*\n\s*{label}", text).group(1)
                                    for label in ("speculative tok/s", "plain tok/s", "speedup"))
            print(f"race {i}: speculative {spec} tok/s, plain {plain} tok/s, speedup {speedup}x", flush=True)
        os.makedirs("out/screenshots", exist_ok=True)
        page.screenshot(path="out/screenshots/race-browser.png", full_page=True)
        browser.close()

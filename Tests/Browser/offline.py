#!/usr/bin/env python3
"""The web UI offline, in headless Chromium (Selenium) against a live docketd with demo data:

  - john.doe signs in and opens My work and an item (INC0010001): the service worker keeps both;
  - docketd stops (the network to it is cut: every request is refused): My work and the item still show, each
    with a banner saying it is offline and as of when, without live updates; an item never opened says there is
    no copy of it here; Back and Forward move through the kept pages;
  - a comment typed on the kept item page is queued on the device (IndexedDB);
  - docketd starts again on the same port: the pages are live again, without the banner, and the queued comment is
    sent, once (with an Idempotency-Key, so that a lost answer does not add it twice);
  - signing out forgets the kept pages: stopped again, My work is not shown to whoever uses the browser next.

Usage: Tests/Browser/offline.py --binary PATH
"""
import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Offline"))
from kill_client import start_docketd as serve  # noqa: E402
from web_ui import Run, api, browser  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

INCIDENT = "cdb04ffc53247d4908555def767adca7"  # INC0010001, john's


def stop(process):
    process.terminate()
    process.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-offline-web-")
    process, port = serve(args.binary, folder)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        driver = browser()
        run = Run(driver, base, port, "/tmp")
        print("The web UI offline, in headless Chromium against", base, flush=True)

        run.step("john signs in; the service worker takes the pages; My work and INC0010001 are opened")
        run.sign_in()
        WebDriverWait(driver, 15).until(lambda d: d.execute_script("return !!navigator.serviceWorker.controller"))
        for path in ["/app/work", "/app/item/incident/" + INCIDENT, "/app/work"]:
            driver.get(base + path)
            run.until_text("main", "INC0010001")
        # The copies are kept (asynchronously) once the pages were answered.
        kept = ("return Promise.all(['docket-pages-v2:john.doe', 'docket-assets-v1'].map(n => caches.open(n).then(c => c.keys())))"
                ".then(l => l.flat().map(r => new URL(r.url).pathname))")
        WebDriverWait(driver, 15).until(lambda d: {"/app/work", "/app/item/incident/" + INCIDENT, "/app/assets/app.js",
                                                   "/app/assets/app.css"} <= set(d.execute_script(kept)))
        # Kept for john alone: no other person's pages cache exists.
        names = driver.execute_script("return caches.keys()")
        if [n for n in names if n.startswith("docket-pages-") and n != "docket-pages-v2:john.doe"]:
            sys.exit("pages are kept outside john's own cache: %s" % names)

        run.step("docketd stops: My work and the item still show, saying offline and as of when")
        stop(process)
        driver.get(base + "/app/work")
        run.until_text("main h1", "My work")
        run.until_text(".offline-banner", "Offline: this page as of")
        if "INC0010001" not in run.text("main"):
            sys.exit("My work offline does not list INC0010001")
        if driver.execute_script("return document.body.dataset.liveState") != "offline":
            sys.exit("the offline page tries to follow live changes")
        driver.find_element(By.PARTIAL_LINK_TEXT, "INC0010001").click()
        run.until_text("main", "Unable to connect to office wifi")
        run.until_text(".offline-banner", "Offline")
        run.step("a comment typed offline is queued on the device")
        driver.find_element(By.ID, "comment-text").send_keys("Typed in the lift, no signal")
        driver.find_element(By.CSS_SELECTOR, "form.comment button[name=element][value=comments]").click()
        run.until_text("form.comment .queued", "Queued: your comment will be sent when the connection is back")
        run.step("an item never opened: no copy here, said plainly")
        driver.get(base + "/app/item/incident/" + "0" * 32)
        run.until_text("main h1", "You are offline")
        run.step("Back and Forward move through the kept pages")
        driver.back()
        run.until_text("main", "Unable to connect to office wifi")
        driver.back()
        run.until_text("main h1", "My work")
        driver.forward()
        run.until_text("main", "Unable to connect to office wifi")

        run.step("docketd is back: the pages are live again, without the banner; the queued comment is sent, once")
        process, _ = serve(args.binary, folder, port)
        driver.get(base + "/app/work")
        run.until_text("main h1", "My work")
        if driver.find_elements(By.CSS_SELECTOR, ".offline-banner"):
            sys.exit("the banner stays once the network is back")
        run.live_open()
        run.until_text("#notices", "Sent the comment you wrote offline on")
        query = "/api/now/table/sys_journal_field?sysparm_query=element_id%3D" + INCIDENT + "%5Evalue%3DTyped%20in%20the%20lift%2C%20no%20signal"
        if len(api(port, "GET", query, user="admin")["result"]) != 1:
            sys.exit("the comment typed offline is not on the server once")
        driver.get(base + "/app/item/incident/" + INCIDENT)
        run.until_text("main", "Typed in the lift, no signal")
        driver.get(base + "/app/work")
        run.until_text("main h1", "My work")
        time.sleep(1)
        if len(api(port, "GET", query, user="admin")["result"]) != 1:
            sys.exit("the comment typed offline was sent twice")

        run.step("signing out forgets the kept pages")
        driver.find_element(By.CSS_SELECTOR, "form[action='/app/logout'] button").click()
        WebDriverWait(driver, 15).until(lambda d: d.find_elements(By.ID, "user_name"))
        WebDriverWait(driver, 15).until(lambda d: d.execute_script(
            "return caches.keys().then(k => !k.some(n => n.startsWith('docket-pages-')))"))
        stop(process)
        driver.get(base + "/app/work")
        body = driver.find_element(By.TAG_NAME, "body").text
        if "INC0010001" in body:
            sys.exit("after signing out, the kept My work is still shown")
        run.collect_console()
        # Refused connections while docketd was stopped are the point of this test, not errors of the page.
        errors = [e for e in run.console if e["level"] == "SEVERE" and e.get("source") != "network"
                  and "ERR_CONNECTION_REFUSED" not in e.get("message", "") and "Failed to fetch" not in e.get("message", "")]
        if errors:
            sys.exit("JavaScript console errors:\n" + "\n".join(e["message"] for e in errors))
        print("offline: all checks passed")
    finally:
        if driver:
            driver.quit()
        if process.poll() is None:
            stop(process)


if __name__ == "__main__":
    main()

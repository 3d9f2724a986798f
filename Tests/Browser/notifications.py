#!/usr/bin/env python3
"""Notifications in the web UI, in headless Chromium (Selenium) against a live docketd with demo data:

  - john.doe's bell counts unread notifications live: beth.anglin assigns him an incident through the Table API
    while My work is open, and the bell shows 1 (and a notice says what) without a reload;
  - the notifications page lists it; opening it marks it read and shows the incident; "Mark all as read" clears
    the rest; Back and Forward move through these pages without errors;
  - "What reaches you": john turns one rule off, and its notifications stop;
  - the web app is installable: its manifest and service worker load (scope /app/);
  - a push delivered to the service worker through the DevTools protocol (ServiceWorker.deliverPushMessage) shows
    a notification with the message's title and body, tagged with its id;
  - no error in the console.

Usage: Tests/Browser/notifications.py --binary PATH
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_ui import Run, api, browser, start, stop  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-notifications-")
    process, port = start(args.binary, folder)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        driver = browser()
        run = Run(driver, base, port, "/tmp")
        print("Notifications in headless Chromium against", base, flush=True)
        john = api(port, "GET", "/api/now/table/sys_user?sysparm_query=user_name%3Djohn.doe&sysparm_fields=sys_id")["result"][0]["sys_id"]

        run.step("john signs in; the bell shows nothing unread")
        run.sign_in()
        run.live_open()
        if driver.find_element(By.CSS_SELECTOR, "[data-unread]").is_displayed():
            sys.exit("the bell shows a count before anything happened")

        run.step("beth assigns john an incident: the bell counts it without a reload")
        run.mark_page()
        created = api(port, "POST", "/api/now/table/incident", {"short_description": "Printer on fire", "assigned_to": john})["result"]
        run.until_text("[data-unread]", "1")
        run.until_text("#notices", "was assigned to you")
        if not run.still_same_page():
            sys.exit("the page was reloaded")

        run.step("the notifications page lists it; opening it marks it read and shows the incident")
        driver.find_element(By.CSS_SELECTOR, "a.bell").click()
        run.until_text("main h1", "Notifications")
        run.until_text("#inbox", created["number"] + " was assigned to you")
        run.until_text("#inbox .summary", "1 unread")
        api(port, "PATCH", f"/api/now/table/incident/{created['sys_id']}", {"comments": "Extinguisher on its way"})
        run.until_text("#inbox", "commented on " + created["number"])
        run.until_text("#inbox .summary", "2 unread")
        driver.find_elements(By.CSS_SELECTOR, "#inbox li.unread a")[-1].click()
        run.until_text("main h1", created["number"])

        run.step("Back to the list: one read; Mark all as read; Forward to the item and Back again")
        driver.back()
        run.until_text("main h1", "Notifications")
        driver.refresh()
        run.until_text("#inbox .summary", "1 unread")
        driver.find_element(By.CSS_SELECTOR, "form[action='/app/notifications/read'] button").click()
        run.until_text("#inbox .summary", "Nothing unread")
        if driver.find_elements(By.CSS_SELECTOR, "#inbox li.unread"):
            sys.exit("Mark all as read left unread items")
        driver.back()
        driver.forward()
        run.until_text("main h1", "Notifications")

        run.step("what reaches john: he turns 'New comment on your item' off, and it stays off")
        rows = {row.find_element(By.CSS_SELECTOR, "th").text: row for row in driver.find_elements(By.CSS_SELECTOR, ".preferences tbody tr")}
        if "New comment on your item" not in rows:
            sys.exit(f"the preferences do not list the demo rules: {list(rows)}")
        rows["New comment on your item"].find_element(By.CSS_SELECTOR, "input[type=checkbox]").click()
        driver.find_element(By.CSS_SELECTOR, ".preferences button[type=submit]").click()
        run.until_text(".preferences", "Saved.")
        rows = {row.find_element(By.CSS_SELECTOR, "th").text: row for row in driver.find_elements(By.CSS_SELECTOR, ".preferences tbody tr")}
        if rows["New comment on your item"].find_element(By.CSS_SELECTOR, "input[type=checkbox]").is_selected() or \
                not rows["Assigned to you"].find_element(By.CSS_SELECTOR, "input[type=checkbox]").is_selected():
            sys.exit("the preference was not kept")
        api(port, "PATCH", f"/api/now/table/incident/{created['sys_id']}", {"comments": "Another comment"})
        time.sleep(1.5)
        driver.refresh()
        if "Another comment" in driver.find_element(By.ID, "inbox").text:
            sys.exit("a comment notification arrived although john turned them off")

        run.step("the web app manifest and the service worker")
        manifest = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            fetch('/app/manifest.webmanifest').then(r => r.json()).then(done, e => done({error: String(e)}));""")
        if manifest.get("start_url") != "/app/work" or manifest.get("display") != "standalone":
            sys.exit(f"the manifest is not an installable app's: {manifest}")
        scope = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            navigator.serviceWorker.ready.then(r => done(r.scope), e => done('error ' + e));""")
        if not scope.endswith("/app/"):
            sys.exit(f"the service worker's scope is {scope}")
        try:
            run.wait.until(lambda d: d.find_element(By.ID, "push").is_displayed())
        except Exception:
            sys.exit("the notifications page does not offer push on this device")
        if "Get notifications on this device" not in run.text("#push-state"):
            sys.exit("the push control says: " + run.text("#push-state"))

        run.step("a push delivered to the service worker shows the notification")
        driver.execute_cdp_cmd("Browser.grantPermissions", {"origin": base, "permissions": ["notifications"]})
        driver.execute_cdp_cmd("ServiceWorker.enable", {})
        payload = json.dumps({"id": "n1", "title": "INC0000 was assigned to you", "body": "Printer on fire",
                              "url": f"/app/item/incident/{created['sys_id']}"})
        shown = deliver(driver, base, payload)
        if not shown or shown[0].get("title") != "INC0000 was assigned to you" or shown[0].get("body") != "Printer on fire":
            sys.exit(f"the pushed notification was not shown as sent: {shown}")
        run.check_console()
        print("Notifications: all checks passed")
    finally:
        if driver is not None:
            driver.quit()
        stop(process, folder)
        shutil.rmtree(folder, ignore_errors=True)


def deliver(driver, base, payload):
    """Delivers `payload` to the /app/ service worker through the DevTools protocol; returns the notifications it
    then shows with the payload's tag. The protocol names registrations by ids it reports only as events, which
    Selenium does not pass on, and accepts any id without saying whether it exists; they are small numbers counted
    from 0, so the push goes to the first few (a repeat with the same tag replaces the notification). A push that
    reaches a worker still starting can be dropped (seen once in CI, with both cores busy), so it is sent again each
    second until its notification shows."""
    deadline = time.time() + 20
    sent = 0.0
    while time.time() < deadline:
        if time.time() - sent >= 1:
            for candidate in range(0, 10):
                driver.execute_cdp_cmd("ServiceWorker.deliverPushMessage", {"origin": base, "registrationId": str(candidate), "data": payload})
            sent = time.time()
        shown = driver.execute_async_script("""
            const done = arguments[arguments.length - 1];
            navigator.serviceWorker.getRegistration('/app/').then(r => r.getNotifications({tag: 'n1'})).then(
                ns => done(ns.map(n => ({title: n.title, body: n.body, tag: n.tag}))), e => done([]));""")
        if shown:
            return shown
        time.sleep(0.2)
    return []


if __name__ == "__main__":
    main()

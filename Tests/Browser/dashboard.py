#!/usr/bin/env python3
"""The dashboard in headless Chromium (Selenium) against a live docketd with demo data.

As john.doe on a desktop and on a phone: the dashboard shows open incidents by state, priority and assignment group
and the last 30 days' opened and resolved columns; a bar opens the list it counts (the list has as many records as
the bar says), so does a day's column; another type of work is one tab away; on a phone the page never scrolls
sideways. Screenshots go to --screenshots. No error in the console.

Usage: Tests/Browser/dashboard.py --binary PATH [--screenshots docs/screenshots]
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_ui import Run, api, browser, start, stop  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402


def listed(driver):
    return int(driver.find_element(By.CSS_SELECTOR, "#list .summary").text.split()[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--screenshots", default="docs/screenshots")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-dashboard-")
    process, port = start(args.binary, folder)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        driver = browser()
        run = Run(driver, base, port, args.screenshots)
        print("Dashboard in headless Chromium against", base, flush=True)
        # Something opened and resolved today, so that today's columns exist.
        made = api(port, "POST", "/api/now/table/incident", {"short_description": "Dashboard check", "priority": "2"})["result"]
        api(port, "PATCH", f"/api/now/table/incident/{made['sys_id']}", {"state": "6", "close_code": "Solved (Permanently)", "close_notes": "done"})

        run.step("john opens the Dashboard from the navigation")
        run.sign_in()
        driver.find_element(By.LINK_TEXT, "Dashboard").click()
        run.until_text("main h1", "Dashboard")
        for heading in ["Open by State", "Open by Priority", "Open by Assignment group", "last 30 days"]:
            run.until_text("main", heading)
        run.screenshot("dashboard")

        run.step("a bar opens the list it counts")
        bar = driver.find_element(By.CSS_SELECTOR, "#by-priority + .bars a")
        label = bar.find_element(By.CSS_SELECTOR, ".bar-label").text
        count = int(bar.find_element(By.CSS_SELECTOR, ".bar-count").text)
        bar.click()
        run.until_text(".chips", "Priority is " + label)
        if listed(driver) != count:
            sys.exit(f"the {label} bar says {count}, its list has {listed(driver)}")
        driver.back()
        run.until_text("main h1", "Dashboard")

        run.step("today's opened column opens its list")
        columns = driver.find_elements(By.CSS_SELECTOR, "svg.daily a")
        today = [c for c in columns if c.get_attribute("aria-label").endswith("opened")][-1]
        said = int(today.get_attribute("aria-label").split(": ")[1].split()[0])
        driver.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true, cancelable: true}))", today)
        run.until_text("main h1", "Incident")
        if listed(driver) != said:
            sys.exit(f"today's column says {said} opened, its list has {listed(driver)}")

        run.step("another type of work; on a phone nothing scrolls sideways")
        driver.get(base + "/app/dashboard")
        driver.find_element(By.LINK_TEXT, "Defect").click()
        run.until_text(".summary", "open Defect items")
        run.on_phone_without_sideways_scroll("/app/dashboard", "Dashboard", "the dashboard")
        run.check_console()
        print("dashboard: all checks passed", flush=True)
    finally:
        if driver:
            driver.quit()
        stop(process, folder)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

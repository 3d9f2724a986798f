#!/usr/bin/env python3
"""Team lists in the web UI, in headless Chromium (Selenium) against a live docketd with demo data.

As john.doe: Lists in the navigation, then Incident; a condition made with the menus (Priority is "critical", the
label as a person types it) shows as a chip and in the encoded query; the encoded query edited by hand; a column
header sorts, twice the other way; "Columns and grouping" adds a column and groups by State, with counts that link
to their part; "Save as my list" keeps it, and the bare list opens as saved; beth.anglin creates a critical incident
through the Table API and it appears in the open list without a reload; Back and Forward move through these pages;
on a phone the page never scrolls sideways (the table scrolls in its own box). Screenshots of the list go to
--screenshots. No error in the console.

Usage: Tests/Browser/lists.py --binary PATH [--screenshots docs/screenshots]
"""
import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_ui import PAGE_CHANGES, Run, api, browser, start, stop  # noqa: E402

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


def numbers(driver):
    return [cell.text for cell in driver.find_elements(By.CSS_SELECTOR, "#list tbody tr[data-sys-id] td:first-child")]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--screenshots", default="docs/screenshots")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-lists-")
    process, port = start(args.binary, folder)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        driver = browser()
        run = Run(driver, base, port, args.screenshots)
        wait = WebDriverWait(driver, 15, ignored_exceptions=PAGE_CHANGES)
        print("Lists in headless Chromium against", base, flush=True)

        run.step("john opens Lists, then Incident")
        run.sign_in()
        driver.find_element(By.LINK_TEXT, "Lists").click()
        run.until_text("main h1", "Lists")
        driver.find_element(By.CSS_SELECTOR, "a[href='/app/list/incident']").click()
        run.until_text("main h1", "Incident")
        everything = int(driver.find_element(By.CSS_SELECTOR, "#list .summary").text.split()[0])

        run.step("a condition from the menus: Priority is 'critical'")
        Select(driver.find_element(By.ID, "add_field")).select_by_value("priority")
        Select(driver.find_element(By.ID, "add_op")).select_by_visible_text("is")
        driver.find_element(By.ID, "add_value").send_keys("critical")
        driver.find_element(By.CSS_SELECTOR, ".add-condition button[type=submit]").click()
        run.until_text(".chips", "Priority is 1 - Critical")
        if driver.find_element(By.ID, "list-q").get_attribute("value") != "priority=1":
            sys.exit("the encoded query does not show the condition")
        critical = len(numbers(driver))
        if not 0 < critical < everything:
            sys.exit(f"priority 1 lists {critical} of {everything}")

        run.step("the encoded query edited by hand: priority 1 or 2")
        field = driver.find_element(By.ID, "list-q")
        field.clear()
        field.send_keys("priority<=2")
        driver.find_element(By.CSS_SELECTOR, ".encoded button[type=submit]").click()
        wait.until(lambda d: len(numbers(d)) > critical)

        run.step("a column header sorts, then sorts the other way")
        driver.find_element(By.XPATH, "//th/a[starts-with(normalize-space(.), 'Number')]").click()
        wait.until(lambda d: d.find_element(By.XPATH, "//th[a[starts-with(normalize-space(.), 'Number')]]").get_attribute("aria-sort") == "ascending")
        ascending = numbers(driver)
        if ascending != sorted(ascending):
            sys.exit(f"not sorted by number: {ascending}")
        driver.find_element(By.XPATH, "//th/a[starts-with(normalize-space(.), 'Number')]").click()
        wait.until(lambda d: d.find_element(By.XPATH, "//th[a[starts-with(normalize-space(.), 'Number')]]").get_attribute("aria-sort") == "descending")
        if numbers(driver) != list(reversed(ascending)):
            sys.exit("the second click did not reverse the order")

        run.step("Columns and grouping: add Caller, group by State")
        driver.find_element(By.CSS_SELECTOR, ".list-options summary").click()
        driver.find_element(By.CSS_SELECTOR, "input[name=col][value=caller_id]").click()
        Select(driver.find_element(By.ID, "group")).select_by_visible_text("State")
        driver.find_element(By.CSS_SELECTOR, ".list-options button[type=submit]").click()
        run.until_text("#list thead", "Caller")
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#list .group-row"))
        counts = {link.text: int(link.find_element(By.XPATH, "following-sibling::span").text)
                  for link in driver.find_elements(By.CSS_SELECTOR, "#list .group-counts a")}
        if sum(counts.values()) != len(ascending):
            sys.exit(f"the groups' counts {counts} do not add up to {len(ascending)}")
        run.screenshot("list")

        run.step("Save as my list; the bare list opens as saved")
        driver.find_element(By.CSS_SELECTOR, ".list-save button[type=submit]").click()
        run.until_text(".flash", "Saved: this is your list of Incident")
        driver.get(base + "/app/list/incident")
        run.until_text("#list thead", "Caller")
        if driver.find_element(By.ID, "list-q").get_attribute("value") != "priority<=2":
            sys.exit("the saved list's query did not come back")

        run.step("beth creates a critical incident: it appears in the open list without a reload")
        run.live_open()
        run.mark_page()
        api(port, "POST", "/api/now/table/incident", {"short_description": "Core switch down in hall C", "priority": "1", "impact": "1", "urgency": "1"})
        run.until_text("#list", "Core switch down in hall C")
        if not run.still_same_page():
            sys.exit("the list was reloaded instead of updated")

        run.step("a group's link opens its part; Back and Forward")
        first_group = driver.find_element(By.CSS_SELECTOR, "#list .group-counts a")
        label, expected = first_group.text, int(first_group.find_element(By.XPATH, "following-sibling::span").text)
        first_group.click()
        run.until_text(".chips", "State is " + label)
        wait.until(lambda d: len(numbers(d)) == expected)
        driver.back()
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#list .group-row"))
        driver.forward()
        run.until_text(".chips", "State is " + label)

        run.step("on a phone the page does not scroll sideways; the table scrolls in its own box")
        run.on_phone_without_sideways_scroll("/app/list/incident", "Incident", "the list page")
        run.check_console()
        print("lists: all checks passed", flush=True)
    finally:
        if driver:
            driver.quit()
        stop(process, folder)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Accessibility of every page of the web UI, in headless Chromium (Selenium) against a live docketd with demo data.

  - axe-core (driven by PyPI's axe-selenium-python, with the current axe-core that PyPI's axe-playwright-python
    carries; nothing is fetched from the network) runs on every page the web
    UI has, signed out and signed in as john.doe and as admin, on a desktop's screen and a phone's: sign-in, My work
    (both views, a search, a refused search), the item page of each type (incident, defect with its workflow,
    problem, change request), an action's form, the delete confirmation, every create form, the notifications page
    and its preferences, the device sign-in page, a notification rule as an administrator, and a page that does not
    exist. Any violation of serious or critical impact fails the run; the others are printed.
  - The keyboard alone: from My work, Tab reaches an item of the list (each focused element shows a visible focus
    outline), Enter opens it, Tab reaches the state control, the arrow keys choose another state, and Enter on
    "Change state" saves it ("Your changes were saved." and the new state on the page). No mouse event is sent.

Usage: Tests/Browser/accessibility.py --binary PATH
Needs: chromium and chromium-driver (Debian), selenium, axe-selenium-python and axe-playwright-python (PyPI; the
last with --no-deps, only for its copy of axe-core).
"""
import argparse
import importlib.util
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_ui import PAGE_CHANGES, Run, api, browser, start, stop  # noqa: E402

from axe_selenium_python import Axe  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

SIZES = [(1440, 900, "desktop"), (390, 844, "phone")]


def axe_core_script():
    """A current axe-core: the one axe-playwright-python's wheel carries (4.12.1), found without importing that
    package (Playwright is not needed). axe-selenium-python's own copy is axe-core 3.1.1 of 2018, which predates
    HTML 5.2's <div> groups inside <dl> and the one-time-code autocomplete token, and reports both as violations."""
    spec = importlib.util.find_spec("axe_playwright_python")
    if spec is None or spec.origin is None:
        sys.exit("axe-playwright-python is not installed (pip install --no-deps axe-playwright-python==0.1.8)")
    return os.path.join(os.path.dirname(spec.origin), "axe.min.js")
FAILING = {"serious", "critical"}


CHECKED = {"pages": 0, "rules": 0}


def check_page(driver, base, path, label, findings):
    """Loads `path` and runs axe at each size; records serious and critical violations."""
    driver.get(base + path)
    WebDriverWait(driver, 15, ignored_exceptions=PAGE_CHANGES).until(
        lambda d: d.execute_script("return document.readyState") == "complete")
    axe = Axe(driver, script_url=axe_core_script())
    for width, height, size in SIZES:
        driver.set_window_size(width, height)
        axe.inject()
        results = axe.run()
        CHECKED["pages"] += 1
        CHECKED["rules"] += len(results["passes"]) + len(results["violations"])
        if not results["passes"]:
            sys.exit(f"axe checked nothing on {label}")
        for violation in results["violations"]:
            nodes = [" ".join(node["target"]) if isinstance(node["target"], list) else str(node["target"]) for node in violation["nodes"]]
            line = f"{label} ({size}): {violation['impact']} {violation['id']}: {violation['help']} at {', '.join(nodes[:4])}"
            if violation["impact"] in FAILING:
                findings.append(line)
            else:
                print("    (minor)", line, flush=True)
    driver.set_window_size(1440, 900)


def focus_outline(driver):
    """The focused element's description and whether its focus is drawn (an outline or a box shadow)."""
    return driver.execute_script(
        "var e = document.activeElement; var s = getComputedStyle(e);"
        "return [e.tagName + (e.id ? '#' + e.id : '') + ' ' + (e.textContent || '').trim().slice(0, 30),"
        " (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none'];")


def tab_until(driver, condition, what, limit=80):
    """Presses Tab until `condition()` holds, checking that every focused element shows its focus."""
    for _ in range(limit):
        ActionChains(driver).send_keys(Keys.TAB).perform()
        name, drawn = focus_outline(driver)
        if not drawn:
            sys.exit(f"focus on {name} is not visible")
        if condition():
            return
    sys.exit(f"{limit} presses of Tab never reached {what}")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-accessibility-")
    process, port = start(args.binary, folder)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        driver = browser()
        run = Run(driver, base, port, "/tmp")
        print("Accessibility in headless Chromium against", base, flush=True)
        findings = []

        def first(table, query=""):
            found = api(port, "GET", f"/api/now/table/{table}?sysparm_limit=1&sysparm_fields=sys_id&sysparm_query={query}")["result"]
            if not found:
                sys.exit(f"the demo has no {table} {query}")
            return found[0]["sys_id"]

        incident = "cdb04ffc53247d4908555def767adca7"
        defect = first("defect", "number%3DSAMPL00000002")
        problem = first("problem")
        change = first("change_request")

        run.step("axe on the pages signed out")
        check_page(driver, base, "/", "sign-in", findings)

        run.step("axe on every page john.doe sees")
        run.sign_in()
        pages = [
            ("/app/work", "My work"), ("/app/work?view=opened", "My work, opened by me"), ("/app/work?q=wifi", "a search"),
            ("/app/work?q=staet%3D2", "a refused search"), ("/app/lists", "lists"), ("/app/dashboard", "dashboard"),
            ("/app/dashboard?table=defect", "dashboard of defects"),
            ("/app/list/incident?q=priority%3C%3D2&group=state", "a list, filtered and grouped"),
            ("/app/list/incident?q=staet%3D2", "a list with a refused query"),
            (f"/app/item/incident/{incident}", "an incident"), (f"/app/item/defect/{defect}", "a defect"),
            (f"/app/item/problem/{problem}", "a problem"), (f"/app/item/change_request/{change}", "a change request"),
            (f"/app/item/defect/{defect}/action/Resolve", "an action's form"), (f"/app/item/defect/{defect}/delete", "delete"),
            ("/app/new/incident", "new incident"), ("/app/new/defect", "new defect"), ("/app/new/problem", "new problem"),
            ("/app/new/change_request", "new change request"), ("/app/notifications", "notifications"),
            ("/app/notifications/preferences", "notification preferences"), ("/app/device", "device sign-in"),
            ("/app/item/incident/0123456789abcdef0123456789abcdef", "not found"),
        ]
        run.expected_statuses.update({400, 404})
        for path, label in pages:
            check_page(driver, base, path, label, findings)

        run.step("axe on a notification rule, as an administrator")
        driver.delete_all_cookies()
        run.sign_in("admin", "admin")
        check_page(driver, base, "/app/item/sysevent_email_action/default.notification.state", "a notification rule", findings)
        print(f"    axe-core {driver.execute_script('return axe.version')}: {CHECKED['pages']} page views, "
              f"{CHECKED['rules']} rule checks that applied", flush=True)
        if findings:
            sys.exit("axe found serious or critical violations:\n" + "\n".join(findings))

        run.step("the keyboard alone: Tab to an item of My work, Enter, Tab to its state, change it, Enter")
        driver.delete_all_cookies()
        run.sign_in()
        driver.get(base + "/app/work")
        run.until_text("main h1", "My work")
        target = "INC0010001"
        tab_until(driver, lambda: target in (driver.execute_script("return document.activeElement.textContent") or ""), f"{target} in the list")
        ActionChains(driver).send_keys(Keys.ENTER).perform()
        run.until_text("main h1", target)
        tab_until(driver, lambda: driver.execute_script("return document.activeElement.id") == "state-now", "the state control")
        before = driver.execute_script("return document.getElementById('state-now').selectedOptions[0].text")
        ActionChains(driver).send_keys(Keys.ARROW_DOWN).perform()
        chosen = driver.execute_script("return document.getElementById('state-now').selectedOptions[0].text")
        if chosen == before:
            sys.exit(f"the arrow key did not change the state from {before}")
        tab_until(driver, lambda: driver.execute_script("return document.activeElement.textContent.trim()") == "Change state", "Change state", limit=3)
        ActionChains(driver).send_keys(Keys.ENTER).perform()
        run.until_text(".flash", "Your changes were saved.")
        run.until_text("#fields", chosen)
        print(f"    {target}: {before} → {chosen} with the keyboard alone", flush=True)
        run.check_console()
        print("accessibility: all checks passed", flush=True)
    finally:
        if driver:
            driver.quit()
        stop(process, folder)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

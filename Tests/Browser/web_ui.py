#!/usr/bin/env python3
"""The web UI end to end: headless Chromium (Selenium) against a live docketd with demo data.

As john.doe it signs in, sees his work grouped by type, opens a defect, adds a comment and sees it, runs a legal
state change without its mandatory field (and sees the field reported), runs it properly, sees changes that
beth.anglin makes through the Table API appear on the open item and in the list without a reload, and is warned
(then refused) when beth changes the item while he edits it. Any JavaScript
error in the console fails the run. It saves screenshots at 390x844 and 1440x900 into --screenshots, then gives
john 200 active items and times the first contentful paint of My work (median of several loads), against the
budget or, on a machine where even a light page paints slowly, against that page's paint times --paint-ratio.

Usage: Tests/Browser/web_ui.py --binary PATH [--screenshots docs/screenshots] [--paint-budget-ms 200] [--paint-ratio 2.5]
Needs: chromium and chromium-driver (Debian), selenium (PyPI).
"""
import argparse
import base64
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import Select, WebDriverWait
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException

# While a page is replaced (a sign-in's redirect, a live refresh), an element found on the old page may be read
# after it went: Chromium then reports "Node with given id does not belong to the document", a plain
# WebDriverException rather than a stale element. Waits try again; a real failure still ends in their timeout.
PAGE_CHANGES = (StaleElementReferenceException, WebDriverException)


def start(binary, folder, extra=()):
    """Starts a demo docketd on a free port with `extra` arguments; its process and port."""
    out = open(os.path.join(folder, "stdout"), "w+")
    err = open(os.path.join(folder, "stderr"), "w")
    process = subprocess.Popen(
        [binary, "--demo", "--port", "0", "--data-dir", os.path.join(folder, "data"), "--log-level", "warning", *extra],
        stdout=out, stderr=err,
    )
    for _ in range(1800):  # up to 3 minutes: a loaded machine starts the demo slowly
        out.seek(0)
        text = out.read()
        if "listening on" in text:
            return process, int(text.strip().rsplit(":", 1)[1])
        if process.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit("docketd did not start: " + open(os.path.join(folder, "stderr")).read())


def stop(process, folder):
    """Stops docketd. When it had ended by itself under the test (a crash would otherwise only show as refused
    connections) or did not end cleanly when asked (0 is its status after SIGTERM), says so with the end of its
    stderr, and fails the test unless it is already failing (called from `finally`, it then leaves that failure
    to be reported)."""
    ended = process.poll() is not None
    if not ended:
        process.terminate()
    process.wait(timeout=30)
    if ended or process.returncode != 0:
        try:
            with open(os.path.join(folder, "stderr"), errors="replace") as handle:
                tail = handle.read()[-4000:]
        except OSError:
            tail = "(no stderr)"
        when = "during the test" if ended else "when stopped (0 expected)"
        print(f"docketd ended with status {process.returncode} {when}; its stderr ends:\n{tail}", flush=True)
        if sys.exc_info()[0] is None:
            sys.exit(f"docketd ended with status {process.returncode} {when}")


def dismiss_notices(driver):
    """Clicks every notice's Dismiss (one that went by itself meanwhile is skipped)."""
    for element in driver.find_elements(By.CSS_SELECTOR, "#notices .notice button"):
        try:
            element.click()
        except StaleElementReferenceException:
            pass


def api(port, method, path, body=None, user="beth.anglin", connection=None):
    """A Table API call as a demo user (password "password"; admin's is "admin"), to 127.0.0.1:port or on
    `connection`."""
    password = "admin" if user == "admin" else "password"
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    connection = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": "Basic " + token, "Accept": "application/json", "Content-Type": "application/json"}
    connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    if response.status >= 300:
        sys.exit(f"{method} {path} answered {response.status}: {data[:300]!r}")
    return json.loads(data) if data else None


def browser(extra=()):
    """Headless Chromium with its default features, and `extra` arguments."""
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1440,900",
                     "--disable-extensions", "--no-first-run", *extra]:
        options.add_argument(argument)
    if shutil.which("chromium"):
        options.binary_location = shutil.which("chromium")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    service = webdriver.ChromeService(executable_path=shutil.which("chromedriver"))
    return webdriver.Chrome(options=options, service=service)


class Run:
    def __init__(self, driver, base, port, shots):
        self.driver, self.base, self.port, self.shots = driver, base, port, shots
        self.wait = WebDriverWait(driver, 15, ignored_exceptions=PAGE_CHANGES)
        self.console = []
        # Pages that answer a refused form with 4xx on purpose: their network line is not an error.
        self.expected_statuses = set()

    def step(self, text):
        print("  -", text, flush=True)

    def collect_console(self):
        for entry in self.driver.get_log("browser"):
            self.console.append(entry)

    def check_console(self):
        self.collect_console()
        errors = []
        for entry in self.console:
            if entry["level"] != "SEVERE":
                continue
            message = entry.get("message", "")
            if entry.get("source") == "network" and any(f"status of {code}" in message for code in self.expected_statuses):
                continue
            errors.append(message)
        if errors:
            sys.exit("JavaScript console errors:\n" + "\n".join(errors))

    def screenshot(self, name):
        os.makedirs(self.shots, exist_ok=True)
        for width, height, size in [(390, 844, "phone"), (1440, 900, "desktop")]:
            self.driver.set_window_size(width, height)
            time.sleep(0.3)
            self.driver.save_screenshot(os.path.join(self.shots, f"{name}-{size}.png"))
        self.driver.set_window_size(1440, 900)

    def text(self, selector):
        return self.driver.find_element(By.CSS_SELECTOR, selector).text

    def until_text(self, selector, text, timeout=15):
        WebDriverWait(self.driver, timeout, ignored_exceptions=PAGE_CHANGES).until(EC.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text))

    def sign_in(self, user="john.doe", password="password"):
        """Signs in through the sign-in page and waits for My work."""
        self.driver.get(self.base + "/")
        self.driver.find_element(By.ID, "user_name").send_keys(user)
        self.driver.find_element(By.ID, "password").send_keys(password)
        self.driver.find_element(By.CSS_SELECTOR, ".signin form button[type=submit]").click()
        self.until_text("main h1", "My work")

    def mark_page(self):
        """A marker that a reload would lose."""
        self.driver.execute_script("window.__docketMarker = 42;")

    def still_same_page(self):
        return self.driver.execute_script("return window.__docketMarker === 42;")

    def on_phone_without_sideways_scroll(self, path, heading, what):
        """Opens `path` at 390x844, waits for `heading` in its h1, fails when the page scrolls sideways; back to
        the desktop size after."""
        self.driver.set_window_size(390, 844)
        self.driver.get(self.base + path)
        self.until_text("main h1", heading)
        if self.driver.execute_script("return document.documentElement.scrollWidth > innerWidth"):
            sys.exit(f"on a phone {what} scrolls sideways")
        self.driver.set_window_size(1440, 900)

    def live_open(self):
        WebDriverWait(self.driver, 15, ignored_exceptions=PAGE_CHANGES).until(lambda d: d.execute_script("return document.body.dataset.liveState") == "open")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--screenshots", default="docs/screenshots")
    parser.add_argument("--paint-budget-ms", type=float, default=200,
                        help="My work's median first contentful paint may take this long on any machine")
    parser.add_argument("--paint-ratio", type=float, default=2.5,
                        help="or this many times a light page's median paint, on a machine where that is slow")
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="docket-browser-")
    process, port = start(args.binary, folder)
    base = f"http://127.0.0.1:{port}"
    driver = None
    try:
        driver = browser()
        run = Run(driver, base, port, args.screenshots)
        print("Web UI in headless Chromium against", base, flush=True)

        run.step("the sign-in page, then a wrong password")
        driver.get(base + "/")
        run.screenshot("sign-in")
        driver.find_element(By.ID, "user_name").send_keys("john.doe")
        driver.find_element(By.ID, "password").send_keys("not-his-password")
        run.expected_statuses.add(401)
        driver.find_element(By.CSS_SELECTOR, "form button[type=submit]").click()
        run.until_text(".signin .error", "not right")

        run.step("sign in as john.doe")
        driver.find_element(By.ID, "password").send_keys("password")
        driver.find_element(By.CSS_SELECTOR, ".signin form button[type=submit]").click()
        run.until_text("main h1", "My work")
        groups = [element.text for element in driver.find_elements(By.CSS_SELECTOR, "section.group h2")]
        for wanted in ["Incident", "Defect", "Change Request"]:
            if not any(group.startswith(wanted) for group in groups):
                sys.exit(f"My work has no {wanted} group: {groups}")
        run.live_open()
        run.screenshot("my-work")

        run.step("open SAMPL00000002 and add a comment")
        driver.find_element(By.PARTIAL_LINK_TEXT, "SAMPL00000002").click()
        run.until_text("main h1", "SAMPL00000002")
        driver.find_element(By.ID, "comment-text").send_keys("Reproduced on a 390 px phone")
        driver.find_element(By.CSS_SELECTOR, "button[value=comments]").click()
        run.until_text("#journal", "Reproduced on a 390 px phone")

        run.step("attach a file with Chromium's own multipart form, then download it")
        attachment = os.path.join(folder, "screen-log.txt")
        with open(attachment, "wb") as handle:
            handle.write(b"rotation crash\r\n--not a boundary\r\n" * 2000)
        driver.find_element(By.ID, "file").send_keys(attachment)
        driver.find_element(By.CSS_SELECTOR, "form.upload button[type=submit]").click()
        run.until_text("#attachments", "screen-log.txt")
        link = driver.find_element(By.PARTIAL_LINK_TEXT, "screen-log.txt").get_attribute("href")
        cookie = driver.get_cookie("docket_session")["value"]
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.request("GET", link[len(base):], headers={"Cookie": "docket_session=" + cookie})
        downloaded = connection.getresponse().read()
        with open(attachment, "rb") as handle:
            if downloaded != handle.read():
                sys.exit(f"the downloaded attachment differs from the uploaded file ({len(downloaded)} bytes, "
                         f"not {os.path.getsize(attachment)})")

        run.step("Resolve without a resolution: the missing mandatory field is reported next to it")
        driver.find_element(By.LINK_TEXT, "Resolve").click()
        run.until_text("main h1", "Resolve")
        run.expected_statuses.add(400)
        driver.find_element(By.CSS_SELECTOR, ".form-page button[type=submit]").click()
        run.until_text("#m-resolution", "Required for Resolve")
        run.screenshot("mandatory-field")
        Select(driver.find_element(By.ID, "f-resolution")).select_by_visible_text("Fixed")
        driver.find_element(By.CSS_SELECTOR, ".form-page button[type=submit]").click()
        run.until_text("#fields", "Resolved")

        run.step("beth.anglin comments through the Table API: it appears on the open item without a reload")
        run.live_open()
        run.mark_page()
        defect = driver.current_url.rstrip("/").rsplit("/", 1)[1]
        api(port, "PATCH", f"/api/now/table/defect/{defect}", {"comments": "Confirmed fixed in build 42"})
        run.until_text("#journal", "Confirmed fixed in build 42")
        run.until_text("#notices", "Beth Anglin")  # people by their full names, as everywhere on the page
        if not run.still_same_page():
            sys.exit("the item page was reloaded instead of updated")
        run.screenshot("item")

        run.step("while john edits, beth changes the item: he is told before his save, and the save is refused")
        driver.find_element(By.CSS_SELECTOR, "#edit summary").click()
        driver.find_element(By.ID, "f-description").send_keys(" Also on tablets.")
        api(port, "PATCH", f"/api/now/table/defect/{defect}", {"priority": "1"})
        WebDriverWait(driver, 15, ignored_exceptions=PAGE_CHANGES).until(lambda d: d.find_element(By.ID, "conflict").is_displayed())
        run.until_text("#conflict", "Beth Anglin changed this item while you were editing it")
        run.expected_statuses.add(409)
        driver.find_element(By.CSS_SELECTOR, "#edit button[type=submit]").click()
        run.until_text(".record .error", "changed this item after you opened it")
        if "Also on tablets." not in driver.find_element(By.ID, "f-description").get_attribute("value"):
            sys.exit("the refused save lost what john typed")

        run.step("beth.anglin assigns john a new incident: it appears in My work without a reload")
        driver.get(base + "/app/work")
        run.until_text("main h1", "My work")
        run.live_open()
        run.mark_page()
        john = api(port, "GET", "/api/now/table/sys_user?sysparm_query=user_name=john.doe&sysparm_fields=sys_id")["result"][0]["sys_id"]
        api(port, "POST", "/api/now/table/incident", {"short_description": "Badge reader offline at door 3", "assigned_to": john})
        run.until_text("#work", "Badge reader offline at door 3")
        if not run.still_same_page():
            sys.exit("My work was reloaded instead of updated")

        run.step("a live notice never covers the list, on a laptop's screen or a wide one, and can be dismissed")
        badge = api(port, "GET", "/api/now/table/incident?sysparm_query=short_description=Badge%20reader%20offline%20at%20door%203&sysparm_fields=sys_id")["result"][0]["sys_id"]
        for width, height, priority in [(1440, 900, "2"), (1920, 1080, "3"), (1024, 768, "1")]:
            driver.set_window_size(width, height)
            dismiss_notices(driver)
            api(port, "PATCH", f"/api/now/table/incident/{badge}", {"priority": priority})
            WebDriverWait(driver, 15, ignored_exceptions=PAGE_CHANGES).until(
                lambda d: d.find_elements(By.CSS_SELECTOR, "#notices .notice"))
            covered = driver.execute_script(
                "var hits = []; var notes = Array.from(document.querySelectorAll('#notices .notice'));"
                "document.querySelectorAll('main, #work .item, main h1, .work-head form').forEach(function (item) {"
                " var a = item.getBoundingClientRect(); notes.forEach(function (n) { var b = n.getBoundingClientRect();"
                "  if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom) hits.push(item.textContent.trim().slice(0, 40)); }); });"
                "return hits;")
            if covered:
                sys.exit(f"at {width} px a notice covers: {covered}")
        dismiss_notices(driver)
        WebDriverWait(driver, 5).until(lambda d: not d.find_elements(By.CSS_SELECTOR, "#notices .notice"))
        driver.set_window_size(1440, 900)

        run.step("create a defect through the form")
        driver.get(base + "/app/new/defect")
        driver.find_element(By.ID, "f-short_description").send_keys("Screen flickers on rotate")
        Select(driver.find_element(By.ID, "f-severity")).select_by_visible_text("2-Major")
        driver.find_element(By.ID, "f-assigned_to").send_keys("beth")
        WebDriverWait(driver, 10, ignored_exceptions=PAGE_CHANGES).until(lambda d: d.execute_script(
            "return Array.from(document.querySelectorAll('#list-assigned_to option')).map(o => o.value).join('|')"
        ) == "Beth Anglin (beth.anglin)")
        field = driver.find_element(By.ID, "f-assigned_to")
        field.clear()
        field.send_keys("Beth Anglin (beth.anglin)")
        driver.find_element(By.CSS_SELECTOR, ".form-page button[type=submit]").click()
        run.until_text("main h1", "Screen flickers on rotate")
        run.until_text("#fields", "Beth Anglin")
        run.check_console()

        run.step("an incident's state is changed at the top of its page; Delete sits after its details")
        driver.get(base + "/app/item/incident/cdb04ffc53247d4908555def767adca7")
        run.until_text("main h1", "INC0010001")
        layout = driver.execute_script(
            "var top = e => e ? e.getBoundingClientRect().top + scrollY : null;"
            "return [top(document.getElementById('state-now')), top(document.getElementById('fields')),"
            " top(document.querySelector('.danger-zone a.danger'))];")
        if layout[0] is None or layout[0] > layout[1]:
            sys.exit(f"the state control is not above the details: {layout}")
        if layout[2] is not None and layout[2] < layout[1]:
            sys.exit(f"Delete sits above the details: {layout}")
        Select(driver.find_element(By.ID, "state-now")).select_by_visible_text("On Hold")
        driver.find_element(By.CSS_SELECTOR, ".state-change button[type=submit]").click()
        run.until_text(".flash", "Your changes were saved.")
        run.until_text("#fields", "On Hold")

        run.step("on a phone: every navigation link is on the screen, an item's actions show without scrolling, names are full names")
        driver.set_window_size(390, 844)
        driver.get(base + "/app/item/incident/cdb04ffc53247d4908555def767adca7")
        run.until_text("main h1", "INC0010001")
        off_screen = driver.execute_script(
            "return Array.from(document.querySelectorAll('.bar nav a, .bar button')).filter(a => {"
            " var r = a.getBoundingClientRect(); return r.left < 0 || r.right > innerWidth + 0.5; }).map(a => a.textContent.trim())"
            ".concat(document.documentElement.scrollWidth > innerWidth ? ['the page scrolls sideways'] : []);")
        if off_screen:
            sys.exit(f"on a phone these are cut off or off the screen: {off_screen}")
        if len(driver.find_elements(By.CSS_SELECTOR, ".bar nav a")) < 4:
            sys.exit("the phone's navigation lost links")
        actions_top = driver.execute_script("var a = document.getElementById('actions'); return a.getBoundingClientRect().top;")
        if actions_top is None or actions_top > 844:
            sys.exit(f"on a phone the item's actions start at {actions_top} px, below the screen")
        if "beth.anglin" in driver.find_element(By.CSS_SELECTOR, "main").text:
            sys.exit("the item page names a person by user name")
        driver.get(base + "/app/new/incident")
        run.until_text("main h1", "New incident")
        offered = [e.get_attribute("id") for e in driver.find_elements(By.CSS_SELECTOR, ".form-page [id^='f-']")]
        for unwanted in ["f-reopen_count", "f-resolved_by", "f-close_code", "f-priority"]:
            if unwanted in offered:
                sys.exit(f"the create form offers {unwanted}: {offered}")
        driver.set_window_size(1440, 900)

        run.step("first contentful paint of My work with 200 active items")
        count = api(port, "GET", "/api/now/stats/task?sysparm_count=true&sysparm_query=active=true^assigned_to=" + john)
        have = int(count["result"]["stats"]["count"])
        for index in range(max(0, 200 - have)):
            api(port, "POST", "/api/now/table/incident", {"short_description": f"Load item {index}", "assigned_to": john}, user="admin")
        # The same Chromium on a machine half as fast paints every page twice as late, so the budget is read against
        # a page with the same header, styles and script and almost nothing in it (a device's sign-in form),
        # loaded in turn with My work: My work must paint within --paint-budget-ms, or, where even that light page
        # is slow, within --paint-ratio times its paint. What 200 items cost (a query per row, a blocking script,
        # a page that grows with the items) shows in both.
        samples = {"/app/work": [], "/app/device": []}
        missed = 0
        while min(len(paints) for paints in samples.values()) < 9 and missed < 9:
            for path, paints in samples.items():
                driver.get(base + path)
                run.until_text("main h1", "My work" if path == "/app/work" else "Sign in a device")
                paint = driver.execute_async_script("""
                    const done = arguments[arguments.length - 1];
                    const found = () => performance.getEntriesByName('first-contentful-paint')[0];
                    if (found()) { done(found().startTime); return; }
                    new PerformanceObserver(() => { if (found()) done(found().startTime); })
                        .observe({type: 'paint', buffered: true});
                    setTimeout(() => done(found() ? found().startTime : null), 3000);
                """)
                # Chromium reports the paint a little after the page is usable, and now and then not at all (a load
                # it judged hidden): the observer waits for the entry, and a load without one is made again.
                if paint is None:
                    missed += 1
                    state = driver.execute_script("return document.visibilityState")
                    print(f"  (a load of {path} without a paint entry; the page was {state})", flush=True)
                else:
                    paints.append(paint)
        if min(len(paints) for paints in samples.values()) < 5:
            sys.exit(f"Chromium reported the first contentful paint of too few loads ({missed} missed)")
        driver.get(base + "/app/work")
        summary = driver.find_element(By.CSS_SELECTOR, ".summary").text
        # The first load of each (cold caches) is left out.
        work, light = (statistics.median(paints[1:]) for paints in samples.values())
        for (path, paints), median in zip(samples.items(), (work, light)):
            print(f"  first contentful paint of {path}: median {median:.0f} ms over {len(paints) - 1} loads "
                  f"(all: {', '.join(f'{p:.0f}' for p in paints)})", flush=True)
        allowed = max(args.paint_budget_ms, args.paint_ratio * light)
        print(f"  My work ({summary}) painted in {work:.0f} ms, {work / light:.1f} times the light page; "
              f"allowed {allowed:.0f} ms", flush=True)
        run.check_console()
        if work > allowed:
            sys.exit(f"My work painted in {work:.0f} ms, over the {allowed:.0f} ms allowed "
                     f"(budget {args.paint_budget_ms:.0f} ms, or {args.paint_ratio} times the light page's {light:.0f} ms)")
        print("Web UI: all checks passed")
    finally:
        if driver is not None:
            driver.quit()
        stop(process, folder)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

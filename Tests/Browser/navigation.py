#!/usr/bin/env python3
"""Clicking through the web UI in one tab, as a person does, in headless Chromium with its default features.

Each page of the web UI follows live changes over a stream (Server-Sent Events). A page left behind must let go of
its stream: Chromium keeps pages in its back/forward cache, and allows six HTTP/1.1 connections per host, so
streams of pages already left would use up the connections and the next page would never load. And docketd counts
streams per user (--live-streams-per-user), so streams of pages already gone must be released at once.

As john.doe, over plain HTTP and then over HTTPS (HTTP/2), it:
- views at least 30 pages in one tab: My work, an item, My work, another item..., clicking links, with back and
  forward along the way; every page must load and show its live updates as connected within 2 s;
- changes an item through the Table API while its page waits in the back/forward cache, goes back, and must see
  the change;
- then, with the back/forward cache turned off, views 30 pages quickly: no stream may be refused (429) and the
  last page's live updates must connect.
docketd runs with --live-streams-per-user 6, so a stream kept by a page already left shows as a refusal quickly.

Usage: Tests/Browser/navigation.py --binary PATH [--scheme http|https|both] [--pages 32]
Needs: chromium and chromium-driver (Debian), selenium (PyPI), openssl (for https).
"""
import argparse
import base64
import hashlib
import http.client
import os
import shutil
import ssl
import subprocess
import sys
import tempfile
import time

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import web_ui
from web_ui import PAGE_CHANGES

PAGE_BUDGET_S = 2.0
# The first page of a tab also pays for the browser's first connection (over https its TLS and HTTP/2 set-up) and
# the server's first requests: on a loaded two-core machine that alone has taken over 2 s.
FIRST_PAGE_BUDGET_S = 5.0


def make_certificates(folder):
    """A throw-away CA and a certificate for 127.0.0.1 signed by it; returns (cert, key, SPKI hash of the cert)."""
    def openssl(*args):
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    ca_key, ca, key, csr, cert, ext = (os.path.join(folder, name) for name in
                                       ("ca.key", "ca.pem", "server.key", "server.csr", "server.pem", "ext.cnf"))
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=Docket browser test CA",
            "-keyout", ca_key, "-out", ca)
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", key, "-out", csr)
    with open(ext, "w") as file:
        file.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
                   "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n")
    openssl("x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-days", "1",
            "-extfile", ext, "-out", cert)
    spki = subprocess.run(["openssl", "x509", "-in", cert, "-pubkey", "-noout"], check=True, capture_output=True).stdout
    der = subprocess.run(["openssl", "pkey", "-pubin", "-outform", "der"], input=spki, check=True,
                         capture_output=True).stdout
    return cert, key, ca, base64.b64encode(hashlib.sha256(der).digest()).decode()


def start(binary, folder, tls=None):
    extra = ["--live-streams-per-user", "6"] + (["--tls-cert", tls[0], "--tls-key", tls[1]] if tls else [])
    process, port = web_ui.start(binary, folder, extra)
    return process, f"{'https' if tls else 'http'}://127.0.0.1:{port}"


def connect(base, ca):
    """A connection to the server of `base`, trusting `ca` over HTTPS."""
    host, port = base.split("://", 1)[1].rsplit(":", 1)
    if base.startswith("https"):
        return http.client.HTTPSConnection(host, int(port), timeout=30, context=ssl.create_default_context(cafile=ca))
    return http.client.HTTPConnection(host, int(port), timeout=30)


def api(base, ca, method, path, body=None, user="beth.anglin"):
    """A Table API call as a demo user."""
    return web_ui.api(None, method, path, body, user, connection=connect(base, ca))


def browser(spki=None, back_forward_cache=True):
    arguments = []
    if spki:
        # Trusts the test CA's server certificate as a valid one (no certificate error, so nothing changes how
        # the browser treats the pages), by the hash of its public key.
        arguments.append("--ignore-certificate-errors-spki-list=" + spki)
    if not back_forward_cache:
        arguments.append("--disable-features=BackForwardCache")
    driver = web_ui.browser(arguments)
    driver.set_page_load_timeout(30)
    return driver


class Tab:
    def __init__(self, driver, base):
        self.driver, self.base = driver, base
        self.timings = []
        self.restored = 0

    def js(self, script):
        return self.driver.execute_script(script)

    def mark(self):
        """Marks the current document, so that its restoration from the back/forward cache can be told apart."""
        self.js("window.__docketMarker = (window.__docketMarker || 0) + 1; return true;")

    def settled(self, heading):
        """Whether the page shows `heading` and its live updates are connected."""
        try:
            return (self.js("return document.readyState") == "complete"
                    and heading in self.driver.find_element(By.CSS_SELECTOR, "main h1").text
                    and self.js("return document.body.dataset.liveState") == "open")
        except PAGE_CHANGES:
            return False

    def timed(self, what, action, heading):
        """Runs `action` (a click, back or forward) and waits for the page to settle; records how long it took."""
        start = time.perf_counter()
        try:
            action()
        except Exception as error:
            sys.exit(f"page {len(self.timings) + 1} ({what}) did not load: {str(error).splitlines()[0]}")
        try:
            WebDriverWait(self.driver, 20, poll_frequency=0.02, ignored_exceptions=PAGE_CHANGES).until(
                lambda d: self.settled(heading))
        except Exception:
            state = self.js("return document.body ? document.body.dataset.liveState : null")
            status = self.js("var s = document.getElementById('live-status'); return s ? s.textContent : null")
            sys.exit(f"page {len(self.timings) + 1} ({what}) did not settle within 20 s: live state {state!r}, "
                     f"status {status!r}, url {self.driver.current_url}")
        elapsed = time.perf_counter() - start
        if self.js("return !!window.__docketMarker"):
            self.restored += 1
        self.timings.append((what, elapsed))
        budget = FIRST_PAGE_BUDGET_S if len(self.timings) == 1 else PAGE_BUDGET_S
        if elapsed > budget:
            sys.exit(f"page {len(self.timings)} ({what}) took {elapsed:.2f} s, over {budget} s")
        self.mark()
        return elapsed

    def click(self, selector, heading, what):
        return self.timed(what, lambda: self.driver.find_element(By.CSS_SELECTOR, selector).click(), heading)

    def sign_in(self):
        self.driver.get(self.base + "/")
        self.driver.find_element(By.ID, "user_name").send_keys("john.doe")
        self.driver.find_element(By.ID, "password").send_keys("password")
        self.timed("sign in", lambda: self.driver.find_element(By.CSS_SELECTOR, ".signin form button[type=submit]").click(),
                   "My work")

    def items(self):
        return [(link.get_attribute("href"), link.find_element(By.CSS_SELECTOR, ".number").text)
                for link in self.driver.find_elements(By.CSS_SELECTOR, "#work .item a")]

    def console_refusals(self):
        return [entry["message"] for entry in self.driver.get_log("browser")
                if entry["level"] == "SEVERE" and "429" in entry.get("message", "")]


def click_through(driver, base, ca, pages):
    tab = Tab(driver, base)
    tab.sign_in()
    items = tab.items()
    if len(items) < 4:
        sys.exit(f"My work lists {len(items)} items; at least 4 are needed")
    index = 0
    while len(tab.timings) < pages:
        href, number = items[index % len(items)]
        index += 1
        tab.click(f"#work .item a[href='{href.replace(base, '')}']", number, f"item {number}")
        if index % 4 == 0:
            # Back to My work, forward to the item again, back again: restored pages must reconnect.
            tab.timed("back to My work", driver.back, "My work")
            tab.timed(f"forward to {number}", driver.forward, number)
            tab.timed("back to My work", driver.back, "My work")
        else:
            tab.click("header nav a[href='/app/work']", "My work", "My work")

    # A page in the back/forward cache shows current data when it comes back.
    href, number = items[0]
    sys_id = href.rstrip("/").rsplit("/", 1)[1]
    table = href.rstrip("/").rsplit("/", 2)[1]
    tab.click(f"#work .item a[href='{href.replace(base, '')}']", number, f"item {number}")
    tab.click("header nav a[href='/app/work']", "My work", "My work")
    text = f"Changed while the page was cached {time.time():.0f}"
    api(base, ca, "PATCH", f"/api/now/table/{table}/{sys_id}", {"short_description": text})
    tab.timed(f"back to {number}", driver.back, number)
    try:
        WebDriverWait(driver, PAGE_BUDGET_S, ignored_exceptions=PAGE_CHANGES).until(
            lambda d: text in d.find_element(By.CSS_SELECTOR, "#fields").text)
    except Exception:
        sys.exit(f"after going back, {number} does not show the change made while its page was cached")
    refusals = tab.console_refusals()
    if refusals:
        sys.exit("streams were refused:\n" + "\n".join(refusals))
    return tab


def hold_streams(base, ca, count):
    """Opens `count` live streams as john.doe (the server's per-user limit is 6); closing them releases them."""
    token = base64.b64encode(b"john.doe:password").decode()
    held = []
    for _ in range(count):
        connection = connect(base, ca)
        connection.request("GET", "/api/docket/events?table=incident",
                           headers={"Authorization": "Basic " + token, "Accept": "text/event-stream"})
        response = connection.getresponse()
        if response.status != 200:
            sys.exit(f"holding a stream answered {response.status}")
        response.fp.readline()  # the stream has begun
        held.append(connection)
    return held


def refused_then_resumes(driver, base, ca):
    """With every stream of the user taken, a page says live updates stopped and tries again; once one is free it
    follows again by itself."""
    driver.get(base + "/app/new/incident")  # a page without a stream: the tab holds none now
    WebDriverWait(driver, 10, ignored_exceptions=PAGE_CHANGES).until(lambda d: "New incident" in d.title)
    held = hold_streams(base, ca, 6)
    driver.get(base + "/app/work")
    WebDriverWait(driver, 10, poll_frequency=0.05, ignored_exceptions=PAGE_CHANGES).until(
        lambda d: d.execute_script("return document.body.dataset.liveState") == "retrying")
    status = driver.find_element(By.ID, "live-status")
    if not status.is_displayed() or "Live updates stopped" not in status.text:
        sys.exit(f"a refused stream is not told: {status.text!r}")
    for connection in held:
        connection.close()
    start = time.perf_counter()
    WebDriverWait(driver, 20, poll_frequency=0.1, ignored_exceptions=PAGE_CHANGES).until(
        lambda d: d.execute_script("return document.body.dataset.liveState") == "open")
    if driver.find_element(By.ID, "live-status").is_displayed():
        sys.exit("the stopped notice stays after live updates resumed")
    return time.perf_counter() - start


def quick_views(driver, base, views):
    """With the back/forward cache off, page views in quick succession, not waiting for live updates to connect."""
    tab = Tab(driver, base)
    tab.sign_in()
    items = tab.items()
    start = time.perf_counter()
    for view in range(views):
        driver.get(items[view % len(items)][0] if view % 2 == 0 else base + "/app/work")
        WebDriverWait(driver, PAGE_BUDGET_S * 5, ignored_exceptions=PAGE_CHANGES).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "main h1").text != "")
    WebDriverWait(driver, 10, poll_frequency=0.05, ignored_exceptions=PAGE_CHANGES).until(
        lambda d: d.execute_script("return document.body.dataset.liveState") == "open")
    refusals = tab.console_refusals()
    if refusals:
        sys.exit(f"{len(refusals)} streams were refused after quick page views:\n" + "\n".join(refusals[:5]))
    return time.perf_counter() - start


def run(binary, scheme, pages):
    folder = tempfile.mkdtemp(prefix="docket-navigation-")
    tls, spki, ca = None, None, None
    if scheme == "https":
        cert, key, ca, spki = make_certificates(folder)
        tls = (cert, key)
    process, base = start(binary, folder, tls)
    driver = None
    try:
        print(f"Navigation over {scheme} against {base}", flush=True)
        driver = browser(spki)
        if scheme == "https":
            driver.get(base + "/")
            protocol = driver.execute_script("return performance.getEntriesByType('navigation')[0].nextHopProtocol")
            print(f"  - protocol: {protocol}", flush=True)
        tab = click_through(driver, base, ca, pages)
        slowest = max(tab.timings, key=lambda t: t[1])
        print(f"  - {len(tab.timings)} pages in one tab (back/forward cache on), {tab.restored} restored from the cache; "
              f"slowest {slowest[1] * 1000:.0f} ms ({slowest[0]}), median "
              f"{sorted(t[1] for t in tab.timings)[len(tab.timings) // 2] * 1000:.0f} ms", flush=True)
        if tab.restored == 0:
            print("  - note: no page was restored from the back/forward cache", flush=True)
        resumed = refused_then_resumes(driver, base, ca)
        print(f"  - with every stream taken the page says so and retries; it follows again {resumed:.1f} s after one is free",
              flush=True)
        driver.quit()
        driver = browser(spki, back_forward_cache=False)
        elapsed = quick_views(driver, base, 30)
        print(f"  - 30 quick page views (back/forward cache off) in {elapsed:.1f} s, no stream refused", flush=True)
    finally:
        if driver is not None:
            driver.quit()
        web_ui.stop(process, folder)
        shutil.rmtree(folder, ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--scheme", choices=["http", "https", "both"], default="both")
    parser.add_argument("--pages", type=int, default=32)
    args = parser.parse_args()
    for scheme in (["http", "https"] if args.scheme == "both" else [args.scheme]):
        run(args.binary, scheme, args.pages)
    print("Navigation: all checks passed")


if __name__ == "__main__":
    main()

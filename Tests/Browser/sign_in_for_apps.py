#!/usr/bin/env python3
"""Signing in for apps, in headless Chromium (Selenium) against a live docketd with demo data:

  - an app's authorization code flow with PKCE: Chromium opens the authorization URL, meets the web UI's sign-in
    form, signs in, and is sent to the app's loopback redirect with the code and state (the form's redirect chain
    must pass the page's Content-Security-Policy); the code is exchanged; signed in, a second request goes straight
    back; prompt=login asks again;
  - the device grant: a device code from the token endpoint, its verification page opened in Chromium, "Allow"
    clicked, the device's next poll gets tokens;
  - "Sign in with …" a trusted provider on another site (Tests/Federation/idp.py at localhost, docketd at
    127.0.0.1): the provider sends Chromium back, and My work opens signed in (the session cookie is SameSite=Strict,
    so this is where a redirect would fail).
Any error in the console (a CSP violation included) fails the run.

Usage: Tests/Browser/sign_in_for_apps.py --binary PATH
"""
import argparse
import base64
import hashlib
import http.server
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from web_ui import PAGE_CHANGES, browser, start, stop  # noqa: E402

CLIENT = "datasync-starter-client"
received = []


class Callback(http.server.BaseHTTPRequestHandler):
    """The app's loopback redirect target: records what the provider sent."""

    def do_GET(self):
        received.append(self.path)
        body = b"<!doctype html><title>App</title><p>Signed in; you may close this window.</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def post(url, fields):
    request = urllib.request.Request(url, data=urllib.parse.urlencode(fields).encode(), method="POST",
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def fail(message):
    sys.exit("sign_in_for_apps: " + message)


def console_errors(driver):
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    # The provider double's libraries (Tests/Federation/idp.py).
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "authlib==1.9.6", "flask"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    idp = subprocess.Popen([sys.executable, os.path.join(here, "..", "Federation", "idp.py"), "--host-name", "localhost"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    issuer = idp.stdout.readline().strip().rsplit(" ", 1)[-1]
    if not issuer.startswith("http://localhost:"):
        fail("the provider did not start: " + idp.stderr.read())
    os.environ["DOCKET_TEST_IDP_SECRET"] = "web-secret"
    os.environ["DOCKET_OIDC_TRUST"] = issuer + ",client=docket-web,secret-env=DOCKET_TEST_IDP_SECRET,name=Acme SSO"
    folder = tempfile.mkdtemp(prefix="docket-sign-in-")
    process, port = start(args.binary, folder)
    base = f"http://127.0.0.1:{port}"
    realm = base + "/realms/docket/protocol/openid-connect"
    app = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Callback)
    threading.Thread(target=app.serve_forever, daemon=True).start()
    redirect = f"http://localhost:{app.server_port}/callback"
    driver = None
    try:
        driver = browser()
        wait = WebDriverWait(driver, 15, ignored_exceptions=PAGE_CHANGES)
        print("Signing in for apps in headless Chromium against", base, flush=True)

        print("  - an app's authorization code flow with PKCE, through the sign-in form", flush=True)
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(12)
        authorize = realm + "/auth?" + urllib.parse.urlencode({
            "response_type": "code", "client_id": CLIENT, "redirect_uri": redirect, "scope": "openid profile", "state": state,
            "nonce": "n1", "code_challenge": challenge, "code_challenge_method": "S256", "login_hint": "john.doe"})
        driver.get(authorize)
        wait.until(lambda d: d.find_element(By.ID, "password"))
        if driver.find_element(By.ID, "user_name").get_attribute("value") != "john.doe":
            fail("login_hint did not fill the user name")
        driver.find_element(By.ID, "password").send_keys("password")
        driver.find_element(By.CSS_SELECTOR, ".signin form button[type=submit]").click()
        wait.until(lambda d: d.current_url.startswith(redirect))
        query = urllib.parse.parse_qs(urllib.parse.urlparse(driver.current_url).query)
        if query.get("state") != [state] or not received:
            fail(f"the app did not get its state back: {driver.current_url}")
        status, tokens = post(realm + "/token", {"grant_type": "authorization_code", "client_id": CLIENT, "code": query["code"][0],
                                                 "redirect_uri": redirect, "code_verifier": verifier})
        if status != 200 or "id_token" not in tokens:
            fail(f"the code exchange failed: {status} {tokens}")
        errors = console_errors(driver)
        if errors:
            fail("console errors during the sign-in: " + "; ".join(errors))

        print("  - Back from the app's page, then Forward: no error page, and the spent code stays spent", flush=True)
        first_code = query["code"][0]
        driver.back()
        time.sleep(1)
        print(f"    Back shows {driver.current_url[:90]}", flush=True)
        # Keycloak's behaviour: the authorization request again, answered at once (signed in) with a new code.
        if not driver.current_url.startswith(redirect) or "error" in driver.current_url or f"state={state}" not in driver.current_url:
            fail("Back from the app's page did not return to the app with a new code: " + driver.current_url)
        if "code=" + first_code in driver.current_url:
            fail("Back from the app's page handed the spent code again")
        driver.forward()
        time.sleep(1)
        print(f"    Forward shows {driver.current_url[:90]}", flush=True)
        status, _ = post(realm + "/token", {"grant_type": "authorization_code", "client_id": CLIENT, "code": first_code,
                                           "redirect_uri": redirect, "code_verifier": verifier})
        if status != 400:
            fail(f"a spent code was accepted again after Back and Forward: {status}")

        print("  - signed in, the next request goes straight back; prompt=login asks again", flush=True)
        driver.get(authorize.replace(state, "second"))
        wait.until(lambda d: d.current_url.startswith(redirect))
        if "state=second" not in driver.current_url:
            fail("the second request did not come back: " + driver.current_url)
        driver.get(authorize + "&prompt=login")
        wait.until(lambda d: d.find_element(By.ID, "password"))

        print("  - the device grant, allowed in the browser", flush=True)
        status, device = post(realm + "/auth/device", {"client_id": "docket-cli", "client_secret": "docket-cli", "scope": "openid"})
        if status != 200:
            fail(f"no device code: {status} {device}")
        driver.get(device["verification_uri_complete"])
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "button[value=allow]"))
        if "Docket command-line app" not in driver.find_element(By.CSS_SELECTOR, "main").text:
            fail("the device page does not say which app asks")
        driver.find_element(By.CSS_SELECTOR, "button[value=allow]").click()
        wait.until(lambda d: "Device signed in" in d.find_element(By.CSS_SELECTOR, "main").text)
        status, tokens = post(realm + "/token", {"grant_type": "urn:ietf:params:oauth:grant-type:device_code", "client_id": "docket-cli",
                                                 "client_secret": "docket-cli", "device_code": device["device_code"]})
        if status != 200:
            fail(f"the device did not get tokens: {status} {tokens}")

        print("  - Sign in with a trusted provider on another site", flush=True)
        driver.delete_all_cookies()
        driver.get(base + "/")
        driver.find_element(By.PARTIAL_LINK_TEXT, "Sign in with Acme SSO").click()
        wait.until(lambda d: d.current_url.startswith(base + "/app/work") and "John Doe" in d.find_element(By.CSS_SELECTOR, "body").text)
        print("  - Back from My work after the provider's sign-in, then Forward", flush=True)
        driver.back()
        time.sleep(1.5)
        text = driver.find_element(By.CSS_SELECTOR, "body").text
        print(f"    Back shows {driver.current_url[:90]}: {text[:80]!r}", flush=True)
        if "did not start here" in text or "refused" in text.lower() or "John Doe" not in text:
            fail("Back after the provider's sign-in does not show a signed-in page: " + text[:200])
        driver.forward()
        wait.until(lambda d: "John Doe" in d.find_element(By.CSS_SELECTOR, "body").text)
        print(f"    Forward shows {driver.current_url[:90]}", flush=True)
        errors = console_errors(driver)
        if errors:
            fail("console errors: " + "; ".join(errors))
        print("Signing in for apps: all checks passed")
    finally:
        if driver is not None:
            driver.quit()
        app.shutdown()
        stop(process, folder)
        idp.stdin.close()
        idp.wait(10)
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""docketd trusting a company's OpenID provider (--oidc-trust), against one Docket did not write: authlib's
authorization server (Tests/Federation/idp.py) issuing RFC 9068 JWT access tokens with the password grant.

    python3 Tests/Federation/federation.py --binary PATH/docketd

Checks: the provider's token reaches the Table API, ServiceNow GraphQL and DataSync as the user its verified e-mail
links it to (and then by its subject, whatever name it says); a user unknown to Docket is made on first sight with the
roles it has here (--oidc-provision); tokens naming admin, or with the administrator's e-mail (verified or not), or
without a subject, sign in as nobody; tokens of an untrusted
issuer, with a wrong audience, expired, signed by an unknown key, unsigned, or HS256 with the public key are
refused (401); after the provider rotates its key, tokens signed with the new one are accepted (the key set is
fetched again); with the provider down, tokens of known keys still work and a token naming an unknown key is 503,
never 401. Exits 0 when all hold.
"""
import argparse
import base64
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import requests

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "MultiInstance"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Support"))
from checks import b64, check, failures, unb64  # noqa: E402
from kill_instance import start  # noqa: E402



def call(url, method="GET", data=None, headers=None):
    request = urllib.request.Request(url, method=method, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def idp_token(issuer, user="john.doe", client=("docket-federation", "federation-secret")):
    status, body = call(issuer + "/token", "POST", urllib.parse.urlencode(
        {"grant_type": "password", "username": user, "password": "idp-secret"}).encode(), {
        "Authorization": "Basic " + base64.b64encode(f"{client[0]}:{client[1]}".encode()).decode(),
        "Content-Type": "application/x-www-form-urlencoded"})
    assert status == 200, body
    return json.loads(body)["access_token"]


def mint(issuer, **claims):
    status, body = call(issuer + "/admin/mint", "POST", json.dumps(claims).encode(), {"Content-Type": "application/json"})
    assert status == 200, body
    return json.loads(body)["token"]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    args = parser.parse_args()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "authlib==1.9.6", "flask"],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    idp = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "idp.py")],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    issuer = idp.stdout.readline().strip().rsplit(" ", 1)[-1]
    if not issuer.startswith("http://"):
        sys.exit("federation: the provider did not start: " + idp.stderr.read())
    folder = tempfile.mkdtemp(prefix="docket-federation-")
    os.environ["DOCKET_TEST_IDP_SECRET"] = "web-secret"
    os.environ["DOCKET_OIDC_TRUST"] = issuer + ",audience=docket-api,roles=realm_access.roles,client=docket-web,secret-env=DOCKET_TEST_IDP_SECRET,name=Acme SSO"
    os.environ["DOCKET_OIDC_PROVISION"] = "1"
    process, port = start(args.binary, "sqlite:" + os.path.join(folder, "docket.sqlite"), folder, demo=True)
    base = f"http://127.0.0.1:{port}"

    def api(token, path="/api/now/table/incident?sysparm_limit=1", method="GET", body=None):
        headers = {"Authorization": "Bearer " + token, "Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        return call(base + path, method, json.dumps(body).encode() if body is not None else None, headers)

    try:
        token = idp_token(issuer)
        status, body = api(token, "/api/now/table/incident", "POST", {"short_description": "from the company's provider"})
        check(status == 201 and json.loads(body)["result"]["sys_created_by"] == "john.doe",
              f"the provider's token creates an incident as john.doe ({status})")
        status, body = api(token, "/api/now/graphql", "POST", {"query": "{ GlideRecord_Query { incident { _rowCount } } }"})
        check(status == 200 and "errors" not in json.loads(body), f"ServiceNow GraphQL with the token ({status})")
        status, body = api(token, "/graphql", "POST", {"query": "{ allTasks { id } }"})
        check(status == 200 and "errors" not in json.loads(body), f"DataSync GraphQL with the token ({status})")

        status, body = api(idp_token(issuer, "newperson"))
        check(status == 200, f"an unknown user is made on first sight and may read incidents through the itil role ({status})")
        status, body = call(base + "/api/now/table/sys_user?sysparm_query=user_name%3Dnewperson&sysparm_fields=user_name",
                            headers={"Authorization": "Basic " + base64.b64encode(b"admin:admin").decode(), "Accept": "application/json"})
        check(json.loads(body)["result"] == [{"user_name": "newperson"}], "the new user exists once")

        # The web UI's "Sign in with …": the authorization code flow with docketd as the provider's client.
        browser = requests.Session()
        page = browser.get(base + "/")
        check("Sign in with Acme SSO" in page.text, "the sign-in page offers the trusted provider")
        landed = browser.get(base + "/app/sso/0?next=/app/work")
        check(landed.status_code == 200 and "Signed in" in landed.text and "docket_session" in browser.cookies,
              f"through the provider and back, signed in with a Docket session ({landed.status_code})")
        work = browser.get(base + "/app/work")
        check(work.status_code == 200 and "John Doe" in work.text, f"My work as John Doe after the provider's sign-in ({work.status_code})")
        forged = requests.Session().get(base + "/app/sso/callback?code=x&state=forged")
        check(forged.status_code == 400 and "docket_session" not in forged.cookies, f"a callback that did not start here is refused ({forged.status_code})")
        call(issuer + "/admin/sign-in", "POST", json.dumps({"refuse": True}).encode(), {"Content-Type": "application/json"})
        refused = requests.Session().get(base + "/app/sso/0")
        check(refused.status_code == 401 and "did not sign you in" in refused.text, f"the provider's refusal is said on the sign-in page ({refused.status_code})")
        call(issuer + "/admin/sign-in", "POST", json.dumps({"refuse": False}).encode(), {"Content-Type": "application/json"})

        refusals = {
            "another audience": idp_token(issuer, client=("other-app", "other-secret")),
            "expired": mint(issuer, preferred_username="john.doe", exp=int(time.time()) - 600),
            "not yet valid": mint(issuer, preferred_username="john.doe", nbf=int(time.time()) + 600),
            "another issuer": mint(issuer, preferred_username="john.doe", iss="http://127.0.0.1:1"),
            "signed by a key the provider never published": mint(issuer, preferred_username="john.doe", foreign=True),
            "signed with HS256 (the public key as a secret)": b64(json.dumps({"alg": "HS256", "kid": "key-1"}).encode()) + "."
                + token.split(".")[1] + "." + b64(b"x" * 32),
            "unsigned (alg none)": b64(json.dumps({"alg": "none", "kid": "key-1"}).encode()) + "." + token.split(".")[1] + ".",
            "a changed claim": token.split(".")[0] + "." + b64(json.dumps(
                dict(json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==")), preferred_username="admin")).encode())
                + "." + token.split(".")[2],
        }
        for what, refused in refusals.items():
            status, _ = api(refused)
            check(status == 401, f"a token {what} is refused ({status})")
        # Signed by the provider, for people who chose what their tokens say: none reaches an account it is not
        # linked to (the administrator's least of all).
        chosen = {
            "whose user name is admin": mint(issuer, sub="stranger-1", preferred_username="admin"),
            "with the administrator's e-mail, unverified": mint(issuer, sub="stranger-2", preferred_username="admin",
                                                               email="admin@example.com"),
            "with the administrator's e-mail, verified": mint(issuer, sub="stranger-3", preferred_username="admin",
                                                             email="admin@example.com", email_verified=True),
            "without a subject": mint(issuer, sub="", preferred_username="someone.new"),
        }
        for what, refused in chosen.items():
            status, body = api(refused, "/api/now/table/sys_user?sysparm_query=user_name%3Dadmin&sysparm_fields=user_name")
            check(status == 401, f"a token of the provider {what} signs in as nobody ({status})")
        # The same person under another name: the link (issuer and sub) decides, not the name.
        renamed = mint(issuer, sub=json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "=="))["sub"],
                       preferred_username="admin", realm_access={"roles": ["admin"]})
        status, body = api(renamed, "/api/now/table/incident", "POST", {"short_description": "renamed at the provider"})
        check(status == 201 and json.loads(body)["result"]["sys_created_by"] == "john.doe",
              f"john.doe's subject signs in as john.doe whatever name the token says ({status})")

        # The provider rotates its key: a token of the new key is accepted once the set is fetched again.
        call(issuer + "/admin/rotate", "POST", b"{}", {"Content-Type": "application/json"})
        time.sleep(11)
        status, _ = api(idp_token(issuer))
        check(status == 200, f"after the provider's key rotation, a token of the new key works ({status})")
        status, _ = api(token)
        check(status == 200, f"a token of the old key still works while the provider publishes it ({status})")

        # The provider goes away: known keys still verify; a token naming a key not held is no answer (503).
        idp.stdin.close()
        idp.wait(10)
        status, _ = api(token)
        check(status == 200, f"with the provider down, a token of a known key works ({status})")
        header = b64(json.dumps({"alg": "RS256", "kid": "key-99", "typ": "at+jwt"}).encode())
        time.sleep(11)
        status, _ = api(header + "." + token.split(".", 1)[1])
        check(status == 503, f"with the provider down, a token naming an unknown key is 503 ({status})")
    finally:
        process.terminate()
        process.wait(10)
        if idp.poll() is None:
            idp.kill()
    print(f"federation: {len(failures)} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

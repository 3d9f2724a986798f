#!/usr/bin/env python3
"""docketd as an operator runs it: metrics, health probes and JSON logs of a release build.

    python3 Tests/Operations/observability.py --binary PATH/docketd [--promtool PATH]

Starts docketd with --demo, --metrics-port 0, --log-format json and a metrics token (from the environment, as the
docs advise), then checks:
  - /health/live and /health/ready answer 200 (HEAD too);
  - after requests of several dialects (a list, a wrong password, an OAuth token, a GraphQL query, the web UI's
    login page, an unknown path), the metrics listener refuses a scrape without the token and serves one with it;
    `promtool check metrics` passes on it (no lint message at all), and the request counters name dialect, route
    pattern, method and status;
  - the main port serves /metrics only with the token;
  - every line docketd wrote to standard error is one JSON object with time, level and message; each request's
    line carries its request id (the one the response echoed), user, dialect, route, status and duration;
  - /api/docket/openapi.json is valid OpenAPI 3.1 (openapi-spec-validator) and has each table's paths;
  - no password, token, cookie or Authorization header appears anywhere in the log.
Exits 0 when all hold.
"""

import argparse
import base64
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid


def call(port, method, path, body=None, headers=None, form=False):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    all_headers = {"Accept": "application/json"}
    if body is not None:
        all_headers["Content-Type"] = "application/x-www-form-urlencoded" if form else "application/json"
    all_headers.update(headers or {})
    data = None if body is None else (urllib.parse.urlencode(body) if form else json.dumps(body))
    connection.request(method, path, body=data, headers=all_headers)
    response = connection.getresponse()
    payload = response.read()
    result = (response.status, dict((k.lower(), v) for k, v in response.getheaders()), payload)
    connection.close()
    return result


def basic(user, password):
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def start(binary, folder, token):
    out = open(os.path.join(folder, "stdout"), "w+")
    err = open(os.path.join(folder, "stderr"), "w")
    env = dict(os.environ, DOCKET_METRICS_TOKEN=token)
    args = [binary, "--demo", "--port", "0", "--data-dir", os.path.join(folder, "data"), "--metrics-port", "0",
            "--log-format", "json", "--log-level", "info"]
    process = subprocess.Popen(args, stdout=out, stderr=err, env=env)
    ports = {}
    for _ in range(1800):  # up to 3 minutes: a loaded machine starts the demo slowly
        out.seek(0)
        for line in out.read().splitlines():
            if line.startswith("docketd listening on "):
                ports["main"] = int(line.rsplit(":", 1)[1])
            if line.startswith("docketd metrics listening on "):
                ports["metrics"] = int(line.rsplit(":", 1)[1])
        if len(ports) == 2:
            return process, ports["main"], ports["metrics"]
        if process.poll() is not None:
            break
        time.sleep(0.1)
    sys.exit("docketd did not start: " + open(os.path.join(folder, "stderr")).read())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--promtool", default="promtool")
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="docket-observability-")
    token = "metrics-" + uuid.uuid4().hex
    secret = "Quokka-" + uuid.uuid4().hex
    process, port, metrics_port = start(args.binary, folder, token)
    problems = []
    secrets = [token, secret, "docket-demo-secret"]
    try:
        for path in ["/health/live", "/health/ready", "/health"]:
            for method in ["GET", "HEAD"]:
                status, _, _ = call(port, method, path)
                if status != 200:
                    problems.append(f"{method} {path}: {status}")

        admin = basic("admin", "admin")
        john = "/api/now/table/sys_user?sysparm_query=user_name=john.doe&sysparm_fields=sys_id"
        status, _, body = call(port, "GET", john, headers=admin)
        john_id = json.loads(body)["result"][0]["sys_id"]
        status, _, _ = call(port, "PATCH", f"/api/now/table/sys_user/{john_id}", {"user_password": secret}, headers=admin)
        if status != 200:
            problems.append(f"setting a password: {status}")
        secrets.append(basic("john.doe", secret)["Authorization"])

        request_ids = {}
        status, headers, _ = call(port, "GET", "/api/now/table/incident?sysparm_limit=5", headers=basic("john.doe", secret))
        request_ids[headers.get("x-request-id")] = ("john.doe", "servicenow", "/api/now/table/{table}", status)
        cookie = headers.get("set-cookie", "").split(";")[0]
        if cookie:
            secrets.append(cookie.split("=", 1)[1])
            status, headers, _ = call(port, "GET", "/api/now/table/incident?sysparm_limit=1", headers={"Cookie": cookie})
            request_ids[headers.get("x-request-id")] = ("john.doe", "servicenow", "/api/now/table/{table}", status)
        status, headers, _ = call(port, "GET", "/api/now/table/incident", headers=basic("john.doe", secret + "-wrong"))
        secrets.append(basic("john.doe", secret + "-wrong")["Authorization"])
        if status != 401:
            problems.append(f"a wrong password: {status}")
        status, _, body = call(port, "POST", "/oauth_token.do", {
            "grant_type": "password", "client_id": "docket-demo", "client_secret": "docket-demo-secret",
            "username": "john.doe", "password": secret}, form=True)
        grant = json.loads(body)
        secrets += [grant["access_token"], grant["refresh_token"]]
        status, headers, _ = call(port, "POST", "/api/now/graphql", {"query": "{ __typename }"},
                                  headers={"Authorization": "Bearer " + grant["access_token"]})
        request_ids[headers.get("x-request-id")] = ("john.doe", "servicenow", None, status)
        call(port, "GET", "/app/login")
        call(port, "GET", "/no/such/path")
        status, headers, _ = call(port, "GET", "/api/now/table/incident?sysparm_limit=1",
                                  headers=dict(basic("john.doe", secret), **{"X-Request-ID": "from-the-proxy-1"}))
        if headers.get("x-request-id") != "from-the-proxy-1":
            problems.append(f"the caller's request id was not kept: {headers.get('x-request-id')}")
        request_ids["from-the-proxy-1"] = ("john.doe", "servicenow", "/api/now/table/{table}", status)

        # Metrics: the listener of its own, then the main port.
        status, _, _ = call(metrics_port, "GET", "/metrics")
        if status != 401:
            problems.append(f"metrics without the token: {status}")
        status, headers, exposition = call(metrics_port, "GET", "/metrics", headers={"Authorization": "Bearer " + token})
        if status != 200 or not headers.get("content-type", "").startswith("text/plain; version=0.0.4"):
            problems.append(f"metrics with the token: {status} {headers.get('content-type')}")
        check = subprocess.run([args.promtool, "check", "metrics"], input=exposition, capture_output=True)
        lint = (check.stdout + check.stderr).decode().strip()
        if check.returncode != 0 or lint:
            problems.append(f"promtool check metrics: exit {check.returncode}: {lint}")
        text = exposition.decode()
        expected = 'docket_http_requests_total{dialect="servicenow",route="/api/now/table/{table}",method="GET",status="200"}'
        if expected not in text:
            problems.append("no request counter with dialect, route, method and status")
        for family in ["docket_http_request_duration_seconds", "docket_storage_statement_seconds", "docket_storage_wait_seconds",
                       "docket_auth_login_failures_total", "docket_event_log_head", "docket_live_streams_open",
                       "docket_auth_password_checks_in_flight"]:
            if f"# HELP {family} " not in text:
                problems.append(f"no {family} with help text")
        # The API description: valid OpenAPI 3.1 for openapi-spec-validator.
        status, _, body = call(port, "GET", "/api/docket/openapi.json", headers=basic("john.doe", secret))
        if status != 200:
            problems.append(f"/api/docket/openapi.json: {status}")
        else:
            try:
                from openapi_spec_validator import validate
            except ImportError:
                subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                "openapi-spec-validator==0.9.0"], check=True)
                from openapi_spec_validator import validate
            document = json.loads(body)
            try:
                validate(document)
            except Exception as error:  # noqa: BLE001 - the validator's own exception types vary by version
                problems.append(f"openapi-spec-validator: {str(error)[:300]}")
            if "/api/now/table/incident" not in document.get("paths", {}):
                problems.append("the OpenAPI document has no paths of the incident table")
        status, _, _ = call(port, "GET", "/metrics")
        if status != 401:
            problems.append(f"main-port metrics without the token: {status}")
        status, _, _ = call(port, "GET", "/metrics", headers={"Authorization": "Bearer " + token})
        if status != 200:
            problems.append(f"main-port metrics with the token: {status}")
    finally:
        process.terminate()
        process.wait(timeout=30)

    log = open(os.path.join(folder, "stderr")).read()
    lines = [line for line in log.splitlines() if line.strip()]
    if not lines:
        problems.append("nothing was logged")
    requests = {}
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            problems.append(f"not a JSON line: {line[:200]}")
            continue
        for key in ["time", "level", "message"]:
            if key not in entry:
                problems.append(f"no {key}: {line[:200]}")
        if entry.get("message") == "request" and "request_id" in entry:
            requests[entry["request_id"]] = entry
    for request_id, (user, dialect, route, status) in request_ids.items():
        entry = requests.get(request_id)
        if entry is None:
            problems.append(f"no log line for request {request_id}")
            continue
        for key, want in [("user", user), ("dialect", dialect), ("route", route), ("status", str(status))]:
            if want is not None and entry.get(key) != want:
                problems.append(f"request {request_id}: {key} is {entry.get(key)!r}, not {want!r}")
        if "duration_ms" not in entry:
            problems.append(f"request {request_id}: no duration")
    for leaked in secrets:
        if leaked and leaked in log:
            problems.append(f"a secret was logged: {leaked[:6]}…")
    if "authorization" in log.lower() and "Basic " in log:
        problems.append("an Authorization header was logged")

    print(f"{len(lines)} log lines, {len(requests)} request lines, {len(secrets)} secrets checked")
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems))
        sys.exit(1)
    print("observability: all checks passed")


if __name__ == "__main__":
    main()

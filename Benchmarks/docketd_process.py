"""Starting a docketd for a benchmark: demo data in a folder of its own, a port the kernel picks."""
import os
import subprocess
import time


def start(binary, folder, *extra, data="data", wait=60):
    """Starts `binary --demo` with its data in `folder/data` and `extra` options; (process, port) once it listens."""
    out = open(os.path.join(folder, "stdout"), "w+")
    process = subprocess.Popen(
        [binary, "--demo", "--port", "0", "--data-dir", os.path.join(folder, data), "--log-level", "warning", *extra],
        stdout=out, stderr=subprocess.DEVNULL,
    )
    for _ in range(wait * 10):
        out.seek(0)
        text = out.read()
        if "listening on" in text:
            return process, int(text.strip().rsplit(":", 1)[1])
        time.sleep(0.1)
    raise SystemExit("docketd did not start")


class AdminClient:
    """JSON requests as admin on one kept-alive connection: Basic first, then the session cookie, as clients do."""

    def __init__(self, port):
        import base64
        import http.client
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.headers = {"Authorization": "Basic " + base64.b64encode(b"admin:admin").decode(),
                        "Accept": "application/json", "Content-Type": "application/json"}

    def call(self, method, path, body=None):
        import json
        import sys
        self.connection.request(method, path, body=json.dumps(body) if body is not None else None, headers=self.headers)
        response = self.connection.getresponse()
        data = response.read()
        if response.status >= 300:
            sys.exit(f"{method} {path} answered {response.status}: {data[:200]!r}")
        cookie = response.getheader("Set-Cookie")
        if cookie and "Cookie" not in self.headers:
            self.headers["Cookie"] = cookie.split(";", 1)[0]
            self.headers.pop("Authorization", None)  # later requests ride the session
        return json.loads(data) if data else None

    def user_id(self, name):
        return self.call("GET", f"/api/now/table/sys_user?sysparm_query=user_name={name}&sysparm_fields=sys_id")["result"][0]["sys_id"]

"""What the end-to-end scripts share: a check that prints ok/FAIL and remembers failures, and base64url."""
import base64

failures = []


def check(condition, what):
    print(("ok   " if condition else "FAIL ") + what, flush=True)
    if not condition:
        failures.append(what)


def b64(data):
    """base64url without padding."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64(text):
    """The bytes of base64url text, padded or not."""
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def api(base, method, path, user="john.doe", password="password", body=None):
    """A JSON call to docketd as a demo user (Basic); its status and parsed body (None when empty)."""
    import json
    import urllib.error
    import urllib.request
    request = urllib.request.Request(base + path, method=method, data=json.dumps(body).encode() if body is not None else None, headers={
        "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode(), "Accept": "application/json",
        **({"Content-Type": "application/json"} if body is not None else {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            raw = response.read()
            return response.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as error:
        raw = error.read()
        return error.code, json.loads(raw) if raw else None

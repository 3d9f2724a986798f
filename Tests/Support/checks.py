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

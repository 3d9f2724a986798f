#!/usr/bin/env python3
"""No secret in the logs of the whole test suite.

    DOCKET_TEST_LOG=/tmp/suite.log swift test ...
    python3 Tests/Operations/secret_scan.py /tmp/suite.log

With DOCKET_TEST_LOG set, every app the server tests build logs there at trace level (JSON lines), and every
credential the test client sent or was handed (Authorization headers and their tokens, cookies, passwords and
secrets in forms, access, refresh and ID tokens) is listed in the same name plus `.credentials`. This fails when any
of those credentials, or anything shaped like one (a Basic or Bearer header, a bcrypt hash, a JSON Web Token),
appears in any log line.
"""

import re
import sys

SHAPES = [
    ("an Authorization header", re.compile(r"\b(?:Basic|Bearer)\s+[A-Za-z0-9+/=._~-]{12,}")),
    ("a bcrypt hash", re.compile(r"\$2[aby]\$\d\d\$[./A-Za-z0-9]{20,}")),
    ("a JSON Web Token", re.compile(r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}")),
]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    log_path = sys.argv[1]
    with open(log_path, encoding="utf-8", errors="replace") as log:
        lines = log.read().splitlines()
    try:
        with open(log_path + ".credentials", encoding="utf-8", errors="replace") as listed:
            credentials = {line for line in listed.read().splitlines() if len(line) >= 10}
    except FileNotFoundError:
        credentials = set()
    if len(lines) < 1000 or len(credentials) < 20:
        sys.exit(f"secret scan: only {len(lines)} log lines and {len(credentials)} credentials; was DOCKET_TEST_LOG set for the suite?")
    problems = []
    text = "\n".join(lines)
    for credential in sorted(credentials):
        if credential in text:
            where = next(line for line in lines if credential in line)
            problems.append(f"a credential ({credential[:6]}…) is logged: {where[:300]}")
    for name, shape in SHAPES:
        for line in lines:
            if shape.search(line):
                problems.append(f"{name} is logged: {line[:300]}")
                break
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems[:20]))
        sys.exit(1)
    print(f"secret scan: {len(lines)} log lines of the suite hold none of its {len(credentials)} credentials")


if __name__ == "__main__":
    main()

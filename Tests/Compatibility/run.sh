#!/usr/bin/env bash
# The compatibility suite: unmodified PyPI clients (pysnc, pysnow, gql) against a live docketd with
# demo data, over HTTPS with a throw-away CA made here. Usage: Tests/Compatibility/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -TERM "$SERVER_PID"
        wait "$SERVER_PID" || true
    fi
    rm -rf "$WORK"
}
trap cleanup EXIT

python3 -m pip install --quiet --disable-pip-version-check pysnc==1.2.1 pysnow==0.7.17 requests-oauthlib \
    "gql[requests,websockets]==3.5.3" authlib==1.9.6 2>&1 \
    | grep -v "Running pip as the 'root' user" || true

# A CA and a server certificate for 127.0.0.1 and localhost, valid for one day.
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=Docket test CA" \
    -keyout "$WORK/ca.key" -out "$WORK/ca.pem" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout "$WORK/server.key" -out "$WORK/server.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' \
    > "$WORK/ext.cnf"
openssl x509 -req -in "$WORK/server.csr" -CA "$WORK/ca.pem" -CAkey "$WORK/ca.key" -CAcreateserial -days 1 \
    -extfile "$WORK/ext.cnf" -out "$WORK/server.pem" 2>/dev/null

# DOCKET_BIN runs another build (CI passes the debug build it tested); without it, a release build.
if [[ -n "${DOCKET_BIN:-}" ]]; then
    BIN=$DOCKET_BIN
else
    swift build -c release --product docketd >/dev/null
    BIN=$(swift build -c release --show-bin-path)/docketd
fi
"$BIN" --demo --port 0 --data-dir "$WORK/data" --tls-cert "$WORK/server.pem" --tls-key "$WORK/server.key" \
    --log-level warning > "$WORK/stdout" 2> "$WORK/stderr" &
SERVER_PID=$!
for _ in $(seq 1 1800); do  # up to 3 minutes on a loaded machine
    grep -q "listening on" "$WORK/stdout" 2>/dev/null && break
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.1
done
URL=$(sed -n 's/^docketd listening on //p' "$WORK/stdout")
if [[ -z "$URL" ]]; then
    echo "compatibility: docketd did not start" >&2
    cat "$WORK/stderr" >&2
    exit 1
fi
echo "compatibility: docketd at $URL"

export DOCKET_URL="$URL" DOCKET_CA="$WORK/ca.pem" REQUESTS_CA_BUNDLE="$WORK/ca.pem"
# HTTP/2 is offered by ALPN: curl, when it has HTTP/2, must negotiate it.
if curl --version | grep -q HTTP2; then
    version=$(curl -s --cacert "$WORK/ca.pem" --http2 -o /dev/null -w '%{http_version}' "$URL/health")
    [[ "$version" == "2" ]] || { echo "compatibility: expected HTTP/2, got $version" >&2; exit 1; }
    echo "compatibility: HTTP/2 negotiated by ALPN"
fi
status=0
for suite in ${COMPAT_SUITES:-test_pysnc test_pysnow test_gql test_oidc}; do
    (cd "$ROOT/Tests/Compatibility" && python3 -W ignore::ResourceWarning -m unittest -v "$suite") || status=1
done
# ServiceNow's own pysnc test suite (the test/ folder of its repository, sync and asyncio), run unmodified as admin
# when a checkout of pysnc 1.2.1 is at hand: PYSNC_SUITE_DIR=/path/to/PySNC. PyPI's package does not ship it, and
# CI has no copy, so CI runs test_pysnc's regression tests of what it found instead (docs/compatibility.md).
if [[ -n "${PYSNC_SUITE_DIR:-}" ]]; then
    python3 -m pip install --quiet --disable-pip-version-check pytest python-dotenv httpx 2>&1 \
        | grep -v "Running pip as the 'root' user" || true
    echo "compatibility: pysnc's own suite in $PYSNC_SUITE_DIR"
    (cd "$PYSNC_SUITE_DIR" && PYSNC_SERVER="$URL" PYSNC_USERNAME=admin PYSNC_PASSWORD=admin \
        PYSNC_CLIENT_ID=docket-demo PYSNC_CLIENT_SECRET=docket-demo-secret SSL_CERT_FILE="$WORK/ca.pem" \
        python3 -m pytest -q -p no:cacheprovider -p no:warnings -rfE test) || status=1
fi
exit $status

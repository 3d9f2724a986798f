#!/usr/bin/env bash
# Every operation of docketd's OpenAPI document fuzzed by schemathesis (PyPI) against a demo docketd, as an itil
# user: no 5xx, and every response matching the document (status, content type, headers, body schema). 90 seconds,
# fixed seed; failed logins are not throttled here (the fuzzer sends wrong credentials on purpose).
#
#   Tests/Operations/schemathesis.sh PATH/docketd [seconds]
#
# Left out: the event stream (an endless response); the check that an undeclared method is answered 405 (docketd
# answers as ServiceNow does, 400 "Requested URI does not represent any resource"); and whether the server accepts
# every request the schema allows and refuses every other: an encoded query, a reference or a field name is valid
# only against the data and the catalog, which no JSON Schema says, and ServiceNow reads loose parameters leniently
# (docs/compatibility.md).
set -euo pipefail
binary="${1:?give the docketd to test}"
seconds="${2:-90}"
command -v st >/dev/null || python3 -m pip install --quiet --disable-pip-version-check schemathesis==4.32.5 2>&1 \
    | grep -v "Running pip as the 'root' user" || true
folder="$(mktemp -d)"
"$binary" --demo --port 0 --data-dir "$folder/data" --log-level warning \
    --login-free-failures 1000000 --login-free-address-failures 1000000 >"$folder/stdout" 2>"$folder/stderr" &
server=$!
trap 'kill $server 2>/dev/null || true; wait $server 2>/dev/null || true; rm -rf "$folder"' EXIT
for _ in $(seq 1 1800); do  # up to 3 minutes on a loaded machine
    grep -q 'listening on' "$folder/stdout" 2>/dev/null && break
    kill -0 "$server" 2>/dev/null || break
    sleep 0.1
done
base="$(sed -n 's/^docketd listening on //p' "$folder/stdout")"
[ -n "$base" ] || { echo "docketd did not start:"; cat "$folder/stderr"; exit 1; }
curl -sf -u john.doe:password "$base/api/docket/openapi.json" -o "$folder/openapi.json"
# One worker: with two, hypothesis's own cache of lambda sources races between its threads ("AST constructor
# recursion depth mismatch"), an error of the fuzzer's that no request caused.
run() { # round
    local status=0
    st run "$folder/openapi.json" --url "$base" -a john.doe:password \
        --exclude-checks unsupported_method,positive_data_acceptance,negative_data_rejection \
        --exclude-path-regex '^/api/docket/events$' --max-time "$seconds" --workers 1 --seed "${SCHEMATHESIS_SEED:-1}" \
        --continue-on-failure --no-color >"$folder/st-$1.log" 2>&1 || status=$?
    cp "$folder/st-$1.log" "${SCHEMATHESIS_LOG:-/dev/null}" 2>/dev/null || true
    # The failures and errors in full (they come before the summary), then the summary.
    sed -n '/^=* \(FAILURES\|ERRORS\) =*$/,/^=* SUMMARY =*$/p' "$folder/st-$1.log" | head -300
    tail -30 "$folder/st-$1.log"
    return "$status"
}
status=0
run 1 || status=$?
# A failed check is docketd's fault and fails at once. An error of the fuzzer's own run (a network error or a
# timeout, printed above) is given one more round: it fails only when it comes again.
if [ "$status" -ne 0 ] && ! grep -q '^Failures:' "$folder/st-1.log" && grep -q '^Errors:' "$folder/st-1.log"; then
    echo "schemathesis: errors without a failed check; one more round"
    status=0
    run 2 || status=$?
fi
if ! kill -0 "$server" 2>/dev/null; then echo "docketd died"; exit 1; fi
exit "$status"

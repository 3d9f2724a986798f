#!/usr/bin/env bash
# Red Hat's Ansible collection servicenow.itsm, its own integration targets unmodified, against a docketd with demo
# data. Needs a checkout of the collection (2.15.1) at ITSM_COLLECTION_DIR, laid out as Ansible requires:
# <somewhere>/ansible_collections/servicenow/itsm. The collection is on Ansible Galaxy and GitHub, neither of which
# CI reaches, so CI runs ITSMAPITests (the router tests of what the targets found) instead; this script skips then.
# Usage: ITSM_COLLECTION_DIR=/path/ansible_collections/servicenow/itsm Tests/Ansible/run.sh [target …]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -z "${ITSM_COLLECTION_DIR:-}" ]]; then
    echo "ansible: ITSM_COLLECTION_DIR is not set; skipping the collection's targets"
    exit 0
fi
WORK=$(mktemp -d)
SERVER_PID=""
cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; fi
    rm -f "$ITSM_COLLECTION_DIR/tests/integration/integration_config.yml"
    rm -rf "$WORK"
}
trap cleanup EXIT
python3 -m pip install --quiet --disable-pip-version-check "ansible-core==2.17.14" 2>&1 | grep -v "Running pip as the 'root' user" || true
BIN=${DOCKET_BIN:-$(swift build --show-bin-path)/docketd}
"$BIN" --demo --port 0 --data-dir "$WORK/data" --log-level warning > "$WORK/stdout" 2> "$WORK/stderr" &
SERVER_PID=$!
for _ in $(seq 1 100); do grep -q "listening on" "$WORK/stdout" 2>/dev/null && break; sleep 0.1; done
URL=$(sed -n 's/^docketd listening on //p' "$WORK/stdout")
[[ -n "$URL" ]] || { echo "ansible: docketd did not start" >&2; cat "$WORK/stderr" >&2; exit 1; }
# A certificate and key for the targets that need the files to exist (client-certificate sign-in is not served).
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=ansible" -keyout "$WORK/client.key" -out "$WORK/client.pem" 2>/dev/null
cat > "$ITSM_COLLECTION_DIR/tests/integration/integration_config.yml" <<CONFIG
sn_host: $URL
sn_username: admin
sn_password: admin
sn_client_id: docket-demo
sn_client_secret: docket-demo-secret
sn_client_certificate_file: $WORK/client.pem
sn_client_key_file: $WORK/client.key
CONFIG
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || mapfile -t targets < <(ls "$ITSM_COLLECTION_DIR/tests/integration/targets" | grep -v prepare_test_vars)
passed=0; failed=()
for target in "${targets[@]}"; do
    if (cd "$ITSM_COLLECTION_DIR" && ansible-test integration --local --python "$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')" "$target" \
        > "$WORK/$target.log" 2>&1); then
        passed=$((passed + 1)); echo "ansible: PASS $target"
    else
        failed+=("$target"); echo "ansible: FAIL $target: $(grep -m1 -E 'fatal:' -A2 "$WORK/$target.log" | tr '\n' ' ' | cut -c1-300)"
    fi
done
echo "ansible: $passed of ${#targets[@]} targets passed${failed:+; failed: ${failed[*]}}"

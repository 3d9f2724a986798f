#!/usr/bin/env bash
# Red Hat's Ansible collection servicenow.itsm, its own integration targets unmodified, against a docketd with demo
# data over HTTPS, which also signs in with a client certificate (--tls-client-ca) and a REST API key, as the
# collection's api_authentication and inventory targets do. Needs a checkout of the collection (2.15.1) at
# ITSM_COLLECTION_DIR, laid out as Ansible requires: <somewhere>/ansible_collections/servicenow/itsm. The
# collection is on Ansible Galaxy and GitHub, neither of which CI reaches, so CI runs the router tests of what the
# targets found (ITSMAPITests, ClientCertificateTests) instead, and this script says so and skips.
#
# The modules verify the server's certificate against the system's trust store (ansible-test passes no SSL_CERT_FILE
# through), so the throw-away CA made here is added to it for the run and removed after: run it on a machine of
# your own (root, Debian's update-ca-certificates).
# Usage: ITSM_COLLECTION_DIR=/path/ansible_collections/servicenow/itsm Tests/Ansible/run.sh [target …]
set -euo pipefail
cd "$(dirname "$0")/../.."
if [[ -z "${ITSM_COLLECTION_DIR:-}" ]]; then
    echo "ansible: ITSM_COLLECTION_DIR is not set; skipping the collection's targets"
    exit 0
fi
WORK=$(mktemp -d)
SERVER_PID=""
TRUSTED=/usr/local/share/ca-certificates/docket-ansible-run.crt
cleanup() {
    if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then kill -TERM "$SERVER_PID"; wait "$SERVER_PID" || true; fi
    rm -f "$ITSM_COLLECTION_DIR/tests/integration/integration_config.yml"
    if [[ -f "$TRUSTED" ]]; then rm -f "$TRUSTED"; update-ca-certificates --fresh >/dev/null 2>&1 || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT
python3 -m pip install --quiet --disable-pip-version-check "ansible-core==2.17.14" 2>&1 | grep -v "Running pip as the 'root' user" || true

# A CA, a server certificate for 127.0.0.1, and a client certificate, valid for one day.
(
    cd "$WORK"
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=Docket Ansible run CA" -keyout ca.key -out ca.pem 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n' > server.cnf
    printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=clientAuth\n' > client.cnf
    for name in server client; do
        openssl req -newkey rsa:2048 -nodes -subj "/CN=$name" -keyout $name.key -out $name.csr 2>/dev/null
        openssl x509 -req -in $name.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile $name.cnf -out $name.pem 2>/dev/null
    done
)
cp "$WORK/ca.pem" "$TRUSTED"
update-ca-certificates >/dev/null

BIN=${DOCKET_BIN:-$(swift build --show-bin-path)/docketd}
"$BIN" --demo --port 0 --data-dir "$WORK/data" --log-level warning --tls-cert "$WORK/server.pem" --tls-key "$WORK/server.key" \
    --tls-client-ca "$WORK/ca.pem" > "$WORK/stdout" 2> "$WORK/stderr" &
SERVER_PID=$!
for _ in $(seq 1 900); do grep -q "listening on" "$WORK/stdout" 2>/dev/null && break; sleep 0.2; done
URL=$(sed -n 's/^docketd listening on //p' "$WORK/stdout")
[[ -n "$URL" ]] || { echo "ansible: docketd did not start" >&2; cat "$WORK/stderr" >&2; exit 1; }
"$BIN" users certificate admin --certificate "$WORK/client.pem" --data-dir "$WORK/data" >/dev/null
API_KEY=$("$BIN" users api-key admin --name ansible --expires-days 1 --data-dir "$WORK/data")
cat > "$ITSM_COLLECTION_DIR/tests/integration/integration_config.yml" <<CONFIG
sn_host: $URL
sn_username: admin
sn_password: admin
sn_client_id: docket-demo
sn_client_secret: docket-demo-secret
sn_client_certificate_file: $WORK/client.pem
sn_client_key_file: $WORK/client.key
sn_api_key: $API_KEY
CONFIG
python=$(python3 -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || mapfile -t targets < <(
    find "$ITSM_COLLECTION_DIR/tests/integration/targets" -mindepth 1 -maxdepth 1 -type d -printf '%f\n' | grep -v '^prepare_test_vars$' | sort
)
passed=0; failed=()
for target in "${targets[@]}"; do
    if (cd "$ITSM_COLLECTION_DIR" && ansible-test integration --local --python "$python" "$target" > "$WORK/$target.log" 2>&1); then
        passed=$((passed + 1)); echo "ansible: PASS $target"
    else
        failed+=("$target")
        echo "ansible: FAIL $target: $(grep -E 'fatal:' "$WORK/$target.log" | grep -v '\.\.\.ignoring' | tail -1 | cut -c1-300)"
    fi
done
echo "ansible: $passed of ${#targets[@]} targets passed${failed:+; failed: ${failed[*]}}"
[[ ${#failed[@]} -eq 0 ]]

#!/usr/bin/env bash
# Unpacks Debian's Glewlwyd (an OpenID provider Docket did not write) into a folder of its own, for the federation
# test (Tests/Federation/glewlwyd.py). Only its libraries are installed as packages: Glewlwyd's own package is
# unpacked, not installed, because its maintainer scripts set up a system database and service that the test does
# not want (it starts Glewlwyd itself, on a throw-away SQLite file). Prints the folder.
#
#     scripts/glewlwyd.sh [FOLDER]     # default .build/glewlwyd
set -euo pipefail
root="$(realpath -m "${1:-.build/glewlwyd}")"
if [ -x "$root/usr/bin/glewlwyd" ]; then echo "$root"; exit 0; fi
if ! apt-cache show glewlwyd >/dev/null 2>&1; then apt-get update -qq; fi
libraries=$(apt-cache depends --no-recommends --no-suggests --no-pre-depends glewlwyd | awk '$1 == "Depends:" && $2 ~ /^lib/ {print $2}')
# shellcheck disable=SC2086
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $libraries >/dev/null
download=$(mktemp -d)
chmod 777 "$download"
(cd "$download" && apt-get download -qq glewlwyd 2>/dev/null)
mkdir -p "$root"
dpkg-deb -x "$download"/glewlwyd_*.deb "$root"
rm -rf "$download"
"$root/usr/bin/glewlwyd" --help 2>&1 | grep -q "Version" || { echo "glewlwyd: unpacked but does not run" >&2; exit 1; }
echo "$root"

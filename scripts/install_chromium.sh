#!/usr/bin/env bash
# Install Debian's Chromium for the dashboard browser test (tests/integration/test_dashboard_browser.py).
# Playwright drives /usr/bin/chromium directly; its own browser download is not used.
# Idempotent and quiet: does nothing when /usr/bin/chromium is already there.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version

#!/usr/bin/env bash
# Debian packages the test suite drives for real: Chromium (the dashboard's browser test, driven by
# Playwright through /usr/bin/chromium), wrk (the generator benchmark's smoke test compares against it),
# libb64-0d (perf_analyzer links it: the fidelity benchmark's smoke test sets perf_analyzer up itself through
# benchmarks/perf_analyzer_tool.py), PostgreSQL (the postgres tier starts its own server with initdb / pg_ctl
# from /usr/lib/postgresql/*/bin), iproute2 (the multihost tier makes its hosts with `ip netns`), docker.io (the docker
# tier starts its own dockerd) and debootstrap (it makes the Debian root filesystem of containers/triton-cpu's image).
# Idempotent and quiet: installs only what is missing.
set -euo pipefail
missing=()
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
dpkg -s libb64-0d >/dev/null 2>&1 || missing+=(libb64-0d)
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null 2>&1 || missing+=(postgresql)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
{ [ -x /usr/sbin/dockerd ] || command -v dockerd; } >/dev/null 2>&1 || missing+=(docker.io)
{ [ -x /usr/sbin/debootstrap ] || command -v debootstrap; } >/dev/null 2>&1 || missing+=(debootstrap)
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "installed: ${missing[*]}"

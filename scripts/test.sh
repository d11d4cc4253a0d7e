#!/usr/bin/env bash
# README command two: install the package with its test dependencies, then run every test tier.
# Unit tests take seconds; the integration tier starts real tritonserver and Locust processes on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
# the system tools the tiers start live in sbin (dockerd, debootstrap, runuser); a minimal PATH (env -i, cron) lacks it
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
mkdir -p .venvs
# Every long step runs in a process group of its own, recorded in `groups`. On any exit (a failed step, SIGTERM,
# Ctrl-C) each group is sent SIGTERM, which pytest turns into its own teardown (tests/conftest.py: the servers its
# tests started are stopped), given a minute, then killed; then any process still working in this run's pytest
# folders (a server in a session of its own whose pytest was killed mid-teardown) is killed: the script leaves no
# process behind. The folders (pytest's --basetemp, one per pytest run) are removed after a run that passed.
groups=()
run_tmp=$(mktemp -d "${TMPDIR:-/tmp}/test.sh.XXXXXX")
any_alive() {
  local group
  for group in "${groups[@]}"; do kill -0 -- -"$group" 2>/dev/null && return 0; done
  return 1
}
sweep() {
  local proc
  for proc in /proc/[0-9]*; do
    case "$(readlink "$proc/cwd" 2>/dev/null) $( { tr '\0' ' ' <"$proc/cmdline"; } 2>/dev/null)" in
      *"$run_tmp"*) kill -KILL "${proc#/proc/}" 2>/dev/null || true ;;
    esac
  done
}
stop_all() {
  local group tries=0
  for group in "${groups[@]}"; do kill -TERM -- -"$group" 2>/dev/null || true; done
  while [ "$tries" -lt 60 ] && any_alive; do sleep 1; tries=$((tries + 1)); done
  for group in "${groups[@]}"; do kill -KILL -- -"$group" 2>/dev/null || true; done
  sweep
  if ! rmdir "$run_tmp" 2>/dev/null && [ -d "$run_tmp" ]; then echo "test.sh: its pytest folders are kept: $run_tmp"; fi
}
trap stop_all EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
# `start CMD...`: CMD in the background, in a group of its own, recorded (its pid in $!). `step CMD...`: the same,
# waited for (a wait a signal interrupts at once, unlike a foreground child's), its exit status returned.
start() {
  setsid "$@" &
  groups+=("$!")
}
step() {
  start "$@"
  wait "$!"
}
# llama.cpp compiles from source for about 9 minutes on 2 cores (once: its virtualenv is kept in .venvs/llamacpp):
# started first, beside the downloads below (its installer needs only Python's standard library), and waited for
# before the tests. Its own log: .venvs/llamacpp.install.log.
start bash scripts/tool_venvs.sh llamacpp
llamacpp_build=$!
step python3 -m pip install --quiet --disable-pip-version-check -e ".[test,postgres,openvino,gpu]"
step bash scripts/install_system_packages.sh  # chromium (dashboard browser test), wrk (generator benchmark),
                                              # postgresql, docker.io and debootstrap (the docker tier: its own
                                              # dockerd, a CPU image)
step bash scripts/tool_venvs.sh --without llamacpp  # tools with their own pins, each in .venvs/NAME: MLflow's server,
                                                    # Infinity, AIPerf, vLLM (llama.cpp's, started above)
# Static gates first: lint, formatting and types (mypy reads its files from pyproject.toml).
python3 -m ruff check recommender dashboard tests benchmarks containers scripts
python3 -m ruff format --check recommender dashboard tests benchmarks containers scripts
python3 -m mypy
echo "test.sh: installs and static gates done at ${SECONDS} s"
# Every tier under tests/ (pyproject's testpaths), the hostile-input tier included (tests/fuzz, marker `hostile`:
# hypothesis, derandomized, under a minute). With arguments, one pytest run as given (`bash scripts/test.sh -m
# hostile` runs that tier alone). Without (README command two, CI), in two phases, because nearly every test waits on
# one process at a time (the host measured about one of its two cores busy through the whole suite):
#   1. two streams side by side, each about one core: the LLM tiers (their SLOs are generous: none judges a timing)
#      and the tiers that measure nothing; then the cloud and postgres tiers and the integration tests none of whose
#      assertions judges a timing (marker `shares_host`). The second stream's output follows the first's;
#   2. the tests whose assertions rest on measured timings (the rest of integration, multihost, and any tier not
#      named in phase 1: llamacpp, whose build phase 1 does not wait for) alone, on an otherwise idle host.
# Phase 1 needs no llama.cpp: it starts while the build ends; phase 2 (the llamacpp tier in it) waits for the build.
if [ $# -gt 0 ]; then
  wait "$llamacpp_build"                  # llama.cpp's virtualenv made (a failed build fails here, with its log)
  rmdir "$run_tmp"
  exec python3 -m pytest "$@"
fi
FIRST_STREAM=(tests/aiperf tests/vllm tests/unit tests/fuzz tests/docker tests/tracking)
SECOND_STREAM=(tests/cloud tests/postgres)  # then the integration tests marked `shares_host`
second_log="$run_tmp/second.log"
# two pytest runs in one group (bash -c: $0 is the run's folder, $@ the tiers); the first failure's status is kept
start bash -c 'python3 -m pytest -p no:cacheprovider --basetemp "$0/second" "$@"; first=$?
  python3 -m pytest -p no:cacheprovider --basetemp "$0/shares_host" -m shares_host tests/integration && exit "$first"' \
  "$run_tmp" "${SECOND_STREAM[@]}" >"$second_log" 2>&1
second=$!
status=0
step python3 -m pytest -p no:cacheprovider --basetemp "$run_tmp/first" "${FIRST_STREAM[@]}" || status=$?
wait "$second" || status=$?
echo "test.sh: phase 1's second stream (${SECOND_STREAM[*]}, then the shares_host tests of tests/integration):"
cat "$second_log"
wait "$llamacpp_build"                    # llama.cpp's virtualenv made (a failed build fails here, with its log)
echo "test.sh: phase 2 (alone) starts at ${SECONDS} s"
ignored=()
for tier in "${FIRST_STREAM[@]}" "${SECOND_STREAM[@]}"; do ignored+=(--ignore "$tier"); done
step python3 -m pytest --basetemp "$run_tmp/alone" -m "not shares_host" "${ignored[@]}" || status=$?
echo "test.sh: done at ${SECONDS} s"
if [ "$status" -eq 0 ]; then rm -rf "$run_tmp"; fi  # else kept, and said on exit
exit "$status"

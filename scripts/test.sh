#!/usr/bin/env bash
# README command two: install the package with its test dependencies, then run every test tier.
# Unit tests take seconds; the integration tier starts real tritonserver and Locust processes on loopback.
set -euo pipefail
cd "$(dirname "$0")/.."
# llama.cpp compiles from source for about 9 minutes on 2 cores (once: its virtualenv is kept in .venvs/llamacpp):
# started first, beside the downloads below (its installer needs only Python's standard library), and waited for
# before the tests. Its own log: .venvs/llamacpp.install.log.
mkdir -p .venvs
setsid bash scripts/tool_venvs.sh llamacpp &  # a process group of its own: stopped whole if a step below fails
llamacpp_build=$!
trap 'kill -- -"$llamacpp_build" 2>/dev/null || true' EXIT
python3 -m pip install --quiet --disable-pip-version-check -e ".[test,postgres,openvino,gpu]"
bash scripts/install_system_packages.sh   # chromium (dashboard browser test), wrk (generator benchmark), postgresql,
                                          # docker.io and debootstrap (the docker tier: its own dockerd, a CPU image)
bash scripts/tool_venvs.sh --without llamacpp  # tools with their own pins, each in .venvs/NAME: MLflow's server,
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
#   1. the LLM tiers (their SLOs are generous: none judges a timing) beside the tiers that measure nothing, each
#      stream about one core; the second stream's output follows the first's;
#   2. the tiers whose assertions rest on measured timings (integration, multihost, and any tier not named in
#      phase 1: llamacpp, whose build phase 1 does not wait for) alone, on an otherwise idle host, as before.
# Phase 1 needs no llama.cpp: it starts while the build ends; phase 2 (the llamacpp tier in it) waits for the build.
if [ $# -gt 0 ]; then
  wait "$llamacpp_build"                  # llama.cpp's virtualenv made (a failed build fails here, with its log)
  trap - EXIT
  exec python3 -m pytest "$@"
fi
LLM_TIERS=(tests/aiperf tests/vllm)
BESIDE_TIERS=(tests/unit tests/fuzz tests/cloud tests/postgres tests/tracking tests/docker)
beside_log=$(mktemp)
setsid python3 -m pytest -p no:cacheprovider "${BESIDE_TIERS[@]}" >"$beside_log" 2>&1 &
beside=$!
trap 'kill -- -"$llamacpp_build" -"$beside" 2>/dev/null || true' EXIT
status=0
python3 -m pytest -p no:cacheprovider "${LLM_TIERS[@]}" || status=$?
wait "$beside" || status=$?
echo "test.sh: phase 1's second stream (${BESIDE_TIERS[*]}):"
cat "$beside_log" && rm -f "$beside_log"
wait "$llamacpp_build"                    # llama.cpp's virtualenv made (a failed build fails here, with its log)
trap - EXIT
echo "test.sh: phase 2 (alone) starts at ${SECONDS} s"
ignored=()
for tier in "${LLM_TIERS[@]}" "${BESIDE_TIERS[@]}"; do ignored+=(--ignore "$tier"); done
python3 -m pytest "${ignored[@]}" || status=$?
echo "test.sh: done at ${SECONDS} s"
exit "$status"

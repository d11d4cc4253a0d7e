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
wait "$llamacpp_build"                    # llama.cpp's virtualenv made (a failed build fails here, with its log)
trap - EXIT
echo "test.sh: llama.cpp's build waited for, tests start at ${SECONDS} s"
# Every tier under tests/ (pyproject's testpaths), the hostile-input tier included (tests/fuzz, marker `hostile`:
# hypothesis, derandomized, under a minute); `bash scripts/test.sh -m hostile` runs that tier alone.
python3 -m pytest "$@"

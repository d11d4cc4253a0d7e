#!/usr/bin/env bash
# Tools that pin their own dependencies get virtualenvs of their own under .venvs/ (git-ignored), never packages in
# recommender's environment. Idempotent: a venv whose tool already runs is left as it is.
#   bash scripts/tool_venvs.sh            # every tool below
#   bash scripts/tool_venvs.sh mlflow     # one
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A TOOLS=(
  [mlflow]="mlflow==3.17.2"  # the tracking server the MLflow export is tested against (tests/tracking/conftest.py)
  # the Infinity embedding server (target.kind: infinity); recommender itself makes the same venv on first use
  # (recommender/targets/infinity_venv.py, the same pins: optimum 2 breaks Infinity's ONNX engine, and optimum's
  # onnxruntime extra pulls datasets and a pyarrow that needs NumPy 2, which infinity-emb refuses)
  [infinity]="infinity-emb[server,torch]==0.0.78 optimum==1.24.0 transformers==4.48.3 onnx==1.23.2 onnxruntime==1.32.0"
)
declare -A CHECKS=(  # the command that answers when the tool is installed
  [mlflow]="mlflow --version"
  [infinity]="infinity_emb --help"
)
for name in "${@:-${!TOOLS[@]}}"; do
  venv=".venvs/$name"
  if [ -x "$venv/bin/${CHECKS[$name]%% *}" ] && $venv/bin/${CHECKS[$name]} >/dev/null 2>&1; then
    continue
  fi
  echo "tool_venvs: installing ${TOOLS[$name]} into $venv"
  python3 -m venv "$venv"
  # shellcheck disable=SC2086  # a tool may need several requirements, one word each
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check ${TOOLS[$name]}
done

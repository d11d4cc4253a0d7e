#!/usr/bin/env bash
# The peer tools the side-by-side benchmarks compare with (benchmarks/search.py runs Model Analyzer), installed under $PEERS
# (default /tmp/peers), each in a virtualenv of its own, never in recommender's:
#   tritonserver 2.51 (from the nvidia-pytriton 0.7.0 wheel), perf_analyzer 2.51 (tritonclient 2.51.0 wheel),
#   Triton Model Analyzer 1.58 (its pip perf-analyzer is an empty placeholder: use ours).
set -eu
P=${PEERS:-/tmp/peers}; mkdir -p "$P"; cd "$P"
command -v apt-get >/dev/null && { dpkg -s libb64-0d >/dev/null 2>&1 || { apt-get update -qq; apt-get install -y -qq libb64-0d wrk; }; }
[ -x tv/bin/python ] || { python3 -m venv tv; tv/bin/pip install -q nvidia-pytriton==0.7.0 nvidia-cuda-runtime-cu12 numpy; }
SP=$(echo "$P"/tv/lib/python3*/site-packages)
pyv=$(tv/bin/python -c 'import sys;print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
cp -n "$SP/pytriton/tritonserver/python_backend_stubs/$pyv/triton_python_backend_stub" "$SP/pytriton/tritonserver/backends/python/" || true
if [ ! -x pa/perf_analyzer ]; then
  mkdir -p pa dl; tv/bin/pip download -q --no-deps -d dl tritonclient==2.51.0
  unzip -o -q -j dl/tritonclient-2.51.0-*.whl 'tritonclient-2.51.0.data/data/bin/perf_analyzer' -d pa; chmod +x pa/perf_analyzer
fi
[ -x ma/bin/model-analyzer ] || { python3 -m venv ma; ma/bin/pip install -q triton-model-analyzer==1.58.0; }
LIBDIR=$(tv/bin/python -c 'import sysconfig;print(sysconfig.get_config_var("LIBDIR"))')
cat > env.sh <<ENV
export PEERS=$P
export TRITONSERVER=$SP/pytriton/tritonserver/bin/tritonserver
export TRITON_BACKENDS=$SP/pytriton/tritonserver/backends
export PERF_ANALYZER=$P/pa/perf_analyzer
export LD_LIBRARY_PATH=$LIBDIR:$SP/nvidia_pytriton.libs:$SP/nvidia/cuda_runtime/lib
ENV
echo "peers ready: . $P/env.sh"

"""Run inside vLLM's virtualenv (not imported by the tests): for each engine configuration given as JSON, build
vLLM's own engine configuration (EngineArgs.create_engine_config, as its OpenAI server does before it starts) on the
model folder, and print one JSON line: null where vLLM accepts it, else the first line of its error.

    <venv>/bin/python engine_config.py MODEL_FOLDER '[{"max_num_seqs": 4096}, ...]'

`kv_cache_gib` is the CPU's VLLM_CPU_KVCACHE_SPACE, as the vllm target sets it."""

import json
import os
import sys

from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext

model, configurations = sys.argv[1], json.loads(sys.argv[2])
for settings in configurations:
    os.environ["VLLM_CPU_KVCACHE_SPACE"] = str(settings.pop("kv_cache_gib", 1))
    try:
        EngineArgs(model=model, **settings).create_engine_config(UsageContext.OPENAI_API_SERVER)
        print(json.dumps(None), flush=True)
    except Exception as error:  # vLLM's refusal, whatever its type, is the answer
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        print(json.dumps(" ".join(lines)), flush=True)

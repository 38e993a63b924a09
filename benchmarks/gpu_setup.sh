# Sourced on the GPU machine by gpu_run.sh and gpu_check.sh, from the repository root with .gpu/ (gpu_bundle.sh)
# beside it: installs the carried wheels into /tmp/site, restores MiniLM's fp32 weights in /tmp/minilm, prints the
# card and the versions.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .gpu/wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD/src PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
mkdir -p /tmp/minilm && cp .gpu/minilm/*.json .gpu/minilm/vocab.txt /tmp/minilm/
python3 - <<'PY'
import torch
from safetensors.torch import load_file, save_file

weights = load_file(".gpu/minilm/model.fp16.safetensors")
save_file({k: v.float() if v.is_floating_point() else v for k, v in weights.items()}, "/tmp/minilm/model.safetensors")
PY
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
python3 -c "import torch, transformers, accelerate, datasets; print('torch', torch.__version__, 'transformers', transformers.__version__, 'accelerate', accelerate.__version__, 'datasets', datasets.__version__)"

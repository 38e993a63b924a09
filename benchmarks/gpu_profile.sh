#!/usr/bin/env bash
# Where a GPU process's seconds go before the run starts (#54: bert-base's `before_run_s` was 13-17 s on an H100
# host on 2026-11-27, 3.4 s on this project's 2-core EPYC): a short, bounded follow-up for a warm device machine after
# `gpu_check.sh infer` (~80 s; on 2026-11-27 a 35 s call there got only cuda_init.json). Writes under
# $OUT/gpu_profile/ (benchmarks/results/gpu_profile/ without OUT):
#   cuda_init.json   seconds to import torch, to initialise CUDA, to import transformers / accelerate / datasets
#   importtime.txt   `python -X importtime` of a short `tuneloop train` (MiniLM, 64 pairs, 1 epoch), sorted by
#                    cumulative microseconds (top 60), and that run's results.json timeline (timeline.json)
#   train.prof.txt   the same run under cProfile: the 60 functions with the most cumulative time
#   bash benchmarks/gpu_profile.sh smoke      # here, on a CPU
set -uo pipefail
cd "$(dirname "$0")/.."
dir=${OUT:-benchmarks/results}/gpu_profile
mkdir -p "$dir"
if [ "${1:-}" = smoke ]; then
  PY=${PY:-.venv/bin/python} data=${DATA:-../shared/glue/MRPC}
  export PYTHONPATH=$PWD/src HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
  model=$("$PY" -c "from tuneloop.model.loading import resolve_model; print(resolve_model('minilm'))")
else
  source benchmarks/gpu_setup.sh > /dev/null
  PY=python3 data=.gpu/MRPC model=/tmp/minilm
fi
timeout 30 "$PY" - "$dir/cuda_init.json" <<'PY'
import json, sys, time
t = [time.perf_counter()]
import torch
t.append(time.perf_counter())
if torch.cuda.is_available():
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
t.append(time.perf_counter())
import transformers  # noqa: F401
t.append(time.perf_counter())
import accelerate  # noqa: F401
t.append(time.perf_counter())
import datasets  # noqa: F401
t.append(time.perf_counter())
names = ("import torch", "cuda init", "import transformers", "import accelerate", "import datasets")
out = {n: round(b - a, 3) for n, a, b in zip(names, t, t[1:])}
print(out)
json.dump(out, open(sys.argv[1], "w"))
PY
train=(-m tuneloop train --task mrpc --data-dir "$data" --model "$model" --epochs 1 --max-train-samples 64 --quiet
       --no-report --calibrate none)
SECONDS=0
timeout -k 3 45 "$PY" -X importtime "${train[@]}" --output-dir /tmp/gpu_profile_run 2> "$dir/importtime.raw"
echo "== importtime run: exit $? in ${SECONDS} s"
"$PY" - "$dir" <<'PY'
import json, re, sys
d = sys.argv[1]
rows = []
for line in open(f"{d}/importtime.raw"):
    m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|(.*)", line)
    if m:
        rows.append((int(m.group(2)), int(m.group(1)), m.group(3).rstrip()))
rows.sort(reverse=True)
with open(f"{d}/importtime.txt", "w") as f:
    f.write(f"top 60 of {len(rows)} imports by cumulative us (self us, module)\n")
    for cum, own, name in rows[:60]:
        f.write(f"{cum:>10} {own:>9} {name}\n")
try:
    timeline = json.load(open("/tmp/gpu_profile_run/results.json")).get("timeline")
except OSError as e:
    timeline = {"error": str(e)}
json.dump(timeline, open(f"{d}/timeline.json", "w"), indent=1)
print(open(f"{d}/importtime.txt").read()[:3000])
print("timeline", json.dumps(timeline))
PY
rm -f "$dir/importtime.raw"
timeout -k 3 45 "$PY" -m cProfile -o /tmp/gpu_profile.prof "${train[@]}" --output-dir /tmp/gpu_profile_run2
echo "== cProfile run: exit $?"
"$PY" -c "
import pstats, sys
sys.stdout = open('$dir/train.prof.txt', 'w')
pstats.Stats('/tmp/gpu_profile.prof').sort_stats('cumulative').print_stats(60)" && head -c 4000 "$dir/train.prof.txt"

#!/usr/bin/env bash
# The GPU check: one prepared command for a lent H100/H200 (under 8 minutes), run FIRST in a session that has one.
#
#   bash benchmarks/gpu_bundle.sh                 # here, on the CPU machine: builds .gpu/ (wheels, MiniLM, MRPC)
#   device tool: command "bash benchmarks/gpu_check.sh", carry [".gpu"], timeout_s 420
#   bash benchmarks/gpu_check.sh smoke            # here, on a CPU: the same parts at toy sizes (no capture)
#   device tool: command "bash benchmarks/gpu_check.sh infer", carry [".gpu"], timeout_s: the budget left, at most
#   460 (second command, at once: a machine idle 30 s is given back; at 15:03 on 2026-11-27 the check with its
#   quality part took 554 s of command, 595 s held from a cold start, and left this 285 s: serve was cut)
#   device tool: "bash benchmarks/gpu_check.sh quality" (part 3 alone, ~5 min) when the step changed
#   bash benchmarks/gpu_check.sh infer-smoke      # here: the inference parts at toy sizes
#
# Parts, each bounded, each writing its JSON under $OUT/gpu_check/ (benchmarks/results/gpu_check/ without OUT):
#   1. equality   check_captured_step.py: MiniLM, 60 MRPC steps, the captured step against the eager one (~1 min)
#   2. speed      bench_gpu.py bert-base, 3 epochs at the chapter's settings: the chapter's loop, tuneloop eager
#                 (--captured-step off), tuneloop's defaults (the captured step) (~3 min)
#   3. quality    (`quality` only, or `smoke`) bench_gpu.py MiniLM: tuneloop eager vs its defaults (captured) dev
#                 F1, seeds 1 2 3, without the TF-IDF baseline (~5 min). Its figures were the same in the 12:16 and
#                 15:03 runs of 2026-11-27 (seeded: 0.8700 eager, 0.8697 captured), and part 1 proves the two steps
#                 equal every time, so the default check leaves it out for the 15 device minutes' sake
#   then gpu_check_summary.py: one $OUT/gpu_check.json with the card, every part and #54's acceptance figures.
# `infer` (its own command, after the check): #55's parts, each writing its JSON beside gpu_check.json:
#   4. predict    gpu_infer.py: bert-base trained 1 epoch by tuneloop, 20,000 MRPC pairs: pipeline batch 64,
#                 tuneloop predict (auto, auto with every forward pass timed, fp32) (~2.5 min; pipeline batch 8
#                 and the plain sorted loop are left out on the GPU: batch 64 was the better pipeline in both runs,
#                 and the 15 device minutes of a session must hold the check, this and serve)
#   5. serve      bench_serve.py on that model: tuneloop serve (auto) vs a naive FastAPI + pipeline server,
#                 1/8/32 clients (~2 min). The 12:24 run of 2026-11-27 took 226 s for 4 and 5
# A part that fails or runs out of time is recorded as such; the others still run.
set -uo pipefail
cd "$(dirname "$0")/.."
mode=${1:-gpu}
dir=${OUT:-benchmarks/results}/gpu_check
mkdir -p "$dir"
if [ "${mode%-smoke}" = infer ]; then
  if [ "$mode" = infer-smoke ]; then
    PY=${PY:-.venv/bin/python} data=${DATA:-../shared/glue/MRPC} minilm=
    export PYTHONPATH=$PWD/src HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
    predict=(--rows 300 --max-train-samples 64) serve=(--requests 40 --seconds 10) predict_limit=600
  else
    source benchmarks/gpu_setup.sh
    PY=python3 data=.gpu/MRPC minilm=/tmp/minilm serve=(--requests 400 --seconds 20) predict_limit=240
    predict=(--ways pipeline-64,tuneloop,tuneloop-trace,tuneloop-no-cudnn-sdpa,tuneloop-fp32)   # 15 device minutes
  fi
  run=$(mktemp -d)/run
  echo "== predict ($(date +%T))"
  timeout $predict_limit "$PY" benchmarks/gpu_infer.py --data-dir "$data" ${minilm:+--minilm "$minilm"} \
      --keep-run "$run" "${predict[@]}" --out "${OUT:-benchmarks/results}/gpu_infer.json"; echo "== predict: exit $?"
  echo "== serve ($(date +%T))"
  timeout 240 "$PY" benchmarks/bench_serve.py --run "$run" --data-dir "$data" --levels 1,8,32 \
      --servers tuneloop,naive-pipeline "${serve[@]}" --out "${OUT:-benchmarks/results}/gpu_serve.json"
  echo "== serve: exit $?"
  exit 0
fi
if [ "$mode" = smoke ]; then
  PY=${PY:-.venv/bin/python}
  data=${DATA:-../shared/glue/MRPC}
  export PYTHONPATH=$PWD/src HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
  minilm=$("$PY" -c "from tuneloop.model.loading import resolve_model; print(resolve_model('minilm'))")
  equality=(--device cpu --steps 4 --timing-repeats 1)
  speed=(--models minilm --impls chapter,tuneloop --max-train-samples 32 --epochs 1)
  quality=(--models minilm --impls tuneloop --seeds 1 --max-train-samples 32 --epochs 1
           --tuneloop-args "--baseline none")
  limit=600 quality_limit=600 eq_limit=600
else
  source benchmarks/gpu_setup.sh
  PY=python3 data=.gpu/MRPC minilm=/tmp/minilm
  equality=(--steps 60)
  speed=(--models bert-base --impls chapter,tuneloop_eager,tuneloop --seeds 1)
  quality=(--models minilm --impls tuneloop_eager,tuneloop --seeds 1 2 3 --tuneloop-args "--baseline none")
  limit=200 quality_limit=260 eq_limit=150
fi
status=()
case $mode in
  quality) parts=" quality " ;;
  smoke) parts=" equality speed quality " ;;
  *) parts=" equality speed " ;;
esac
want() { [[ $parts == *" $1 "* ]]; }
run_part() {       # name, seconds, command...
  local name=$1 seconds=$2; shift 2
  echo "== $name ($(date +%T))"
  timeout "$seconds" "$@"; local rc=$?
  status+=("$name=$rc")
  echo "== $name: exit $rc"
}
want equality && run_part equality $eq_limit "$PY" benchmarks/check_captured_step.py --model "$minilm" \
    --data-dir "$data" "${equality[@]}" --out "$dir/captured_step.json"
want speed && run_part speed $((limit + 60)) "$PY" benchmarks/bench_gpu.py --data-dir "$data" --minilm "$minilm" \
    --timeout "$limit" "${speed[@]}" --out "$dir/speed.json"
want quality && run_part quality $((quality_limit + 60)) "$PY" benchmarks/bench_gpu.py --data-dir "$data" \
    --minilm "$minilm" --timeout "$quality_limit" "${quality[@]}" --out "$dir/quality.json"
"$PY" benchmarks/gpu_check_summary.py "$dir" "${status[@]}" --out "${OUT:-benchmarks/results}/gpu_check.json"

#!/usr/bin/env bash
# On the GPU machine, from the repository root with .gpu/ (benchmarks/gpu_bundle.sh) beside it: installs the
# carried wheels into /tmp/site, restores MiniLM's fp32 weights, and runs bench_gpu.py with the arguments given,
# writing the results JSON into $OUT (or benchmarks/results/ when OUT is unset).
set -euo pipefail
cd "$(dirname "$0")/.."
source benchmarks/gpu_setup.sh
out=${OUT:+$OUT/gpu.json}
python3 benchmarks/bench_gpu.py --data-dir .gpu/MRPC --minilm /tmp/minilm ${out:+--out "$out"} "$@"

"""Attention kernels on this CPU: torch's fused SDPA vs tuneloop's matmul + softmax in cache-sized pieces.

MiniLM's attention shape (12 heads of 32), bf16 matrix products as `--mixed-precision` auto sets them on AMX CPUs,
padding masks with lengths drawn between L/2 and L. For each shape: evaluation (forward, no gradients) and
training (forward + backward, no dropout), milliseconds per call of one layer's attention, median of 7 after a
warm-up, the two kernels interleaved. Writes benchmarks/results/<date>-<machine>-attention.json.

    python benchmarks/bench_attention.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import default_out, machine_info, write_atomic  # noqa: E402

SHAPES = [(8, 64), (32, 48), (32, 64), (32, 88), (64, 64), (64, 88), (64, 128), (32, 256), (8, 512)]


def main(argv=None) -> int:
    import torch
    import torch.nn.functional as F

    from tuneloop.runtime import speed

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--head-dim", type=int, default=32)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    levers = speed.SpeedLevers(bf16_matmuls=True)      # as --mixed-precision auto sets them on AMX CPUs
    levers.__enter__()

    class Layer(torch.nn.Module):
        pass

    layer = Layer()
    torch.manual_seed(0)
    rows = []
    for batch, length in SHAPES:
        q0, k0, v0 = (torch.randn(batch, args.heads, length, args.head_dim) for _ in range(3))
        lengths = torch.randint(length // 2, length + 1, (batch,))
        mask = (torch.arange(length)[None, :] < lengths[:, None])[:, None, None, :].expand(batch, 1, length, length)

        def fused(train):
            q, k, v = (t.clone().requires_grad_(train) for t in (q0, k0, v0))
            with torch.set_grad_enabled(train):
                out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
                if train:
                    out.sum().backward()

        def pieces(train):
            layer.train(train)
            q, k, v = (t.clone().requires_grad_(train) for t in (q0, k0, v0))
            with torch.set_grad_enabled(train):
                out = speed.chunked_attention(layer, q, k, v, mask, dropout=0.0)[0]
                if train:
                    out.sum().backward()

        for mode, train in (("evaluation", False), ("training", True)):
            times = {"sdpa": [], "tuneloop": []}
            for fn in (fused, pieces):
                fn(train)
            for _ in range(args.repeats):
                for name, fn in (("sdpa", fused), ("tuneloop", pieces)):
                    start = time.perf_counter()
                    fn(train)
                    times[name].append((time.perf_counter() - start) * 1000)
            row = {"batch": batch, "length": length, "mode": mode,
                   "sdpa_ms": round(statistics.median(times["sdpa"]), 2),
                   "tuneloop_ms": round(statistics.median(times["tuneloop"]), 2)}
            row["speedup"] = round(row["sdpa_ms"] / row["tuneloop_ms"], 2)
            rows.append(row)
            print(f"{mode:10s} batch {batch:3d} × {length:3d}: SDPA {row['sdpa_ms']:7.1f} ms, "
                  f"tuneloop {row['tuneloop_ms']:7.1f} ms ({row['speedup']:.2f}×)", flush=True)
    levers.__exit__(None, None, None)
    machine = machine_info()
    out = args.out or default_out(dt.date.today().isoformat(), machine, "-attention")
    write_atomic(out, {"date": dt.date.today().isoformat(), "machine": machine,
                       "command": "python benchmarks/bench_attention.py", "heads": args.heads,
                       "head_dim": args.head_dim, "repeats": args.repeats,
                       "cpu_math_max_keys": speed.CPU_CHUNKED_MAX_KEYS, "rows": rows})
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

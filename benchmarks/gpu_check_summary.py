"""gpu_check.sh's last part: its parts' JSON files into one, with #54's acceptance figures read off them.

    python benchmarks/gpu_check_summary.py DIR equality=0 speed=0 quality=0 --out gpu_check.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics

# #54's acceptance: bert-base MRPC 3 epochs, tuneloop's loop and whole process; MiniLM dev F1 captured vs eager
LOOP_S, PROCESS_S, F1_GAP = 10.0, 25.0, 0.01


def read(path: str):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def runs(part) -> list[dict]:
    return [] if not part else [r for r in part.get("runs", []) if "error" not in r]


def mean(rows: list[dict], key: str):
    values = [r[key] for r in rows if r.get(key) is not None]
    return round(statistics.fmean(values), 4) if values else None


def step_name(run: dict) -> str | None:
    """The training step a tuneloop run trained with (results.json's train.step.name: captured or accelerate)."""
    return (((run.get("tuneloop_results") or {}).get("train") or {}).get("step") or {}).get("name")


def acceptance(equality, speed, quality) -> dict:
    out = {} if equality is None else {"equality_passed": bool(equality.get("passed"))}     # a part not run: absent
    by_impl = {}
    for r in runs(speed):
        if r.get("model") == "bert-base":
            by_impl.setdefault(r["impl"], []).append(r)
    for impl, rows in by_impl.items():
        out[f"bert-base {impl}"] = {"train_loop_s": mean(rows, "train_loop_s"), "wall_s": mean(rows, "wall_s")}
    default = by_impl.get("tuneloop")                 # tuneloop's defaults: the captured step where auto allows it
    if default:
        out["bert-base tuneloop step"] = sorted({step_name(r) for r in default})
        out["bert-base loop <= 10 s"] = mean(default, "train_loop_s") <= LOOP_S
        out["bert-base process <= 25 s"] = mean(default, "wall_s") <= PROCESS_S
    f1 = {}
    for r in runs(quality):
        if r.get("model") == "minilm" and r.get("f1") is not None:
            f1.setdefault(r["impl"], []).append(r["f1"])
    out["minilm f1"] = {impl: {"mean": round(statistics.fmean(v), 4), "seeds": v} for impl, v in f1.items()}
    if "tuneloop" in f1 and "tuneloop_eager" in f1:                  # captured (the default) minus eager
        out["minilm f1 gap"] = round(statistics.fmean(f1["tuneloop"]) - statistics.fmean(f1["tuneloop_eager"]), 4)
        out["minilm f1 within 0.01"] = abs(out["minilm f1 gap"]) <= F1_GAP
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("status", nargs="*", help="name=exit code of each part")
    p.add_argument("--out", required=True)
    a = p.parse_args(argv)
    parts = {name: read(os.path.join(a.dir, f"{name}.json"))
             for name in ("captured_step", "speed", "quality")}
    summary = {"exit_codes": dict(s.split("=", 1) for s in a.status),
               "device": (parts["captured_step"] or {}).get("device"),
               "acceptance": acceptance(parts["captured_step"], parts["speed"], parts["quality"]),
               "parts": parts}
    with open(a.out + ".tmp", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    os.replace(a.out + ".tmp", a.out)
    print(json.dumps({k: summary[k] for k in ("exit_codes", "device", "acceptance")}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

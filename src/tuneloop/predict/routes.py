"""Precision routes: faster ways to compute a PyTorch model than fp32 — int8 dynamic quantization of its Linear layers
(CPUs; PyTorch's fbgemm kernels, VNNI where the CPU has it), its weights cast to bf16 (CPUs with bf16 units, GPUs)
or fp16 (GPUs) but for the head's final Linear, or an int8 ONNX copy run by ONNX Runtime (CPUs, where the `export`
extra is installed: the graph's ops fused, and a process that takes it never imports the transformers model code) —
and the one accuracy gate that decides whether one may be used. The ONNX copy is a file: the gate writes it into the
model folder (layout.ONNX_ROUTE_DIR) only when it chose it, and removes an earlier one it did not choose again.

The gate (`compare`) runs a candidate and the exact fp32 model over the same labelled rows and records the main
metric of each, the drop in points, the share of rows whose decision (label under the saved rule, abstaining
included) is the same, the largest probability and logit differences; it fails past `allow_drop` points or, where
asked, under `min_agreement`. `tuneloop export` gates its ONNX model with it (the metric only). `gate`, run at
the end of training (predict/classifier.gate_folder) on the model folder's recorded validation rows, gates each
route this device supports, times each on those rows, and picks the fastest passing one — only when it is at least
MIN_GAIN× fp32's rows/s — writing it with every figure into the folder's tuneloop.json (`precision_routes`, per
device type). `Classifier.load(precision="auto")` then uses that route on that kind of device, fp32 elsewhere;
`precision="fp32"` is always the exact model.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import logging
import shutil
import time
import uuid
from pathlib import Path

import numpy as np

from ..atomic import atomic_write_text
from ..layout import METADATA_FILE, ONNX_FILE, ONNX_ROUTE_DIR
from ..tasks import signed_score

log = logging.getLogger("tuneloop")

ONNX = "onnx-int8"           # the int8 ONNX copy (model folder's ONNX_ROUTE_DIR), run by ONNX Runtime on a CPU
ROUTES = ("fp32", "int8", "bf16", "fp16", ONNX)
CANDIDATES = {"cpu": ("int8", "bf16", ONNX), "cuda": ("bf16", "fp16")}
DEFAULT_DROP = 0.5           # points of the main metric
MIN_AGREEMENT = 0.99         # share of validation rows whose decision a route must keep
MIN_GAIN = 1.1               # a route is kept only when its rows/s is at least this multiple of fp32's
ONNX_WITHIN = 0.9            # the ONNX copy is preferred down to this share of the fastest route's rows/s: choose()
GATE_MIN_ROWS = 200          # fewer validation rows: no gate (the 99% floor should allow 2 changed rows, not 1)
GATE_ROWS = 2000             # validation rows the gate compares at most (the first ones)
TIMED_ROWS = 512             # of those, rows timed per route on a CPU (after one untimed pass)
TIMED_ROWS_GPU = 4096        # on a GPU: the validation rows repeated up to this many, in predict's batches (a few
                             # hundred rows are a handful of batches: start-up costs weigh). The 1.07x bf16/fp32 an
                             # H100 gate saw on 408 rows (2026-11-27-h100-predict.json), first read as a volume
                             # effect, was bf16 against the run's TF32: gate_folder now runs in full fp32
RECORD = "precision_routes"  # the section of tuneloop.json


class GateStopped(Exception):
    """A stop signal arrived during the gate (after training): nothing recorded, `--precision auto` stays fp32."""


def supported(route: str, device_type: str) -> bool:
    """Whether this machine computes `route` on a device of `device_type` ("cpu" or "cuda") natively."""
    import torch

    from ..runtime.machine import cpu_flags

    if route == "fp32":
        return True
    if route == ONNX:
        from .. import extras

        return device_type == "cpu" and not extras.missing("export")
    if device_type == "cpu":
        if route == "int8":
            return any(e in torch.backends.quantized.supported_engines for e in ("x86", "fbgemm", "qnnpack"))
        return route == "bf16" and bool({"avx512_bf16", "amx_bf16"} & cpu_flags())
    if device_type == "cuda":
        return route == "fp16" or (route == "bf16" and torch.cuda.is_bf16_supported(including_emulation=False))
    return False


def candidates(device_type: str) -> list[str]:
    """The routes the gate tries on this device: those it computes natively; on a GPU with native bf16, not fp16
    (an H100 gated fp16 at 1.01x fp32 against bf16's 1.07x and labelled 20,000 pairs at 11,239 rows/s against
    13,022: 2026-11-27-h100-predict.json; each route tried costs the gate seconds at the end of every run)."""
    found = [route for route in CANDIDATES.get(device_type, ()) if supported(route, device_type)]
    return [r for r in found if r != "fp16"] if device_type == "cuda" and "bf16" in found else found


def applied(model, route: str):
    """`model` computed by `route`: itself for fp32, otherwise a copy (the fp32 model is left as it is)."""
    import torch

    if route == "fp32":
        return model
    if route == "int8":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # torch.ao.quantization's note about its future home
            return torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    if route in ("bf16", "fp16"):
        return _head_in_fp32(copy.deepcopy(model).to(torch.bfloat16 if route == "bf16" else torch.float16))
    raise ValueError(f"precision route: one of {', '.join(r for r in ROUTES if r != ONNX)} (the {ONNX} route is a "
                     f"file of the model folder: Classifier.with_route), got {route!r}")


def _head_in_fp32(model):
    """The head's final Linear kept in fp32, reading the body's output cast up: a regression head with a target
    scale folded in answers near 40,000 in steps of 256 in bf16 (and 32 in fp16), logits in steps of 1/8 near
    16; in fp32 the scores keep their resolution, for a layer of a few thousand multiplications."""
    import torch

    from ..model.loading import final_linear

    found = final_linear(model, getattr(getattr(model, "config", None), "num_labels", 0) or 0)
    if found is not None:
        head = found[1].float()
        head.register_forward_pre_hook(lambda module, args: tuple(
            a.float() if torch.is_tensor(a) and a.is_floating_point() else a for a in args))
    return model


def onnx_file(folder) -> Path:
    """Where a model folder keeps its int8 ONNX copy."""
    return Path(folder) / ONNX_ROUTE_DIR / ONNX_FILE


def staged_onnx(clf, stage: Path):
    """`clf` (PyTorch, fp32) as an int8 ONNX copy written into `stage`, run by ONNX Runtime: a Classifier."""
    from ..model.onnx_model import export_file

    export_file(clf.model, clf.tokenizer, stage / ONNX_FILE, "int8")
    return clf.on_onnx(stage)


def decisions(logits: np.ndarray, objective, rule) -> np.ndarray | None:
    """A row's decision (-1 where the rule abstains; multi-label: the set, one row of 0/1), None for regression."""
    if not objective.classes:
        return None
    if rule is None:
        return objective.predictions(logits)
    preds = np.asarray(rule.predictions(logits))
    abstains = np.asarray(rule.abstains(logits))
    return np.where(abstains.reshape(len(preds), *([1] * (preds.ndim - 1))), -1, preds)


def compare(reference: dict, candidate: dict, main: str, objective, rule=None, allow_drop: float | None = None,
            min_agreement: float | None = None) -> dict:
    """The gate: `reference` and `candidate` each {"metrics": {...}, "logits": array} on the same rows."""
    a, b = reference["logits"], candidate["logits"]
    drop = round((signed_score(main, reference["metrics"][main]) - signed_score(main, candidate["metrics"][main]))
                 * 100, 4)
    limit = DEFAULT_DROP if allow_drop is None else allow_drop
    probs = (rule.probabilities if rule is not None else objective.probabilities)
    out = {"rows": len(a), "main_metric": main, "drop_points": drop, "allowed_drop_points": limit,
           "max_logit_difference": float(np.abs(a - b).max()) if len(a) else 0.0}
    da, db = decisions(a, objective, rule), decisions(b, objective, rule)
    if da is not None:
        same = (da == db).reshape(len(da), -1).all(axis=1)
        out.update(decision_agreement=round(float(same.mean()), 6),
                   max_probability_difference=round(float(np.abs(probs(a) - probs(b)).max()), 6))
    agree_ok = min_agreement is None or da is None or out["decision_agreement"] >= min_agreement
    if min_agreement is not None and da is not None:
        out["min_decision_agreement"] = min_agreement
    # scores the candidate cannot hold (fp16 past 65,504: inf, a NaN metric whose drop no limit catches) fail
    finite = bool(np.isfinite(b).all()) and np.isfinite(drop)
    if not finite:
        out["non_finite"] = True
    scores_ok = True
    if da is None and len(a):
        # regression: Pearson is blind to a shift of the scores; the share of fp32's variance the route's scores
        # keep (R² against fp32's) stands for the decisions' agreement, with the same floor where one is asked
        spread = float(np.var(a))
        kept = 0.0 if not finite else 1 - float(np.mean((b - a) ** 2)) / spread if spread > 0 else 1.0
        out["score_agreement"] = round(kept, 6)
        if min_agreement is not None:
            out["min_score_agreement"] = min_agreement
            scores_ok = kept >= min_agreement
    failed = drop > limit or not agree_ok or not finite or not scores_ok
    out["verdict"] = "fail" if failed else "warn" if drop > DEFAULT_DROP else "pass"
    return out


def timed_rows(rows, device_type: str):
    """The rows a route is timed on: on a CPU the first TIMED_ROWS; on a GPU the rows repeated up to
    TIMED_ROWS_GPU (each repeat its own row: no windows pooled together)."""
    from ..data.batch import LABELS, ROW

    if device_type != "cuda":
        return type(rows)({k: v[:TIMED_ROWS] for k, v in rows.columns.items()})
    picked = [i % len(rows) for i in range(TIMED_ROWS_GPU)]
    return type(rows)({k: [v[i] for i in picked] for k, v in rows.columns.items() if k not in (ROW, LABELS)})


def _measure(clf, rows, timed, names, batch_size: int) -> tuple[dict, float]:
    """({"metrics", "logits"} on `rows`, rows/s of a pass over `timed` (`timed_rows` of them), after an untimed
    one)."""
    acc = clf.run(rows, batch_size=batch_size, metric_names=names)
    if clf.device.type == "cuda":          # its batch shapes once untimed: a GPU's first call of a shape costs more
        clf.run(timed, batch_size=batch_size)  # (bf16 on an H100: 3,582 rows/s on a first call, 13,022 on the next)
    started = time.perf_counter()
    clf.run(timed, batch_size=batch_size)
    seconds = time.perf_counter() - started
    return {"metrics": acc.compute(), "logits": acc.all_logits}, len(timed) / max(seconds, 1e-9)


def first_texts(ds, count: int) -> list[int]:
    """The rows of `ds` that hold its first `count` texts, every window of each (a text is never gated on a part)."""
    from ..data.batch import ROW

    if ROW not in ds.column_names:
        return list(range(min(len(ds), count)))
    docs = ds[ROW]
    kept = set(list(dict.fromkeys(docs))[:count])
    return [i for i, doc in enumerate(docs) if doc in kept]


def gate_rows(clf, tables=None, limit: int | None = None):
    """(the first GATE_ROWS texts of the model's recorded validation data tokenized, or its first `limit` (the
    texts the run evaluated: --max-eval-samples), metric names, main metric); `tables`: the data files that were tables
    from Python (gate_folder)."""
    from .. import tasks
    from ..data.prepare import prepare_data
    from .batches import Tokenized
    from .evaluate import data_config_for

    config = data_config_for(clf, {"quiet": True}, tables)
    data = prepare_data(config, clf.tokenizer, labels=clf.label_schema, with_train=False,
                        text_columns=clf.metadata.get("text_columns"))
    ds = next(iter(data.evaluation.values()))
    rows = Tokenized.of(ds.select(first_texts(ds, min(GATE_ROWS, limit or GATE_ROWS))))
    meta, labels = clf.metadata, clf.label_schema
    task = tasks.get_task(config.task)
    names = tuple(meta.get("metrics") or tasks.metric_names(task, labels.problem_type, labels.num_labels))
    return rows, names, meta.get("main_metric") or tasks.main_metric(task, labels.problem_type)


def gate(clf, batch_size: int, stop=None, tables=None, limit: int | None = None) -> dict:
    """Gate every route this device supports against `clf` (an fp32 Classifier) on its recorded validation rows, in
    batches of `batch_size` rows at most; return the record: the chosen route and every figure (Classifier's
    gate_folder writes it into the folder). `stop()` true before a measurement raises GateStopped (a run's
    SIGTERM/Ctrl-C after its loop: a CPU gate with its ONNX export takes tens of seconds); `limit`: gate_rows'."""
    from ..runtime.machine import cpu_flags

    _check_stop(stop)                        # before reading the rows: a stop already received reads nothing
    device = clf.device.type
    rows, names, main = gate_rows(clf, tables, limit)
    timed = timed_rows(rows, device)
    reference, fp32_speed = _measure(clf, rows, timed, names, batch_size)
    checks, stage = {}, None
    try:
        for route in candidates(device):
            _check_stop(stop)
            if route == ONNX:
                stage = Path(clf.path) / f".{ONNX_ROUTE_DIR}-{uuid.uuid4().hex[:8]}"
                stage.mkdir()                # (not mkdtemp: the folder kept gets the user's usual permissions)
                candidate = staged_onnx(clf, stage)
            else:
                candidate = clf.with_route(route)
            result, speed = _measure(candidate, rows, timed, names, batch_size)
            checks[route] = {**compare(reference, result, main, clf.objective, clf.rule,
                                       min_agreement=MIN_AGREEMENT),
                             "rows_per_s": round(speed, 1), "speedup": round(speed / fp32_speed, 3)}
        chosen = choose(checks)
        kept = onnx_file(clf.path).parent
        if ONNX in CANDIDATES.get(device, ()) and kept.exists():   # an earlier CPU gate's copy: replaced, or gone
            shutil.rmtree(kept)                                      # when not chosen again (a GPU gate keeps it)
        if chosen == ONNX:
            stage.rename(kept)
            stage = None
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)
    flags = sorted(f for f in cpu_flags() if f.startswith(("avx512", "amx")) or f in ("avx2", "avx_vnni"))
    return {"route": chosen,
            "date": dt.datetime.now().isoformat(timespec="seconds"), "rows": rows.texts(), "main_metric": main,
            "timed_rows": len(timed), "batch_size": batch_size,
            "metric_fp32": reference["metrics"].get(main), "fp32_rows_per_s": round(fp32_speed, 1), "checks": checks,
            "rule": f"kept when the {main} drop is at most {DEFAULT_DROP} points, "
                    + ("decisions agree on at least " if clf.objective.classes else "its scores keep (R² against "
                       "fp32's) at least ") + f"{MIN_AGREEMENT:.0%} of rows and rows/s is at least {MIN_GAIN}x fp32",
            **({"cpu_flags": flags} if device == "cpu" else {})}


def _check_stop(stop) -> None:
    if stop is not None and stop():
        raise GateStopped


def choose(checks: dict) -> str:
    """The route kept: the fastest passing one at least MIN_GAIN× fp32, except that the ONNX copy is kept over a
    PyTorch route when it labels at least ONNX_WITHIN× that route's rows/s: a process that takes it starts about 2 s
    sooner (no model code to import, no quantizing at load; measured on a 2-core EPYC, `tuneloop predict` of
    MRPC's 1,725 test pairs: 5.4 s with it, 7.7 s with PyTorch int8, whose gated rows/s was 1.04× the copy's), which
    the in-process timing here does not see."""
    passing = {r: c["speedup"] for r, c in checks.items() if c["verdict"] == "pass" and c["speedup"] >= MIN_GAIN}
    if not passing:
        return "fp32"
    best = max(passing, key=passing.get)
    if ONNX in passing and passing[ONNX] >= ONNX_WITHIN * passing[best]:
        return ONNX
    return best


def write_record(folder, device: str, record: dict) -> None:
    """`record` as tuneloop.json's precision_routes[device] in the model folder `folder`, written atomically."""
    path = Path(folder) / METADATA_FILE
    meta = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    meta.setdefault(RECORD, {})[device] = record
    atomic_write_text(path, json.dumps(meta, indent=2))


def recorded_route(metadata: dict, device_type: str, folder=None) -> str:
    """The route `auto` takes on this kind of device: the gated one when recorded and computed natively here (the
    ONNX route: when `folder` also holds its copy)."""
    route = ((metadata.get(RECORD) or {}).get(device_type) or {}).get("route", "fp32")
    if route == ONNX and (folder is None or not onnx_file(folder).is_file()):
        return "fp32"
    return route if route in ROUTES and supported(route, device_type) else "fp32"


def describe(record: dict) -> str:
    """One line: the route kept and why, e.g. `int8 kept: decisions agree on 99.5% of 408 validation rows, f1 drop
    0.12 points, 2.10x fp32's rows/s (bf16: 1.60x); --precision auto takes it`."""
    checks, route = record["checks"], record["route"]
    others = ", ".join(f"{r}: {c['verdict']}, {c['speedup']:.2f}x" for r, c in checks.items() if r != route)
    if route == "fp32":
        return f"fp32 kept ({others or 'no faster route on this device'}); --precision auto stays exact"
    c = checks[route]
    agree = f"decisions agree on {c['decision_agreement']:.1%} of {c['rows']} validation rows, " \
        if "decision_agreement" in c else f"R² {c['score_agreement']:.4f} against fp32's scores on {c['rows']} " \
        "validation rows, " if "score_agreement" in c else ""
    return (f"{route} kept: {agree}{record['main_metric']} drop {c['drop_points']:.2f} points, {c['speedup']:.2f}x "
            f"fp32's rows/s{f' ({others})' if others else ''}; --precision auto takes it")

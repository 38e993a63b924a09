"""`tuneloop serve MODEL_DIR`: the model as an HTTP JSON service (FastAPI on uvicorn), with dynamic batching.

    POST /predict   {"texts": "one text"} | {"texts": ["a", "b"]} | {"texts": [["first", "second"], ...]} (pairs)
                    → {"predictions": [{"label": ..., "probabilities": {...}}, ...], "decision_rule": ...}
    GET  /health    → {"status": "ok"}
    GET  /metadata  → labels, model, backend, text columns, max length, how long texts are read, decision rule
    GET  /stats     → requests, rows, batches and how many rows each batch held

Requests wait in a queue; one worker takes up to --max-batch-size rows (several requests) or whatever arrived
within --max-wait-ms, sorts them by length, and runs them in length-sorted chunks on the PyTorch model or the
ONNX Runtime session (an exported folder), off the event loop. Each row is decided by the model's saved rule
(temperature, thresholds, abstain) as `tuneloop predict` does. Bad requests get a 4xx with a one-line message
and never take the server down; SIGTERM stops accepting connections and finishes the requests in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import logging
import time
from collections import Counter

import numpy as np
from fastapi import FastAPI, Request                 # this module is imported by `tuneloop serve` only
from fastapi.responses import JSONResponse

log = logging.getLogger("tuneloop")
CHUNK = 16                  # rows per forward pass inside a batch, after sorting by length


class Predictor(contextlib.AbstractContextManager):
    """The model, its tokenizer and everything saved with it; `predict` turns texts into prediction rows.

    `precision` (PyTorch backend): "bf16" computes the matrix products in bf16 with fp32 accumulation (oneDNN)
    and attention as matmul + softmax in pieces — 1.4x the rows/s of fp32 on a 2-core Xeon with AMX, the way a
    run with `--mixed-precision auto` computed its own evaluation there; "auto" is bf16 on CPUs with AMX, fp32
    elsewhere. The process-wide settings this takes (speed.SpeedLevers) are given back by `close()` / `with`."""

    def __init__(self, model_dir: str, threads: int | None = None, precision: str = "fp32"):
        import torch

        from . import speed, system
        from .config import SERVE_PRECISIONS
        from .onnx_backend import is_onnx_folder
        from .predict import decision_rule, load_trained, text_policy

        if precision not in SERVE_PRECISIONS:
            raise ValueError(f"precision: one of {', '.join(SERVE_PRECISIONS)}, got {precision!r}")
        if threads:
            torch.set_num_threads(threads)
        self.model, self.tokenizer, self.meta, self.labels = load_trained(model_dir)
        self.model.eval()
        self.policy = text_policy(self.meta, self.tokenizer)
        self.rule = decision_rule(self.meta, self.labels, raw=False)
        self.columns = self.meta.get("text_columns") or []
        self.backend = "onnx" if is_onnx_folder(model_dir) else "pytorch"
        if precision == "auto":
            precision = "bf16" if system.native_bf16(cpu_only=True) else "fp32"
        self.precision = precision if self.backend == "pytorch" else "onnx"
        self.levers = speed.SpeedLevers(bf16_matmuls=True, chunked_attention=True).__enter__() \
            if self.precision == "bf16" else None
        if self.levers is not None:
            self.levers.route_attention(self.model, cheap_masks=False)

    def close(self) -> None:
        if self.levers is not None:
            self.levers.__exit__(None, None, None)
            self.levers = None

    def __exit__(self, *exc):
        self.close()

    @property
    def pair(self) -> bool | None:
        """True / False when the model was trained on pairs / single texts; None when unknown (a plain folder)."""
        return len(self.columns) == 2 if self.columns else None

    def metadata(self) -> dict:
        rule = self.rule.to_dict() if self.rule is not None else None
        return {"labels": self.labels.names, "problem_type": self.labels.problem_type,
                "model": self.meta.get("base_model"), "backend": self.backend, "precision": self.precision,
                "text_columns": self.columns,
                "max_length": self.policy.max_length, "text_policy": self.policy.to_dict(), "decision_rule": rule,
                "decision_rule_text": self.rule.describe() if self.rule is not None else "raw scores"}

    def predict(self, items: list[tuple[str, str | None]]) -> list[dict]:
        """One prediction row (label, probabilities) per (text, second text or None), in the given order."""
        import torch

        from .data.tokenize import Tokenize
        from .metrics import pool_windows
        from .predictions import prediction_rows

        n = len(items)
        pair = items[0][1] is not None
        encoded = Tokenize(self.tokenizer, self.policy, pair, None)(
            {"idx": list(range(n)), "pos": list(range(1, n + 1)), "id": [str(i) for i in range(n)],
             "text_a": [a for a, _ in items], "text_b": [b for _, b in items], "label": [None] * n})
        keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in encoded]
        order = np.argsort([len(ids) for ids in encoded["input_ids"]], kind="stable")      # length-sorted
        logits = [None] * len(order)
        with torch.no_grad():
            for start in range(0, len(order), CHUNK):
                rows = order[start:start + CHUNK]
                inputs = self.tokenizer.pad({k: [encoded[k][i] for i in rows] for k in keys}, return_tensors="pt")
                out = self.model(**inputs).logits.float().numpy()
                for i, row in zip(rows, out):
                    logits[i] = row
        pooled = pool_windows(np.stack(logits), None, np.asarray(encoded["doc"]), self.labels.problem_type,
                              self.policy.pooling)[0]
        out = []
        for row in prediction_rows([str(i) for i in range(n)], pooled, self.labels, self.rule):
            row.pop("id")
            row.pop("decision_rule", None)
            probs = {k[5:]: row.pop(k) for k in list(row) if k.startswith("prob_")}
            out.append({**row, **({"probabilities": probs} if probs else {})})
        return out


class Batcher:
    """A queue of requests and one worker that batches them: up to `max_batch_size` rows, or what arrived within
    `max_wait_ms` of the first; the model runs in a single background thread."""

    def __init__(self, predictor: Predictor, max_batch_size: int, max_wait_ms: float):
        self.predictor, self.max_batch_size, self.max_wait = predictor, max_batch_size, max_wait_ms / 1000
        self.queue: asyncio.Queue | None = None
        self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="tuneloop-model")
        self.batch_rows: Counter = Counter()
        self.requests = self.rows = self.failures = 0

    async def submit(self, items: list) -> list[dict]:
        future = asyncio.get_running_loop().create_future()
        await self.queue.put((items, future))
        return await future

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            first = await self.queue.get()
            if first is None:
                return
            batch, rows = [first], len(first[0])
            deadline = loop.time() + self.max_wait
            while rows < self.max_batch_size and (left := deadline - loop.time()) > 0:
                try:
                    following = await asyncio.wait_for(self.queue.get(), left)
                except asyncio.TimeoutError:
                    break
                if following is None:           # shutting down: finish this batch, then stop
                    self.queue.put_nowait(None)
                    break
                batch.append(following)
                rows += len(following[0])
            items = [item for request, _ in batch for item in request]
            try:
                results = await loop.run_in_executor(self.executor, self.predictor.predict, items)
            except Exception as e:  # noqa: BLE001 - the request fails, the server stays up
                self.failures += len(batch)
                for _, future in batch:
                    if not future.done():
                        future.set_exception(e)
                continue
            self.batch_rows[rows] += 1
            self.requests, self.rows = self.requests + len(batch), self.rows + rows
            start = 0
            for request, future in batch:
                if not future.done():
                    future.set_result(results[start:start + len(request)])
                start += len(request)

    def stats(self) -> dict:
        batches = sum(self.batch_rows.values())
        return {"requests": self.requests, "rows": self.rows, "batches": batches, "failed_requests": self.failures,
                "mean_rows_per_batch": round(self.rows / batches, 3) if batches else None,
                "rows_per_batch": {str(k): v for k, v in sorted(self.batch_rows.items())}}


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_texts(body, pair: bool | None, max_rows: int) -> list[tuple[str, str | None]]:
    """The request's rows as (text, second text or None); BadRequest (400/413) naming what is wrong."""
    if not isinstance(body, dict) or "texts" not in body:
        raise BadRequest(400, 'the body must be a JSON object with "texts": a text, a list of texts, or a list of '
                              '[first, second] pairs')
    texts = body["texts"]
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts:
        raise BadRequest(400, '"texts" must be a text or a non-empty list')
    if len(texts) > max_rows:
        raise BadRequest(413, f"{len(texts)} rows in one request; at most {max_rows} (--max-rows)")
    rows = []
    for i, item in enumerate(texts, 1):
        if isinstance(item, str):
            row = (item, None)
        elif isinstance(item, list) and len(item) == 2 and all(isinstance(t, str) for t in item):
            row = (item[0], item[1])
        else:
            raise BadRequest(400, f"row {i}: give a text or a [first, second] pair of texts, got {str(item)[:80]}")
        if pair is True and row[1] is None:
            raise BadRequest(400, f"row {i}: the model reads pairs of texts; give [first, second]")
        if pair is False and row[1] is not None:
            raise BadRequest(400, f"row {i}: the model reads one text per row, not a pair")
        if not row[0].strip() or (row[1] is not None and not row[1].strip()):
            raise BadRequest(400, f"row {i}: empty text")
        rows.append(row)
    if len({r[1] is None for r in rows}) > 1:
        raise BadRequest(400, "mix of single texts and pairs in one request; send one kind")
    return rows


def create_app(predictor: Predictor, max_batch_size: int = 32, max_wait_ms: float = 5.0, max_rows: int = 256,
               max_body_bytes: int = 1 << 20):
    """The FastAPI app (its lifespan starts and stops the batching worker)."""
    import json

    batcher = Batcher(predictor, max_batch_size, max_wait_ms)
    rule_text = predictor.metadata()["decision_rule_text"]          # the same for every response

    @contextlib.asynccontextmanager
    async def lifespan(app):
        batcher.queue = asyncio.Queue()
        worker = asyncio.create_task(batcher.run())
        yield
        await batcher.queue.put(None)           # after uvicorn has finished the requests in flight
        await worker
        batcher.executor.shutdown(wait=True)

    app = FastAPI(title="tuneloop", lifespan=lifespan)
    app.state.batcher = batcher

    @app.exception_handler(BadRequest)
    async def bad_request(request, exc: BadRequest):
        return JSONResponse({"error": str(exc)}, status_code=exc.status)

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/metadata")
    async def metadata():
        return {**predictor.metadata(), "max_batch_size": max_batch_size, "max_wait_ms": max_wait_ms,
                "max_rows": max_rows}

    @app.get("/stats")
    async def stats():
        return batcher.stats()

    @app.post("/predict")
    async def predict(request: Request):
        started = time.perf_counter()
        raw = await request.body()
        if len(raw) > max_body_bytes:
            raise BadRequest(413, f"the body has {len(raw)} bytes; at most {max_body_bytes} (--max-body-kb)")
        try:
            body = json.loads(raw)
        except ValueError as e:
            raise BadRequest(400, f"the body is not JSON ({e})") from None
        rows = parse_texts(body, predictor.pair, max_rows)
        predictions = await batcher.submit(rows)
        return {"predictions": predictions, "decision_rule": rule_text,
                "ms": round((time.perf_counter() - started) * 1000, 2)}

    return app


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8000, max_batch_size: int = 32,
          max_wait_ms: float = 5.0, max_rows: int = 256, max_body_kb: int = 1024, threads: int | None = None,
          precision: str = "auto") -> None:
    """Run the service until SIGINT/SIGTERM (uvicorn's handlers: stop accepting, finish what is in flight)."""
    import uvicorn

    with Predictor(model_dir, threads, precision) as predictor:
        app = create_app(predictor, max_batch_size, max_wait_ms, max_rows, max_body_kb * 1024)
        log.info(f"serving {model_dir} ({predictor.backend}, {predictor.precision}) on http://{host}:{port}")
        uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                      timeout_graceful_shutdown=30)).run()

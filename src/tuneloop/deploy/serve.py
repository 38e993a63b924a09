"""`tuneloop serve MODEL_DIR`: the model as an HTTP JSON service (FastAPI on uvicorn), with dynamic batching.

    POST /predict   {"texts": "one text"} | {"texts": ["a", "b"]} | {"texts": [["first", "second"], ...]} (pairs)
                    → {"predictions": [{"label": ..., "probabilities": {...}}, ...], "decision_rule": ...}
    GET  /health    → {"status": "ok"}
    GET  /metadata  → labels, model, backend, text columns, max length, how long texts are read, decision rule
    GET  /stats     → requests, rows, batches and how many rows each batch held

Requests wait in a queue; one worker takes whole requests until the batch holds --max-batch-size rows or
more (a request is never split) or --max-wait-ms has passed, and runs them through the model's one inference
loop (`Classifier.logits`: longest first, in token-budget batches) on the PyTorch model — by the route
`--precision` names, the gated one by default — or the ONNX Runtime session (an exported folder), off the event
loop. Each row is decided by the model's saved rule (temperature, thresholds, abstain) as `tuneloop predict`
does. Texts are checked as `Classifier.predict` checks them; bad requests get a 4xx with a one-line message and
never take the server down; SIGTERM stops accepting connections and finishes the requests in flight.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import errno
import logging
import time
from collections import Counter

from fastapi import FastAPI, Request  # needs the [serve] extra: `tuneloop serve` checks it first
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..exceptions import TuneloopError
from ..predict.classifier import Classifier

log = logging.getLogger("tuneloop")


def predict_rows(classifier: Classifier, items: list[tuple[str, str | None]]) -> list[dict]:
    """One prediction row (label, probabilities) per (text, second text or None), under the model's rule."""
    return classifier.rows(classifier.logits(items))


class Batcher:
    """A queue of requests and one worker that batches them: whole requests until `max_batch_size` rows or
    more (never split), or what arrived within `max_wait_ms` of the first; the model runs in a single background
    thread. A request that finds the queue empty after a batch of one request (one client at a time) runs at once:
    no one else is sending, and waiting would only add `max_wait_ms` to its latency."""

    def __init__(self, classifier: Classifier, max_batch_size: int, max_wait_ms: float):
        self.classifier, self.max_batch_size, self.max_wait = classifier, max_batch_size, max_wait_ms / 1000
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
        alone = True                            # the last batch held one request
        while True:
            first = await self.queue.get()
            if first is None:
                return
            batch, rows = [first], len(first[0])
            deadline = loop.time() + (0.0 if alone and self.queue.empty() else self.max_wait)
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
            alone = len(batch) == 1
            if not await self._answer(loop, batch) and len(batch) > 1:
                for request in batch:           # one request's rows may be what failed: each alone, so only
                    await self._answer(loop, [request])           # that one fails, not those it was batched with

    async def _answer(self, loop, batch: list) -> bool:
        """Run the batch's rows through the model and answer each request its own; False (the requests still
        unanswered) when the model failed on them, which a batch of one request answers with the error."""
        items = [item for request, _ in batch for item in request]
        try:
            results = await loop.run_in_executor(self.executor, predict_rows, self.classifier, items)
        except Exception as e:  # noqa: BLE001 - the request fails, the server stays up
            if len(batch) > 1:
                return False
            self.failures += 1
            log.error(f"a request of {len(items)} row(s) failed: {type(e).__name__}: {e}")
            if not batch[0][1].done():
                batch[0][1].set_exception(e)
            return True
        self.batch_rows[len(items)] += 1
        self.requests, self.rows = self.requests + len(batch), self.rows + len(items)
        start = 0
        for request, future in batch:
            if not future.done():
                future.set_result(results[start:start + len(request)])
            start += len(request)
        return True

    def stats(self) -> dict:
        batches = sum(self.batch_rows.values())
        return {"requests": self.requests, "rows": self.rows, "batches": batches, "failed_requests": self.failures,
                "mean_rows_per_batch": round(self.rows / batches, 3) if batches else None,
                "rows_per_batch": {str(k): v for k, v in sorted(self.batch_rows.items())}}


class BadRequest(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def parse_texts(body, classifier: Classifier, max_rows: int) -> list[tuple[str, str | None]]:
    """The request's rows as (text, second text or None), checked as `Classifier.predict` checks its texts
    (predict/inputs.py, the same messages); BadRequest: 400 naming what is wrong, 413 past `max_rows`."""
    if not isinstance(body, dict) or "texts" not in body:
        raise BadRequest(400, 'the body must be a JSON object with "texts": a text, a list of texts, or a list of '
                              '[first, second] pairs')
    texts = body["texts"]
    if isinstance(texts, list) and len(texts) > max_rows:
        raise BadRequest(413, f"{len(texts)} rows in one request; at most {max_rows} (--max-rows)")
    try:
        return classifier.items(texts)[0]
    except TuneloopError as e:
        raise BadRequest(400, str(e)) from None


def create_app(classifier: Classifier, max_batch_size: int = 32, max_wait_ms: float = 5.0, max_rows: int = 256,
               max_body_bytes: int = 1 << 20):
    """The FastAPI app (its lifespan starts and stops the batching worker)."""
    import json

    check_limits(max_batch_size, max_wait_ms, max_rows)
    batcher = Batcher(classifier, max_batch_size, max_wait_ms)
    rule_text = classifier.describe()["decision_rule_text"]          # the same for every response

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

    @app.exception_handler(StarletteHTTPException)      # an unknown path, a GET /predict: {"error"} as the rest,
    async def http_error(request, exc: StarletteHTTPException):          # not FastAPI's {"detail"}
        said = f"{request.method} {request.url.path}: {exc.detail}"
        said += "; the service answers POST /predict, GET /health, /metadata, /stats" if exc.status_code in (
            404, 405) else ""
        return JSONResponse({"error": said}, status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/metadata")
    async def metadata():
        return {**classifier.describe(), "max_batch_size": max_batch_size, "max_wait_ms": max_wait_ms,
                "max_rows": max_rows}

    @app.get("/stats")
    async def stats():
        return batcher.stats()

    @app.post("/predict")
    async def predict(request: Request):
        started = time.perf_counter()
        raw = await read_body(request, max_body_bytes)
        try:
            body = json.loads(raw)
        except UnicodeDecodeError as e:         # was "not JSON", naming a codec, not what to fix
            raise BadRequest(400, f"the body is not UTF-8 (byte {e.start}: {e.object[e.start:e.start + 1]!r}); "
                                  "send the JSON encoded as UTF-8") from None
        except ValueError as e:
            raise BadRequest(400, f"the body is not JSON ({e})") from None
        rows = parse_texts(body, classifier, max_rows)
        try:
            predictions = await batcher.submit(rows)
        except Exception as e:  # noqa: BLE001 - said as every other answer is (JSON "error"), not as plain text
            return JSONResponse({"error": f"the model failed on this request: {type(e).__name__}: {e}"},
                                status_code=500)
        return {"predictions": predictions, "decision_rule": rule_text,
                "ms": round((time.perf_counter() - started) * 1000, 2)}

    return app


async def read_body(request: Request, limit: int) -> bytes:
    """The request's body, refused (413) past `limit` bytes as soon as its Content-Length or what has arrived says
    so: read whole first, a 300 MB body took 1 GB of the server's memory before it was refused."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, f"the body has {int(declared)} bytes; at most {limit} (--max-body-kb)")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise BadRequest(413, f"the body has more than {limit} bytes; at most {limit} (--max-body-kb)")
        chunks.append(chunk)
    return b"".join(chunks)


def check_address(host: str, port: int) -> None:
    """TuneloopError naming --host or --port when the service could not listen there (uvicorn would say so after
    the model loaded, as an ERROR line without the option)."""
    import socket

    if not 1 <= port <= 65535:
        raise TuneloopError(f"--port {port}: must be in 1..65535")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise TuneloopError(f"--host {host!r}: not a name or address this machine can resolve ({e}); e.g. "
                            "127.0.0.1") from None
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)       # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as e:
            raise TuneloopError(f"--host {host} --port {port}: cannot listen there ({e.strerror}); "
                                + ("another process holds the port: choose another --port"
                                   if e.errno == errno.EADDRINUSE else "give an address of this machine")) from None


def check_limits(max_batch_size: int, max_wait_ms: float, max_rows: int, max_body_kb: int | None = None,
                 threads: int | None = None) -> None:
    """TuneloopError naming the option (--max-wait-ms, as the CLI spells it) whose value the service cannot run
    with: a size under 1, a wait that is nan or inf (a batch that never closes). serve() and create_app() check
    here, so a Python caller gets the CLI's one line, before the model loads."""
    for name, value in (("max_batch_size", max_batch_size), ("max_rows", max_rows), ("max_body_kb", max_body_kb)):
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            raise TuneloopError(f"--{name.replace('_', '-')}: must be a whole number, at least 1, got {value!r}")
    if isinstance(max_wait_ms, bool) or not isinstance(max_wait_ms, (int, float)) or \
            not 0 <= max_wait_ms < float("inf"):
        raise TuneloopError(f"--max-wait-ms: must be a finite number >= 0, got {max_wait_ms!r}")
    if threads is not None and not (isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1):
        raise TuneloopError(f"--threads: must be at least 1, got {threads!r}")


def serve(model_dir: str, host: str = "127.0.0.1", port: int = 8000, max_batch_size: int = 32,
          max_wait_ms: float = 5.0, max_rows: int = 256, max_body_kb: int = 1024, threads: int | None = None,
          precision: str = "auto") -> None:
    """Run the service until SIGINT/SIGTERM (uvicorn's handlers: stop accepting, finish what is in flight)."""
    import torch
    import uvicorn

    check_limits(max_batch_size, max_wait_ms, max_rows, max_body_kb, threads)
    check_address(host, port)                   # before the model's load: a busy port is said in a second
    before = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)          # for the service's life; the caller's count is given back after
    try:
        with Classifier.load(model_dir, precision=precision, threads=threads) as classifier:
            app = create_app(classifier, max_batch_size, max_wait_ms, max_rows, max_body_kb * 1024)
            log.info(f"serving {classifier.path} ({classifier.backend}, {classifier.precision}) on "
                     f"http://{host}:{port} (POST /predict; Ctrl+C stops)")
            uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning",
                                          timeout_graceful_shutdown=30)).run()
    finally:
        torch.set_num_threads(before)

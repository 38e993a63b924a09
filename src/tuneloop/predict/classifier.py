"""`Classifier`: one object for a trained model — a tuneloop model folder, a plain transformers folder, or an
exported (ONNX) folder — holding the model, its tokenizer, labels, how it reads long texts and its decision rule.
It loads once; every use of a trained model goes through it: `tuneloop.load(path).predict([...])`, `tuneloop
evaluate`, `tuneloop predict`, `tuneloop serve`, the export's accuracy gate and a run's test-split predictions.

    with tuneloop.load("runs/mrpc/model") as clf:
        clf.predict("a text")                        # {"label": ..., "probabilities": {...}}
        clf.predict([("first", "second"), ...])      # pairs, for a model trained on pairs
        clf.predict_proba(["a", "b"])                # array, one column per class
        clf.evaluate("dev.csv")                      # metrics under the saved decision rule
"""

from __future__ import annotations

import contextlib
import logging
import os
from pathlib import Path

import numpy as np

from ..config.options import PRECISIONS
from ..data.labels import LabelSchema
from ..data.long_texts import TextPolicy, default_max_length
from ..data.unknown_tokens import counted, warn_unknown_in_predictions
from ..decision.rule import DecisionRule
from ..exceptions import TuneloopError
from ..layout import model_folder
from ..model.loading import (fit_to_positions, load_saved_model, read_metadata, resolve_model, usable_positions,
                             use_tokenizer_pad)
from ..model.lora import adapter_base, is_adapter_folder, load_adapter_model
from ..model.onnx_model import is_onnx_folder
from ..model.tokenizer import load_tokenizer
from ..objective import objective_for
from .inputs import encoded, items_of
from .rows import decided_rows, prediction_rows

log = logging.getLogger("tuneloop")
CHUNK = 256             # rows per batch of texts given in memory at most (and batches.TOKEN_BUDGET tokens)


def text_policy(meta: dict, tokenizer) -> TextPolicy:
    """How the model reads long texts, as its run recorded it (a plain folder: head truncation)."""
    default = meta.get("max_length") or default_max_length(tokenizer)
    return TextPolicy.from_dict(meta.get("text_policy"), default)


def within_positions(meta: dict, positions: int | None, name: str) -> dict:
    """`meta` (tuneloop.json) with its text policy at most `positions` tokens, the model's position embeddings: a
    run whose default --max-length took the tokenizer's maximum over them (an earlier tuneloop: 512 for a model
    with 128 positions) would fail at the first longer text. Said where it lowers the recorded length."""
    policy = dict(meta.get("text_policy") or {})
    recorded = policy.get("max_length") or meta.get("max_length") or 0     # an older tuneloop.json: no policy
    if positions is None or recorded <= positions:
        return meta
    log.warning(f"{name}: its tuneloop.json reads texts up to {recorded} tokens, more than its position "
                f"embeddings take: read up to {positions} tokens (long texts cut or windowed as recorded)")
    lowered = {**meta, "max_length": meta.get("max_length") and min(meta["max_length"], positions)}
    return {**lowered, "text_policy": {**policy, "max_length": positions}} if policy else lowered


def _load_model(path: str, model_dir: str, threads: int | None = None, onnx: Path | None = None):
    """(model, its transformers config) of a model folder: PyTorch, or ONNX Runtime for an exported folder or for
    the folder's int8 ONNX copy `onnx` (the gated route: the transformers model code is then never imported)."""
    from transformers import AutoConfig

    try:
        if onnx is not None or is_onnx_folder(path):
            from .. import extras
            from ..model.onnx_model import OnnxModel

            extras.require("export")
            return OnnxModel(onnx or path, threads), AutoConfig.from_pretrained(path)
        if is_adapter_folder(path):                 # LoRA: onto its base model (lora.adapter_base), merged
            model = load_adapter_model(path, adapter_base(path))
        else:
            model = load_saved_model(path)
        return model, model.config
    except (OSError, ValueError) as e:
        raise TuneloopError(f"--model {model_dir}: could not load a classification model ({e})") from None


def gate_folder(folder, *, cpu: bool = False, batch_size: int | None = None, stop=None, tables=None,
                rows: int | None = None) -> dict:
    """The precision gate (routes.gate) for a model folder: every route this device computes natively checked
    against fp32 on the folder's recorded validation rows and timed, in batches of `batch_size` rows at most (by
    default 64 on a CPU; on a GPU predict's own, CHUNK), fp32 computed in full fp32 as predict computes it (not under
    a run's TF32: runtime/speed.exact_fp32); the record written into its tuneloop.json (`--precision auto` reads it)
    and returned. `stop`: routes.gate's (routes.GateStopped: nothing written); `tables`: {data option: table
    from Python} for a run fed from Python, whose folder records only the tables' descriptions; `rows`: at most this
    many of the first validation rows (the run's --max-eval-samples; routes.GATE_ROWS at most in any case)."""
    from ..runtime.process import library_output
    from ..runtime.speed import exact_fp32
    from . import routes

    with library_output(quiet=True), exact_fp32(), Classifier.load(folder, cpu=cpu, precision="fp32") as clf:
        record = routes.gate(clf, batch_size or (CHUNK if clf.device.type == "cuda" else 64), stop, tables, rows)
        routes.write_record(clf.path, clf.device.type, record)
    return record


def launched() -> bool:
    """Whether this process is one of several started by `accelerate launch` / torchrun."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


class Classifier(contextlib.AbstractContextManager):
    """A trained classifier (or regressor) ready to use; see the module's docstring. `precision` says how it
    computes: fp32 (exact), a gated or forced route (int8, bf16, fp16, the folder's int8 ONNX copy onnx-int8:
    predict/routes.py), or onnx (an exported folder)."""

    def __init__(self, model, tokenizer, metadata: dict, labels: LabelSchema, *, path: str | None = None,
                 backend: str = "pytorch", accelerator=None):
        self.model, self.tokenizer, self.metadata, self.label_schema = model, tokenizer, metadata, labels
        self.path, self.backend, self.accelerator = path, backend, accelerator
        self._prepared = model if accelerator is not None else None
        self.policy = text_policy(metadata, tokenizer)
        self.objective = objective_for(labels)
        self.rule = DecisionRule.from_dict(metadata.get("decision")) if self.objective.classes else None
        self.precision = "onnx" if backend == "onnx" else "fp32"
        self._device = None
        self._said_unknown = False

    @classmethod
    def load(cls, path: str | os.PathLike, *, cpu: bool = False, precision: str = "fp32",
             threads: int | None = None) -> "Classifier":
        """Load a saved model once. `precision` (PyTorch): "fp32", the default, is the model exactly as trained;
        "auto" is the route the model folder records as gated for this kind of device (predict/routes.py: int8
        Linear layers, bf16 weights or the folder's int8 ONNX copy on a CPU, bf16/fp16 weights on a GPU, kept only
        where decisions agreed with fp32's on the validation rows and it was faster), fp32 where none is recorded;
        "int8", "bf16", "fp16" force a route without the gate. `threads`: CPU threads for an ONNX Runtime session."""
        import torch

        from ..runtime import machine
        from . import routes

        if not isinstance(path, (str, os.PathLike)):          # load(None): a TypeError from deep in pathlib
            raise TuneloopError(f"path: a model or run folder (a str or a Path), got {type(path).__name__}")
        if precision not in PRECISIONS:
            raise TuneloopError(f"precision: one of {', '.join(PRECISIONS)}, got {precision!r}")
        from ..runtime.process import library_output

        folder = model_folder(path)                      # a run folder reads as its model/
        model_dir = os.fspath(path) if folder == Path(path) else str(folder)        # ./runs/x stays a path
        resolved = resolve_model(model_dir)
        if precision not in ("auto", "fp32") and is_onnx_folder(resolved):           # it was ignored without a word
            raise TuneloopError(f"--precision {precision}: {model_dir} is an exported ONNX model, computed as it was "
                                "exported (its export_report.json says how); leave --precision out")
        meta = read_metadata(resolved)
        device = "cuda" if not machine.use_cpu(cpu) and torch.cuda.is_available() else "cpu"
        route = routes.recorded_route(meta, device, resolved) if precision == "auto" else precision
        onnx = (routes.onnx_file(resolved).parent if route == routes.ONNX and not is_onnx_folder(resolved)
                else None)                       # the gated ONNX copy: loaded instead of the PyTorch model
        with library_output(quiet=True, data=False):     # no load reports or weight bars; given back after
            tokenizer = load_tokenizer(model_dir)
            model, config = _load_model(resolved, model_dir, threads, onnx)
        labels = LabelSchema.from_dict(meta["labels"]) if "labels" in meta else LabelSchema.from_model_config(config)
        backend = "onnx" if onnx is not None or is_onnx_folder(resolved) else "pytorch"
        if backend == "pytorch":        # the head pools by the tokenizer's pad id (an ONNX graph: as it was exported)
            use_tokenizer_pad(config, tokenizer.pad_token_id, model_dir)
        positions = fit_to_positions(tokenizer, usable_positions(config), model_dir, say="text_policy" not in meta)
        meta = within_positions(meta, positions, model_dir)
        if backend == "pytorch":
            model.eval()
            if device == "cuda":
                model.to("cuda")
        clf = cls(model, tokenizer, meta, labels, path=model_dir, backend=backend)
        if onnx is not None:
            clf.precision = routes.ONNX
        elif backend == "pytorch" and route != "fp32":
            if not routes.supported(route, device):
                raise TuneloopError(f"--precision {precision}: not computed natively on this {device} (see "
                                    "`tuneloop env`); use --precision auto or fp32")
            clf = clf.with_route(route)
        return clf

    def with_route(self, route: str) -> "Classifier":
        """This model computed by a precision route (predict/routes.py), the fp32 model left as it is; "fp32" is
        this Classifier itself."""
        from . import routes

        if route == "fp32" or self.backend != "pytorch":
            return self
        if route == routes.ONNX:
            if self.path is None or not routes.onnx_file(self.path).is_file():
                raise TuneloopError(f"the {routes.ONNX} route: {self.path} holds no int8 ONNX copy (the precision "
                                    "gate writes one where it chose it)")
            return self.on_onnx(routes.onnx_file(self.path).parent)
        other = type(self)(routes.applied(self.model, route), self.tokenizer, self.metadata, self.label_schema,
                           path=self.path, backend=self.backend)
        other.precision = route
        return other

    def on_onnx(self, folder) -> "Classifier":
        """This model as the int8 ONNX copy in `folder` (model.onnx), run by ONNX Runtime: the onnx-int8 route."""
        from ..model.onnx_model import OnnxModel
        from . import routes

        other = type(self)(OnnxModel(folder), self.tokenizer, self.metadata, self.label_schema, path=self.path,
                           backend="onnx")
        other.precision = routes.ONNX
        return other

    def close(self) -> None:
        """Nothing process-wide is held (kept so `with tuneloop.load(...)` reads the same)."""

    def __exit__(self, *exc):
        self.close()

    # -- what the model is -------------------------------------------------------------------------------------
    @property
    def labels(self) -> list[str]:
        return list(self.label_schema.names)

    @property
    def problem_type(self) -> str:
        return self.label_schema.problem_type

    @property
    def text_columns(self) -> list[str]:
        return list(self.metadata.get("text_columns") or [])

    @property
    def pair(self) -> bool | None:
        """True / False when the model was trained on pairs / single texts; None when unknown (a plain folder)."""
        return len(self.text_columns) == 2 if self.text_columns else None

    @property
    def device(self):
        import torch

        if self._device is None:
            self._device = next(self.model.parameters()).device if self.backend == "pytorch" else torch.device("cpu")
        return self._device

    def decision_rule(self, raw: bool = False) -> DecisionRule | None:
        """The saved rule (temperature, thresholds, abstain level); None with `raw` (plain softmax/sigmoid and
        argmax, 0.5 per label), for regression, and for folders without one."""
        return None if raw else self.rule

    def describe(self) -> dict:
        """What the model is (serve's /metadata)."""
        rule = self.rule
        return {"labels": self.label_schema.names, "problem_type": self.problem_type,
                "model": self.metadata.get("base_model"), "backend": self.backend, "precision": self.precision,
                "text_columns": self.text_columns, "max_length": self.policy.max_length,
                "text_policy": self.policy.to_dict(), "decision_rule": rule.to_dict() if rule else None,
                "decision_rule_text": rule.describe() if rule else "raw scores"}

    # -- texts in memory ---------------------------------------------------------------------------------------
    def predict(self, texts, *, raw: bool = False, text_columns=None):
        """Predictions under the saved decision rule (`raw=True`: plain softmax/sigmoid and argmax). `texts`: a
        text, a (first, second) pair, or a list of either; returns one row — {"label", "probabilities"} ({"score"}
        for regression) — for a single input, a list of rows for a list. A pandas DataFrame (or Series) gives a
        DataFrame on its index: `label` (or `score`), `prob_<class>` per class, `decision_rule`; its text columns
        are the model's own, its only one(s), or `text_columns`."""
        from .frames import as_frame, frame_items, is_frame

        if is_frame(texts, text_columns):
            items = frame_items(texts, self.text_columns, self.pair, text_columns)
            return as_frame(self.table_rows(range(len(items)), self.logits(items), raw=raw), texts.index)
        items, single = self.items(texts)
        rows = self.rows(self.logits(items), raw=raw)
        return rows[0] if single else rows

    def predict_proba(self, texts, *, raw: bool = False, text_columns=None) -> np.ndarray:
        """Class probabilities, a row per input and a column per label (in `labels` order); a DataFrame's text
        columns as `predict` finds them (`text_columns` names them)."""
        from .frames import frame_items, is_frame

        items = frame_items(texts, self.text_columns, self.pair, text_columns) if is_frame(texts, text_columns) \
            else self.items(texts)[0]
        logits = self.logits(items)
        rule = self.decision_rule(raw)
        return rule.probabilities(logits) if rule is not None else self.objective.probabilities(logits)

    def items(self, texts) -> tuple[list[tuple[str, str | None]], bool]:
        """(rows as (text, second text or None), whether one input was given rather than a list): `texts` as
        `predict` takes them, checked against what the model reads (predict/inputs.py, which serve's requests go
        through too); a TuneloopError names what is wrong."""
        return items_of(texts, self.pair, self.text_columns)

    def logits(self, items: list[tuple[str, str | None]]) -> np.ndarray:
        """Logits, a row per (text, second text or None) — checked rows, as `items` gives them — in order: tokenized
        as the run read its texts (long texts cut or windowed and pooled back), then `run` longest first in batches
        of at most CHUNK rows and batches.TOKEN_BUDGET tokens. The first call whose texts are WARN_SHARE or more
        the tokenizer's unknown token says so (data/unknown_tokens.py), once for this model (a server's log too)."""
        tokenized = encoded(items, self.tokenizer, self.policy)
        if not self._said_unknown:            # texts the vocabulary cannot read: said once per loaded model
            self._said_unknown = warn_unknown_in_predictions(
                *counted(tokenized.columns["input_ids"], self.tokenizer), self.tokenizer,
                "texts to predict (said once for this model)")
        return self.run(tokenized, batch_size=CHUNK).all_logits

    def rows(self, logits: np.ndarray, *, raw: bool = False) -> list[dict]:
        """{"label", "probabilities"} (or {"score"}) per row of logits, under the rule unless `raw`."""
        return decided_rows(logits, self.label_schema, self.decision_rule(raw))

    def table_rows(self, ids, logits: np.ndarray, *, raw: bool = False, glue: bool = False) -> list[dict]:
        """Flat rows as prediction files hold them (id, label, prob_<label>..., decision_rule). GLUE's layout
        needs a label on every row: no abstaining there."""
        rule = self.decision_rule(raw)
        return prediction_rows(list(ids), logits, self.label_schema,
                               rule.without_abstain() if glue and rule is not None else rule)

    # -- the one inference loop: texts in memory, data sets and files (a launch's processes each take a share) --
    def run(self, rows, *, batch_size: int = 64, quiet: bool = True, desc: str = "Predicting", metric_names=(),
            pooling: str | None = None):
        """Every prediction of this model goes through here (predict, predict_proba, logits, evaluate, predict_file,
        serve, the export's gate, the precision gate, a run's test predictions): `rows` — a tokenized split
        (data/tokenize.tokenize; labels kept when it has them) or rows in memory (predict/batches.Tokenized) —
        through evaluation.inference.run_inference, the loop training's evaluation runs. In this process (no launch)
        the rows go longest first in batches of at most `batch_size` rows and batches.TOKEN_BUDGET padded tokens
        (predict/batches.py); inside a run or a launch (`accelerated()` under `accelerate launch`) in batches of
        `batch_size`, longest first (data/batching.eval_loader), every process taking its share, results gathered.
        Returns the Accumulator: `all_logits` (a row per input row, in order, windows pooled by `pooling`, the
        model's own by default), `all_labels`, and `compute()` for `metric_names`."""
        from ..evaluation.inference import OneProcess, run_inference
        from ..evaluation.metrics import Accumulator

        accumulator = Accumulator(metric_names, self.objective, pooling or self.policy.pooling,   # f1 of the
                                  positive=self.rule.positive if self.rule else 1)        # --positive-label
        if self.accelerator is None or isinstance(self.accelerator, OneProcess):
            from .batches import BudgetBatches, Tokenized

            accelerator, device = OneProcess(self.device), self.device
            tok = self.tokenizer
            loader = accelerator.prepare(BudgetBatches(Tokenized.of(rows), batch_size, tok.pad_token_id or 0,
                                                       tok.padding_side, pin=device.type == "cuda"))
            return run_inference(self.model, loader, accelerator, accumulator, desc, quiet)
        from ..data.batching import eval_loader, make_collator
        from .batches import Tokenized

        rows = rows.as_dataset() if isinstance(rows, Tokenized) else rows
        loader = self.accelerator.prepare(eval_loader(rows, batch_size, make_collator(self.tokenizer, False, None)))
        return run_inference(self._prepared, loader, self.accelerator, accumulator, desc, quiet)

    @contextlib.contextmanager
    def accelerated(self):
        """A context in which `run` shares data sets out over the processes of an `accelerate launch` (each takes
        its share; results are gathered); it yields the Accelerator, for `main_process_first()` and
        `is_main_process` (only the main process writes). Inside a run (or an enclosing call) that is the run's
        own; otherwise one made for this context, its process state given back afterwards."""
        if self.accelerator is not None:
            yield self.accelerator
            return
        if not launched():                    # one process: no Accelerator to start (nor accelerate to import)
            from ..evaluation.inference import OneProcess

            self.accelerator = OneProcess(self.device)
            try:
                yield self.accelerator
            finally:
                self.accelerator = None
            return
        from accelerate import Accelerator

        from ..runtime.process import accelerate_state, settle_processes

        with accelerate_state():
            self.accelerator = Accelerator(cpu=self.device.type == "cpu")
            self._prepared = self.accelerator.prepare(self.model) if self.backend == "pytorch" else self.model
            try:
                yield self.accelerator
                settle_processes(self.accelerator)      # before the prepared (DDP) model is let go
            finally:
                self.accelerator = self._prepared = None

    def evaluate(self, data=None, *, raw: bool = False, quiet: bool = True, output: str | None = None,
                 **data_options) -> dict:
        """Metrics (`["eval"]`) and a per-class table (`["per_class"]`) on labeled data — a file, a pandas
        DataFrame, a datasets.Dataset or (texts, labels); or data options as `tuneloop evaluate` takes them; by
        default the validation data recorded with the model — under the saved decision rule unless `raw`. Data of
        several splits (MNLI's matched and mismatched) adds every split's under `["eval_splits"]` and
        `["per_class_splits"]`; the first split's are `eval` and `per_class`."""
        from ..data.memory import data_option
        from ..runtime.process import library_output
        from .evaluate import evaluation

        if data is not None:
            data_options["validation_file"] = data_option(data, "validation")
        with library_output(quiet):
            return evaluation(self, {**data_options, "quiet": quiet}, output, raw)[0]

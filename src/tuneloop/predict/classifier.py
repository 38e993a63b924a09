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
import os
from pathlib import Path

import numpy as np

from ..objective import objective_for
from .. import tasks
from ..config.options import PRECISIONS
from ..data.labels import LabelSchema
from ..data.long_texts import TextPolicy, default_max_length
from ..decision.rule import DecisionRule
from ..exceptions import TuneloopError
from ..layout import ADAPTER_CONFIG_FILE, MODEL_CONFIG_FILE, MODEL_DIR
from ..model.loading import load_saved_model, read_metadata, resolve_model
from ..model.lora import is_adapter_folder, load_adapter_model
from ..model.onnx_model import is_onnx_folder
from ..model.tokenizer import load_tokenizer
from .rows import decided_rows, prediction_rows

CHUNK = 16                                 # rows per forward pass of in-memory texts, after sorting by length


def text_policy(meta: dict, tokenizer) -> TextPolicy:
    """How the model reads long texts, as its run recorded it (a plain folder: head truncation)."""
    default = meta.get("max_length") or default_max_length(tokenizer)
    return TextPolicy.from_dict(meta.get("text_policy"), default)


def _load_model(path: str, model_dir: str, meta: dict, threads: int | None = None):
    """(model, its transformers config) of a model folder: PyTorch, or ONNX Runtime for an exported folder."""
    from transformers import AutoConfig

    try:
        if is_onnx_folder(path):
            from .. import extras
            from ..model.onnx_model import OnnxModel

            extras.require("export")
            return OnnxModel(path, threads), AutoConfig.from_pretrained(path)
        if is_adapter_folder(path):                 # LoRA: onto its base model, merged
            base = resolve_model(meta.get("base_model") or _adapter_base(path))
            model = load_adapter_model(path, base)
        else:
            model = load_saved_model(path)
        return model, model.config
    except (OSError, ValueError) as e:
        raise TuneloopError(f"--model {model_dir}: could not load a classification model ({e})") from None


def model_folder(path: str | os.PathLike) -> Path:
    """A run folder's final model (RUN/model), or `path` itself (a model folder, or a Hub id)."""
    path, inner = Path(path), Path(path) / MODEL_DIR
    return inner if (inner / MODEL_CONFIG_FILE).is_file() or (inner / ADAPTER_CONFIG_FILE).is_file() else path


def _adapter_base(path: str) -> str:
    import json

    return json.loads((Path(path) / ADAPTER_CONFIG_FILE).read_text(encoding="utf-8"))["base_model_name_or_path"]


class Classifier(contextlib.AbstractContextManager):
    """A trained classifier (or regressor) ready to use; see the module's docstring. `close()` (or `with`) gives
    back the process-wide settings a bf16 precision took."""

    def __init__(self, model, tokenizer, metadata: dict, labels: LabelSchema, *, path: str | None = None,
                 backend: str = "pytorch", accelerator=None):
        self.model, self.tokenizer, self.metadata, self.label_schema = model, tokenizer, metadata, labels
        self.path, self.backend, self.accelerator = path, backend, accelerator
        self._prepared = model if accelerator is not None else None
        self.policy = text_policy(metadata, tokenizer)
        self.rule = DecisionRule.from_dict(metadata.get("decision")) \
            if labels.problem_type != tasks.REGRESSION else None
        self.precision = "onnx" if backend == "onnx" else "fp32"
        self._levers = None

    @classmethod
    def load(cls, path: str | os.PathLike, *, cpu: bool = False, precision: str = "fp32",
             threads: int | None = None) -> "Classifier":
        """Load a saved model once. `precision` (PyTorch): "bf16" computes matrix products in bf16 with fp32
        accumulation and attention in pieces (1.4x the rows/s of fp32 on a CPU with AMX); "auto" is bf16 on CPUs
        with AMX, fp32 elsewhere. `threads`: CPU threads for an ONNX Runtime session."""
        import torch

        from ..runtime import machine

        if precision not in PRECISIONS:
            raise TuneloopError(f"precision: one of {', '.join(PRECISIONS)}, got {precision!r}")
        from ..runtime.process import library_output

        model_dir = str(model_folder(path))              # a run folder reads as its model/
        resolved = resolve_model(model_dir)
        meta = read_metadata(resolved)
        with library_output(quiet=True):         # no load reports or weight bars; the settings are given back
            tokenizer = load_tokenizer(model_dir)
            model, config = _load_model(resolved, model_dir, meta, threads)
        if getattr(config, "pad_token_id", None) is None:     # a decoder folder as it ships: EOS pads
            config.pad_token_id = tokenizer.pad_token_id
        labels = LabelSchema.from_dict(meta["labels"]) if "labels" in meta else LabelSchema.from_model_config(config)
        backend = "onnx" if is_onnx_folder(resolved) else "pytorch"
        if backend == "pytorch":
            model.eval()
            if not machine.use_cpu(cpu) and torch.cuda.is_available():
                model.to("cuda")
        clf = cls(model, tokenizer, meta, labels, path=model_dir, backend=backend)
        if precision == "auto":
            precision = "bf16" if machine.native_bf16(cpu_only=True) and clf.device.type == "cpu" else "fp32"
        if backend == "pytorch" and precision == "bf16":
            clf._use_bf16()
        return clf

    def _use_bf16(self) -> None:
        from ..runtime import speed

        self._levers = speed.SpeedLevers(bf16_matmuls=True, chunked_attention=True).__enter__()
        self._levers.route_attention(self.model, cheap_masks=False)
        self.precision = "bf16"

    def close(self) -> None:
        if self._levers is not None:
            self._levers.__exit__(None, None, None)
            self._levers = None

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

        return next(self.model.parameters()).device if self.backend == "pytorch" else torch.device("cpu")

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

        if is_frame(texts):
            items = self._checked(frame_items(texts, self.text_columns, self.pair, text_columns))
            return as_frame(self.table_rows(range(len(items)), self.logits(items), raw=raw), texts.index)
        items, single = self._items(texts)
        rows = self.rows(self.logits(items), raw=raw)
        return rows[0] if single else rows

    def predict_proba(self, texts, *, raw: bool = False) -> np.ndarray:
        """Class probabilities, a row per input and a column per label (in `labels` order)."""
        from .frames import frame_items, is_frame
        from .rows import probabilities

        items = self._checked(frame_items(texts, self.text_columns, self.pair)) if is_frame(texts) else \
            self._items(texts)[0]
        logits = self.logits(items)
        rule = self.decision_rule(raw)
        return rule.probabilities(logits) if rule is not None else probabilities(logits, self.problem_type)

    def _items(self, texts) -> tuple[list[tuple[str, str | None]], bool]:
        if isinstance(texts, str):
            return self._checked([(texts, None)]), True
        if isinstance(texts, tuple) and len(texts) == 2 and all(isinstance(t, str) for t in texts):
            return self._checked([texts]), True
        if isinstance(texts, (list, tuple)) or hasattr(texts, "__iter__"):
            items = []
            for i, item in enumerate(texts):
                if isinstance(item, str):
                    items.append((item, None))
                elif isinstance(item, (list, tuple)) and len(item) == 2 and all(isinstance(t, str) for t in item):
                    items.append((item[0], item[1]))
                else:
                    raise TuneloopError(f"texts[{i}]: give a text or a (first, second) pair of texts, got "
                                        f"{str(item)[:80]!r}")
            return self._checked(items), False
        raise TuneloopError(f"texts: give a text, a (first, second) pair or a list of them, got {type(texts).__name__}")

    def _checked(self, items: list) -> list:
        if not items:
            raise TuneloopError("texts: nothing to predict (an empty list)")
        kinds = {b is None for _, b in items}
        if len(kinds) > 1:
            raise TuneloopError("texts: a mix of single texts and pairs; give one kind")
        if self.pair is True and items[0][1] is None:
            raise TuneloopError(f"the model reads pairs of texts ({', '.join(self.text_columns)}); give "
                                "(first, second) pairs")
        if self.pair is False and items[0][1] is not None:
            raise TuneloopError("the model reads one text per row, not pairs")
        return items

    def logits(self, items: list[tuple[str, str | None]]) -> np.ndarray:
        """Logits, a row per (text, second text or None), in order: tokenized as the run read its texts (long
        texts cut or windowed and pooled back), run in length-sorted chunks of CHUNK rows."""
        import torch

        from ..data.tokenize import Tokenize
        from ..evaluation.metrics import pool_windows

        n = len(items)
        encoded = Tokenize(self.tokenizer, self.policy, items[0][1] is not None, None)(
            {"idx": list(range(n)), "pos": list(range(1, n + 1)), "id": [str(i) for i in range(n)],
             "text_a": [a for a, _ in items], "text_b": [b for _, b in items], "label": [None] * n})
        keys = [k for k in ("input_ids", "token_type_ids", "attention_mask") if k in encoded]
        order = np.argsort([len(ids) for ids in encoded["input_ids"]], kind="stable")
        logits, device = [None] * len(order), self.device
        with torch.no_grad():
            for start in range(0, len(order), CHUNK):
                chunk = order[start:start + CHUNK]
                inputs = self.tokenizer.pad({k: [encoded[k][i] for i in chunk] for k in keys}, return_tensors="pt")
                out = self.model(**{k: v.to(device) for k, v in inputs.items()}).logits.float().cpu().numpy()
                for i, row in zip(chunk, out):
                    logits[i] = row
        return pool_windows(np.stack(logits), None, np.asarray(encoded["doc"]), objective_for(self.label_schema),
                            self.policy.pooling)[0]

    def rows(self, logits: np.ndarray, *, raw: bool = False) -> list[dict]:
        """{"label", "probabilities"} (or {"score"}) per row of logits, under the rule unless `raw`."""
        return decided_rows(logits, self.label_schema, self.decision_rule(raw))

    def table_rows(self, ids, logits: np.ndarray, *, raw: bool = False, glue: bool = False) -> list[dict]:
        """Flat rows as prediction files hold them (id, label, prob_<label>..., decision_rule). GLUE's layout
        needs a label on every row: no abstaining there."""
        rule = self.decision_rule(raw)
        return prediction_rows(list(ids), logits, self.label_schema,
                               rule.without_abstain() if glue and rule is not None else rule)

    # -- tokenized data sets and files (every process of a launch takes its share) -----------------------------
    def dataset_logits(self, tokenized, batch_size: int = 64, quiet: bool = True, desc: str = "Predicting"):
        """Logits for a tokenized split (data/tokenize.py), a row per input row in order, gathered over processes."""
        from ..evaluation.inference import predict_logits

        with self._accelerated() as (model, accelerator):
            return predict_logits(model, tokenized, self.tokenizer, accelerator, objective_for(self.label_schema),
                                  batch_size,
                                  quiet, desc, self.policy.pooling)

    @contextlib.contextmanager
    def _accelerated(self):
        """(model, accelerator): the run's own inside a run (or an enclosing call's); otherwise an Accelerator for
        this call, its process state given back afterwards."""
        if self.accelerator is not None:
            yield self._prepared, self.accelerator
            return
        from accelerate import Accelerator

        from ..runtime.process import accelerate_state

        with accelerate_state():
            self.accelerator = Accelerator(cpu=self.device.type == "cpu")
            self._prepared = self.accelerator.prepare(self.model) if self.backend == "pytorch" else self.model
            try:
                yield self._prepared, self.accelerator
            finally:
                self.accelerator = self._prepared = None

    def evaluate(self, data=None, *, raw: bool = False, quiet: bool = True, output: str | None = None,
                 **data_options) -> dict:
        """Metrics (`["eval"]`) and a per-class table (`["per_class"]`) on labeled data — a file, a pandas
        DataFrame, a datasets.Dataset or (texts, labels); or data options as `tuneloop evaluate` takes them; by
        default the validation data recorded with the model — under the saved decision rule unless `raw`."""
        from ..data.memory import as_table
        from ..runtime.process import library_output
        from .evaluate import evaluation

        if data is not None:
            table = as_table(data, "validation")
            data_options["validation_file"] = str(table) if isinstance(table, os.PathLike) else table
        with library_output(quiet):
            return evaluation(self, {**data_options, "quiet": quiet}, output, raw)[0]

"""ONNX: exporting a fine-tuned model (torch.onnx, dynamic batch and sequence axes), int8 dynamic quantization
(ONNX Runtime's `quantize_dynamic`), and running an exported folder through ONNX Runtime behind the same calling
convention as a transformers model (`model(**batch).logits`), so evaluate, predict and serve take either."""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..data.batch import MODEL_INPUTS, model_inputs
from ..layout import ONNX_FILE

OPSET = 17


def is_onnx_folder(folder: str | os.PathLike) -> bool:
    return (Path(folder) / ONNX_FILE).is_file()


class OnnxModel:
    """An ONNX Runtime session that looks like a transformers classification model to tuneloop's inference code:
    called with torch tensors (or numpy arrays), it returns an object with `.logits` (a torch tensor)."""

    training = False

    def __init__(self, folder: str | os.PathLike, threads: int | None = None):
        import onnxruntime as ort

        options = ort.SessionOptions()
        if threads:
            options.intra_op_num_threads = threads
        providers = [p for p in ("CUDAExecutionProvider", "CPUExecutionProvider") if p in ort.get_available_providers()]
        self.session = ort.InferenceSession(str(Path(folder) / ONNX_FILE), options, providers=providers)
        self.input_names = [i.name for i in self.session.get_inputs()]

    def __call__(self, **batch):
        import torch

        feed = {name: np.asarray(value.cpu() if hasattr(value, "cpu") else value, dtype=np.int64)
                for name, value in model_inputs(batch).items() if name in self.input_names}
        logits = self.session.run(["logits"], feed)[0]
        return SimpleNamespace(logits=torch.from_numpy(logits))

    def eval(self):
        return self

    def train(self, mode: bool = True):
        return self


def export_onnx(model, tokenizer, target: str | os.PathLike) -> list[str]:
    """Write `target` (an .onnx file) from a transformers classification model; returns the input names: the
    model inputs (data/batch.MODEL_INPUTS) its tokenizer gives, in that order (the session is fed by name)."""
    import torch

    names = [n for n in MODEL_INPUTS if n in tokenizer.model_input_names]
    example = tokenizer(["a short text", "a somewhat longer second text"], padding=True, return_tensors="pt")
    model = model.eval().float()

    class LogitsOnly(torch.nn.Module):                   # positional inputs → logits: what the graph computes
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, *inputs):
            return self.model(**dict(zip(names, inputs, strict=True))).logits

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")                  # the TorchScript tracer's notes about Python control flow
        torch.onnx.export(LogitsOnly(), tuple(example[n] for n in names), str(target),
                          input_names=names, output_names=["logits"], opset_version=OPSET, dynamo=False,
                          dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in names}, "logits": {0: "batch"}})
    return names


def export_file(model, tokenizer, target: str | os.PathLike, quantize: str | None = None) -> None:
    """`target` (an .onnx file) from a transformers classification model, fp32 or, with quantize="int8", its
    weights quantized (`quantize_int8`)."""
    target = Path(target)
    if quantize != "int8":
        export_onnx(model, tokenizer, target)
        return
    fp32 = target.with_suffix(".fp32.onnx")
    try:
        export_onnx(model, tokenizer, fp32)
        quantize_int8(fp32, target)
    finally:
        fp32.unlink(missing_ok=True)


def quantize_int8(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Dynamic int8 quantization of the weights of MatMul/Gemm (activations quantized at run time), after ONNX
    Runtime's recommended pre-processing (shape inference and graph optimisation). Weights get a scale per output
    channel in 7-bit range (`per_channel`, `reduce_range`): on MiniLM fine-tuned on MRPC, dev F1 0.8741 (PyTorch)
    became 0.8735 this way against 0.8547 per tensor (0.8690 per channel alone), 97.8% identical predictions, at
    1.7x PyTorch's rows/s (per tensor: 1.8x)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from onnxruntime.quantization.shape_inference import quant_pre_process

    from ..runtime.process import root_logger_kept

    prepared = Path(target).with_suffix(".pre.onnx")
    try:
        with root_logger_kept():                # its logging.info() calls would configure the caller's logging
            quant_pre_process(str(source), str(prepared), skip_symbolic_shape=True)
            quantize_dynamic(str(prepared), str(target), weight_type=QuantType.QInt8, per_channel=True,
                             reduce_range=True)
    finally:
        prepared.unlink(missing_ok=True)

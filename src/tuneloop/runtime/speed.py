"""Speed levers that change nothing a user can see but the clock (each measured in benchmarks/).

Levers on a model (nothing outside the model changes):
- `use_fast_dropout(model)`: ATen's CPU `bernoulli_` draws one double per element (~6 ns); a dropout mask cut
  from 16-bit slices of 64-bit random words costs ~1 ns per element and saved 3-10% of a step. The drop
  probability is rounded to a multiple of 1/65536 (0.1 becomes 0.100006); FlashAttention rounds to 1/256. Masks
  come from torch's default generator, so seeding and checkpointed RNG state work as before.

Levers on the process, set for the duration of a run by `SpeedLevers` (a context manager) and restored after it,
also when the run raises:
- TF32 on CUDA GPUs: what autocast leaves in fp32 (and every matmul of an fp32 run) uses the tensor cores'
  TF32 mode, the PyTorch setting NVIDIA and the Trainer's `tf32=True` recommend for Ampere and newer.
- bf16 matmuls: on CPUs with AMX, `--mixed-precision bf16` computes matrix products in bf16 with fp32
  accumulation inside oneDNN and keeps everything else in fp32; measured 6% faster than bf16 autocast (no cast
  kernels, fp32 elementwise work) and 15% faster than fp32 for a MiniLM step at batch 8.
- the glibc heap: glibc returns every freed block over 32 MB (the word-embedding gradient of a BERT is 47 MB)
  to the kernel with munmap, so each training step pays ~10k page faults to get it back; keeping freed memory
  in the heap saved 10-13% of a MiniLM step on a 2-core Xeon. On exit the parameters go back to glibc's
  documented defaults and the free heap is trimmed; glibc has no call that turns its dynamic mmap threshold
  back on once a parameter was set, so that one adaptation stays off afterwards. Skipped when GLIBC_TUNABLES
  sets malloc parameters (the user's choice wins).
- `--attention chunked`: for keys up to 128 tokens, matmul + softmax in cache-sized pieces beat the CPU's fused
  SDPA kernel 1.5-3.9x in evaluation and 2.1-5.9x in training (benchmarks/bench_attention.py). The route is an
  entry for "sdpa" in transformers' `ALL_ATTENTION_FUNCTIONS` mapping (its public dict interface) that sends
  the modules of the models given to `route_attention` through `chunked_attention` and every other model to the
  function it replaced; on exit the mapping is as it was. Models keep `attn_implementation="sdpa"`, so a saved
  model is a plain SDPA model.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import math
import os
import sys
import weakref

import torch

# ---------------------------------------------------------------------------------------------- dropout masks
_THRESHOLD_BASE = -(1 << 15)


def dropout_mask(shape, p: float, device=None) -> torch.Tensor:
    """Boolean keep-mask, True with probability 1 - p (p rounded to a multiple of 2**-16)."""
    n = math.prod(shape)
    # random_() on int64 fills [0, 2**63): the low three 16-bit slices of each word are uniform
    words = torch.empty((n + 2) // 3, dtype=torch.int64, device=device).random_()
    slices = words.view(torch.int16).view(-1, 4)[:, :3].reshape(-1)[:n]
    return (slices >= _THRESHOLD_BASE + round(p * 65536)).view(shape)


def fast_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    if p >= 1.0:
        return x * 0.0
    # a scale tensor in x's dtype: mixed-dtype multiplies (bool * bf16) take ATen's slow unvectorized path
    return x * dropout_mask(x.shape, p, x.device).to(x.dtype).mul_(1.0 / (1.0 - p))


class FastDropout(torch.nn.Dropout):
    """nn.Dropout with the cheap mask; same `p`, same train/eval behaviour, nothing in the state dict."""

    def forward(self, x):
        return fast_dropout(x, self.p, self.training)


def use_fast_dropout(model) -> int:
    """Swap the model's nn.Dropout modules for FastDropout; returns how many were swapped."""
    swapped = 0
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Dropout and child.p > 0:
                setattr(parent, name, FastDropout(child.p, child.inplace))
                swapped += 1
    return swapped


# ---------------------------------------------------------------------------------------------- chunked attention
# Up to this key length the CPU's fused SDPA kernel loses to plain matmul + softmax done in cache-sized pieces
# (benchmarks/bench_attention.py); at 256 and beyond the two are even, and SDPA needs less memory.
CPU_CHUNKED_MAX_KEYS = 128
CPU_CHUNK_SCORES = 2 << 20          # attention scores per piece: 8 MB in fp32, about what stays in cache


def chunked_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                      cheap_masks: bool = True, sdpa=None, **kwargs):
    """transformers' attention-function signature. On CPUs with keys up to 128 long: matmul + softmax in
    cache-sized pieces, dropping attention weights with the cheap mask (`cheap_masks`) or torch's. Longer keys:
    the same math, unpieced, while dropout is due (CPU SDPA falls back to it anyway, with bernoulli_), else
    `sdpa` (transformers' SDPA function by default)."""
    dropout = dropout if module.training else 0.0
    short_on_cpu = query.device.type == "cpu" and key.shape[-2] <= CPU_CHUNKED_MAX_KEYS
    if (dropout == 0.0 and not short_on_cpu) or not plain_attention(module, query, attention_mask, kwargs):
        if sdpa is None:
            from transformers.integrations.sdpa_attention import (
                sdpa_attention_forward as sdpa,
            )
        return sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    if key.shape[1] != query.shape[1]:          # grouped-query attention: share each key/value head
        groups = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    drop = fast_dropout if cheap_masks else (lambda x, p: torch.nn.functional.dropout(x, p, training=p > 0))
    step = query.shape[0]
    if short_on_cpu:
        step = max(1, CPU_CHUNK_SCORES // (query.shape[1] * query.shape[2] * key.shape[2]))
    pieces = [_math_attention(query[i:i + step], key[i:i + step], value[i:i + step],
                              attention_mask if attention_mask is None or attention_mask.shape[0] == 1
                              else attention_mask[i:i + step], scaling, dropout, drop)
              for i in range(0, query.shape[0], step)]
    out = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
    return out.transpose(1, 2).contiguous(), None


def plain_attention(module, query, attention_mask, kwargs: dict) -> bool:
    """Whether this call is plain softmax(QK^T·s + mask)V, all `chunked_attention` computes. Anything else goes to
    the stock SDPA function unchanged: a causal module called without a mask (transformers then relies on SDPA's
    `is_causal`: decoders on unpadded batches), a position bias, a sliding window or sinks without a mask,
    logit soft-capping, a cache."""
    if attention_mask is None and query.shape[2] > 1:
        causal = kwargs.get("is_causal")
        if (getattr(module, "is_causal", True) if causal is None else causal) or kwargs.get("sliding_window"):
            return False
    return all(kwargs.get(name) is None for name in ("position_bias", "softcap", "s_aux", "cache")) and \
        not kwargs.get("output_attentions")


def _math_attention(query, key, value, attention_mask, scaling: float, dropout: float, drop):
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:   # sdpa masks: True = attend
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probs = drop(torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype), dropout)
    return torch.matmul(probs, value)


class _AttentionRoute:
    """The "sdpa" entry of transformers' ALL_ATTENTION_FUNCTIONS while a run goes: routed modules take
    `chunked_attention`, all others the function that was there before."""

    def __init__(self, previous):
        self.previous = previous
        self.modules: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # module -> cheap dropout masks

    def __call__(self, module, *args, **kwargs):
        cheap = self.modules.get(module)
        if cheap is None:
            return self.previous(module, *args, **kwargs)
        return chunked_attention(module, *args, cheap_masks=cheap, sdpa=self.previous, **kwargs)


# ---------------------------------------------------------------------------------------------- the scoped levers
_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4
# glibc's documented defaults (mallopt(3)), given back when a run ends
_GLIBC_DEFAULTS = {_M_MMAP_MAX: 65536, _M_TRIM_THRESHOLD: 128 * 1024, _M_TOP_PAD: 128 * 1024}
_KEPT_HEAP = {_M_MMAP_MAX: 0, _M_TRIM_THRESHOLD: 1 << 30, _M_TOP_PAD: 64 << 20}


def _libc():
    if not sys.platform.startswith("linux") or "malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt, libc.malloc_trim      # musl and other C libraries have neither
        return libc
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def _kept_heap():
    """No mmap for large blocks, no trimming below 1 GiB of free heap, growth 64 MB at a time."""
    libc = _libc()
    applied = libc is not None and all(libc.mallopt(k, v) == 1 for k, v in _KEPT_HEAP.items())
    try:
        yield applied
    finally:
        if applied:
            for k, v in _GLIBC_DEFAULTS.items():
                libc.mallopt(k, v)
            libc.malloc_trim(0)


@contextlib.contextmanager
def _fp32_work(precision: str, backends: list):
    """The fp32 work of `backends` (torch.backends sections with `fp32_precision`) at `precision`; the settings
    before are given back."""
    backends = [b for b in backends if b is not None and hasattr(b, "fp32_precision")]
    before = [b.fp32_precision for b in backends]
    for b in backends:
        b.fp32_precision = precision
    try:
        yield bool(backends)
    finally:
        for b, value in zip(backends, before, strict=True):
            b.fp32_precision = value


def _bf16_matmuls():
    """oneDNN's fp32 matmuls computed in bf16, fp32 accumulation (a run's lever on CPUs)."""
    return _fp32_work("bf16", [getattr(getattr(torch.backends, "mkldnn", None), "matmul", None)])


def _tf32():
    """cuBLAS and cuDNN fp32 work in TF32 (a run's lever)."""
    return _fp32_work("tf32", [torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None)])


def exact_fp32():
    """fp32 work in full fp32 for the `with` block, whatever the process had set (a run's TF32 on a GPU or bf16
    matmuls on a CPU included): how a model's fp32 route computes outside a run, so the precision gate compares and
    times routes against that. An H100 gate inside a run timed 'fp32' at 10,602 rows/s under the run's TF32 and
    kept it over bf16 (8,598), and predict then ran full fp32 at 2,318 rows/s (2026-11-27)."""
    mkldnn = getattr(torch.backends, "mkldnn", None)
    return _fp32_work("ieee", [torch.backends.cuda.matmul, getattr(torch.backends.cudnn, "conv", None),
                               getattr(mkldnn, "matmul", None), getattr(mkldnn, "conv", None)])


@contextlib.contextmanager
def _attention_route():
    from transformers import modeling_utils

    functions = modeling_utils.ALL_ATTENTION_FUNCTIONS
    previous = functions["sdpa"]
    library_default = type(functions)()["sdpa"]      # a fresh interface sees only transformers' own entries
    route = _AttentionRoute(previous)
    functions["sdpa"] = route                          # an instance entry, above the library's own
    try:
        yield route
    finally:
        if previous is library_default:
            del functions["sdpa"]                      # back to the library's entry, exactly as before
        else:
            functions["sdpa"] = previous               # someone else's override stays theirs


class SpeedLevers(contextlib.AbstractContextManager):
    """The levers of a run that touch process-wide state, on for the `with` block and restored after it.
    `applied` says which took effect."""

    def __init__(self, *, bf16_matmuls: bool = False, keep_heap: bool = False, chunked_attention: bool = False,
                 tf32: bool = False):
        self.wanted = {"bf16_matmuls": bf16_matmuls, "keep_heap": keep_heap, "chunked_attention": chunked_attention,
                       "tf32": tf32}
        self.applied: dict[str, bool] = {}
        self._route: _AttentionRoute | None = None
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        makers = {"bf16_matmuls": _bf16_matmuls, "keep_heap": _kept_heap, "chunked_attention": _attention_route,
                  "tf32": _tf32}
        for name, make in makers.items():
            if self.wanted[name]:
                result = self._stack.enter_context(make())
                self.applied[name] = bool(result)
                if name == "chunked_attention":
                    self._route = result
        return self

    def __exit__(self, *exc):
        self._route = None
        return self._stack.__exit__(*exc)

    def route_attention(self, model, cheap_masks: bool) -> bool:
        """Send `model`'s SDPA attention through `chunked_attention` while the levers are on (a model on
        eager attention is left alone); returns whether it is routed."""
        config = getattr(model, "config", None)
        if self._route is None or getattr(config, "_attn_implementation", None) != "sdpa":
            return False
        for module in model.modules():
            self._route.modules[module] = cheap_masks
        return True


# ---------------------------------------------------------------------------------------------- compilation
def dynamo_plugin(mode: str):
    """Accelerate's torch.compile settings for --compile MODE: inductor (aot_eager for a check without code
    generation), compiling each repeated block (a BERT layer) once and reusing it — a twelfth of the compile
    time of a whole bert-base. Shapes: sequence lengths come in buckets (data/batching.length_bucket) and
    torch's automatic dynamic shapes take over once a second length is seen, so a run compiles about twice."""
    from accelerate.utils import TorchDynamoPlugin

    if mode == "aot_eager":
        return TorchDynamoPlugin(backend="aot_eager", use_regional_compilation=True)
    return TorchDynamoPlugin(backend="inductor", mode=mode, use_regional_compilation=True)


def mark_cuda_graph_steps(model, mode: str) -> None:
    """--compile reduce-overhead: each call of the model starts a new CUDA-graph step, so the graphs of one step
    never overwrite tensors another still holds (on an H100 without it, bert-base failed in its first steps with
    "accessing tensor output of CUDAGraphs that has been overwritten by a subsequent run"; torch's own remedy)."""
    import torch

    if mode == "reduce-overhead":
        model.register_forward_pre_hook(lambda module, args: torch.compiler.cudagraph_mark_step_begin())

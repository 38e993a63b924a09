"""CPU speed levers that change nothing a user can see but the clock (each measured in benchmarks/).

- `tune_cpu_allocator`: glibc returns every freed block over 32 MB (the word-embedding gradient of a BERT is
  47 MB) to the kernel with munmap, so each training step pays ~10k page faults to get it back; keeping freed
  memory in the heap saved 10-13% of a MiniLM step on a 2-core Xeon.
- `cpu_bf16_matmuls`: on CPUs with AMX, `--mixed-precision bf16` computes matrix products in bf16 with fp32
  accumulation inside oneDNN and keeps everything else in fp32; measured 6% faster than bf16 autocast (no
  cast kernels, fp32 elementwise work) and 15% faster than fp32 for a MiniLM step at batch 8.
- `install_fast_dropout`: ATen's CPU `bernoulli_` draws one double per element (~6 ns); a dropout mask cut
  from 16-bit slices of 64-bit random words costs ~1 ns per element and saved ~10% of a bf16 step. The drop
  probability is rounded to a multiple of 1/65536 (0.1 becomes 0.100006); FlashAttention rounds to 1/256.
  Masks come from torch's default generator, so seeding and checkpointed RNG state work as before.
- The same install routes the model's attention, on CPUs, through `_attention`: for keys up to 128 tokens,
  matmul + softmax in cache-sized pieces beat the fused SDPA kernel 1.5-3.9x in evaluation and 2.1-5.9x in
  training (benchmarks/bench_attention.py); with dropout due, it draws the cheap mask.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import math
import sys

import torch

log = logging.getLogger("tuneloop")

_M_TRIM_THRESHOLD, _M_TOP_PAD, _M_MMAP_MAX = -1, -2, -4
_allocator_tuned = False


def tune_cpu_allocator() -> bool:
    """Keep freed memory in the process heap (glibc only; a no-op elsewhere). Returns whether it applied."""
    global _allocator_tuned
    if _allocator_tuned:
        return True
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):        # musl and other C libraries have no mallopt
        return False
    # no mmap for large blocks, no trimming below 1 GiB of free heap, grow the heap 64 MB at a time
    ok = mallopt(_M_MMAP_MAX, 0) == 1
    ok = ok and mallopt(_M_TRIM_THRESHOLD, 1 << 30) == 1 and mallopt(_M_TOP_PAD, 64 << 20) == 1
    _allocator_tuned = ok
    return ok


_matmul_precision_before: list[str] = []


def cpu_bf16_matmuls(enabled: bool) -> None:
    """Switch oneDNN's fp32 matmuls to bf16 compute, or back (process-wide: each run sets what it needs, and
    `restore_cpu_matmuls` gives the caller's setting back when a run ends)."""
    mkldnn = getattr(torch.backends, "mkldnn", None)
    if mkldnn is None or not hasattr(getattr(mkldnn, "matmul", None), "fp32_precision"):
        return
    if not enabled:
        restore_cpu_matmuls()
        return
    if not _matmul_precision_before:
        _matmul_precision_before.append(mkldnn.matmul.fp32_precision)
    mkldnn.matmul.fp32_precision = "bf16"


def restore_cpu_matmuls() -> None:
    if _matmul_precision_before:
        torch.backends.mkldnn.matmul.fp32_precision = _matmul_precision_before.pop()


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


ATTENTION_NAME = "tuneloop_sdpa"


# Up to this key length the CPU's fused SDPA kernel loses to plain matmul + softmax done in cache-sized pieces
# (benchmarks/bench_attention.py); at 256 and beyond the two are even, and SDPA needs less memory.
_CPU_MATH_MAX_KEYS = 128
_CPU_MATH_CHUNK = 2 << 20           # attention scores per piece: 8 MB in fp32, about what stays in cache


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """On CPUs with keys up to 128 long: matmul + softmax in cache-sized pieces, with the cheap dropout mask while
    training. Longer keys: the same math, unpieced, while dropout is due (CPU SDPA falls back to it anyway, with
    bernoulli_), else SDPA."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    dropout = dropout if module.training else 0.0
    short_on_cpu = query.device.type == "cpu" and key.shape[-2] <= _CPU_MATH_MAX_KEYS
    if dropout == 0.0 and not short_on_cpu:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=scaling,
                                      **kwargs)
    if key.shape[1] != query.shape[1]:          # grouped-query attention: share each key/value head
        groups = query.shape[1] // key.shape[1]
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    step = query.shape[0]
    if short_on_cpu:
        step = max(1, _CPU_MATH_CHUNK // (query.shape[1] * query.shape[2] * key.shape[2]))
    pieces = [_math_attention(query[i:i + step], key[i:i + step], value[i:i + step],
                              attention_mask if attention_mask is None or attention_mask.shape[0] == 1
                              else attention_mask[i:i + step], scaling, dropout)
              for i in range(0, query.shape[0], step)]
    out = pieces[0] if len(pieces) == 1 else torch.cat(pieces)
    return out.transpose(1, 2).contiguous(), None


def _math_attention(query, key, value, attention_mask, scaling: float, dropout: float):
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:   # sdpa masks: True = attend
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probs = fast_dropout(torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype), dropout)
    return torch.matmul(probs, value)


def _register_attention() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, sdpa_mask

    if ATTENTION_NAME not in ALL_MASK_ATTENTION_FUNCTIONS._global_mapping:
        AttentionInterface.register(ATTENTION_NAME, _attention)
        AttentionMaskInterface.register(ATTENTION_NAME, sdpa_mask)


def install_fast_dropout(model) -> int:
    """Swap the model's nn.Dropout modules for FastDropout and, for an SDPA model that follows transformers'
    attention interface, route its attention through `_attention`. Returns how many modules were swapped."""
    swapped = 0
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if type(child) is torch.nn.Dropout and child.p > 0:
                setattr(parent, name, FastDropout(child.p, child.inplace))
                swapped += 1
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "_attn_implementation", None) == "sdpa" \
            and hasattr(model, "set_attn_implementation"):
        try:
            _register_attention()
            model.set_attn_implementation(ATTENTION_NAME)
        except (ImportError, ValueError, AttributeError) as e:    # older transformers: keep plain SDPA
            log.debug("tuneloop attention not installed: %s", e)
        else:
            swapped += 1 if config._attn_implementation == ATTENTION_NAME else 0
    return swapped


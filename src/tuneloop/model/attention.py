"""Which attention a model runs, decided per architecture. tuneloop's `chunked` (runtime/speed.py: matmul + softmax
in cache-sized pieces, faster than CPU SDPA for keys up to 128) needs a model that calls transformers' attention
interface with SDPA; `sdpa` needs SDPA support; every model has `eager`. `auto` takes the fastest the loaded
architecture supports on this device (chunked on CPUs when not compiling, SDPA, eager) and says which; an explicit
choice the architecture cannot run is a one-line error naming what it can."""

from __future__ import annotations

from ..exceptions import ConfigError


def supported(model_class) -> tuple[str, ...]:
    """The implementations `model_class` (a transformers model class) can run, fastest first."""
    can = []
    if getattr(model_class, "_supports_sdpa", False):
        if getattr(model_class, "_supports_attention_backend", False):
            can.append("chunked")
        can.append("sdpa")
    return (*can, "eager")


def choose(requested: str, model_class, on_cpu: bool, compiled: bool) -> tuple[str, str]:
    """(the implementation to run, why): `requested` is --attention (auto, chunked, sdpa, eager)."""
    can = supported(model_class)
    name = model_class.__name__
    if requested != "auto":
        if requested not in can:
            raise ConfigError(f"--attention {requested}: {name} cannot run it; it supports {', '.join(can)} "
                              "(or leave --attention auto)")
        return requested, "as asked"
    if on_cpu and not compiled and "chunked" in can:
        return "chunked", "auto: fastest on CPUs for short keys"
    if "sdpa" in can:
        return "sdpa", "auto" + (": compiled models keep SDPA" if compiled and "chunked" in can else "")
    return "eager", f"auto: {name} has no SDPA support"

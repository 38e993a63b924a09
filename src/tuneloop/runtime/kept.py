"""What the libraries tuneloop imports set on their first import, given back: a module of the standard library
alone, so that the Python API's calls can enter it before anything imports torch (whose import sets warnings
filters of its own)."""

from __future__ import annotations

import contextlib
import os
import warnings


@contextlib.contextmanager
def imports_kept():
    """The warnings filters and environment variables as they were, on exit: what the libraries tuneloop imports
    set on their first import (accelerate's and numpy's filters, torch's TORCHINDUCTOR_CACHE_DIR, scikit-learn's
    KMP_*) is given back, for the Python API's calls (tuneloop.train, distill) as for a run."""
    with warnings.catch_warnings(), environment_kept(dict(os.environ)):
        yield


@contextlib.contextmanager
def environment_kept(environ: dict):
    """os.environ as `environ` again on exit: variables added since removed, changed ones put back."""
    try:
        yield
    finally:
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        for name, value in environ.items():
            if os.environ.get(name) != value:
                os.environ[name] = value

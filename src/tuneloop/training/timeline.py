"""Where a run's wall time goes: seconds per phase, in the order they first ran (results.json's `timeline`, the
report's "Where the time went"). Phases in the loop (evaluations, model folders, checkpoints) are shown apart from
the training steps; a phase that ran several times adds up."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager


_COUNTED = []           # the start-up belongs to the process's first run: [True] once a run has counted it


def since_import() -> float | None:
    """Seconds since tuneloop's import began (for `tuneloop train`: the imports, the command line and the
    options before the run; in a notebook, everything since the import), for the process's first run only: an
    experiment's second seed, a search's next trial or a notebook's next `train()` had no start-up of its own (the
    time since the import holds the runs before it). Not the process's start: a command that a shell runs last
    under `bash -c "a && b && tuneloop train"` is that shell's process, started before a and b."""
    started = getattr(sys.modules.get("tuneloop"), "_IMPORTED_AT", None)
    if started is None or _COUNTED:
        return None
    _COUNTED.append(True)
    return max(time.perf_counter() - started, 0.0)


class Timeline:
    """`mark(name)`: the time since the last mark (or the start) goes to `name`, less the phases inside it;
    `phase(name)`: the time inside the block goes to `name` (phases do not nest)."""

    def __init__(self):
        self.before_run_s = since_import()
        self.started = self.last = time.perf_counter()
        self.inside = 0.0                 # seconds of phases since the last mark
        self.phases: dict[str, float] = {}

    def add(self, name: str, seconds: float) -> None:
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.add(name, now - self.last - self.inside)
        self.last, self.inside = now, 0.0

    @contextmanager
    def phase(self, name: str):
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            self.add(name, seconds)
            self.inside += seconds

    def to_dict(self) -> dict:
        """{"before_run_s", "run_s" (from the run's start to now), "phases": {name: seconds}}."""
        return {"before_run_s": None if self.before_run_s is None else round(self.before_run_s, 3),
                "run_s": round(time.perf_counter() - self.started, 3),
                "phases": {name: round(seconds, 3) for name, seconds in self.phases.items()}}

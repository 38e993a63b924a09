"""Where a run's wall time goes: seconds per phase, in the order they first ran (results.json's `timeline`, the
report's "Where the time went"). Phases in the loop (evaluations, model folders, checkpoints) are shown apart from
the training steps; a phase that ran several times adds up."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager


def since_process_start() -> float | None:
    """Seconds since this process started (Python's start-up and imports before a run, for `tuneloop train`);
    None where the process's start time cannot be read."""
    try:                   # Linux: both clocks count from boot (psutil's wall-clock start rounds boot to 1 s)
        with open("/proc/self/stat", encoding="ascii") as stat, open("/proc/uptime", encoding="ascii") as uptime:
            ticks = float(stat.read().rsplit(")", 1)[1].split()[19])
            return max(float(uptime.read().split()[0]) - ticks / os.sysconf("SC_CLK_TCK"), 0.0)
    except (OSError, ValueError, IndexError, AttributeError):
        pass
    try:
        import psutil      # Accelerate's dependency

        return max(time.time() - psutil.Process(os.getpid()).create_time(), 0.0)
    except Exception:  # noqa: BLE001 - a missing figure, never a failed run
        return None


class Timeline:
    """`mark(name)`: the time since the last mark (or the start) goes to `name`, less the phases inside it;
    `phase(name)`: the time inside the block goes to `name` (phases do not nest)."""

    def __init__(self):
        self.before_run_s = since_process_start()
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

"""SIGINT/SIGTERM during a run: noted by a handler and acted on by the loop at the next step boundary (save a
checkpoint, then stop), with every process agreeing. Before the run is set up (reading and tokenizing the data,
loading the model) there is nothing to save: a stop ends it at once. The handlers are the run's only while it
goes."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading

import torch

from ..exceptions import Interrupted

log = logging.getLogger("tuneloop")


class StopSignals(contextlib.AbstractContextManager):
    """Installs the handlers on entry (from the main thread only: Python allows no other) and puts the
    previous ones back on exit, also when the run raises. A second Ctrl-C stops at once."""

    def __init__(self):
        self.signal_number, self._previous = 0, {}
        self.armed = False               # arm(): from then on a stop waits for a step boundary and a checkpoint
        self.stopping = "stopping at the end of this step to save a checkpoint"     # what a first stop says

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        return None

    def arm(self) -> None:
        """The run is set up: a stop now saves a checkpoint at the next step boundary (or ends the setfit stage)."""
        self.armed = True

    @contextlib.contextmanager
    def saying(self, stopping: str):
        """While open, a first stop says `stopping` (a stage that saves no checkpoint says so)."""
        before, self.stopping = self.stopping, stopping
        try:
            yield
        finally:
            self.stopping = before

    def _handle(self, signum, frame):
        if not self.armed:                   # nothing trained yet: a stop during 40 s of tokenizing is a stop now
            raise Interrupted("interrupted before training began: nothing was saved to resume; run it again (with "
                              "--overwrite if its --output-dir was created)", signum)
        if self.signal_number and signum == signal.SIGINT:
            raise KeyboardInterrupt          # a second Ctrl-C: stop now, no checkpoint
        self.signal_number = signum
        log.warning(f"{self.stopping} (Ctrl-C again to stop at once)")

    def how_to_resume(self, config, step: int, saved, output_dir, num_processes: int = 1) -> str:
        """The one line a run stopped by a signal ends with, after its checkpoint: how to resume it (a distilled
        student through `tuneloop distill`, whose resume reuses the teacher's outputs); a run of several processes
        under the launcher that started it, with as many (a checkpoint resumes with the processes it was saved
        by: checkpoint.check_resumable)."""
        message = self._resume_line(config, step, saved, output_dir, num_processes)
        log.info(message, extra={"console": False})   # train.log's last line too (the console's is the error's)
        return message

    @staticmethod
    def _resume_line(config, step: int, saved, output_dir, num_processes: int) -> str:
        command = "distill" if config.teacher else "train"
        if num_processes > 1:
            return (f"interrupted at step {step}; checkpoint saved in {saved} by {num_processes} processes. Resume "
                    f"under the same launcher with {num_processes} processes (e.g. accelerate launch --num_processes "
                    f"{num_processes} -m tuneloop {command} ... --output-dir {output_dir} --resume; in Python: "
                    f"tuneloop.{command}(..., output_dir={str(output_dir)!r}, resume='latest') in the launched "
                    "script)")
        return (f"interrupted at step {step}; checkpoint saved in {saved}. Resume with: tuneloop {command} "
                f"--output-dir {output_dir} --resume (in Python: tuneloop.{command}(..., "
                f"output_dir={str(output_dir)!r}, resume='latest'))")

    def received(self, accelerator) -> int:
        """The signal any process received (0 for none): one process saw it, all stop."""
        if accelerator.num_processes == 1:
            return self.signal_number
        flag = torch.tensor([self.signal_number], device=accelerator.device)
        return int(accelerator.gather(flag).max())

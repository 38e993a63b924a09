"""A run's own log: every message tuneloop gives during a training run (INFO and up, whatever `--quiet` lets onto
the console) written to OUT/train.log with its time, and the run's warnings kept for results.json (`warnings`).
Messages from before the run folder exists (reading the data, loading the model) are held and written first; a
resumed run appends. Progress bars are the console's only; the step lines every --log-every steps are here."""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
from pathlib import Path

from ..layout import LOG_FILE

MAX_WARNINGS = 100            # results.json lists at most this many (a warning per step would not help anyone)
_ACTIVE: list["RunLog"] = []  # the runs in progress in this process, innermost last (an experiment's runs nest)


class RunLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(message)s", "%Y-%m-%d %H:%M:%S"))
        self.held: list[str] = []
        self.file = None
        self.warnings: list[str] = []
        self.more_warnings = 0

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            if record.levelno >= logging.WARNING:
                if len(self.warnings) < MAX_WARNINGS:
                    self.warnings.append(record.getMessage())
                else:
                    self.more_warnings += 1
            if self.file is None:
                self.held.append(line)
            else:
                self.file.write(line + "\n")
                self.file.flush()                 # a crash or a kill leaves every line said so far
        except Exception:  # noqa: BLE001 - logging must not end a run (a full disk is the run's to say)
            self.handleError(record)

    def open(self, folder: Path, resumed: bool) -> None:
        self.file = open(Path(folder) / LOG_FILE, "a" if resumed else "w", encoding="utf-8")   # noqa: SIM115
        if resumed:
            self.file.write(f"--- resumed {dt.datetime.now().isoformat(sep=' ', timespec='seconds')} ---\n")
        self.file.writelines(line + "\n" for line in self.held)
        self.file.flush()
        self.held = []

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None
        super().close()


@contextlib.contextmanager
def capturing(logger: logging.Logger):
    """A RunLog on `logger` for the block (the run's), removed and closed after."""
    handler = RunLog()
    logger.addHandler(handler)
    _ACTIVE.append(handler)
    try:
        yield handler
    finally:
        _ACTIVE.remove(handler)
        logger.removeHandler(handler)
        handler.close()


def write_into(folder: Path, resumed: bool) -> None:
    """From now on the current run's messages go to FOLDER/train.log (the held ones first); the main process's."""
    if _ACTIVE:
        _ACTIVE[-1].open(folder, resumed)


def warnings() -> list[str]:
    """The current run's warnings so far, for results.json (the ones past MAX_WARNINGS counted in the last line)."""
    if not _ACTIVE:
        return []
    run = _ACTIVE[-1]
    return run.warnings + ([f"... and {run.more_warnings} more warnings (train.log has them)"]
                           if run.more_warnings else [])

"""Everything process-wide that a run (or an evaluate/predict command) changes, set for it and given back after
it, also when it raises: the libraries' logging verbosity and progress bars, tuneloop's console handler, the
random number generators, Accelerate's state singletons and the speed levers (speed.SpeedLevers). A notebook
that trains twice, or trains and then does its own work, finds its process as it left it."""

from __future__ import annotations

import contextlib
import logging
import os
import random
import sys

import numpy as np
import torch

from . import folder_lock, machine, speed
from .kept import imports_kept
from .machine import interactive

log = logging.getLogger("tuneloop")
# libraries whose INFO/WARNING chatter (load reports, advisory warnings) stays off tuneloop's console
_CHATTY = ("accelerate", "torch.distributed", "torch._dynamo", "filelock", "urllib3", "httpx", "huggingface_hub")


@contextlib.contextmanager
def library_output(quiet: bool, data: bool = True):
    """transformers and datasets at error level and without weight-loading bars; `quiet`, or a stderr that is
    not a terminal, also hides the tokenization bars. Tokenizers keep their parallelism (and do not warn when a
    DataLoader forks). `data=False` (loading or using a model, no data set read): datasets is neither imported
    nor touched. What the libraries set on their first import is given back too: the warnings filters
    (accelerate's, sympy's) and environment variables (torch's TORCHINDUCTOR_CACHE_DIR, scikit-learn's KMP_*)."""
    with imports_kept():                      # os.environ as it was on exit: TOKENIZERS_PARALLELISM below too
        import transformers

        t_logging = transformers.logging
        before = (t_logging.get_verbosity(), t_logging.is_progress_bar_enabled(),
                  {n: logging.getLogger(n).level for n in _CHATTY})
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "true")
        t_logging.set_verbosity_error()
        t_logging.disable_progress_bar()
        for name in _CHATTY:
            logging.getLogger(name).setLevel(logging.ERROR)
        try:
            with (datasets_output(quiet) if data else contextlib.nullcontext()):
                yield
        finally:
            t_verbosity, t_bars, levels = before
            t_logging.set_verbosity(t_verbosity)
            (t_logging.enable_progress_bar if t_bars else t_logging.disable_progress_bar)()
            for name, level in levels.items():
                logging.getLogger(name).setLevel(level)


@contextlib.contextmanager
def datasets_output(quiet: bool):
    """datasets at error level; its bars hidden when `quiet` or stderr is not a terminal; given back after."""
    import datasets

    d_logging = datasets.logging
    before = (d_logging.get_verbosity(), datasets.are_progress_bars_disabled())
    d_logging.set_verbosity_error()
    (datasets.disable_progress_bars if quiet or not interactive() else datasets.enable_progress_bars)()
    try:
        yield
    finally:
        d_logging.set_verbosity(before[0])
        (datasets.disable_progress_bars if before[1] else datasets.enable_progress_bars)()


@contextlib.contextmanager
def console_logging(quiet: bool, run_log: bool = False):
    """tuneloop's messages on stderr, plain (INFO, or WARNING with `quiet`); with `run_log`, every INFO message
    also to the run's own log (runtime/run_log.py: OUT/train.log, results.json's warnings); the logger's own
    set-up after."""
    from . import run_log as run_logs

    before = (list(log.handlers), log.level, log.propagate)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(logging.WARNING if quiet else logging.INFO)
    handler.addFilter(lambda record: getattr(record, "console", True)     # e.g. progress lines beside a bar
                      # one process speaks: a launch's others print none of its notes or warnings (errors: cli/main)
                      and (record.levelno >= logging.ERROR or is_main_process()))
    log.handlers[:] = [handler]
    log.setLevel(logging.INFO if run_log or not quiet else logging.WARNING)
    log.propagate = False
    try:
        with run_logs.capturing(log) if run_log else contextlib.nullcontext():
            yield
    finally:
        log.handlers[:], log.level, log.propagate = before[0], before[1], before[2]


@contextlib.contextmanager
def notes_said_once():
    """Within console_logging: tuneloop's notes and warnings held back while the same data is read again (the
    export's gate reads the validation rows for the exported model after the source's); errors still pass."""
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


@contextlib.contextmanager
def root_logger_kept():
    """For a library call that logs through the module-level `logging.info()` (ONNX Runtime's quantizer does):
    with no handler on the root logger, that call runs `logging.basicConfig()`, which leaves a handler the caller
    never asked for, after which the caller's own `basicConfig()` does nothing. Meanwhile the root holds a
    NullHandler, removed after; a root that has handlers is left alone."""
    root = logging.getLogger()
    guard = None if root.handlers else logging.NullHandler()
    if guard is not None:
        root.addHandler(guard)
    try:
        yield
    finally:
        if guard is not None:
            root.removeHandler(guard)


@contextlib.contextmanager
def random_states():
    """The Python, NumPy and torch random streams as they were before (a run seeds them all)."""
    saved = (random.getstate(), np.random.get_state(), torch.random.get_rng_state(),
             torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None)
    try:
        yield
    finally:
        random.setstate(saved[0])
        np.random.set_state(saved[1])
        torch.random.set_rng_state(saved[2])
        if saved[3] is not None:
            torch.cuda.set_rng_state_all(saved[3])


def reset_accelerate_state() -> None:
    """Accelerate keeps precision and accumulation settings in process-wide singletons; a run must neither
    inherit an earlier one's nor leave its own behind. The process group (several processes) is kept."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=False)
    GradientState._reset_state()


def settle_processes(accelerator) -> None:
    """Before a process group's collectives are let go (accelerate's end of training; a prediction's prepared DDP
    model dropped): a barrier and, with several processes on gloo, a moment with the GIL released. gloo's worker
    thread drops the last collective's work (and the Python tensors an earlier one holds) only after wait() has
    returned, and needs the GIL for that; if the main thread is already inside the process group's or DDP reducer's
    destructor (GIL held, joining that thread), they wait forever or the process aborts ("terminate called without
    an active exception"). Seen here as a non-main process hanging after a run, and aborting after `predict`."""
    import time

    accelerator.wait_for_everyone()
    if accelerator.num_processes > 1:
        time.sleep(0.2)


RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK", "PMI_RANK")   # torchrun, accelerate, mpirun


def process_rank() -> int:
    """This process's number in the launch (0 in one process): Accelerate's, once its state is set up; before that
    the launcher's environment (what Accelerate reads), so a command knows it before any Accelerator exists."""
    accelerate_state = sys.modules.get("accelerate.state")
    if accelerate_state is not None and accelerate_state.PartialState._shared_state:
        return accelerate_state.PartialState().process_index
    return next((int(os.environ[name]) for name in RANK_VARIABLES if os.environ.get(name, "").isdigit()), 0)


def is_main_process() -> bool:
    """The process that prints and writes (the only one without a launcher)."""
    return process_rank() == 0


_group_users = 0          # process_group_kept scopes open: the runs inside them leave the process group up


@contextlib.contextmanager
def process_group_kept():
    """Around a command that trains several runs in the same processes (an experiment's seeds or folds, a search's
    trials, a distillation's student and labels-only runs): each run's end (end_process_group) leaves the process
    group up for the next; the outermost scope's normal end takes it down, once, so the processes exit cleanly (a
    raise leaves it, as a failed run's does)."""
    global _group_users
    _group_users += 1
    try:
        yield
    finally:
        _group_users -= 1
    end_process_group()


def end_process_group() -> None:
    """The last barrier (settle_processes), then the process group destroyed, as accelerate's end_training does;
    nothing within process_group_kept (the caller's next run needs the group), nor where no group was set up."""
    import torch.distributed as dist

    if _group_users or not (dist.is_available() and dist.is_initialized()):
        return
    from accelerate import PartialState

    state = PartialState()
    settle_processes(state)
    state.destroy_process_group()


def main_process_first(accelerator, read):
    """`read()` on the main process, then on the others (they reuse its cache), as accelerate's main_process_first;
    but where it raises on the main process, every process raises (a TuneloopError as it is, other errors as one
    that says so): the others would otherwise wait for it at the barrier, then die on its closed connection with a
    traceback of their own."""
    if accelerator.num_processes == 1:
        return read()
    from accelerate.utils import broadcast_object_list

    from ..exceptions import TuneloopError

    failed = [None]
    if accelerator.is_main_process:
        try:
            result = read()
        except BaseException as error:
            failed[0] = error
    shared = [portable_error(failed[0])]
    broadcast_object_list(shared, from_process=0)       # the others wait here, as at the barrier
    if failed[0] is not None:
        raise failed[0]
    if isinstance(shared[0], TuneloopError):
        raise shared[0]
    if shared[0] is not None:                   # the main process's traceback says it: this one says nothing more
        error = TuneloopError(f"the main process stopped with {shared[0]}")
        error.said_by_main = True
        raise error
    return result if accelerator.is_main_process else read()


def portable_error(error: BaseException | None):
    """`error` as it can travel to the other processes: a TuneloopError that pickles as itself; else its text."""
    import pickle

    from ..exceptions import TuneloopError

    if error is None:
        return None
    if isinstance(error, TuneloopError):
        try:
            return pickle.loads(pickle.dumps(error))
        except Exception:  # noqa: BLE001 - an error class whose arguments are not its message
            return TuneloopError(str(error))
    return f"{type(error).__name__}: {error}"


@contextlib.contextmanager
def accelerate_state():
    reset_accelerate_state()
    try:
        yield
    finally:
        reset_accelerate_state()


@contextlib.contextmanager
def command_scope(quiet: bool, data: bool = True):
    """For `tuneloop evaluate` / `predict` / `export` and their Python functions: tuneloop's notes on stderr as a
    run's are (which columns or sheet a file was read by, rows left out; only warnings with `quiet`). `data=False`
    (a command that reads no data set and starts no Accelerator: `predict` in one process): neither datasets nor
    accelerate is imported."""
    with library_output(quiet, data), console_logging(quiet), \
            (accelerate_state() if data else contextlib.nullcontext()):
        yield


@contextlib.contextmanager
def run_scope(config):
    """For a training run; yields the run's speed.SpeedLevers (route a model's attention through them)."""
    on_cpu = machine.runs_on_cpu(config.cpu)
    levers = speed.SpeedLevers(bf16_matmuls=on_cpu and config.mixed_precision == "bf16", keep_heap=on_cpu,
                               chunked_attention=config.attention == "chunked" or (
                                   config.attention == "auto" and on_cpu and not config.compiled),
                               tf32=machine.runs_on_cuda(config.cpu))
    with library_output(config.quiet), console_logging(config.quiet, run_log=not config.dry_run), random_states(), \
            accelerate_state(), folder_lock.holding(), levers:
        yield levers

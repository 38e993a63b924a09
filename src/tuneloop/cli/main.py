"""`tuneloop COMMAND`: parse, dispatch to cli/commands.py, and turn user errors into one line and exit code 2."""

from __future__ import annotations

import contextlib
import os
import sys
from datetime import timedelta

from ..exceptions import Interrupted, TuneloopError
from . import commands
from .parsers import build_parser

EXIT_USER_ERROR = 2


COMMANDS = {"train": commands.cmd_train, "search": commands.cmd_search, "report": commands.cmd_report,
            "env": commands.cmd_env, "evaluate": commands.cmd_evaluate, "predict": commands.cmd_predict,
            "tasks": commands.cmd_tasks, "inspect": commands.cmd_inspect, "export": commands.cmd_export,
            "serve": commands.cmd_serve, "distill": commands.cmd_distill}
TRAINING = ("train", "search", "distill")           # commands that take the on_step hook


def main(argv: list[str] | None = None, *, on_step=None) -> int:
    """The `tuneloop` command; `on_step(state)` is passed to training runs (a hook for tests and tools)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    full = "--help-all" in argv
    parser = build_parser(full_help=full)
    with main_speaks():                 # every process parses the same flags: one says what is wrong with them
        ns = parser.parse_args(["--help" if a == "--help-all" else a for a in argv] if full else argv)
        if not ns.command:
            parser.print_help()
            return EXIT_USER_ERROR
    try:
        if ns.command in TRAINING:
            return COMMANDS[ns.command](ns, on_step)
        return COMMANDS[ns.command](ns)
    except Interrupted as e:
        say_once(f"tuneloop {ns.command}: {e}", e)
        return 128 + e.signal_number
    except TuneloopError as e:
        say_once(f"tuneloop {ns.command}: error: {e}", e)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        say_once("tuneloop: interrupted")
        return 130


@contextlib.contextmanager
def main_speaks():
    """Under a launcher, the other processes' standard output and error go nowhere meanwhile."""
    from ..runtime.process import is_main_process

    if is_main_process():
        yield
        return
    with open(os.devnull, "w") as nowhere, contextlib.redirect_stdout(nowhere), contextlib.redirect_stderr(nowhere):
        yield


SAID_WAIT_S = 5.0        # how long another process waits to hear whether the main process said the same line
_said = [0]              # lines said so far in this process: each process's n-th names the same key


def say_once(line: str, error: BaseException | None = None) -> None:
    """A launch's error line on stderr once, from the main process, not from each: the others say theirs only
    where the main process did not say the same line (a failure on that process alone: its own data, a file
    missing on its machine), found through the process group's store; before the group is set up every process
    fails alike (options, files), and the first process of each further machine speaks. An error the main
    process's own said for it (`said_by_main`) is not said again."""
    from ..runtime.process import is_main_process, process_rank

    _said[0] += 1
    key, store = f"tuneloop/said/{_said[0]}", _group_store()
    if is_main_process():
        if store is not None:
            try:
                store.set(key, line)
            except Exception:  # noqa: BLE001 - the line is said here in any case
                pass
        print(line, file=sys.stderr)
        return
    if getattr(error, "said_by_main", False):
        return
    if store is None:
        if os.environ.get("LOCAL_RANK", "0") == "0":
            print(f"{line} (process {process_rank()})", file=sys.stderr)
        return
    try:
        store.wait([key], timedelta(seconds=SAID_WAIT_S))
        said = store.get(key).decode()
    except Exception:  # noqa: BLE001 - the main process said nothing (or is gone): say it here
        said = None
    if said != line:
        print(f"{line} (process {process_rank()})", file=sys.stderr)


def _group_store():
    """The process group's key-value store (the launcher's), or None without a group."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    try:
        return dist.distributed_c10d._get_default_store()
    except Exception:  # noqa: BLE001 - a private accessor: without it, every process says its own line
        return None


if __name__ == "__main__":
    raise SystemExit(main())

"""`tuneloop COMMAND`: parse, dispatch to cli/commands.py, and turn user errors into one line and exit code 2."""

from __future__ import annotations

import sys

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
    ns = parser.parse_args(["--help" if a == "--help-all" else a for a in argv] if full else argv)
    if not ns.command:
        parser.print_help()
        return EXIT_USER_ERROR
    try:
        if ns.command in TRAINING:
            return COMMANDS[ns.command](ns, on_step)
        return COMMANDS[ns.command](ns)
    except Interrupted as e:
        print(f"tuneloop {ns.command}: {e}", file=sys.stderr)
        return 128 + e.signal_number
    except TuneloopError as e:
        print(f"tuneloop {ns.command}: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("tuneloop: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())

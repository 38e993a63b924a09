"""The command line: parsers (one function per command), commands, dispatch, `tuneloop env`."""

from .main import main
from .parsers import build_parser

__all__ = ["build_parser", "main"]

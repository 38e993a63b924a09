"""A text data file's lines as str: decompressed when its name says so (`.gz`, `.bz2`, `.xz`, a `.zip` holding one
file), UTF-8 with its byte-order mark dropped or UTF-16 after its mark, and lines ended by a line feed, a carriage
return and line feed (Windows), or a bare carriage return (classic Mac OS, Excel for Mac's "CSV (Macintosh)")."""

from __future__ import annotations

import codecs
import contextlib
import importlib
import io
import re
from pathlib import Path
from typing import Iterator

from ..exceptions import DataError

_BARE_CR = re.compile(r"(?<=\r)(?!\n)")     # after a carriage return that no line feed follows: a line's end


def zip_member(path: str):
    """The one data file a .zip holds (macOS's __MACOSX/ entries and folders aside); DataError otherwise."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            members = [m for m in archive.infolist() if not m.is_dir() and not m.filename.startswith("__MACOSX/")]
    except (zipfile.BadZipFile, OSError) as e:
        raise DataError(f"{path}: not a readable zip file ({e})") from None
    if len(members) != 1:
        raise DataError(f"{path}: a zip of data must hold one file, it holds {len(members)} "
                        f"({', '.join(m.filename for m in members[:4])}); unpack it and give the file")
    return members[0]


@contextlib.contextmanager
def open_bytes(path: str):
    """The file's bytes, decompressed when its name says so (a .zip must hold exactly one file); closed after."""
    suffix = Path(path).suffix.lower()
    if suffix == ".zip":
        import zipfile

        with zipfile.ZipFile(path) as archive, archive.open(zip_member(path)) as f:
            yield f
        return
    opener = {".gz": "gzip", ".bz2": "bz2", ".xz": "lzma"}.get(suffix) if len(Path(path).suffixes) > 1 else None
    with (importlib.import_module(opener).open(path, "rb") if opener else open(path, "rb")) as f:  # noqa: SIM115
        yield f


def decoded_lines(path: str) -> Iterator[str]:
    """Lines of a text file as str, byte-order mark dropped, non-UTF-8 bytes reported with their line. A file
    that starts with UTF-16's byte-order mark (Excel's "Unicode Text", Windows PowerShell's `>`) is read as UTF-16.
    A file whose first line holds a carriage return that no line feed follows has lines ended so (classic Mac OS):
    it is split there, its every line kept with its ending, as the csv module reads them."""
    with open_bytes(path) as f:
        try:
            if f.peek(2)[:2] in (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE):
                yield from _utf16_lines(path, f)
                return
            number, bare = 0, False                      # number: the lines yielded so far
            for raw in f:
                if number == 0 and raw.startswith(codecs.BOM_UTF8):
                    raw = raw[len(codecs.BOM_UTF8):]
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    before = raw[:e.start]               # in a file of bare carriage returns: its lines too
                    split = bare or number == 0
                    line = number + 1 + (before.count(b"\r") - before.count(b"\r\n") if split else 0)
                    column = e.start - before.rfind(b"\r") if split else e.start + 1
                    raise DataError(f"{path}: line {line}: bytes that are not UTF-8 ({raw[e.start:e.start + 4]!r} "
                                    f"at character {column}); re-save the file as UTF-8") from None
                if number == 0:
                    bare = any(m.start() < len(text) for m in _BARE_CR.finditer(text))
                for piece in _BARE_CR.split(text) if bare else (text,):
                    if piece:
                        number += 1
                        yield piece
        except (OSError, EOFError) as e:              # gzip's BadGzipFile is an OSError; lzma's and bz2's too
            raise DataError(f"{path}: cannot be decompressed ({e}); check the file") from None


def _utf16_lines(path: str, f) -> Iterator[str]:
    text = io.TextIOWrapper(f, encoding="utf-16", newline="")     # the mark says the byte order and is dropped
    number = 0
    try:
        for number, line in enumerate(text, 1):
            yield line
    except UnicodeDecodeError:
        raise DataError(f"{path}: line {number + 1}: not valid UTF-16 text (the file starts with UTF-16's byte-order "
                        "mark); re-save the file as UTF-8") from None
    finally:
        text.detach()                                  # _open_bytes closes the file

"""MkDocs hooks (mkdocs.yml → hooks):

* `cli.md` is generated at build time from the argparse parser (`tuneloop <command> --help` of every command),
  so the CLI reference cannot drift from the code;
* repository files the pages link to with a relative path out of docs/ (benchmark results, configs, sources) are
  published with the site under `repo/`, and those links point there: they work on GitHub and in the built site.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(\]\()([^)\s#]+)([^)]*\))")
REPO_PREFIX = "repo/"


def cli_reference() -> str:
    from tuneloop.cli.parsers import build_parser

    parser = build_parser(full_help=True)      # every option, as `tuneloop train --help-all` prints
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    out = ["# CLI reference", "",
           "Generated from the parser (`src/tuneloop/cli/parsers.py`) when the site is built: each section is what "
           "`tuneloop COMMAND --help` prints.", "",
           "```text", parser.format_help().rstrip(), "```", ""]
    for name, p in sub.choices.items():
        out += [f"## tuneloop {name}", "", "```text", p.format_help().rstrip(), "```", ""]
    return "\n".join(out)


def _repo_target(page_src_uri: str, url: str) -> str | None:
    """The repository path a relative link from a docs page points to, when it leaves docs/ and names a file."""
    if "://" in url or url.startswith(("/", "mailto:")):
        return None
    path = posixpath.normpath(posixpath.join("docs", posixpath.dirname(page_src_uri), url))
    if path.startswith("docs/") or path.startswith(".."):
        return None
    return path if (ROOT / path).is_file() else None


def on_files(files, config):
    files.append(File.generated(config, "cli.md", content=cli_reference()))
    published = set()
    for f in list(files):
        if f.src_uri.endswith(".md") and f.abs_src_path:
            for _, url, _ in LINK.findall(Path(f.abs_src_path).read_text(encoding="utf-8")):
                target = _repo_target(f.src_uri, url)
                if target and target not in published:
                    published.add(target)
                    files.append(File.generated(config, REPO_PREFIX + target, abs_src_path=str(ROOT / target)))
    return files


def on_page_markdown(markdown, page, config, files):
    def relink(m):
        target = _repo_target(page.file.src_uri, m.group(2))
        if not target:
            return m.group(0)
        rel = posixpath.relpath(REPO_PREFIX + target, posixpath.dirname(page.file.src_uri) or ".")
        return m.group(1) + rel + m.group(3)

    return LINK.sub(relink, markdown)

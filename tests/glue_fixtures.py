"""Small files in each GLUE task's exact distribution layout, with a learnable keyword signal."""

from __future__ import annotations

import random
from pathlib import Path

from conftest import sentence

KEYWORDS = ["alpha", "beta", "gamma"]


def _row_label(rng, names):
    k = rng.randrange(len(names))
    words = sentence(rng).split()
    words.insert(rng.randint(0, len(words)), KEYWORDS[k])
    return k, " ".join(words)


def _write(path: Path, lines: list[str], bom: bool = False) -> None:
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + data)


def write_glue_task(task: str, folder: Path, n_train: int = 48, n_dev: int = 21, n_test: int = 10, seed: int = 0):
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    if task == "cola":
        for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):       # no header line
            rows = []
            for i in range(n):
                k, text = _row_label(rng, [0, 1])
                rows.append(f"gj04\t{k}\t{'' if k else '*'}\t{text}")
            _write(folder / name, rows)
        _write(folder / "test.tsv", ["index\tsentence"] + [f"{i}\t{sentence(rng)}" for i in range(n_test)])
    elif task == "sst2":
        for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):
            rows = ["sentence\tlabel"]
            for _ in range(n):
                k, text = _row_label(rng, [0, 1])
                rows.append(f"{text}\t{k}")
            _write(folder / name, rows)
        _write(folder / "test.tsv", ["index\tsentence"] + [f"{i}\t{sentence(rng)}" for i in range(n_test)])
    elif task == "qqp":
        for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):
            rows = ["id\tqid1\tqid2\tquestion1\tquestion2\tis_duplicate"]
            for i in range(n):
                k, text = _row_label(rng, [0, 1])
                rows.append(f"{i}\t{2 * i}\t{2 * i + 1}\t{sentence(rng)}?\t{text}?\t{k}")
            _write(folder / name, rows)
        _write(folder / "test.tsv", ["id\tquestion1\tquestion2"] +
               [f"{i}\t{sentence(rng)}?\t{sentence(rng)}?" for i in range(n_test)])
    elif task == "stsb":
        head = "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\tsentence2"
        for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):
            rows = [head + "\tscore"]
            for i in range(n):
                k, text = _row_label(rng, [0, 1, 2])
                score = [0.2, 2.5, 4.8][k] + rng.uniform(-0.2, 0.2)
                rows.append(f"{i}\tmain-news\tMSRvid\t2012test\t{i:04d}\tnone\tnone\t{sentence(rng)}\t{text}\t"
                            f"{score:.3f}")
            _write(folder / name, rows)
        _write(folder / "test.tsv", [head] + [f"{i}\tmain-news\tMSRvid\t2012test\t{i:04d}\tnone\tnone\t"
                                              f"{sentence(rng)}\t{sentence(rng)}" for i in range(n_test)])
    elif task == "mnli":
        names = ["entailment", "neutral", "contradiction"]
        base = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\t"
                "sentence2_parse\tsentence1\tsentence2")

        def rows_for(n, n_annot):
            rows = [base + "".join(f"\tlabel{j + 1}" for j in range(n_annot)) + "\tgold_label"]
            for i in range(n):
                k, text = _row_label(rng, names)
                premise = sentence(rng)
                rows.append(f"{i}\t{i}\t{i}e\tfiction\t( {premise} )\t( {text} )\t(ROOT {premise})\t(ROOT {text})\t"
                            f"{premise}\t{text}" + f"\t{names[k]}" * n_annot + f"\t{names[k]}")
            return rows

        _write(folder / "train.tsv", rows_for(n_train, 1))
        _write(folder / "dev_matched.tsv", rows_for(n_dev, 5))
        _write(folder / "dev_mismatched.tsv", rows_for(n_dev - 4, 5))
        for name in ("test_matched.tsv", "test_mismatched.tsv"):
            _write(folder / name, [base] + [f"{i}\t{i}\t{i}e\tfiction\t()\t()\t()\t()\t{sentence(rng)}\t"
                                            f"{sentence(rng)}" for i in range(n_test)])
    elif task in ("qnli", "rte", "wnli"):
        cols = ("question", "sentence") if task == "qnli" else ("sentence1", "sentence2")
        names = ["entailment", "not_entailment"] if task != "wnli" else ["0", "1"]
        for name, n in (("train.tsv", n_train), ("dev.tsv", n_dev)):
            rows = [f"index\t{cols[0]}\t{cols[1]}\tlabel"]
            for i in range(n):
                k, text = _row_label(rng, names)
                rows.append(f"{i}\t{sentence(rng)}\t{text}\t{names[k]}")
            _write(folder / name, rows)
        _write(folder / "test.tsv", [f"index\t{cols[0]}\t{cols[1]}"] +
               [f"{i}\t{sentence(rng)}\t{sentence(rng)}" for i in range(n_test)])
    elif task == "ax":
        _write(folder / "diagnostic.tsv", ["index\tsentence1\tsentence2"] +
               [f"{i}\t{sentence(rng)}\t{sentence(rng)}" for i in range(n_test)])
    elif task == "mrpc":
        from conftest import write_mrpc_folder
        write_mrpc_folder(folder, n_train, n_dev, n_test, seed)
    else:
        raise KeyError(task)
    return folder

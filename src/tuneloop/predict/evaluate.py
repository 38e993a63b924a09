"""A saved model on data sets and files, through its `Classifier`: `tuneloop evaluate` (metrics on a labeled split,
the run's own by default) and `tuneloop predict --input FILE`. The model's text columns, labels and data come from
its tuneloop.json, so no option has to be repeated; a plain save_pretrained folder works too."""

from __future__ import annotations

import logging
import typing

import numpy as np

from .. import tasks
from ..atomic import atomic_write_json, check_place, same_file
from ..config.data_options import DataOptions
from ..config.fields import need
from ..config.parsing import coerce, field_type
from ..config.options import default, with_trait
from ..data.columns import detect_columns, named
from ..data.prepare import prepare_data
from ..data.readers import file_columns
from ..data.sources import canonical_rows
from ..decision.fit import decided_metrics
from ..exceptions import ConfigError, DataError
from ..layout import METADATA_FILE, RUN_MARKER, RUN_OUTPUTS, SPLIT_FILE
from ..sheets import data_file, is_data_file
from .rows import STDOUT, check_output_name, keep_columns, say_formula_texts, with_input, write_predictions

FILE_CHUNK = 50_000          # rows of a file read, tokenized and predicted at a time


def check_output(output: str, file: bool = True) -> None:
    """Refuse an --output that is one of a run's own outputs (results.json, predictions/, ...: it would replace
    it, and the run's --overwrite would delete it) or lies in a saved model's folder (config.json replaced by
    metrics left the model unloadable), or that cannot be written (atomic.check_place: a file where a folder of it
    would be made, a folder this user may not write in, a folder itself where `file`: not export's, a folder). For
    Python callers too: said before any row is read."""
    from pathlib import Path

    check_place(output, "--output")
    if file and Path(output).is_dir():          # os.replace onto it fails after the work is done
        raise ConfigError(f"--output {output}: is a folder; give the name of a file to write (one in it, say)")
    target = Path(output).resolve()
    for folder in target.parents:
        if (folder / METADATA_FILE).is_file():
            raise ConfigError(f"--output {output}: is in the saved model folder {folder}, which tuneloop writes "
                              "whole (its files replaced, anything else dropped when it is saved again); choose a "
                              "place outside it")
        parts = target.relative_to(folder).parts
        if (folder / RUN_MARKER).is_file() and parts[0] in RUN_OUTPUTS:
            what = f"in the run's own {parts[0]}/ folder" if len(parts) > 1 else f"the run's own {parts[0]}"
            raise ConfigError(f"--output {output}: is {what} in {folder}, which tuneloop writes (and --overwrite "
                              "clears); choose another name")


def data_config_for(clf, overrides: dict, tables: dict | None = None) -> DataOptions:
    """Data options for evaluate: what the run recorded next to the model, then the user's. `overrides` holds data
    options and evaluate's own (--eval-batch-size, --cpu, --quiet: checked here, read by the caller). `tables`:
    the run's tables from Python, standing in for the descriptions recorded of them (the precision gate's)."""
    data = DataOptions.__dataclass_fields__
    own = [name for name in with_trait("commands", "evaluate") if name not in data]
    unknown = sorted(set(overrides) - set(data) - set(own))
    if unknown:
        raise TypeError(f"evaluate takes the data options and {', '.join(own)}, not {', '.join(unknown)}")
    listed = {name for name in data if typing.get_origin(field_type(DataOptions, data[name])) is list}
    overrides = {name: coerce(DataOptions, data[name], value, source=name)     # text_columns="review", as train takes
                 if name in listed and value is not None else value for name, value in overrides.items()}
    batch_size = overrides.get("eval_batch_size", default("eval_batch_size"))
    need(batch_size >= 1, "eval_batch_size", f"must be at least 1, got {batch_size}")
    meta = clf.metadata
    recorded = {**{k: v for k, v in (meta.get("data") or {}).items() if v is not None}, **(tables or {})}
    policy = meta.get("text_policy") or {}       # how the model reads long texts: kept for any data
    reading = {k: policy[k] for k in ("max_length", "truncation", "windows") if policy.get(k) is not None}
    if policy.get("pooling"):
        reading["window_pooling"] = policy["pooling"]
    chosen = {**recorded, **reading, **overrides}
    if any(k in overrides for k in ("data_dir", "validation_file", "task")):
        # new data replaces the recorded source as a whole, not piecemeal; the recorded columns where it has them
        available = columns_of(overrides.get("validation_file"))
        chosen = {**{k: v for k, v in recorded.items() if k == "task" or k in ("text_columns", "label_column") and (
            available is None or all(named(available, c) for c in ([v] if isinstance(v, str) else v)))},
            **reading, **overrides}
    chosen.setdefault("task", meta.get("task"))
    return DataOptions(**{k: v for k, v in chosen.items() if k in data}).validate()


def evaluation(clf, overrides: dict, output: str | None = None, raw: bool = False, overwrite: bool = True):
    """(evaluate's results, the Evaluation with every split's logits) — export's accuracy gate compares two. Each
split goes through the model's one inference loop (`Classifier.run`), shared out over a launch's processes."""
    import time
    from pathlib import Path

    from ..evaluation.inference import Evaluation
    from ..evaluation.metrics import per_class

    config = data_config_for(clf, overrides)
    if output:
        check_output(output)
    if overrides.get("max_length") is not None and clf.path is not None:     # as training refuses it: before reading
        from ..model.loading import check_max_length

        check_max_length(str(clf.path), overrides["max_length"])
    for name in ("validation_file", "train_file", "test_file"):          # a recorded file, or one given
        if output and isinstance(path := getattr(config, name, None), str) and same_file(output, data_file(path)):
            raise ConfigError(f"--output {output}: is the --{name.replace('_', '-')} whose rows are evaluated; the "
                              "metrics would replace them: choose another name")
    if output and not overwrite and Path(output).exists():         # the CLI's, as predict's: replaced when asked
        raise ConfigError(f"--output {output}: already exists; choose another name or pass --overwrite")
    batch_size = overrides.get("eval_batch_size", default("eval_batch_size"))
    quiet = overrides.get("quiet", default("quiet"))
    with clf.accelerated() as accelerator:
        with accelerator.main_process_first():
            data = prepare_data(config, clf.tokenizer, labels=clf.label_schema, with_train=False,
                                text_columns=evaluated_text(clf, config, overrides.get("text_columns")),
                                saved_split=run_split(clf, config))
        if not data.evaluation:
            raise DataError("nothing to evaluate: give --validation-file FILE, or --task with --data-dir")
        task, labels, meta = tasks.get_task(config.task), clf.label_schema, clf.metadata
        names = tuple(meta.get("metrics") or tasks.metric_names(task, labels.problem_type, labels.num_labels))
        started = time.perf_counter()
        result = Evaluation.of({split: clf.run(ds, batch_size=batch_size, quiet=quiet, desc=f"Evaluating {split}",
                                               metric_names=names, pooling=config.window_pooling)
                                for split, ds in data.evaluation.items()}, started)
        per_split, rule = result.metrics, clf.decision_rule(raw)
        if rule is not None:
            per_split = {split: decided_metrics(rule, names, logits, gold)
                         for split, (logits, gold) in result.outputs.items()}
        results = {"model": clf.path, "task": config.task,
                   "main_metric": meta.get("main_metric") or tasks.main_metric(task, labels.problem_type),
                   "eval": next(iter(per_split.values())),
                   "decision_rule": rule.describe() if rule is not None else {
                       tasks.REGRESSION: "none (regression: the score as predicted)",
                       tasks.MULTI_LABEL: "raw scores: each label at 0.5"}.get(labels.problem_type,
                                                                           "raw scores: argmax")}
        if len(per_split) > 1:
            results["eval_splits"] = per_split
        classes = {split: per_class(rule.decision_logits(logits) if rule is not None else logits, gold, labels)
                   for split, (logits, gold) in result.outputs.items()}  # decided as the metrics are
        first = next(iter(classes.values()))            # precision, recall, F1, support per class (None: regression)
        if first is not None:
            results["per_class"] = first                                 # the first split's, as "eval"
            if len(classes) > 1:
                results["per_class_splits"] = classes                    # every split's, as "eval_splits"
        if output and accelerator.is_main_process:
            atomic_write_json(output, results)
        return results, result


def run_split(clf, config) -> dict | None:
    """The rows the model's run held out of its training file (the run folder's split.json), where evaluate holds
    rows out of that same file, unchanged, as the run did: the run's own validation rows, not those a newer reader
    or scikit-learn would draw (which may be training rows). None otherwise: the rows are drawn again (said where
    the file changed since)."""
    import json
    import logging
    from pathlib import Path

    from ..data.prepare import holds_out_validation
    from ..sheets import file_signature

    if not holds_out_validation(config) or not isinstance(config.train_file, str) or not clf.path:
        return None
    try:
        saved = json.loads((Path(clf.path).parent / SPLIT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    # the run recorded the file as given, relative to where it ran: its name, size and modification time say it
    if not isinstance(saved, dict) or Path(str(saved.get("source"))).name != Path(config.train_file).name or \
            saved.get("seed") != config.split_seed or ("fold" not in saved and
                                                       saved.get("fraction") != config.validation_split):
        return None
    if saved.get("source_signature") != file_signature(config.train_file):
        logging.getLogger("tuneloop").warning(
            f"{config.train_file}: changed since the model's run held out its validation rows ({SPLIT_FILE}); "
            "they are held out again, and may hold rows the model was trained on: give --validation-file FILE")
        return None
    return saved


def columns_of(data) -> list[str] | None:
    """The column names of data given to evaluate: a file's header, a table's from Python (None: no such data)."""
    from ..data.memory import Table

    if isinstance(data, Table):
        return list(data.columns)
    # a path that names no file: None here, and the options' check says so in one line (not a FileNotFoundError)
    return file_columns(data) if isinstance(data, str) and is_data_file(data) else None


def evaluated_text(clf, config, given) -> list[str] | None:
    """The text columns evaluate reads: the ones given (None here: the options hold them); else the model's own, or,
    in data without them, those detected (a pair model's two), as predict reads a file (known_text)."""
    if given:                                    # as the options read it (text_columns="body" from Python)
        given_text(config.text_columns or given, clf.metadata.get("text_columns") or [])
    available = None if given or config.data_dir else columns_of(config.validation_file)
    if available is None:
        return None if given else clf.text_columns or None
    return list(known_text(str(config.validation_file), clf.metadata, None, available))


def predict_file(clf, input_path: str, output: str, glue: bool = False, batch_size: int = 64, text_columns=None,
                 quiet: bool = False, raw: bool = False, keep_columns: str | None = None) -> int:
    """`tuneloop predict --input FILE`: one row per input row, decided by the model's rule unless `raw`, with the
    input's columns (`keep_columns`: rows.keep_columns) beside the predictions; returns the number written (the
    main process writes). The file is read (with the one reader's checks and messages: data/sources) and tokenized
    in memory, FILE_CHUNK rows at a time, without building a datasets.Dataset."""
    from ..data.unknown_tokens import counted, warn_unknown_in_predictions
    from .inputs import encoded

    if output != STDOUT:
        check_output(output)
    check_output_name(output, glue)
    keep = keep_columns_of(input_path, keep_columns, glue)
    ids, inputs, logits, unknown, id_column = [], [], [], np.zeros(2, dtype=np.int64), None
    with clf.accelerated() as accelerator:
        for chunk, id_column in file_items(input_path, clf.metadata, text_columns, keep=bool(keep)):
            ids += [row["id"] for row in chunk]
            inputs += [row.get("input") for row in chunk]
            tokenized = encoded([(row["text_a"], row["text_b"]) for row in chunk], clf.tokenizer, clf.policy)
            unknown += counted(tokenized.columns["input_ids"], clf.tokenizer)
            logits.append(clf.run(tokenized, batch_size=batch_size, quiet=quiet).all_logits)
        warn_unknown_in_predictions(*unknown, clf.tokenizer, input_path)
        _say_repeated_ids(ids, id_column, input_path)
        rows = clf.table_rows(ids, np.concatenate(logits) if logits else np.zeros((0, 1)), raw=raw, glue=glue)
        if keep:
            rows = with_input(rows, inputs, keep, id_column)
        if accelerator.is_main_process:
            write_predictions(rows, output, glue=glue, labels=clf.label_schema,
                              task=tasks.get_task(clf.metadata.get("task")))
            if not glue:                                  # GLUE's file holds labels only
                say_formula_texts(rows, output)
    return len(rows)


def _say_repeated_ids(ids: list, id_column: str | None, path: str) -> None:
    """Ids the file gives twice: each row is predicted, but a join of the predictions back by id would pair rows
    that are not each other's; said once, with an example."""
    if id_column is None or len(set(ids)) == len(ids):
        return
    seen, twice = set(), None
    for i in ids:
        if i in seen:
            twice = i
            break
        seen.add(i)
    logging.getLogger("tuneloop").warning(
        f"{path}: {len(ids) - len(set(ids))} row(s) repeat an id of column {id_column!r} (e.g. {twice!r}); each row is "
        "predicted, in order, but joining the predictions back by id would mix them up")


def keep_columns_of(path: str, option: str | None, glue: bool = False) -> list[str] | str:
    """--keep-columns checked against the file's columns before anything is predicted."""
    return keep_columns(option, file_columns(path), path, glue)


def file_items(path: str, meta: dict, text_columns=None, chunk: int = FILE_CHUNK, keep: bool = False):
    """(rows, the id column or None) of a file to predict, `chunk` rows at a time: each row as
    sources.canonical_rows gives it (`id`, `text_a`, `text_b`; `input`, its every column, when `keep`), its
    columns as `tuneloop train` finds them (the model's own when the file has them), checked as training's reader
    checks it."""
    columns = detect_columns(path, file_columns(path), list(known_text(path, meta, text_columns) or []) or None,
                             None, need_label=False)
    rows = []
    for row in canonical_rows(path, None, columns.text, None, columns.id, False, keep):
        rows.append(row)
        if len(rows) == chunk:
            yield rows, columns.id
            rows = []
    if rows:
        yield rows, columns.id


def file_inputs(path: str, meta: dict, idx) -> tuple[list[dict], str | None]:
    """(every column of the file's rows `idx`, as read; its id column or None): a run's test predictions carry the
    test file's columns, as `tuneloop predict --input` writes them."""
    by_idx, id_column = {}, None
    for chunk, id_column in file_items(path, meta, keep=True):
        by_idx.update((row["idx"], row["input"]) for row in chunk)
    return [by_idx[int(i)] for i in idx], id_column


def given_text(given, recorded) -> tuple:
    """--text-columns as predict and evaluate take it: one or two columns, not one twice, as many as the model reads
    (its run's `recorded` ones; a plain save_pretrained folder records none): a pair model given one column, or a
    single-text one given two, would predict from other inputs than it learned on, without a word."""
    given = tuple(given)
    shown = ",".join(map(str, given))
    if not 1 <= len(given) <= 2 or not all(str(c).strip() for c in given):
        raise ConfigError(f"--text-columns {shown}: name one text column, or two for a pair")
    if len({str(c).strip() for c in given}) < len(given):
        raise ConfigError(f"--text-columns {shown}: names one column twice; a pair needs two columns")
    if recorded and len(recorded) != len(given):
        raise ConfigError(f"--text-columns {shown}: the model reads {len(recorded)} text(s) per example "
                          f"({', '.join(recorded)}); name {len(recorded)} column(s) of the file")
    return given


def known_text(path: str, meta: dict, given, columns: list[str] | None = None) -> tuple | None:
    """The model's own text columns when the file (or the data of `columns`) has them; otherwise detection; a pair
    model needs two."""
    recorded = meta.get("text_columns") or []
    if given:
        return given_text(given, recorded)
    columns = file_columns(path) if columns is None else columns
    found = tuple(named(columns, c) for c in recorded)       # in this file's letter case
    if recorded and None not in found:
        return found
    found = detect_columns(path, columns, None, None, need_label=False).text
    if recorded and len(found) != len(recorded):
        raise DataError(f"{path}: the model reads {len(recorded)} text column(s) ({', '.join(recorded)}) but the file "
                        f"has {', '.join(columns)}; name them with --text-columns")
    return found

"""`tuneloop distill`: a small, fast student trained on a teacher's outputs.

The teacher (a model folder, loaded as a `Classifier`, or a file of soft labels) labels the texts once; its
probabilities are saved in OUT/distill/ with the student's training table (teacher.py) and reused by a resume.
The student (`--model`, or `--student-layers N` of it: model/shrink.py) is then an ordinary run in OUT — the same
loop, the distillation step (training/step.DistillStep: `Objective.distill_loss` at --temperature, plus the given
labels weighted by --gold-weight), its own decision rule — so OUT loads, predicts, evaluates, exports and serves
like any run. With labelled rows, the same student is also trained on them alone (OUT/distill/labels_only/), and
results.json's `distillation` compares teacher, student and that student on the validation rows (compare.py).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from pathlib import Path
from typing import Callable

import numpy as np

from ..atomic import atomic_write_json, atomic_write_text, make_folder
from ..config.options import TrainConfig
from ..data.soft_targets import SoftTargets
from ..exceptions import ConfigError, Interrupted, TuneloopError
from ..layout import (CONFIG_FILE, DISTILL_DIR, DISTILL_SETUP, DISTILL_TABLE, LABELS_ONLY_DIR, RESULTS_FILE,
                      RUN_LOCK, SOFT_TARGETS_FILE)
from ..runtime import folder_lock, machine
from ..runtime.process import console_logging, library_output, process_group_kept
from ..sheets import is_data_file
from ..tasks import MULTI_LABEL, REGRESSION
from ..training.checkpoint import list_checkpoints
from ..training.loop import run_training
from ..training.run_folder import check_run_folder
from ..training.state import optimizer_steps_per_epoch
from . import teacher as t
from .common import check_same_files, interrupted_in, resume_point
from .student import check_student_layers, student_model, student_source, teacher_layers

log = logging.getLogger("tuneloop")
DISTILL_OPTIONS = ("teacher", "unlabeled_file", "student_layers", "student_init", "temperature", "gold_weight",
                   "feature_weight", "compare_labels_only")
# the student's epochs when you set neither --epochs nor --max-steps: enough for STUDENT_MIN_STEPS optimizer steps (at
# most STUDENT_MAX_EPOCHS). Measured on the docstrings set (1,120 texts, 35 steps an epoch, a 3-layer MiniLM student,
# seed 42-44): 70 steps kept 58% of the teacher's accuracy, 175 steps 88%, 525 steps (15 epochs) the figures of the
# distillation guide; one set, so the floor is a starting point, not a law.
STUDENT_MIN_STEPS = 500
STUDENT_MAX_EPOCHS = 30


def saved_options(options: dict) -> dict:
    """With --resume: the options the distillation was started with (OUT/distill/config.yaml; OUT/config.yaml is
    the student run's own)."""
    from ..config.options import read_yaml_options

    folder = options.get("output_dir")
    saved = Path(folder or "") / DISTILL_DIR / CONFIG_FILE
    if not options.get("resume") or not folder or not saved.is_file():
        return {}
    values = read_yaml_options(saved, flag="--resume")
    for key in ("resume", "dry_run", "overwrite", "chosen"):
        values.pop(key, None)
    return values


def _teacher(cfg: TrainConfig):
    """The teacher model as a Classifier; a folder or id that cannot be loaded is said as --teacher's."""
    from ..predict.classifier import Classifier

    try:
        return Classifier.load(cfg.teacher, cpu=cfg.cpu)
    except TuneloopError as e:
        flag = f"--model {cfg.teacher}"
        if not str(e).startswith(flag):
            raise
        raise type(e)(f"--teacher {cfg.teacher}{str(e)[len(flag):]}") from None


def check_options(cfg: TrainConfig) -> None:
    if not cfg.teacher:
        raise ConfigError("--teacher: give the teacher, a model or run folder or a file of soft labels")
    file_teacher = t.is_soft_label_file(cfg.teacher)
    if not file_teacher and not cfg.unlabeled_file:
        raise ConfigError("--unlabeled-file: give the texts the teacher labels (or a soft-label file as --teacher)")
    if file_teacher and cfg.unlabeled_file:
        raise ConfigError("--unlabeled-file: a soft-label file as --teacher brings its own texts; leave it out")
    if cfg.unlabeled_file and not is_data_file(cfg.unlabeled_file):       # book.xlsx#unlabelled: a sheet
        raise ConfigError(f"--unlabeled-file: {cfg.unlabeled_file} does not exist or is not a file")
    if cfg.student_init == "teacher" and not cfg.student_layers:
        raise ConfigError("--student-init teacher: give --student-layers N too (the student is N of the teacher's "
                          "layers)")
    if cfg.student_init == "teacher" and teacher_layers(cfg) is None:
        raise ConfigError(f"--student-init teacher: {cfg.teacher} has no PyTorch layers to cut (a soft-label file or "
                          "an exported model); use --student-init model")
    if cfg.seeds or cfg.num_seeds or cfg.folds or cfg.method not in ("finetune", "auto") or cfg.data_dir or cfg.task:
        raise ConfigError("tuneloop distill trains one student on your files: leave out --seeds, --num-seeds, "
                          "--folds, --method setfit, --task and --data-dir")
    check_student_layers(cfg)           # read from the student's source config: before the teacher's work


def distill(config: TrainConfig, on_step: Callable | None = None) -> dict:
    """Label the texts with the teacher (once), train the student on them, compare; returns results.json's
    contents (with `distillation`). The student's run and the labels-only one share a launch's process group."""
    with process_group_kept():
        return _distill(config, on_step)


def _distill(config: TrainConfig, on_step: Callable | None = None) -> dict:
    from accelerate import PartialState

    check_options(config)
    config = config.replace(feature_weight=feature_weight(config))    # recorded as decided (a resume keeps it)
    out = Path(config.output_dir)
    state = PartialState(cpu=machine.use_cpu(config.cpu))
    resume = config.resume is not None
    with library_output(config.quiet), console_logging(config.quiet):
        if state.is_main_process:
            with folder_lock.holding():     # one distillation at a time here (the student's run locks it again)
                _prepare_folder(out, config.overwrite, resume)
                table = student_table(config, out / DISTILL_DIR)
                table["student"], table["student_from"] = student_model(config, out / DISTILL_DIR)
                config.save_yaml(out / DISTILL_DIR / CONFIG_FILE)
                atomic_write_json(out / DISTILL_DIR / DISTILL_SETUP, table)
        state.wait_for_everyone()
        if not state.is_main_process:
            table = json.loads((out / DISTILL_DIR / DISTILL_SETUP).read_text(encoding="utf-8"))
    student = table["student"]
    rows = table["unlabeled_rows"] + table["labelled_rows"]
    if not config.validation_file:          # validated on rows held out of the table: they make no steps
        from ..data.split import asked_rows

        rows -= asked_rows(rows, config.validation_split)
    epochs = student_epochs(config, rows, state.num_processes)
    student_config = config.replace(epochs=epochs,
        train_file=table["train_file"], text_columns=table["text_columns"], label_column=table["label_column"],
        problem_type=table["problem_type"], label_separator=None, soft_targets=table["soft_targets"],
        model=student, overwrite=True, validation_file=config.validation_file, task=table.get("task"),
        method="finetune")                  # the student trains in the loop on the teacher's targets (not auto)
    results = _student(student_config, out, on_step)
    if config.dry_run:
        return results
    labels_only = None
    if config.train_file and config.compare_labels_only:
        labels_only = run_labels_only(_as_the_teacher(config, table), student, out / DISTILL_DIR / LABELS_ONLY_DIR,
                                      out)
    if state.is_main_process:
        from .compare import comparison

        with library_output(config.quiet), console_logging(config.quiet):
            results["distillation"] = {**comparison(config, out, table, labels_only), "setup": table}
        atomic_write_json(out / RESULTS_FILE, results)
        if config.report:                       # --no-report: none, as for `tuneloop train`
            _report(out)
    return results


def _student(cfg: TrainConfig, out: Path, on_step) -> dict:
    """The student's run. With --resume: from its checkpoint; read back when it finished (its checkpoints are gone);
    started afresh when it stopped before its first one (in the teacher's labelling pass, say)."""
    if cfg.resume is not None and cfg.resume in ("latest", "true") and not list_checkpoints(out):
        if (out / RESULTS_FILE).is_file() and not cfg.dry_run:
            from .runs import check_made_alike

            check_made_alike(out, cfg.replace(resume=None), "the distillation")     # not one of other settings
            log.info(f"{out}: the student finished earlier, read back")
            results = json.loads((out / RESULTS_FILE).read_text(encoding="utf-8"))
            check_same_files(out, results, "the distillation")
            results.pop("distillation", None)
            return results
        log.info(f"{out}: the student had saved no checkpoint yet; starting it")
        cfg = cfg.replace(resume=None)
    return run_training(cfg, on_step)


def _as_the_teacher(cfg: TrainConfig, table: dict) -> TrainConfig:
    """The labels-only student's options: the given files read as the teacher's labels are (its problem type and
    multi-label separator), not guessed again from them ("movie|plot" one class where the teacher has two)."""
    if table.get("task"):
        return cfg.replace(task=table["task"])
    multi = table["problem_type"] == MULTI_LABEL
    return cfg.replace(problem_type=table["problem_type"],
                       label_separator=(cfg.label_separator or table.get("separator")) if multi else None)


def student_epochs(cfg: TrainConfig, rows: int, processes: int) -> int:
    """--epochs, raised to reach STUDENT_MIN_STEPS optimizer steps (at most STUDENT_MAX_EPOCHS epochs) unless you set
    --epochs or --max-steps: a student learns from a teacher's outputs far slower than a fine-tuned model from its
    labels (see STUDENT_MIN_STEPS)."""
    chosen = set(cfg.chosen or ())
    if "epochs" in chosen or cfg.max_steps or cfg.dry_run:
        return cfg.epochs
    batches = math.ceil(rows / (cfg.batch_size * max(1, processes)))          # each process's loader batches
    per_epoch = max(1, optimizer_steps_per_epoch(batches, cfg.gradient_accumulation_steps))   # as the loop counts
    epochs = min(STUDENT_MAX_EPOCHS, max(cfg.epochs, math.ceil(STUDENT_MIN_STEPS / per_epoch)))
    if epochs != cfg.epochs:
        log.info(f"student: {epochs} epochs of {per_epoch} steps ({STUDENT_MIN_STEPS} steps at least, at most "
                 f"{STUDENT_MAX_EPOCHS} epochs; --epochs or --max-steps sets your own)")
    return epochs


def _prepare_folder(out: Path, overwrite: bool, resume: bool) -> None:
    """OUT checked, made and locked; with --overwrite the earlier distillation cleared (`clear`). A folder holding
    only an earlier distillation that stopped before its student's run (OUT/distill/: a wrong column, a teacher that
    failed) is taken up again as with --overwrite: nothing of a run is there to lose."""
    unstarted = not resume and (out / DISTILL_DIR).is_dir() and \
        all(p.name in (DISTILL_DIR, RUN_LOCK) for p in out.iterdir())
    check_run_folder(out, overwrite or unstarted, resume)
    make_folder(out, "--output-dir")
    folder_lock.take(out)
    if unstarted and not overwrite:
        log.info(f"{out}: an earlier distillation stopped before its student's run; starting again (its teacher "
                 "outputs are reused where they fit)")
    if (overwrite or unstarted) and not resume and (out / DISTILL_DIR).is_dir():
        clear(out / DISTILL_DIR)


def clear(folder: Path) -> None:
    """--overwrite: the earlier distillation's files go, except the teacher's outputs (reused only for the same
    teacher and texts: their key says which)."""
    for item in folder.iterdir():
        if item.name == SOFT_TARGETS_FILE:
            continue
        shutil.rmtree(item) if item.is_dir() else item.unlink()


def student_table(cfg: TrainConfig, folder: Path) -> dict:
    """The student's training table (DISTILL_TABLE) and the teacher's soft targets (SOFT_TARGETS_FILE) in `folder`,
    computed once: a resume (or a rerun on the same teacher and texts) reuses them."""
    make_folder(folder, "--output-dir")
    given = t.read_texts(cfg.train_file, cfg.text_columns, cfg.label_column, True) if cfg.train_file else None
    from_file = t.is_soft_label_file(cfg.teacher)
    task = None if from_file else t.teacher_task(cfg.teacher)      # its files may write class ids (GLUE's)
    if from_file:
        texts, soft, schema = t.read_soft_label_file(cfg.teacher, cfg.text_columns, cfg.problem_type)
    else:
        texts = t.read_texts(cfg.unlabeled_file, cfg.text_columns, None, False)
        t.warn_unread_labels(cfg.unlabeled_file, texts, cfg.label_column)
    rows = texts.items + (given.items if given else [])
    # a soft-label file's targets are also made of the given labels (the labelled rows') and the problem type
    inputs = {"labels": given.labels if given else None, "problem_type": cfg.problem_type} if from_file else None
    key = t.teacher_key(cfg.teacher, t.Texts(rows, [], texts.columns), inputs)
    cached = folder / SOFT_TARGETS_FILE
    targets = SoftTargets.load(cached) if cached.is_file() else None
    features = cfg.feature_weight > 0           # never for a soft-label file (feature_weight refuses it)
    if targets is not None and targets.key == key and (targets.features is not None or not features):
        log.info(f"teacher outputs: reusing {cached} (computed earlier for these texts and this teacher)")
    else:
        if from_file:           # the labelled rows' targets are their labels (the file has no outputs for them)
            if given is not None:
                t.check_same_labels(schema, given, cfg.train_file)
                soft = np.concatenate([soft, t.gold_targets(given.labels, schema, cfg.train_file)])
        else:
            with t.stop_told(cfg.output_dir), _teacher(cfg) as classifier:     # a stop: how to resume
                schema = classifier.label_schema
                if given is not None:         # refused before the teacher's work
                    t.check_same_labels(schema, given, cfg.train_file, ids=task is not None)
                log.info(f"teacher {cfg.teacher}: labelling {len(rows)} texts")
                soft, teacher_features = t.teacher_outputs(classifier, rows, cfg.eval_batch_size, cfg.quiet,
                                                           features)
        gold = np.r_[np.zeros(len(texts.items), np.int8), np.ones(len(rows) - len(texts.items), np.int8)]
        targets = SoftTargets(soft.reshape(len(rows), -1), gold, schema, key,
                              teacher_features if features else None)
        targets.save(cached)
    for source, labelled in ((cfg.train_file, given), (cfg.validation_file, _validation(cfg))):
        if labelled is not None:
            t.check_same_labels(targets.labels, labelled, source, ids=task is not None)
    return {**_write_table(cfg, folder, texts, given, targets.soft, targets.labels), "task": task}


def _validation(cfg: TrainConfig):
    return t.read_texts(cfg.validation_file, cfg.text_columns, cfg.label_column, True) if cfg.validation_file \
        else None


def _write_table(cfg, folder: Path, texts, given, soft, schema) -> dict:
    """DISTILL_TABLE: every text in its columns and a label (the given one, else the teacher's answer); what the
    student run reads (table.json)."""
    columns = list(texts.columns)
    label = label_column(cfg) or "label"     # the validation file's too: the student's run reads it by this name
    while label in columns:
        label += "_"
    lines = []
    rows = texts.items + (given.items if given else [])
    labels = list(given.labels) if given else []
    if given and schema.problem_type == REGRESSION:   # numbers, as the teacher's scores beside them (decided_label)
        labels = t.given_scores(labels, cfg.train_file)
    given_labels = [None] * len(texts.items) + labels
    for i, item in enumerate(rows):
        row = dict(zip(columns, item[:len(columns)], strict=True))     # (text, None) under one text column
        row[label] = given_labels[i] if given_labels[i] is not None else t.decided_label(soft[i], schema)
        lines.append(json.dumps(row, ensure_ascii=False))
    table_file = folder / DISTILL_TABLE
    if not table_file.is_file() or table_file.read_text(encoding="utf-8") != "\n".join(lines) + "\n":
        atomic_write_text(table_file, "\n".join(lines) + "\n")
    table = {"train_file": str(table_file), "text_columns": columns, "label_column": label,
             "problem_type": schema.problem_type, "separator": schema.separator,
             "soft_targets": str(folder / SOFT_TARGETS_FILE), "labels": schema.names,
             "unlabeled_rows": len(texts.items), "labelled_rows": len(given.items) if given else 0}
    return table


def label_column(cfg: TrainConfig) -> str | None:
    """The given files' label column: --label-column, else the one found in --train-file (else --validation-file)
    as `tuneloop train` finds it; None without either."""
    from ..data.columns import detect_columns
    from ..data.readers import file_columns

    if cfg.label_column:
        return cfg.label_column
    path = cfg.train_file or cfg.validation_file
    return detect_columns(path, file_columns(path), cfg.text_columns, None, True).label if path else None


# --feature-weight's default where the features can be compared. Measured with 1 (bench_distill.py, 3 seeds, 3,000
# unlabelled texts, a 3-layer MiniLM student of a fine-tuned MiniLM): accuracy 0.664 -> 0.673 on the docstrings set and
# 0.721 -> 0.734 on MRPC (95.4% -> 96.6% and 94.9% -> 96.6% of the teacher's), 5 of 6 seeds up, one level.
FEATURE_WEIGHT = 1.0


def feature_weight(cfg: TrainConfig) -> float:
    """The feature loss's weight, decided from the configs before the teacher's work: --feature-weight as given, or by
    default FEATURE_WEIGHT where the features can be compared, else 0; an explicit weight where they cannot
    (`_features_differ`) is refused with one line."""
    asked = cfg.feature_weight
    if asked == 0:
        return 0.0
    try:
        why = _features_differ(cfg)
    except Exception:  # noqa: BLE001 - by default: no feature loss (loading the teacher says what is wrong)
        if asked is None:
            return 0.0
        raise
    if why is None:
        return FEATURE_WEIGHT if asked is None else asked
    if asked is None:
        return 0.0
    raise ConfigError(f"--feature-weight: {why}, or leave --feature-weight at 0")


def _features_differ(cfg: TrainConfig) -> str | None:
    """Why the teacher's and the student's features cannot be compared (None: they can): a soft-label file has no
    teacher features, an exported teacher's hidden states are not read, a student (--model, however many layers it
    keeps) of another width has features of another size."""
    if t.is_soft_label_file(cfg.teacher):
        return "a soft-label file holds no teacher features; give a model as --teacher"
    if teacher_layers(cfg) is None:
        return (f"the teacher {cfg.teacher} is an exported model, whose hidden states are not read; give its PyTorch "
                "folder")
    sizes = t.hidden_size(cfg.teacher), t.hidden_size(student_source(cfg)[0] if cfg.student_layers else cfg.model)
    if None in sizes or sizes[0] != sizes[1]:
        return (f"the student's hidden size ({sizes[1]}) is not the teacher's ({sizes[0]}), so their features cannot "
                "be compared; cut the student from a model of the teacher's width (--student-layers)")
    return None


def run_labels_only(cfg: TrainConfig, student: str, folder: Path, out: Path) -> dict:
    """The same student on the labelled rows alone (the comparison's baseline); a finished one is read back, and
    with --resume a stopped one resumes from its checkpoint. A stop is told as the distillation's (its resume)."""
    done = folder / RESULTS_FILE
    if done.is_file():
        return json.loads(done.read_text(encoding="utf-8"))
    options = {name: TrainConfig.__dataclass_fields__[name].default for name in DISTILL_OPTIONS}
    resume = resume_point(folder) if cfg.resume is not None else None
    try:
        return run_training(cfg.replace(**options, model=student, output_dir=str(folder), overwrite=True,
                                        resume=resume, soft_targets=None, method="finetune",  # like the student
                                        precision_gate="off"))                # a comparison, not a model to ship
    except Interrupted as stopped:
        raise interrupted_in(folder, stopped, "distill", out) from None


def _report(out: Path) -> None:
    """report.html again, now that results.json holds the comparison."""
    try:
        from ..report import write_report
    except ImportError:
        return
    write_report(out)

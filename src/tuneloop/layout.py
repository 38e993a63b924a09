"""The names of what tuneloop writes, each once: a run folder's files, a saved model's extra files, an
experiment's and a search's. Modules use these constants, never the literals; `--overwrite` removes
`RUN_OUTPUTS` and nothing else."""

RUN_MARKER = "tuneloop-run.json"        # marks a folder as tuneloop's
RUN_LOCK = ".tuneloop.lock"             # held by the run writing the folder (runtime/folder_lock.py)
CONFIG_FILE = "config.yaml"             # the resolved configuration
METRICS_FILE = "metrics.jsonl"          # a JSON line per logged step and evaluation
RESULTS_FILE = "results.json"
MODEL_DIR = "model"                     # the final model (save_pretrained + tuneloop.json)
BEST_DIR = "best"                       # the best evaluation's model
CHECKPOINTS_DIR = "checkpoints"
PREDICTIONS_DIR = "predictions"         # eval_<split>.npz, train_dynamics.npz, test predictions
REPORT_FILE = "report.html"
PLOTS_DIR = "plots"
TENSORBOARD_DIR = "tensorboard"
LOG_FILE = "train.log"
SPLIT_FILE = "split.json"               # the rows a held-out validation split took
ERRORS_FILE = "errors.csv"              # validation rows the model gets wrong
LABEL_ISSUES_FILE = "label_issues.csv"  # training rows whose label is probably wrong
DYNAMICS_FILE = "train_dynamics.npz"    # in predictions/ and in each checkpoint
CHECKPOINT_STATE_FILE = "tuneloop_state.json"   # written last: its presence marks a complete checkpoint

SUMMARY_FILE = "summary.json"           # an experiment (seeds / folds)
SUMMARY_PAGE = "summary.html"
OUT_OF_FOLD_FILE = "out_of_fold.csv"
SEARCH_FILE = "search.json"             # a search
SEARCH_PAGE = "search.html"
TRIALS_DIR = "trials"
STUDY_JOURNAL = "study.journal"

DISTILL_DIR = "distill"                 # `tuneloop distill`'s own, in the student's run folder:
SOFT_TARGETS_FILE = "soft_targets.npz"  # ... the teacher's outputs per training row (reused by a resume)
DISTILL_TABLE = "train.jsonl"           # ... the student's training table (texts, given or teacher's labels)
DISTILL_SETUP = "distill.json"          # ... what the student run reads
STUDENT_INIT_DIR = "student_init"       # ... --student-layers: the smaller model the student starts from
LABELS_ONLY_DIR = "labels_only"         # ... the same student trained on the labelled rows alone

MODEL_CONFIG_FILE = "config.json"       # a transformers model folder
ADAPTER_CONFIG_FILE = "adapter_config.json"       # peft's, in a --lora model folder
METADATA_FILE = "tuneloop.json"         # beside a saved model: text columns, labels, text policy, decision rule
ONNX_FILE = "model.onnx"                # an exported folder
ONNX_ROUTE_DIR = "onnx-int8"            # in a model folder: its int8 ONNX copy, kept when the precision gate chose it
EXPORT_REPORT_FILE = "export_report.json"

RUN_OUTPUTS = (RUN_MARKER, CONFIG_FILE, METRICS_FILE, RESULTS_FILE, MODEL_DIR, BEST_DIR, CHECKPOINTS_DIR,
               PREDICTIONS_DIR, REPORT_FILE, PLOTS_DIR, TENSORBOARD_DIR, LOG_FILE, SPLIT_FILE, ERRORS_FILE,
               LABEL_ISSUES_FILE, SUMMARY_FILE, SUMMARY_PAGE, OUT_OF_FOLD_FILE)


def eval_outputs_file(split: str) -> str:
    """predictions/eval_<split>.npz: a final evaluation's logits and labels."""
    return f"eval_{split}.npz"


def model_folder(path):
    """A run folder's final model (RUN/model), a search's best (OUT/best: its one model), or `path` itself (a model
    folder, or a Hub id)."""
    from pathlib import Path

    path = Path(path)
    inner = path / (BEST_DIR if (path / SEARCH_FILE).is_file() else MODEL_DIR)
    return inner if (inner / MODEL_CONFIG_FILE).is_file() or (inner / ADAPTER_CONFIG_FILE).is_file() else path


def not_one_run(folder) -> str:
    """For messages about a folder that is not one run: what an experiment's or a search's folder holds instead
    (empty for any other folder)."""
    from pathlib import Path

    folder = Path(folder)
    if (folder / SEARCH_FILE).is_file():
        return (f"; it is a search's: its page is {folder / SEARCH_PAGE}, its best model {folder / BEST_DIR}, each "
                f"trial a run in {folder / TRIALS_DIR}")
    if (folder / SUMMARY_FILE).is_file():
        runs = sorted(p.name for p in folder.iterdir() if (p / RUN_MARKER).is_file())
        return (f"; it is an experiment's: its page is {folder / SUMMARY_PAGE}, each run a folder in it"
                + (f" ({', '.join(runs[:3])}{' ...' if len(runs) > 3 else ''})" if runs else ""))
    return ""


def no_model_here(run) -> str:
    """Why a run folder (it has RUN_MARKER) holds no model/, for messages: a seed's, fold's or trial's run whose
    experiment or search kept only the model it chose names that folder, and the run's best/ where it has one."""
    from pathlib import Path

    run = Path(run)
    owner = next((p for p in (run.parent, run.parent.parent)
                  if (p / SUMMARY_FILE).is_file() or (p / SEARCH_FILE).is_file()), None)
    why = (f"its experiment or search kept only the model it chose: give {owner}" if owner else
           "the run has not saved its final model yet")
    best = run / BEST_DIR
    return why + (f"; or this run's best evaluation, {best}" if (best / MODEL_CONFIG_FILE).is_file() else "")

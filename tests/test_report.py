"""The run report (report.html + plots/) and the model card (model/README.md)."""

from __future__ import annotations

import base64
import html
import io
import json
import re
import shutil
import struct
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import fast_options

import tuneloop
from tuneloop import TrainConfig, TuneloopError
from tuneloop.decision.rule import DecisionRule
from tuneloop.report import hub_id, write_model_card, write_report
from tuneloop.report.run import read_run

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# ---------------------------------------------------------------------------------------------- helpers
class Page(HTMLParser):
    """Every tag with its attributes, and every attribute that can load something."""

    def __init__(self):
        super().__init__()
        self.tags, self.images, self.links = [], [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append(tag)
        if tag == "img":
            self.images.append(attrs.get("src") or "")
        for name in ("src", "href", "srcset", "action", "data", "poster"):
            if name in attrs and tag != "img":
                self.links.append((tag, name, attrs[name]))


def parse(report: Path) -> tuple[str, Page]:
    text = report.read_text(encoding="utf-8")
    page = Page()
    page.feed(text)
    return text, page


def check_png(data: bytes) -> tuple[int, int]:
    """A real PNG: signature, IHDR first with a sane size, and matplotlib can decode it."""
    import matplotlib.image

    assert data[:8] == PNG_SIGNATURE
    length, kind = struct.unpack(">I4s", data[8:16])
    assert kind == b"IHDR" and length == 13
    width, height = struct.unpack(">II", data[16:24])
    assert 100 < width < 5000 and 100 < height < 8000
    pixels = matplotlib.image.imread(io.BytesIO(data), format="png")
    assert pixels.shape[:2] == (height, width)
    return width, height


def check_self_contained(report: Path) -> tuple[str, Page]:
    text, page = parse(report)
    assert "http://" not in text and "https://" not in text
    assert not page.links                                  # no <link>, <script src>, <a href>, ...
    assert "script" not in page.tags and "link" not in page.tags and "iframe" not in page.tags
    assert text.count('src="') == len(page.images) > 0
    for src in page.images:
        prefix = "data:image/png;base64,"
        assert src.startswith(prefix)
        check_png(base64.b64decode(src[len(prefix):], validate=True))
    return text, page


def no_temp_files(folder: Path) -> None:
    assert not [p for p in folder.rglob("*.tmp")]


def fabricate(folder: Path, kind: str, splits=("validation",), names=None, task=None, results=True,
              predictions=True, steps=60) -> Path:
    """A run folder written by hand (fast): metrics.jsonl, config.yaml, results.json, model/tuneloop.json, npz."""
    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    lines, last = [], {}
    for step in range(5, steps + 1, 5):
        lines.append({"step": step, "time": 1.7e9 + step, "train/loss": 1.5 * np.exp(-step / 30) + 0.1 * rng.random(),
                      "train/lr": 5e-5 * (1 - step / steps), "train/epoch": step / 20,
                      "train/samples_per_second": 300 + 20 * rng.random()})
        if step % 20 == 0:
            for i, split in enumerate(splits):
                if kind == "regression":
                    metrics = {"pearson": 0.5 + step / 200, "spearmanr": 0.48 + step / 200, "mse": 2 - step / 50}
                elif kind == "multi_label_classification":
                    metrics = {"f1_micro": 0.5 + step / 200, "f1_macro": 0.4 + step / 200, "exact_match": 0.3}
                else:
                    metrics = {"accuracy": 0.5 + step / 200}
                metrics |= {"loss": 1.0 - step / 100, "num_samples": 50}
                last[split] = metrics
                prefix = "eval" if i == 0 else f"eval_{split}"
                lines.append({"step": step, "time": 1.7e9 + step, **{f"{prefix}/{k}": v for k, v in metrics.items()},
                              f"{prefix}/epoch": step / 20})
    (folder / "metrics.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))

    n = 50
    if kind == "regression":
        names = []
        labels = rng.uniform(0, 5, n)
        logits = (labels + rng.normal(0, 0.5, n))[:, None].astype(np.float32)
    elif kind == "multi_label_classification":
        labels = (rng.random((n, len(names))) < 0.3).astype(np.int64)
        logits = (labels * 2 - 1 + rng.normal(0, 1, labels.shape)).astype(np.float32)
    else:
        labels = rng.integers(0, len(names), n)
        logits = rng.normal(0, 1, (n, len(names))).astype(np.float32)
        logits[np.arange(n), labels] += 1.5
    if predictions:
        (folder / "predictions").mkdir()
        for split in splits:
            np.savez(folder / "predictions" / f"eval_{split}.npz", logits=logits, labels=labels)

    config = TrainConfig(task=task, train_file=None if task else "data/train.csv", model="minilm",
                         mixed_precision="bf16").to_dict() | {"output_dir": str(folder)}
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    main = {"regression": "pearson", "multi_label_classification": "f1_micro"}.get(kind, "accuracy")
    metric_names = [k for k in last[splits[0]] if k not in ("loss", "num_samples")]
    if results:
        out = {"task": task, "model": "minilm", "main_metric": main, "eval": last[splits[0]],
               "train": {"runtime_s": 75.3, "training_s": 70.1, "eval_s": 5.2, "samples_per_second": 310.2,
                         "steps": steps, "epochs": steps / 20, "num_samples": 160, "global_batch_size": 8,
                         "setup_s": 3.2, "num_processes": 1, "mixed_precision": "bf16"},
               "labels": names, "output_dir": str(folder)}
        if len(splits) > 1:
            out["eval_splits"] = last
        (folder / "results.json").write_text(json.dumps(out))
    (folder / "model").mkdir()
    (folder / "model" / "tuneloop.json").write_text(json.dumps({
        "tuneloop_version": tuneloop.__version__, "task": task, "text_columns": ["text"],
        "labels": {"problem_type": kind, "names": names, "separator": None}, "max_length": None,
        "base_model": "minilm", "metrics": metric_names, "main_metric": main}))
    return folder


# ---------------------------------------------------------------------------------------------- a real run
@pytest.fixture(scope="module")
def tiny_run(tiny_model, shared_mrpc_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "run"
    results = tuneloop.train(TrainConfig(task="mrpc", data_dir=str(shared_mrpc_dir), output_dir=str(out),
                                         **fast_options(tiny_model, epochs=2, report=True)))
    npz = out / "predictions" / "eval_validation.npz"
    if not npz.is_file():          # written by the training run itself where it saves predictions
        rng = np.random.default_rng(1)
        labels = rng.integers(0, 2, 60)
        logits = rng.normal(0, 1, (60, 2)).astype(np.float32)
        logits[np.arange(60), labels] += 2
        npz.parent.mkdir(exist_ok=True)
        np.savez(npz, logits=logits, labels=labels)
    return out, results


def test_report_of_a_run_is_self_contained_with_every_plot(tiny_run):
    out, results = tiny_run
    written_by_the_run = (out / "report.html").read_text(encoding="utf-8")
    assert "Learning rate" in written_by_the_run
    report = write_report(out)
    assert report == out / "report.html"
    text, page = check_self_contained(report)
    plots = {p.name for p in (out / "plots").iterdir()}
    assert {"loss.png", "lr.png", "throughput.png", "eval_validation.png", "confusion_validation.png"} <= plots
    assert len(page.images) == len(plots)
    inline = {base64.b64decode(src.split(",", 1)[1]) for src in page.images}
    assert inline == {(out / "plots" / name).read_bytes() for name in plots}     # the same PNGs as on disk
    for fact in ("mrpc", "not_equivalent", "equivalent", "f1 (main)", "accuracy", "Learning rate",
                 "Confusion matrix", str(results["train"]["num_samples"]), "lr_scheduler"):
        assert fact in text
    assert "<style>" in text and "max-width" in text
    no_temp_files(out)


def test_report_without_predictions_says_so_and_drops_an_old_confusion_plot(tiny_run, tmp_path):
    out, _ = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("model", "plots", "report.html"))
    write_report(copy)
    assert (copy / "plots" / "confusion_validation.png").is_file()
    shutil.rmtree(copy / "predictions")
    text, _ = check_self_contained(write_report(copy))
    assert "no saved predictions" in text
    assert not (copy / "plots" / "confusion_validation.png").exists()
    assert (copy / "plots" / "loss.png").is_file()


@pytest.mark.parametrize("edit, said", [
    ({"eval": 1.0}, "'eval' is a number, not an object as tuneloop writes it"),              # TypeError before
    ({"train": 3}, "'train' is a number, not an object"),                                     # AttributeError
    ({"decision": 3, "timeline": "x", "best": 2}, "'decision' is a number, not an object"),   # TypeError
    ({"eval": {"accuracy": "high", "f1": 0.5}}, "eval has 'accuracy' that are not numbers"),
    ({"eval_splits": {"dev2": [1]}}, "eval_splits.dev2 is not an object of metrics"),
])
def test_a_hand_edited_results_json_is_noted_and_the_rest_reported(tiny_run, tmp_path, edit, said):
    out, _ = tiny_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("model", "plots", "report.html"))
    results = json.loads((copy / "results.json").read_text())
    (copy / "results.json").write_text(json.dumps({**results, **edit}))
    text = html.unescape(check_self_contained(write_report(copy))[0])
    assert said in text and "it is left out" in text
    assert "Learning rate" in text                      # metrics.jsonl's curves are still there
    for key in set(results) - set(edit) - {"eval"}:     # the untouched sections are kept
        assert key in read_run(copy).results
    (copy / "results.json").write_text('["not", "an", "object"]')
    assert "results.json holds a list, not the object tuneloop writes" in check_self_contained(write_report(copy))[0]


# ---------------------------------------------------------------------------------------------- written by hand
def test_regression_run_gets_a_predicted_against_true_scatter(tmp_path):
    run = fabricate(tmp_path / "stsb-like", "regression")
    text, page = check_self_contained(write_report(run))
    assert (run / "plots" / "scatter_validation.png").is_file()
    assert not list((run / "plots").glob("confusion_*"))
    assert "Predicted against true" in text and "pearson (main)" in text and "regression: one score" in text
    assert len(page.images) == 5            # loss, lr, throughput, eval, scatter


def test_multi_label_run_gets_per_label_f1_and_escapes_label_names(tmp_path):
    names = ["sport", "<b>politics</b>", "science & tech"]
    run = fabricate(tmp_path / "topics", "multi_label_classification", names=names)
    text, _ = check_self_contained(write_report(run))
    assert (run / "plots" / "label_f1_validation.png").is_file()
    assert "<b>politics</b>" not in text and "&lt;b&gt;politics&lt;/b&gt;" in text
    assert "science &amp; tech" in text


def test_two_evaluation_splits_get_a_plot_each(tmp_path):
    splits = ("validation_matched", "validation_mismatched")
    run = fabricate(tmp_path / "mnli-like", "single_label_classification", splits=splits, task="mnli",
                    names=["entailment", "neutral", "contradiction"])
    text, _ = check_self_contained(write_report(run))
    plots = {p.name for p in (run / "plots").iterdir()}
    for split in splits:
        assert {f"eval_{split}.png", f"confusion_{split}.png"} <= plots
        assert split in text
    assert "entailment, neutral or contradiction" in text       # the GLUE task's description


def test_run_in_progress_shows_what_metrics_jsonl_has(tmp_path):
    run = fabricate(tmp_path / "going", "single_label_classification", names=["no", "yes"], results=False,
                    predictions=False)
    shutil.rmtree(run / "model")
    (run / "config.yaml").unlink()
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 65, "time": 17')               # a line still being written
    text, _ = check_self_contained(write_report(run))
    assert "in progress" in text and "Latest evaluation" in text and "At step 60" in text
    assert "could not be parsed" in text and "No config.yaml" in text
    assert (run / "plots" / "loss.png").is_file()


def test_metrics_only_without_evaluations_or_training_lines(tmp_path):
    run = tmp_path / "just-started"
    run.mkdir()
    (run / "metrics.jsonl").write_text("")
    text, page = parse(write_report(run))
    assert not page.images and "no training loss logged yet" in text and "no evaluation logged yet" in text


def test_a_folder_that_is_not_a_run_is_a_clear_error(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(TuneloopError, match="neither metrics.jsonl nor results.json") as e:
        write_report(tmp_path)
    assert str(tmp_path) in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(TuneloopError, match="not a folder"):
        write_report(tmp_path / "notes.txt")
    with pytest.raises(TuneloopError, match="not a folder"):
        write_report(tmp_path / "missing")
    assert not (tmp_path / "report.html").exists() and not (tmp_path / "plots").exists()


# ---------------------------------------------------------------------------------------------- model card
def front_matter(card: str) -> dict:
    assert card.startswith("---\n")
    return yaml.safe_load(card.split("---\n")[1])


def test_model_card_of_a_run_names_labels_metrics_and_usage(tiny_run, tiny_model):
    out, _ = tiny_run
    model = out / "model"
    results = json.loads((out / "results.json").read_text())
    config = yaml.safe_load((out / "config.yaml").read_text())
    metadata = json.loads((model / "tuneloop.json").read_text())
    card_path = write_model_card(model, results, config, metadata)
    assert card_path == model / "README.md"
    card = card_path.read_text(encoding="utf-8")
    meta = front_matter(card)
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-classification"
    assert meta["tags"] == ["tuneloop", "text-classification"]
    assert set(meta["metrics"]) == {"accuracy", "f1", "f1_macro"}
    assert "base_model" not in meta                           # a local folder is not a Hub id ...
    assert tiny_model in card                                 # ... so the card records the path
    for name in ("not_equivalent", "equivalent", "accuracy", "f1", "MRPC", "sentence pair: are they paraphrases?",
                 "sentence1", "sentence2", "0.003", "linear", "text_pair", "tuneloop predict --model",
                 "--input FILE", 'pipeline("text-classification"'):
        assert name in card
    assert f"{results['eval']['f1']:.4f}" in card
    assert str(model.resolve()) not in card                   # the card travels with the folder: no local path
    assert 'tuneloop.load("MODEL")' in card and 'model="MODEL"' in card
    no_temp_files(model)


def test_model_card_for_regression_and_a_hub_base_model(tmp_path):
    run = fabricate(tmp_path / "reg", "regression")
    results = json.loads((run / "results.json").read_text())
    config = yaml.safe_load((run / "config.yaml").read_text())
    card = write_model_card(run / "model", results, TrainConfig(**config), {}).read_text()   # metadata read
    meta = front_matter(card)
    assert meta["base_model"] == "sentence-transformers/all-MiniLM-L6-v2"      # the minilm alias
    assert meta["metrics"] == ["pearson", "spearmanr", "mse"]
    assert "regression: one score" in card.lower() and "train.csv" in card
    for name in ("pearson", "spearmanr", "mse"):
        assert re.search(rf"^\| (\*\*)?{name}\b", card, re.M)       # a row of the metrics table


def test_hub_id():
    assert hub_id("bert-base-uncased") == "bert-base-uncased"
    assert hub_id("google-bert/bert-base-cased") == "google-bert/bert-base-cased"
    assert hub_id("minilm") == "sentence-transformers/all-MiniLM-L6-v2"
    for local in ("/models/bert", "./bert", "runs/a/model", "~/bert", "a/b/c", None, ""):
        assert hub_id(local) is None


def test_the_runs_warnings_are_listed_escaped(tmp_path):
    run = fabricate(tmp_path / "warned", "single_label_classification", names=["a", "b"])
    results = json.loads((run / "results.json").read_text())
    text, _ = check_self_contained(write_report(run))
    assert "<h2>Warnings</h2>" not in text                                    # none: no section
    results["warnings"] = ["validation: 2 of 50 rows are also training rows (e.g. '<i>the cat</i>')"]
    (run / "results.json").write_text(json.dumps(results))
    text, _ = check_self_contained(write_report(run))
    assert "<h2>Warnings</h2>" in text and "&lt;i&gt;the cat&lt;/i&gt;" in text and "<i>the cat" not in text


# ---------------------------------------------------------------------------------------------- user text in figures
def test_labels_with_dollar_signs_are_drawn_as_written_not_as_math(tmp_path, monkeypatch):
    """'$5 to $10' was mathtext (italic '5to10'), and a label that is not valid math lost its figure."""
    import matplotlib.mathtext

    parsed, parse = [], matplotlib.mathtext.MathTextParser.parse
    monkeypatch.setattr(matplotlib.mathtext.MathTextParser, "parse",
                        lambda self, s, *a, **k: parsed.append(s) or parse(self, s, *a, **k))
    names = ["$5 to $10", "under $5", r"$\frac{$ x"]
    single = fabricate(tmp_path / "prices", "single_label_classification", names=names)
    multi = fabricate(tmp_path / "tags", "multi_label_classification", names=names)
    for run in (single, multi):
        text, _ = check_self_contained(write_report(run))
        assert "could not plot" not in text
    assert (single / "plots" / "confusion_validation.png").is_file()
    assert (multi / "plots" / "label_f1_validation.png").is_file()
    assert parsed == []


def test_a_confusion_matrix_of_many_long_labels_keeps_its_tick_labels_inside():
    """35 classes of 18-character names: the y tick labels ran past the figure's left edge (cut off)."""
    import matplotlib.image

    from tuneloop.report.figures import _style
    from tuneloop.report.prediction_plots import _confusion

    rng = np.random.default_rng(0)
    names = [f"category-{i:02d}-abcdefgh"[:18] for i in range(35)]
    with _style():
        plot = _confusion("validation", rng.normal(0, 1, (200, 35)), rng.integers(0, 35, 200), names)
    pixels = matplotlib.image.imread(io.BytesIO(plot.png), format="png")[..., :3]
    for edge in (pixels[:, 0], pixels[:, -1], pixels[0], pixels[-1]):         # nothing drawn up to an edge
        assert (edge > 0.98).all()


# ---------------------------------------------------------------------------------------------- what the card says
PROBE_STAGE = {"pairs": 0, "steps": 0, "epochs": 0, "iterations": 0, "batch_size": 16, "lr": 0.0, "loss_first": None,
               "loss_last": None, "method": "probe", "head": "logistic", "pooling": "head", "head_fit_s": 0.007,
               "head_train_accuracy": 0.91667, "seconds": 0.07}       # results.json's setfit of a --method probe run


def edit_results(run: Path, **changes) -> dict:
    results = {**json.loads((run / "results.json").read_text()), **changes}
    (run / "results.json").write_text(json.dumps(results))
    return results


def card_of(run: Path, results: dict) -> str:
    return write_model_card(run / "model", results, yaml.safe_load((run / "config.yaml").read_text()), {}).read_text()


def test_a_probe_run_is_a_linear_probe_in_the_card_and_the_report(tmp_path):
    run = fabricate(tmp_path / "probe", "single_label_classification", names=["a", "b", "c"])
    results = edit_results(run, setfit=PROBE_STAGE, train={
        "runtime_s": 0.01, "training_s": 0.0, "eval_s": 0.0, "samples_per_second": None, "steps": 0, "epochs": 0.0,
        "num_samples": 36, "global_batch_size": 8, "setup_s": 1.3, "num_processes": 1, "mixed_precision": "no",
        "device": "cpu"})
    card = card_of(run, results)
    time_section = card[card.index("## Training time"):card.index("## How to use")]
    assert "The linear probe: 0.1 s (the frozen encoder's embeddings of the 36 training rows" in time_section
    assert "SetFit" not in time_section and "pairs" not in time_section
    assert "a linear probe: the encoder frozen" in card and "SetFit" not in card
    text = html.unescape(check_self_contained(write_report(run))[0])
    assert "<h2>Linear probe</h2>" in text and "--method probe: a logistic-regression head fitted on the frozen" in text
    for wrong in ("Contrastive stage", "contrastive stage", "pair loss", "--method setfit", "pairs in"):
        assert wrong not in text, wrong


def test_the_card_names_the_saved_decision_rule_and_says_its_metrics_come_before_it(tmp_path):
    names = ["sport", "politics", "science"]
    run = fabricate(tmp_path / "topics", "multi_label_classification", names=names)
    plain = card_of(run, json.loads((run / "results.json").read_text()))     # no rule saved: 0.5 per label
    assert "probability is above 0.5)" in plain and "## Decision rule" not in plain
    rule = DecisionRule(kind="multi_label_classification", temperature=0.8, thresholds=[0.3, 0.5, 0.65],
                        objective="f1", fitted_on="all 50 validation rows")
    meta = json.loads((run / "model" / "tuneloop.json").read_text())
    (run / "model" / "tuneloop.json").write_text(json.dumps({**meta, "decision": rule.to_dict()}))
    results = edit_results(run, decision={
        "rule": rule.describe(), "fitted_on": rule.fitted_on, "measured": "2-fold cross-fit on the 50 validation rows",
        "thresholds": {"objective": "f1", "values": rule.thresholds, "at_default": {"f1_micro": 0.61},
                       "at_tuned": {"f1_micro": 0.72}}, "abstain": {"level": None, "curve": []}})
    card = card_of(run, results)
    problem = next(line for line in card.splitlines() if "**Problem type:**" in line)
    assert "above its own threshold" in problem and "above 0.5)" not in problem
    rules = card[card.index("## Decision rule"):card.index("## Training time")]
    assert rule.describe() in rules and "temperature T = 0.8" in rules and "fitted on all 50 validation rows" in rules
    assert "| politics | 0.5 |" in rules and "| science | 0.65 |" in rules and "| f1_micro | 0.6100 | 0.7200 |" in rules
    metrics = card[card.index("## Evaluation results"):card.index("## Decision rule")]
    assert "before the decision rule below" in metrics and "tuneloop evaluate --model MODEL" in metrics

    binary = fabricate(tmp_path / "binary", "single_label_classification", names=["no", "yes"])
    rule = DecisionRule(thresholds=[0.3], objective="recall@0.9", abstain_below=0.7, abstain_label="unsure")
    meta = json.loads((binary / "model" / "tuneloop.json").read_text())
    (binary / "model" / "tuneloop.json").write_text(json.dumps({**meta, "decision": rule.to_dict()}))
    card = card_of(binary, json.loads((binary / "results.json").read_text()))
    assert "`yes` when its probability is at least 0.3 (chosen for recall@0.9), else `no`" in card
    assert "is under 0.7 comes back as `unsure`" in card and "before the decision rule below" in card


def test_user_text_in_the_card_reads_as_itself_in_markdown(tmp_path):
    """Label names went into the card raw: `<urgent>` vanished as an HTML tag, `*a*` turned italic."""
    markdown = pytest.importorskip("markdown")
    markdown_it = pytest.importorskip("markdown_it")
    names = ["<urgent>", "*a* & b", "<script>x</script>", "$5 to $10", "_x_", "a|b", "[x](y)", "not_equivalent"]
    run = fabricate(tmp_path / "odd", "single_label_classification", names=names)
    config = yaml.safe_load((run / "config.yaml").read_text()) | {"train_file": "data/*new* <draft>.csv"}
    card = write_model_card(run / "model", json.loads((run / "results.json").read_text()), config, {}).read_text()
    labels = card[card.index("## Labels"):card.index("## Training hyperparameters")]
    title = next(line for line in card.splitlines() if line.startswith("# "))
    commonmark = markdown_it.MarkdownIt("commonmark").enable("table")
    for rendered in (markdown.markdown(labels + "\n" + title, extensions=["tables"]),
                     commonmark.render(labels + "\n" + title)):
        cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", rendered)]
        assert cells[1::2] == names
        assert set(re.findall(r"<(\w+)", rendered)) <= {"h1", "h2", "table", "thead", "tbody", "tr", "th", "td", "p"}
        assert "fine-tuned on *new* <draft>.csv" in html.unescape(re.sub(r"</?h1>", "", rendered))


def test_a_resumed_runs_card_and_report_give_the_time_since_the_resume(tmp_path):
    """Their runtime was the resumed process's part alone, called "in all"."""
    from tuneloop.training.checkpoint import checkpoint_name

    run = fabricate(tmp_path / "resumed", "single_label_classification", names=["no", "yes"])
    results = edit_results(run, resumed_from=str(run / "checkpoints" / checkpoint_name(30)))
    time_section = card_of(run, results).split("## Training time")[1].split("## How to use")[0]
    assert "1 min 15 s since the resume from step 30 (training 1 min 10 s, evaluation 5.2 s; the time before the " \
           "resume is not recorded)" in time_section and " in all " not in time_section
    assert "310.2 samples/s after the resume" in time_section
    text = html.unescape(check_self_contained(write_report(run))[0])
    assert "1 min 15 s since the resume from step 30 (training 1 min 10 s" in text
    assert "the time before the resume is not recorded" in text


# ---------------------------------------------------------------------------------------------- a decision rule
@pytest.fixture(scope="module")
def threshold_run(tiny_model, shared_mrpc_dir, tmp_path_factory):
    """A weak model (one epoch at a small learning rate) under a tuned cut-off and an abstain level: the rule
    decides many validation rows otherwise than argmax."""
    out = tmp_path_factory.mktemp("threshold") / "run"
    results = tuneloop.train(TrainConfig(task="mrpc", data_dir=str(shared_mrpc_dir), output_dir=str(out),
                                         **fast_options(tiny_model, epochs=1, lr=3e-4, report=True,
                                                        decision="threshold", abstain_below=0.55)))
    return out, results


def test_errors_csv_lists_the_rows_the_saved_rule_gets_wrong(threshold_run, shared_mrpc_dir):
    """errors.csv used argmax: it listed rows the saved model (its cut-off, applied by predict) gets right."""
    import csv

    out, results = threshold_run
    rule = DecisionRule.from_dict(json.loads((out / "model" / "tuneloop.json").read_text())["decision"])
    assert rule.thresholds, results["decision"]
    with np.load(out / "predictions" / "eval_validation.npz") as saved:
        logits, labels = saved["logits"], saved["labels"]
    decided, abstains = rule.predictions(logits), rule.abstains(logits)
    names = results["labels"]
    with open(out / "errors.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert {int(r["id"]) for r in rows} == set(np.flatnonzero(decided != labels).tolist())
    assert set(np.flatnonzero(decided != labels)) != set(np.flatnonzero(logits.argmax(-1) != labels))
    dev = (shared_mrpc_dir / "dev.tsv").read_text(encoding="utf-8-sig").splitlines()[1:]
    for r in rows:
        i = int(r["id"])
        assert r["text_b"] == dev[i].split("\t")[4]
        assert r["gold"] == names[labels[i]] != r["predicted"] == names[decided[i]]
        assert r["abstained"] == str(bool(abstains[i]))
        assert float(r["p_gold"]) == pytest.approx(float(np.exp(logits[i, labels[i]]) / np.exp(logits[i]).sum()),
                                                   abs=1e-5)           # the raw probabilities, kept
    page = html.unescape((out / "report.html").read_text(encoding="utf-8"))
    assert f"{len(rows)} wrong rows under the saved decision rule (above), most confidently wrong first" in page
    card = (out / "model" / "README.md").read_text(encoding="utf-8")      # the card the run wrote names the rule
    assert "## Decision rule" in card and "at least" in card and "before the decision rule below" in card

    from tuneloop.analysis.inspect import describe_failures

    said = describe_failures(out).splitlines()[0]
    assert f"{len(rows)} validation rows the model gets wrong under its saved decision rule ({rule.describe()})" in said

"""`tuneloop distill`: a teacher's outputs computed once and cached, the student trained on them through the loop,
an ordinary model folder at the end; the distillation loss; students with fewer layers; bad input."""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import SPECIALS, WORDS, fast_options, keyword_pair

import tuneloop
from tuneloop.cli import main
from tuneloop.data.soft_targets import SoftTargets
from tuneloop.exceptions import Interrupted, TuneloopError

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def texts(n: int, seed: int) -> list[tuple[int, str]]:
    rng = random.Random(seed)
    return [(label, b) for label, _, b in (keyword_pair(rng) for _ in range(n))]


def write_csv(path: Path, header: list[str], rows: list[list]) -> str:
    path.write_text(",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict:
    folder = tmp_path_factory.mktemp("distill-data")
    names = ("no", "yes")
    return {
        "unlabeled": write_csv(folder / "unlabeled.csv", ["text"], [[t] for _, t in texts(64, 1)]),
        "labelled": write_csv(folder / "labelled.csv", ["text", "label"], [[t, names[y]] for y, t in texts(24, 2)]),
        "dev": write_csv(folder / "dev.csv", ["text", "label"], [[t, names[y]] for y, t in texts(40, 3)]),
        # an LLM's or annotators' soft labels: mostly right, never certain
        "soft": write_csv(folder / "soft.csv", ["text", "no", "yes"],
                          [[t, 0.1 if y else 0.9, 0.9 if y else 0.1] for y, t in texts(96, 4)]),
    }


def plain_teacher(folder: Path, tiny_model: str, problem_type: str, names: list[str],
                  other_vocabulary: bool = False) -> str:
    """The tiny BERT as a plain transformers classifier folder of the given kind (untrained head: any outputs);
    `other_vocabulary`: its tokenizer numbers the words the other way round from the tiny BERT's."""
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer, BertTokenizer

    config = AutoConfig.from_pretrained(tiny_model, num_labels=max(len(names), 1), problem_type=problem_type,
                                        id2label=dict(enumerate(names or ["LABEL_0"])),
                                        label2id={n: i for i, n in enumerate(names or ["LABEL_0"])})
    torch.manual_seed(1)
    AutoModelForSequenceClassification.from_pretrained(tiny_model, config=config,
                                                       ignore_mismatched_sizes=True).save_pretrained(folder)
    if other_vocabulary:
        vocab = {w: i for i, w in enumerate(SPECIALS + WORDS[::-1])}
        BertTokenizer(vocab=vocab, do_lower_case=True, model_max_length=64).save_pretrained(folder)
    else:
        AutoTokenizer.from_pretrained(tiny_model).save_pretrained(folder)
    return str(folder)


def options(tiny_model: str, out: Path, **extra) -> dict:
    return fast_options(tiny_model, **{"output_dir": str(out), "calibrate": "none", "epochs": 2, **extra})


def test_distill_loss_is_hintons_and_plain_loss_at_t1():
    from tuneloop.objective import objective_for

    torch.manual_seed(0)
    logits, teacher = torch.randn(5, 3), torch.randn(5, 3)
    soft, labels = teacher.softmax(-1), torch.tensor([0, 2, 1, 1, 0])
    gold = torch.tensor([1, 0, 1, 0, 0])
    single = objective_for("single_label_classification")
    assert torch.allclose(single.distill_loss(logits, soft, 1.0), single.loss(logits, None, soft=soft))
    t = 3.0                  # T² × cross entropy between softmax(teacher / T) and log_softmax(student / T) ...
    expected = -(teacher / t).softmax(-1).mul((logits / t).log_softmax(-1)).sum(-1).mean() * t * t
    # ... plus the gold term over the two rows that have gold labels
    expected += 0.5 * torch.nn.functional.cross_entropy(logits[[0, 2]], labels[[0, 2]])
    assert torch.allclose(single.distill_loss(logits, soft, t, labels, gold, 0.5), expected, atol=1e-5)
    multi = objective_for("multi_label_classification")
    p = teacher.sigmoid()
    softened = (teacher / t).sigmoid()
    assert torch.allclose(multi.soften(p, t), softened, atol=1e-5)
    regression = objective_for("regression")      # no temperature: the scores are the targets
    scores = teacher[:, :1]
    assert torch.allclose(regression.distill_loss(logits[:, :1], scores, t), ((logits[:, :1] - scores) ** 2).mean())


def test_student_layers_keep_every_other_layer(tiny_model, tmp_path):
    from safetensors.torch import load_file

    from tuneloop.model.shrink import keep_layers, kept_layers

    assert kept_layers(6, 3) == [0, 2, 4] and kept_layers(6, 2) == [0, 3] and kept_layers(2, 2) == [0, 1]
    assert keep_layers(tiny_model, 1, tmp_path / "student") == [0]
    config = json.loads((tmp_path / "student" / "config.json").read_text())
    assert config["num_hidden_layers"] == 1
    source = load_file(f"{tiny_model}/model.safetensors")
    student = load_file(tmp_path / "student" / "model.safetensors")
    kept = [k for k in student if "encoder.layer." in k]
    assert kept and all(".layer.0." in k for k in kept)
    assert all(torch.equal(student[k], source["bert." + k]) for k in kept)
    with pytest.raises(TuneloopError, match="has 2 layers"):
        keep_layers(tiny_model, 3, tmp_path / "too-many")


def test_student_layers_can_name_the_layers_to_keep(tiny_model, tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertConfig, BertModel

    from tuneloop.model.shrink import keep_layers

    deep = tmp_path / "four-layers"
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=60, hidden_size=32, num_hidden_layers=4, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(deep)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(deep)
    assert keep_layers(str(deep), [0, 3], tmp_path / "ends") == [0, 3]
    assert json.loads((tmp_path / "ends" / "config.json").read_text())["num_hidden_layers"] == 2
    source, student = load_file(deep / "model.safetensors"), load_file(tmp_path / "ends" / "model.safetensors")
    for mine, theirs in ((0, 0), (1, 3)):          # the student's layer 1 is the source's layer 3
        names = [k for k in student if f"encoder.layer.{mine}." in k]
        assert names and all(torch.equal(student[k], source[k.replace(f".{mine}.", f".{theirs}.", 1)])
                             for k in names)
    assert keep_layers(str(deep), [2], tmp_path / "two") == [0, 2]         # one number: how many, evenly spaced
    with pytest.raises(TuneloopError, match="numbered 0 to 3"):
        keep_layers(str(deep), [0, 4], tmp_path / "no-such-layer")


def test_the_student_is_cut_from_the_teacher_when_it_is_the_same_network(tiny_model, files, tmp_path, capsys):
    """--student-init auto: a teacher fine-tuned from --model gives the student its own fine-tuned layers
    (DistilBERT's initialisation); `model` cuts --model instead; a teacher of another network or without PyTorch
    layers leaves it to --model; where it came from is in results.json."""
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    tuned = AutoModelForSequenceClassification.from_pretrained(teacher)
    with torch.no_grad():                             # "fine-tuned": its layers are no longer the tiny BERT's
        for p in tuned.bert.encoder.parameters():
            p.add_(0.25)
    tuned.save_pretrained(teacher)
    common = dict(teacher=teacher, unlabeled_file=files["unlabeled"], student_layers=1, max_steps=2)
    layer = "encoder.layer.0.attention.self.query.weight"
    for init, source in (("auto", teacher), ("model", tiny_model)):
        out = tmp_path / f"student-{init}"
        result = tuneloop.distill(**common, student_init=init, **options(tiny_model, out))
        assert result["distillation"]["setup"]["student_from"]["model"] == source
        cut = load_file(out / "distill" / "student_init" / "model.safetensors")[layer]
        assert torch.equal(cut, load_file(f"{source}/model.safetensors")["bert." + layer])
    d = tuneloop.distill(teacher=files["soft"], student_layers=1, max_steps=2, **options(tiny_model, tmp_path / "f"))
    assert d["distillation"]["setup"]["student_from"]["model"] == tiny_model      # a soft-label file: --model's
    common = ["--model", tiny_model, "--output-dir", str(tmp_path / "refused")]
    capsys.readouterr()
    assert main(["distill", "--teacher", files["soft"], "--student-layers", "1", "--student-init", "teacher",
                 *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "--student-init teacher:" in err and "no PyTorch layers" in err and len(err.splitlines()) == 1
    assert main(["distill", "--teacher", teacher, "--unlabeled-file", files["unlabeled"], "--student-init",
                 "teacher", *common]) == 2
    assert "give --student-layers N too" in capsys.readouterr().err


@pytest.mark.parametrize("given, message", [("2,1", "list distinct layers in order"),
                                            ("0,0", "list distinct layers in order"),
                                            ("0", "must be at least 1")])
def test_student_layers_that_cannot_be_kept_are_one_line(files, tmp_path, capsys, given, message):
    assert main(["distill", "--teacher", files["soft"], "--student-layers", given,
                 "--output-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "--student-layers" in err and message in err and len(err.splitlines()) == 1


def test_soft_label_file_teacher_gives_an_ordinary_model_that_exports(tiny_model, files, tmp_path):
    out = tmp_path / "student"
    results = tuneloop.distill(teacher=files["soft"], train_file=files["labelled"], validation_file=files["dev"],
                               compare_labels_only=False, **options(tiny_model, out, epochs=3))
    cached = SoftTargets.load(out / "distill" / "soft_targets.npz")
    assert cached.labels.names == ["no", "yes"] and cached.soft.shape == (96 + 24, 2)
    assert np.allclose(cached.soft[:96].max(1), 0.9) and list(cached.gold) == [0] * 96 + [1] * 24
    assert np.isin(cached.soft[96:], (0.0, 1.0)).all()       # labelled rows: their labels as targets
    d = results["distillation"]
    assert "teacher" not in d and d["student"]["metrics"]["accuracy"] >= 0.9      # learnt from the soft labels
    from tuneloop.report import read_run
    from tuneloop.report.sections import distillation_section

    shown = "".join(distillation_section(read_run(out)))      # report.html's section
    assert "Distillation" in shown and "student (this model)" in shown and "teacher" not in shown.split("</p>")[-1]
    with tuneloop.load(out) as clf:                          # an ordinary tuneloop model
        assert clf.labels == ["no", "yes"]
        assert clf.predict("the dog sees alpha")["label"] == "yes"
    from tuneloop.deploy.export import export_model

    report = export_model(str(out), str(tmp_path / "exported"), quiet=True)   # the gate: validation re-scored
    assert report["gate"]["verdict"] == "pass"
    with tuneloop.load(tmp_path / "exported") as exported:
        assert exported.backend == "onnx" and exported.labels == ["no", "yes"]


def test_multi_label_and_regression_teachers_and_another_tokenizer(tiny_model, files, tmp_path):
    from tuneloop.predict.classifier import Classifier

    unlabeled = [t for _, t in texts(64, 1)]
    for kind, names in (("multi_label_classification", ["a", "b", "c"]), ("regression", [])):
        # the multi-label teacher reads another vocabulary than the student: the student tokenizes the texts itself
        teacher = plain_teacher(tmp_path / f"teacher-{kind}", tiny_model, kind, names, other_vocabulary=bool(names))
        out = tmp_path / f"student-{kind}"
        tuneloop.distill(teacher=teacher, unlabeled_file=files["unlabeled"], max_steps=4,
                         **options(tiny_model, out))
        cached = SoftTargets.load(out / "distill" / "soft_targets.npz")
        with Classifier.load(teacher) as clf:
            expected = clf.objective.probabilities(clf.logits([(t, None) for t in unlabeled]))
        assert cached.labels.problem_type == kind and np.allclose(cached.soft, expected, atol=1e-5)
        if names:
            from transformers import AutoTokenizer

            ids = [AutoTokenizer.from_pretrained(m)("the cat")["input_ids"] for m in (teacher, tiny_model)]
            assert ids[0] != ids[1]
        with tuneloop.load(out) as student:
            assert student.problem_type == kind and student.labels == names


def test_kill_and_resume_equals_an_unbroken_run_without_the_teacher_again(tiny_model, files, tmp_path,
                                                                          monkeypatch):
    from safetensors.torch import load_file

    from tuneloop.experiments import teacher as teacher_module

    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    common = dict(teacher=teacher, unlabeled_file=files["unlabeled"], train_file=files["labelled"],
                  compare_labels_only=False, save_every=4, max_steps=10)      # validated on held-out rows
    tuneloop.distill(**common, **options(tiny_model, tmp_path / "unbroken"))

    def kill(state):
        if state.step == 6:                       # after the checkpoint of step 4: the process dies here
            raise KeyboardInterrupt

    def stop_button(state):                       # SIGINT: a checkpoint, then one line saying how to go on
        if state.step == 5:
            os.kill(os.getpid(), signal.SIGINT)

    with pytest.raises(KeyboardInterrupt):
        tuneloop.distill(**common, on_step=kill, **options(tiny_model, tmp_path / "broken"))
    with pytest.raises(Interrupted, match=r"Resume with: tuneloop distill --output-dir .*tuneloop\.distill\(\.\.\."):
        tuneloop.distill(**common, on_step=stop_button, **options(tiny_model, tmp_path / "stopped"))
    monkeypatch.setattr(teacher_module, "teacher_outputs", lambda *a, **k: pytest.fail("teacher recomputed"))
    a = load_file(tmp_path / "unbroken" / "model" / "model.safetensors")
    for run in ("broken", "stopped"):
        tuneloop.distill(**common, resume="latest", **options(tiny_model, tmp_path / run))
        b = load_file(tmp_path / run / "model" / "model.safetensors")
        assert all(torch.equal(a[k], b[k]) for k in a), run


def test_two_cpu_processes_train_what_one_does(tiny_model, files, tmp_path):
    from test_distributed import max_difference, run, torchrun

    args = ["--teacher", files["soft"], "--model", tiny_model, "--lr", "3e-3",
            "--max-steps", "6", "--quiet", "--seed", "0", "--mixed-precision", "no", "--no-report",
            "--baseline", "none", "--small-data", "off", "--calibrate", "none", "--eval-batch-size", "8"]
    run(torchrun(2) + ["distill", *args, "--batch-size", "4", "--output-dir", str(tmp_path / "two")])
    assert main(["distill", *args, "--batch-size", "8", "--output-dir", str(tmp_path / "one")]) == 0
    assert max_difference(tmp_path / "one", tmp_path / "two") < 1e-3


def test_bad_input_is_one_line(tiny_model, files, tmp_path, capsys):
    bad = write_csv(tmp_path / "bad.csv", ["text", "no", "yes"], [["a cat", 0.5, 0.5], ["a dog", 0.7, 0.2]])
    common = ["--model", tiny_model, "--quiet", "--validation-file", files["dev"]]
    assert main(["distill", "--teacher", bad, "--output-dir", str(tmp_path / "a"), *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "line 3" in err and "sum to 0.9" in err and len(err.splitlines()) == 1
    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["neg", "pos"])
    capsys.readouterr()
    assert main(["distill", "--teacher", teacher, "--unlabeled-file", files["unlabeled"], "--train-file",
                 files["labelled"], "--output-dir", str(tmp_path / "b"), *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "teacher's labels (neg, pos) differ" in err and len(err.splitlines()) == 1
    assert main(["distill", "--teacher", teacher, "--unlabeled-file", files["unlabeled"], "--temperature", "0",
                 "--output-dir", str(tmp_path / "d")]) == 2
    assert "--temperature: must be a positive number" in capsys.readouterr().err
    assert main(["distill", "--unlabeled-file", files["unlabeled"], "--output-dir", str(tmp_path / "c")]) == 2
    assert "--teacher" in capsys.readouterr().err
    missing = str(tmp_path / "missing.csv")       # was a FileNotFoundError traceback
    assert main(["distill", "--teacher", teacher, "--unlabeled-file", missing, "--output-dir",
                 str(tmp_path / "e"), *common]) == 2
    assert capsys.readouterr().err.strip().endswith(f"--unlabeled-file: {missing} does not exist or is not a file")
    assert main(["distill", "--teacher", str(tmp_path), "--unlabeled-file", files["unlabeled"], "--output-dir",
                 str(tmp_path / "f"), *common]) == 2
    err = capsys.readouterr().err.strip()       # the teacher's folder is named as --teacher's, not --model's
    assert f"--teacher {tmp_path}: the folder has no config.json" in err and len(err.splitlines()) == 1


def test_the_feature_loss_is_the_cosine_distance_of_the_mean_hidden_states(tiny_model, files, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from tuneloop.experiments.teacher import features_in_logits
    from tuneloop.model.pooling import masked_mean

    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    model = AutoModelForSequenceClassification.from_pretrained(teacher).eval()
    batch = AutoTokenizer.from_pretrained(teacher)(["a cat sat", "the dog red green"], padding=True,
                                                   return_tensors="pt")
    with torch.no_grad():
        plain = model(**batch)
        with features_in_logits(model):
            both = model(**batch).logits
        whole = model(**batch, output_hidden_states=True)
    assert torch.allclose(both[:, :2], plain.logits)                   # the logits as they were, then the mean
    assert torch.allclose(both[:, 2:], masked_mean(whole.hidden_states[-1], batch["attention_mask"], False))
    assert model(**batch).logits.shape[1] == 2                          # the hooks are gone
    out = tmp_path / "student"
    results = tuneloop.distill(teacher=teacher, unlabeled_file=files["unlabeled"], train_file=files["labelled"],
                               validation_file=files["dev"], compare_labels_only=False, feature_weight=1.0,
                               max_steps=6, **options(tiny_model, out))
    cached = SoftTargets.load(out / "distill" / "soft_targets.npz")
    assert cached.features.shape == (64 + 24, model.config.hidden_size)   # every text's features, once
    tuneloop.distill(teacher=teacher, unlabeled_file=files["unlabeled"], train_file=files["labelled"],
                     validation_file=files["dev"], compare_labels_only=False, max_steps=6, feature_weight=0.0,
                     **options(tiny_model, tmp_path / "plain"))
    assert SoftTargets.load(tmp_path / "plain" / "distill" / "soft_targets.npz").features is None   # none computed
    from safetensors.torch import load_file

    with_term, without = (load_file(folder / "model" / "model.safetensors") for folder in (out, tmp_path / "plain"))
    assert all(torch.isfinite(v).all() for v in with_term.values())
    moved = [k for k in with_term if "encoder.layer" in k and not torch.equal(with_term[k], without[k])]
    assert moved                                   # the same seed and rows: only the feature term differs
    assert results["eval"]["accuracy"] >= 0
    # by default: on where the teacher is a PyTorch model as wide as the student, off for a soft-label file
    from tuneloop.config.options import TrainConfig
    from tuneloop.experiments import distill as d

    wide = TrainConfig(teacher=teacher, model=tiny_model)
    assert d.feature_weight(wide) == d.FEATURE_WEIGHT and d.feature_weight(wide.replace(feature_weight=0.0)) == 0
    assert d.feature_weight(TrainConfig(teacher=files["soft"], model=tiny_model)) == 0


def test_the_feature_loss_is_refused_where_features_cannot_be_compared(tiny_model, files, tmp_path, capsys):
    common = ["--model", tiny_model, "--quiet", "--feature-weight", "1"]
    assert main(["distill", "--teacher", files["soft"], "--output-dir", str(tmp_path / "a"), *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "--feature-weight: a soft-label file holds no teacher features" in err and len(err.splitlines()) == 1
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    config = AutoConfig.from_pretrained(tiny_model, num_labels=2, id2label={0: "no", 1: "yes"},
                                        label2id={"no": 0, "yes": 1})
    config.hidden_size, config.intermediate_size = config.hidden_size * 2, config.intermediate_size * 2
    wide = tmp_path / "wide"
    AutoModelForSequenceClassification.from_config(config).save_pretrained(wide)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(wide)
    capsys.readouterr()
    assert main(["distill", "--teacher", str(wide), "--unlabeled-file", files["unlabeled"], "--output-dir",
                 str(tmp_path / "b"), *common]) == 2
    err = capsys.readouterr().err.strip()
    assert "hidden size" in err and "is not the teacher's" in err and len(err.splitlines()) == 1
    assert main(["distill", "--teacher", str(wide), "--unlabeled-file", files["unlabeled"], "--output-dir",
                 str(tmp_path / "c"), *common[:-1], "-1"]) == 2
    assert "--feature-weight: must be >= 0" in capsys.readouterr().err
    from tuneloop.config.options import TrainConfig
    from tuneloop.experiments.distill import feature_weight

    assert feature_weight(TrainConfig(teacher=str(wide), model=tiny_model)) == 0     # by default: off, not refused


def test_the_student_trains_at_least_the_minimum_steps_unless_you_set_its_length():
    from tuneloop.config.options import TrainConfig
    from tuneloop.experiments import distill as d

    plain = TrainConfig(batch_size=32, epochs=3)                      # 1,120 texts: 35 steps an epoch
    assert d.student_epochs(plain, 1120, 1) == math.ceil(d.STUDENT_MIN_STEPS / 35) == 15
    assert d.student_epochs(plain, 1120, 2) == math.ceil(d.STUDENT_MIN_STEPS / 18)   # each process a share
    assert d.student_epochs(plain, 40, 1) == d.STUDENT_MAX_EPOCHS                     # 2 steps an epoch: capped
    assert d.student_epochs(plain, 100_000, 1) == 3                                   # already past the floor
    assert d.student_epochs(plain.replace(chosen=["epochs"]), 1120, 1) == 3           # yours is kept
    assert d.student_epochs(plain.replace(max_steps=40), 1120, 1) == 3


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))


def test_a_glue_task_teacher_reads_the_class_ids_glue_files_write(tiny_model, tmp_path):
    """A teacher trained with --task mrpc names its classes not_equivalent/equivalent; labelled files in GLUE's way
    write 0/1, and distill refused them ("the teacher's labels differ from the given labels")."""
    from conftest import write_mrpc_folder

    teacher = tmp_path / "teacher"
    tuneloop.train(**fast_options(tiny_model, task="mrpc", data_dir=str(write_mrpc_folder(tmp_path / "MRPC")),
                                  output_dir=str(teacher), max_steps=4))
    rng = random.Random(5)
    rows = [keyword_pair(rng) for _ in range(100)]
    header = ["sentence1", "sentence2"]
    unlabeled = write_csv(tmp_path / "unlabeled.csv", header, [[a, b] for _, a, b in rows[:60]])
    labelled = write_csv(tmp_path / "labelled.csv", [*header, "label"], [[a, b, y] for y, a, b in rows[60:80]])
    dev = write_csv(tmp_path / "dev.csv", [*header, "label"], [[a, b, y] for y, a, b in rows[80:]])
    result = tuneloop.distill(teacher=str(teacher), unlabeled_file=unlabeled, train_file=labelled,
                              validation_file=dev, **options(tiny_model, tmp_path / "student", max_steps=4))
    d = result["distillation"]
    assert d["teacher"]["metrics"]["num_samples"] == d["student"]["metrics"]["num_samples"] == 20
    assert d["labels_only"]["metrics"]["num_samples"] == 20
    assert tuneloop.load(tmp_path / "student").labels == ["not_equivalent", "equivalent"]
    assert set(d["teacher"]["metrics"]) >= {"accuracy", "f1"}                      # the task's metrics for both
    assert set(d["student"]["metrics"]) >= {"accuracy", "f1"}


def cli_options(tiny_model: str, out: Path) -> list[str]:
    return ["--model", tiny_model, "--lr", "3e-3", "--max-steps", "2", "--batch-size", "8", "--quiet", "--seed", "0",
            "--mixed-precision", "no", "--no-report", "--baseline", "none", "--small-data", "off", "--calibrate",
            "none", "--no-compare-labels-only", "--output-dir", str(out)]


def test_a_soft_label_files_cached_targets_follow_the_given_labels_and_the_problem_type(tiny_model, files, tmp_path):
    """The labelled rows' targets of a soft-label file are their labels: relabelled and rerun with --overwrite,
    the cached targets were the old labels'; rerun with another --problem-type, the student stayed single-label."""
    labelled = tmp_path / "labelled.csv"
    rows = [[t, ("no", "yes")[y]] for y, t in texts(24, 2)]
    write_csv(labelled, ["text", "label"], rows)
    common = dict(teacher=files["soft"], train_file=str(labelled), compare_labels_only=False, max_steps=1)
    out = tmp_path / "student"
    tuneloop.distill(**common, **options(tiny_model, out))
    first = SoftTargets.load(out / "distill" / "soft_targets.npz").soft[96:]
    write_csv(labelled, ["text", "label"], [[t, "yes" if y == "no" else "no"] for t, y in rows])   # relabelled
    tuneloop.distill(**common, **options(tiny_model, out, overwrite=True))
    cached = SoftTargets.load(out / "distill" / "soft_targets.npz")
    assert np.array_equal(cached.soft[96:], 1 - first)          # the new labels' one-hot rows
    table = [json.loads(line) for line in (out / "distill" / "train.jsonl").read_text().splitlines()][96:]
    assert [r["label"] for r in table] == [("no", "yes")[int(p[1])] for p in cached.soft[96:]]
    tuneloop.distill(teacher=files["soft"], max_steps=1, problem_type="multi_label_classification",
                     **options(tiny_model, out, overwrite=True))
    assert SoftTargets.load(out / "distill" / "soft_targets.npz").labels.problem_type == "multi_label_classification"
    with tuneloop.load(out) as student:
        assert student.problem_type == "multi_label_classification"


def test_a_regression_teacher_with_given_labels_trains_on_numbers_and_says_how_near_it_is(tiny_model, files,
                                                                                          tmp_path, capsys):
    """The given labels of a regression teacher went into the student's table as text beside the teacher's scores
    (the run stopped: "is a text but ... is a number"); they are read as numbers, a decimal-comma file's commas
    included; the summary says the mean absolute difference and the correlation, not "agreement nan%"."""
    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "regression", [])
    given = [(t, f"{y + 0.25 * (i % 3)}".replace(".", ",")) for i, (y, t) in enumerate(texts(24, 2))]
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("text;score\n" + "".join(f"{t};{y}\n" for t, y in given))   # Excel's ';' file: 1,25
    dev = write_csv(tmp_path / "dev.csv", ["text", "score"], [[t, y + 0.5] for y, t in texts(20, 3)])
    out = tmp_path / "student"
    capsys.readouterr()
    assert main(["distill", "--teacher", teacher, "--unlabeled-file", files["unlabeled"], "--train-file",
                 str(labelled), "--validation-file", dev, *cli_options(tiny_model, out)]) == 0
    printed = capsys.readouterr().out
    table = [json.loads(line) for line in (out / "distill" / "train.jsonl").read_text().splitlines()]
    assert [r["score"] for r in table[64:]] == [float(y.replace(",", ".")) for _, y in given]
    assert all(isinstance(r["score"], float) for r in table)
    last = printed.strip().splitlines()[-1]
    assert "nan" not in printed and "mean absolute difference" in last and "pearson" in last, printed
    assert "student: pearson" in printed or "student: mse" in printed or "student: rmse" in printed, printed


def test_files_whose_label_column_is_not_label_distill_and_a_failed_start_does_not_block_a_rerun(tiny_model,
                                                                                                  files, tmp_path):
    """Files whose label column is `category` train, but distill read --validation-file by the table's own name
    (`label`) and stopped; a distillation that stopped before its student's run left OUT/distill/ behind, and the
    rerun was refused."""
    teacher = plain_teacher(tmp_path / "teacher", tiny_model, "single_label_classification", ["no", "yes"])
    names = ("no", "yes")
    labelled = write_csv(tmp_path / "labelled.csv", ["text", "category"], [[t, names[y]] for y, t in texts(24, 2)])
    dev = write_csv(tmp_path / "dev.csv", ["text", "category"], [[t, names[y]] for y, t in texts(20, 3)])
    wrong = write_csv(tmp_path / "wrong.csv", ["text", "category"], [[t, "maybe"] for _, t in texts(20, 3)])
    common = dict(teacher=teacher, unlabeled_file=files["unlabeled"], train_file=labelled,
                  compare_labels_only=False, max_steps=2)
    out = tmp_path / "student"
    with pytest.raises(TuneloopError, match="maybe are not the teacher's"):       # before the student's run
        tuneloop.distill(**common, validation_file=wrong, **options(tiny_model, out))
    assert (out / "distill").is_dir() and not (out / "config.yaml").exists()
    result = tuneloop.distill(**common, validation_file=dev, **options(tiny_model, out))   # no --overwrite
    d = result["distillation"]
    assert d["teacher"]["metrics"]["num_samples"] == d["student"]["metrics"]["num_samples"] == 20
    assert result["eval"]["num_samples"] == 20                  # the student validated on dev.csv's rows
    with pytest.raises(TuneloopError, match="already holds"):   # a finished distillation is still kept
        tuneloop.distill(**common, validation_file=dev, **options(tiny_model, out))


def test_distill_writes_no_report_with_no_report(tiny_model, files, tmp_path):
    out = tmp_path / "student"
    tuneloop.distill(teacher=files["soft"], max_steps=1, **options(tiny_model, out, report=False))
    assert (out / "results.json").is_file() and not (out / "report.html").exists()


def test_the_summary_shows_the_students_metric_without_a_teacher_model_and_regression_figures(tiny_model, files,
                                                                                              tmp_path, capsys):
    from tuneloop.cli.commands import print_distillation

    out = tmp_path / "student"
    capsys.readouterr()
    assert main(["distill", "--teacher", files["soft"], "--validation-file", files["dev"],
                 *cli_options(tiny_model, out)]) == 0
    student = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("student:"))
    assert student.startswith("student: accuracy "), student
    d = json.loads((out / "results.json").read_text())["distillation"]
    assert d["main_metric"] == "accuracy" and "kept" not in d and "teacher" not in d
    measured = {"metrics": {"pearson": 0.5}, "rows_per_s": 100.0}
    print_distillation({"main_metric": "pearson", "teacher": measured, "student": measured, "speedup": 2.0,
                        "student_vs_teacher": {"mean_abs_difference": 0.125, "pearson": None}})
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert "nan" not in last and "mean absolute difference 0.125" in last and "2.00x" in last, last


def test_the_labels_only_student_reads_the_given_labels_as_the_teacher_does(tiny_model, files, tmp_path):
    """A teacher trained on "a|b" labels with --label-separator "|": the labels-only student guessed the given files
    again without it, and trained single-label on classes like "a|b"."""
    tags = ["a|b", "c", "b", "a"]
    rows = [[t, tags[i % 4]] for i, (_, t) in enumerate(texts(40, 2))]
    labelled = write_csv(tmp_path / "labelled.csv", ["text", "tags"], rows[:24])
    dev = write_csv(tmp_path / "dev.csv", ["text", "tags"], rows[24:])
    teacher = tmp_path / "teacher"
    tuneloop.train(**fast_options(tiny_model, train_file=labelled, validation_file=dev, label_separator="|",
                                  output_dir=str(teacher), max_steps=2))
    result = tuneloop.distill(teacher=str(teacher), unlabeled_file=files["unlabeled"], train_file=labelled,
                              validation_file=dev, **options(tiny_model, tmp_path / "student", max_steps=2))
    d = result["distillation"]
    assert "f1_micro" in d["labels_only"]["metrics"] and "f1_micro" in d["student"]["metrics"]
    with tuneloop.load(tmp_path / "student" / "distill" / "labels_only") as labels_only:
        assert labels_only.problem_type == "multi_label_classification" and labels_only.labels == ["a", "b", "c"]


def test_the_reports_section_says_how_near_the_student_is_without_a_share_kept():
    """A teacher model whose main metric gives no share (`kept` absent: 0, or none): the agreement was not shown."""
    from types import SimpleNamespace

    from tuneloop.report.sections import distillation_section

    model = {"metrics": {"accuracy": 0.0}, "rows_per_s": 100.0, "parameters": 10}
    d = {"rows": 4, "validation_file": "dev.csv", "cpu": "x", "main_metric": "accuracy", "teacher": model,
         "student": {**model, "rows_per_s": 250.0}, "student_vs_teacher": {"agreement": 0.75}, "speedup": 2.5}
    shown = "".join(distillation_section(SimpleNamespace(results={"distillation": d})))
    assert "The student runs at 2.50× the teacher's rows/s, and answers as the teacher on 75.0% of the rows." in shown
    kept = "".join(distillation_section(SimpleNamespace(results={"distillation": {**d, "kept": 0.9}})))
    assert "The student keeps 90.0% of the teacher's accuracy at 2.50× its rows/s" in kept
    near = "".join(distillation_section(SimpleNamespace(results={"distillation": {**d, "difference": -0.05}})))
    assert "The student is -0.05 from the teacher's accuracy (student minus teacher) at 2.50× its rows/s" in near


def test_a_lora_teachers_student_is_cut_from_its_merged_layers(tiny_model, files, tmp_path):
    """--teacher <a --lora run> with --student-layers (--student-init auto: the teacher is the same network): the
    student is cut from the teacher's base with its adapters merged in, not from the adapter folder (no weights)."""
    from safetensors.torch import load_file

    teacher = tmp_path / "teacher"
    tuneloop.train(**fast_options(tiny_model, lora=True, lr=1e-2, max_steps=4, output_dir=str(teacher)),
                   train_file=files["labelled"], validation_file=files["dev"])
    out = tmp_path / "student"
    result = tuneloop.distill(teacher=str(teacher), unlabeled_file=files["unlabeled"], student_layers=1, max_steps=2,
                              **options(tiny_model, out))
    assert result["distillation"]["setup"]["student_from"]["model"] == str(teacher / "model")
    layer = "encoder.layer.0.attention.self.query.weight"             # one of the adapted matrices
    cut = load_file(out / "distill" / "student_init" / "model.safetensors")[layer]
    with tuneloop.load(teacher) as merged:
        assert torch.equal(cut, merged.model.state_dict()["bert." + layer])
    assert not torch.equal(cut, load_file(f"{tiny_model}/model.safetensors")["bert." + layer])

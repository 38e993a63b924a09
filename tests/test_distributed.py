"""Several processes on CPU (gloo), the same engine as multi-GPU: each example counted once, one writer,
the same steps, weights and learning rates as one process."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import fast_options, write_mrpc_folder
from safetensors.torch import load_file

import tuneloop
from tuneloop import TrainConfig
from tuneloop.training.progress import read_metrics

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env():
    return {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}


def train_args(model, data, out, **extra) -> list[str]:
    opts = {"task": "mrpc", "data_dir": str(data), "model": model, "output_dir": str(out), "lr": 3e-3,
            "seed": 0, "log_every": 1, "quiet": True, "mixed_precision": "no", "report": False, "small_data": "off",
            **extra}
    args = []
    for key, value in opts.items():
        flag = "--" + key.replace("_", "-")
        args += [flag if value is not False else "--no-" + flag[2:]] + ([] if isinstance(value, bool) else [str(value)])
    return args


def run(cmd: list[str], timeout=240):
    proc = subprocess.run(cmd, cwd=ROOT, env=env(), capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def torchrun(nproc: int) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port",
            str(free_port()), "-m", "tuneloop"]


def torchrun_commands(nproc: int, folder: Path, *commands: list[str]) -> list[str]:
    """One torchrun launch that runs several tuneloop commands in turn in the same processes (one start-up)."""
    script = folder / "commands.py"
    script.write_text("import sys\nfrom tuneloop.cli import main\n"
                      f"sys.exit(max(main(args) for args in {[list(c) for c in commands]!r}))\n")
    return [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc), "--master_port",
            str(free_port()), str(script)]


def weights(run_dir: Path) -> dict:
    return load_file(str(run_dir / "model" / "model.safetensors"))


def max_difference(a: Path, b: Path) -> float:
    """The largest weight difference, attention key biases aside: softmax over keys is unchanged by a constant added
    to every score, so their gradient is zero but for float noise, which Adam scales up to steps of the learning rate
    (two runs that agree to 1e-7 everywhere else were 8e-4 apart there, as far as two seeds)."""
    wa, wb = weights(a), weights(b)
    return max(float((wa[k] - wb[k]).abs().max()) for k in wa if not k.endswith("attention.self.key.bias"))


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    # 61 validation examples: not a multiple of 2 processes × eval batch 8, so the last batch is padded
    return write_mrpc_folder(tmp_path_factory.mktemp("dist") / "MRPC", n_train=96, n_dev=61)


@pytest.fixture(scope="module")
def two_process_run(tiny_model, data, tmp_path_factory):
    out = tmp_path_factory.mktemp("two") / "run"
    proc = run([sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
                "--main_process_port", str(free_port()), "-m", "tuneloop", "train",
                *train_args(tiny_model, data, out, batch_size=4, max_steps=12, eval_batch_size=8)])
    return out, proc


def test_two_processes_count_each_validation_example_once(two_process_run, tiny_model, data, tmp_path, capsys):
    out, proc = two_process_run
    results = json.loads((out / "results.json").read_text())
    assert results["train"]["num_processes"] == 2 and results["train"]["global_batch_size"] == 8
    assert results["eval"]["num_samples"] == 61
    # the same weights evaluated by a single process give the same metrics
    from tuneloop.cli.main import main

    target = tmp_path / "single.json"
    assert main(["evaluate", "--model", str(out / "model"), "--output", str(target), "--quiet", "--raw"]) == 0
    single = json.loads(target.read_text())["eval"]
    for key in ("accuracy", "f1", "loss"):
        assert results["eval"][key] == pytest.approx(single[key], abs=1e-5)
    assert single["num_samples"] == 61
    # one writer: every step logged once, one summary printed
    steps = [r["step"] for r in read_metrics(out / "metrics.jsonl") if "train/loss" in r]
    assert steps == list(range(1, 13))
    assert proc.stdout.count("saved:") == 1


def test_one_process_batch_8_equals_two_processes_batch_4_and_accumulation(two_process_run, tiny_model, data,
                                                                           tmp_path):
    two, _ = two_process_run
    one = tmp_path / "one"
    tuneloop.train(TrainConfig(**{**fast_options(tiny_model), "task": "mrpc", "data_dir": str(data),
                                  "output_dir": str(one), "batch_size": 8, "max_steps": 12, "eval_batch_size": 8,
                                  "log_every": 1, "warmup_ratio": 0.0}))
    accumulated = tmp_path / "accumulated"
    tuneloop.train(TrainConfig(**{**fast_options(tiny_model), "task": "mrpc", "data_dir": str(data),
                                  "output_dir": str(accumulated), "batch_size": 4, "gradient_accumulation_steps": 2,
                                  "max_steps": 12, "eval_batch_size": 8, "log_every": 1, "warmup_ratio": 0.0}))
    # Adam amplifies float-rounding differences of near-zero gradients, hence 1e-3 (an update is ~3e-3); a run
    # that saw different batches lands an order of magnitude further away
    assert max_difference(one, two) < 1e-3
    assert max_difference(one, accumulated) < 1e-3
    other = tmp_path / "other-order"
    tuneloop.train(TrainConfig(**{**fast_options(tiny_model), "task": "mrpc", "data_dir": str(data),
                                  "output_dir": str(other), "batch_size": 8, "max_steps": 12, "eval_batch_size": 8,
                                  "warmup_ratio": 0.0, "seed": 1}))
    assert max_difference(one, other) > 1e-2
    # the schedule advances once per optimizer step, whatever the number of processes
    lr_one = [r["train/lr"] for r in read_metrics(one / "metrics.jsonl") if "train/lr" in r]
    lr_two = [r["train/lr"] for r in read_metrics(two / "metrics.jsonl") if "train/lr" in r]
    assert len(lr_one) == 12 and lr_one == pytest.approx(lr_two, rel=1e-9)
    loss_one = [r["train/loss"] for r in read_metrics(one / "metrics.jsonl") if "train/loss" in r]
    loss_two = [r["train/loss"] for r in read_metrics(two / "metrics.jsonl") if "train/loss" in r]
    assert loss_one == pytest.approx(loss_two, abs=1e-3)
    # each training row's probabilities, summed over the processes: every row seen once in the one epoch, with
    # the probabilities the single process gave it
    with np.load(one / "predictions" / "train_dynamics.npz") as a, np.load(two / "predictions" /
                                                                          "train_dynamics.npz") as b:
        assert a["counts"].shape == b["counts"].shape == (1, 96)
        assert (a["counts"] == 1).all() and (b["counts"] == 1).all()
        assert np.abs(a["sums"] - b["sums"]).max() < 1e-3


def test_two_machines_on_loopback_one_launched_by_accelerate_one_by_torchrun(tiny_model, data, tmp_path):
    """Machine 0 starts with `accelerate launch`, machine 1 with plain `torchrun`: both launchers work, and
    together (accelerate launch runs torch's own launcher underneath)."""
    out = tmp_path / "run"
    port = free_port()
    train = ["-m", "tuneloop", "train", *train_args(tiny_model, data, out, batch_size=4, max_steps=4)]
    commands = [[sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_machines", "2",
                 "--num_processes", "2", "--machine_rank", "0", "--main_process_ip", "127.0.0.1",
                 "--main_process_port", str(port), *train],
                [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node_rank", "1",
                 "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(port), *train]]
    logs = [tmp_path / f"machine{rank}.log" for rank in range(2)]
    with logs[0].open("w") as log0, logs[1].open("w") as log1:
        procs = [subprocess.Popen(cmd, cwd=ROOT, env=env(), stdout=log, stderr=subprocess.STDOUT,
                                  start_new_session=True) for cmd, log in zip(commands, (log0, log1), strict=True)]
    deadline = time.monotonic() + 240      # both machines waited on together: a hang names the machine that hung
    while any(proc.poll() is None for proc in procs) and time.monotonic() < deadline:
        time.sleep(0.5)
    codes = [proc.poll() for proc in procs]
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()                    # torch's launcher stops its workers (their own sessions) on SIGTERM
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    states = ["still running after 240 s" if code is None else f"exit {code}" for code in codes]
    assert codes == [0, 0], "\n".join(f"machine {rank} {state}:\n{log.read_text()[-2000:]}"
                                       for rank, (state, log) in enumerate(zip(states, logs, strict=True)))
    results = json.loads((out / "results.json").read_text())
    assert results["train"]["num_processes"] == 2 and results["eval"]["num_samples"] == 61
    assert results["train"]["steps"] == 4


def test_notebook_train_runs_two_processes(tiny_model, data, tmp_path):
    # a fresh interpreter, like a notebook kernel: notebook_launcher refuses one that already holds an Accelerator
    script = (f"import json, tuneloop; r = tuneloop.notebook_train(task='mrpc', data_dir={str(data)!r}, "
              f"model={tiny_model!r}, output_dir={str(tmp_path / 'nb')!r}, max_steps=3, batch_size=4, quiet=True, "
              "num_processes=2); print(json.dumps(r))")
    proc = run([sys.executable, "-c", script])
    results = json.loads(proc.stdout.strip().splitlines()[-1])
    assert results["train"]["num_processes"] == 2 and results["eval"]["num_samples"] == 61


@pytest.mark.parametrize("name", ["single_gpu", "multi_gpu", "fsdp", "deepspeed_zero2", "two_machines", "cpu_2proc"])
def test_shipped_accelerate_configs_load(name):
    from accelerate.commands.config.config_args import ClusterConfig

    config = ClusterConfig.from_yaml_file(str(ROOT / "configs" / "accelerate" / f"{name}.yaml"))
    assert config.num_processes >= 1 and config.num_machines >= 1
    if name == "two_machines":
        assert config.num_machines == 2 and config.main_process_ip


def adapters(run_dir: Path) -> dict:
    return load_file(str(run_dir / "model" / "adapter_model.safetensors"))


def test_lora_on_two_processes_trains_what_one_process_trains(tiny_model, data, tmp_path):
    """--lora under a launcher: the adapters and the new head (saved with them) of 2 processes × batch 4 equal one
    process × batch 8 (no dropout: each process draws its own masks), and a run on other batches lands far away
    (the comparison can fail). Its checkpoint holds the adapters and head, not the frozen base (DDP's `module.`
    names): resumed from step 4 under the launcher, the run ends where it ended."""
    two, again = tmp_path / "two", tmp_path / "again"
    options = dict(batch_size=4, max_steps=8, eval_batch_size=8, lora=True, lora_dropout=0.0, lr=1e-2,
                   warmup_ratio=0.0, save_every=4, keep_last=2)
    run(torchrun(2) + ["train", *train_args(tiny_model, data, two, **options)])
    shutil.copytree(two, again)
    shutil.rmtree(again / "checkpoints" / "step-0000008")
    left_out = json.loads((again / "checkpoints" / "step-0000004" / "frozen_weights.json").read_text())["left_out"]
    assert any("word_embeddings" in name for name in left_out)
    assert not set(left_out) & set(load_file(str(again / "checkpoints" / "step-0000004" / "model.safetensors")))
    run(torchrun(2) + ["train", *train_args(tiny_model, data, again, **options, resume="latest")])
    resumed, whole = adapters(again), adapters(two)
    assert max(float((resumed[k] - whole[k]).abs().max()) for k in whole) < 1e-6
    runs = {}
    for name, seed in (("one", 0), ("other", 1)):
        runs[name] = tmp_path / name
        tuneloop.train(TrainConfig(**{**fast_options(tiny_model), "task": "mrpc", "data_dir": str(data),
                                      "output_dir": str(runs[name]), "batch_size": 8, "max_steps": 8, "lr": 1e-2,
                                      "eval_batch_size": 8, "warmup_ratio": 0.0, "lora": True, "lora_dropout": 0.0,
                                      "seed": seed}))
    one, other, both = adapters(runs["one"]), adapters(runs["other"]), adapters(two)
    assert set(one) == set(both) and any("classifier" in k for k in one)          # the head travels with them
    assert max(float((one[k] - both[k]).abs().max()) for k in one) < 1e-3
    assert max(float((one[k] - other[k]).abs().max()) for k in one) > 1e-2


def test_setfit_on_two_processes_trains_what_one_process_trains(tiny_model, data, tmp_path):
    """--method setfit under a launcher: each process embeds its half of every step's pairs and DDP averages the
    gradients, so 2 processes end with the body and the fitted head one process gets (float noise apart), with one
    writer; a run on other pairs (another seed) lands far away (the comparison can fail)."""
    setfit = {"method": "setfit", "setfit_iterations": 2, "setfit_lr": 3e-3, "setfit_batch_size": 16,
              "setfit_epochs": 1, "eval_batch_size": 8, "baseline": "none"}
    two = tmp_path / "two"
    proc = run(torchrun(2) + ["train", *train_args(tiny_model, data, two, **setfit)])
    runs = {}
    for name, seed in (("one", 0), ("other", 1)):
        runs[name] = tmp_path / name
        tuneloop.train(TrainConfig(**{**fast_options(tiny_model), "task": "mrpc", "data_dir": str(data),
                                      "output_dir": str(runs[name]), **setfit, "seed": seed}))
    one, both = (json.loads((r / "results.json").read_text()) for r in (runs["one"], two))
    assert both["train"]["num_processes"] == 2 and both["setfit"]["steps"] == one["setfit"]["steps"] == 24
    assert both["setfit"]["loss_last"] == pytest.approx(one["setfit"]["loss_last"], abs=1e-4)
    assert max_difference(runs["one"], two) < 1e-3 < max_difference(runs["one"], runs["other"])
    assert both["eval"]["num_samples"] == 61 and both["eval"]["accuracy"] == pytest.approx(one["eval"]["accuracy"])
    assert proc.stdout.count("saved:") == 1


LAUNCH_SCRIPT = '''import json, os, signal, sys
from tuneloop.cli.main import main
from tuneloop.training.step import AccelerateStep

RANK, POISON, real_forward_loss = int(os.environ["RANK"]), [0], AccelerateStep.forward_loss


def poisoned_forward_loss(self, batch):      # each run's 3rd training loss NaN on process 1 alone
    logits, loss = real_forward_loss(self, batch)
    if POISON[0]:
        POISON[0] += 1
        if RANK == 1 and POISON[0] % 3 == 1:
            loss = loss * float("nan")
    return logits, loss


def stop_at_2(state):                        # Ctrl-C seen by process 1 alone, after step 2
    if state.step == 2 and RANK == 1:
        os.kill(os.getpid(), signal.SIGINT)


AccelerateStep.forward_loss = poisoned_forward_loss
commands = json.loads(sys.argv[1])
codes = [main(commands[0]), main(commands[1], on_step=stop_at_2), main(commands[2])]
POISON[0] = 1
codes.append(main(commands[3]))
if RANK == 0:
    print("codes", json.dumps(codes))
'''


def test_two_processes_fail_stop_predict_and_run_seeds_in_one_launch(two_process_run, tiny_model, data, tmp_path):
    """One launch of 2 processes, four commands in turn: a data error read on the main process first (every process
    fails with its one line, said once, no traceback); a run stopped by a signal on process 1 (told once how to
    resume: under the launcher, 2 processes); predict (its `wrote` line once); then --seeds 1 2 with
    --skip-nonfinite-batches and a NaN loss on process 1 only (both seeds run in the same process group, each skips
    that batch on both processes instead of hanging, the group ends once and the processes exit 0)."""
    trained, _ = two_process_run
    (tmp_path / "train.csv").write_text("text,label\n" + "".join(f"words {i},{i % 2}\n" for i in range(8)))
    bad = ["train", "--model", tiny_model, "--train-file", str(tmp_path / "train.csv"), "--validation-file",
           str(tmp_path / "train.csv"), "--label-column", "nosuch", "--output-dir", str(tmp_path / "bad"), "--quiet"]
    stopped = train_args(tiny_model, data, tmp_path / "stopped", batch_size=4, max_steps=6, eval_batch_size=8)
    predict = ["predict", "--model", str(trained / "model"), "--input", str(data / "test.tsv"), "--output",
               str(tmp_path / "predictions.tsv"), "--quiet"]
    seeds = [a for a in train_args(tiny_model, data, tmp_path / "seeds", batch_size=4, max_steps=3,
                                   eval_batch_size=8, skip_nonfinite_batches=True, baseline="none") if a != "--quiet"]
    script = tmp_path / "launch.py"
    script.write_text(LAUNCH_SCRIPT)
    proc = run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port",
                str(free_port()), str(script), json.dumps([["train", *bad[1:]], ["train", *stopped],
                                                           predict, ["train", *seeds, "--seeds", "1", "2"]])])
    err = proc.stderr
    assert json.loads(proc.stdout.split("codes", 1)[1].splitlines()[0]) == [2, 130, 0, 0], err[-3000:]
    assert err.count("tuneloop train: error:") == 1 and "no label column 'nosuch'" in err
    assert "Traceback" not in err and "Connection closed" not in err and "(process 1)" not in err, err[-3000:]
    assert err.count("under the same launcher with 2 processes") == 1 and "Resume with: tuneloop" not in err
    assert proc.stdout.count("wrote ") == 1
    assert err.count("seed-1: starting") == 1 and err.count("seed-2: starting") == 1
    assert (tmp_path / "seeds" / "summary.json").is_file() and (tmp_path / "seeds" / "model").is_dir()
    for name in ("seed-1", "seed-2"):
        results = json.loads((tmp_path / "seeds" / name / "results.json").read_text())
        assert results["train"]["skipped_nonfinite_batches"] == 1 and results["train"]["steps"] == 3


def test_resume_hint_of_several_processes_names_the_launcher():
    from tuneloop.training.signals import StopSignals

    config = TrainConfig(task="mrpc")
    one = StopSignals().how_to_resume(config, 5, "OUT/checkpoints/step-5", "OUT")
    assert "Resume with: tuneloop train --output-dir OUT --resume" in one
    two = StopSignals().how_to_resume(config, 5, "OUT/checkpoints/step-5", "OUT", num_processes=2)
    assert "under the same launcher with 2 processes" in two and "Resume with: tuneloop train" not in two
    assert "--num_processes 2" in two

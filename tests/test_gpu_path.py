"""The GPU path's code, checked on the CPU: what `auto` resolves to on CUDA and CPU machines, TF32 set for a run
and given back, torch.compile through Accelerate (aot_eager: the same tracing, no code generation) training the
same model as eager with batches in length buckets, collation in worker processes changing nothing, and CPUs behind
one model name told apart (benchmarks record it)."""

from __future__ import annotations

import pytest
import torch
from conftest import fast_options
from safetensors.torch import load_file

import tuneloop
from tuneloop import TrainConfig
from tuneloop.config import resolve
from tuneloop.data.batching import length_bucket
from tuneloop.exceptions import ConfigError
from tuneloop.runtime import machine as system
from tuneloop.runtime import speed
from tuneloop.training.progress import read_metrics


def test_auto_settings_for_a_cuda_gpu_and_for_this_cpu(monkeypatch):
    cpu = resolve.for_this_machine(TrainConfig())
    assert (cpu.compile, cpu.dataloader_workers, cpu.attention) == ("no", 0, "auto")    # attention: per model
    monkeypatch.setattr(system, "runs_on_cuda", lambda cpu_option: not cpu_option)
    monkeypatch.setattr(system, "runs_on_cpu", lambda cpu_option: cpu_option)
    bert_base, large = (lambda: 85_648_130), (lambda: 302_000_000)     # parameters outside embeddings
    for native_bf16, body, precision in ((True, bert_base, "no"), (True, large, "bf16"), (True, None, "auto"),
                                         (False, bert_base, "fp16")):  # Ampere+: fp32 on TF32 when small; older
        monkeypatch.setattr(system, "native_bf16", lambda cpu_option, v=native_bf16: v)
        gpu = resolve.for_this_machine(TrainConfig(), body)            # None: left to the process that trains
        assert (gpu.mixed_precision, gpu.compile, gpu.dataloader_workers) == (precision, "no", 2)    # eager: measured
    mine = resolve.for_this_machine(TrainConfig(compile="no", dataloader_workers=0, mixed_precision="no"))
    assert (mine.mixed_precision, mine.compile, mine.dataloader_workers) == ("no", "no", 0)   # the user's word


def test_the_size_that_picks_a_gpus_precision_is_the_models_count_outside_embeddings(tiny_model):
    from transformers import AutoModelForSequenceClassification

    from tuneloop.model.loading import body_parameters

    model = AutoModelForSequenceClassification.from_pretrained(tiny_model)
    tables = {"word_embeddings", "position_embeddings", "token_type_embeddings"}
    outside = sum(p.numel() for name, p in model.named_parameters() if name.split(".")[-2] not in tables)
    assert body_parameters(tiny_model) == outside < sum(p.numel() for p in model.parameters())


def test_two_cpus_with_one_model_name_are_told_apart(monkeypatch):
    """A virtual machine may show only "AMD EPYC": family/model and the math flags tell a Zen 3 from a Zen 4."""
    def host(model, flags):
        monkeypatch.setattr(system, "_cpuinfo", lambda: {"vendor_id": "AuthenticAMD", "cpu family": "25",
                                                         "model": model, "model name": "AMD EPYC", "flags": flags})
        return system.cpu_identity()

    zen3 = host("1", "fpu sse2 avx avx2 fma")
    zen4 = host("17", "fpu sse2 avx avx2 fma avx512f avx512_bf16 avx512_vnni")
    assert zen3 == {"cpu_id": "AuthenticAMD cpu family 25 model 1", "cpu_features": ["avx2"]}
    assert zen4["cpu_id"] == "AuthenticAMD cpu family 25 model 17"
    assert zen4["cpu_features"] == ["avx2", "avx512f", "avx512_vnni", "avx512_bf16"]
    from tuneloop.cli.env import environment_report

    report = environment_report()                     # what a bug report carries: the Zen 4's id, flags and bf16
    assert "cpu id: AuthenticAMD cpu family 25 model 17; math: avx2, avx512f, avx512_vnni, avx512_bf16" in report
    assert "cpu bf16: True (AMX: False)" in report
    assert "cpu: AMD EPYC (" in report
    monkeypatch.setattr(system, "_cpuinfo", lambda: {"cpu model": "Loongson-3A5000", "flags": ""})
    assert system.cpu_name() == "Loongson-3A5000"                       # kernels without 'model name' still name it


def test_auto_attention_is_the_fastest_the_architecture_runs_here():
    from transformers import BertForSequenceClassification, DebertaV2ForSequenceClassification

    from tuneloop.model.attention import choose

    assert choose("auto", BertForSequenceClassification, on_cpu=True, compiled=False)[0] == "chunked"
    assert choose("auto", BertForSequenceClassification, on_cpu=True, compiled=True)[0] == "sdpa"   # runs eagerly
    assert choose("auto", BertForSequenceClassification, on_cpu=False, compiled=False)[0] == "sdpa"
    assert choose("auto", DebertaV2ForSequenceClassification, on_cpu=True, compiled=False)[0] == "eager"
    assert choose("eager", BertForSequenceClassification, on_cpu=True, compiled=False)[0] == "eager"
    with pytest.raises(ConfigError, match="DebertaV2ForSequenceClassification cannot run it; it supports eager"):
        choose("sdpa", DebertaV2ForSequenceClassification, on_cpu=True, compiled=False)


def test_compile_options_are_checked():
    with pytest.raises(ConfigError, match="--attention: chunked attention runs eagerly"):
        TrainConfig(attention="chunked", compile="default").validate()
    with pytest.raises(ConfigError, match="--compile: unknown value"):
        TrainConfig(compile="fast").validate()
    with pytest.raises(ConfigError, match="--dataloader-workers: must be >= 0"):
        TrainConfig(dataloader_workers=-1).validate()


def test_tf32_is_set_for_the_run_and_given_back():
    matmul = torch.backends.cuda.matmul
    before = matmul.fp32_precision
    matmul.fp32_precision = "ieee"
    try:
        with speed.SpeedLevers(tf32=True) as levers:
            assert matmul.fp32_precision == "tf32" and levers.applied["tf32"]
        assert matmul.fp32_precision == "ieee"
    finally:
        matmul.fp32_precision = before


def test_cuda_graphs_start_a_step_at_each_call_of_the_model(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.compiler, "cudagraph_mark_step_begin", lambda: calls.append(1))
    plain, graphed = torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)
    speed.mark_cuda_graph_steps(plain, "default")
    speed.mark_cuda_graph_steps(graphed, "reduce-overhead")
    for _ in range(3):
        plain(torch.ones(1, 2))
        graphed(torch.ones(1, 2))
    assert len(calls) == 3


def test_length_buckets():
    assert length_bucket(128) == 16 and length_bucket(64) == 16
    assert length_bucket(129) == 32 and length_bucket(512) == 32 and length_bucket(None) == 32


def train_losses(run_dir) -> list[float]:
    return [r["train/loss"] for r in read_metrics(run_dir / "metrics.jsonl") if "train/loss" in r]


def test_compiled_training_matches_eager_and_saves_a_plain_model(tiny_model, shared_mrpc_dir, tmp_path, capsys):
    options = dict(task="mrpc", data_dir=str(shared_mrpc_dir), max_length=64, log_every=1,
                   **fast_options(tiny_model, max_steps=12))
    eager = tuneloop.train(**options, output_dir=str(tmp_path / "eager"), attention="sdpa")
    compiled = tuneloop.train(**options, output_dir=str(tmp_path / "compiled"), compile="aot_eager")
    assert compiled["train"]["compile"] == "aot_eager" and compiled["train"]["first_step_s"] > 0
    assert train_losses(tmp_path / "compiled") == pytest.approx(train_losses(tmp_path / "eager"), abs=1e-5)
    assert compiled["eval"]["accuracy"] == eager["eval"]["accuracy"]
    a = load_file(str(tmp_path / "eager" / "model" / "model.safetensors"))
    b = load_file(str(tmp_path / "compiled" / "model" / "model.safetensors"))
    assert sorted(a) == sorted(b)                         # no `_orig_mod.` in the saved names
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-3
    # a compiled run pads to length buckets (multiples of 16 here), an eager one to the longest row
    capsys.readouterr()
    shapes = tuneloop.train(**options, output_dir=str(tmp_path / "dry"), compile="aot_eager", dry_run=True)
    assert shapes["batch_shapes"]["input_ids"][1] % 16 == 0


def test_collation_in_worker_processes_changes_nothing(tiny_model, shared_mrpc_dir, tmp_path):
    options = dict(task="mrpc", data_dir=str(shared_mrpc_dir), log_every=1, **fast_options(tiny_model, max_steps=8))
    tuneloop.train(**options, output_dir=str(tmp_path / "main"), dataloader_workers=0)
    two = tuneloop.train(**options, output_dir=str(tmp_path / "workers"), dataloader_workers=2)
    assert train_losses(tmp_path / "workers") == train_losses(tmp_path / "main")
    assert two["eval"]["num_samples"] == 60

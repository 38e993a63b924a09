"""The CPU speed levers change the clock, not the results: dropout statistics, gradients, eval outputs, saved
configs and process-wide settings are checked here."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import build_tiny_model, fast_options

from tuneloop.runtime import speed


@pytest.mark.parametrize("p", [0.1, 0.25, 0.5])
def test_dropout_mask_keeps_one_minus_p_and_follows_the_seed(p):
    torch.manual_seed(1)
    mask = speed.dropout_mask((1000, 1000), p)
    assert mask.dtype == torch.bool and mask.shape == (1000, 1000)
    assert abs(mask.float().mean().item() - (1 - p)) < 3e-3
    # no structure along the flattened order (the 16-bit slices of one word are independent)
    assert abs(mask[:, 0::3].float().mean().item() - mask[:, 2::3].float().mean().item()) < 6e-3
    torch.manual_seed(1)
    assert torch.equal(mask, speed.dropout_mask((1000, 1000), p))
    assert not torch.equal(mask, speed.dropout_mask((1000, 1000), p))


def test_fast_dropout_scales_kept_values_and_gradients_alike():
    x = torch.randn(64, 33, requires_grad=True)
    torch.manual_seed(0)
    y = speed.fast_dropout(x, 0.2)
    kept = y != 0
    assert torch.allclose(y[kept], x[kept] / 0.8)
    y.sum().backward()
    assert torch.allclose(x.grad, kept.float() / 0.8)
    assert speed.fast_dropout(x, 0.2, training=False) is x
    assert speed.fast_dropout(x, 0.0) is x


def routed_model(folder, dropout_masks: bool = True):
    """A model with the CPU levers of a run: fast dropout layers and chunked attention, inside SpeedLevers."""
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="sdpa")
    if dropout_masks:
        assert speed.use_fast_dropout(model) > 0
    return model


def test_fast_dropout_and_chunked_attention_keep_eval_outputs_and_vary_in_training(tmp_path):
    from transformers import AutoModelForSequenceClassification

    folder = build_tiny_model(tmp_path / "m", dropout=0.1)
    plain = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="sdpa").eval()
    batch = {"input_ids": torch.randint(5, 40, (4, 12)), "attention_mask": torch.ones(4, 12, dtype=torch.long)}
    batch["attention_mask"][1, 7:] = 0                        # padding goes through the mask path
    with speed.SpeedLevers(chunked_attention=True) as levers:
        fast = routed_model(folder)
        assert levers.route_attention(fast, cheap_masks=True)
        assert not any(type(m) is torch.nn.Dropout for m in fast.modules())
        assert fast.config._attn_implementation == "sdpa"         # the model itself stays a plain SDPA model
        fast.eval()
        with torch.no_grad():
            assert torch.allclose(fast(**batch).logits, plain(**batch).logits, atol=1e-6)
        fast.train()
        torch.manual_seed(3)
        a = fast(**batch).logits
        torch.manual_seed(3)
        b = fast(**batch).logits
        c = fast(**batch).logits
        assert torch.equal(a, b) and not torch.allclose(a, c)
        a.sum().backward()                                          # gradients reach every trainable weight
        assert all(p.grad is not None for p in fast.parameters() if p.requires_grad)
        fast.save_pretrained(tmp_path / "saved")
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert saved.get("_attn_implementation", "sdpa") == "sdpa"


def test_evaluation_attention_in_cpu_pieces_matches_sdpa(tmp_path, monkeypatch):
    from transformers import AutoModelForSequenceClassification

    folder = build_tiny_model(tmp_path / "m", dropout=0.1)
    plain = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="sdpa").eval()
    batch = {"input_ids": torch.randint(5, 40, (7, 20)), "attention_mask": torch.ones(7, 20, dtype=torch.long)}
    for row, length in enumerate([20, 3, 11, 20, 1, 17, 9]):
        batch["attention_mask"][row, length:] = 0
    pieces = []
    real = speed._math_attention
    monkeypatch.setattr(speed, "_math_attention", lambda q, *a: pieces.append(q.shape[0]) or real(q, *a))
    heads = plain.config.num_attention_heads
    monkeypatch.setattr(speed, "CPU_CHUNK_SCORES", 2 * heads * 20 * 20)      # two rows a piece: 4 pieces a layer
    with speed.SpeedLevers(chunked_attention=True) as levers, torch.no_grad():
        fast = routed_model(folder)
        levers.route_attention(fast, cheap_masks=True)
        fast.eval()
        expected = plain(**batch).logits
        assert pieces == []                                   # a model that was not routed keeps plain SDPA
        assert torch.allclose(fast(**batch).logits, expected, atol=1e-5)
        assert pieces[:4] == [2, 2, 2, 1] and len(pieces) == 4 * fast.config.num_hidden_layers
        pieces.clear()
        monkeypatch.setattr(speed, "CPU_CHUNKED_MAX_KEYS", 16)                # longer keys: the fused kernel
        assert torch.allclose(fast(**batch).logits, expected, atol=1e-5)
        assert pieces == []
    pieces.clear()
    with torch.no_grad():
        fast(**batch)
    assert pieces == []                                       # after the levers, the route is gone


@pytest.mark.parametrize("cheap_masks", [True, False])
def test_without_dropout_training_attention_on_cpu_matches_sdpa_with_gradients(tmp_path, cheap_masks):
    from transformers import AutoModelForSequenceClassification

    folder = build_tiny_model(tmp_path / "m", dropout=0.0)
    plain = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="sdpa").train()
    batch = {"input_ids": torch.randint(5, 40, (3, 10)), "attention_mask": torch.ones(3, 10, dtype=torch.long),
             "labels": torch.tensor([0, 1, 1])}
    batch["attention_mask"][2, 4:] = 0
    plain(**batch).loss.backward()
    with speed.SpeedLevers(chunked_attention=True) as levers:
        fast = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="sdpa").train()
        assert levers.route_attention(fast, cheap_masks=cheap_masks)
        fast(**batch).loss.backward()
    for (name, a), b in zip(plain.named_parameters(), fast.parameters(), strict=True):
        assert torch.allclose(a.grad, b.grad, atol=1e-5), name


def test_attention_dropout_uses_the_mask_the_dropout_option_chose(tmp_path, monkeypatch):
    """--attention chunked and --fast-dropout are separate: without cheap masks, attention weights are dropped by
    torch's dropout."""
    drawn = []
    real = speed.dropout_mask
    monkeypatch.setattr(speed, "dropout_mask", lambda *a, **k: drawn.append(1) or real(*a, **k))
    from transformers import AutoModelForSequenceClassification

    folder = build_tiny_model(tmp_path / "m", dropout=0.1)
    batch = {"input_ids": torch.randint(5, 40, (2, 8)), "attention_mask": torch.ones(2, 8, dtype=torch.long)}
    for cheap in (False, True):
        drawn.clear()
        with speed.SpeedLevers(chunked_attention=True) as levers:
            model = AutoModelForSequenceClassification.from_pretrained(folder, attn_implementation="sdpa").train()
            levers.route_attention(model, cheap_masks=cheap)
            model(**batch)
        assert bool(drawn) == cheap


def test_bf16_run_on_cpu_leaves_the_process_matmul_setting_as_it_found_it(tiny_model, shared_mrpc_dir, tmp_path):
    from tuneloop import train

    before = torch.backends.mkldnn.matmul.fp32_precision
    result = train(data_dir=str(shared_mrpc_dir), task="mrpc", output_dir=str(tmp_path / "run"),
                   **fast_options(tiny_model, epochs=1, mixed_precision="bf16", cpu=True))
    assert result["train"]["mixed_precision"] == "bf16"
    assert torch.backends.mkldnn.matmul.fp32_precision == before


def test_levers_apply_inside_and_give_back_on_exit_also_when_raising():
    before = torch.backends.mkldnn.matmul.fp32_precision
    with pytest.raises(RuntimeError, match="boom"):
        with speed.SpeedLevers(bf16_matmuls=True, keep_heap=True) as levers:
            assert torch.backends.mkldnn.matmul.fp32_precision == "bf16"
            assert levers.applied["bf16_matmuls"] and levers.applied["keep_heap"]      # glibc on Linux
            raise RuntimeError("boom")
    assert torch.backends.mkldnn.matmul.fp32_precision == before


def test_bf16_batches_are_padded_to_a_multiple_of_8(tiny_model, shared_mrpc_dir):
    from tuneloop import train

    info = train(data_dir=str(shared_mrpc_dir), task="mrpc", dry_run=True,
                 **fast_options(tiny_model, mixed_precision="bf16", cpu=True))
    assert info["batch_shapes"]["input_ids"][1] % 8 == 0
    info = train(data_dir=str(shared_mrpc_dir), task="mrpc", dry_run=True, **fast_options(tiny_model, cpu=True))
    assert info["config"]["mixed_precision"] == "no"

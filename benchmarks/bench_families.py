"""Speed per model family on the CPU: tuneloop against the Hugging Face Trainer at the chapter's settings (batch 8,
AdamW 5e-5, linear schedule), side by side in one run, on base-sized random-init models of the main families.

No weights can be downloaded here, so each family is its own architecture at base size (BERT-base's 768 wide, 12
layers, 12 heads, 3072 inner; the decoder: Qwen2 at the same width with 2 key/value heads) with random weights, and
a tokenizer of the family's kind trained on MRPC's training sentences (WordPiece for BERT, byte-level BPE for
RoBERTa, ModernBERT and Qwen2, Unigram for DeBERTa-v3; 16k pieces): the speed of training, not the quality, is
what this measures. Each run is its own process (alternating tuneloop / trainer per family); samples/s is the
training loop's, peak RSS the process's (os.wait4).

    python benchmarks/bench_families.py --data-dir ../shared/glue/MRPC --max-train-samples 800
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _mrpc import read_rows  # noqa: E402
from bench_train import default_out, finish, machine_info, run_child  # noqa: E402

FAMILIES = ("bert", "roberta", "deberta-v2", "modernbert", "qwen2")
VOCAB = 16000
BASE = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072}


def train_tokenizer(kind: str, sentences: list[str]):
    """A transformers tokenizer of `kind` trained on `sentences` with the `tokenizers` library."""
    import transformers as tf
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    if kind == "bert":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        tok.train_from_iterator(sentences, trainers.WordPieceTrainer(vocab_size=VOCAB, special_tokens=specials))
        vocab = sorted(tok.get_vocab(), key=tok.get_vocab().get)
        return tf.BertTokenizer(vocab={t: i for i, t in enumerate(vocab)}, do_lower_case=True)
    if kind == "deberta-v2":
        tok = Tokenizer(models.Unigram())
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        specials = ["[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]"]
        tok.train_from_iterator(sentences, trainers.UnigramTrainer(vocab_size=VOCAB, special_tokens=specials,
                                                                    unk_token="[UNK]"))
        pieces = json.loads(tok.to_str())["model"]["vocab"]
        return tf.DebertaV2Tokenizer(vocab=[(p, s) for p, s in pieces], do_lower_case=False)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    specials = {"roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                "modernbert": ["<|endoftext|>", "[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"],
                "qwen2": ["<|endoftext|>"]}[kind]
    tok.train_from_iterator(sentences, trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                                           initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    model = json.loads(tok.to_str())["model"]
    vocab, merges = model["vocab"], [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in model["merges"]]
    if kind == "roberta":
        return tf.RobertaTokenizer(vocab=vocab, merges=merges)
    if kind == "qwen2":
        return tf.Qwen2Tokenizer(vocab=vocab, merges=merges, pad_token="<|endoftext|>")
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    return tf.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                      pad_token="[PAD]", mask_token="[MASK]",
                                      model_input_names=["input_ids", "attention_mask"])


def build(kind: str, folder: str, sentences: list[str]) -> dict:
    """A base-sized random-init `kind` classifier with its trained tokenizer in `folder`; returns its facts."""
    import torch
    import transformers as tf

    tok = train_tokenizer(kind, sentences)
    ids = {"pad_token_id": tok.pad_token_id, "vocab_size": len(tok), "num_labels": 2,
           "max_position_embeddings": 512}
    if kind == "bert":
        config = tf.BertConfig(**BASE, **ids)
    elif kind == "roberta":
        config = tf.RobertaConfig(**BASE, **{**ids, "max_position_embeddings": 514}, bos_token_id=tok.bos_token_id,
                                  eos_token_id=tok.eos_token_id)
    elif kind == "deberta-v2":       # DeBERTa-v3-base's attention: relative positions, no absolute ones
        config = tf.DebertaV2Config(**BASE, **ids, relative_attention=True, pos_att_type=["p2c", "c2p"],
                                    position_biased_input=False, max_relative_positions=-1, position_buckets=256,
                                    norm_rel_ebd="layer_norm", share_att_key=True, type_vocab_size=0)
    elif kind == "modernbert":       # ModernBERT-base: 22 layers, 1152 inner (GLU)
        config = tf.ModernBertConfig(hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                                     intermediate_size=1152, **ids, cls_token_id=tok.cls_token_id,
                                     sep_token_id=tok.sep_token_id, bos_token_id=tok.cls_token_id,
                                     eos_token_id=tok.sep_token_id)
    else:
        config = tf.Qwen2Config(**{**BASE, "intermediate_size": 2048}, num_key_value_heads=2, **ids,
                                eos_token_id=tok.pad_token_id, bos_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    model = tf.AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return {"parameters": sum(p.numel() for p in model.parameters()), "vocab": len(tok), "config": config.model_type}


def read_results(impl: str, out: str, report: str) -> dict:
    if impl == "tuneloop":
        results = json.load(open(os.path.join(out, "results.json")))
        return {"samples_per_s": results["train"]["samples_per_second"], "train_loop_s": results["train"]["training_s"],
                "steps": results["train"]["steps"], "f1": results["eval"].get("f1")}
    report = json.load(open(report))
    return {k: report[k] for k in ("samples_per_s", "train_loop_s", "steps", "f1")}


def run(impl: str, kind: str, folder: str, args, work: str) -> dict:
    out, report = os.path.join(work, f"{impl}-{kind}"), os.path.join(work, f"{impl}-{kind}.json")
    samples = ["--max-train-samples", str(args.max_train_samples)]
    if impl == "tuneloop":
        cmd = [sys.executable, "-m", "tuneloop", "train", "--model", folder, "--task", "mrpc", "--data-dir",
               args.data_dir, "--epochs", "1", "--seed", "1", "--output-dir", out, "--no-report", *samples]
    else:
        cmd = [sys.executable, os.path.join(HERE, "trainer_peer.py"), "--model", folder, "--data-dir", args.data_dir,
               "--epochs", "1", "--seed", "1", "--output", report, *samples]
    child = run_child(cmd, out + ".log", args.timeout)
    record = {"impl": impl, "family": kind, **child}
    if child["returncode"] != 0:
        return {**record, "error": open(out + ".log").read()[-1500:]}
    return {**record, **read_results(impl, out, report)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=os.path.join(HERE, "..", "..", "shared", "glue", "MRPC"))
    parser.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    parser.add_argument("--max-train-samples", type=int, default=800, help="800 pairs: 100 steps at batch 8")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    machine, date = machine_info(), dt.date.today().isoformat()
    out = args.out or default_out(date, machine, "-families")
    work = tempfile.mkdtemp(prefix="bench-families-")
    sentences = [s for column in ("sentence1", "sentence2")
                 for s in read_rows(os.path.join(args.data_dir, "train.tsv"))[column]]
    models, runs = {}, []
    for kind in args.families:
        folder = os.path.join(work, f"model-{kind}")
        models[kind] = build(kind, folder, sentences)
        for impl in ("tuneloop", "trainer"):
            runs.append(run(impl, kind, folder, args, work))
            print(json.dumps(runs[-1]), flush=True)
    summary = {kind: {r["impl"]: {k: r.get(k) for k in ("samples_per_s", "process_peak_rss_mb", "steps", "error")}
                      for r in runs if r["family"] == kind} for kind in args.families}
    result = {"benchmark": "tuneloop vs Trainer per family, base-sized random init, MRPC", "date": date,
              "machine": machine, "args": vars(args), "models": models, "runs": runs, "summary": summary}
    return finish(out, result, work, summary)


if __name__ == "__main__":
    raise SystemExit(main())

"""Which embedding of the embedded MiniLM a few-shot head should read: a logistic regression (scikit-learn) fitted on
the untrained model's embeddings of the docstring set's training rows (bench_small_data.py's rows: same sampling,
same 600 held-out rows), side by side per size and seed:

  pooler   the BERT pooler's output (the [CLS] vector through the checkpoint's dense + tanh): what a plain
           AutoModelForSequenceClassification's classifier reads, so what `--method setfit`'s head reads
  mean     the attention-masked mean of the last hidden states, L2-normalised: what the sentence-transformer was
           trained to produce (its 1_Pooling), and what the `setfit` package's head reads

No training of the model: it measures the starting point of the two heads, nothing more.

    python benchmarks/bench_pooling.py --sizes 8 16 32 --seeds 1 2 3 4 5
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _fewshot_sets import docstring_set  # noqa: E402
from _mrpc import default_model  # noqa: E402
from bench_small_data import mean_std, sample  # noqa: E402
from bench_train import default_out, finish, machine_info  # noqa: E402


def embedder(model_dir: str, max_length: int = 128, batch: int = 64):
    import torch
    from transformers import AutoModel, AutoTokenizer

    from tuneloop.model.pooling import masked_mean

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()

    @torch.no_grad()
    def embed(texts: list[str]) -> dict:
        pooled, mean = [], []
        for i in range(0, len(texts), batch):
            inputs = tokenizer(texts[i:i + batch], padding=True, truncation=True, max_length=max_length,
                               return_tensors="pt")
            out = model(**inputs)
            pooled.append(out.pooler_output)
            mean.append(masked_mean(out.last_hidden_state, inputs["attention_mask"]))
        return {"pooler": torch.cat(pooled).numpy(), "mean": torch.cat(mean).numpy()}

    return embed


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--model", default=None, help="model folder (default: the embedded MiniLM)")
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    from sklearn.linear_model import LogisticRegression

    started, machine, model = time.time(), machine_info(), str(args.model or default_model())
    data, embed = docstring_set(), embedder(model)
    held = embed([x for x, _ in data["eval"]])
    truth = [y for _, y in data["eval"]]
    runs = []
    for size in args.sizes:
        for seed in args.seeds:
            rows = sample(data["pool"], size, seed)
            train, labels = embed([x for x, _ in rows]), [y for _, y in rows]
            for name in ("pooler", "mean"):
                head = LogisticRegression(max_iter=2000).fit(train[name], labels)
                runs.append({"per_class": size, "seed": seed, "embedding": name,
                             "accuracy": round(float(head.score(held[name], truth)), 4)})
            print(runs[-2], runs[-1], flush=True)
    summary = {}
    for size in args.sizes:
        for name in ("pooler", "mean"):
            got = [r["accuracy"] for r in runs if r["per_class"] == size and r["embedding"] == name]
            summary.setdefault(str(size), {})[name] = {"runs": len(got), "accuracy": mean_std(got)}
    date = dt.date.today().isoformat()
    result = {"benchmark": "few-shot head: pooler output against mean pooling (untrained model)", "date": date,
              "machine": machine, "model": model, "data": data["source"], "sizes": args.sizes, "seeds": args.seeds,
              "runs": runs, "summary": summary, "wall_s": round(time.time() - started, 1),
              "command": "python benchmarks/bench_pooling.py " + " ".join(sys.argv[1:] if argv is None else argv)}
    return finish(args.out or default_out(date, machine, "-pooling"), result, shown=summary)


if __name__ == "__main__":
    sys.exit(main())

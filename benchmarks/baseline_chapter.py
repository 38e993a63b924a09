"""Baseline: the Hugging Face course, chapter 3, "A full training" loop, as written.

https://huggingface.co/learn/llm-course/chapter3/4 -- fine-tune on GLUE MRPC with a plain PyTorch loop.
Only the changes needed to run offline and on current libraries:
  * GLUE MRPC is read from the local TSV files (benchmarks/_mrpc.py) instead of load_dataset("glue", "mrpc");
  * the local all-MiniLM-L6-v2 folder instead of bert-base-uncased;
  * torch.optim.AdamW instead of the removed transformers.AdamW;
  * scikit-learn accuracy/F1 instead of evaluate.load("glue", "mrpc").
Plus measurement (timers, token counters, peak RSS) and a JSON report; none of it changes the loop.

    python benchmarks/baseline_chapter.py --seed 1 --output /tmp/baseline.json
"""

import time

T0 = time.perf_counter()  # before the heavy imports: wall_s counts from here (interpreter start-up excluded)

import json  # noqa: E402
import os  # noqa: E402

from _mrpc import parse_args, peak_rss_mb  # noqa: E402

args, checkpoint = parse_args(__doc__)

import torch  # noqa: E402
import transformers  # noqa: E402

torch.manual_seed(args.seed)
transformers.set_seed(args.seed)

# ------------------------------------------------------------------------------------ the chapter, top to bottom
from _mrpc import load_mrpc  # noqa: E402  (stands in for datasets.load_dataset)
from transformers import AutoTokenizer, DataCollatorWithPadding  # noqa: E402

raw_datasets = load_mrpc(args.data_dir)  # load_dataset("glue", "mrpc")
if args.max_train_samples is not None:
    raw_datasets["train"] = raw_datasets["train"].select(range(min(args.max_train_samples,
                                                                   len(raw_datasets["train"]))))
tokenizer = AutoTokenizer.from_pretrained(checkpoint)


def tokenize_function(example):
    return tokenizer(example["sentence1"], example["sentence2"], truncation=True)


tokenized_datasets = raw_datasets.map(tokenize_function, batched=True)
data_collator = DataCollatorWithPadding(tokenizer=tokenizer)

tokenized_datasets = tokenized_datasets.remove_columns(["sentence1", "sentence2", "idx"])
tokenized_datasets = tokenized_datasets.rename_column("label", "labels")
tokenized_datasets.set_format("torch")

from torch.utils.data import DataLoader  # noqa: E402

train_dataloader = DataLoader(
    tokenized_datasets["train"], shuffle=True, batch_size=8, collate_fn=data_collator
)
eval_dataloader = DataLoader(
    tokenized_datasets["validation"], batch_size=8, collate_fn=data_collator
)

from transformers import AutoModelForSequenceClassification  # noqa: E402

model = AutoModelForSequenceClassification.from_pretrained(checkpoint, num_labels=2)

from torch.optim import AdamW  # noqa: E402  (transformers.AdamW is gone)

optimizer = AdamW(model.parameters(), lr=5e-5)

from transformers import get_scheduler  # noqa: E402

num_epochs = args.epochs
num_training_steps = num_epochs * len(train_dataloader)
lr_scheduler = get_scheduler(
    "linear",
    optimizer=optimizer,
    num_warmup_steps=0,
    num_training_steps=num_training_steps,
)

device = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")
model.to(device)

from tqdm.auto import tqdm  # noqa: E402

progress_bar = tqdm(range(num_training_steps))

# measurement: token counters stay on the device (no per-step sync); read once after the loop
real_tokens = torch.zeros((), dtype=torch.int64, device=device)
padded_tokens = 0
if device.type == "cuda":
    torch.cuda.synchronize()
t_train = time.perf_counter()

model.train()
for epoch in range(num_epochs):
    for batch in train_dataloader:
        batch = {k: v.to(device) for k, v in batch.items()}
        real_tokens += batch["attention_mask"].sum()  # measurement
        padded_tokens += batch["input_ids"].numel()  # measurement
        outputs = model(**batch)
        loss = outputs.loss
        loss.backward()

        optimizer.step()
        lr_scheduler.step()
        optimizer.zero_grad()
        progress_bar.update(1)

if device.type == "cuda":
    torch.cuda.synchronize()
train_loop_s = time.perf_counter() - t_train
progress_bar.close()
real_tokens = int(real_tokens.item())

t_eval = time.perf_counter()
all_predictions, all_references = [], []  # stands in for metric.add_batch(...)
model.eval()
for batch in eval_dataloader:
    batch = {k: v.to(device) for k, v in batch.items()}
    with torch.no_grad():
        outputs = model(**batch)

    logits = outputs.logits
    predictions = torch.argmax(logits, dim=-1)
    all_predictions.append(predictions.cpu())
    all_references.append(batch["labels"].cpu())

from sklearn.metrics import accuracy_score, f1_score  # noqa: E402  (stands in for metric.compute())

y_pred = torch.cat(all_predictions).numpy()
y_true = torch.cat(all_references).numpy()
metrics = {"accuracy": float(accuracy_score(y_true, y_pred)), "f1": float(f1_score(y_true, y_pred))}
eval_s = time.perf_counter() - t_eval

# ------------------------------------------------------------------------------------ report
train_samples = len(tokenized_datasets["train"])
report = {
    "impl": "baseline",
    "seed": args.seed,
    "epochs": num_epochs,
    "steps": num_training_steps,
    "device": str(device),
    "train_samples": train_samples,
    "eval_samples": len(y_true),
    "train_loop_s": round(train_loop_s, 4),
    "eval_s": round(eval_s, 4),
    "samples_per_s": round(train_samples * num_epochs / train_loop_s, 3),
    "tokens_per_s": round(real_tokens / train_loop_s, 1),
    "padded_tokens_per_s": round(padded_tokens / train_loop_s, 1),
    "train_tokens": real_tokens,
    "train_padded_tokens": padded_tokens,
    "accuracy": metrics["accuracy"],
    "f1": metrics["f1"],
    "peak_rss_mb": round(peak_rss_mb(), 1),
}
if device.type == "cuda":  # measurement
    report["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
report["wall_s"] = round(time.perf_counter() - T0, 4)
text = json.dumps(report, indent=2)
if args.output:
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w") as f:
        f.write(text + "\n")
print(text)

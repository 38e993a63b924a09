"""Peer: the same MRPC fine-tuning with the Hugging Face `transformers.Trainer`.

Same data (benchmarks/_mrpc.py), model, tokenization, padding collator, batch size 8, AdamW lr 5e-5, linear
schedule without warmup, no weight decay, 3 epochs, one evaluation at the end. Everything else is the Trainer's
default (notably gradient clipping at max_grad_norm=1.0, which the chapter's loop does not do).

`--best-flags` on a CUDA GPU: the Trainer's own speed flags, as its documentation recommends them: bf16 (fp16
where the GPU has no bf16), tf32, the fused AdamW (`optim="adamw_torch_fused"`), `torch_compile=True`, two
dataloader workers (pinned memory is its default). Ignored on the CPU, where none of them applies.

    python benchmarks/trainer_peer.py --seed 1 --output /tmp/trainer.json
"""

import time

T0 = time.perf_counter()  # before the heavy imports: wall_s counts from here (interpreter start-up excluded)

import json  # noqa: E402
import os  # noqa: E402
import tempfile  # noqa: E402

from _mrpc import parse_args, peak_rss_mb  # noqa: E402


def main() -> None:
    args, checkpoint = parse_args(__doc__)

    import numpy as np
    import torch
    import transformers
    from sklearn.metrics import accuracy_score, f1_score
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments)

    from _mrpc import load_mrpc

    torch.manual_seed(args.seed)
    transformers.set_seed(args.seed)

    raw_datasets = load_mrpc(args.data_dir, splits=("train", "validation"))  # the Trainer never sees test
    if args.max_train_samples is not None:
        n = min(args.max_train_samples, len(raw_datasets["train"]))
        raw_datasets["train"] = raw_datasets["train"].select(range(n))
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)

    def tokenize_function(example):
        return tokenizer(example["sentence1"], example["sentence2"], truncation=True)

    tokenized_datasets = raw_datasets.map(tokenize_function, batched=True)

    class CountingCollator(DataCollatorWithPadding):
        """DataCollatorWithPadding that also counts real / padded tokens of the batches it builds while
        `counting` is on (training only). Counting happens on CPU tensors in the collator: no device sync."""

        counting = False
        real_tokens = 0
        padded_tokens = 0

        def __call__(self, features):
            batch = super().__call__(features)
            if self.counting:
                self.real_tokens += int(batch["attention_mask"].sum())
                self.padded_tokens += batch["input_ids"].numel()
            return batch

    data_collator = CountingCollator(tokenizer=tokenizer)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint, num_labels=2)

    def compute_metrics(eval_pred):
        logits, labels = eval_pred
        predictions = np.argmax(logits, axis=-1)
        return {"accuracy": float(accuracy_score(labels, predictions)), "f1": float(f1_score(labels, predictions))}

    use_cpu = not torch.cuda.is_available()
    best = {}
    if args.best_flags and not use_cpu:
        bf16 = torch.cuda.is_bf16_supported()
        best = {"bf16": bf16, "fp16": not bf16, "tf32": True, "optim": "adamw_torch_fused", "torch_compile": True,
                "dataloader_num_workers": 2}
    with tempfile.TemporaryDirectory(prefix="trainer_peer_") as output_dir:
        training_args = TrainingArguments(
            output_dir=output_dir,
            per_device_train_batch_size=8,
            per_device_eval_batch_size=8,
            learning_rate=5e-5,
            num_train_epochs=args.epochs,
            lr_scheduler_type="linear",
            warmup_steps=0,
            weight_decay=0.0,
            seed=args.seed,
            report_to=[],
            save_strategy="no",
            eval_strategy="no",  # one evaluation after training, below
            logging_steps=50,
            disable_tqdm=True,
            use_cpu=use_cpu,
            **best,
        )
        trainer = Trainer(
            model=model,
            args=training_args,
            train_dataset=tokenized_datasets["train"],
            eval_dataset=tokenized_datasets["validation"],
            data_collator=data_collator,
            processing_class=tokenizer,
            compute_metrics=compute_metrics,
        )
        data_collator.counting = True
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        t_train = time.perf_counter()
        train_output = trainer.train()
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        train_loop_s = time.perf_counter() - t_train
        data_collator.counting = False

        t_eval = time.perf_counter()
        metrics = trainer.evaluate()
        eval_s = time.perf_counter() - t_eval
        device = str(training_args.device)

    train_samples = len(tokenized_datasets["train"])
    report = {
        "impl": "trainer",
        "seed": args.seed,
        "epochs": args.epochs,
        "steps": train_output.global_step,
        "device": device,
        "train_samples": train_samples,
        "eval_samples": len(tokenized_datasets["validation"]),
        "train_loop_s": round(train_loop_s, 4),
        "eval_s": round(eval_s, 4),
        "samples_per_s": round(train_samples * args.epochs / train_loop_s, 3),
        "tokens_per_s": round(data_collator.real_tokens / train_loop_s, 1),
        "padded_tokens_per_s": round(data_collator.padded_tokens / train_loop_s, 1),
        "train_tokens": data_collator.real_tokens,
        "train_padded_tokens": data_collator.padded_tokens,
        "train_loss": round(float(train_output.training_loss), 6),
        "accuracy": metrics["eval_accuracy"],
        "f1": metrics["eval_f1"],
        "peak_rss_mb": round(peak_rss_mb(), 1),
        "trainer_flags": best,
    }
    if not use_cpu:
        report["peak_gpu_memory_mb"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    report["wall_s"] = round(time.perf_counter() - T0, 4)
    text = json.dumps(report, indent=2)
    if args.output:
        os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
        with open(args.output, "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()

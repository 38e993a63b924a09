"""Tokenized rows held in memory, and the batches `Classifier.run` takes from them in this process: longest first,
cut by a token budget (short rows go in many-row batches, long rows in few-row ones, so every batch holds about the
same work), each padded with numpy to its own longest row. On a GPU the batch is made in pinned pages so that the
copy to the device does not block (`OnDevice` moves it with non_blocking). No datasets.Dataset is built: texts
given in memory, a file for `tuneloop predict` and a served request all come here as plain lists."""

from __future__ import annotations

import numpy as np
import torch

from ..data.batch import LABELS, MODEL_INPUTS, ROW, Batch, batch_columns

TOKEN_BUDGET = 8192          # padded tokens per batch at most (a row longer than this is a batch of its own)


class Tokenized:
    """Tokenized rows as lists, a column per name: the model's inputs (input_ids, and token_type_ids /
    attention_mask when the tokenizer gives them), `doc` (the row each piece belongs to: windows share one) and
    `labels` when known."""

    def __init__(self, columns: dict):
        self.columns = {name: columns[name] for name in batch_columns(list(columns)) if name in columns}

    @classmethod
    def of(cls, rows) -> "Tokenized":
        """`rows` as they are, or a tokenized datasets.Dataset read into lists (its batch columns only)."""
        if isinstance(rows, cls):
            return rows
        return cls(rows.select_columns(batch_columns(rows.column_names)).with_format(None)[:])

    def __len__(self) -> int:
        return len(self.columns["input_ids"])

    def texts(self) -> int:
        """How many texts these rows hold: a long text's windows are several rows with one `doc`."""
        docs = self.columns.get(ROW)
        return len(self) if docs is None else len(set(docs))

    def as_dataset(self):
        """These rows as a datasets.Dataset with their lengths, for the loaders of a launch
        (data/batching.eval_loader, which Accelerate shares out over the processes)."""
        import datasets

        return datasets.Dataset.from_dict({**self.columns, "length": [len(x) for x in self.columns["input_ids"]]})


class BudgetBatches:
    """The batches of `rows`, longest first: up to `max_rows` rows and `budget` padded tokens each (a row longer
    than the budget alone). Padding follows the tokenizer (its pad id and side); the attention mask marks the
    real tokens."""

    def __init__(self, rows: Tokenized, max_rows: int, pad_id: int, padding_side: str = "right",
                 budget: int = TOKEN_BUDGET, pin: bool = False):
        self.rows, self.pad_id, self.left, self.pin = rows, pad_id, padding_side == "left", pin
        lengths = np.fromiter((len(ids) for ids in rows.columns["input_ids"]), dtype=np.int64, count=len(rows))
        order = np.argsort(-lengths, kind="stable")
        self.spans, start = [], 0
        while start < len(order):                     # longest first: the first row of a batch is its longest
            n = int(max(1, min(max_rows, budget // max(1, lengths[order[start]]))))
            self.spans.append(order[start:start + n])
            start += n
        self.lengths = lengths

    def __len__(self) -> int:
        return len(self.spans)

    def __iter__(self):
        return (self.batch(span) for span in self.spans)

    def batch(self, span: np.ndarray) -> Batch:
        columns, width = self.rows.columns, int(self.lengths[span[0]])
        inputs = {}
        for name in MODEL_INPUTS:
            if name == "attention_mask" or name not in columns:
                continue
            inputs[name] = self._padded([columns[name][i] for i in span], width,
                                        self.pad_id if name == "input_ids" else 0)
        inputs["attention_mask"] = self._padded([[1] * int(self.lengths[i]) for i in span], width, 0)
        labels = torch.tensor([columns[LABELS][i] for i in span]) if LABELS in columns else None
        rows = torch.as_tensor(np.asarray([columns[ROW][i] for i in span], dtype=np.int64)) if ROW in columns \
            else torch.as_tensor(span.astype(np.int64))
        batch = Batch(inputs, labels, rows=rows)
        return Batch({k: v.pin_memory() for k, v in inputs.items()}, labels, rows=rows) if self.pin else batch

    def _padded(self, lists: list, width: int, value: int) -> torch.Tensor:
        out = np.full((len(lists), width), value, dtype=np.int64)
        for r, ids in enumerate(lists):
            if self.left:
                out[r, width - len(ids):] = ids
            else:
                out[r, :len(ids)] = ids
        return torch.from_numpy(out)

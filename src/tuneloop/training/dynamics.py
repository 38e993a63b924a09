"""Each training row's predicted probabilities per epoch, recorded on the loop's forward line (no host sync), kept
in checkpoints, summed over processes at the end and ranked into label_issues.csv (analysis/label_issues.py)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np
import torch

from ..analysis.label_issues import issue_rows
from ..atomic import atomic_write_bytes
from ..layout import DYNAMICS_FILE, LABEL_ISSUES_FILE, PREDICTIONS_DIR
from ..predict.rows import write_predictions

log = logging.getLogger("tuneloop")


MAX_BYTES = 1 << 30                        # the per-epoch probabilities must fit in this on the device


class TrainingDynamics:
    """Per epoch, the sum of each training row's predicted probabilities and how many times it was seen."""

    def __init__(self, rows: int, num_classes: int, epochs: int, device, objective):
        self.objective, self.epochs = objective, epochs
        self.sums = torch.zeros(epochs, rows, num_classes, device=device)
        self.counts = torch.zeros(epochs, rows, device=device)

    @classmethod
    def make(cls, data, epochs: int, device) -> "TrainingDynamics | None":
        """None for regression, for an empty training split, or when the table would not fit in MAX_BYTES."""
        objective = data.labels.objective
        if not objective.classes or data.train is None or len(data.train) == 0:
            return None
        rows = int(np.max(data.train.with_format("numpy")["doc"])) + 1
        size = epochs * rows * (data.labels.num_labels + 1) * 4
        if size > MAX_BYTES:
            log.warning(f"not ranking training rows for label issues: the probabilities of {rows} rows × "
                        f"{data.labels.num_labels} classes × {epochs} epochs would take {size / 2**30:.1f} GiB")
            return None
        return cls(rows, data.labels.num_labels, epochs, device, objective)

    def record(self, epoch: int, rows: torch.Tensor, logits: torch.Tensor) -> None:
        """One batch: `rows`, each example's training row (its `doc`); `logits` as the model gave them."""
        with torch.no_grad():
            logits = logits.detach().float()
            probs = self.objective.torch_probabilities(logits)
            e = min(epoch, self.epochs - 1)
            rows = rows.to(self.sums.device)
            self.sums[e].index_add_(0, rows, probs.to(self.sums.device))
            self.counts[e].index_add_(0, rows, torch.ones_like(rows, dtype=self.counts.dtype))

    def collect(self, accelerator) -> dict[str, np.ndarray]:
        """The totals over every process, as arrays (called by every process). Afterwards the main process holds
        the totals and the others zeros, so a later collect (the next checkpoint, the end) counts nothing twice."""
        sums, counts = accelerator.reduce(self.sums, "sum"), accelerator.reduce(self.counts, "sum")
        if accelerator.num_processes > 1:
            self.sums.copy_(sums if accelerator.is_main_process else torch.zeros_like(sums))
            self.counts.copy_(counts if accelerator.is_main_process else torch.zeros_like(counts))
        return {"sums": sums.cpu().numpy(), "counts": counts.cpu().numpy()}

    def save(self, arrays: dict[str, np.ndarray], folder: Path) -> None:
        """The collected arrays as folder/train_dynamics.npz (a checkpoint keeps them for --resume)."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **arrays)
        atomic_write_bytes(Path(folder) / DYNAMICS_FILE, buffer.getvalue())

    def load(self, folder: Path, accelerator) -> bool:
        """A checkpoint's arrays into the main process (the others keep zeros); False when it has none."""
        path = Path(folder) / DYNAMICS_FILE
        if not path.is_file():
            return False
        if accelerator.is_main_process:
            with np.load(path) as saved:
                if saved["sums"].shape != tuple(self.sums.shape):
                    return False
                self.sums.copy_(torch.from_numpy(saved["sums"]))
                self.counts.copy_(torch.from_numpy(saved["counts"]))
        return True


def checkpoint_writer(dynamics: TrainingDynamics | None, accelerator):
    """For checkpoint.save_checkpoint: the probabilities so far, collected from every process now and written
    into the checkpoint folder by the main process (a resume continues with them)."""
    if dynamics is None:
        return None
    arrays = dynamics.collect(accelerator)
    return lambda folder: dynamics.save(arrays, folder)


def write_label_issues(run) -> dict | None:
    """OUT/label_issues.csv: every training row, the one whose label is most probably wrong first, and the
    probabilities behind it (predictions/train_dynamics.npz). Called by every process (totals are summed over
    them); returns results.json's summary on the main process."""
    if run.dynamics is None:
        return None
    arrays = run.dynamics.collect(run.accelerator)
    if not run.accelerator.is_main_process:
        return None
    train = run.data.train.with_format("numpy").select_columns(["doc", "labels"])[:]
    given = np.zeros((arrays["sums"].shape[1], *train["labels"].shape[1:]), dtype=train["labels"].dtype)
    given[train["doc"]] = train["labels"]
    rows, summary = issue_rows(run.data.raw.train, given, arrays, run.data.labels)
    run.dynamics.save({**arrays, "given": given}, run.output_dir / PREDICTIONS_DIR)
    write_predictions(rows, str(run.output_dir / LABEL_ISSUES_FILE))
    return summary

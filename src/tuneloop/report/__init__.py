"""What a run leaves for people to read: `report.html` (one self-contained page with its plots) and the model
card (`README.md` beside a saved model).

`write_report(run_dir)` reads what the run folder holds — `metrics.jsonl`, `results.json`, `config.yaml`,
`model/tuneloop.json`, `predictions/eval_<split>.npz` — and works with any subset of them, so it also reports on a
run that is still going. Modules: run (reading a run folder), fmt (values as shown), figures and
prediction_plots (matplotlib), page (the HTML), card (the model card).
"""

from .card import hub_id, write_model_card
from .page import write_report
from .run import read_run

__all__ = ["hub_id", "read_run", "write_model_card", "write_report"]

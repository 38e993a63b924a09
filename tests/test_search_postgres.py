"""`tuneloop search --storage postgresql://...` against a real PostgreSQL server started here (Debian's package:
its own data folder, 127.0.0.1 only, a free port, stopped after): two workers share one study and run each trial
once, a search of another `OUT` refuses `--overwrite` of the shared study, and a resume adds the trials asked for.
The server is started by benchmarks/search_postgres.py's helpers, the benchmark's own."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_search_resume import args, write_rows

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

HAS_SERVER = bool(glob.glob("/usr/lib/postgresql/*/bin/initdb"))


@pytest.fixture(scope="module")
def postgres():
    import search_postgres

    folder = tempfile.mkdtemp(prefix="tuneloop_pg_test_")
    os.chmod(folder, 0o755)
    port = search_postgres.free_port()
    bin_dir, user = search_postgres.start_server(folder, port)
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/tuneloop"
    finally:
        search_postgres.stop_server(bin_dir, folder, user)
        subprocess.run(["rm", "-rf", folder], check=False)


@pytest.mark.skipif(not HAS_SERVER, reason="PostgreSQL is not installed (apt-get install postgresql)")
def test_two_workers_share_one_study_in_postgresql(tiny_model, tmp_path, postgres):
    import optuna

    write_rows(tmp_path / "train.csv", 64, 0)
    write_rows(tmp_path / "dev.csv", 24, 1)
    (tmp_path / "a.yaml").write_text("lr: {low: 1.0e-3, high: 1.0e-2, log: true}\n")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    shared = ["--storage", postgres, "--study", "shared"]
    workers = [subprocess.Popen([sys.executable, "-m", "tuneloop", *args(tiny_model, tmp_path, tmp_path / f"w{i}",
                                                                          trials=2), *shared, "--epochs", "1"],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for i in range(2)]
    outputs = [w.communicate(timeout=300)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], outputs
    trials = optuna.load_study(study_name="shared", storage=postgres).get_trials()
    finished = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(finished) >= 2 and len({t.number for t in trials}) == len(trials)       # each trial run once
    ran = [json.loads((tmp_path / f"w{i}" / "search.json").read_text()) for i in range(2)]
    values = {t.value for t in finished}         # each worker's best is of the one study, as it stood at its end
    assert all(r["best"]["value"] in values for r in ran) and max(r["best"]["value"] for r in ran) == max(values)
    # another OUT may not wipe the shared study; a resume of worker 0 adds the one trial asked for beyond those
    done = subprocess.run([sys.executable, "-m", "tuneloop", *args(tiny_model, tmp_path, tmp_path / "w2", trials=3),
                           *shared, "--overwrite"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and "--study" in done.stderr and "Traceback" not in done.stderr, done.stderr
    more = subprocess.run([sys.executable, "-m", "tuneloop", *args(tiny_model, tmp_path, tmp_path / "w0",
                                                                   trials=len(finished) + 1), *shared, "--resume",
                                                                   "--epochs", "1"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert more.returncode == 0, more.stdout + more.stderr
    after = optuna.load_study(study_name="shared", storage=postgres).get_trials()
    assert len([t for t in after if t.state == optuna.trial.TrialState.COMPLETE]) == len(finished) + 1

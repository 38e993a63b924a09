"""Two `tuneloop search` workers sharing one Optuna study in a real PostgreSQL server started here.

What a team does across machines, on one machine: a throwaway PostgreSQL cluster (Debian's `postgresql` package,
its own data folder, listening on 127.0.0.1 only, a free port), then two worker processes, each pinned to its own
CPU core, both running

    tuneloop search --storage postgresql://postgres@127.0.0.1:PORT/tuneloop --study demo --trials N ...

on the built-in MRPC sample (400 training pairs, 100 dev) with the embedded MiniLM and --recipe fast. The study
hands out trials: each is run once, by one worker. Prints each worker's output and the study's trials (number,
state, value, which worker ran it), writes a JSON into benchmarks/results/, then stops the server and removes
its folder. Needs: the postgresql package (initdb/pg_ctl), psycopg (`pip install -e .[postgres]`); run as root
(the server runs as the `postgres` user) or as a user who can run initdb.

    python benchmarks/search_postgres.py --trials 6
"""

from __future__ import annotations

import argparse
import datetime as dt
import glob
import json
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from bench_train import default_out, machine_info, write_atomic  # noqa: E402

SPACE = """lr: {low: 3.0e-5, high: 3.0e-4, log: true}
warmup_ratio: {low: 0.0, high: 0.2}
epochs: {low: 1, high: 3}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def as_server_user(cmd: list[str], user: str | None) -> list[str]:
    return ["runuser", "-u", user, "--", *cmd] if user else cmd


def start_server(folder: str, port: int) -> tuple[str, str | None]:
    """initdb + pg_ctl start on 127.0.0.1:port (trust authentication, local only); returns (bin dir, user)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise SystemExit("PostgreSQL is not installed: apt-get install postgresql")
    bin_dir = os.path.dirname(found[-1])
    user = "postgres" if os.geteuid() == 0 else None        # initdb refuses to run as root
    data = os.path.join(folder, "data")
    os.makedirs(data)
    if user:
        pw = pwd.getpwnam(user)
        for path in (folder, data):
            os.chown(path, pw.pw_uid, pw.pw_gid)
    subprocess.run(as_server_user([f"{bin_dir}/initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8"],
                                  user), check=True, capture_output=True, timeout=120)
    subprocess.run(as_server_user([f"{bin_dir}/pg_ctl", "-D", data, "-w", "-t", "60", "-l", f"{folder}/server.log",
                                   "-o", f"-c listen_addresses=127.0.0.1 -p {port} -k {folder}", "start"], user),
                   check=True, capture_output=True, timeout=120)
    subprocess.run(as_server_user([f"{bin_dir}/createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres",
                                   "tuneloop"], user), check=True, capture_output=True, timeout=60)
    return bin_dir, user


def stop_server(bin_dir: str, folder: str, user: str | None) -> None:
    subprocess.run(as_server_user([f"{bin_dir}/pg_ctl", "-D", os.path.join(folder, "data"), "-m", "fast", "-w",
                                   "stop"], user), capture_output=True, timeout=120)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trials", type=int, default=6)
    p.add_argument("--out", default=None)
    p.add_argument("--timeout", type=float, default=1800, help="seconds the workers may take (default 1800)")
    args = p.parse_args(argv)
    folder = tempfile.mkdtemp(prefix="tuneloop_pg_")
    port = free_port()
    url = f"postgresql://postgres@127.0.0.1:{port}/tuneloop"
    bin_dir, user = start_server(folder, port)
    print(f"PostgreSQL {os.path.basename(os.path.dirname(bin_dir))} on 127.0.0.1:{port} (data in {folder})",
          flush=True)
    work = tempfile.mkdtemp(prefix="tuneloop_pg_search_")
    space = os.path.join(work, "space.yaml")
    with open(space, "w") as f:
        f.write(SPACE)
    try:
        started = time.perf_counter()
        workers = []
        for i in range(2):
            cmd = ["taskset", "-c", str(i % os.cpu_count()), sys.executable, "-m", "tuneloop", "search", "--space",
                   space, "--trials", str(args.trials), "--storage", url, "--study", "demo", "--recipe", "fast",
                   "--output-dir", os.path.join(work, f"worker-{i}"), "--quiet"]
            env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
            workers.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        outputs = [w.communicate(timeout=args.timeout)[0] for w in workers]
        wall = time.perf_counter() - started
        for i, (w, text) in enumerate(zip(workers, outputs)):
            print(f"--- worker {i} (pid {w.pid}, exit {w.returncode}) ---\n{text.strip()}", flush=True)
        import optuna

        study = optuna.load_study(study_name="demo", storage=url)
        pids = {w.pid: i for i, w in enumerate(workers)}
        trials = [{"number": t.number, "state": t.state.name.lower(), "value": t.user_attrs.get("value"),
                   "params": t.params, "worker": pids.get(t.user_attrs.get("pid")),
                   "seconds": round((t.datetime_complete - t.datetime_start).total_seconds(), 1)
                   if t.datetime_complete else None} for t in study.get_trials()]
        print("--- the study in PostgreSQL ---")
        for t in trials:
            value = "" if t["value"] is None else f"{t['value']:.4f}"
            print(f"trial {t['number']:2d}  worker {t['worker']}  {t['state']:8s}  f1 {value:6s}  {t['seconds']} s  "
                  f"{json.dumps(t['params'])}")
        print(f"{len(trials)} trials, {sum(t['state'] == 'pruned' for t in trials)} pruned, wall {wall:.0f} s")
        machine = machine_info()
        out = args.out or default_out(dt.date.today().isoformat(), machine, "-search-postgres")
        write_atomic(out, {"date": dt.datetime.now().isoformat(timespec="seconds"), "machine": machine,
                           "command": " ".join([sys.executable, *sys.argv]), "storage": "PostgreSQL (local)",
                           "wall_s": round(wall, 1), "trials": trials,
                           "worker_exit_codes": [w.returncode for w in workers]})
        print(f"results: {out}")
        return 0 if all(w.returncode == 0 for w in workers) else 1
    finally:
        stop_server(bin_dir, folder, user)
        shutil.rmtree(folder, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())

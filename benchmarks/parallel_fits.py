"""Several fits at once: k-fold cross-validation of ``BayesianSVC`` with joblib's ``n_jobs``.

JAX's CPU backend sizes its thread pool to the cores the process may use
when the backend starts (its first computation), and a compiled program's
parallel operations wait for every thread of the pool. Two JAX processes
on the same cores then each run a pool as large as the machine, and an
operation waits whenever one of its threads has been descheduled for the
other process.

Each arm runs in a fresh process (no persistent compilation cache) and
cross-validates ``BayesianSVC()`` over ``--folds`` stratified folds of a
training subsample of scikit-learn's breast cancer data (standardised by
its rows), scored by log loss on the fold held out:

* ``n_jobs=1``: the folds one after the other in the process;
* ``n_jobs=2``: joblib's default (loky) worker processes, as
  ``cross_val_score(..., n_jobs=2)`` runs them;
* ``n_jobs=2, pinned``: the same, but each worker restricts itself to one
  core (``os.sched_setaffinity``) before its first fit, so its JAX pool has
  one thread (Linux only).

Reported per arm (median over ``--repeats`` processes, alternating arms):
the cross-validation's wall time, its ratio to ``n_jobs=1``, the slowest
and the median single fit (a worker's first fit compiles), and the mean
log loss (the same folds in every arm). Usage::

    python benchmarks/parallel_fits.py                 # 300 rows, 4 folds, 2 processes per arm
    python benchmarks/parallel_fits.py --n 200 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

from cold_start import _environment, _nll, _training_split

RESULTS = Path(__file__).parent / "results"
ARMS = ("n_jobs=1", "n_jobs=2", "n_jobs=2, pinned")


def _fold(index: int, X, y, train, test, pin: bool) -> dict:
    """One fold's fit and score, in whichever process joblib runs it; with ``pin``, the process first keeps to one
    core (chosen by the fold's index: joblib hands the first folds to different workers) if JAX has not started."""
    from jax._src import xla_bridge  # no public way to ask whether the backend has started (jax 0.10)

    import bayesvm

    if pin and not xla_bridge.backends_are_initialized():
        cores = sorted(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {cores[index % len(cores)]})
    start = time.perf_counter()
    model = bayesvm.BayesianSVC().fit(X[train], y[train])
    return {"pid": os.getpid(), "fit_s": time.perf_counter() - start, "nll": _nll(model, X[test], y[test])}


def child(arm: str, n_train: int, folds: int, seed: int) -> dict:
    """One arm's cross-validation in this (fresh) process."""
    from joblib import Parallel, delayed
    from sklearn.model_selection import StratifiedKFold

    X, _, y, _ = _training_split(n_train, seed)
    splits = StratifiedKFold(folds, shuffle=True, random_state=seed).split(X, y)
    start = time.perf_counter()
    fits = Parallel(n_jobs=1 if arm == "n_jobs=1" else 2)(
        delayed(_fold)(i, X, y, train, test, arm.endswith("pinned")) for i, (train, test) in enumerate(splits))
    return {"cv_s": time.perf_counter() - start, "fits": fits,
            "nll": statistics.mean(fit["nll"] for fit in fits)}


def in_fresh_process(arm: str, n_train: int, folds: int, seed: int) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", arm, "--n", str(n_train),
               "--folds", str(folds), "--seed", str(seed)]
    done = subprocess.run(command, capture_output=True, text=True, env=_environment(),
                          cwd=Path(__file__).resolve().parent)
    if done.returncode != 0:
        raise RuntimeError(f"{arm} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(runs: dict[str, list[dict]]) -> str:
    head = f"{'arm':<18}{'CV s':>8}{'vs n_jobs=1':>13}{'slowest fit s':>15}{'median fit s':>14}{'NLL':>8}"
    lines = [head, "-" * len(head)]
    serial = statistics.median(run["cv_s"] for run in runs["n_jobs=1"])
    for arm, rows in runs.items():
        cv = statistics.median(run["cv_s"] for run in rows)
        slowest = statistics.median(max(f["fit_s"] for f in run["fits"]) for run in rows)
        typical = statistics.median(statistics.median(f["fit_s"] for f in run["fits"]) for run in rows)
        nll = statistics.median(run["nll"] for run in rows)
        lines.append(f"{arm:<18}{cv:>8.1f}{cv / serial:>12.2f}x{slowest:>15.1f}{typical:>14.1f}{nll:>8.3f}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="training rows cross-validated (default 300)")
    parser.add_argument("--folds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2, help="fresh processes per arm (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, default=RESULTS / "parallel_fits.json")
    parser.add_argument("--child", choices=ARMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n, args.folds, args.seed)))
        return 0
    if not hasattr(os, "sched_setaffinity"):
        parser.error("the pinned arm needs os.sched_setaffinity (Linux)")
    runs = {arm: [] for arm in ARMS}
    for _ in range(args.repeats):
        for arm in ARMS:
            runs[arm].append(in_fresh_process(arm, args.n, args.folds, args.seed))
            print(f"{arm}: {runs[arm][-1]['cv_s']:.1f} s", flush=True)
    print(table(runs))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "settings": {"n": args.n, "folds": args.folds, "repeats": args.repeats, "seed": args.seed},
        "runs": runs,
    }, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

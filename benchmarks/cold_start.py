"""Cold start: a newcomer's first fit in a fresh Python process, with and without the compilation cache.

Each arm runs in a fresh process that imports its library, fits on a
stratified training subsample of scikit-learn's breast cancer data
(standardised by the training rows) and predicts the rest:

* ``bayesvm``: ``BayesianSVC().fit`` (the evidence search and its checks) and
  ``predict_proba``, with no persistent compilation cache;
* ``bayesvm, cache written``: the same after
  ``bayesvm.enable_compilation_cache(DIR)`` with DIR empty (the process
  compiles and writes its programs);
* ``bayesvm, cache read``: the same again in a new process, DIR now filled;
* ``grid+Platt``: ``GridSearchCV(SVC(kernel="rbf"), cv=5)`` over an
  11 x 11 grid of (C, gamma), then ``CalibratedClassifierCV(method="sigmoid", cv=5)``
  of the best SVC (as benchmarks/selection.py); imports no JAX;
* ``..., 5-fold CV``: the same fit in each of five stratified folds of the
  training rows, scored by log loss on the fold held out, in one fresh
  process: five fits at nearby training-set sizes (about 4n/5 each), which
  share compiled programs where their sizes pad to the same one (no cache).

Reported per arm (median over ``--repeats`` processes): the process's wall
time (and its ratio to the grid+Platt process of the same kind), its import and fit seconds
(for the CV arms: the whole cross-validation), and JAX's own counts from
``jax.monitoring``: programs compiled (backend compilations), their summed
compile seconds (a program read from the persistent cache still counts, with
its read time), and persistent-cache hits. Counts do not drift with the
machine's load; seconds do. Usage::

    python benchmarks/cold_start.py                  # n = 150 and 400, 3 processes per arm
    python benchmarks/cold_start.py --sizes 150 --repeats 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results"
ARMS = ("bayesvm", "bayesvm, cache written", "bayesvm, cache read", "grid+Platt", "bayesvm, 5-fold CV",
        "grid+Platt, 5-fold CV")
#: the grid search's grid: 11 x 11, half a decade apart (as benchmarks/selection.py)
GRID = {"C": [10.0 ** (k / 2) for k in range(-4, 7)], "gamma": [10.0 ** (k / 2) for k in range(-8, 3)]}


# ---------------------------------------------------------------------------
# the child: one fresh process, one arm


def _training_split(n_train: int, seed: int):
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=n_train, stratify=y, random_state=seed)
    mean, sd = X_train.mean(0), X_train.std(0)
    return (X_train - mean) / sd, (X_test - mean) / sd, y_train, y_test


def _jax_counter():
    """Backend compilations, their seconds, and persistent-cache hits, from jax.monitoring."""
    from jax import monitoring

    counts = {"compilations": 0, "compile_s": 0.0, "cache_hits": 0}

    def on_duration(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compilations"] += 1
            counts["compile_s"] += duration

    def on_event(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            counts["cache_hits"] += 1

    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_event_listener(on_event)
    return counts


def _grid_and_platt():
    """Imports scikit-learn's SVM and returns the fit: the grid search's best SVC, then Platt scaling of it by
    5-fold CalibratedClassifierCV."""
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    def fit(X, y):
        search = GridSearchCV(SVC(kernel="rbf"), GRID, cv=5).fit(X, y)
        return CalibratedClassifierCV(SVC(kernel="rbf", **search.best_params_), method="sigmoid", cv=5).fit(X, y)

    return fit


def _nll(model, X, y) -> float:
    p = np.clip(model.predict_proba(X)[:, list(model.classes_).index(1)], 1e-12, 1 - 1e-12)
    return float(-np.mean(np.where(y == 1, np.log(p), np.log1p(-p))))


def child(arm: str, n_train: int, seed: int, cache: str | None, folds: int) -> dict:
    """One arm in this (fresh) process: imports, then the fit and predict, or ``folds``-fold CV when folds > 1."""
    start = time.perf_counter()
    if arm == "grid+Platt":
        counts = {}
        fit = _grid_and_platt()
    else:
        counts = _jax_counter()
        import bayesvm

        if cache is not None:
            bayesvm.enable_compilation_cache(cache)

        def fit(X, y):
            return bayesvm.BayesianSVC().fit(X, y)
    import_s = time.perf_counter() - start
    X_train, X_test, y_train, y_test = _training_split(n_train, seed)
    fit_start = time.perf_counter()
    if folds > 1:
        from sklearn.model_selection import StratifiedKFold

        nll = [_nll(fit(X_train[a], y_train[a]), X_train[b], y_train[b])
               for a, b in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X_train, y_train)]
        return {"import_s": import_s, "fit_s": time.perf_counter() - fit_start, "nll": float(np.mean(nll)),
                **counts}
    model = fit(X_train, y_train)
    fit_s = time.perf_counter() - fit_start
    return {"import_s": import_s, "fit_s": fit_s, "nll": _nll(model, X_test, y_test), **counts}


# ---------------------------------------------------------------------------
# the parent: fresh processes, the table, the JSON


def _environment() -> dict:
    """No persistent cache from the caller's environment."""
    return {k: v for k, v in os.environ.items()
            if k != "JAX_COMPILATION_CACHE_DIR" and not k.startswith("JAX_PERSISTENT_CACHE")}


def in_fresh_process(arm: str, n_train: int, seed: int, cache: str | None = None, folds: int = 1) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", arm, "--n", str(n_train),
               "--seed", str(seed), "--folds", str(folds)] + (["--cache", cache] if cache else [])
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=_environment())
    if done.returncode != 0:
        raise RuntimeError(f"{arm} at n = {n_train} failed:\n{done.stderr[-2000:]}")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    return {"process_s": time.perf_counter() - start, **record}


def run_size(n_train: int, repeats: int, cv: bool) -> dict[str, list[dict]]:
    runs = {arm: [] for arm in ARMS}
    for seed in range(repeats):
        with tempfile.TemporaryDirectory() as cache:
            runs["bayesvm"].append(in_fresh_process("bayesvm", n_train, seed))
            runs["bayesvm, cache written"].append(in_fresh_process("bayesvm", n_train, seed, cache))
            runs["bayesvm, cache read"].append(in_fresh_process("bayesvm", n_train, seed, cache))
        runs["grid+Platt"].append(in_fresh_process("grid+Platt", n_train, seed))
    if cv:
        runs["bayesvm, 5-fold CV"].append(in_fresh_process("bayesvm", n_train, 0, folds=5))
        runs["grid+Platt, 5-fold CV"].append(in_fresh_process("grid+Platt", n_train, 0, folds=5))
    return {arm: rows for arm, rows in runs.items() if rows}


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def table(results: dict) -> str:
    head = (f"{'n':>5}  {'arm':<24}{'process s':>10}{'import s':>9}{'fit s':>8}{'vs grid':>8}"
            f"{'programs':>9}{'compile s':>10}{'hits':>6}{'NLL':>7}")
    lines = [head, "-" * len(head)]
    for n_train, runs in results.items():
        for arm, rows in runs.items():
            grid = _median(runs["grid+Platt" + (", 5-fold CV" if "CV" in arm else "")], "process_s")
            process = _median(rows, "process_s")
            cells = [f"{n_train:>5}  {arm:<24}{process:>10.1f}{_median(rows, 'import_s'):>9.1f}",
                     f"{_median(rows, 'fit_s'):>8.1f}{process / grid:>7.1f}x"]
            if arm.startswith("grid+Platt"):
                cells.append(f"{'':>9}{'':>10}{'':>6}")
            else:
                cells.append(f"{_median(rows, 'compilations'):>9.0f}{_median(rows, 'compile_s'):>10.1f}"
                             f"{_median(rows, 'cache_hits'):>6.0f}")
            cells.append(f"{_median(rows, 'nll'):>7.3f}")
            lines.append("".join(cells))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[150, 400])
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per arm and size (default 3)")
    parser.add_argument("--json", type=Path, default=RESULTS / "cold_start.json")
    parser.add_argument("--child", choices=("bayesvm", "grid+Platt"), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--folds", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--no-cv", action="store_true", help="leave out the two 5-fold CV arms")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.n, args.seed, args.cache, args.folds)))
        return 0
    results = {n_train: run_size(n_train, args.repeats, not args.no_cv) for n_train in args.sizes}
    print(table(results))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "repeats": args.repeats,
        "runs": {str(n): runs for n, runs in results.items()},
    }, indent=1))
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

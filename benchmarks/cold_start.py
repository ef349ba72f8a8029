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
    python benchmarks/cold_start.py --quick           # smoke run: n = 100, one process per arm, no CV arms

Processes use seeds ``--seed`` .. ``--seed + --repeats - 1`` for their training rows. Writes
benchmarks/results/cold_start.json (``--out``).
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
from _common import (
    RESULTS,
    add_standard_arguments,
    binary_nll,
    breast_cancer_split,
    fresh_environment,
    grid_search_platt,
    jax_compilation_counter,
    write_json,
)

ARMS = ("bayesvm", "bayesvm, cache written", "bayesvm, cache read", "grid+Platt", "bayesvm, 5-fold CV",
        "grid+Platt, 5-fold CV")


# ---------------------------------------------------------------------------
# the child: one fresh process, one arm


def child(arm: str, n_train: int, seed: int, cache: str | None, folds: int) -> dict:
    """One arm in this (fresh) process: imports, then the fit and predict, or ``folds``-fold CV when folds > 1."""
    start = time.perf_counter()
    if arm == "grid+Platt":
        counts = {}
        import sklearn.calibration  # noqa: F401  (scikit-learn's import belongs to the import time)
        import sklearn.model_selection  # noqa: F401
        import sklearn.svm  # noqa: F401

        def fit(X, y):
            return grid_search_platt(X, y)[1]
    else:
        counts = jax_compilation_counter()
        import bayesvm

        if cache is not None:
            bayesvm.enable_compilation_cache(cache)

        def fit(X, y):
            return bayesvm.BayesianSVC().fit(X, y)
    import_s = time.perf_counter() - start
    X_train, X_test, y_train, y_test = breast_cancer_split(n_train, seed)
    fit_start = time.perf_counter()
    if folds > 1:
        from sklearn.model_selection import StratifiedKFold

        nll = [binary_nll(fit(X_train[a], y_train[a]), X_train[b], y_train[b])
               for a, b in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X_train, y_train)]
        return {"import_s": import_s, "fit_s": time.perf_counter() - fit_start, "nll": float(np.mean(nll)),
                **counts}
    model = fit(X_train, y_train)
    fit_s = time.perf_counter() - fit_start
    return {"import_s": import_s, "fit_s": fit_s, "nll": binary_nll(model, X_test, y_test), **counts}


# ---------------------------------------------------------------------------
# the parent: fresh processes, the table, the JSON


def in_fresh_process(arm: str, n_train: int, seed: int, cache: str | None = None, folds: int = 1) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", arm, "--n", str(n_train),
               "--seed", str(seed), "--folds", str(folds)] + (["--cache", cache] if cache else [])
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=fresh_environment())
    if done.returncode != 0:
        raise RuntimeError(f"{arm} at n = {n_train} failed:\n{done.stderr[-2000:]}")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    return {"process_s": time.perf_counter() - start, **record}


def run_size(n_train: int, repeats: int, cv: bool, first_seed: int = 0) -> dict[str, list[dict]]:
    runs = {arm: [] for arm in ARMS}
    for seed in range(first_seed, first_seed + repeats):
        with tempfile.TemporaryDirectory() as cache:
            runs["bayesvm"].append(in_fresh_process("bayesvm", n_train, seed))
            runs["bayesvm, cache written"].append(in_fresh_process("bayesvm", n_train, seed, cache))
            runs["bayesvm, cache read"].append(in_fresh_process("bayesvm", n_train, seed, cache))
        runs["grid+Platt"].append(in_fresh_process("grid+Platt", n_train, seed))
    if cv:
        runs["bayesvm, 5-fold CV"].append(in_fresh_process("bayesvm", n_train, first_seed, folds=5))
        runs["grid+Platt, 5-fold CV"].append(in_fresh_process("grid+Platt", n_train, first_seed, folds=5))
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
    parser.add_argument("--no-cv", action="store_true", help="leave out the two 5-fold CV arms")
    add_standard_arguments(parser, out=RESULTS / "cold_start.json", seed=0,
                           quick="smoke run: n = 100, one process per arm, no CV arms")
    parser.add_argument("--json", dest="out", type=Path, help=argparse.SUPPRESS)  # the former spelling of --out
    parser.add_argument("--child", choices=("bayesvm", "grid+Platt"), help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    parser.add_argument("--folds", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.no_cv = [100], 1, True
    if args.child:
        print(json.dumps(child(args.child, args.n, args.seed, args.cache, args.folds)))
        return 0
    results = {n_train: run_size(n_train, args.repeats, not args.no_cv, args.seed) for n_train in args.sizes}
    print(table(results))
    write_json(args.out, {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "repeats": args.repeats,
        "runs": {str(n): runs for n, runs in results.items()},
    })
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

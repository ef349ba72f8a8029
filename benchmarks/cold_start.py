"""Cold start: a newcomer's first fit in a fresh Python process, with and without the package's compilation cache.

Each arm runs in a fresh process that imports its library, fits on a
stratified training subsample of scikit-learn's breast cancer data
(standardised by the training rows) and predicts the rest:

* ``bayesvm, no cache``: ``BayesianSVC().fit`` (the evidence search and its
  checks) and ``predict_proba`` with ``BAYESVM_NO_CACHE=1`` (every program
  compiled in the process);
* ``bayesvm, empty cache``: the same with the package's compilation cache on
  (its default) in an empty folder (``XDG_CACHE_HOME`` a new temporary
  folder): the process compiles and writes its programs;
* ``bayesvm, cache read``: the same again in a new process, the folder now
  filled: a second process on the machine;
* ``grid+Platt``: ``GridSearchCV(SVC(kernel="rbf"), cv=5)`` over an
  11 x 11 grid of (C, gamma), then ``CalibratedClassifierCV(method="sigmoid", cv=5)``
  of the best SVC (as benchmarks/selection.py); imports no JAX;
* ``..., 5-fold CV``: the same fit in each of five stratified folds of the
  training rows, scored by log loss on the fold held out, in one fresh
  process: five fits at nearby training-set sizes (about 4n/5 each), which
  share compiled programs where their sizes pad to the same one (no cache).

Reported per arm (median over ``--repeats`` processes): the process's wall
time (and its ratio to the grid+Platt process of the same kind), its import and fit seconds
(for the CV arms: the whole cross-validation), JAX's backend compilations (``compiled``: the package's programs
and any other) with their summed seconds (``XLA s``; ``jax.monitoring``), and the package's programs loaded from
its cache (``bayesvm.compilation.cache_statistics``, which also counts those it compiled). Counts do not drift with
the machine's load; seconds do.

Targets, for sizes of 150-200 rows, each printed as met or missed: the process with an empty cache at most
:data:`FIRST_PROCESS_TARGET_S` seconds, the process reading the cache at most :data:`SECOND_PROCESS_TARGET_RATIO`
times grid+Platt's. Usage::

    python benchmarks/cold_start.py                  # n = 150 and 400, 3 processes per arm
    python benchmarks/cold_start.py --sizes 189 --repeats 1 --no-cv
    python benchmarks/cold_start.py --quick           # smoke run: n = 100, one process per arm, no CV arms

Processes use seeds ``--seed`` .. ``--seed + --repeats - 1`` for their training rows. Writes
benchmarks/results/cold_start.json (``--out``) with the commit, the command and the machine.
"""

from __future__ import annotations

import argparse
import importlib
import json
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
    cpu_model,
    environment,
    fresh_environment,
    grid_search_platt,
    jax_compilation_counter,
    write_json,
)

ARMS = ("bayesvm, no cache", "bayesvm, empty cache", "bayesvm, cache read", "grid+Platt", "bayesvm, 5-fold CV",
        "grid+Platt, 5-fold CV")

#: the first fit's process with an empty cache, 150-200 rows, seconds
FIRST_PROCESS_TARGET_S = 8.0
#: a second process (the cache read) against grid+Platt's process, 150-200 rows
SECOND_PROCESS_TARGET_RATIO = 1.5
#: the sizes the targets are set for
TARGET_SIZES = range(150, 201)


# ---------------------------------------------------------------------------
# the child: one fresh process, one arm


def child(arm: str, n_train: int, seed: int, folds: int) -> dict:
    """One arm in this (fresh) process: imports, then the fit and predict, or ``folds``-fold CV when folds > 1.
    The package's cache is as the environment sets it (``XDG_CACHE_HOME``, ``BAYESVM_NO_CACHE``)."""
    start = time.perf_counter()
    if arm == "grid+Platt":
        counts = {}
        for module in ("sklearn.calibration", "sklearn.model_selection", "sklearn.svm"):
            importlib.import_module(module)  # scikit-learn's import belongs to the import time

        def fit(X, y):
            return grid_search_platt(X, y)[1]
    else:
        counts = jax_compilation_counter()
        import bayesvm
        from bayesvm.compilation import cache_statistics

        def fit(X, y):
            return bayesvm.BayesianSVC().fit(X, y)
    import_s = time.perf_counter() - start
    X_train, X_test, y_train, y_test = breast_cancer_split(n_train, seed)
    fit_start = time.perf_counter()
    if folds > 1:
        from sklearn.model_selection import StratifiedKFold

        nll = [binary_nll(fit(X_train[a], y_train[a]), X_train[b], y_train[b])
               for a, b in StratifiedKFold(folds, shuffle=True, random_state=seed).split(X_train, y_train)]
        record = {"import_s": import_s, "fit_s": time.perf_counter() - fit_start, "nll": float(np.mean(nll))}
    else:
        model = fit(X_train, y_train)
        fit_s = time.perf_counter() - fit_start
        record = {"import_s": import_s, "fit_s": fit_s, "nll": binary_nll(model, X_test, y_test)}
    if arm != "grid+Platt":
        statistics_ = cache_statistics()
        counts.update(programs_compiled=statistics_["compiled"], programs_loaded=statistics_["loaded"])
    return {**record, **counts}


# ---------------------------------------------------------------------------
# the parent: fresh processes, the table, the JSON


def in_fresh_process(arm: str, n_train: int, seed: int, cache_home: str | None = None, folds: int = 1) -> dict:
    """``arm`` ("bayesvm" or "grid+Platt") in a fresh process; bayesvm's cache in ``cache_home`` (None: off)."""
    command = [sys.executable, str(Path(__file__).resolve()), "--child", arm, "--n", str(n_train),
               "--seed", str(seed), "--folds", str(folds)]
    env = {key: value for key, value in fresh_environment().items() if key != "BAYESVM_NO_CACHE"}
    env.update({"XDG_CACHE_HOME": cache_home} if cache_home else {"BAYESVM_NO_CACHE": "1"})
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{arm} at n = {n_train} failed:\n{done.stderr[-2000:]}")
    record = json.loads(done.stdout.strip().splitlines()[-1])
    return {"process_s": time.perf_counter() - start, **record}


def run_size(n_train: int, repeats: int, cv: bool, first_seed: int = 0) -> dict[str, list[dict]]:
    runs = {arm: [] for arm in ARMS}
    for seed in range(first_seed, first_seed + repeats):
        runs["bayesvm, no cache"].append(in_fresh_process("bayesvm", n_train, seed))
        with tempfile.TemporaryDirectory() as cache_home:
            runs["bayesvm, empty cache"].append(in_fresh_process("bayesvm", n_train, seed, cache_home))
            runs["bayesvm, cache read"].append(in_fresh_process("bayesvm", n_train, seed, cache_home))
        runs["grid+Platt"].append(in_fresh_process("grid+Platt", n_train, seed))
    if cv:
        runs["bayesvm, 5-fold CV"].append(in_fresh_process("bayesvm", n_train, first_seed, folds=5))
        runs["grid+Platt, 5-fold CV"].append(in_fresh_process("grid+Platt", n_train, first_seed, folds=5))
    return {arm: rows for arm, rows in runs.items() if rows}


def _median(rows: list[dict], key: str) -> float:
    return statistics.median(row[key] for row in rows)


def table(results: dict) -> str:
    head = (f"{'n':>5}  {'arm':<24}{'process s':>10}{'import s':>9}{'fit s':>8}{'vs grid':>8}"
            f"{'compiled':>9}{'loaded':>7}{'XLA s':>7}{'NLL':>7}")
    lines = [head, "-" * len(head)]
    for n_train, runs in results.items():
        for arm, rows in runs.items():
            grid = _median(runs["grid+Platt" + (", 5-fold CV" if "CV" in arm else "")], "process_s")
            process = _median(rows, "process_s")
            cells = [f"{n_train:>5}  {arm:<24}{process:>10.1f}{_median(rows, 'import_s'):>9.1f}",
                     f"{_median(rows, 'fit_s'):>8.1f}{process / grid:>7.1f}x"]
            if arm.startswith("grid+Platt"):
                cells.append(f"{'':>9}{'':>7}{'':>7}")
            else:
                cells.append(f"{_median(rows, 'compilations'):>9.0f}{_median(rows, 'programs_loaded'):>7.0f}"
                             f"{_median(rows, 'compile_s'):>7.1f}")
            cells.append(f"{_median(rows, 'nll'):>7.3f}")
            lines.append("".join(cells))
    return "\n".join(lines)


def targets(results: dict) -> list[dict]:
    """Each target at each size of :data:`TARGET_SIZES` measured: its value (median over the processes), its bound
    and whether it was met."""
    found = []
    for n_train, runs in results.items():
        if n_train not in TARGET_SIZES:
            continue
        first = _median(runs["bayesvm, empty cache"], "process_s")
        ratio = _median(runs["bayesvm, cache read"], "process_s") / _median(runs["grid+Platt"], "process_s")
        found += [{"n": n_train, "target": "first process, empty cache (s)", "value": first,
                   "bound": FIRST_PROCESS_TARGET_S, "met": first <= FIRST_PROCESS_TARGET_S},
                  {"n": n_train, "target": "second process / grid+Platt's", "value": ratio,
                   "bound": SECOND_PROCESS_TARGET_RATIO, "met": ratio <= SECOND_PROCESS_TARGET_RATIO}]
    return found


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
    parser.add_argument("--folds", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.repeats, args.no_cv = [100], 1, True
    if args.child:
        print(json.dumps(child(args.child, args.n, args.seed, args.folds)))
        return 0
    results = {n_train: run_size(n_train, args.repeats, not args.no_cv, args.seed) for n_train in args.sizes}
    print(table(results))
    checked = targets(results)
    for target in checked:
        print(f"target at n = {target['n']}: {target['target']} {target['value']:.2f} against {target['bound']}: "
              f"{'met' if target['met'] else 'missed'}")
    write_json(args.out, {
        "command": [Path(sys.executable).name, *sys.argv],
        "machine": {**environment(), "cpu": cpu_model()},
        "repeats": args.repeats,
        "targets": checked,
        "runs": {str(n): runs for n, runs in results.items()},
    })
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Default fits on data the selection benchmark does not use: any exception, every warning, time and NLL.

A newcomer's data are not the six open sets the other benchmarks tune on.
This runs ``BayesianSVC()`` with its defaults (``selection.run_search``), and
5-fold grid search + Platt scaling beside it (``selection.run_cv_platt``, the same 11 x 11 grid),
on eleven problems of other shapes: two-feature clusters (moons, circles,
two overlapping Gaussians), many features for few rows, a noisy 20-feature
problem, duplicated rows, wine, bupa, australian, digits 1 vs 7 and 900 rows
of the health-insurance set. Each: a stratified 70/30 split (seed 0),
features standardised on the training part, one process for all (the first
fit compiles). Reported per problem: whether the fit raised, its
warnings, whether the check at its answer passed, seconds and test NLL of
both arms.

    python benchmarks/held_out_style.py [--cases moons600 circles300 ...] [--output FILE]

Prints a table and writes benchmarks/results/held_out_style.json.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
from pathlib import Path

import numpy as np
from sklearn.datasets import load_wine, make_circles, make_classification, make_moons
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from bayesvm.datasets import load_dataset
from selection import run_cv_platt, run_search

RESULTS = Path(__file__).parent / "results" / "held_out_style.json"


def _two_gaussians(n: int = 400, shift: float = 0.3):
    rng = np.random.default_rng(5)
    X = np.r_[rng.normal(size=(n // 2, 3)), rng.normal(size=(n // 2, 3)) + shift]
    return X, np.r_[np.zeros(n // 2), np.ones(n // 2)]


def _duplicated_rows(n: int = 300):
    X = np.random.default_rng(7).normal(size=(n // 2, 4))
    return np.repeat(X, 2, axis=0), np.repeat((X[:, 0] > 0).astype(int), 2)


def _wine_two_classes():
    wine = load_wine()
    keep = wine.target < 2
    return wine.data[keep], wine.target[keep]


def _health_insurance(n: int = 900):
    X, y = load_dataset("health_insurance", return_X_y=True)
    rows = np.random.default_rng(0).choice(len(X), n, replace=False)
    return X[rows], y[rows]


CASES = {
    "moons600": lambda: make_moons(600, noise=0.3, random_state=0),
    "circles300": lambda: make_circles(300, noise=0.15, factor=0.5, random_state=1),
    "classification800_20d": lambda: make_classification(800, 20, n_informative=5, flip_y=0.1, random_state=2),
    "classification120_50d": lambda: make_classification(120, 50, n_informative=3, random_state=3),
    "wine_0v1": _wine_two_classes,
    "bupa": lambda: load_dataset("bupa", return_X_y=True),
    "australian": lambda: load_dataset("australian", return_X_y=True),
    "digits_1v7": lambda: load_dataset("digits_1v7", return_X_y=True),
    "health_insurance900": _health_insurance,
    "two_gaussians400": _two_gaussians,
    "duplicated_rows300": _duplicated_rows,
}


def run_bayesvm(X_train, y_train, X_test, y_test) -> dict:
    """The selection benchmark's search arm (``selection.run_search``); a fit that raises is a result here, with
    its traceback, not the end of the run."""
    started = time.perf_counter()
    try:
        return run_search(X_train, y_train, X_test, y_test)
    except Exception as error:
        return {"exception": repr(error), "traceback": traceback.format_exc(), "fit_s": time.perf_counter() - started}


def study(name: str) -> dict:
    X, y = CASES[name]()
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    platt = run_cv_platt(X_train, y_train, X_test, y_test)
    return {"case": name, "n_train": int(len(y_train)), "d": int(X.shape[1]), "bayesvm": run_bayesvm(
        X_train, y_train, X_test, y_test), "cv+platt": {"fit_s": platt["fit_s"], "nll": platt["nll"]}}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    print(f"{'case':<22} {'n':>4} {'d':>3}  {'bayesvm s':>9} {'NLL':>6} {'checks':>7}  {'grid+Platt s':>12} {'NLL':>6}"
          "  warnings / exception", flush=True)
    rows = []
    for name in args.cases:
        row = study(name)
        rows.append(row)
        ours, theirs = row["bayesvm"], row["cv+platt"]
        notes = ours.get("exception") or "; ".join(w["message"][:90] for w in ours["warnings"])
        checks = "pass" if ours.get("report", {}).get("trusted") else "FAIL"
        print(f"{name:<22} {row['n_train']:>4} {row['d']:>3}  {ours['fit_s']:>9.1f} {ours.get('nll', np.nan):>6.3f} "
              f"{checks:>7}  {theirs['fit_s']:>12.1f} {theirs['nll']:>6.3f}  {notes}", flush=True)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

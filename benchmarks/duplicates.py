"""Repeated rows: a fit costs what its distinct rows cost.

On data sets whose rows repeat, side by side in one process pinned to one core, on one stratified 70/30 split:

* ``ours``: ``BayesianSVC()`` (the evidence search, its checks, the posterior) and ``predict_proba``, its first
  call in the process (``cold``: the package's compilation cache as found, the state printed) and again (``warm``);
* ``ours, rows x k``: the same on the training rows each repeated ``--copies`` times (warm);
* ``grid+Platt``: 5-fold 11 x 11 grid search over (C, gamma) and ``CalibratedClassifierCV(method="sigmoid")``.

The sets: ``thirteen``, 1,050 rows on 13 distinct inputs of three categorical features (each input's label drawn
with its own probability, so most inputs carry both labels), and the duplicate-heavy open sets of
benchmarks/fit_cost.py (``mammographic``, ``led7digit``, ``flaref``). Reported per set: rows, distinct inputs,
collapsed rows (distinct input and label), seconds, held-out NLL, the search's evaluations and EP sweeps, and the
ratios. Every row k times is another data set (each row weighs k: a sharper posterior, other hyperparameters), so
its search may take more evaluations; the ratio per evaluation is printed beside the ratio of seconds.

Targets, each printed as met or missed: on ``thirteen``, ``ours`` (warm) no slower than grid+Platt; on every set,
``ours, rows x k`` within 1.2x of ``ours`` (warm). Usage::

    python benchmarks/duplicates.py                  # every set, k = 3
    python benchmarks/duplicates.py --quick          # thirteen only

Writes benchmarks/results/duplicates.json (``--out``) with the commit, the command and the machine.
"""

from __future__ import annotations

import argparse
import os
import warnings

import numpy as np
from _common import (RESULTS, add_standard_arguments, binary_nll, environment, grid_search_platt, markdown_table,
                     pin_one_core, timed, write_json)

#: ours with every row k times against ours with the rows once
COPIES_TARGET_RATIO = 1.2
OPEN_SETS = ("mammographic", "led7digit", "flaref")


def thirteen(seed: int = 0, n: int = 1050):
    """1,050 rows on 13 distinct inputs of three categorical features (3 x 3 x 2 levels, 13 of the 18 cells),
    standardised; input j is drawn with frequency proportional to j + 1 and labelled +1 with probability p_j."""
    rng = np.random.default_rng(seed)
    cells = np.array([(a, b, c) for a in range(3) for b in range(3) for c in range(2)], dtype=np.float64)
    inputs = cells[rng.choice(len(cells), size=13, replace=False)]
    frequency = np.arange(1.0, 14.0)
    rows = rng.choice(13, size=n, p=frequency / frequency.sum())
    p_plus = 1.0 / (1.0 + np.exp(-(inputs @ np.array([1.2, -0.8, 1.5]) - 2.0)))
    y = np.where(rng.random(n) < p_plus[rows], 1, -1)
    X = inputs[rows]
    return (X - X.mean(axis=0)) / X.std(axis=0), y, "13 distinct inputs, three categorical features"


def load(name: str, seed: int):
    if name == "thirteen":
        return thirteen(seed)
    from fit_cost import load as load_open_set

    return load_open_set(name)


def cache_state() -> str:
    """The package's compilation cache as this process finds it: off, or how many files its folder holds."""
    from bayesvm.compilation import NO_CACHE_VARIABLE, cache_directory

    if os.environ.get(NO_CACHE_VARIABLE, "") not in ("", "0"):
        return "off"
    folder = cache_directory()
    files = sum(len(names) for _, _, names in os.walk(folder)) if folder.is_dir() else 0
    return f"{files} files in {folder}"


def run_set(name: str, copies: int, seed: int) -> dict:
    from sklearn.model_selection import train_test_split

    from bayesvm import BayesianSVC, BayesvmWarning
    from bayesvm.compilation import cache_statistics

    X, y, shape = load(name, seed)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, stratify=y, random_state=seed)
    record = {"dataset": name, "shape": shape, "n_train": len(y_train),
              "distinct_inputs": int(len(np.unique(X_train, axis=0))),
              "collapsed_rows": int(len(np.unique(np.column_stack([X_train, y_train]), axis=0))),
              "cache_before": cache_state()}
    _, calibrated, search_s, calibration_s = grid_search_platt(X_train, y_train)
    record["grid+Platt"] = {"seconds": search_s + calibration_s, "nll": binary_nll(calibrated, X_test, y_test)}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", BayesvmWarning)
        for arm, rows in (("ours, cold", 1), ("ours", 1), ("ours, rows x k", copies)):
            model, seconds = timed(BayesianSVC().fit, np.repeat(X_train, rows, axis=0), np.repeat(y_train, rows))
            record[arm] = {"seconds": seconds, "nll": binary_nll(model, X_test, y_test),
                           "programs": cache_statistics(),
                           "C": float(model.C_), "log_evidence": model.log_evidence_,
                           "evaluations": model.selection_.search.n_evaluations,
                           "ep_sweeps": model.selection_.search.ep_sweeps}
    record["copies_ratio"] = record["ours, rows x k"]["seconds"] / record["ours"]["seconds"]
    # the copies are another data set (each row weighs k): its search may take more evaluations, each costs the same
    record["copies_ratio_per_evaluation"] = record["copies_ratio"] * (
        record["ours"]["evaluations"] / record["ours, rows x k"]["evaluations"])
    record["vs_grid_platt"] = record["grid+Platt"]["seconds"] / record["ours"]["seconds"]
    return record


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_standard_arguments(parser, out=RESULTS / "duplicates.json", quick="the thirteen-input set only")
    parser.add_argument("--copies", type=int, default=3, help="k: each training row repeated k times (default 3)")
    parser.add_argument("--datasets", nargs="+", default=["thirteen", *OPEN_SETS])
    args = parser.parse_args()
    core = pin_one_core()
    names = ["thirteen"] if args.quick else args.datasets
    records = []
    for name in names:
        records.append(run_set(name, args.copies, args.seed))
        r = records[-1]
        print(f"{name}: n {r['n_train']}, distinct inputs {r['distinct_inputs']}, collapsed rows "
              f"{r['collapsed_rows']}; ours {r['ours']['seconds']:.1f} s (cold {r['ours, cold']['seconds']:.1f} s), "
              f"rows x {args.copies} {r['ours, rows x k']['seconds']:.1f} s, grid+Platt "
              f"{r['grid+Platt']['seconds']:.1f} s", flush=True)
    print()
    print(markdown_table(
        ["set", "n", "distinct", "collapsed", "ours cold s", "ours s", f"x{args.copies} s", "x k ratio",
         "per eval.",
         "grid+Platt s", "grid/ours", "NLL ours", "NLL grid+Platt"],
        [[r["dataset"], r["n_train"], r["distinct_inputs"], r["collapsed_rows"], f"{r['ours, cold']['seconds']:.1f}",
          f"{r['ours']['seconds']:.1f}", f"{r['ours, rows x k']['seconds']:.1f}", f"{r['copies_ratio']:.2f}",
          f"{r['copies_ratio_per_evaluation']:.2f}",
          f"{r['grid+Platt']['seconds']:.1f}", f"{r['vs_grid_platt']:.2f}", f"{r['ours']['nll']:.4f}",
          f"{r['grid+Platt']['nll']:.4f}"] for r in records]))
    targets = []
    for r in records:
        if r["dataset"] == "thirteen":
            targets.append(("thirteen: ours (warm) no slower than grid+Platt", r["vs_grid_platt"] >= 1.0))
        targets.append((f"{r['dataset']}: rows x {args.copies} within {COPIES_TARGET_RATIO}x of once",
                        r["copies_ratio"] <= COPIES_TARGET_RATIO))
    print()
    for text, met in targets:
        print(f"{'MET   ' if met else 'MISSED'} {text}")
    write_json(args.out, {"environment": environment(), "core": core, "copies": args.copies,
                          "records": records, "targets": [{"target": t, "met": m} for t, m in targets]})


if __name__ == "__main__":
    main()

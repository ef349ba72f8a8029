"""Calibration benchmark: Bayesian SVM probabilities against calibration baselines.

Runs :func:`bayesvm.comparison.compare_calibration` on breast cancer,
digits 3 vs 8, Pima, ionosphere, BUPA liver and Ripley's synth (5 stratified
70/30 splits each) and prints, per data set, NLL / Brier / ECE / error
(mean +- std over splits, rank in brackets), then the average rank of every
method per metric across the data sets.

Hyperparameters (fixed, NOT evidence-selected yet): RBF kernel, amplitude 1,
offset 1, length scale = median pairwise distance of the first split's
training part; C from {0.1, 0.3, 1, 3, 10, 30} by 5-fold cross-validated
error rate of the MAP SVM on that same training part (ties to the smaller C).
The same (kernel, C) is used on all five splits. Features are standardised on
the whole data set by the loader.

Usage:  python benchmarks/calibration.py [--datasets pima synth] [--splits 5]
        python benchmarks/calibration.py --quick     # smoke run: synth, 2 splits
Writes benchmarks/results/calibration.json (``--out``) and a reliability-diagram
figure beside it, calibration_reliability.png.
"""

from __future__ import annotations

import argparse
import time

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from _common import RESULTS, add_standard_arguments, write_json
from sklearn.model_selection import StratifiedShuffleSplit

from bayesvm.comparison import (
    METHOD_LABELS,
    METRICS,
    compare_calibration,
    cross_validated_C,
    median_heuristic_kernel,
)
from bayesvm.datasets import load_dataset

DATASETS = ("breast_cancer", "digits_3v8", "pima", "ionosphere", "bupa", "synth")
C_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)


def fixed_hyperparameters(X, y, *, test_size: float, cv_folds: int, random_state: int):
    """Median-heuristic RBF and CV-error C, both from the first split's training part."""
    splitter = StratifiedShuffleSplit(n_splits=1, test_size=test_size, random_state=random_state)
    train, _ = next(splitter.split(X, y))
    kernel = median_heuristic_kernel(X[train])
    C = cross_validated_C(X[train], y[train], kernel, C_GRID, cv=cv_folds, random_state=random_state)
    return kernel, C


def average_ranks(results: dict) -> dict[str, dict[str, float]]:
    """metric -> method -> rank averaged over the data sets."""
    methods = next(iter(results.values()))["methods"]
    return {
        k: {m: float(np.mean([r["ranks"][k][m] for r in results.values()])) for m in methods} for k in METRICS
    }


def rank_table(ranks: dict[str, dict[str, float]]) -> str:
    methods = list(next(iter(ranks.values())))
    width = max(len(METHOD_LABELS[m]) for m in methods)
    lines = [f"{'method':<{width}}" + "".join(f"  {k:>6}" for k in METRICS) + "    mean"]
    order = sorted(methods, key=lambda m: np.mean([ranks[k][m] for k in METRICS]))
    for m in order:
        values = [ranks[k][m] for k in METRICS]
        lines.append(f"{METHOD_LABELS[m]:<{width}}" + "".join(f"  {v:6.2f}" for v in values) + f"  {np.mean(values):6.2f}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--test-size", type=float, default=0.3)
    parser.add_argument("--cv-folds", type=int, default=5)
    add_standard_arguments(parser, out=RESULTS / "calibration.json", seed=0, splits=5,
                           quick="smoke run: synth, 2 splits")
    args = parser.parse_args()
    if args.quick:
        args.datasets, args.splits = ["synth"], 2
    figure_path = args.out.with_name("calibration_reliability.png")
    results, comparisons = {}, {}
    for name in args.datasets:
        X, y = load_dataset(name, return_X_y=True)
        start = time.perf_counter()
        kernel, C = fixed_hyperparameters(X, y, test_size=args.test_size, cv_folds=args.cv_folds,
                                          random_state=args.seed)
        comparison = compare_calibration(X, y, kernel=kernel, C=C, n_splits=args.splits, test_size=args.test_size,
                                         cv_folds=args.cv_folds, random_state=args.seed)
        seconds = time.perf_counter() - start
        comparisons[name] = comparison
        results[name] = {**comparison.to_dict(), "seconds": seconds, "C_grid": list(C_GRID)}
        print(f"\n== {name}: n={X.shape[0]}, d={X.shape[1]}, RBF length scale {float(kernel.length_scale):.3g}, "
              f"C={C:g}, {seconds:.0f} s")
        print(comparison.table())

    ranks = average_ranks(results)
    print(f"\n== average rank over {len(results)} data sets (1 = best; sorted by the mean over metrics)")
    print(rank_table(ranks))
    write_json(args.out, {"datasets": results, "average_ranks": ranks})

    fig, axes = plt.subplots(2, (len(comparisons) + 1) // 2, figsize=(4.2 * ((len(comparisons) + 1) // 2), 8.4),
                             squeeze=False, layout="constrained")
    for ax, (name, comparison) in zip(axes.ravel(), comparisons.items()):
        comparison.plot(ax=ax)
        ax.set_title(name)
    for ax in axes.ravel()[len(comparisons):]:
        ax.set_visible(False)
    fig.savefig(figure_path, dpi=110)
    print(f"\nwrote {args.out} and {figure_path}")


if __name__ == "__main__":
    main()

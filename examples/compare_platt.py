"""Evidence-selected Bayesian SVM probabilities against Platt scaling on real data.

Loads the Pima Indians diabetes data (768 points, 8 standardised features,
+1 = tested positive; by default a stratified 400-point subsample, ``--all``
for every point) and runs :func:`bayesvm.compare_calibration` on
stratified 70/30 train/test splits. On each training part the RBF
hyperparameters (length scale, C k0, C; offset k_b = k0) are chosen by
maximising the evidence with :func:`bayesvm.select_hyperparameters` (the
``select`` hook; package defaults for the evidence approximation and the
normalisation, a small grid extended at most once where the optimum is on
its edge, no local refinement). The MAP SVM is fitted once with them,
and its test outputs are turned into probabilities three ways:

* the Bayesian SVM's own posterior-averaged probability <Q(+1|theta)>/<nu(theta)>
  (no extra fitting: the probabilities follow from C and k0);
* Platt scaling and isotonic regression, fitted on 5-fold out-of-fold
  decision values of the same SVM on the training part (Platt's protocol).

Prints the selected hyperparameters per split and a table of the test
scores (negative log-likelihood, Brier score, expected calibration error with
10 equal-width bins, error rate; mean +- standard deviation over the splits,
all "lower is better"), and writes ``compare_platt.png``: the reliability
diagram of each method side by side (test predictions pooled over the
splits, +-1 binomial standard errors), with the share of test points per
bin underneath.

Usage::

    python examples/compare_platt.py [--out DIR] [--quick] [--all] [--splits N]

``--quick`` (or BAYESVM_QUICK=1): one split of a 200-point stratified
subsample and a 1 x 2 x 2 grid without grid extension, for CI.
The default run uses a 400-point stratified subsample, one split and a
2 x 3 x 3 grid; ``--all`` uses all 768 points, ``--splits N`` more splits
(timings: docs/examples/compare_platt.md).
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import bayesvm  # noqa: E402
from bayesvm import plotting  # noqa: E402
from bayesvm.comparison import METHOD_LABELS, METRICS  # noqa: E402
from bayesvm.datasets import load_dataset  # noqa: E402

DATASET = "pima"
METHODS = ("bsvm_averaged", "platt", "isotonic")
METRIC_NAMES = {"nll": "NLL", "brier": "Brier", "ece": "ECE (10 bins)", "error": "error"}
SEED = 0
#: evidence grids (length scale x C k0 x C, k_b / k0 = 1); the median pairwise distance of the
#: standardised Pima inputs is about 3.6
FULL_GRID = {"length_scale": [1.5, 3.0], "C_k0": [0.3, 1.0, 3.0], "C": [0.3, 1.0, 3.0]}
QUICK_GRID = {"length_scale": [4.0], "C_k0": [0.3, 3.0], "C": [0.5, 2.0]}
#: points of the stratified subsample used by default and in quick mode; ``--all`` uses all 768 (537 training)
DEFAULT_POINTS = 400
QUICK_POINTS = 200


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNG")
    parser.add_argument("--quick", action="store_true", help="small problem, for CI (also BAYESVM_QUICK=1)")
    parser.add_argument("--all", action="store_true", help=f"all 768 points instead of a {DEFAULT_POINTS}-point subsample")
    parser.add_argument("--splits", type=int, default=None,
                        help="train/test splits (default 1; each adds about 40 s on 2 cores)")
    args = parser.parse_args(argv)
    args.quick = args.quick or os.environ.get("BAYESVM_QUICK", "") not in ("", "0")
    if args.splits is None:
        args.splits = 1
    if args.splits < 1:
        parser.error(f"--splits must be >= 1; got {args.splits}")
    return args


def splits(n: int) -> str:
    return "one stratified 70/30 split" if n == 1 else f"{n} stratified 70/30 splits"


def evidence_selector(grid: dict, quick: bool, surfaces: list):
    """``select(X_train, y_train) -> (kernel, C)`` by evidence maximisation; keeps each surface in ``surfaces``."""
    options = dict(method="grid", options=bayesvm.selection.select.GridOptions(refine=False, max_extensions=0 if quick else 1))

    def select(X_train, y_train):
        started = time.perf_counter()
        surface = bayesvm.select_hyperparameters(X_train, y_train, kernel="rbf", grid=grid, **options)
        surfaces.append(surface)
        print(f"  split {len(surfaces) - 1}: evidence selection on {len(y_train)} points took "
              f"{time.perf_counter() - started:.0f} s", flush=True)
        return surface.best_kernel, surface.best_C

    return select


def choices_table(result, surfaces) -> str:
    """The hyperparameters selected on each split's training part."""
    lines = ["| split | n train | length scale | C k0 | C | ln P(D) +- se | marginal | on grid edge |",
             "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for number, (split, surface) in enumerate(zip(result.splits, surfaces)):
        best, ev = surface.best, surface.evidence
        lines.append(
            f"| {number} | {split.train_index.size} | {best['length_scale']:.3g} | {best['C_k0']:.3g} | "
            f"{best['C']:.3g} | {ev.total:.2f} +- {ev.total_se:.2f} | {ev.n_marginal} | "
            f"{', '.join(surface.at_edge) or 'no'} |"
        )
    return "\n".join(lines)


def scores_table(result) -> str:
    """Methods as rows, metrics as columns: mean +- std over the splits (markdown)."""
    mean, std = result.mean(), result.std()
    lines = ["| method | " + " | ".join(METRIC_NAMES[k] for k in METRICS) + " |",
             "|---|" + "---:|" * len(METRICS)]
    for method in result.methods:
        cells = " | ".join(f"{mean[k][method]:.4f} +- {std[k][method]:.4f}" for k in METRICS)
        lines.append(f"| {METHOD_LABELS[method]} | {cells} |")
    return "\n".join(lines)


def figure(result, title: str):
    """One reliability diagram (with the histogram of its predictions) per method, side by side."""
    fig, axes = plt.subplots(2, len(result.methods), figsize=(4.6 * len(result.methods), 5.6), sharex=True,
                             sharey="row", height_ratios=(3, 1), layout="constrained", squeeze=False)
    curves, mean = result.reliability(), result.mean()
    for column, method in enumerate(result.methods):
        diagram, hist = axes[0, column], axes[1, column]
        plotting.plot_reliability({METHOD_LABELS[method]: tuple(curves[method])}, ax=(diagram, hist))
        diagram.set_title(f"{METHOD_LABELS[method]}\nNLL {mean['nll'][method]:.3f}, ECE {mean['ece'][method]:.3f}",
                          fontsize="medium")
        if column > 0:
            diagram.set_ylabel("")
            hist.set_ylabel("")
    fig.suptitle(title, fontsize="medium")
    return fig


def main(argv=None) -> Path:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    data = load_dataset(DATASET)
    X, y = data.X, data.y
    points = QUICK_POINTS if args.quick else None if args.all else DEFAULT_POINTS
    if points is not None:
        X, _, y, _ = train_test_split(X, y, train_size=points, stratify=y, random_state=SEED)
    grid = QUICK_GRID if args.quick else FULL_GRID
    print(f"{data.description}\n{X.shape[0]} points ({int(np.sum(y > 0))} +1), {X.shape[1]} features; "
          f"{splits(args.splits)}; evidence grid "
          f"{' x '.join(str(len(grid[a])) for a in ('length_scale', 'C_k0', 'C'))} (length scale x C k0 x C), "
          "k_b / k0 = 1")
    surfaces: list = []
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = bayesvm.compare_calibration(
            X, y, select=evidence_selector(grid, args.quick, surfaces), methods=METHODS, n_splits=args.splits,
            test_size=0.3, random_state=SEED,
        )
    seconds = time.perf_counter() - started
    for message in dict.fromkeys(str(w.message) for w in caught):
        print(f"warning: {message}")
    print(f"\nevidence: ln Q(D) by {surfaces[0].approximation!r}, ln N(D) by {surfaces[0].normalization!r}")
    print(choices_table(result, surfaces))
    print(f"\ntest scores, mean +- std over the {splits(args.splits)} ({seconds:.1f} s)")
    print(scores_table(result))
    fig = figure(result, f"Pima, {X.shape[0]} points, {splits(args.splits)}: test predictions"
                         + (" pooled over the splits" if args.splits > 1 else ""))
    path = plotting.save_figure(fig, args.out / "compare_platt.png")
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()

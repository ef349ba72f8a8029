"""The main job on a real data set: choose an SVM's hyperparameters by the evidence.

Loads the Wisconsin breast-cancer data (569 points, 30 standardised
features, labels -1/+1), makes one stratified 70/30 train/test split and
chooses C, the RBF amplitude k0 (through C k0), its length scale and (with
k_b / k0 = 1 held fixed) the offset by maximising the evidence ln P(D) on
the training part with :func:`bayesvm.select_hyperparameters` (the
package's default approximation of ln Q(D) and estimator of ln N(D), and
its local refinement around the grid optimum). Then runs 5-fold
cross-validation (``method="cv"``) on the same grid. CV sees only C k0 (the
MAP solution, and so every decision, depends on C and k0 only through their
product), so it cannot choose C; the evidence can. Both choices are
refitted on the whole training part with :func:`bayesvm.fit_map` and scored
on the held-out 30%.

The grid is fixed by default (``--max-extensions 0``): when the optimum
lies on its edge the selection warns and the table says so. The package
default widens the grid up to 3 times instead
(docs/examples/select_hyperparameters.md).

Prints the two choices side by side (hyperparameters, ln P(D) +- its
standard error, the CV error of each choice, marginal points, test error and
the wall time of each method) and writes ``select_hyperparameters.png``:
left, the evidence over (C k0, length scale), maximised over C, with the
evidence and CV choices marked; right, ln Q(D), ln N(D) and ln P(D) against
C at the grid optimum's C k0 and length scale.

Usage::

    python examples/select_hyperparameters.py [--out DIR] [--quick] [--max-extensions N]
        [--approximation {laplace,ep,sampled}] [--normalization {prior,annealed,ep}]

``--quick`` (or BAYESVM_QUICK=1): a 100-point stratified subsample of the
training part, a 2 x 2 x 2 grid, no refinement and 3-fold CV, for CI. The
full run uses all 398 training points and a 3 x 3 x 3 grid (length scale x
C k0 x C).
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
from matplotlib.ticker import FuncFormatter, NullFormatter  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

import bayesvm  # noqa: E402
from bayesvm.datasets import load_dataset  # noqa: E402
from bayesvm.evidence.approximations import NAIVE_ESTIMATORS  # noqa: E402
from bayesvm.plotting import save_figure  # noqa: E402
from bayesvm.selection.select import GRID_NORMALIZATIONS, GridEstimators, GridOptions  # noqa: E402

DATASET = "breast_cancer"
TEST_SIZE = 0.3
SEED = 0
#: the full-mode grid: 3 length scales x 3 C k0 x 3 C (k_b / k0 = 1), small enough for about a minute;
#: the pairwise distances of the standardised training inputs run from about 3.5 (10% quantile) to
#: 11 (90% quantile)
FULL_GRID = {
    "length_scale": [5.0, 10.0, 20.0],
    "C_k0": [10.0, 100.0, 1000.0],
    "C": [0.3, 1.0, 3.0],
}
QUICK_GRID = {"length_scale": [4.0, 8.0], "C_k0": [1.0, 10.0], "C": [0.5, 2.0]}
#: training points used in quick mode (a stratified subsample of the training part)
QUICK_TRAIN = 100
#: log-axis tick labels as plain numbers (0.1, 1, 10, ...) instead of powers of ten
PLAIN = FuncFormatter(lambda value, _: _tick(value))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNG")
    parser.add_argument("--quick", action="store_true", help="small problem, for CI (also BAYESVM_QUICK=1)")
    parser.add_argument("--approximation", choices=tuple(NAIVE_ESTIMATORS), default=None,
                        help="ln Q(D) approximation (default: the package default of select_hyperparameters)")
    parser.add_argument("--normalization", choices=GRID_NORMALIZATIONS, default=None,
                        help="ln N(D) estimator (default: the package default of select_hyperparameters)")
    parser.add_argument("--max-extensions", type=int, default=0,
                        help="times the evidence grid may be widened where its optimum is on an edge (default 0: "
                             "a fixed grid; the package default is 3); ignored with --quick")
    args = parser.parse_args(argv)
    args.quick = args.quick or os.environ.get("BAYESVM_QUICK", "") not in ("", "0")
    if args.max_extensions < 0:
        parser.error(f"--max-extensions must be >= 0; got {args.max_extensions}")
    return args


def load_split(quick: bool):
    """Stratified 70/30 split of the standardised data; in quick mode a stratified subsample of the training part."""
    data = load_dataset(DATASET)
    X_train, X_test, y_train, y_test = train_test_split(
        data.X, data.y, test_size=TEST_SIZE, stratify=data.y, random_state=SEED
    )
    if quick:
        X_train, _, y_train, _ = train_test_split(
            X_train, y_train, train_size=QUICK_TRAIN, stratify=y_train, random_state=SEED
        )
    return data, X_train, X_test, y_train, y_test


def timed_selection(X, y, grid, method: str, args):
    """select_hyperparameters (package defaults unless overridden); returns (surface, seconds, warning messages)."""
    # full mode: one round of the local refinement (the package default is two; each round evaluates
    # up to 27 cells around the optimum, which is most of this run's time)
    options = dict(cv=3) if args.quick else {}
    if method == "grid":
        options["options"] = (GridOptions(refine=False, max_extensions=0) if args.quick
                              else GridOptions(max_extensions=args.max_extensions, refine_rounds=1))
        options["estimators"] = GridEstimators(**{name: getattr(args, name) for name in ("approximation", "normalization")
                                                  if getattr(args, name) is not None})
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if method == "grid":  # one step per length scale of the grid (or of a grid extension)
            print(f"  evidence: step {done} of {total} ({time.perf_counter() - started:.0f} s)", flush=True)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        surface = bayesvm.select_hyperparameters(X, y, kernel="rbf", grid=grid, method=method, progress=progress,
                                                 **options)
    messages = list(dict.fromkeys(str(w.message) for w in caught))
    return surface, time.perf_counter() - started, messages


def test_error(surface, X_train, y_train, X_test, y_test) -> tuple[float, list[str]]:
    """Error rate on the test part of the MAP SVM refitted at the surface's choice, and the refit's warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit = bayesvm.fit_map(X_train, y_train, C=surface.best_C, kernel=surface.best_kernel)
    error = float(np.mean(np.where(fit.decision_function(X_test) >= 0, 1, -1) != y_test))
    return error, list(dict.fromkeys(str(w.message) for w in caught))


def cross_values(evidence, cv, X_train, y_train, folds: int) -> tuple[float, float]:
    """ln P(D) at the CV choice and the CV error at the evidence choice.

    ln P(D): the best C on the evidence surface at the CV choice's (length
    scale, C k0), which the evidence grid contains (it holds the CV grid, and
    maybe extensions). CV error: a one-cell CV run at the evidence choice
    (same folds), which may lie off the CV grid after extension and refinement.
    """
    i = int(np.argmin(np.abs(np.log(evidence.grid.shape / cv.best["length_scale"]))))
    k = int(np.argmin(np.abs(np.log(evidence.grid.C_k0 / cv.best["C_k0"]))))
    evidence_at_cv = float(np.nanmax(evidence.total[i, 0, k, :]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        at_evidence = bayesvm.select_hyperparameters(
            X_train, y_train, kernel="rbf", method="cv", cv=folds,
            grid={"length_scale": [evidence.best["length_scale"]], "C_k0": [evidence.best["C_k0"]]},
        )
    return evidence_at_cv, -at_evidence.best_value


def table(evidence, cv, errors, seconds, folds: int, crossed: tuple[float, float]) -> str:
    """The two choices side by side."""
    evidence_at_cv, cv_at_evidence = crossed
    ev = evidence.evidence
    rows = [
        ("length scale", f"{evidence.best['length_scale']:.3g}", f"{cv.best['length_scale']:.3g}"),
        ("C k0", f"{evidence.best['C_k0']:.4g}", f"{cv.best['C_k0']:.4g}"),
        ("C", f"{evidence.best['C']:.4g}", "(not identified)"),
        ("amplitude k0 = offset k_b", f"{evidence.best['amplitude']:.4g}", "(C k0 only)"),
        ("ln P(D) +- se", f"{ev.total:.2f} +- {ev.total_se:.2f}", f"{evidence_at_cv:.2f} (grid, best C)"),
        (f"{folds}-fold CV error", f"{cv_at_evidence:.4f}", f"{-cv.best_value:.4f}"),
        ("marginal / support vectors", f"{ev.n_marginal} / {ev.fit.support.size}", ""),
        ("test error", f"{errors['grid']:.4f}", f"{errors['cv']:.4f}"),
        ("wall time", f"{seconds['grid']:.1f} s", f"{seconds['cv']:.1f} s"),
    ]
    rows.insert(0, ("", "evidence", f"{folds}-fold CV"))
    w = [max(len(row[c]) for row in rows) for c in range(3)]
    lines = [f"| {name:<{w[0]}} | {a:>{w[1]}} | {b:>{w[2]}} |" for name, a, b in rows]
    lines.insert(1, f"|{'-' * (w[0] + 2)}|{'-' * (w[1] + 1)}:|{'-' * (w[2] + 1)}:|")
    return "\n".join(lines)


def _tick(value: float) -> str:
    """Short tick label: whole numbers below 10^5 in full (1000), anything else to 3 significant digits."""
    return f"{value:.0f}" if 1 <= value < 1e5 and abs(value - round(value)) < 1e-9 * value else f"{value:.3g}"


def label_log_axis(axis, values: np.ndarray, most: int = 8) -> None:
    """Plain-number tick labels on a log axis: at the grid values when there are few, else the default ticks."""
    if values.size <= most:
        axis.set_ticks(values, labels=[_tick(v) for v in values])
    else:
        axis.set_major_formatter(PLAIN)
    axis.set_minor_formatter(NullFormatter())


def figure(evidence, cv, title: str):
    """Evidence heat map over (C k0, length scale) with both choices (left); the C curve at the optimum (right)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13.5, 4.8), layout="constrained")
    evidence.plot_heatmap(ax=left)
    inside = all(axis[0] <= evidence.best[key] <= axis[-1]
                 for axis, key in ((evidence.grid.C_k0, "C_k0"), (evidence.grid.shape, "length_scale")))
    left.plot(evidence.best["C_k0"], evidence.best["length_scale"], marker="o", ms=9, mfc="none", mec="red",
              mew=2.0, ls="none", label="evidence choice" + ("" if inside else " (refined, off the grid)"))
    left.plot(cv.best["C_k0"], cv.best["length_scale"], marker="X", ms=11, color="orange", mec="black", ls="none",
              label="CV choice")
    left.legend(loc="lower left", fontsize="small", framealpha=0.85)
    left.set_xlabel(r"$C\,k_0$")
    left.set_ylabel("RBF length scale $l$")
    left.set_title(r"$\ln P(D)$, maximised over $C$ at each ($C\,k_0$, $l$)", fontsize="medium")
    evidence.plot_curve(ax=right)
    right.set_xlabel(r"$C$ (at fixed $C\,k_0$)")
    i, _, k, _ = evidence.index
    right.set_title(
        rf"along $C$ at $C\,k_0$ = {evidence.grid.C_k0[k]:.3g}, $l$ = {evidence.grid.shape[i]:.3g} (grid optimum)",
        fontsize="medium",
    )
    label_log_axis(left.xaxis, evidence.grid.C_k0)
    label_log_axis(left.yaxis, evidence.grid.shape)
    label_log_axis(right.xaxis, evidence.grid.C)
    fig.suptitle(title, fontsize="medium")
    return fig


def main(argv=None) -> Path:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    data, X_train, X_test, y_train, y_test = load_split(args.quick)
    grid = QUICK_GRID if args.quick else FULL_GRID
    folds = 3 if args.quick else 5
    print(f"{data.description}\ntraining on {len(y_train)} points ({int(np.sum(y_train > 0))} +1), "
          f"testing on {len(y_test)}; grid {' x '.join(str(len(grid[a])) for a in ('length_scale', 'C_k0', 'C'))} "
          "(length scale x C k0 x C), k_b / k0 = 1")
    surfaces, seconds, errors = {}, {}, {}
    for method in ("grid", "cv"):
        surfaces[method], seconds[method], messages = timed_selection(X_train, y_train, grid, method, args)
        errors[method], refit_messages = test_error(surfaces[method], X_train, y_train, X_test, y_test)
        messages += [f"refit on the training part: {m}" for m in refit_messages]
        for message in messages:
            print(f"warning ({method}): {message}")
    evidence, cv = surfaces["grid"], surfaces["cv"]
    print(f"\nevidence: ln Q(D) by {evidence.approximation!r}, ln N(D) by {evidence.normalization!r}; final grid "
          f"{' x '.join(map(str, evidence.grid.shape_of_surface))} (shape x k_b/k0 x C k0 x C), extensions: "
          f"{', '.join(f'{a} {s}' for a, s in evidence.extensions) or 'none'}, "
          f"optimum on an edge: {', '.join(evidence.at_edge) or 'no'}")
    print(evidence.evidence.summary())
    print()
    print(table(evidence, cv, errors, seconds, folds, cross_values(evidence, cv, X_train, y_train, folds)))
    fig = figure(evidence, cv, f"breast cancer, {len(y_train)} training points: evidence "
                               f"({evidence.approximation} / {evidence.normalization}) and {folds}-fold CV")
    path = save_figure(fig, args.out / "select_hyperparameters.png")
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()

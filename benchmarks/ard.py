"""Per-feature length scales (ARD) chosen by the evidence, against one length scale and a GP classifier with ARD.

Data sets (``--datasets``), each with ``--train`` (default 150) training points
per split and the rest as the test part, over ``--splits`` (default 3)
stratified splits shared by every arm:

* ``irrelevant``: synthetic, 5 standard-normal features of which only the
  first two carry the class, y = sign(sin(2 x_1) + x_2 + 0.3 noise); 150 + 500
  points drawn afresh per split (seed = split);
* ``breast_cancer_mean``: Wisconsin breast cancer (569 points), its first 10
  features (the "mean" measurements), standardised by ``load_dataset``;
* ``pima``: Pima Indians diabetes (768 x 8, the ``datasets`` extra), standardised.

Arms (``--arms``):

* ``ard``: ``BayesianSVC(ard=True)`` -- one length scale per feature by the
  evidence search (``select_hyperparameters`` with ``RBF(length_scale=np.ones(d))``);
* ``iso``: ``BayesianSVC()`` -- one length scale;
* ``gpc-ard``: ``GaussianProcessClassifier(ConstantKernel() * RBF(np.ones(d)))``
  with scikit-learn's defaults (Laplace approximation, L-BFGS-B on its
  marginal likelihood, no restarts).

Metrics per split: held-out negative log-likelihood and error
(``bayesvm.metrics``), the fit's wall seconds, and the chosen length scales
(relevance = 1 / l_j on standardised features); means +- sd over splits. The
bayesvm arms' first fit in the process includes JAX's compilation for that
training-set shape (noted in the JSON as ``first``).

Cost against d (``--scaling-d``, default 2 5 10 20, at ``--scaling-n`` =
200): the ``irrelevant`` generator with 2 relevant and d - 2 noise features;
``BayesianSVC(ard=True)`` is fitted once at each d, its time reported with
its L-BFGS-B evaluations, EP sweeps, tempered-SMC anchors and seconds per
evaluation. Each d is a new input shape, so each fit includes JAX's
compilation for it (about 5-10 s on the development machine, roughly the
same at every d).

Writes benchmarks/results/ard.json (``ard_quick.json`` with ``--quick``) and
the relevance figure docs/figures/ard_relevances.png (not with ``--quick``):
each data set's chosen l_j per feature, geometric mean over splits with
error bars of one sd of ln l_j across splits (split-to-split spread, not a
posterior error bar).

Usage:
    python benchmarks/ard.py [--datasets irrelevant breast_cancer_mean pima] [--arms ard iso gpc-ard]
        [--splits 3] [--train 150] [--scaling-d 2 5 10 20] [--scaling-n 200] [--quick]
``--quick``: one split of ``irrelevant`` at 60 points and d = 2, 5 at n = 60.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from _common import (
    RESULTS,
    add_standard_arguments,
    environment,
    fit_and_predict,
    gp_classifier,
    load_average,
    markdown_table,
    write_json,
)
from sklearn.model_selection import StratifiedShuffleSplit

from bayesvm import BayesianSVC
from bayesvm.datasets import load_dataset
from bayesvm.hyperparameters import SearchSpace
from bayesvm.metrics import error_rate, negative_log_likelihood

DATASETS = ("irrelevant", "breast_cancer_mean", "pima")
ARMS = ("ard", "iso", "gpc-ard")
FIGURE = Path(__file__).resolve().parent.parent / "docs" / "figures" / "ard_relevances.png"
#: the synthetic set: relevant features, test points per split
RELEVANT = 2
SYNTHETIC_TEST = 500
#: a chosen length scale within this (log units) of its upper bound is reported as switched off
BOUND_TOLERANCE = 1e-3


def synthetic(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n points, d standard-normal features, class sign(sin(2 x_1) + x_2 + 0.3 noise): only x_1, x_2 matter."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.where(np.sin(2.0 * X[:, 0]) + X[:, 1] + 0.3 * rng.normal(size=n) > 0, 1, -1)
    return X, y


def dataset_splits(name: str, n_splits: int, n_train: int):
    """(X_train, y_train, X_test, y_test, feature names) per split."""
    if name == "irrelevant":
        for split in range(n_splits):
            X, y = synthetic(n_train + SYNTHETIC_TEST, 5, seed=split)
            names = [f"x{j + 1}" + (" (relevant)" if j < RELEVANT else " (noise)") for j in range(5)]
            yield X[:n_train], y[:n_train], X[n_train:], y[n_train:], names
        return
    data = load_dataset("breast_cancer" if name == "breast_cancer_mean" else name)
    X, y = data.X, data.y
    names = list(getattr(data, "feature_names", [f"x{j + 1}" for j in range(X.shape[1])]))
    if name == "breast_cancer_mean":
        X, names = X[:, :10], names[:10]
    splitter = StratifiedShuffleSplit(n_splits=n_splits, train_size=n_train, test_size=X.shape[0] - n_train,
                                      random_state=0)
    for train, test in splitter.split(X, y):
        yield X[train], y[train], X[test], y[test], names


def run_bayesvm(arm: str, X_train, y_train, X_test, y_test) -> dict:
    model = BayesianSVC(ard=arm == "ard")
    load = load_average()
    fit_s, _, p_positive, predicted, caught = fit_and_predict(model, X_train, y_train, X_test)
    length_scale = np.atleast_1d(model.length_scale_)
    upper = SearchSpace.default(X_train, model.kernel_).upper[3:]
    return {
        "fit_s": fit_s, "load_before": load, "load_after": load_average(),
        "nll": negative_log_likelihood(y_test, p_positive), "error": error_rate(y_test, predicted),
        "length_scale": length_scale, "at_upper_bound": np.abs(np.log(length_scale) - upper) < BOUND_TOLERANCE,
        "C": model.C_, "amplitude": model.amplitude_, "offset": model.offset_,
        "log_evidence": model.log_evidence_, "log_evidence_se": model.log_evidence_se_,
        "trusted": model.selection_.report.trusted, "counts": model.selection_.summary_counts(),
        "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught}),
    }


def run_gpc_ard(X_train, y_train, X_test, y_test) -> dict:
    d = X_train.shape[1]
    model = gp_classifier(np.ones(d))
    load = load_average()
    fit_s, _, p_positive, predicted, caught = fit_and_predict(model, X_train, y_train, X_test)
    return {
        "fit_s": fit_s, "load_before": load, "load_after": load_average(),
        "nll": negative_log_likelihood(y_test, p_positive), "error": error_rate(y_test, predicted),
        "length_scale": np.atleast_1d(model.kernel_.k2.length_scale),
        "amplitude": float(model.kernel_.k1.constant_value),
        "log_marginal_likelihood": float(model.log_marginal_likelihood_value_),
        "warnings": sorted({f"{w.category.__name__}: {str(w.message)[:160]}" for w in caught}),
    }


def run_arm(arm: str, *split) -> dict:
    return run_gpc_ard(*split) if arm == "gpc-ard" else run_bayesvm(arm, *split)


def _mean_sd(values) -> tuple[float, float]:
    values = np.asarray(values, dtype=float)
    return float(values.mean()), float(values.std(ddof=1)) if values.size > 1 else 0.0


def summarise(records: list[dict]) -> dict:
    """Means +- sd over splits; length scales as geometric means with the sd of their logs."""
    log_l = np.log(np.array([r["length_scale"] for r in records]))
    out = {key: _mean_sd([r[key] for r in records]) for key in ("nll", "error", "fit_s")}
    out["log_length_scale"] = {"mean": log_l.mean(axis=0), "sd": log_l.std(axis=0, ddof=1) if len(records) > 1
                               else np.zeros(log_l.shape[1])}
    if "at_upper_bound" in records[0]:
        out["at_upper_bound"] = np.sum([r["at_upper_bound"] for r in records], axis=0)
    if "trusted" in records[0]:
        out["trusted"] = int(sum(r["trusted"] for r in records))
    return out


def comparison_table(results: dict, arms: list[str]) -> str:
    header = ["data set", "d", "arm", "NLL", "error", "fit s", "ln P(D)", "chosen l_j (geometric mean over splits)"]
    rows = []
    for name, entry in results["datasets"].items():
        for arm in arms:
            s = entry["summary"][arm]
            evidence = [r.get("log_evidence") for r in entry["splits"][arm]]
            ln_p = "-" if evidence[0] is None else f"{np.mean(evidence):.1f}"
            scales = np.exp(s["log_length_scale"]["mean"])
            bound = s.get("at_upper_bound", np.zeros(scales.size))
            shown = ", ".join(f"{v:.3g}" + ("^" if b == entry["n_splits"] else "") for v, b in zip(scales, bound))
            rows.append([name, str(entry["d"]), arm, f"{s['nll'][0]:.3f} ± {s['nll'][1]:.3f}",
                         f"{s['error'][0]:.3f} ± {s['error'][1]:.3f}", f"{s['fit_s'][0]:.1f}", ln_p, shown])
    return markdown_table(header, rows) + "\n\n^ at the upper bound of the search box on every split (switched off)"


def scaling_table(rows: list[dict]) -> str:
    header = ["d", "n", "fit s", "evaluations", "EP sweeps", "anchors", "s / evaluation", "trusted",
              "held-out error", "noise l / relevant l (min / max)", "load"]
    body = []
    for row in rows:
        fit = row["fit"]
        c = fit["counts"]
        body.append([str(row["d"]), str(row["n"]), f"{fit['fit_s']:.1f}", str(c["evaluations"]), str(c["ep_sweeps"]),
                     str(c["anchors"]), f"{c['seconds_search'] / max(c['evaluations'], 1):.2f}",
                     "yes" if fit["trusted"] else "NO", f"{fit['error']:.3f}", f"{row['separation']:.1f}",
                     f"{fit['load_before']:.1f}"])
    return markdown_table(header, body)


def separation(length_scale: np.ndarray) -> float:
    """min over noise features of l_j / max over relevant ones (> 1: the noise is switched off more)."""
    return float(np.min(length_scale[RELEVANT:]) / np.max(length_scale[:RELEVANT]))


def run_scaling(dims: list[int], n: int) -> list[dict]:
    rows = []
    for d in dims:
        X, y = synthetic(n + SYNTHETIC_TEST, d, seed=100 + d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fit = run_bayesvm("ard", X[:n], y[:n], X[n:], y[n:])
        row = {"d": d, "n": n, "fit": fit,
               "separation": separation(fit["length_scale"]) if d > RELEVANT else float("nan")}
        print(f"  d = {d}: {fit['fit_s']:.1f} s, {fit['counts']['evaluations']} evaluations", flush=True)
        rows.append(row)
    return rows


def figure(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    entries = results["datasets"]
    fig, axes = plt.subplots(1, len(entries), figsize=(4.2 * len(entries), 3.8), squeeze=False)
    for ax, (name, entry) in zip(axes[0], entries.items()):
        arms = [a for a in ("ard", "gpc-ard") if a in entry["summary"]]
        positions = np.arange(entry["d"])
        for k, arm in enumerate(arms):
            stats = entry["summary"][arm]["log_length_scale"]
            mean, sd = np.asarray(stats["mean"]), np.asarray(stats["sd"])
            shift = (k - (len(arms) - 1) / 2) * 0.25
            ax.errorbar(positions + shift, np.exp(mean), yerr=[np.exp(mean) - np.exp(mean - sd),
                                                              np.exp(mean + sd) - np.exp(mean)],
                        fmt="o", capsize=3, label={"ard": "BayesianSVC(ard=True)", "gpc-ard": "GPC, ARD RBF"}[arm])
        ax.set_yscale("log")
        ax.set_xticks(positions)
        ax.set_xticklabels([str(f).split(" (")[0][:14] for f in entry["features"]], rotation=60, ha="right",
                           fontsize=7)
        ax.set_title(f"{name} (n = {entry['n_train']}, {entry['n_splits']} splits)", fontsize=9)
        ax.set_ylabel("chosen length scale l_j (long = irrelevant)", fontsize=8)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=ARMS)
    add_standard_arguments(parser, out=None, seed=None, splits=3,
                           quick="one split of irrelevant at 60 points; d = 2, 5 at n = 60")
    parser.add_argument("--train", type=int, default=150)
    parser.add_argument("--scaling-d", type=int, nargs="*", default=[2, 5, 10, 20])
    parser.add_argument("--scaling-n", type=int, default=200)
    parser.add_argument("--out", "--output", dest="out", type=Path, default=None,
                        help="JSON output (default benchmarks/results/ard.json; --quick: ard_quick.json)")
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.splits, args.train, args.scaling_d, args.scaling_n = ["irrelevant"], 1, 60, [2, 5], 60
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    results = {"settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "environment": environment(), "datasets": {}}
    for name in args.datasets:
        entry = {"splits": {arm: [] for arm in args.arms}, "n_train": args.train, "n_splits": args.splits}
        for split, (X_train, y_train, X_test, y_test, names) in enumerate(
                dataset_splits(name, args.splits, args.train)):
            entry["d"], entry["features"], entry["n_test"] = X_train.shape[1], names, X_test.shape[0]
            for arm in args.arms:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    record = run_arm(arm, X_train, y_train, X_test, y_test)
                record["first"] = split == 0
                entry["splits"][arm].append(record)
                print(f"{name} split {split} {arm}: NLL {record['nll']:.3f}, error {record['error']:.3f}, "
                      f"{record['fit_s']:.1f} s, l = {np.array2string(record['length_scale'], precision=2)}",
                      flush=True)
        entry["summary"] = {arm: summarise(records) for arm, records in entry["splits"].items()}
        results["datasets"][name] = entry
    print("\n" + comparison_table(results, args.arms), flush=True)
    if args.scaling_d:
        print(f"\nARD search cost against d (n = {args.scaling_n}):", flush=True)
        results["scaling"] = run_scaling(args.scaling_d, args.scaling_n)
        print("\n" + scaling_table(results["scaling"]))
    results["seconds"] = time.perf_counter() - started
    results["environment"]["loadavg_end"] = list(os.getloadavg())
    out = write_json(args.out or RESULTS / ("ard_quick.json" if args.quick else "ard.json"), results)
    if not args.quick:
        figure(results, FIGURE)
    print(f"\nwrote {out} ({results['seconds']:.0f} s)")


if __name__ == "__main__":
    main()

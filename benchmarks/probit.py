"""The GP classifier (``BayesianSVC(likelihood="probit")``) beside the Bayesian SVM and scikit-learn's GP classifier.

Data sets (``--datasets``, built-in loaders of :mod:`bayesvm.datasets`), one stratified split each (``--seed``) with
``--train`` training rows (default per set in :data:`TRAIN`, 150-300) and the rest held out, features standardised
by the training rows.

Per set:

* the probit GP's kernel selected by its evidence (``BayesianSVC(likelihood="probit")``), its ln P(D) by EP, and
  the check of that value by tempered SMC started from EP's Gaussian (``probit_log_evidence(..., check=True)``);
* the same check at amplitudes 1, 10 and 100 (the selected length scale and offset ratio);
* scikit-learn's ``GaussianProcessClassifier.log_marginal_likelihood`` (Laplace) at the same kernel, fixed. Its
  likelihood is the logistic sigma(f), not the probit: at the same kernel it is another model, and at (8 / pi)
  times the kernel (sigma(f) ~ Phi(f sqrt(pi / 8))) about the same one; both are printed;
* held-out negative log-likelihood and error of ``BayesianSVC(selection_size=None)`` (the hinge, selected on every
  row as the probit is, so that the two evidences are of one data set), of
  ``BayesianSVC(likelihood="probit")`` and of scikit-learn's GP classifier with its defaults
  (``ConstantKernel() * RBF()``, Laplace, its own marginal-likelihood fit; ``_common.gp_classifier``), with the two
  bayesvm models' evidences (the comparison of the models) and each fit's seconds. scikit-learn's climb starts at
  the median pairwise distance as length scale (its default of 1 stays stuck in many dimensions).

One core (``_common.pin_one_core``). Writes benchmarks/results/probit.json (``probit_quick.json`` with
``--quick``).

Usage:
    python benchmarks/probit.py [--datasets breast_cancer pima ionosphere synth] [--train N] [--seed 0] [--quick]
``--quick``: breast_cancer at 100 rows, no amplitude sweep.
"""

from __future__ import annotations

import argparse
import time
import warnings

from _common import RESULTS, add_standard_arguments, gp_classifier, markdown_table, pin_one_core, write_json

pin_one_core()

import numpy as np  # noqa: E402
from scipy.spatial.distance import pdist  # noqa: E402
from sklearn.model_selection import train_test_split  # noqa: E402

from bayesvm import BayesianSVC, probit_log_evidence  # noqa: E402
from bayesvm.datasets import load_dataset  # noqa: E402
from bayesvm.metrics import error_rate, negative_log_likelihood  # noqa: E402

#: training rows per data set (the rest are held out)
TRAIN = {"breast_cancer": 200, "pima": 300, "ionosphere": 200, "synth": 150, "bupa": 200}
DATASETS = ("breast_cancer", "pima", "ionosphere", "synth")
SWEEP = (1.0, 10.0, 100.0)


def split(name: str, n_train: int, seed: int):
    X, y = load_dataset(name, standardize=False, return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=n_train, stratify=y, random_state=seed)
    mean, sd = X_train.mean(0), X_train.std(0)
    sd[sd == 0] = 1.0
    return (X_train - mean) / sd, (X_test - mean) / sd, y_train, y_test


def sklearn_laplace(kernel, X, y, scale: float = 1.0) -> float:
    """scikit-learn's Laplace ln p(y | X) of the logistic GP classifier at ``scale`` times the kernel, held fixed."""
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF as SklearnRBF
    from sklearn.gaussian_process.kernels import ConstantKernel

    fixed = (ConstantKernel(scale * kernel.amplitude, "fixed") * SklearnRBF(kernel.length_scale, "fixed")
             + ConstantKernel(scale * kernel.offset, "fixed"))
    return float(GaussianProcessClassifier(kernel=fixed, optimizer=None).fit(X, y).log_marginal_likelihood_value_)


def held_out(model, X_train, y_train, X_test, y_test) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        start = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
    p = model.predict_proba(X_test)[:, 1]
    positive = model.classes_[1]
    return {"nll": negative_log_likelihood(y_test == positive, p), "error": error_rate(y_test == positive, p),
            "seconds": seconds, "warnings": sorted({w.category.__name__ for w in caught})}


def run_set(name: str, n_train: int, seed: int, sweep: tuple) -> dict:
    X_train, X_test, y_train, y_test = split(name, n_train, seed)
    out = {"dataset": name, "n_train": int(X_train.shape[0]), "n_test": int(X_test.shape[0]),
           "features": int(X_train.shape[1])}
    probit = BayesianSVC(likelihood="probit")
    out["probit"] = held_out(probit, X_train, y_train, X_test, y_test)
    kernel = probit.kernel_
    out["kernel"] = {"amplitude": kernel.amplitude, "offset": kernel.offset, "length_scale": kernel.length_scale}
    start = time.perf_counter()
    checked = probit_log_evidence(X_train, y_train, kernel=kernel, check=True, random_state=seed)
    out["evidence"] = {"ep": checked.total, "ep_converged": checked.naive_converged,
                       "annealed": checked.annealed_total, "annealed_se": checked.annealed_total_se,
                       "annealed_trusted": bool(np.all(checked.annealed_trusted)),
                       "check_seconds": time.perf_counter() - start,
                       "sklearn_laplace_same_kernel": sklearn_laplace(kernel, X_train, y_train),
                       "sklearn_laplace_matched_kernel": sklearn_laplace(kernel, X_train, y_train, 8.0 / np.pi)}
    out["sweep"] = []
    ratio = kernel.offset / kernel.amplitude
    for amplitude in sweep:
        at = kernel.replace(amplitude=amplitude, offset=ratio * amplitude)
        start = time.perf_counter()
        swept = probit_log_evidence(X_train, y_train, kernel=at, check=True, random_state=seed)
        out["sweep"].append({"amplitude": amplitude, "ep": swept.total, "ep_converged": swept.naive_converged,
                             "annealed": swept.annealed_total, "annealed_se": swept.annealed_total_se,
                             "annealed_trusted": bool(np.all(swept.annealed_trusted)),
                             "seconds": time.perf_counter() - start,
                             "sklearn_laplace_same_kernel": sklearn_laplace(at, X_train, y_train)})
    hinge = BayesianSVC(random_state=seed, selection_size=None)  # every row, as the probit: evidences of one data set
    out["hinge"] = held_out(hinge, X_train, y_train, X_test, y_test)
    out["hinge"].update(log_evidence=hinge.log_evidence_, log_evidence_se=hinge.log_evidence_se_,
                        C=hinge.C_, amplitude=hinge.amplitude_, length_scale=hinge.length_scale_)
    out["probit"].update(log_evidence=probit.log_evidence_)
    # scikit-learn's default length scale (1) on standardised features sits where every pair of points is far apart
    # in many dimensions, and its one L-BFGS-B climb stays there: start at the median distance, as bayesvm does
    start_length = float(np.median(pdist(X_train)))
    out["sklearn_gpc"] = held_out(gp_classifier(start_length), X_train, y_train, X_test, y_test)
    out["sklearn_gpc"]["start_length_scale"] = start_length
    return out


def tables(results: list[dict]) -> str:
    evidence = markdown_table(
        ["data", "n", "amplitude", "offset", "length scale", "ln P(D) EP", "annealed", "EP - annealed",
         "sklearn Laplace (logistic, same K)", "(logistic, 8/pi K)"],
        [[r["dataset"], r["n_train"], f"{r['kernel']['amplitude']:.3g}", f"{r['kernel']['offset']:.3g}",
          f"{r['kernel']['length_scale']:.3g}", f"{r['evidence']['ep']:.2f}",
          f"{r['evidence']['annealed']:.2f} +- {r['evidence']['annealed_se']:.2f}",
          f"{r['evidence']['ep'] - r['evidence']['annealed']:+.3f}",
          f"{r['evidence']['sklearn_laplace_same_kernel']:.2f}",
          f"{r['evidence']['sklearn_laplace_matched_kernel']:.2f}"] for r in results])
    sweep = markdown_table(
        ["data", "amplitude", "ln P(D) EP", "annealed", "EP - annealed", "sklearn Laplace (same K)"],
        [[r["dataset"], f"{s['amplitude']:g}", f"{s['ep']:.2f}", f"{s['annealed']:.2f} +- {s['annealed_se']:.2f}",
          f"{s['ep'] - s['annealed']:+.3f}", f"{s['sklearn_laplace_same_kernel']:.2f}"]
         for r in results for s in r["sweep"]])
    held = markdown_table(
        ["data", "hinge NLL", "probit NLL", "sklearn GPC NLL", "hinge err", "probit err", "GPC err",
         "ln P(D) hinge", "ln P(D) probit", "s hinge / probit / GPC"],
        [[r["dataset"], f"{r['hinge']['nll']:.3f}", f"{r['probit']['nll']:.3f}", f"{r['sklearn_gpc']['nll']:.3f}",
          f"{r['hinge']['error']:.3f}", f"{r['probit']['error']:.3f}", f"{r['sklearn_gpc']['error']:.3f}",
          f"{r['hinge']['log_evidence']:.2f} +- {r['hinge']['log_evidence_se']:.2f}",
          f"{r['probit']['log_evidence']:.2f}",
          f"{r['hinge']['seconds']:.0f} / {r['probit']['seconds']:.0f} / {r['sklearn_gpc']['seconds']:.1f}"]
         for r in results])
    return f"{evidence}\n\n{sweep}\n\n{held}"


def main():
    parser = add_standard_arguments(argparse.ArgumentParser(description=__doc__.splitlines()[0]),
                                    out=RESULTS / "probit.json", quick="breast_cancer at 100 rows, no sweep")
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=sorted(TRAIN))
    parser.add_argument("--train", type=int, default=None, help="training rows of every set (default: TRAIN)")
    args = parser.parse_args()
    datasets, sweep = (["breast_cancer"], ()) if args.quick else (args.datasets, SWEEP)
    if args.quick and args.out == RESULTS / "probit.json":
        args.out = RESULTS / "probit_quick.json"
    results = []
    for name in datasets:
        n_train = 100 if args.quick else (args.train or TRAIN[name])
        started = time.perf_counter()
        results.append(run_set(name, n_train, args.seed, sweep))
        print(f"{name}: {time.perf_counter() - started:.0f} s", flush=True)
    print(tables(results))
    write_json(args.out, {"seed": args.seed, "results": results})
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

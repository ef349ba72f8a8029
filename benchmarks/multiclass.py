"""More than two classes: BayesianSVC's k-class probabilities against the one-vs-rest wrapper, grid search + Platt
and a GP classifier, with the three couplings of the one-vs-rest probabilities.

On three open sets -- iris (150 points, 3 classes), wine (178, 3) and the 8 x 8
digits with all 10 classes, stratified-subsampled so that a training part holds
``--digits-train`` (default 300) points -- over ``--splits`` (default 3)
stratified 70/30 splits per set, :func:`bayesvm.comparison.compare_multiclass`
fits on each training part (inputs standardised by it) and scores the test
part:

* ``bayesvm``: ``BayesianSVC()``: one set of hyperparameters for the k
  one-vs-rest problems, chosen by their summed evidence with one shared ln N(D);
  its default coupling;
* ``bayesvm_per_class``: ``BayesianSVC(multiclass="per_class")``: each problem
  its own evidence search;
* ``one_vs_rest_wrapper``: ``OneVsRestClassifier(BayesianSVC())``, what users
  wrote before (k binary fits; probabilities normalised);
* ``svc_platt``: 5-fold ``GridSearchCV(SVC(kernel="rbf"))`` on the 11 x 11
  (C, gamma) grid of benchmarks/selection.py, then
  ``CalibratedClassifierCV(SVC(**best), method="sigmoid", cv=5)``;
* ``gpc``: ``GaussianProcessClassifier(ConstantKernel * RBF,
  multi_class="one_vs_rest")`` started at the median-heuristic length scale;

and, from the same fits, the bayesvm arms' probabilities under the other two
couplings (``bayesvm[normalize]``, ``bayesvm[odds]``, ...; no refit).

Reported per set and method: test error, NLL (cross-entropy), Brier score
(summed over classes), mean +- sd over the splits; fit seconds, median over
the splits (a coupling variant shares its arm's fit and time); the ratios of
the medians bayesvm / wrapper, bayesvm / svc_platt and bayesvm / gpc; and the
work of the evidence searches from ``selection_.summary_counts()``
(evaluations, EP sweeps, factorisations, tempered-SMC anchors of ln N(D);
per_class and the wrapper summed over their k problems), median over splits;
and, split by split, the NLL of each coupling variant minus its arm's default
coupling (the odds coupling): mean +- sd of these paired differences, and on how many splits
the variant is lower.

Each arm runs in its own ``compare_multiclass`` call (the same seeded splits
and standardisation for all), so JAX's backend compilations during its fits
(count and seconds, from ``jax.monitoring``: ``_common.jax_compilation_counter``)
are its own: the table shows them, summed over the splits, next to the fit
seconds they are part of.

Compilation. JAX compiles the bayesvm programs on the first fit of each
problem size. Before each set's comparison, a warm-up fits ``BayesianSVC()``
(k problems together) and ``BayesianSVC()`` on one one-vs-rest problem (the
binary programs of per_class and the wrapper) on split 0's standardised
training part; their seconds are reported as the cold fits (the first fit
of that size in this process, compilation included), and no arm of the
comparison pays for the compilation of that size. Programs for shapes first
met later (e.g. a new padded size inside the search) still compile during an
arm's fit: the compilation column counts them. ``--no-warm-up`` skips the
warm-up.

Usage::

    python benchmarks/multiclass.py                         # all three sets, 3 splits (tens of minutes)
    python benchmarks/multiclass.py --datasets iris --splits 1
    python benchmarks/multiclass.py --quick                 # smoke run: iris, 1 split, bayesvm only
    python benchmarks/multiclass.py --methods bayesvm --splits 10 --out benchmarks/results/multiclass_couplings.json

Writes benchmarks/results/multiclass.json after every set.
"""

from __future__ import annotations

import argparse
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
from _common import RESULTS, add_standard_arguments, environment, jax_compilation_counter, write_json
from sklearn.datasets import load_digits, load_iris, load_wine
from sklearn.model_selection import StratifiedShuffleSplit, train_test_split
from sklearn.preprocessing import StandardScaler

import bayesvm
from bayesvm import BayesianSVC
from bayesvm.comparison import MULTICLASS_METHODS, compare_multiclass

DATASETS = ("iris", "wine", "digits")
TEST_SIZE = 0.3
DIGITS_TRAIN = 300
WORK = ("evaluations", "ep_sweeps", "factorizations", "anchors")
#: time ratios reported: bayesvm's median fit seconds over each of these arms'
RATIO_TO = ("one_vs_rest_wrapper", "svc_platt", "gpc")


def load(name: str, digits_train: int, random_state: int) -> tuple[np.ndarray, np.ndarray, str]:
    """Inputs, labels and a description; digits stratified-subsampled to digits_train / 0.7 points."""
    if name == "iris":
        X, y = load_iris(return_X_y=True)
        return X, y, "iris (150 points, 4 features, 3 classes)"
    if name == "wine":
        X, y = load_wine(return_X_y=True)
        return X, y, "wine (178 points, 13 features, 3 classes)"
    X, y = load_digits(return_X_y=True)
    n = int(round(digits_train / (1.0 - TEST_SIZE)))
    X, _, y, _ = train_test_split(X, y, train_size=n, stratify=y, random_state=random_state)
    return X, y, f"digits (a stratified {n} of 1797 points, 64 features, 10 classes)"


def warm_up(X, y, random_state: int) -> dict[str, float]:
    """Cold fits on split 0's standardised training part: BayesianSVC() on the k classes, and on class 0 against
    the rest (the binary programs); seconds, compilation included."""
    train, _ = next(StratifiedShuffleSplit(n_splits=1, test_size=TEST_SIZE, random_state=random_state).split(X, y))
    X_train = StandardScaler().fit_transform(X[train])
    seconds = {}
    for name, labels in (("shared", y[train]), ("binary", y[train] == y[train].min())):
        started = time.perf_counter()
        BayesianSVC(random_state=random_state).fit(X_train, labels)
        seconds[name] = time.perf_counter() - started
    return seconds


def coupling_differences(comparison: dict) -> dict:
    """Paired NLL differences, coupling variant minus its arm's default coupling, over the splits, from
    ``MulticlassComparison.to_dict()``: mean, sd and the number of splits where the variant is lower."""
    nll = comparison["scores"]["nll"]
    out = {}
    for variant in (m for m in comparison["methods"] if "[" in m):
        difference = np.array(nll[variant]) - np.array(nll[variant.split("[", 1)[0]])
        out[variant] = {"mean": float(difference.mean()),
                        "sd": float(difference.std(ddof=1 if difference.size > 1 else 0)),
                        "lower_on": int(np.sum(difference < 0)), "splits": int(difference.size)}
    return out


def summarise_arm(result, compiled: dict) -> dict:
    """One arm's comparison: per scored name the mean / sd of the scores, the median fit seconds, the median work,
    and the arm's JAX compilations during its fits (all splits)."""
    mean, std, median = result.mean(), result.std(), result.median()
    methods = {}
    for m in result.methods:
        methods[m] = {**{k: {"mean": mean[k][m], "sd": std[k][m]} for k in ("error", "nll", "brier")},
                      "fit_s": median["fit_s"][m], "fit_s_splits": result.scores["fit_s"][result.methods.index(m)]
                      .tolist(), "compilations": compiled["compilations"], "compile_s": compiled["compile_s"]}
        work = [s.work[m] for s in result.splits if m in s.work]
        if work:
            methods[m]["work"] = {k: float(np.median([w[k] for w in work])) for k in WORK}
    return methods


def time_ratios(methods: dict) -> dict[str, float]:
    """bayesvm's median fit seconds over each arm of RATIO_TO's."""
    return {other: methods["bayesvm"]["fit_s"] / methods[other]["fit_s"]
            for other in RATIO_TO if "bayesvm" in methods and other in methods}


@contextmanager
def compilations(counter: dict):
    """The JAX backend compilations (count, seconds) while the block runs, from the cumulative counter of _common.jax_compilation_counter."""
    before = dict(counter)
    spent = {}
    yield spent
    spent.update({k: counter[k] - before[k] for k in ("compilations", "compile_s")})


def table(name: str, description: str, entry: dict) -> str:
    """The set's table (markdown): scores, fit seconds, compilations, work; then the time ratios and cold fits."""
    rows = ["| method | error | NLL | Brier | fit s (median) | compiled (all splits) | evaluations | EP sweeps | "
            "SMC anchors |", "|---|---|---|---|---|---|---|---|---|"]
    for m, s in entry["summary"]["methods"].items():
        w = s.get("work")
        work = [f"{w[k]:.0f}" for k in ("evaluations", "ep_sweeps", "anchors")] if w else ["-"] * 3
        rows.append(f"| {m} | " + " | ".join(f"{s[k]['mean']:.3f} ± {s[k]['sd']:.3f}" for k in ("error", "nll", "brier"))
                    + f" | {s['fit_s']:.1f} | {s['compilations']} in {s['compile_s']:.1f} s | " + " | ".join(work)
                    + " |")
    ratios = ", ".join(f"bayesvm / {k} {v:.2f}" for k, v in entry["summary"]["time_ratio_bayesvm_to"].items())
    cold = entry.get("cold_s")
    cold_text = (f"; cold first fits (compilation included): BayesianSVC() {cold['shared']:.0f} s, one binary "
                 f"problem {cold['binary']:.0f} s" if cold else "")
    couplings = "; ".join(f"{k} {v['mean']:+.4f} ± {v['sd']:.4f} (lower on {v['lower_on']}/{v['splits']})"
                          for k, v in entry["summary"]["coupling_nll_differences"].items())
    return (f"{name}: {description}; {entry['n_train']} training / {entry['n_test']} test points, "
            f"{entry['n_splits']} split(s), {entry['seconds']:.0f} s in all\n" + "\n".join(rows)
            + f"\ntime ratios (medians): {ratios}{cold_text}"
            + f"\npaired NLL differences against the arm's default coupling: {couplings}")


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", choices=DATASETS, default=list(DATASETS))
    parser.add_argument("--digits-train", type=int, default=DIGITS_TRAIN,
                        help=f"training points of digits per split (default {DIGITS_TRAIN})")
    parser.add_argument("--methods", nargs="+", choices=MULTICLASS_METHODS, default=list(MULTICLASS_METHODS))
    parser.add_argument("--no-warm-up", action="store_true", help="skip the cold warm-up fits")
    add_standard_arguments(parser, out=RESULTS / "multiclass.json", seed=0, splits=3,
                           quick="smoke run: iris, 1 split, the bayesvm arm only")
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.splits, args.methods = ["iris"], 1, ["bayesvm"]
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    results, started_all = {}, time.perf_counter()
    counter = jax_compilation_counter()
    for name in args.datasets:
        X, y, description = load(name, args.digits_train, args.seed)
        started = time.perf_counter()
        cold = None
        if not args.no_warm_up and {"bayesvm", "bayesvm_per_class", "one_vs_rest_wrapper"} & set(args.methods):
            cold = warm_up(X, y, args.seed)
            print(f"{name}: warm-up (cold) fits {cold['shared']:.0f} s shared, {cold['binary']:.0f} s binary",
                  flush=True)
        methods, comparisons, differences = {}, {}, {}
        for arm in args.methods:  # one arm at a time (the same seeded splits), so its compilations are its own
            with compilations(counter) as compiled:
                result = compare_multiclass(X, y, n_splits=args.splits, test_size=TEST_SIZE, methods=(arm,),
                                            random_state=args.seed)
            methods.update(summarise_arm(result, compiled))
            comparisons[arm] = result.to_dict()
            differences.update(coupling_differences(comparisons[arm]))
        entry = {"description": description, "n_train": int(result.splits[0].train_index.size),
                 "n_test": int(result.splits[0].test_index.size), "n_splits": args.splits, "cold_s": cold,
                 "seconds": time.perf_counter() - started,
                 "summary": {"methods": methods, "time_ratio_bayesvm_to": time_ratios(methods),
                             "coupling_nll_differences": differences},
                 "comparison": comparisons}
        results[name] = entry
        write_json(args.out, {"config": config, "environment": environment(bayesvm_path=bayesvm.__file__),
                              "datasets": results, "total_s": time.perf_counter() - started_all})
        print(table(name, description, entry) + "\n", flush=True)
    print(f"total {time.perf_counter() - started_all:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()

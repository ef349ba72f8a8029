"""The ``bayesvm`` command.

* ``bayesvm demo``: the SVM's evidence and class probabilities with error bars
  on the breast cancer data (fixed RBF hyperparameters, a few seconds).
* ``bayesvm select DATA.csv --target COLUMN``: choose C, amplitude, kernel
  shape and offset by maximising the evidence; print the choice, the evidence
  with its standard error and a training-set summary; ``--plot``, ``--json``,
  ``--cv``; ``--weight COLUMN`` reads per-row sample weights from a column;
  ``bayesvm select --demo`` runs on a stratified 150-point subsample of the
  breast cancer data and scores the other 419 points.
* ``bayesvm compare DATA.csv --target COLUMN`` (or ``--demo``): the Bayesian
  SVM's probabilities against Platt scaling and the other calibrators over
  stratified splits: NLL, Brier, ECE and error, a reliability diagram.

Bad input (missing file or column, non-numeric or missing feature values, a
single class, a negative or missing weight) gives one line on stderr and exit
status 2.
"""

from __future__ import annotations

import argparse
import csv
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from ._cli_report import (
    ProgressBar,
    cv_report,
    held_out_report,
    model_comparison_report,
    print_warnings,
    recorded_warnings,
    save_surface_figures,
    select_report,
    write_json,
)
from ._precision import float64
from .normalization.draws import GRID_PRIOR_DRAWS

__all__ = ["main"]

#: hyperparameters of the quick demo (standardised breast cancer features, 30-D)
_DEMO_HYPERPARAMETERS = dict(C=1.0, amplitude=10.0, length_scale=5.0, offset=10.0)
_DEMO_DATASET = "breast_cancer"
#: training points of ``bayesvm select --demo``: a stratified subsample (the rest is held out and scored),
#: which keeps the demo near a minute on a 2-core laptop
_DEMO_TRAIN = 150
_COMPARE_DEMO_DATASET = "breast_cancer"


class InputError(ValueError):
    """Bad user input: reported as one line, exit status 2."""


# ---------------------------------------------------------------------------
# data


def read_csv(path: str, target: str, weight: str | None = None
             ) -> tuple[np.ndarray, np.ndarray, list[str], np.ndarray | None]:
    """Numeric features, the target column and the weight column (None: no weights) of a CSV file with a header
    row: ``(X, y, feature names, weights)``. The target and weight columns are not features."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"file not found: {path}")
    with file.open(newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        raise InputError(f"{path} is empty")
    header, body = [h.strip() for h in rows[0]], [r for r in rows[1:] if any(cell.strip() for cell in r)]
    if target not in header:
        raise InputError(f"column {target!r} not found in {path}; columns: {', '.join(header)}")
    if weight is not None and weight not in header:
        raise InputError(f"weight column {weight!r} not found in {path}; columns: {', '.join(header)}")
    if weight is not None and weight == target:
        raise InputError(f"--weight and --target name the same column {target!r}")
    if not body:
        raise InputError(f"{path} has a header but no data rows")
    for number, row in enumerate(body, start=2):
        if len(row) != len(header):
            raise InputError(f"{path} line {number} has {len(row)} fields; the header has {len(header)}")
    t = header.index(target)
    excluded = {t} if weight is None else {t, header.index(weight)}
    features = [name for i, name in enumerate(header) if i not in excluded]
    if not features:
        besides = " and ".join(repr(header[i]) for i in sorted(excluded))
        raise InputError(f"{path} has no feature columns besides {besides}")
    X = np.empty((len(body), len(features)))
    for j, (i, name) in enumerate((i, name) for i, name in enumerate(header) if i not in excluded):
        for r, row in enumerate(body):
            cell = row[i].strip()
            try:
                X[r, j] = float(cell) if cell else np.nan
            except ValueError:
                raise InputError(
                    f"feature column {name!r} is not numeric (value {cell!r} on line {r + 2}); "
                    "encode categorical features as numbers first"
                ) from None
        missing = int(np.sum(~np.isfinite(X[:, j])))
        if missing:
            raise InputError(f"feature column {name!r} has {missing} missing, NaN or infinite value(s); "
                             "impute or drop them first")
    y = np.array([row[t].strip() for row in body])
    if np.any(y == ""):
        raise InputError(f"target column {target!r} has {int(np.sum(y == ''))} empty value(s)")
    classes = np.unique(y)
    if classes.size < 2:
        raise InputError(f"target column {target!r} has one class ({classes[0]}); at least two are needed")
    return X, y, features, None if weight is None else _weight_column(body, header.index(weight), weight)


def _weight_column(body: list[list[str]], column: int, name: str) -> np.ndarray:
    """The sample weights in column ``column`` of the rows ``body``: finite numbers >= 0."""
    weights = np.empty(len(body))
    for r, row in enumerate(body):
        cell = row[column].strip()
        try:
            weights[r] = float(cell) if cell else np.nan
        except ValueError:
            raise InputError(f"weight column {name!r} is not numeric (value {cell!r} on line {r + 2})") from None
    missing = int(np.sum(~np.isfinite(weights)))
    if missing:
        raise InputError(f"weight column {name!r} has {missing} missing, NaN or infinite value(s); every row needs "
                         "a finite weight >= 0")
    negative = int(np.sum(weights < 0))
    if negative:
        raise InputError(f"weight column {name!r} has {negative} negative value(s) (the first on line "
                         f"{int(np.argmax(weights < 0)) + 2}); weights must be >= 0 (0 leaves the row out)")
    return weights


# ---------------------------------------------------------------------------
# demo


def run_demo(args) -> int:
    from sklearn.model_selection import train_test_split

    from .datasets import load_dataset
    from .evidence.log_evidence import log_evidence
    from .kernels import RBF

    if args.n_test < 1:
        raise InputError(f"--n-test must be a positive number of held-out points to show; got {args.n_test}")
    data = load_dataset(_DEMO_DATASET)
    # the split of ``select --demo``: the evidence at fixed hyperparameters on the same training rows
    X_train, X_test, y_train, y_test = train_test_split(
        data.X, data.y, train_size=_DEMO_TRAIN, stratify=data.y, random_state=args.seed
    )
    X_test, y_test = X_test[:args.n_test], y_test[:args.n_test]
    hp = _DEMO_HYPERPARAMETERS
    kernel = RBF(length_scale=hp["length_scale"], amplitude=hp["amplitude"], offset=hp["offset"])
    started = time.perf_counter()
    with recorded_warnings() as caught:
        evidence = log_evidence(X_train, y_train, C=hp["C"], kernel=kernel)
    print_warnings(caught)
    posterior = evidence.posterior
    bars = posterior.error_bars(X_test)
    p_map = posterior.predict_proba(X_test, method="map")
    p_avg = posterior.predict_proba(X_test, method="averaged")
    elapsed = time.perf_counter() - started
    negative, positive = data.classes
    print(f"{data.description}")
    print(f"training on a stratified {len(y_train)}-point subsample, {len(y_test)} of the other "
          f"{len(data.y) - len(y_train)} points shown; RBF kernel, " + ", ".join(f"{k} = {v:g}" for k, v in hp.items()))
    print("\nevidence")
    print(evidence.summary())
    print(f"\nheld-out points: P = probability of +1 ({positive}); -1 is {negative}")
    print(f"  {'true':>5} {'theta*':>8} {'sigma':>7} {'P_map':>7} {'P_avg':>7}   error bar [P(theta*-sigma), P(theta*+sigma)]")
    for i in range(len(y_test)):
        print(f"  {int(y_test[i]):>+5d} {bars.theta[i]:>8.3f} {bars.sigma[i]:>7.3f} {p_map[i]:>7.3f} {p_avg[i]:>7.3f}"
              f"   [{bars.p_lower[i]:.3f}, {bars.p_upper[i]:.3f}]")
    print(f"\n({elapsed:.1f} s; ln Q(D) by expectation propagation, ln N(D) by tempered SMC; the error bars are "
          "Sollich's, from the Gaussian posterior around the SVM output)")
    return 0


# ---------------------------------------------------------------------------
# select


def _load_data(args, demo_name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """The CSV file named on the command line (standardised unless asked not to; with ``--weight`` by the weighted
    mean and standard deviation, those of the data with every row repeated as many times as its weight) and its row
    weights (None without ``--weight``), or a built-in set: ``(X, y, weights, source)``."""
    from sklearn.preprocessing import StandardScaler

    weight = getattr(args, "weight", None)
    if args.demo:
        if args.data is not None:
            raise InputError("give either DATA.csv or --demo, not both")
        if weight is not None:
            raise InputError("--weight names a column of a CSV file; it does not work with --demo")
        from .datasets import load_dataset

        data = load_dataset(demo_name)
        return data.X, data.y, None, f"built-in data set {demo_name!r} ({data.description})"
    if args.data is None:
        raise InputError(f"give a CSV file (bayesvm {args.command} DATA.csv --target COLUMN) or --demo")
    if args.target is None:
        raise InputError("--target COLUMN is required with a CSV file")
    X, y, _, weights = read_csv(args.data, args.target, weight)
    if weights is not None and not np.any(weights > 0):
        raise InputError(f"weight column {weight!r} is 0 on every row")
    if not args.no_standardize:
        X = StandardScaler().fit(X, sample_weight=weights).transform(X)
    source = f"{args.data} (target {args.target!r}" + ("" if weight is None else f", row weights {weight!r}") + ")"
    return X, y, weights, source


def _selection_options(args) -> dict:
    """Keyword arguments of ``select_hyperparameters`` for ``--method search`` or ``--method grid``."""
    if args.method == "search":
        if args.plot:
            raise InputError("--plot draws the evidence surface of a grid: add --method grid")
        return dict(kernel=args.kernel, random_state=args.seed, inducing=_inducing(args.inducing),
                    evidence_budget=_positive(args.evidence_budget, "--evidence-budget"))
    if args.certify or args.evidence_budget != 1.0:
        raise InputError("--certify and --evidence-budget work with the search (--method search)")
    if args.inducing != "auto":
        raise InputError("--inducing works with the search (--method search)")
    from .selection.select import GridEstimators, GridOptions

    return dict(kernel=args.kernel, method="grid", random_state=args.seed,
                estimators=GridEstimators(approximation=args.approximation, normalization=args.normalization,
                                          n_samples=args.n_samples),
                options=GridOptions(refine=not args.no_refine, max_checks=args.max_checks))


def _ard_kernel(args, n_features: int):
    """--ard: the kernel family with one length scale per feature, for the search to select."""
    from .kernels import make_kernel

    if args.kernel not in ("rbf", "exponential"):
        raise InputError(f"--ard selects one length scale per feature: it needs --kernel rbf or exponential; got "
                         f"{args.kernel}")
    if args.method != "search":
        raise InputError("--ard works with the search (--method search)")
    return make_kernel(args.kernel).replace(length_scale=np.ones(n_features))


def _selection_rows(args, X, y, weights, source: str):
    """--selection-size: the stratified subsample of the rows the search selects on (every row up to 250 with
    'auto'), with the data's description saying so: ``(X, y, weights, source)`` of the rows kept.

    The subsample is drawn from the distinct rows, as the library counts them (rows with equal input and label
    merged, their weights summed; rows of weight 0 left out), and keeps every row of the file behind each distinct
    row it draws."""
    from ._validation import collapsed_training_data
    from .exceptions import SubsampleWarning
    from .selection.subsample import selection_subset

    value = args.selection_size
    if value not in ("auto", "none"):
        try:
            value = int(value)
        except ValueError:
            raise InputError(f"--selection-size must be 'auto', 'none' or a number of rows >= 2; got {value!r}") from None
    try:
        data, row_of = collapsed_training_data(X, y, weights)
        with warnings.catch_warnings():  # the data's description says it
            warnings.simplefilter("ignore", SubsampleWarning)
            _, rows = selection_subset(data, None if value == "none" else value, random_state=args.seed)
    except ValueError as error:
        raise InputError(str(error).splitlines()[0]) from None
    if rows is None:
        return X, y, weights, source
    keep = np.isin(row_of, rows)
    distinct = data.X.shape[0]
    of = f"{distinct} rows" if distinct == len(y) else f"{distinct} distinct rows ({len(y)} in the file)"
    return (X[keep], y[keep], None if weights is None else weights[keep],
            source + f"; selected on a stratified random subsample of {rows.size} of its {of}")


def _positive(value: float, flag: str) -> float:
    if not (np.isfinite(value) and value > 0):
        raise InputError(f"{flag} must be a positive number; got {value!r}")
    return float(value)


def _certified(surface, X, y, weights, budget: float, seed: int, inducing):
    """--certify: ln P(D) at the selected point again, with ``budget`` times the fit's ln N(D) work and random numbers
    of its own, on the prior the search used."""
    from .evidence.log_evidence import log_evidence_one_vs_rest
    from .selection.search_priors import prior_for

    with recorded_warnings() as caught:
        evidence = log_evidence_one_vs_rest(X, y, C=surface.best["C"], kernel=surface.best_kernel,
                                            random_state=seed + 1, evidence_budget=budget,
                                            sample_weight=weights,
                                            **prior_for(X, inducing, random_state=seed).evidence_options)
    print_warnings(caught)
    return evidence


def _inducing(value: str):
    """--inducing: 'auto', 'none' or a positive number of inducing inputs."""
    if value in ("auto", "none"):
        return None if value == "none" else "auto"
    try:
        m = int(value)
    except ValueError:
        m = 0
    if m < 1:
        raise InputError(f"--inducing must be 'auto', 'none' or a positive integer; got {value!r}")
    return m


def run_select(args) -> int:
    from .selection.select import select_hyperparameters

    X, y, weights, source = _load_data(args, _DEMO_DATASET)
    held_out = None
    if args.demo:
        from sklearn.model_selection import train_test_split

        X, X_test, y, y_test = train_test_split(X, y, train_size=_DEMO_TRAIN, stratify=y, random_state=args.seed)
        held_out = (X_test, y_test)
        source += f"; a stratified {_DEMO_TRAIN}-point training subsample, the other {len(y_test)} points held out"
    options = _selection_options(args)
    if args.method == "search":
        X, y, weights, source = _selection_rows(args, X, y, weights, source)
    elif args.selection_size != "auto":
        raise InputError("--selection-size works with the search (--method search)")
    if args.ard:
        options["kernel"] = _ard_kernel(args, X.shape[1])
    if np.unique(y).size > 2 and (args.cv or args.method != "search"):
        raise InputError(f"{np.unique(y).size} classes: --method grid and --cv take two classes; the search takes k "
                         "(one-vs-rest problems with shared hyperparameters)")
    started = time.perf_counter()
    with recorded_warnings() as caught:
        surface = select_hyperparameters(X, y, progress=ProgressBar("evidence", quiet=args.quiet),
                                         sample_weight=weights, **options)
    elapsed = time.perf_counter() - started
    cv_surface = None
    if args.cv:
        started_cv = time.perf_counter()
        with recorded_warnings() as caught_cv:
            cv_surface = select_hyperparameters(
                X, y, kernel=args.kernel, grid=_cv_grid(surface) if args.method == "grid" else None, method="cv",
                cv=args.folds, sample_weight=weights,
                random_state=args.seed, progress=ProgressBar(f"{args.folds}-fold CV", quiet=args.quiet),
            )
        caught += caught_cv
        cv_elapsed = time.perf_counter() - started_cv
    gpc = None
    if args.gpc:
        if args.method != "search":
            raise InputError("--gpc compares with the search's answer (--method search)")
        started_gpc = time.perf_counter()
        with recorded_warnings() as caught_gpc:
            gpc = select_hyperparameters(X, y, kernel=options["kernel"], likelihood="probit", sample_weight=weights,
                                         random_state=args.seed)
        caught += caught_gpc
        gpc_elapsed = time.perf_counter() - started_gpc
    print_warnings(caught)
    print(select_report(surface, X, y, source, elapsed, weights=weights))
    if gpc is not None:
        print(model_comparison_report(surface, gpc, gpc_elapsed))
    certified = None
    if args.certify:
        budget = 4.0 * options["evidence_budget"]
        started_certify = time.perf_counter()
        certified = _certified(surface, X, y, weights, budget, args.seed, options["inducing"])
        print(f"\ncertified ln P(D): {certified.total:.3f} +- {certified.total_se:.3f} (ln N(D) "
              f"{certified.problems[0].log_normalization:.3f} at {budget:g}x the fit's work, "
              f"{time.perf_counter() - started_certify:.1f} s)")
    if held_out is not None:
        print(held_out_report(surface, *held_out, classes=np.unique(y)))
    if cv_surface is not None:
        print(cv_report(surface, cv_surface, cv_elapsed, args.folds))
    if args.plot:
        save_surface_figures(surface, args.plot)
        print(f"\nfigures written to {args.plot}")
    if args.json:
        payload = {"source": source, "n": int(X.shape[0]), "n_features": int(X.shape[1]),
                   "seconds": elapsed, "evidence": surface.to_dict()}
        if weights is not None:
            payload["weight_column"], payload["total_weight"] = args.weight, float(np.sum(weights))
        if certified is not None:
            payload["certified"] = {"log_evidence": certified.total, "log_evidence_se": certified.total_se}
        if gpc is not None:
            payload["gpc"] = {"log_evidence": gpc.log_evidence, "ep_converged": bool(gpc.trusted),
                              "hyperparameters": gpc.hyperparameters, "seconds": gpc_elapsed}
        if cv_surface is not None:
            payload["cv"] = cv_surface.to_dict()
            payload["cv_seconds"] = cv_elapsed
        write_json(args.json, payload)
    return 0


def _cv_grid(surface) -> dict:
    """The evidence grid's (shape, offset ratio, C k0) axes, for CV on the same grid."""
    grid = {"C_k0": surface.grid.C_k0, "offset_ratio": surface.grid.offset_ratio}
    if surface.shape_name is not None:
        grid[surface.shape_name] = surface.grid.shape
    return grid



# ---------------------------------------------------------------------------
# compare


#: default splits of ``bayesvm compare``: two classes, three or more (each split fits k one-vs-rest problems per arm)
_COMPARE_SPLITS, _COMPARE_MULTICLASS_SPLITS = 5, 3


def run_compare(args) -> int:
    from .comparison import compare_calibration
    from .kernels import RBF

    X, y, _, source = _load_data(args, _COMPARE_DEMO_DATASET)
    if np.unique(y).size > 2:
        return _run_compare_multiclass(args, X, y, source)
    args.splits = _COMPARE_SPLITS if args.splits is None else args.splits
    kernel = None if args.length_scale is None else RBF(length_scale=args.length_scale, amplitude=args.amplitude, offset=args.offset)
    started = time.perf_counter()
    with recorded_warnings() as caught:
        result = compare_calibration(X, y, kernel=kernel, C=args.C, n_splits=args.splits, random_state=args.seed,
                                     methods=args.methods)
    print_warnings(caught)
    print(f"{source}: {X.shape[0]} points, {X.shape[1]} features; {args.splits} stratified 70/30 splits "
          f"({time.perf_counter() - started:.1f} s)")
    print("hyperparameters: " + ("RBF with the median-distance length scale, amplitude 1, offset 1"
                                  if kernel is None else f"RBF length scale {args.length_scale:g}, amplitude "
                                  f"{args.amplitude:g}, offset {args.offset:g}") + f", C = {args.C if args.C else 1:g}")
    print(result.table())
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        figure = result.plot()
        figure.savefig(args.plot, dpi=110)
        print(f"\nreliability diagram written to {args.plot}")
    if args.json:
        write_json(args.json, {"source": source, **result.to_dict()})
    return 0


def _run_compare_multiclass(args, X, y, source) -> int:
    """``bayesvm compare`` with three or more classes: :func:`~bayesvm.comparison.compare_multiclass`."""
    from .comparison import compare_multiclass

    binary_only = [flag for flag, given in (("--C", args.C is not None), ("--length-scale", args.length_scale is not None),
                                            ("--plot", args.plot is not None)) if given]
    if binary_only:
        raise InputError(f"{np.unique(y).size} classes: {', '.join(binary_only)} work with two classes only "
                         "(with more, every method chooses its own hyperparameters)")
    splits = _COMPARE_MULTICLASS_SPLITS if args.splits is None else args.splits
    started = time.perf_counter()
    with recorded_warnings() as caught:
        result = compare_multiclass(X, y, n_splits=splits, methods=args.methods, random_state=args.seed)
    print_warnings(caught)
    print(f"{source}: {X.shape[0]} points, {X.shape[1]} features, {result.classes.size} classes; {splits} stratified "
          f"70/30 splits ({time.perf_counter() - started:.1f} s)")
    print("hyperparameters chosen on each training part by every method; NAME[coupling]: the same fit as NAME, its "
          "one-vs-rest probabilities coupled by that rule instead of the default (bayesvm.coupling)")
    print(result.table())
    if args.json:
        write_json(args.json, {"source": source, **result.to_dict()})
    return 0


# ---------------------------------------------------------------------------
# entry point


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bayesvm", description="The SVM read as a Bayesian model.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="evidence and probabilities with error bars on breast cancer")
    demo.add_argument("--n-test", type=int, default=8,
                      help=f"held-out points to show (default 8), of those outside the {_DEMO_TRAIN} training rows")
    demo.add_argument("--seed", type=int, default=0)
    select = commands.add_parser("select", help="choose hyperparameters by maximising the evidence")
    select.add_argument("data", nargs="?", help="CSV file with a header row")
    select.add_argument("--target", help="name of the label column (two or more classes)")
    select.add_argument("--demo", action="store_true", help=f"use the built-in {_DEMO_DATASET} data set")
    select.add_argument("--weight", metavar="COLUMN",
                        help="name of a column of per-row sample weights (numbers >= 0; not a feature): a row of "
                             "weight w counts as w copies of itself, 0 leaves it out")
    select.add_argument("--kernel", default="rbf", choices=["rbf", "exponential", "polynomial", "linear"])
    select.add_argument("--method", default="search", choices=["search", "grid"],
                        help="quasi-Newton ascent of the evidence with exact gradients (default), or the evidence "
                             "on a grid (slower; for --plot)")
    select.add_argument("--plot", metavar="FILE.png", help="with --method grid: write the evidence curve and heat map")
    select.add_argument("--json", metavar="FILE", help="write the full result as JSON")
    select.add_argument("--cv", action="store_true",
                        help="add k-fold cross-validation (on the same grid with --method grid, else the default grid)")
    select.add_argument("--folds", type=int, default=5, help="folds for --cv (default 5)")
    select.add_argument("--approximation", default="ep", choices=["ep", "laplace", "sampled"],
                        help="--method grid: ln Q(D) by expectation propagation (default), Sollich's "
                             "Laplace-style form, or annealed sampling (slow)")
    select.add_argument("--normalization", default="annealed", choices=["annealed", "ep", "prior"],
                        help="--method grid: ln N(D) by tempered SMC at every grid point (default), expectation "
                             "propagation (fails by tens of nats where the latents are correlated), or plain prior "
                             "sampling")
    select.add_argument("--max-checks", type=int, default=8,
                        help="--method grid: annealed checks of ln N(D) at the evidence maximum (default 8; 0: none)")
    select.add_argument("--n-samples", type=int, default=GRID_PRIOR_DRAWS,
                        help=f"--method grid: prior draws for --normalization prior (default {GRID_PRIOR_DRAWS})")
    select.add_argument("--no-refine", action="store_true", help="--method grid: skip the local refinement")
    select.add_argument("--inducing", default="auto", metavar="M",
                        help="the evidence on a low-rank prior through M k-means inducing inputs, O(n M^2): 'auto' "
                             "(default: the full prior up to 2000 points, 200 inducing inputs above), 'none' (always "
                             "the full prior) or a number")
    select.add_argument("--selection-size", default="auto", metavar="N",
                        help="--method search: select on a stratified random subsample of N rows: 'auto' (default: "
                             "every row up to 250, a subsample of 250 above), 'none' (every row) or a number; rows "
                             "with equal features and label count as one")
    select.add_argument("--evidence-budget", type=float, default=1.0, metavar="B",
                        help="scale ln N(D)'s fixed work in the search and its check (default 1)")
    select.add_argument("--certify", action="store_true",
                        help="estimate ln P(D) at the answer again with 4x the work, and report it")
    select.add_argument("--ard", action="store_true",
                        help="one length scale per feature, selected by the evidence (rbf and exponential kernels; "
                             "long length scales mark features the evidence finds irrelevant)")
    select.add_argument("--gpc", action="store_true",
                        help="also select the GP classifier (the probit likelihood on the same prior) on the same "
                             "rows, and print both evidences and which model they prefer")
    select.add_argument("--no-standardize", action="store_true", help="use the CSV features as they are")
    select.add_argument("--seed", type=int, default=0)
    select.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    compare = commands.add_parser("compare", help="Bayesian SVM probabilities against Platt and other calibrators")
    compare.add_argument("data", nargs="?", help="CSV file with a header row")
    compare.add_argument("--target", help="name of the label column (two or more classes)")
    compare.add_argument("--demo", action="store_true", help=f"use the built-in {_COMPARE_DEMO_DATASET} data set")
    compare.add_argument("--C", type=float, default=None, help="C of the SVM (default 1)")
    compare.add_argument("--length-scale", type=float, default=None,
                         help="RBF length scale (default: median pairwise distance of each training part)")
    compare.add_argument("--amplitude", type=float, default=1.0, help="RBF amplitude k0 (with --length-scale)")
    compare.add_argument("--offset", type=float, default=1.0, help="kernel offset k_b (with --length-scale)")
    compare.add_argument("--splits", type=int, default=None,
                         help="stratified 70/30 splits (default 5; 3 with three or more classes)")
    compare.add_argument("--methods", nargs="+", default=None,
                         help="methods to compare (default all): names of bayesvm.comparison.METHODS with two "
                              "classes, of MULTICLASS_METHODS with more")
    compare.add_argument("--plot", metavar="FILE.png", help="write the reliability diagram")
    compare.add_argument("--json", metavar="FILE", help="write the per-split metrics as JSON")
    compare.add_argument("--no-standardize", action="store_true", help="use the CSV features as they are")
    compare.add_argument("--seed", type=int, default=0)
    return parser


@float64
def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit status (0 success, 2 bad input)."""
    args = build_parser().parse_args(argv)
    try:
        return {"demo": run_demo, "select": run_select, "compare": run_compare}[args.command](args)
    except InputError as err:
        print(f"bayesvm: error: {err}", file=sys.stderr)
        return 2
    except ValueError as err:  # validation errors of the library (one line, no traceback)
        print(f"bayesvm: error: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2

"""Selection benchmark: evidence search against the evidence grid, 5-fold grid search + Platt, and a GP classifier.

On breast cancer, digits 3 vs 8, digits even vs odd, Pima, ionosphere and
Ripley's synth, over 5 stratified splits per data set whose training part
holds min(``--max-train`` = 400, 70% of the set) points and whose test part
is the rest (the same splits for every arm), each arm chooses its
hyperparameters on the training part only and is scored on the test part.
Arms (``--arms``):

* ``search``: ``BayesianSVC()`` with its defaults -- ``select_hyperparameters``
  with ``method="search"`` (L-BFGS-B ascent of ln P(D) with exact gradients,
  then the tests of ``bayesvm.selection.trust`` at the answer) -- probabilities from
  ``predict_proba`` (EP posterior, averaged);
* ``grid``: the former default, ``select_hyperparameters(X, y,
  method="grid")`` with its defaults (default grid, extensions at its edges,
  local refinement, annealed checks), probabilities from
  ``Posterior.from_fit(surface.evidence.fit, "ep").predict_proba`` and labels
  from the sign of that posterior's mean (what the former ``BayesianSVC``
  predicted). It takes minutes per fit at 400 points, so by default it runs
  on split 0 only (``--grid-splits K``: the first K splits); the tables say
  on how many splits each arm ran;
* ``cv+platt``: ``GridSearchCV(SVC(kernel="rbf"), cv=5)`` over an 11 x 11
  grid, C = 10^[-2, -1.5, .., 3] and gamma = 10^[-4, -3.5, .., 1] (the
  features are standardised by ``load_dataset``, so sklearn's
  ``gamma="scale"`` = 1/d lies inside for every set here), accuracy, refit
  on the whole training part; then ``CalibratedClassifierCV(SVC(**best),
  method="sigmoid", cv=5)`` on the training part for the probabilities; its
  test error is the calibrated classifier's (the refit SVC's is in the JSON
  as ``error_svc``);
* ``gpc``: ``GaussianProcessClassifier(ConstantKernel() * RBF())`` with
  scikit-learn's defaults (Laplace approximation, L-BFGS-B on its marginal
  likelihood, ``n_restarts_optimizer=0``).

Metrics (mean +- sd over splits, ddof=1): test error, negative
log-likelihood, Brier score, expected calibration error (15 equal-width
bins), all from ``bayesvm.metrics``. Time: wall-clock seconds of the
selection and fit (``BayesianSVC.fit``; grid: ``select_hyperparameters`` +
the EP posterior, which ``BayesianSVC.fit`` also builds;
``GridSearchCV.fit`` + ``CalibratedClassifierCV.fit``;
``GaussianProcessClassifier.fit``). For the search arm the work of each fit
is recorded from ``selection_.summary_counts()`` (L-BFGS-B evaluations, EP
sweeps, Cholesky factorisations, tempered-SMC anchors of the ln N(D) path,
starts, seconds of the search and of the check at the answer) with the
``TrustReport`` (runs_agree, normalization_agrees, naive_converged,
trusted).

Cold and warm. JAX compiles on the first call for every new problem size, so
the bayesvm arms are timed two ways. Cold (``--cold subprocess``, default;
``--cold-arms``, default ``search``): split 0 is fitted once more in a fresh
Python process (``selection.py --cold-probe ...``) and its fit time is
reported, compilation included -- what a user of a one-off script sees. The
probe runs without ``JAX_COMPILATION_CACHE_DIR`` / ``JAX_PERSISTENT_CACHE_*``
from the environment and with ``BAYESVM_NO_CACHE=1`` (the package's own
compilation cache off: every program is compiled), and records JAX's
``jax_compilation_cache_dir`` (None: nothing is read from JAX's persistent
cache). A user's later processes load the package's programs from its
cache and start warmer than this cold time. The probe's import time of bayesvm/JAX is recorded
separately. Warm: the median over splits 1.. of the in-process fits (same
training-set size as split 0, so nothing is recompiled); with a single split
the search arm is refitted once more on split 0 for the warm time. Split 0
in the main process is kept as ``first_in_process_s``. The grid arm's warm
time needs ``--grid-splits`` >= 2; with one grid split its in-process time
(own compilation included) stands in and is marked ``*``. scikit-learn
compiles nothing: its cold and warm time are both the median over splits.

Evidence. ``search`` reports ln P(D) at its answer by the reference
estimators (EP at full tolerance, a fresh full-budget tempered-SMC ln N(D),
seed 0: ``bayesvm.log_evidence``'s defaults). The grid's own ``best_value``
carries its screening-budget ln N(D), so on the grid's splits its best point
is also re-evaluated by ``bayesvm.log_evidence`` with the same defaults and
seed (``grid_best_reference``; not counted in its time), with whether that
point lies inside the search's default box (``SearchSpace.default``) and
whether its tempered-SMC runs agree. The target compares the search's value
with the re-evaluated one; "≈" marks a shortfall within two combined
standard errors.

Flags per split: ``edge`` (grid: ``EvidenceSurface.at_edge`` non-empty after
its extensions; cv+platt: best C or gamma at the end of its axis),
``bound`` (search: the answer on a bound of a free search coordinate),
``untrusted`` (search: ``report.trusted`` false), ``constant`` (all test
predictions one class), ``flat`` (test probabilities within 0.01 of each
other), ``sv>90%`` / ``marginal>90%`` (more than 90% of the training points
are support vectors / marginal). Warnings raised in each fit and prediction
are recorded (category and message) and counted; nothing is silenced.

Targets (the issue's), per data set, checked in the summary:

* warm search >= 5x faster than cv+platt (GridSearchCV + Platt; the ratio
  to GridSearchCV alone is shown too), and the same cold;
* search test error <= cv+platt's mean + its sd over splits;
* search test NLL not worse than the grid arm's by more than the split sd:
  mean over the grid's splits of (search NLL - grid NLL), paired, <= the sd
  of the search's NLL over all its splits (0 with one split);
* ln P(D) at the search's answer >= the grid's best (re-evaluated), on the
  grid's splits.

Usage:
    python benchmarks/selection.py [--datasets pima synth] [--splits 5] [--max-train 400]
        [--arms search grid cv+platt gpc] [--grid-splits 1] [--cold {subprocess,none}]
        [--cold-arms search grid] [--n-jobs 1] [--quick]
``--quick``: synth and ionosphere, 60 training points, 1 split, the grid arm
on a thinned 3 x 3 x 3 grid -- a smoke run that checks the machinery, not a
result; it writes benchmarks/results/selection_quick.json. A full run writes
benchmarks/results/selection.json, after every data set (a long run that
stops keeps what it has done). On the shared 2-core machine a full default
run takes hours (the grid arm and the cold probes dominate); JAX may use both
cores, GridSearchCV uses ``--n-jobs`` processes (default 1).
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()

import argparse  # noqa: E402
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _common import (  # noqa: E402
    RESULTS,
    SVC_C,
    SVC_GAMMA,
    add_standard_arguments,
    environment,
    fit_and_predict,
    fresh_environment,
    gp_classifier,
    grid_search_platt,
    load_average,
    markdown_table,
    plain,
    positive_column,
    provenance,
    timed,
    warning_records,
)
from sklearn.model_selection import StratifiedShuffleSplit  # noqa: E402

from bayesvm import BayesianSVC, Posterior, log_evidence, select_hyperparameters  # noqa: E402
from bayesvm.normalization.annealing import DEFAULT_RUNS as ANNEALING_RUNS  # noqa: E402
from bayesvm.datasets import load_dataset  # noqa: E402
from bayesvm.hyperparameters import COORDINATES, SearchSpace, coordinates_of  # noqa: E402
from bayesvm.kernels import make_kernel  # noqa: E402
from bayesvm.metrics import brier_score, error_rate, expected_calibration_error, negative_log_likelihood  # noqa: E402
from bayesvm.selection.grid import default_grid  # noqa: E402

_IMPORT_SECONDS = time.perf_counter() - _T_START

DATASETS = ("breast_cancer", "digits_3v8", "digits_even_odd", "pima", "ionosphere", "synth")
QUICK_DATASETS = ("synth", "ionosphere")
ARMS = ("search", "grid", "cv+platt", "gpc")
BAYES_ARMS = ("search", "grid")
METRICS = ("error", "nll", "brier", "ece")
METRIC_LABELS = {"error": "error", "nll": "NLL", "brier": "Brier", "ece": "ECE"}
COUNTS = ("evaluations", "ep_sweeps", "factorizations", "anchors", "starts", "seconds_search", "seconds_check")
TRAIN_FRACTION = 0.7
MAX_TRAIN = 400
QUICK_TRAIN = 60
ECE_BINS = 15
SPEED_TARGET = 5.0
SHARE_LIMIT = 0.9  # sv>90% / marginal>90%
FLAT_PROBABILITY = 0.01
BOUND_TOLERANCE = 1e-3  # in log units: the search's answer counts as on a bound within this


# ---------------------------------------------------------------------------
# data


def splits(X, y, n_splits: int, max_train: int, random_state: int):
    """Stratified (train, test) index pairs: min(max_train, 70%) training points, the rest for testing."""
    n = X.shape[0]
    n_train = min(int(max_train), int(round(TRAIN_FRACTION * n)))
    splitter = StratifiedShuffleSplit(n_splits=n_splits, train_size=n_train, test_size=n - n_train,
                                      random_state=random_state)
    return [(np.sort(train), np.sort(test)) for train, test in splitter.split(X, y)]


def quick_grid(X_train) -> dict[str, np.ndarray]:
    """--quick: the default grid thinned to 3 values per axis (ends kept)."""
    grid = default_grid(X_train, "rbf")
    axes = {"length_scale": grid.shape, "C_k0": grid.C_k0, "C": grid.C}
    return {name: values[np.round(np.linspace(0, values.size - 1, 3)).astype(int)] for name, values in axes.items()}


# ---------------------------------------------------------------------------
# helpers


def _scores(y_test, p_positive, predicted) -> dict:
    return {
        "error": error_rate(y_test, predicted),
        "error_proba": float(np.mean((p_positive >= 0.5) != (np.asarray(y_test) > 0))),
        "nll": negative_log_likelihood(y_test, p_positive),
        "brier": brier_score(y_test, p_positive),
        "ece": expected_calibration_error(y_test, p_positive, n_bins=ECE_BINS),
    }


def _flags(*, predicted, p_positive, n_train: int, n_support: int | None = None, n_marginal: int | None = None,
           extra=()) -> list[str]:
    flags = list(extra)
    if np.unique(predicted).size < 2:
        flags.append("constant")
    if np.ptp(p_positive) < FLAT_PROBABILITY:
        flags.append("flat")
    if n_support is not None and n_support > SHARE_LIMIT * n_train:
        flags.append("sv>90%")
    if n_marginal is not None and n_marginal > SHARE_LIMIT * n_train:
        flags.append("marginal>90%")
    return flags


def _search_bounds(X_train, C: float, kernel) -> list[str]:
    """The free search coordinates on which (C, kernel) sits at a bound of the default search box."""
    space = SearchSpace.default(X_train, make_kernel("rbf"))
    x = coordinates_of(C, kernel)
    out = []
    for i, name in enumerate(COORDINATES):
        if not space.free[i]:
            continue
        if abs(x[i] - space.lower[i]) < BOUND_TOLERANCE:
            out.append(f"{name} low")
        elif abs(x[i] - space.upper[i]) < BOUND_TOLERANCE:
            out.append(f"{name} high")
    return out


def _inside_search_box(X_train, C: float, kernel) -> bool:
    space = SearchSpace.default(X_train, make_kernel("rbf"))
    x = coordinates_of(C, kernel)
    free = space.free
    return bool(np.all((x[free] >= space.lower[free] - BOUND_TOLERANCE) & (x[free] <= space.upper[free] + BOUND_TOLERANCE)))


# ---------------------------------------------------------------------------
# arms


def run_search(X_train, y_train, X_test, y_test, **_) -> dict:
    """BayesianSVC() with its defaults (quasi-Newton evidence search)."""
    load = load_average()
    model = BayesianSVC()
    fit_s, predict_s, p_positive, predicted, caught = fit_and_predict(model, X_train, y_train, X_test)
    selection = model.selection_
    n_train = X_train.shape[0]
    report = selection.report
    bounds = _search_bounds(X_train, model.C_, model.kernel_)
    # the low-rank posterior (above 2,000 rows) fits no MAP SVM: no support vectors to count
    n_support, n_marginal = (None, None) if model.support_ is None else (len(model.support_), len(model.marginal_))
    extra = (["bound"] if bounds else []) + ([] if report.trusted else ["untrusted"])
    return {
        "fit_s": fit_s,
        "predict_s": predict_s,
        "load_before": load,
        "load_after": load_average(),
        **_scores(y_test, p_positive, predicted),
        "hyperparameters": {k: float(v) for k, v in selection.best.items()},
        "log_evidence": float(selection.best_value),
        "log_evidence_se": float(selection.best_se),
        "counts": selection.summary_counts(),
        "steps": len(selection.search.steps),
        "messages": list(selection.search.messages),
        "report": {**{k: (bool(v) if isinstance(v, (bool, np.bool_)) else float(v))
                      for k, v in report._asdict().items()}, "trusted": bool(report.trusted)},
        "at_bound": bounds,
        "n_train": n_train,
        "n_support": n_support,
        "n_marginal": n_marginal,
        "flags": _flags(predicted=predicted, p_positive=p_positive, n_train=n_train,
                        n_support=n_support, n_marginal=n_marginal, extra=extra),
        "warnings": warning_records(caught),
    }


def run_grid(X_train, y_train, X_test, y_test, *, quick: bool = False, **_) -> dict:
    """select_hyperparameters(method="grid") with its defaults; predictions by the EP posterior at its best."""
    load = load_average()
    grid = quick_grid(X_train) if quick else None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        surface, select_s = timed(select_hyperparameters, X_train, y_train, method="grid", grid=grid)
        fit = surface.evidence.fit
        posterior, posterior_s = timed(Posterior.from_fit, fit, "ep")
        start = time.perf_counter()
        positive = list(fit.classes).index(1)  # Posterior's +1 is fit.classes[1]
        p_plus = posterior.predict_proba(X_test)
        p_positive = p_plus if positive == 1 else 1.0 - p_plus
        mean = posterior.latent(X_test)[0]
        predicted = fit.classes[(mean >= 0).astype(int)]
        predict_s = time.perf_counter() - start
    n_train = X_train.shape[0]
    n_support, n_marginal = int(len(fit.support)), int(np.sum(fit.marginal))
    return {
        "fit_s": select_s + posterior_s,
        "select_s": select_s,
        "posterior_s": posterior_s,
        "predict_s": predict_s,
        "load_before": load,
        "load_after": load_average(),
        **_scores(y_test, p_positive, predicted),
        "hyperparameters": {k: float(v) for k, v in surface.best.items()},
        "log_evidence": float(surface.best_value),
        "log_evidence_se": float(surface.best_se),
        "grid_size": list(surface.grid.shape_of_surface),
        "extensions": [list(e) for e in surface.extensions],
        "at_edge": list(surface.at_edge),
        "refinement_steps": len(surface.refinement),
        "checks": len(surface.checks),
        "checks_failed": sum(not c.agreed for c in surface.checks),
        "n_train": n_train,
        "n_support": n_support,
        "n_marginal": n_marginal,
        "flags": _flags(predicted=predicted, p_positive=p_positive, n_train=n_train, n_support=n_support,
                        n_marginal=n_marginal, extra=["edge"] if surface.at_edge else []),
        "warnings": warning_records(caught),
        "_kernel": surface.best_kernel,  # for the reference evidence; dropped before JSON
    }


def grid_best_reference(X_train, y_train, record: dict) -> dict:
    """ln P(D) at the grid's best by bayesvm.log_evidence's defaults (the estimators the search reports)."""
    kernel = record.pop("_kernel")
    C = record["hyperparameters"]["C"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        evidence, seconds = timed(log_evidence, X_train, y_train, C=C, kernel=kernel)
    return {
        "log_evidence": float(evidence.total),
        "log_evidence_se": float(evidence.total_se),
        "log_normalization": float(evidence.log_normalization),
        "normalization_ess": float(evidence.normalization_ess),
        "runs_agree": bool(evidence.normalization_ess >= 0.5 * ANNEALING_RUNS),
        "naive_converged": bool(evidence.naive_converged),
        "inside_search_box": _inside_search_box(X_train, C, kernel),
        "seconds": seconds,
        "warnings": warning_records(caught),
    }


def run_cv_platt(X_train, y_train, X_test, y_test, *, folds: int = 5, n_jobs: int = 1, **_) -> dict:
    """GridSearchCV(SVC) on the 11 x 11 grid, then Platt scaling by CalibratedClassifierCV (_common)."""
    load = load_average()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search, calibrated, search_s, calibration_s = grid_search_platt(X_train, y_train, cv=folds, n_jobs=n_jobs)
        best = search.best_params_
        start = time.perf_counter()
        p_positive = calibrated.predict_proba(X_test)[:, positive_column(calibrated)]
        predicted = calibrated.predict(X_test)
        predict_s = time.perf_counter() - start
        error_svc = error_rate(y_test, search.best_estimator_.predict(X_test))
    n_train = X_train.shape[0]
    n_support = int(search.best_estimator_.n_support_.sum())
    edge = best["C"] in (SVC_C.min(), SVC_C.max()) or best["gamma"] in (SVC_GAMMA.min(), SVC_GAMMA.max())
    return {
        "fit_s": search_s + calibration_s,
        "search_s": search_s,
        "calibration_s": calibration_s,
        "predict_s": predict_s,
        "load_before": load,
        "load_after": load_average(),
        **_scores(y_test, p_positive, predicted),
        "error_svc": error_svc,
        "hyperparameters": {"C": float(best["C"]), "gamma": float(best["gamma"]),
                            "length_scale": float(np.sqrt(0.5 / best["gamma"]))},
        "cv_accuracy": float(search.best_score_),
        "n_train": n_train,
        "n_support": n_support,
        "flags": _flags(predicted=predicted, p_positive=p_positive, n_train=n_train, n_support=n_support,
                        extra=["edge"] if edge else []),
        "warnings": warning_records(caught),
    }


def run_gpc(X_train, y_train, X_test, y_test, **_) -> dict:
    """GaussianProcessClassifier(ConstantKernel() * RBF()) with scikit-learn's defaults."""
    load = load_average()
    model = gp_classifier()
    fit_s, predict_s, p_positive, predicted, caught = fit_and_predict(model, X_train, y_train, X_test)
    kernel = model.kernel_
    return {
        "fit_s": fit_s,
        "predict_s": predict_s,
        "load_before": load,
        "load_after": load_average(),
        **_scores(y_test, p_positive, predicted),
        "hyperparameters": {"amplitude": float(kernel.k1.constant_value), "length_scale": float(kernel.k2.length_scale)},
        "log_marginal_likelihood": float(model.log_marginal_likelihood_value_),
        "n_train": X_train.shape[0],
        "flags": _flags(predicted=predicted, p_positive=p_positive, n_train=X_train.shape[0]),
        "warnings": warning_records(caught),
    }


RUNNERS = {"search": run_search, "grid": run_grid, "cv+platt": run_cv_platt, "gpc": run_gpc}


# ---------------------------------------------------------------------------
# cold probe: split 0 of one data set and arm, in a fresh process


def cold_probe(args) -> None:
    """(--cold-probe) Fit split 0 and print one JSON line: import time, fit time, hyperparameters."""
    import jax

    X, y = load_dataset(args.probe_dataset, return_X_y=True)
    train, test = splits(X, y, 1, args.max_train, args.seed)[0]
    record = RUNNERS[args.probe_arm](X[train], y[train], X[test], y[test], quick=args.quick)
    record.pop("_kernel", None)
    out = {"import_s": _IMPORT_SECONDS, "fit_s": record["fit_s"], "predict_s": record["predict_s"],
           "hyperparameters": record["hyperparameters"], "nll": record["nll"],
           "log_evidence": record.get("log_evidence"), "counts": record.get("counts"),
           "jax_compilation_cache_dir": jax.config.jax_compilation_cache_dir}
    print(json.dumps(plain(out)))


def run_cold_probe(dataset: str, arm: str, args) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--cold-probe", "--probe-dataset", dataset,
               "--probe-arm", arm, "--seed", str(args.seed), "--max-train", str(args.max_train)]
    command += ["--quick"] if args.quick else []
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=fresh_environment(BAYESVM_NO_CACHE="1"))
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": done.stderr[-2000:], "process_s": wall_s}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"error": "no JSON line from the probe: " + done.stdout[-1000:] + done.stderr[-1000:],
                "process_s": wall_s}
    return {**json.loads(lines[-1]), "process_s": wall_s}


def _same_choice(a: dict, b: dict) -> bool:
    return all(k in b and np.isclose(v, b[k], rtol=1e-6) for k, v in a.items() if v is not None)


# ---------------------------------------------------------------------------
# summaries


def _mean_std(values) -> dict | None:
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if values.size == 0:
        return None
    return {"mean": float(values.mean()), "std": float(values.std(ddof=1)) if values.size > 1 else 0.0,
            "n": int(values.size)}


def summarise_arm(arm: str, records: list[dict], cold: dict | None, warm_refit_s: float | None) -> dict:
    out = {"n_splits": len(records)}
    for k in (*METRICS, "error_proba", "error_svc", "n_support", "n_marginal", "log_evidence"):
        if any(r.get(k) is not None for r in records):
            out[k] = _mean_std(r.get(k) for r in records)
    times = [r["fit_s"] for r in records]
    out["fit_s"] = times
    out["first_in_process_s"] = times[0]
    out["median_s"] = float(np.median(times))
    if len(times) > 1:
        out["warm_s"], out["warm_source"] = float(np.median(times[1:])), "median of splits 1.."
    elif warm_refit_s is not None:
        out["warm_s"], out["warm_source"] = warm_refit_s, "refit of split 0"
    elif arm in BAYES_ARMS:
        out["warm_s"], out["warm_source"] = times[0], "split 0 in process (compilation included)"
    else:
        out["warm_s"], out["warm_source"] = times[0], "split 0"
    if arm in BAYES_ARMS:
        out["cold_s"] = cold.get("fit_s") if cold else None
        out["import_s"] = cold.get("import_s") if cold else None
    else:  # nothing is compiled: cold = warm = the median over splits
        out["cold_s"] = out["warm_s"] = out["median_s"]
        out["warm_source"] = "median over all splits (nothing compiled)"
    for k in ("search_s", "calibration_s", "select_s", "posterior_s"):
        if k in records[0]:
            out[k] = float(np.median([r[k] for r in records]))
    if arm == "search":
        # work counts over all splits; seconds per phase over the warm splits (1..) where there are any
        timed = records[1:] if len(records) > 1 else records
        out["counts"] = {k: _mean_std(r["counts"].get(k) for r in (timed if k.startswith("seconds") else records))
                         for k in COUNTS}
        out["trusted"] = int(sum(r["report"]["trusted"] for r in records))
        out["report_failures"] = {k: int(sum(not r["report"][k] for r in records))
                                  for k in ("runs_agree", "normalization_agrees", "naive_converged")}
    out["n_warnings"] = int(sum(len(r["warnings"]) for r in records))
    flags: dict[str, int] = {}
    for r in records:
        for f in r["flags"]:
            flags[f] = flags.get(f, 0) + 1
    out["flags"] = flags
    out["hyperparameters_median"] = {k: float(np.median([r["hyperparameters"][k] for r in records]))
                                     for k in records[0]["hyperparameters"]}
    return out


def targets(entry: dict) -> dict:
    """The issue's targets on one data set (None where an arm needed is missing)."""
    arms = entry["arms"]
    out = {}
    s = arms.get("search", {}).get("summary")
    if s is None:
        return out
    cv = arms.get("cv+platt", {}).get("summary")
    if cv is not None:
        total = cv["median_s"]
        out["ratio_cv_warm"] = total / s["warm_s"] if s.get("warm_s") else None
        out["ratio_cv_cold"] = total / s["cold_s"] if s.get("cold_s") else None
        out["ratio_gridsearchcv_warm"] = cv["search_s"] / s["warm_s"] if s.get("warm_s") else None
        out["faster_5x_warm"] = bool(out["ratio_cv_warm"] is not None and out["ratio_cv_warm"] >= SPEED_TARGET)
        out["faster_5x_cold"] = bool(out["ratio_cv_cold"] is not None and out["ratio_cv_cold"] >= SPEED_TARGET)
        out["error_within_1sd"] = bool(s["error"]["mean"] <= cv["error"]["mean"] + cv["error"]["std"])
    g = arms.get("grid", {}).get("summary")
    if g is not None:
        out["ratio_grid_warm"] = g["warm_s"] / s["warm_s"] if s.get("warm_s") else None
        out["ratio_grid_cold"] = (g["cold_s"] / s["cold_s"]) if g.get("cold_s") and s.get("cold_s") else None
        grid_records = arms["grid"]["splits"]
        search_records = arms["search"]["splits"][: len(grid_records)]
        d_nll = [a["nll"] - b["nll"] for a, b in zip(search_records, grid_records)]
        out["nll_minus_grid"] = float(np.mean(d_nll))
        out["nll_tolerance"] = s["nll"]["std"]
        out["nll_not_worse"] = bool(out["nll_minus_grid"] <= out["nll_tolerance"])
        d_ev, se_ev = [], []
        for a, b in zip(search_records, grid_records):
            ref = b.get("reference")
            if ref is None:
                continue
            d_ev.append(a["log_evidence"] - ref["log_evidence"])
            se_ev.append(float(np.hypot(a["log_evidence_se"], ref["log_evidence_se"])))
        if d_ev:
            out["evidence_minus_grid"] = d_ev
            out["evidence_minus_grid_se"] = se_ev
            out["evidence_ge_grid"] = bool(all(d >= 0 for d in d_ev))
            out["evidence_ge_grid_2se"] = bool(all(d >= -2 * e for d, e in zip(d_ev, se_ev)))
    return out


# ---------------------------------------------------------------------------
# tables


def _pm(stat: dict | None, digits: int = 3) -> str:
    if stat is None or stat.get("mean") is None or not np.isfinite(stat["mean"]):
        return "-"
    return f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"


def _seconds(value) -> str:
    return "-" if value is None else (f"{value:.2f}" if value < 10 else f"{value:.0f}")


def _ratio(value) -> str:
    return "-" if value is None else f"{value:.2g}x"


def _ok(value) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def _flag_text(flags: dict) -> str:
    return ", ".join(f"{f}×{n}" for f, n in sorted(flags.items())) or "-"


def _hyper_text(arm: str, h: dict) -> str:
    keys = {"search": ("C", "amplitude", "offset", "length_scale"), "grid": ("C", "amplitude", "offset", "length_scale"),
            "cv+platt": ("C", "gamma"), "gpc": ("amplitude", "length_scale")}[arm]
    short = {"amplitude": "k0", "offset": "kb", "length_scale": "l"}
    return " ".join(f"{short.get(k, k)}={h[k]:.3g}" for k in keys if k in h)


def dataset_table(name: str, entry: dict) -> str:
    t = entry.get("targets", {})
    rows = []
    for arm, data in entry["arms"].items():
        s = data.get("summary")
        if s is None:
            continue
        warm = _seconds(s["warm_s"]) + ("*" if "compilation" in s["warm_source"] else "")
        if arm == "search":
            ratios = f"cv+platt/search {_ratio(t.get('ratio_cv_warm'))} warm, {_ratio(t.get('ratio_cv_cold'))} cold"
        elif arm == "grid":
            ratios = f"grid/search {_ratio(t.get('ratio_grid_warm'))} warm, {_ratio(t.get('ratio_grid_cold'))} cold"
        elif arm == "cv+platt":
            ratios = f"GridSearchCV {_seconds(s['search_s'])} + Platt {_seconds(s['calibration_s'])}"
        else:
            ratios = ""
        rows.append([arm, str(s["n_splits"]), *(_pm(s.get(k)) for k in METRICS),
                     _seconds(s.get("cold_s")) if arm in BAYES_ARMS else "=warm", warm, ratios,
                     _hyper_text(arm, s["hyperparameters_median"]), str(s["n_warnings"]), _flag_text(s["flags"])])
    title = f"### {name}: n = {entry['n']}, d = {entry['d']}, {entry['n_train']} training / {entry['n_test']} test points"
    return title + "\n\n" + markdown_table(["arm", "splits", *(METRIC_LABELS[k] for k in METRICS), "cold", "warm",
                                       "time ratios", "hyperparameters (median)", "warnings", "flags"], rows)


def search_table(results: dict) -> str:
    rows = []
    for name, entry in results.items():
        s = entry["arms"].get("search", {}).get("summary")
        if s is None:
            continue
        c = s["counts"]
        mean = lambda k, fmt="{:.0f}": "-" if c.get(k) is None else fmt.format(c[k]["mean"])  # noqa: E731
        fails = ", ".join(f"{k}×{v}" for k, v in s["report_failures"].items() if v) or "-"
        rows.append([name, str(s["n_splits"]), mean("evaluations"), mean("ep_sweeps"), mean("factorizations"),
                     mean("anchors"), mean("starts"), mean("seconds_search", "{:.1f}"), mean("seconds_check", "{:.1f}"),
                     f"{s['trusted']}/{s['n_splits']}", fails, _pm(s.get("log_evidence"), 2)])
    return ("### search arm: work per fit (mean over splits; seconds of the L-BFGS-B search and of the check at the "
            "answer: mean over the warm splits 1.., in process) and the trust report\n\n"
            + markdown_table(["data set", "splits", "evaluations", "EP sweeps", "factorisations", "SMC anchors", "starts",
                         "s search", "s check", "trusted", "failed tests", "ln P(D) (mean ± sd)"], rows))


def evidence_table(results: dict) -> str:
    rows = []
    for name, entry in results.items():
        grid = entry["arms"].get("grid")
        search = entry["arms"].get("search")
        if grid is None or search is None:
            continue
        for i, g in enumerate(grid["splits"]):
            a = search["splits"][i]
            ref = g.get("reference") or {}
            d = a["log_evidence"] - ref["log_evidence"] if ref else None
            se = float(np.hypot(a["log_evidence_se"], ref["log_evidence_se"])) if ref else None
            verdict = "-" if d is None else ("yes" if d >= 0 else ("≈ (within 2 se)" if d >= -2 * se else "NO"))
            rows.append([name, str(i), f"{a['log_evidence']:.2f} ± {a['log_evidence_se']:.2f}",
                         f"{g['log_evidence']:.2f} ± {g['log_evidence_se']:.2f}",
                         f"{ref['log_evidence']:.2f} ± {ref['log_evidence_se']:.2f}" if ref else "-",
                         "-" if d is None else f"{d:+.2f}", verdict,
                         "-" if not ref else ("yes" if ref["inside_search_box"] else "no"),
                         "-" if not ref else ("yes" if ref["runs_agree"] else "NO"),
                         f"{a['nll']:.3f} / {g['nll']:.3f}"])
    return ("### ln P(D): search's answer vs the grid's best (grid's own screening value, and re-evaluated by "
            "log_evidence's defaults = the estimator the search reports)\n\n"
            + markdown_table(["data set", "split", "search", "grid (own)", "grid (re-evaluated)", "search − grid",
                         "search ≥ grid", "grid best in search box", "grid's SMC runs agree",
                         "test NLL search / grid"], rows))


def summary_table(results: dict) -> str:
    keys = [("faster_5x_warm", "≥5x faster than cv+platt (warm)"), ("faster_5x_cold", "≥5x faster than cv+platt (cold)"),
            ("error_within_1sd", "error ≤ cv+platt + 1 sd"), ("nll_not_worse", "NLL ≤ grid + split sd"),
            ("evidence_ge_grid", "ln P(D) ≥ grid's best"), ("evidence_ge_grid_2se", "ln P(D) ≥ grid's best − 2 se")]
    rows = []
    for name, entry in results.items():
        t = entry.get("targets", {})
        nll = (f"{t['nll_minus_grid']:+.3f} (tol {t['nll_tolerance']:.3f})" if "nll_minus_grid" in t else "-")
        rows.append([name, _ratio(t.get("ratio_cv_warm")), _ratio(t.get("ratio_cv_cold")), nll,
                     *(_ok(t.get(k)) for k, _ in keys)])
    tally = []
    for k, _ in keys:
        values = [e.get("targets", {}).get(k) for e in results.values()]
        values = [v for v in values if v is not None]
        tally.append(f"{sum(values)}/{len(values)}" if values else "-")
    rows.append([f"**{len(results)} data sets**", "", "", "", *tally])
    return ("### targets (search arm; speed ratio = cv+platt time / search time; NLL: mean over the grid's splits of "
            "search − grid, paired)\n\n"
            + markdown_table(["data set", "cv+platt/search warm", "cold", "NLL − grid", *(label for _, label in keys)],
                        rows))


TABLE_LEGEND = ("Per data set: mean ± sd over the splits each arm ran (column 'splits'). Times in s: cold = split 0 "
                "in a fresh process, compilation included; warm = median of splits 1.. in process (one split: a "
                "second in-process fit of split 0); * = the grid arm on one split, in process, its own compilation "
                "included; scikit-learn arms: the median over splits for both.")


def report(results: dict) -> str:
    blocks = [TABLE_LEGEND, *(dataset_table(name, entry) for name, entry in results.items())]
    if any("search" in e["arms"] for e in results.values()):
        blocks.append(search_table(results))
    if any("grid" in e["arms"] and "search" in e["arms"] for e in results.values()):
        blocks.append(evidence_table(results))
    blocks.append(summary_table(results))
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------------
# main


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=None, help=f"default: {' '.join(DATASETS)}")
    parser.add_argument("--max-train", type=int, default=None,
                        help=f"training points per split: min(this, 70%% of the set) (default {MAX_TRAIN}; "
                             f"--quick {QUICK_TRAIN})")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="default: all")
    parser.add_argument("--grid-splits", type=int, default=1,
                        help="run the grid arm on the first K splits only (default 1: split 0)")
    parser.add_argument("--folds", type=int, default=5, help="CV folds of the grid search and of Platt scaling")
    parser.add_argument("--cold", choices=("subprocess", "none"), default="subprocess",
                        help="cold timing of the bayesvm arms: refit split 0 in a fresh process, or skip")
    parser.add_argument("--cold-arms", nargs="+", choices=BAYES_ARMS, default=["search"],
                        help="arms given a cold probe (default: search; the grid's probe costs another grid fit)")
    parser.add_argument("--n-jobs", type=int, default=1, help="processes for GridSearchCV (default 1)")
    add_standard_arguments(parser, seed=0, quick=f"smoke run: {' and '.join(QUICK_DATASETS)}, 1 split, "
                                                 f"{QUICK_TRAIN} training points, the grid arm on a 3 x 3 x 3 grid")
    parser.add_argument("--splits", "--n-splits", dest="splits", type=int, default=None,
                        help="stratified train/test splits (default 5; --quick 1)")
    parser.add_argument("--out", "--output", dest="out", type=Path, default=None,
                        help="JSON output (default benchmarks/results/selection.json; --quick: selection_quick.json)")
    parser.add_argument("--cold-probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe-dataset", help=argparse.SUPPRESS)
    parser.add_argument("--probe-arm", choices=BAYES_ARMS, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.datasets is None:
        args.datasets = list(QUICK_DATASETS if args.quick else DATASETS)
    if args.splits is None:
        args.splits = 1 if args.quick else 5
    if args.max_train is None:
        args.max_train = QUICK_TRAIN if args.quick else MAX_TRAIN
    if args.out is None:
        args.out = RESULTS / ("selection_quick.json" if args.quick else "selection.json")
    if args.splits < 1 or args.grid_splits < 1 or args.max_train < 10:
        parser.error("--splits and --grid-splits must be >= 1, --max-train >= 10")
    args.arms = [a for a in ARMS if a in args.arms]
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.cold_probe:
        cold_probe(args)
        return
    arms = args.arms
    grid_splits = min(args.grid_splits, args.splits)
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
              if not k.startswith("probe") and k != "cold_probe"}
    config.update(svc_C=SVC_C.tolist(), svc_gamma=SVC_GAMMA.tolist(), grid_splits_run=grid_splits)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"arms: {', '.join(arms)} (grid on {grid_splits} split(s)); data sets: {', '.join(args.datasets)}; "
          f"{args.splits} split(s), at most {args.max_train} training points{'; quick' if args.quick else ''}",
          flush=True)

    results = {}
    start_all = time.perf_counter()
    for name in args.datasets:
        X, y = load_dataset(name, return_X_y=True)
        parts = splits(X, y, args.splits, args.max_train, args.seed)
        entry = {"n": int(X.shape[0]), "d": int(X.shape[1]), "n_train": int(len(parts[0][0])),
                 "n_test": int(len(parts[0][1])), "arms": {a: {"splits": []} for a in arms}}
        results[name] = entry
        warm_refit_s = None
        for s, (train, test) in enumerate(parts):
            data = (X[train], y[train], X[test], y[test])
            for a in arms:
                if a == "grid" and s >= grid_splits:
                    continue
                record = RUNNERS[a](*data, quick=args.quick, folds=args.folds, n_jobs=args.n_jobs)
                if a == "grid":
                    record["reference"] = grid_best_reference(X[train], y[train], record)
                entry["arms"][a]["splits"].append(record)
                extra = ""
                if a == "search":
                    c = record["counts"]
                    extra = (f", ln P(D) {record['log_evidence']:.2f}, {c['evaluations']} evaluations, "
                             f"trusted {record['report']['trusted']}")
                elif a == "grid":
                    extra = (f", ln P(D) {record['log_evidence']:.2f} (re-evaluated "
                             f"{record['reference']['log_evidence']:.2f} in {record['reference']['seconds']:.0f} s)")
                print(f"  {name} split {s} {a}: {record['fit_s']:.1f} s, error {record['error']:.3f}, "
                      f"NLL {record['nll']:.3f}{extra}, flags {record['flags'] or '-'}, "
                      f"{len(record['warnings'])} warning(s)", flush=True)
            if s == 0 and args.splits == 1 and "search" in arms:
                # one split: a second in-process fit of split 0 gives the warm time
                warm_refit_s = run_search(*data)["fit_s"]
                print(f"  {name} split 0 search (warm refit): {warm_refit_s:.1f} s", flush=True)
        for a in arms:
            cold = None
            if a in args.cold_arms and args.cold == "subprocess":
                cold = run_cold_probe(name, a, args)
                print(f"  {name} cold probe {a}: "
                      + (f"fit {cold['fit_s']:.1f} s (+ import {cold['import_s']:.1f} s), JAX cache "
                         f"{cold['jax_compilation_cache_dir']}" if "fit_s" in cold
                         else f"FAILED: {cold['error'][-300:]}"), flush=True)
                if "fit_s" in cold:
                    first = entry["arms"][a]["splits"][0]["hyperparameters"]
                    cold["matches_split0"] = _same_choice(cold["hyperparameters"], first)
                    if not cold["matches_split0"]:
                        print(f"  WARNING: the cold probe chose {cold['hyperparameters']}, split 0 in this process "
                              f"{first}: the code changed during the run, or the fit is not deterministic",
                              flush=True)
                entry["arms"][a]["cold_probe"] = cold
            entry["arms"][a]["summary"] = summarise_arm(
                a, entry["arms"][a]["splits"], cold if cold and "fit_s" in cold else None,
                warm_refit_s if a == "search" else None)
        entry["targets"] = targets(entry)
        payload = {"provenance": provenance(), "config": config, "environment": environment(import_s=_IMPORT_SECONDS), "datasets": results,
                   "total_s": time.perf_counter() - start_all}
        args.out.write_text(json.dumps(plain(payload), indent=1))
        print(flush=True)
        print(dataset_table(name, entry), flush=True)
        print(flush=True)

    print(report(results))
    print(f"\ntotal {time.perf_counter() - start_all:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()

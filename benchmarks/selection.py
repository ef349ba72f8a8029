"""Selection benchmark: evidence maximisation against 5-fold grid search + Platt scaling.

On breast cancer, digits 3 vs 8, digits even vs odd, Pima, ionosphere and
Ripley's synth, over 5 stratified 70/30 splits (the same splits for every
arm), each arm chooses its hyperparameters on the training part only and is
scored on the test part:

* evidence arms ``A/N`` (``--arms``; default: one arm with the defaults of
  ``BayesianSVC``, read from its signature, or ``--approximation`` /
  ``--normalization``): ``BayesianSVC(kernel="rbf", approximation=A,
  normalization=N)`` -- ``select_hyperparameters`` on the package's default
  grid (extensions at grid edges and the local refinement included) -- with
  probabilities from ``predict_proba`` (posterior-averaged);
* ``cv+platt``: ``GridSearchCV(SVC(kernel="rbf"), {"C", "gamma"}, cv=5)``
  (accuracy, refit on the whole training part), then
  ``CalibratedClassifierCV(SVC(**best_params), method="sigmoid", cv=5)`` fitted
  on the training part for the probabilities; its test error is that of the
  calibrated classifier (the refit SVC's error is in the JSON as ``error_svc``).

Comparable grids. bayesvm's grid (``default_grid`` of the training part) is
(length scale, C k0, C) with k0 the kernel amplitude; the MAP SVM depends on
C and k0 only through C k0, so the evidence arm needs one dual solve per
(length scale, C k0) and re-evaluates only the evidence along C. SVC has
amplitude 1 and a free bias (no kernel offset), so its box constraint C_svc
plays the part of C k0, and gamma = 1 / (2 length_scale^2). The grid search
therefore gets the same length scales and C_svc = the C k0 values: both grids
hold the same number of SVM problems (4 x 5 = 20 by default; 100 SVC fits in
5-fold CV). The evidence arm may extend its grid at an edge; the grid search
does not.

Metrics (mean +- std over splits, std with ddof=1): test error, negative
log-likelihood, Brier score, expected calibration error (15 equal-width bins),
all from ``bayesvm.metrics``. Time: wall-clock seconds of the selection
(``BayesianSVC.fit``; ``GridSearchCV.fit`` and ``CalibratedClassifierCV.fit``
separately and summed), median over the splits.

Cold and warm. JAX compiles on the first call for every new problem size, so
the evidence arm is timed two ways. Cold (``--cold subprocess``, the
default): split 0 is fitted once more in a fresh Python process
(``selection.py --cold-probe ...``, without any ``JAX_COMPILATION_CACHE_DIR``
of the environment, so nothing is read from a persistent cache; the library
itself keeps none) and its fit time is reported, compilation included -- what
a user of a one-off command sees; the probe's import time of bayesvm/JAX is
recorded separately. Warm: the median over splits 1.. of the in-process fits
(same training-set size as split 0, so nothing is recompiled; split 0 in the
main process is kept in the JSON as ``first_in_process_s``). The speed target
is checked on both.

Flags per split (a degenerate or suspicious fit): ``edge`` -- the optimum is
on a grid edge (``EvidenceSurface.at_edge`` non-empty after the extensions,
i.e. a GridEdgeWarning saying "still on the grid edge"; for the grid search:
best C or gamma at the end of its axis); ``constant`` -- all test
predictions one class; ``flat`` -- test probabilities within 0.01 of each
other; ``sv>90%`` / ``marginal>90%`` -- more than 90% of the training points
are support vectors / marginal. Warnings raised during each fit and
prediction are recorded (category and message) in the JSON and counted in
the tables; nothing is silenced.

Targets, per data set and evidence arm, against cv+platt: selection >= 5x
faster than the grid search (warm, and cold); test error <= the grid
search's mean error + its std; test NLL <= the grid search's (the issue asks
for this on most data sets); no flag on any split.

Usage:
    python benchmarks/selection.py [--datasets pima synth] [--n-splits 5]
        [--arms ep/ep laplace/prior] [--approximation A] [--normalization N]
        [--cold {subprocess,none}] [--n-jobs 1] [--max-train N] [--quick]
``--quick``: synth and ionosphere, 2 splits, thinned grids (3 length scales x
3 C k0 x 3 C), training parts subsampled to 100 points (``--max-train``) -- a
smoke run that checks the machinery, not a result. Writes
benchmarks/results/selection.json (after every data set, so a long run that
stops keeps what it has done). On the shared 2-core machine a full default
run takes hours (see the JSON's timings); JAX may use both cores, the grid
search uses ``--n-jobs`` processes (default 1).
"""

from __future__ import annotations

import time

_T_START = time.perf_counter()

import argparse  # noqa: E402
import inspect  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import platform  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import sklearn  # noqa: E402
from sklearn.calibration import CalibratedClassifierCV  # noqa: E402
from sklearn.model_selection import GridSearchCV, StratifiedShuffleSplit, train_test_split  # noqa: E402
from sklearn.svm import SVC  # noqa: E402

import bayesvm  # noqa: E402
from bayesvm import BayesianSVC  # noqa: E402
from bayesvm.datasets import load_dataset  # noqa: E402
from bayesvm.evidence import APPROXIMATIONS  # noqa: E402
from bayesvm.metrics import brier_score, error_rate, expected_calibration_error, negative_log_likelihood  # noqa: E402
from bayesvm.selection import NORMALIZATIONS, default_grid  # noqa: E402

_IMPORT_SECONDS = time.perf_counter() - _T_START

DATASETS = ("breast_cancer", "digits_3v8", "digits_even_odd", "pima", "ionosphere", "synth")
QUICK_DATASETS = ("synth", "ionosphere")
BASELINE = "cv+platt"
METRICS = ("error", "nll", "brier", "ece")
METRIC_LABELS = {"error": "test error", "nll": "test NLL", "brier": "Brier score", "ece": "ECE (15 bins)"}
ECE_BINS = 15
SPEED_TARGET = 5.0
SHARE_LIMIT = 0.9  # sv>90% / marginal>90%
FLAT_PROBABILITY = 0.01
RESULTS = Path(__file__).parent / "results"
_DEFAULTS = {name: p.default for name, p in inspect.signature(BayesianSVC).parameters.items()}


# ---------------------------------------------------------------------------
# arms


def evidence_arm(spec: str) -> tuple[str, str]:
    """'A/N' -> (approximation, normalization), validated against the package's options."""
    parts = spec.split("/")
    if len(parts) != 2 or parts[0] not in APPROXIMATIONS or parts[1] not in NORMALIZATIONS:
        raise argparse.ArgumentTypeError(
            f"an arm is APPROXIMATION/NORMALIZATION with APPROXIMATION in {APPROXIMATIONS} and NORMALIZATION in "
            f"{NORMALIZATIONS}; got {spec!r}"
        )
    return parts[0], parts[1]


def arm_name(approximation: str, normalization: str) -> str:
    return f"evidence[{approximation}/{normalization}]"


def splits(X, y, n_splits: int, test_size: float, random_state: int, max_train: int | None = None):
    """Stratified (train, test) index pairs; with ``max_train`` a stratified subsample of each training part."""
    out = []
    splitter = StratifiedShuffleSplit(n_splits=n_splits, test_size=test_size, random_state=random_state)
    for s, (train, test) in enumerate(splitter.split(X, y)):
        if max_train and train.size > max_train:
            train = np.sort(train_test_split(train, train_size=max_train, stratify=y[train],
                                             random_state=random_state + s)[0])
        out.append((train, test))
    return out


def selection_grid(X_train, quick: bool) -> dict[str, np.ndarray]:
    """The grid both arms search: bayesvm's default grid of the training part (thinned with --quick)."""
    grid = default_grid(X_train, "rbf")
    axes = {"length_scale": grid.shape, "C_k0": grid.C_k0, "C": grid.C}
    if quick:  # 5 -> 3, 7 -> 3, 9 -> 3 values, ends kept
        axes = {name: values[np.round(np.linspace(0, values.size - 1, 3)).astype(int)] for name, values in axes.items()}
    return axes


def _warning_records(caught) -> list[dict]:
    return [{"category": w.category.__name__, "message": str(w.message)} for w in caught]


def _scores(y_test, p_positive, predicted) -> dict:
    return {
        "error": error_rate(y_test, predicted),
        "error_proba": float(np.mean((p_positive >= 0.5) != (np.asarray(y_test) > 0))),
        "nll": negative_log_likelihood(y_test, p_positive),
        "brier": brier_score(y_test, p_positive),
        "ece": expected_calibration_error(y_test, p_positive, n_bins=ECE_BINS),
    }


def _flags(*, edge: bool, predicted, p_positive, n_support: int, n_marginal: int | None, n_train: int) -> list[str]:
    flags = []
    if edge:
        flags.append("edge")
    if np.unique(predicted).size < 2:
        flags.append("constant")
    if np.ptp(p_positive) < FLAT_PROBABILITY:
        flags.append("flat")
    if n_support > SHARE_LIMIT * n_train:
        flags.append("sv>90%")
    if n_marginal is not None and n_marginal > SHARE_LIMIT * n_train:
        flags.append("marginal>90%")
    return flags


def _load() -> float | None:
    """1-minute load average (timings on a shared machine are only as good as this is low)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _timed(call, *args):
    """(call(*args), wall seconds it took)."""
    start = time.perf_counter()
    result = call(*args)
    return result, time.perf_counter() - start


def _predictions(model, X_test):
    """P(y = 1) and the predicted labels on the test part."""
    return model.predict_proba(X_test)[:, list(model.classes_).index(1)], model.predict(X_test)


def run_evidence(X_train, y_train, X_test, y_test, *, approximation, normalization, grid, random_state) -> dict:
    """Fit BayesianSVC (evidence selection) on the training part; score on the test part."""
    load = _load()
    model = BayesianSVC(kernel="rbf", approximation=approximation, normalization=normalization, grid=grid,
                        random_state=random_state)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_s = _timed(model.fit, X_train, y_train)[1]
        (p_positive, predicted), predict_s = _timed(_predictions, model, X_test)
    surface = model.surface_
    n_train = X_train.shape[0]
    return {
        "fit_s": fit_s,
        "predict_s": predict_s,
        "load_before": load,
        "load_after": _load(),
        **_scores(y_test, p_positive, predicted),
        "hyperparameters": {"C": model.C_, "amplitude": model.amplitude_, "length_scale": model.length_scale_,
                            "offset": model.offset_, "C_k0": model.C_ * model.amplitude_},
        "log_evidence": model.log_evidence_,
        "log_evidence_se": model.log_evidence_se_,
        "n_train": n_train,
        "n_support": int(len(model.support_)),
        "n_marginal": int(len(model.marginal_)),
        "grid_size": list(surface.grid.shape_of_surface) if surface is not None else None,
        "extensions": [list(e) for e in surface.extensions] if surface is not None else [],
        "at_edge": list(surface.at_edge) if surface is not None else [],
        "refinement_steps": len(surface.refinement) if surface is not None else 0,
        "checks": len(surface.checks) if surface is not None else 0,
        "checks_failed": sum(not c.agreed for c in surface.checks) if surface is not None else 0,
        "flags": _flags(edge=bool(surface is not None and surface.at_edge), predicted=predicted, p_positive=p_positive,
                        n_support=len(model.support_), n_marginal=len(model.marginal_), n_train=n_train),
        "warnings": _warning_records(caught),
    }


def run_cv_platt(X_train, y_train, X_test, y_test, *, grid, folds, n_jobs) -> dict:
    """GridSearchCV(SVC) on the mapped grid, then Platt scaling by CalibratedClassifierCV; score on the test part."""
    load = _load()
    C_values = np.asarray(grid["C_k0"], dtype=float)
    gammas = 1.0 / (2.0 * np.asarray(grid["length_scale"], dtype=float) ** 2)
    search = GridSearchCV(SVC(kernel="rbf"), {"C": C_values.tolist(), "gamma": gammas.tolist()}, cv=folds,
                          n_jobs=n_jobs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        search_s = _timed(search.fit, X_train, y_train)[1]
        best = search.best_params_
        calibrated = CalibratedClassifierCV(SVC(kernel="rbf", **best), method="sigmoid", cv=folds)
        calibration_s = _timed(calibrated.fit, X_train, y_train)[1]
        (p_positive, predicted), predict_s = _timed(_predictions, calibrated, X_test)
        error_svc = error_rate(y_test, search.best_estimator_.predict(X_test))
    n_train = X_train.shape[0]
    n_support = int(search.best_estimator_.n_support_.sum())
    edge = best["C"] in (C_values.min(), C_values.max()) or best["gamma"] in (gammas.min(), gammas.max())
    return {
        "fit_s": search_s + calibration_s,
        "search_s": search_s,
        "calibration_s": calibration_s,
        "predict_s": predict_s,
        "load_before": load,
        "load_after": _load(),
        **_scores(y_test, p_positive, predicted),
        "error_svc": error_svc,
        "hyperparameters": {"C": float(best["C"]), "gamma": float(best["gamma"]),
                            "length_scale": float(np.sqrt(0.5 / best["gamma"])), "amplitude": 1.0, "offset": None},
        "cv_accuracy": float(search.best_score_),
        "n_train": n_train,
        "n_support": n_support,
        "n_marginal": None,
        "grid_size": [gammas.size, C_values.size],
        "flags": _flags(edge=bool(edge), predicted=predicted, p_positive=p_positive, n_support=n_support,
                        n_marginal=None, n_train=n_train),
        "warnings": _warning_records(caught),
    }


# ---------------------------------------------------------------------------
# cold probe: split 0 of one data set and arm, in a fresh process


def cold_probe(args) -> None:
    """(--cold-probe) Fit split 0 and print one JSON line: import time, fit time, hyperparameters."""
    approximation, normalization = args.probe_arm
    X, y = load_dataset(args.probe_dataset, return_X_y=True)
    train, test = splits(X, y, 1, args.test_size, args.random_state, args.max_train)[0]
    grid = selection_grid(X[train], args.quick) if args.quick else None
    result = run_evidence(X[train], y[train], X[test], y[test], approximation=approximation,
                          normalization=normalization, grid=grid, random_state=args.random_state)
    print(json.dumps({"import_s": _IMPORT_SECONDS, "fit_s": result["fit_s"], "predict_s": result["predict_s"],
                      "hyperparameters": result["hyperparameters"], "nll": result["nll"]}))


def run_cold_probe(dataset: str, arm: tuple[str, str], args) -> dict:
    command = ([sys.executable, str(Path(__file__).resolve()), "--cold-probe", "--probe-dataset", dataset,
               "--probe-arm", "/".join(arm), "--test-size", str(args.test_size),
               "--random-state", str(args.random_state), "--max-train", str(args.max_train or 0)]
               + (["--quick"] if args.quick else []))
    env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall_s = time.perf_counter() - start
    if done.returncode != 0:
        return {"error": done.stderr[-2000:], "process_s": wall_s}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return {**json.loads(lines[-1]), "process_s": wall_s}


# ---------------------------------------------------------------------------
# summaries and tables


def _mean_std(values) -> tuple[float, float]:
    values = np.asarray([v for v in values if v is not None], dtype=float)
    if values.size == 0:
        return float("nan"), float("nan")
    return float(values.mean()), float(values.std(ddof=1)) if values.size > 1 else 0.0


def summarise_arm(records: list[dict], cold: dict | None) -> dict:
    out = {}
    for k in (*METRICS, "error_proba", "error_svc", "n_support", "n_marginal"):
        if any(r.get(k) is not None for r in records):
            mean, std = _mean_std(r.get(k) for r in records)
            out[k] = {"mean": mean, "std": std}
    times = [r["fit_s"] for r in records]
    out["first_in_process_s"] = times[0]
    out["warm_s"] = float(np.median(times[1:])) if len(times) > 1 else None
    out["median_s"] = float(np.median(times))
    for k in ("search_s", "calibration_s"):
        if k in records[0]:
            out[k] = float(np.median([r[k] for r in records]))
    out["cold_s"] = cold.get("fit_s") if cold else None
    out["import_s"] = cold.get("import_s") if cold else None
    out["n_warnings"] = int(sum(len(r["warnings"]) for r in records))
    out["n_extensions"] = int(sum(len(r.get("extensions", [])) for r in records))
    flags: dict[str, int] = {}
    for r in records:
        for f in r["flags"]:
            flags[f] = flags.get(f, 0) + 1
    out["flags"] = flags
    out["hyperparameters_median"] = {
        k: float(np.median([r["hyperparameters"][k] for r in records]))
        for k in records[0]["hyperparameters"] if records[0]["hyperparameters"][k] is not None
    }
    return out


def targets(evidence: dict, baseline: dict) -> dict:
    """The issue's targets for one evidence arm against cv+platt on one data set."""
    search = baseline.get("search_s")
    warm = evidence["warm_s"] if evidence["warm_s"] is not None else evidence["first_in_process_s"]
    ratio_warm = search / warm if search and warm else None
    ratio_cold = search / evidence["cold_s"] if search and evidence.get("cold_s") else None
    total = search + baseline.get("calibration_s", 0.0) if search else None
    return {
        "speed_ratio_warm": ratio_warm,
        "speed_ratio_cold": ratio_cold,
        "speed_ratio_warm_incl_platt": total / warm if total and warm else None,
        "faster_5x_warm": bool(ratio_warm is not None and ratio_warm >= SPEED_TARGET),
        "faster_5x_cold": bool(ratio_cold is not None and ratio_cold >= SPEED_TARGET),
        "error_within_1sd": bool(evidence["error"]["mean"] <= baseline["error"]["mean"] + baseline["error"]["std"]),
        "nll_better_or_equal": bool(evidence["nll"]["mean"] <= baseline["nll"]["mean"]),
        "no_flags": not evidence["flags"],
    }


def _pm(stat: dict | None, digits: int = 3) -> str:
    if stat is None or not np.isfinite(stat["mean"]):
        return "-"
    return f"{stat['mean']:.{digits}f} ± {stat['std']:.{digits}f}"


def _seconds(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def _markdown(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
    line = lambda cells: "| " + " | ".join(f"{str(c):<{w}}" for c, w in zip(cells, widths)) + " |"  # noqa: E731
    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def _flag_text(flags: dict) -> str:
    return ", ".join(f"{f}×{n}" for f, n in sorted(flags.items())) or "none"


def report(results: dict, arms: list[str]) -> str:
    names = list(results)
    blocks = []
    for k in METRICS:
        rows = [[name] + [_pm(results[name]["arms"][a]["summary"].get(k)) for a in arms] for name in names]
        blocks.append(f"### {METRIC_LABELS[k]} (mean ± std over splits)\n\n" + _markdown(["data set", *arms], rows))

    rows = []
    for name in names:
        for a in arms:
            s = results[name]["arms"][a]["summary"]
            if a == BASELINE:
                rows.append([name, a, "-", *map(_seconds, (s["median_s"], s["search_s"], s["calibration_s"]))])
            else:
                rows.append([name, a, _seconds(s["cold_s"]), _seconds(s["warm_s"]), "-", "-"])
    blocks.append("### selection wall time, s (evidence: cold = fresh process incl. compilation, warm = median of "
                  "splits 1..; cv+platt: median total = grid search + Platt)\n\n"
                  + _markdown(["data set", "arm", "cold", "warm / total", "grid search", "Platt"], rows))

    rows = []
    for name in names:
        for a in arms:
            s = results[name]["arms"][a]["summary"]
            h = s["hyperparameters_median"]
            number = lambda k: f"{h[k]:.3g}" if k in h else "-"  # noqa: E731
            rows.append([name, a, str(results[name]["n_train"]),
                         *map(number, ("C", "amplitude", "length_scale", "offset")),
                         f"{s['n_support']['mean']:.0f}",
                         f"{s['n_marginal']['mean']:.0f}" if "n_marginal" in s else "-",
                         str(s["n_warnings"]), str(s["n_extensions"]), _flag_text(s["flags"])])
    blocks.append("### chosen hyperparameters (median over splits) and fit diagnostics (#SV, #marginal: mean over "
                  "splits; warnings, grid extensions and flags: summed over splits)\n\n"
                  + _markdown(["data set", "arm", "n_train", "C", "amplitude", "length scale", "offset", "#SV",
                               "#marginal", "warnings", "extensions", "flags"], rows))

    if BASELINE in arms:
        rows, tally = [], {}
        for name in names:
            for a in arms:
                if a == BASELINE:
                    continue
                t = results[name]["targets"][a]
                for key in ("faster_5x_warm", "faster_5x_cold", "error_within_1sd", "nll_better_or_equal", "no_flags"):
                    tally.setdefault(a, {}).setdefault(key, 0)
                    tally[a][key] += int(t[key])
                ok = lambda b: "yes" if b else "NO"  # noqa: E731
                ratio = lambda r: "-" if r is None else f"{r:.2g}x"  # noqa: E731
                rows.append([name, a, ratio(t["speed_ratio_warm"]), ratio(t["speed_ratio_cold"]),
                             ok(t["faster_5x_warm"]), ok(t["faster_5x_cold"]), ok(t["error_within_1sd"]),
                             ok(t["nll_better_or_equal"]), ok(t["no_flags"])])
        for a, counts in tally.items():
            rows.append([f"**{len(names)} data sets**", a, "", "",
                         *(f"{counts[k]}/{len(names)}" for k in ("faster_5x_warm", "faster_5x_cold",
                                                                 "error_within_1sd", "nll_better_or_equal",
                                                                 "no_flags"))])
        blocks.append(f"### targets against {BASELINE} (speed ratio = grid-search time / evidence selection time)\n\n"
                      + _markdown(["data set", "arm", "ratio warm", "ratio cold", "≥5x warm", "≥5x cold",
                                   "error ≤ cv+1sd", "NLL ≤ cv", "no flags"], rows))
    return "\n\n".join(blocks)


# ---------------------------------------------------------------------------
# main


def _plain(value):
    """JSON-safe copy: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    return value


def environment() -> dict:
    import jax

    return {"python": platform.python_version(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "bayesvm": bayesvm.__version__, "jax": jax.__version__, "jax_backend": jax.default_backend(),
            "numpy": np.__version__, "sklearn": sklearn.__version__, "import_s": _IMPORT_SECONDS,
            "loadavg": list(os.getloadavg()) if hasattr(os, "getloadavg") else None, **_git_state()}


def _git_state() -> dict:
    """Commit and uncommitted changes of the checkout the package is imported from (None outside git)."""
    root = Path(bayesvm.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "bayesvm"], cwd=root, capture_output=True,
                               text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": None, "bayesvm_modified": None}
    return {"git_commit": commit.stdout.strip(), "bayesvm_modified": bool(dirty.stdout.strip())}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=None, help=f"default: {' '.join(DATASETS)}")
    parser.add_argument("--n-splits", type=int, default=None, help="stratified train/test splits (default 5)")
    parser.add_argument("--test-size", type=float, default=0.3)
    parser.add_argument("--folds", type=int, default=5, help="CV folds of the grid search and of Platt scaling")
    parser.add_argument("--approximation", default=_DEFAULTS["approximation"], choices=APPROXIMATIONS,
                        help="evidence approximation of the default arm "
                             f"(BayesianSVC default: {_DEFAULTS['approximation']})")
    parser.add_argument("--normalization", default=_DEFAULTS["normalization"], choices=NORMALIZATIONS,
                        help="ln N(D) estimator of the default arm "
                             f"(BayesianSVC default: {_DEFAULTS['normalization']})")
    parser.add_argument("--arms", nargs="+", type=evidence_arm, default=None, metavar="A/N",
                        help="evidence arms APPROXIMATION/NORMALIZATION, e.g. ep/ep laplace/prior "
                             "(default: --approximation/--normalization)")
    parser.add_argument("--no-baseline", action="store_true", help=f"skip the {BASELINE} arm (no targets then)")
    parser.add_argument("--cold", choices=("subprocess", "none"), default="subprocess",
                        help="cold timing of the evidence arms: refit split 0 in a fresh process, or skip")
    parser.add_argument("--n-jobs", type=int, default=1, help="processes for GridSearchCV (default 1)")
    parser.add_argument("--random-state", type=int, default=0)
    parser.add_argument("--quick", action="store_true",
                        help=f"smoke run: {' and '.join(QUICK_DATASETS)}, 2 splits, 3 x 3 x 3 grids, "
                             "100 training points")
    parser.add_argument("--max-train", type=int, default=None,
                        help="subsample each training part to at most this many points, stratified "
                             "(default: all; --quick: 100; 0: all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "selection.json")
    parser.add_argument("--cold-probe", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--probe-dataset", help=argparse.SUPPRESS)
    parser.add_argument("--probe-arm", type=evidence_arm, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.datasets is None:
        args.datasets = list(QUICK_DATASETS if args.quick else DATASETS)
    if args.n_splits is None:
        args.n_splits = 2 if args.quick else 5
    if args.max_train is None:
        args.max_train = 100 if args.quick else 0
    if args.arms is None:
        args.arms = [(args.approximation, args.normalization)]
    if args.n_splits < 1:
        parser.error("--n-splits must be >= 1")
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.cold_probe:
        cold_probe(args)
        return
    evidence_arms = {arm_name(*arm): arm for arm in dict.fromkeys(args.arms)}
    arms = [*evidence_arms, *([] if args.no_baseline else [BASELINE])]
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()
              if not k.startswith("probe") and k != "cold_probe"}
    config["arms"] = arms
    config["bayesvm_defaults"] = {k: _DEFAULTS[k] for k in ("approximation", "normalization", "n_samples",
                                                           "max_inputs", "refine", "probability")}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"arms: {', '.join(arms)}; data sets: {', '.join(args.datasets)}; {args.n_splits} split(s)"
          f"{'; quick (thinned grids)' if args.quick else ''}", flush=True)

    results = {}
    start_all = time.perf_counter()
    for name in args.datasets:
        X, y = load_dataset(name, return_X_y=True)
        parts = splits(X, y, args.n_splits, args.test_size, args.random_state, args.max_train)
        entry = {"n": int(X.shape[0]), "d": int(X.shape[1]), "n_train": int(len(parts[0][0])),
                 "n_test": int(len(parts[0][1])), "grids": [], "arms": {a: {"splits": []} for a in arms}}
        results[name] = entry
        for s, (train, test) in enumerate(parts):
            grid = selection_grid(X[train], args.quick)
            entry["grids"].append({k: v.tolist() for k, v in grid.items()})
            data = (X[train], y[train], X[test], y[test])
            for a in arms:
                if a == BASELINE:
                    record = run_cv_platt(*data, grid=grid, folds=args.folds, n_jobs=args.n_jobs)
                else:
                    approximation, normalization = evidence_arms[a]
                    record = run_evidence(*data, approximation=approximation, normalization=normalization,
                                          grid=grid if args.quick else None, random_state=args.random_state + s)
                entry["arms"][a]["splits"].append(record)
                print(f"  {name} split {s} {a}: {record['fit_s']:.1f} s, error {record['error']:.3f}, "
                      f"NLL {record['nll']:.3f}, flags {record['flags'] or '-'}, "
                      f"{len(record['warnings'])} warning(s)", flush=True)
        for a in arms:
            cold = None
            if a != BASELINE and args.cold == "subprocess":
                cold = run_cold_probe(name, evidence_arms[a], args)
                print(f"  {name} cold probe {a}: "
                      + (f"fit {cold['fit_s']:.1f} s (+ import {cold['import_s']:.1f} s)" if "fit_s" in cold
                         else f"FAILED: {cold['error'][-300:]}"), flush=True)
                if "fit_s" in cold:
                    first = entry["arms"][a]["splits"][0]["hyperparameters"]
                    cold["matches_split0"] = all(
                        (first[k] is None and v is None) or (v is not None and first[k] is not None
                                                             and np.isclose(v, first[k], rtol=1e-6))
                        for k, v in cold["hyperparameters"].items())
                    if not cold["matches_split0"]:
                        print(f"  WARNING: the cold probe chose {cold['hyperparameters']}, split 0 in this process "
                              f"{first}: the code changed during the run, or the fit is not deterministic",
                              flush=True)
                entry["arms"][a]["cold_probe"] = cold
            entry["arms"][a]["summary"] = summarise_arm(entry["arms"][a]["splits"], cold if cold and "fit_s" in cold
                                                        else None)
        if BASELINE in arms:
            entry["targets"] = {a: targets(entry["arms"][a]["summary"], entry["arms"][BASELINE]["summary"])
                                for a in evidence_arms}
        payload = {"config": config, "environment": environment(), "datasets": results,
                   "total_s": time.perf_counter() - start_all}
        args.out.write_text(json.dumps(_plain(payload), indent=1))

    print()
    print(report(results, arms))
    print(f"\ntotal {time.perf_counter() - start_all:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()

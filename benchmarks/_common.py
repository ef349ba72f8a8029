"""Pieces the benchmark scripts share: arguments, timing, JAX's compilation counts, the baselines, tables, JSON.

Scripts in this folder import it as ``from _common import ...`` (a script's own folder is on ``sys.path`` when it
runs as ``python benchmarks/NAME.py``). Nothing here imports JAX or bayesvm at import time, so a child process
that times scikit-learn alone (benchmarks/cold_start.py's grid+Platt arm) pays for neither.

* ``add_standard_arguments``: ``--out`` / ``--seed`` / ``--splits`` / ``--quick`` with one spelling everywhere;
* ``pin_one_core``: one core for this process (environment variables, threadpoolctl, affinity);
* ``timed``, ``median_time``, ``cold_and_warm``: wall seconds of a call, its first call and its warm median;
* ``jax_compilation_counter``: JAX's backend compilations, their seconds and persistent-cache hits;
* ``grid_search_platt``: the baseline ``GridSearchCV(SVC(kernel="rbf"), 11 x 11 log grid of (C, gamma),
  cv=5)`` refit on the training rows, then ``CalibratedClassifierCV(SVC(**best), method="sigmoid", cv=5)``;
* ``gp_classifier``: the baseline ``GaussianProcessClassifier(ConstantKernel() * RBF())`` with scikit-learn's
  defaults (Laplace approximation, L-BFGS-B on its marginal likelihood, no restarts);
* ``markdown_table``, ``plain``, ``write_json``, ``environment``: tables and records;
* ``cpu_model``: the CPU's model name;
* ``provenance``: the commit, the command, the machine and the date of a run; ``write_json`` puts it at the top of
  every JSON object it writes, and the documentation's tables show it (docs/_tables.py).
"""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
import warnings
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
#: the checkout these scripts belong to
ROOT = RESULTS.parent.parent

#: the grid search's grid: 11 x 11, half a decade apart. The features are standardised, so scikit-learn's
#: gamma="scale" (1/d) lies inside for every data set the benchmarks use.
SVC_C = np.logspace(-2, 3, 11)
SVC_GAMMA = np.logspace(-4, 1, 11)
SVC_GRID = {"C": SVC_C.tolist(), "gamma": SVC_GAMMA.tolist()}


# ---------------------------------------------------------------------------
# arguments and the process


def add_standard_arguments(parser, *, out: Path | str | None = None, seed: int | None = 0,
                           splits: int | None = None, quick: str | None = None):
    """The options every benchmark spells the same way; pass None to leave one out.

    ``--out`` (a JSON path, default ``out``), ``--seed`` (alias ``--random-state``), ``--splits`` (alias
    ``--n-splits``), ``--quick`` (its help text: what the smoke run does).
    """
    if out is not None:
        parser.add_argument("--out", "--output", dest="out", type=Path, default=Path(out),
                            help=f"JSON output (default {out})")
    if seed is not None:
        parser.add_argument("--seed", "--random-state", dest="seed", type=int, default=seed,
                            help=f"seed of the splits and fits (default {seed})")
    if splits is not None:
        parser.add_argument("--splits", "--n-splits", dest="splits", type=int, default=splits,
                            help=f"stratified train/test splits (default {splits})")
    if quick is not None:
        parser.add_argument("--quick", action="store_true", help=quick)
    return parser


#: environment variables that size the BLAS / OpenMP thread pools and XLA's CPU pool
_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                     "NUMEXPR_NUM_THREADS")


def pin_one_core(core: int | None = None) -> int | None:
    """Run this process on one core: thread pools of one (call before numpy / JAX do their first work).

    Sets the thread-count variables and XLA's ``--xla_cpu_multi_thread_eigen=false``, limits the BLAS pools
    already loaded (threadpoolctl) and, on Linux, the process's affinity to ``core`` (default: the first core
    it may use). Returns the core, or None where affinity cannot be set.
    """
    for name in _THREAD_VARIABLES:
        os.environ[name] = "1"
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
                                   ).strip()
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(1)
    except ImportError:  # scikit-learn depends on it; without it the variables above still hold
        pass
    if not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    core = allowed[0] if core is None else core
    os.sched_setaffinity(0, {core})
    return core


def fresh_environment(**extra: str) -> dict:
    """The caller's environment for a fresh child process, without a persistent JAX compilation cache."""
    env = {k: v for k, v in os.environ.items()
           if k != "JAX_COMPILATION_CACHE_DIR" and not k.startswith("JAX_PERSISTENT_CACHE")}
    env.update(extra)
    return env


def load_average() -> float | None:
    """1-minute load average (timings on a shared machine are only as good as this is low)."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


# ---------------------------------------------------------------------------
# timing


def timed(call, *args, **kwargs):
    """(call(*args, **kwargs), wall seconds it took); JAX arrays are waited for."""
    start = time.perf_counter()
    result = call(*args, **kwargs)
    if "jax" in sys.modules:  # wait for JAX's asynchronous work; other results pass through unchanged
        result = sys.modules["jax"].block_until_ready(result)
    return result, time.perf_counter() - start


def median_time(call, repeats: int) -> float:
    """Median wall seconds of ``repeats`` calls of ``call()``."""
    return float(np.median([timed(call)[1] for _ in range(max(1, repeats))]))


def cold_and_warm(call, repeats: int = 1):
    """(result of the first call, its seconds, median seconds of ``repeats`` more calls): the first call pays for
    JAX's compilation of a new shape, the others find the program compiled."""
    result, first = timed(call)
    return result, first, median_time(call, repeats)


def jax_compilation_counter() -> dict:
    """A dict that counts, from now on, JAX's backend compilations (``compilations``), their summed seconds
    (``compile_s``; a program read from the persistent cache counts with its read time) and persistent-cache
    hits (``cache_hits``), from ``jax.monitoring``'s events. Counts do not drift with the machine's load."""
    from jax import monitoring

    counts = {"compilations": 0, "compile_s": 0.0, "cache_hits": 0}

    def on_duration(event, duration, **_):
        if event == "/jax/core/compile/backend_compile_duration":
            counts["compilations"] += 1
            counts["compile_s"] += duration

    def on_event(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            counts["cache_hits"] += 1

    monitoring.register_event_duration_secs_listener(on_duration)
    monitoring.register_event_listener(on_event)
    return counts


# ---------------------------------------------------------------------------
# data


def breast_cancer_split(n_train: int, seed: int):
    """Stratified n_train training rows of scikit-learn's breast cancer data and the rest as test rows,
    standardised by the training rows: (X_train, X_test, y_train, y_test)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.model_selection import train_test_split

    X, y = load_breast_cancer(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=n_train, stratify=y, random_state=seed)
    mean, sd = X_train.mean(0), X_train.std(0)
    return (X_train - mean) / sd, (X_test - mean) / sd, y_train, y_test


def synthetic_classification(n: int, seed: int = 0):
    """``make_classification`` with 10 features (5 informative), 5% label noise, standardised; labels +-1."""
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n, n_features=10, n_informative=5, flip_y=0.05, random_state=seed)
    return (X - X.mean(0)) / X.std(0), np.where(y == 1, 1.0, -1.0)


# ---------------------------------------------------------------------------
# baselines


def positive_column(model, positive=1) -> int:
    """The column of ``predict_proba`` that holds P(positive)."""
    return list(model.classes_).index(positive)


def binary_nll(model, X, y, positive=1) -> float:
    """Mean negative log-likelihood of labels y under model.predict_proba(X) (binary, P clipped to 1e-12)."""
    p = np.clip(model.predict_proba(X)[:, positive_column(model, positive)], 1e-12, 1 - 1e-12)
    return float(-np.mean(np.where(y == positive, np.log(p), np.log1p(-p))))


def grid_search_platt(X, y, *, cv=5, n_jobs: int = 1, ensemble="auto", best=None):
    """The grid search + Platt baseline, fitted on (X, y).

    ``GridSearchCV(SVC(kernel="rbf"), SVC_GRID, cv=cv)`` (accuracy, refit on every row), then
    ``CalibratedClassifierCV(SVC(kernel="rbf", **best_params_), method="sigmoid", cv=cv, ensemble=ensemble)``.
    ``best``: skip the search and calibrate at these (C, gamma). Returns (search or None, calibrated model,
    seconds of the search, seconds of the calibration).
    """
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    search, search_s = None, 0.0
    if best is None:
        search, search_s = timed(GridSearchCV(SVC(kernel="rbf"), SVC_GRID, cv=cv, n_jobs=n_jobs).fit, X, y)
        best = search.best_params_
    calibrated = CalibratedClassifierCV(SVC(kernel="rbf", **best), method="sigmoid", cv=cv, ensemble=ensemble)
    calibration_s = timed(calibrated.fit, X, y)[1]
    return search, calibrated, search_s, calibration_s


def gp_classifier(length_scale=1.0, **options):
    """``GaussianProcessClassifier(ConstantKernel() * RBF(length_scale))`` (an array of length scales: ARD)."""
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    return GaussianProcessClassifier(kernel=ConstantKernel() * RBF(length_scale=length_scale), **options)


def warning_records(caught) -> list[dict]:
    return [{"category": w.category.__name__, "message": str(w.message)} for w in caught]


def fit_and_predict(model, X_train, y_train, X_test):
    """Fit a scikit-learn classifier and predict: fit and predict seconds, P(+1), labels, the warnings raised."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        fit_s = timed(model.fit, X_train, y_train)[1]
        start = time.perf_counter()
        p_positive = model.predict_proba(X_test)[:, positive_column(model)]
        predicted = model.predict(X_test)
        predict_s = time.perf_counter() - start
    return fit_s, predict_s, p_positive, predicted, caught


# ---------------------------------------------------------------------------
# tables and records


def markdown_table(header: list[str], rows: list[list]) -> str:
    """A Markdown table, columns padded to their widest cell."""
    widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]

    def line(cells):
        return "| " + " | ".join(f"{str(c):<{w}}" for c, w in zip(cells, widths)) + " |"

    return "\n".join([line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, rows)])


def plain(value):
    """JSON-safe copy: numpy scalars and arrays to Python, NaN/inf to None, Paths to strings; dict keys that
    start with "_" are dropped."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, (np.integer, int)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return float(value) if np.isfinite(value) else None
    if isinstance(value, np.ndarray):
        return plain(value.tolist())
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(path: Path | str, payload) -> Path:
    """Write ``plain(payload)`` to path (its folder made first); returns the path.

    A dict payload gets ``provenance()`` as its first key unless it has one already: every result file says which
    commit, command and machine produced it, and when.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(payload, dict) and "provenance" not in payload:
        payload = {"provenance": provenance(), **payload}
    path.write_text(json.dumps(plain(payload), indent=1, default=str))
    return path


def _git(*args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return done.stdout.strip()


def cpu_model() -> str:
    """The CPU's model name (Linux), else the platform's processor name."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            return next(line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor()


def _command() -> str:
    """This process's command line, the script's path relative to the checkout where it lies inside."""
    argv = list(sys.argv)
    if argv and argv[0] and Path(argv[0]).is_file():
        script = Path(argv[0]).resolve()
        if script.is_relative_to(ROOT):
            argv[0] = str(script.relative_to(ROOT))
    return shlex.join(["python", *argv])


def provenance() -> dict:
    """Where a result comes from: ``commit`` (``git rev-parse HEAD`` of this checkout, None outside git),
    ``dirty`` (tracked files changed since that commit, benchmarks/results/ aside; None outside git), ``command``
    (this process's ``sys.argv``), ``machine`` (platform, CPU, CPU count, JAX's backend and devices where JAX is
    importable) and ``date`` (UTC, when the record is written)."""
    status = _git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results")
    machine = {"platform": platform.platform(), "cpu": cpu_model(), "cpu_count": os.cpu_count()}
    try:
        import jax

        machine.update(jax_backend=jax.default_backend(), jax_devices=[str(d) for d in jax.devices()])
    except Exception:  # no JAX, or no device it can use: the rest still says where the run was
        machine.update(jax_backend=None, jax_devices=None)
    return {"commit": _git("rev-parse", "HEAD"), "dirty": None if status is None else bool(status),
            "command": _command(), "machine": machine,
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def git_state() -> dict:
    """Commit and uncommitted changes of the checkout bayesvm is imported from (None outside git)."""
    import bayesvm

    root = Path(bayesvm.__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", "bayesvm"], cwd=root, capture_output=True,
                               text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return {"git_commit": None, "bayesvm_modified": None}
    return {"git_commit": commit.stdout.strip(), "bayesvm_modified": bool(dirty.stdout.strip())}


def environment(**extra) -> dict:
    """The machine and the versions a result was measured with (imports bayesvm and JAX)."""
    import jax
    import sklearn

    import bayesvm

    return {"python": platform.python_version(), "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "bayesvm": bayesvm.__version__, "jax": jax.__version__, "jax_backend": jax.default_backend(),
            "jax_devices": [str(d) for d in jax.devices()],
            "jax_compilation_cache_dir": jax.config.jax_compilation_cache_dir,
            "numpy": np.__version__, "sklearn": sklearn.__version__, "loadavg": list(os.getloadavg())
            if hasattr(os, "getloadavg") else None, **git_state(), **extra}

"""Large data: the Bayesian SVM against grid-searched SVC + Platt and a sparse variational GP, as n grows.

Data: the adult census set (``bayesvm.datasets.load_adult``, 32,561 rows,
90 one-hot and standardised columns; extra ``large``). A fixed stratified
test set of 5,000 rows; training sets are the first n rows of a stratified
shuffle of the rest, so each size contains the smaller ones.

Arms, each in a fresh process (cold: JAX compiles, nothing cached), timed as
wall seconds and peak resident memory of that process:

* ``bayesvm``: ``BayesianSVC()`` with its defaults (above 500 rows the
  evidence search runs on a stratified subsample of 500 rows, and above
  2,000 the posterior of every row is on the FITC prior through 200 k-means
  inducing inputs) and ``predict_proba`` on the test set;
* ``bayesvm-lowrank``: ``BayesianSVC(n_inducing=M, selection_size=None)``
  (the evidence search on every row, on the FITC prior), up to
  ``--every-row-up-to`` points;
* ``bayesvm-full``: ``BayesianSVC(n_inducing=None, selection_size=None)``
  (the full n x n prior, every row), up to ``--full-up-to`` points;
* ``svc``: ``GridSearchCV(SVC(rbf), 11 x 11 (C, gamma), cv=5)`` and then
  Platt scaling at the chosen (C, gamma) by
  ``CalibratedClassifierCV(SVC(...), method="sigmoid", ensemble=False, cv=5)``
  (scikit-learn's replacement of ``SVC(probability=True)``, deprecated in 1.9). Up to ``--grid-up-to`` points the grid runs
  in full; above, it is extrapolated, said so in the table: ``--cells``
  cells of the grid are timed with all five folds at that n and the time
  scaled to 121 cells, and the hyperparameters are those the full grid chose
  at ``--grid-up-to`` points. Run at 2,000 points it is the yardstick of
  "grid search + Platt on a 2,000-row subsample" (a dotted line in the figure);
* ``svgp``: GPJax's sparse variational GP classifier (``pip install gpjax``;
  RBF kernel, probit likelihood, ``--inducing`` k-means inducing inputs
  trained with the kernel, ``--svgp-steps`` Adam steps on mini-batches of 512).

Prints a table and writes ``benchmarks/results/large_n.json``; ``--figure``
draws time and memory against n on log-log axes with fitted slopes.

    python benchmarks/large_n.py                          # 1,000 ... 20,000 points, bayesvm and svc
    python benchmarks/large_n.py --arms svc --sizes 1000 2000
    python benchmarks/large_n.py --arms bayesvm svgp --sizes 1000 2000 5000 10000 20000 27000 \
        --figure docs/figures/large_n.png
    python benchmarks/large_n.py --quick                  # smoke run: 300 rows, the svc arm, 2 grid cells

On an accelerator (``--accelerator``; its own options, ``large_n.py --accelerator --help``): The package's code runs unchanged on a GPU (CI never has one). This script checks that it does and measures
what it buys, in one call sized for a short lease of a GPU machine (``--budget-s``: no part starts after it):

* ``sampler``: tempered SMC for ln N(D) (the product route over the n training inputs, a fixed budget of
  ``--runs`` runs x ``--particles`` particles x ``--moves`` elliptical slice moves per temperature) at an
  ordinary setting (RBF, C 1, k0 = k_b 10, length scale sqrt(10) on 10 standardised features), n from
  ``--sampler-sizes``, on the default device and, up to ``--cpu-up-to`` points, on the CPU of the same
  machine, with the same key (JAX's random numbers do not depend on the backend, so the two values differ
  only where rounding sends a slice move another way). Counted: temperatures (of the longest run), likelihood
  evaluations per move, and the floating-point work of the prior products (one (n x n) by (n x P) product per
  move, every run counted as long as the longest: an upper bound);
* ``estimator``: the default ln N(D) estimator (its budget grown until the runs agree, route prior /
  guided / EP, ``bayesvm.normalization.ep_started.annealed_with_ep_fallback`` with the evidence's defaults:
  the precision target and the moves that grow with n) on the default device, n from
  ``--estimator-sizes``: what a trusted ln N(D) costs there;
* ``solver``: ``solve_dual_batch`` over 16 hyperparameter points, ``vmap`` against ``map``
  (benchmarks/solver.py's batch, with 16 sequential libsvm fits beside it);
* ``fits``: ``BayesianSVC()`` fitted twice in one fresh process (the first fit compiles) on 400 rows of
  scikit-learn's breast cancer data, on the default device and on the CPU; then, where the adult data
  loads (extra ``large``), adult at ``--adult-sizes`` rows with the defaults, on the default device only.

Prints a table per part and writes JSON (``--out``). On a machine without an accelerator the default device
is the CPU and the two arms are the same.

    python benchmarks/large_n.py --accelerator          # writes benchmarks/results/accelerator.json
    python benchmarks/large_n.py --accelerator --quick  # smoke run: n = 200 per part, breast cancer fits only
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import multiprocessing as mp
import resource
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
from _common import RESULTS as RESULTS_DIR
from _common import (
    SVC_C,
    SVC_GAMMA,
    add_standard_arguments,
    binary_nll,
    environment,
    breast_cancer_split,
    grid_search_platt,
    jax_compilation_counter,
    synthetic_classification,
    timed,
    write_json,
)

RESULTS = RESULTS_DIR / "large_n.json"
TEST_SIZE = 5000
C_GRID, GAMMA_GRID = SVC_C, SVC_GAMMA


def _split(seed: int):
    from sklearn.model_selection import train_test_split

    from bayesvm.datasets import load_adult

    X, y = load_adult(return_X_y=True)
    X_pool, X_test, y_pool, y_test = train_test_split(X, y, test_size=TEST_SIZE, stratify=y, random_state=seed)
    return X_pool, y_pool, X_test, y_test


def _scores(y_test, p_positive, positive) -> dict:
    from sklearn.metrics import brier_score_loss, log_loss

    p = np.clip(p_positive, 1e-15, 1 - 1e-15)
    truth = (y_test == positive).astype(int)
    return {"error": float(np.mean((p >= 0.5) != truth)), "nll": float(log_loss(truth, p, labels=[0, 1])),
            "brier": float(brier_score_loss(truth, p))}


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _run_bayesvm(n: int, seed: int, options: dict) -> dict:
    from bayesvm import BayesianSVC

    X_pool, y_pool, X_test, y_test = _split(seed)
    X, y = X_pool[:n], y_pool[:n]
    started = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = BayesianSVC(random_state=seed, **options).fit(X, y)
        fit_s = time.perf_counter() - started
        p = model.predict_proba(X_test)[:, 1]
    total_s = time.perf_counter() - started
    work = model.selection_.summary_counts()
    return {"seconds": total_s, "fit_seconds": fit_s, "peak_mib": _peak_mib(),
            **_scores(y_test, p, model.classes_[1]),
            "C": model.C_, "amplitude": model.amplitude_, "length_scale": model.length_scale_,
            "offset": model.offset_, "log_evidence": model.log_evidence_, "log_evidence_se": model.log_evidence_se_,
            "trusted": bool(model.selection_.report.trusted), "work": work,
            "selection_rows": n if model.selection_rows_ is None else int(model.selection_rows_.size),
            "n_inducing": None if model.inducing_ is None else int(model.inducing_.shape[0]),
            "warnings": sorted({str(w.message)[:160] for w in caught}),
            "search_messages": list(model.selection_.search.messages) if model.selection_.method == "search" else []}


def _grid_cells(rng, cells: int):
    pairs = [(C, g) for C in C_GRID for g in GAMMA_GRID]
    return [pairs[i] for i in rng.choice(len(pairs), size=cells, replace=False)]


def _run_svc(n: int, seed: int, grid_up_to: int, cells: int) -> dict:
    from sklearn.model_selection import StratifiedKFold, cross_val_score
    from sklearn.svm import SVC

    X_pool, y_pool, X_test, y_test = _split(seed)
    X, y = X_pool[:n], y_pool[:n]
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    extrapolated = n > grid_up_to
    if not extrapolated:
        search, model, grid_s, platt_s = grid_search_platt(X, y, cv=folds, ensemble=False)
        best = search.best_params_
    else:
        timed_start = time.perf_counter()
        for C, gamma in _grid_cells(np.random.default_rng(seed), cells):
            cross_val_score(SVC(kernel="rbf", C=C, gamma=gamma), X, y, cv=folds, n_jobs=1)
        grid_s = (time.perf_counter() - timed_start) * len(C_GRID) * len(GAMMA_GRID) / cells
        X_small, y_small = X_pool[:grid_up_to], y_pool[:grid_up_to]
        best = grid_search_platt(X_small, y_small, cv=folds, ensemble=False)[0].best_params_
        model, _, platt_s = grid_search_platt(X, y, cv=folds, ensemble=False, best=best)[1:]
    p = model.predict_proba(X_test)[:, list(model.classes_).index(np.max(model.classes_))]
    return {"seconds": grid_s + platt_s, "grid_seconds": grid_s, "platt_seconds": platt_s, "peak_mib": _peak_mib(),
            "extrapolated": extrapolated, "C": float(best["C"]), "gamma": float(best["gamma"]),
            **_scores(y_test, p, np.max(model.classes_))}


def _run_svgp(n: int, seed: int, m: int, steps: int) -> dict:
    """GPJax's sparse variational GP classifier (Hensman, Matthews & Ghahramani 2015): whitened q(u) over m
    k-means inducing inputs (trained with the kernel), RBF kernel, probit likelihood, Adam on mini-batches of 512."""
    try:
        import gpjax as gpx
    except ImportError:
        return {"error": "gpjax is not installed (pip install gpjax)"}
    import jax
    import jax.numpy as jnp
    import optax
    from sklearn.cluster import KMeans

    X_pool, y_pool, X_test, y_test = _split(seed)
    X, y = X_pool[:n], y_pool[:n]
    positive = np.max(y)
    started = time.perf_counter()
    with jax.enable_x64(True):
        data = gpx.Dataset(X=jnp.asarray(X), y=jnp.asarray((y == positive).astype(np.float64))[:, None])
        Z = KMeans(n_clusters=m, n_init=1, random_state=seed).fit(X).cluster_centers_
        kernel = gpx.kernels.RBF(lengthscale=float(np.sqrt(X.shape[1])), variance=1.0)
        prior = gpx.gps.Prior(mean_function=gpx.mean_functions.Constant(), kernel=kernel)
        posterior = prior * gpx.likelihoods.Bernoulli()
        q = gpx.variational_families.WhitenedVariationalGaussian(model=posterior, inducing_inputs=jnp.asarray(Z))
        q, _ = gpx.fit(model=q, objective=lambda model, batch: -gpx.objectives.elbo(model, batch), train_data=data,
                       optim=optax.adam(0.01), num_iters=steps, batch_size=min(512, n), key=jax.random.key(seed),
                       verbose=False)
        fit_s = time.perf_counter() - started
        p = np.concatenate([np.asarray(posterior.likelihood.predict(q.predict(jnp.asarray(X_test[i:i + 1000]))).probs)
                            for i in range(0, len(X_test), 1000)])
    return {"seconds": time.perf_counter() - started, "fit_seconds": fit_s, "peak_mib": _peak_mib(),
            "m": m, "steps": steps, **_scores(y_test, p, positive)}


def _child(queue, function, args):
    try:
        queue.put(function(*args))
    except Exception as error:  # reported in the table, not a crash of the whole benchmark
        queue.put({"error": f"{type(error).__name__}: {error}"})


def in_fresh_process(function, *args, timeout: float) -> dict:
    """function(*args) in a new process (cold JAX, its own peak memory); {'timeout': ...} past ``timeout`` seconds."""
    context = mp.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_child, args=(queue, function, args))
    process.start()
    process.join(timeout)
    if process.is_alive():
        process.kill()
        return {"timeout": timeout}
    return queue.get() if not queue.empty() else {"error": f"exit code {process.exitcode}"}


def fitted_slope(rows: list[dict], key: str) -> float | None:
    points = [(r["n"], r[key]) for r in rows if key in r]
    if len(points) < 2:
        return None
    n, v = np.log(np.array(points)).T
    return float(np.polyfit(n, v, 1)[0])


def draw(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for arm, rows in results["arms"].items():
        rows = [r for r in rows if "seconds" in r]
        if not rows:
            continue
        n = [r["n"] for r in rows]
        for ax, key, label in ((axes[0], "seconds", "wall time (s)"), (axes[1], "peak_mib", "peak memory (MiB)")):
            slope = fitted_slope(rows, key)
            style = "--" if any(r.get("extrapolated") for r in rows) and key == "seconds" else "-"
            ax.loglog(n, [r[key] for r in rows], style + "o", label=f"{arm} (slope {slope:.2f})" if slope else arm)
            ax.set_xlabel("training points n")
            ax.set_ylabel(label)
    anchor = [r for r in results["arms"].get("svc", []) if "seconds" in r and not r.get("extrapolated")]
    if anchor:  # the yardstick: grid search + Platt on a subsample of the largest size it ran at in full
        largest = max(anchor, key=lambda r: r["n"])
        axes[0].axhline(largest["seconds"], color="grey", linestyle=":",
                        label=f"grid search + Platt on {largest['n']:,} rows")
    for ax in axes:
        ax.legend(fontsize=8)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_title("selection + fit + test predictions")
    axes[1].set_title("peak resident memory of the process")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if "--accelerator" in argv:
        argv.remove("--accelerator")
        return accelerator_main(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 5000, 10000, 20000])
    parser.add_argument("--inducing", type=int, default=200)
    parser.add_argument("--full-up-to", type=int, default=2000)
    parser.add_argument("--every-row-up-to", type=int, default=2000)
    parser.add_argument("--grid-up-to", type=int, default=2000)
    parser.add_argument("--cells", type=int, default=6, help="grid cells timed above --grid-up-to")
    parser.add_argument("--arms", nargs="+", default=["bayesvm", "svc"])
    parser.add_argument("--svgp-steps", type=int, default=2000, help="Adam steps of the svgp arm")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per arm and size")
    parser.add_argument("--figure")
    parser.add_argument("--accelerator", action="store_true",
                        help="run the accelerator's parts instead (their options: --accelerator --help)")
    add_standard_arguments(parser, out=RESULTS, seed=0, quick="smoke run: 300 rows, the svc arm, 2 grid cells")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.arms, args.grid_up_to, args.cells = [300], ["svc"], 200, 2
    output = Path(args.out)
    results = json.loads(output.read_text()) if output.exists() else {"arms": {}}
    results["settings"] = {k: v for k, v in vars(args).items() if k not in ("figure", "out")}
    runs = {"bayesvm": lambda n: (_run_bayesvm, n, args.seed, {}),
            "bayesvm-lowrank": lambda n: (_run_bayesvm, n, args.seed,
                                          {"n_inducing": args.inducing, "selection_size": None}),
            "bayesvm-full": lambda n: (_run_bayesvm, n, args.seed, {"n_inducing": None, "selection_size": None}),
            "svc": lambda n: (_run_svc, n, args.seed, args.grid_up_to, args.cells),
            "svgp": lambda n: (_run_svgp, n, args.seed, args.inducing, args.svgp_steps)}
    print(f"{'arm':<15} {'n':>6} {'seconds':>9} {'MiB':>7} {'error':>6} {'NLL':>6} {'Brier':>6}  notes", flush=True)
    for n in args.sizes:
        for arm in args.arms:
            if arm == "bayesvm-full" and n > args.full_up_to or arm == "bayesvm-lowrank" and n > args.every_row_up_to:
                continue
            function, *call = runs[arm](n)
            row = {"n": n, **in_fresh_process(function, *call, timeout=args.timeout)}
            rows = [r for r in results["arms"].get(arm, []) if r["n"] != n] + [row]
            results["arms"][arm] = sorted(rows, key=lambda r: r["n"])
            write_json(output, results)
            if "seconds" in row:
                note = "grid time extrapolated" if row.get("extrapolated") else ""
                if arm.startswith("bayesvm"):
                    note = (f"C={row['C']:.3g} k0={row['amplitude']:.3g} l={row['length_scale']:.3g} "
                            f"selected on {row['selection_rows']} rows, m={row['n_inducing']}"
                            + ("" if row["trusted"] else " UNTRUSTED"))
                print(f"{arm:<15} {n:>6} {row['seconds']:>9.1f} {row['peak_mib']:>7.0f} {row['error']:>6.3f} "
                      f"{row['nll']:>6.3f} {row['brier']:>6.3f}  {note}", flush=True)
            else:
                print(f"{arm:<15} {n:>6}  {row}", flush=True)
    for arm, rows in results["arms"].items():
        print(f"slopes {arm}: time {fitted_slope(rows, 'seconds')}, memory {fitted_slope(rows, 'peak_mib')}")
    if args.figure:
        draw(results, args.figure)
    return 0


# ---------------------------------------------------------------------------
# on an accelerator (--accelerator)

ACCELERATOR_RESULTS = RESULTS_DIR / "accelerator.json"
ACCELERATOR_PARTS = ("sampler", "estimator", "solver", "fits")
SETTING = {"C": 1.0, "amplitude": 10.0, "offset": 10.0, "length_scale": math.sqrt(10.0)}


@functools.lru_cache
def _problem(n: int):
    """The sampler's problem: the prior's square-root factor at SETTING on n points of benchmarks/solver.py's data
    (10 standardised features, _common.synthetic_classification); factored once per n for every part."""
    from bayesvm import RBF
    from bayesvm._precision import float64_scope
    from bayesvm.kernels import gram_matrix
    from bayesvm.normalization.annealing import prior_factor

    X, _ = synthetic_classification(n)
    kernel = RBF(length_scale=SETTING["length_scale"], amplitude=SETTING["amplitude"], offset=SETTING["offset"])
    with float64_scope():
        return np.asarray(prior_factor(gram_matrix(kernel, X.astype(np.float64))))


def _timed(function):
    return timed(function)


def sampler(sizes, cpu_up_to: int, particles: int, runs: int, moves: int) -> list[dict]:
    import jax

    from bayesvm._precision import float64_scope
    from bayesvm.normalization.annealing import annealed_log_expectation, product_route_log_likelihood

    devices = {"default": jax.devices()[0], "cpu": jax.devices("cpu")[0]}
    rows = []
    for n in sizes:
        chol = _problem(n)
        values = {}
        for arm, device in devices.items():
            if arm == "cpu" and (n > cpu_up_to or devices["default"].platform == "cpu"):
                continue
            with jax.default_device(device), float64_scope():
                factor = jax.device_put(chol, device)

                def run():
                    return annealed_log_expectation(factor, product_route_log_likelihood, args=(SETTING["C"],),
                                                    key=1, n_particles=particles, n_runs=runs,
                                                    n_mcmc_steps=moves)

                _, first_s = _timed(run)
                result, warm_s = _timed(run)
            values[arm] = result.value
            products = runs * particles * moves * result.n_temperatures
            rows.append({"n": n, "arm": arm, "device": str(device), "first_s": first_s, "warm_s": warm_s,
                         "value": result.value, "se": result.se, "runs_agree": bool(result.runs_agree),
                         "temperatures": int(result.n_temperatures),
                         "evaluations_per_move": float(result.mean_slice_evaluations),
                         "prior_product_gflop": 2.0 * n * n * products / 1e9,
                         "gflop_per_s": 2.0 * n * n * products / 1e9 / warm_s})
            print(_sampler_line(rows[-1]), flush=True)
        if len(values) == 2:
            rows[-1]["difference_from_default"] = values["cpu"] - values["default"]
    return rows


def _sampler_line(row: dict) -> str:
    return (f"n {row['n']:>5}  {row['arm']:<8} first {row['first_s']:7.2f} s  warm {row['warm_s']:7.2f} s  "
            f"ln Z {row['value']:9.2f} +- {row['se']:.2f}  T {row['temperatures']:>3}  "
            f"evals/move {row['evaluations_per_move']:4.1f}  {row['gflop_per_s']:8.1f} GFLOP/s in the products")


def estimator(sizes) -> list[dict]:
    import jax

    from bayesvm._precision import float64_scope
    from bayesvm.normalization.budget import default_moves, target_standard_error
    from bayesvm.normalization.ep_started import annealed_with_ep_fallback

    rows = []
    for n in sizes:
        chol = _problem(n)
        with float64_scope():
            factor = jax.device_put(chol)
            estimate, seconds = _timed(lambda: annealed_with_ep_fallback(
                factor, SETTING["C"], key=1, max_se=target_standard_error(n), n_mcmc_steps=default_moves(n)))
        result = estimate.result
        rows.append({"n": n, "device": str(jax.devices()[0]), "seconds_with_compilation": seconds,
                     "route": estimate.route, "value": result.value, "se": result.se,
                     "runs_agree": bool(result.runs_agree), "runs": int(result.n_runs),
                     "particles": int(result.n_particles), "moves": int(result.n_mcmc_steps),
                     "temperatures": int(result.n_temperatures)})
        print(f"n {n:>5}  {rows[-1]['seconds_with_compilation']:7.1f} s  route {estimate.route:<7} "
              f"ln N(D) {result.value:9.2f} +- {result.se:.2f}  agree {result.runs_agree}  "
              f"{result.n_runs} x {result.n_particles} particles x {result.n_mcmc_steps} moves", flush=True)
    return rows


def solver(sizes, repeats: int) -> list[dict]:
    from solver import batch

    return batch(sizes, repeats)


def _two_fits(n_train: int) -> dict:
    """In a fresh process: ``BayesianSVC()`` on n_train breast-cancer rows twice (cold, then warm)."""
    import jax

    counts = jax_compilation_counter()
    import bayesvm

    X_train, X_test, y_train, y_test = breast_cancer_split(n_train, 0)
    record = {"device": str(jax.devices()[0])}
    for label in ("cold", "warm"):
        start, programs = time.perf_counter(), counts["compilations"]
        model = bayesvm.BayesianSVC().fit(X_train, y_train)
        record[f"{label}_fit_s"] = time.perf_counter() - start
        record[f"{label}_programs"] = counts["compilations"] - programs
    record.update(nll=binary_nll(model, X_test, y_test), log_evidence=model.log_evidence_,
                  trusted=bool(model.selection_.report.trusted), work=model.selection_.summary_counts())
    return record


def _on(platform: str | None, function, *args, timeout: float) -> dict:
    """function(*args) in a fresh process whose JAX uses ``platform`` (None: the default)."""
    saved = os.environ.get("JAX_PLATFORMS")
    if platform is not None:
        os.environ["JAX_PLATFORMS"] = platform
    try:
        return in_fresh_process(function, *args, timeout=timeout)
    finally:
        if saved is None:
            os.environ.pop("JAX_PLATFORMS", None)
        else:
            os.environ["JAX_PLATFORMS"] = saved


def fits(adult_sizes, deadline: float) -> list[dict]:
    rows = []
    for platform in (None, "cpu"):
        record = _on(platform, _two_fits, 400, timeout=max(1.0, deadline - time.perf_counter()))
        rows.append({"data": "breast cancer", "n": 400, "arm": platform or "default", **record})
        print(rows[-1], flush=True)
    for n in adult_sizes:
        if time.perf_counter() > deadline:
            break
        record = _on(None, _run_bayesvm, n, 0, {}, timeout=max(1.0, deadline - time.perf_counter()))
        rows.append({"data": "adult", "n": n, "arm": "default", **record})
        print({k: rows[-1].get(k) for k in ("n", "seconds", "nll", "log_evidence", "trusted", "work", "error",
                                            "timeout")}, flush=True)
    return rows


def accelerator_main(argv=None) -> int:
    """``--accelerator``: the accelerator's parts (module docstring, "On an accelerator")."""
    parser = argparse.ArgumentParser(prog="large_n.py --accelerator", description="On an accelerator: the "
                                     "batched sampler, the batched solver and whole fits, beside the CPU")
    parser.add_argument("--parts", nargs="+", default=list(ACCELERATOR_PARTS), choices=ACCELERATOR_PARTS)
    parser.add_argument("--sampler-sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    parser.add_argument("--cpu-up-to", type=int, default=1000, help="largest n the sampler also runs on the CPU")
    parser.add_argument("--particles", type=int, default=128)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--estimator-sizes", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--solver-sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--adult-sizes", type=int, nargs="*", default=[20000, 1000])
    parser.add_argument("--budget-s", type=float, default=3600.0, help="no part starts after this many seconds")
    add_standard_arguments(parser, out=ACCELERATOR_RESULTS, seed=None,
                           quick="smoke run: n = 200 for the sampler, the estimator and the solver; "
                                 "the breast cancer fits, no adult")
    args = parser.parse_args(argv)
    if args.quick:
        args.sampler_sizes, args.cpu_up_to, args.estimator_sizes, args.solver_sizes, args.adult_sizes = (
            [200], 200, [200], [200], [])
        args.particles, args.runs, args.moves = 32, 4, 2

    start = time.perf_counter()
    deadline = start + args.budget_s
    results = {"environment": environment(),
               "arguments": {k: str(v) for k, v in vars(args).items()}}
    print(results["environment"], flush=True)
    parts = {"sampler": lambda: sampler(args.sampler_sizes, args.cpu_up_to, args.particles, args.runs, args.moves),
             "estimator": lambda: estimator(args.estimator_sizes),
             "solver": lambda: solver(args.solver_sizes, repeats=2),
             "fits": lambda: fits(args.adult_sizes, deadline)}
    for name in args.parts:
        if time.perf_counter() > deadline:
            results[name] = {"skipped": "past --budget-s"}
            continue
        print(f"--- {name}", flush=True)
        try:
            results[name] = parts[name]()
        except Exception:  # one part's failure is reported, the others still run
            results[name] = {"error": traceback.format_exc()}
            print(results[name]["error"], flush=True)
        results[f"{name}_s"] = time.perf_counter() - start
        write_json(args.out, results)
    print(f"written {args.out} after {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

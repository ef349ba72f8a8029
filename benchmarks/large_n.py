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
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "large_n.json"
TEST_SIZE = 5000
C_GRID = np.logspace(-2, 3, 11)
GAMMA_GRID = np.logspace(-4, 1, 11)


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
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.model_selection import GridSearchCV, StratifiedKFold, cross_val_score
    from sklearn.svm import SVC

    X_pool, y_pool, X_test, y_test = _split(seed)
    X, y = X_pool[:n], y_pool[:n]
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=seed)
    started = time.perf_counter()
    extrapolated = n > grid_up_to
    if not extrapolated:
        search = GridSearchCV(SVC(kernel="rbf"), {"C": C_GRID, "gamma": GAMMA_GRID}, cv=folds, n_jobs=1)
        search.fit(X, y)
        best = search.best_params_
        grid_s = time.perf_counter() - started
    else:
        timed = time.perf_counter()
        for C, gamma in _grid_cells(np.random.default_rng(seed), cells):
            cross_val_score(SVC(kernel="rbf", C=C, gamma=gamma), X, y, cv=folds, n_jobs=1)
        grid_s = (time.perf_counter() - timed) * len(C_GRID) * len(GAMMA_GRID) / cells
        X_small, y_small = X_pool[:grid_up_to], y_pool[:grid_up_to]
        search = GridSearchCV(SVC(kernel="rbf"), {"C": C_GRID, "gamma": GAMMA_GRID}, cv=folds, n_jobs=1)
        best = search.fit(X_small, y_small).best_params_
    fitted = time.perf_counter()
    model = CalibratedClassifierCV(SVC(kernel="rbf", **best), method="sigmoid", ensemble=False, cv=folds).fit(X, y)
    platt_s = time.perf_counter() - fitted
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
    if anchor:  # the issue's yardstick: grid search + Platt on a subsample of the largest size it ran at in full
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
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--figure")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)
    output = Path(args.output)
    results = json.loads(output.read_text()) if output.exists() else {"arms": {}}
    results["settings"] = {k: v for k, v in vars(args).items() if k not in ("figure", "output")}
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
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(json.dumps(results, indent=1))
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


if __name__ == "__main__":
    sys.exit(main())

"""On an accelerator: the batched sampler, the batched solver and whole fits, beside the same machine's CPU.

The package's code runs unchanged on a GPU (CI never has one). This script checks that it does and measures
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

    python benchmarks/accelerator.py --out benchmarks/results/accelerator.json
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from large_n import _run_bayesvm, in_fresh_process  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results" / "accelerator.json"
PARTS = ("sampler", "estimator", "solver", "fits")
SETTING = {"C": 1.0, "amplitude": 10.0, "offset": 10.0, "length_scale": math.sqrt(10.0)}


@functools.lru_cache
def _problem(n: int):
    """The sampler's problem: the prior's square-root factor at SETTING on n points of benchmarks/solver.py's data
    (10 standardised features); factored once per n for every part."""
    from solver import data

    from bayesvm import RBF
    from bayesvm._precision import float64_scope
    from bayesvm.kernels import gram_matrix
    from bayesvm.normalization.annealing import prior_factor

    X, _ = data(n)
    kernel = RBF(length_scale=SETTING["length_scale"], amplitude=SETTING["amplitude"], offset=SETTING["offset"])
    with float64_scope():
        return np.asarray(prior_factor(gram_matrix(kernel, X.astype(np.float64))))


def _timed(function):
    import jax

    start = time.perf_counter()
    result = jax.block_until_ready(function())
    return result, time.perf_counter() - start


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

    from cold_start import _jax_counter, _nll, _training_split

    counts = _jax_counter()
    import bayesvm

    X_train, X_test, y_train, y_test = _training_split(n_train, 0)
    record = {"device": str(jax.devices()[0])}
    for label in ("cold", "warm"):
        start, programs = time.perf_counter(), counts["compilations"]
        model = bayesvm.BayesianSVC().fit(X_train, y_train)
        record[f"{label}_fit_s"] = time.perf_counter() - start
        record[f"{label}_programs"] = counts["compilations"] - programs
    record.update(nll=_nll(model, X_test, y_test), log_evidence=model.log_evidence_,
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--sampler-sizes", type=int, nargs="+", default=[500, 1000, 2000, 5000])
    parser.add_argument("--cpu-up-to", type=int, default=1000, help="largest n the sampler also runs on the CPU")
    parser.add_argument("--particles", type=int, default=128)
    parser.add_argument("--runs", type=int, default=8)
    parser.add_argument("--moves", type=int, default=5)
    parser.add_argument("--estimator-sizes", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--solver-sizes", type=int, nargs="+", default=[1000])
    parser.add_argument("--adult-sizes", type=int, nargs="*", default=[20000, 1000])
    parser.add_argument("--budget-s", type=float, default=3600.0, help="no part starts after this many seconds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    import jax

    start = time.perf_counter()
    deadline = start + args.budget_s
    results = {"environment": {"jax": jax.__version__, "backend": jax.default_backend(),
                               "devices": [str(d) for d in jax.devices()], "cpu_count": os.cpu_count()},
               "arguments": {k: str(v) for k, v in vars(args).items()}}
    print(results["environment"], flush=True)
    parts = {"sampler": lambda: sampler(args.sampler_sizes, args.cpu_up_to, args.particles, args.runs, args.moves),
             "estimator": lambda: estimator(args.estimator_sizes),
             "solver": lambda: solver(args.solver_sizes, repeats=2),
             "fits": lambda: fits(args.adult_sizes, deadline)}
    args.out.parent.mkdir(parents=True, exist_ok=True)
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
        args.out.write_text(json.dumps(results, indent=1, default=str))
    print(f"written {args.out} after {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""ln N(D)'s integrand inside tempered SMC: the package's ln nu against the same function written with jnp.logaddexp.

Every slice step of tempered SMC evaluates L(theta) = sum_i ln nu(theta_i) on every particle; with the prior's
draw (one matrix product per move) it is the whole of a round's work. ``bayesvm.model.log_nu`` takes the larger
exponent out by hand (one exp and one log1p per entry); the form it replaced called ``jnp.logaddexp`` on the two
exponents. This benchmark runs the same tempered-SMC rounds (same key, same sampler settings, the adaptive
schedule) with each, alternating, in one process, at one point on a real problem, and reports the median seconds
per round, the temperatures and slice evaluations (the work, which should match), and the values (which should
agree to rounding). It also times one evaluation of each integrand on 2,048 particles, and of the low-rank prior's
smoothed integrand (``log_nu_smoothed``, unchanged) for scale.

Run: python benchmarks/integrand_speed.py [--dataset pima --n 500 --repeats 5]
(prints a table, writes benchmarks/results/integrand_speed.json).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from bayesvm._precision import float64_scope
from bayesvm.datasets import load_dataset
from bayesvm.kernels import RBF
from bayesvm.model import hinge, log_kappa
from bayesvm.normalization.annealing import annealed_log_expectation, prior_factor, product_route_log_likelihood
from bayesvm.normalization.low_rank import log_nu_smoothed
from solver import median_time

RESULTS = Path(__file__).resolve().parent / "results" / "integrand_speed.json"
#: a point the selection benchmark's search chose on pima at 400 rows (median over 3 splits)
POINT = {"C": 0.678, "amplitude": 45.0, "offset": 45.3, "length_scale": 6.03}


def logaddexp_log_likelihood(theta, C, mask=None):
    """L(theta) = sum_i ln nu(theta_i) with ln nu = ln kappa(C) + jnp.logaddexp(-C l(theta), -C l(-theta))."""
    terms = log_kappa(C) + jnp.logaddexp(-C * hinge(theta), -C * hinge(-theta))
    return jnp.sum(terms if mask is None else mask * terms)


INTEGRANDS = {"log_nu (package)": product_route_log_likelihood, "jnp.logaddexp": logaddexp_log_likelihood}


def element_timings(repeats: int) -> dict:
    """Seconds per evaluation of each integrand on 2,048 particles x 512 entries (median)."""
    theta = 3.0 * jax.random.normal(jax.random.PRNGKey(0), (2048, 512), jnp.float64)
    d = 0.3 * jnp.abs(jax.random.normal(jax.random.PRNGKey(1), (512,), jnp.float64))
    C = POINT["C"]
    calls = {name: jax.jit(jax.vmap(lambda row, f=f: f(row, C))) for name, f in INTEGRANDS.items()}
    calls["log_nu_smoothed (low-rank, unchanged)"] = jax.jit(lambda t: jnp.sum(log_nu_smoothed(t, d, C), -1))
    seconds = {}
    for name, f in calls.items():
        f(theta).block_until_ready()  # compile and warm
        seconds[name] = median_time(lambda f=f: f(theta).block_until_ready(), repeats * 4)
    return seconds


def round_timings(X: np.ndarray, repeats: int, moves: tuple[int, ...]) -> list[dict]:
    """One tempered-SMC round (16 runs x 128 particles) per integrand and number of moves, alternating."""
    kernel = RBF(length_scale=POINT["length_scale"], amplitude=POINT["amplitude"], offset=POINT["offset"])
    chol = prior_factor(np.asarray(kernel(X)))
    rows = []
    for n_moves in moves:
        results, times = {}, {name: [] for name in INTEGRANDS}
        for name, integrand in INTEGRANDS.items():  # compile and warm
            results[name] = annealed_log_expectation(chol, integrand, args=(POINT["C"],), key=0, n_particles=128,
                                                     n_runs=16, n_mcmc_steps=n_moves)
        for _ in range(repeats):
            for name, integrand in INTEGRANDS.items():
                started = time.perf_counter()
                annealed_log_expectation(chol, integrand, args=(POINT["C"],), key=0, n_particles=128, n_runs=16,
                                         n_mcmc_steps=n_moves).value
                times[name].append(time.perf_counter() - started)
        for name in INTEGRANDS:
            result = results[name]
            rows.append({"moves": n_moves, "integrand": name, "median_s": float(np.median(times[name])),
                         "seconds": times[name], "value": result.value, "se": result.se,
                         "temperatures": int(result.n_temperatures), "slice_evals": float(result.mean_slice_evaluations)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="pima")
    parser.add_argument("--n", type=int, default=500, help="training rows (the first n of a fixed shuffle)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--moves", type=int, nargs="+", default=[3, 10])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    X, _ = load_dataset(args.dataset, return_X_y=True)
    X = X[np.random.default_rng(0).permutation(len(X))[: args.n]]
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a single round's runs may disagree: the work is timed
        elements = element_timings(args.repeats)
        rounds = round_timings(X, args.repeats, tuple(args.moves))
    print(f"one evaluation on 2,048 particles x 512 entries ({args.repeats * 4} repeats, median)")
    for name, seconds in elements.items():
        print(f"  {name:40s} {1e3 * seconds:7.2f} ms")
    print(f"\none tempered-SMC round, {args.dataset} {len(X)} rows, {POINT}, 16 runs x 128 particles "
          f"({args.repeats} repeats each, alternating)")
    print("| moves | integrand | median s | ratio | temperatures | slice evals / move | ln N(D) |")
    print("|---|---|---|---|---|---|---|")
    for row in rounds:
        base = next(r for r in rounds if r["moves"] == row["moves"] and r["integrand"] == "jnp.logaddexp")
        print(f"| {row['moves']} | {row['integrand']} | {row['median_s']:.2f} | {base['median_s'] / row['median_s']:.2f}x "
              f"| {row['temperatures']} | {row['slice_evals']:.2f} | {row['value']:.3f} +- {row['se']:.3f} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"config": {**vars(args), "out": str(args.out), "point": POINT},
                                    "evaluation_s": elements, "rounds": rounds}, indent=1))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()

"""The common direction by quadrature at the agreement map's corner points: the inner integral from the prior
against from EP's Gaussian, and the whole quadrature.

At each named point (a data set's map subsample and the map's coordinates x = ln C, ln k0, ln k_b/k0, ln length
scale): at the point's few values of s near its peak (``POINTS``), each tempered-SMC run's ln h(s) = ln E_r[prod_i nu(s + r_i)] started from the
prior of r and from EP's Gaussian with the nu sites shifted by s
(:func:`bayesvm.normalization.common_direction.inner_log_z_runs`), with the default's first-round budget (16 runs x
128 particles x ``default_moves(n)``); then, unless ``--inner-only``, the quadrature itself
(:func:`bayesvm.normalization.common_direction.quadrature_log_normalization`) for each of ``--seeds``. Prints a
table and writes benchmarks/results/common_direction.json (documentation: normalisation, "twenty-second session").

Run: python benchmarks/common_direction.py [--points pima_c7 breast_cancer_c10] [--seeds 1 2]
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from agreement_map import subsample
from bayesvm import _linalg
from bayesvm._precision import float64_scope
from bayesvm.hyperparameters import kernel_hyperparameters_at
from bayesvm.kernels import RBF
from bayesvm.normalization.annealing import (annealed_log_expectation, mean_of_runs, padded, prior_factor,
                                             product_route_log_likelihood)
from bayesvm.normalization.budget import default_moves
from bayesvm.normalization.common_direction import common_direction, inner_log_z_runs, quadrature_log_normalization

RESULTS = Path(__file__).parent / "results" / "common_direction.json"

#: the corner points of the 400-row agreement map (set, rows, x) and points s near each one's peak
POINTS = {
    "breast_cancer_c10": ("breast_cancer", 400, [2.2983, -3.7685, -2.1808, 0.5109], [1.08, 1.11, 1.14]),
    "digits_3v8_c10": ("digits_3v8", 400, [2.2983, -3.7685, -2.1808, 1.0808], [1.09, 1.12, 1.15]),
    "pima_c7": ("pima", 400, [1.9528, -3.924, -4.2672, -0.0132], [0.74, 0.77, 0.80]),
    "pima_c293": ("pima", 400, [5.6791, -2.9006, -3.7864, -0.5104], [1.23]),
    "synth_test_c293": ("synth_test", 400, [5.6791, -2.9006, -3.7864, -1.8117], [1.19]),
}


def shifted_log_likelihood(r, s, C, mask):
    """ln prod_i nu(s + r_i) over the data entries (one function for every call: one compiled sampler)."""
    return product_route_log_likelihood(r + s * mask, C, mask)


def prior_started_log_z_runs(split, s: float, C: float, *, key, **options) -> np.ndarray:
    """The inner runs from the prior of r (tempered SMC over r = F z, no EP)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return annealed_log_expectation(split.factor, shifted_log_likelihood, args=(s, C, split.direction),
                                        key=key, **options).log_z_runs


def inner_row(split, s: float, C: float, moves: int, route: str) -> dict:
    sampler = inner_log_z_runs if route == "ep" else prior_started_log_z_runs
    started = time.perf_counter()
    runs = sampler(split, s, C, key=1, n_mcmc_steps=moves)
    value, se, ess = mean_of_runs(runs)
    return {"s": s, "route": route, "value": value, "se": se, "spread": float(np.std(runs)), "effective_runs": ess,
            "seconds": time.perf_counter() - started}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=list(POINTS), choices=list(POINTS))
    parser.add_argument("--seeds", nargs="+", type=int, default=[1])
    parser.add_argument("--inner-only", action="store_true")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = []
    for name in args.points:
        data_set, n, x, inner_s = POINTS[name]
        X, _ = subsample(data_set, n)
        template = RBF()
        kernel, C = template.replace(**kernel_hyperparameters_at(template, np.array(x))), float(np.exp(x[0]))
        moves = default_moves(X.shape[0])
        with float64_scope():
            chol, mask = padded(prior_factor(np.asarray(kernel(X))), _linalg.problem_size(X.shape[0]))
            split = common_direction(chol, mask)
            inner = [inner_row(split, s, C, moves, route) for s in inner_s for route in ("prior", "ep")]
            for r in inner:
                print(f"{name:>18} s={r['s']:.2f} from {r['route']:5}: ln h {r['value']:9.2f}, runs spread "
                      f"{r['spread']:.2f}, effective {r['effective_runs']:4.1f} of 16, {r['seconds']:5.1f} s",
                      flush=True)
            quadratures = []
            for seed in ([] if args.inner_only else args.seeds):
                started = time.perf_counter()
                q = quadrature_log_normalization(chol, C, mask, key=seed, n_mcmc_steps=moves)
                quadratures.append({"seed": seed, "value": q.value, "se": q.se, "effective_runs": q.ess,
                                    "rule_error": q.discretisation_error, "trusted": q.trusted, "abandoned": q.abandoned,
                                    "grid": [float(q.grid[0]), float(q.grid[-1])],
                                    "inner_evaluations": q.inner_evaluations,
                                    "seconds": time.perf_counter() - started})
                print(f"{name:>18} quadrature, seed {seed}: {q.value:9.2f} +- {q.se:.2f}, effective {q.ess:4.1f} of "
                      f"16, rule error {q.discretisation_error:.3f}, {'trusted' if q.trusted else 'UNTRUSTED'}, "
                      f"{quadratures[-1]['seconds']:5.0f} s", flush=True)
        rows.append({"point": name, "set": data_set, "n": int(X.shape[0]), "x": x, "C": C,
                     "sd_s": float(np.sqrt(split.variance)), "inner": inner, "quadratures": quadratures})
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps({"rows": rows}, indent=1))
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

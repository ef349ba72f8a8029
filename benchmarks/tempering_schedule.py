"""Tempered SMC for ln N(D) at fixed points: more temperatures against more slice moves per temperature.

The adaptive schedule picks each next temperature so that the incremental weights keep a fraction ``target_ess``
of the particles effective (0.5 by default). At the selections' answers that takes only 3-7 temperatures, so a
particle makes T x m slice moves in all (m per temperature). This compares, at each point, one round of 16 runs x
128 particles from the prior with:

* default: m = :func:`bayesvm.normalization.budget.default_moves` (n), target ESS 0.5 (the default's first round);
* ess0.9: the same moves, target ESS 0.9 (2.2-2.8 times the temperatures at these points);
* ess0.9_m/3: a third of the moves at target ESS 0.9 (about the default's work);
* reference: 4 m moves at target ESS 0.95, other seeds.

Each configuration runs twice (two keys). With ``--estimator`` it runs instead the whole default estimator of
ln N(D) (:class:`bayesvm.evidence.approximations.AnnealedNormalization`: its budget ladder, the guided rounds, the
EP-started fallback) as it is and with target ESS 0.9 in every round, key 0. Points: the answer of the moons fit
whose check fails (benchmarks/held_out_style.py) and the second start's end there, a hard and an easy pima point, a
hard synth point (pima and synth: 400 and all 250 rows, standardised, shuffled with seed 0).

Run: python benchmarks/tempering_schedule.py [--points moons_answer ...] [--estimator] [--output FILE]
(prints one line per run, writes benchmarks/results/tempering_schedule.json, or with ``--estimator`` the file given
by ``--output``). A run's seconds include compilation where its number of inputs or its target ESS (a static
argument of the sampler) is met for the first time.
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from held_out_style import CASES
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from bayesvm._precision import float64
from bayesvm.datasets import load_dataset
from bayesvm.evidence.approximations import AnnealedNormalization
from bayesvm.evidence.log_evidence import point_cells
from bayesvm.hyperparameters import kernel_hyperparameters_at
from bayesvm.kernels import gram_matrix, make_kernel
from bayesvm.normalization.annealing import annealed_log_expectation, prior_factor, product_route_log_likelihood
from bayesvm.normalization.budget import default_moves

RESULTS = Path(__file__).parent / "results" / "tempering_schedule.json"


def _moons_training_rows() -> np.ndarray:
    """The standardised training rows of held_out_style.py's moons case (420 of 600, split seed 0)."""
    X, y = CASES["moons600"]()
    X_train, _, _, _ = train_test_split(X, y, test_size=0.3, stratify=y, random_state=0)
    return StandardScaler().fit(X_train).transform(X_train)


def _shuffled_rows(name: str, n: int) -> np.ndarray:
    X, _ = load_dataset(name, return_X_y=True)
    return X[np.random.default_rng(0).permutation(len(X))[:n]]


#: name -> (training inputs, (C, k0, k_b / k0, length scale))
POINTS = {
    "moons_answer": (_moons_training_rows, (0.897, 117.465, 1.051, 1.274)),
    "moons_second_end": (_moons_training_rows, (0.931, 14.15, 0.645, 0.787)),
    "pima_hard": (lambda: _shuffled_rows("pima", 400), (0.68, 42.8, 0.895, 6.6)),
    "synth_hard": (lambda: _shuffled_rows("synth", 250), (0.3, 10.0, 1.0, 0.5)),
    "pima_easy": (lambda: _shuffled_rows("pima", 400), (1.0, 10.0, 1.0, 3.0)),
}


def _at_point(name: str):
    """The point's training inputs (float64), its RBF kernel and C."""
    inputs, point = POINTS[name]
    template = make_kernel("rbf")
    kernel = template.replace(**kernel_hyperparameters_at(template, np.log(point)))
    return jnp.asarray(inputs(), dtype=jnp.float64), kernel, point[0]


def configurations(n: int) -> list[tuple[str, int, float, tuple[int, int]]]:
    """(label, moves per temperature, target ESS, keys) at n training inputs."""
    m = default_moves(n)
    return [("default", m, 0.5, (0, 1)), ("ess0.9", m, 0.9, (0, 1)), ("ess0.9_m/3", math.ceil(m / 3), 0.9, (0, 1)),
            ("reference", 4 * m, 0.95, (2, 3))]


@float64
def study(name: str) -> list[dict]:
    X, kernel, C = _at_point(name)
    n = X.shape[0]
    chol = prior_factor(gram_matrix(kernel, X))
    rows = []
    for label, moves, target_ess, keys in configurations(n):
        for key in keys:
            started = time.perf_counter()
            with warnings.catch_warnings():  # disagreeing runs are reported in the row
                warnings.simplefilter("ignore", RuntimeWarning)
                result = annealed_log_expectation(chol, product_route_log_likelihood, args=(C, jnp.ones(n)),
                                                  key=key, n_particles=128, n_runs=16, n_mcmc_steps=moves,
                                                  target_ess=target_ess)
            rows.append({"point": name, "n": int(n),
                         "hyperparameters": dict(zip(("C", "k0", "kb_over_k0", "length_scale"), POINTS[name][1])),
                         "config": label, "moves": moves, "target_ess": target_ess, "key": key,
                         "value": result.value, "se": result.se, "spread": float(np.std(result.log_z_runs)),
                         "runs_agree": result.runs_agree, "temperatures": result.n_temperatures,
                         "seconds": time.perf_counter() - started})
            r = rows[-1]
            print(f"{name:<17} {n:>4} {label:<11} {moves:>4} {target_ess:>5} {key:>3} {r['value']:>8.2f} "
                  f"{r['se']:>5.2f} {r['spread']:>6.2f} {r['runs_agree']!s:>6} {r['temperatures']:>4} "
                  f"{r['seconds']:>7.1f}", flush=True)
    return rows


@float64
def estimator_study(name: str) -> list[dict]:
    """The default estimator of ln N(D) at the point, as it is and with target ESS 0.9 in every round."""
    X, kernel, C = _at_point(name)
    cells = point_cells(X, kernel, C, n=X.shape[0])
    rows = []
    for label, options in [("default estimator", {}), ("default estimator, ESS 0.9", {"target_ess": 0.9})]:
        started = time.perf_counter()
        with warnings.catch_warnings():  # an untrusted estimate is reported in the row
            warnings.simplefilter("ignore", RuntimeWarning)
            estimate = AnnealedNormalization(key=0, options=options)(cells).at(0)
        d = estimate.diagnostics
        rows.append({"point": name, "n": int(X.shape[0]), "config": label, "value": estimate.value, "se": estimate.se,
                     "trusted": bool(estimate.trusted), "runs": int(d["n_runs"]), "particles": int(d["n_particles"]),
                     "moves": int(d["n_mcmc_steps"]), "guided": bool(d["guided"]),
                     "seconds": time.perf_counter() - started})
        r = rows[-1]
        print(f"{name:<17} {r['n']:>4} {label:<27} {r['value']:>8.2f} {r['se']:>5.2f} {r['trusted']!s:>7} "
              f"{r['runs']}x{r['particles']}x{r['moves']:<4} {r['seconds']:>7.1f}", flush=True)
    return rows


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", nargs="+", default=list(POINTS), choices=list(POINTS))
    parser.add_argument("--estimator", action="store_true",
                        help="the whole default estimator, as it is and with target ESS 0.9, instead of single rounds")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.estimator:
        print(f"{'point':<17} {'n':>4} {'config':<27} {'ln N(D)':>8} {'se':>5} {'trusted':>7} {'budget':<11} "
              f"{'s':>7}", flush=True)
        rows = [row for name in args.points for row in estimator_study(name)]
    else:
        print(f"{'point':<17} {'n':>4} {'config':<11} {'m':>4} {'ess':>5} {'key':>3} {'ln N(D)':>8} {'se':>5} "
              f"{'spread':>6} {'agree':>6} {'T':>4} {'s':>7}", flush=True)
        rows = [row for name in args.points for row in study(name)]
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()

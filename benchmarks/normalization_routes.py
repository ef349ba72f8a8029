"""ln N(D) by tempered SMC from the prior against from EP's Gaussian, at ordinary settings, two seeds each.

On ``--n`` (default 560) standardised rows of Ripley's synth.te (the rebuilt
560-point case of the trusted-evidence issue), at every combination of C in
``--C``, k0 = k_b in ``--k0`` and length scale in ``--length-scales``:

* prior: :func:`bayesvm.log_normalization` with the prior start alone (its
  growing budget; ``annealed_until_runs_agree`` on the product route);
* guided: the prior start with slice moves round EP's Gaussian
  (:func:`bayesvm.normalization.ep_started.ep_slice_guide`) from the first round on, same budget, where EP
  converges;
* ep: :func:`bayesvm.normalization.ep_started.annealed_from_ep` with the same
  budget ladder and standard-error target;
* default: :func:`bayesvm.log_normalization` as it is (the prior start; moves round EP's Gaussian in the
  rounds after a first round that misses; EP's start where the runs still disagree at the cap).

Reported per setting and seed: value, standard error, whether the runs agree,
particle-runs and seconds. Agreement between seeds and routes is the check:
both routes are unbiased for N(D) run by run, so a clearly higher value with
agreeing runs is the better one.

    python benchmarks/normalization_routes.py [--n 560] [--seeds 0 1] [--C 0.3 1] [--k0 1 10 100]
        [--length-scales 0.5 3] [--out FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
import warnings
from pathlib import Path

import jax.numpy as jnp
import numpy as np
from sklearn.preprocessing import StandardScaler

from bayesvm import log_normalization
from bayesvm._precision import float64_scope
from bayesvm.datasets import load_synth
from bayesvm.kernels import RBF
from bayesvm.normalization.annealing import prior_factor, product_route_log_likelihood
from bayesvm.normalization.budget import annealed_until_runs_agree, target_standard_error
from bayesvm.normalization.ep_started import annealed_from_ep, ep_slice_guide, ep_weight_gaussian

RESULTS = Path(__file__).parent / "results" / "normalization_routes.json"


def _row(result, seconds: float) -> dict:
    return {"value": float(result.value), "se": float(result.se), "runs_agree": bool(result.runs_agree),
            "particle_runs": int(result.n_particles * result.n_runs), "seconds": round(seconds, 1)}


def measure(X: np.ndarray, C: float, k0: float, length_scale: float, seed: int) -> dict:
    kernel = RBF(amplitude=k0, offset=k0, length_scale=length_scale)
    n = X.shape[0]
    out = {}
    with warnings.catch_warnings(), float64_scope():
        warnings.simplefilter("ignore", RuntimeWarning)
        chol = prior_factor(jnp.asarray(kernel(X)))
        started = time.perf_counter()
        prior = annealed_until_runs_agree(chol, product_route_log_likelihood, args=(C,), key=seed,
                                          max_se=target_standard_error(n))
        out["prior"] = _row(prior, time.perf_counter() - started)
        started = time.perf_counter()
        start = ep_weight_gaussian(chol, C, jnp.ones(n))
        if bool(start.converged):  # prior-started, slice moves round EP's Gaussian
            guide, factor = ep_slice_guide(start, chol)
            guided = annealed_until_runs_agree(factor, product_route_log_likelihood, args=(C,), key=seed,
                                               max_se=target_standard_error(n), guide=guide)
            out["guided"] = _row(guided, time.perf_counter() - started)
        started = time.perf_counter()
        ep, _ = annealed_from_ep(chol, C, key=seed, max_se=target_standard_error(n))
        out["ep"] = _row(ep, time.perf_counter() - started)
        started = time.perf_counter()
        default = log_normalization(kernel=kernel, C=C, n=n, inputs=X, random_state=seed)
        out["default"] = {"value": float(default.value), "se": float(default.se), "runs_agree": bool(default.trusted),
                          "ep_started": bool(default.diagnostics["ep_started"]),
                          "guided": bool(default.diagnostics["guided"]),
                          "seconds": round(time.perf_counter() - started, 1)}
    return out


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=560)
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--C", nargs="+", type=float, default=[0.3, 1.0])
    parser.add_argument("--k0", nargs="+", type=float, default=[1.0, 10.0, 100.0])
    parser.add_argument("--length-scales", nargs="+", type=float, default=[0.5, 3.0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    data = load_synth("test")
    index = np.sort(np.random.default_rng(0).choice(data.X.shape[0], size=min(args.n, data.X.shape[0]),
                                                    replace=False))
    X = StandardScaler().fit_transform(data.X[index])
    rows = []
    print(f"{'C':>5} {'k0':>6} {'l':>5} {'seed':>4} | {'prior':>22} | {'guided':>22} | {'ep':>22} | {'default':>22}")
    for C, k0, length_scale in itertools.product(args.C, args.k0, args.length_scales):
        for seed in args.seeds:
            row = {"C": C, "k0": k0, "length_scale": length_scale, "seed": seed,
                   **measure(X, C, k0, length_scale, seed)}
            rows.append(row)
            cells = [f"{row[k]['value']:8.2f} +- {row[k]['se']:.2f} {'ok' if row[k]['runs_agree'] else '!!'} "
                     f"{row[k]['seconds']:5.0f}s" if k in row else f"{'EP did not converge':>22}"
                     for k in ("prior", "guided", "ep", "default")]
            print(f"{C:5g} {k0:6g} {length_scale:5g} {seed:4d} | " + " | ".join(cells), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"n": int(X.shape[0]), "rows": rows}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()

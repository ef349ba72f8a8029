"""Independent references for ln N(D): long annealed importance sampling in NumPy, sharing no code with bayesvm.

ln N(D) = ln E_{theta ~ N(0, K)}[prod_i nu(theta_i)], nu(t) = kappa(C) [e^{-C max(0, 1 - t)} + e^{-C max(0, 1 + t)}],
kappa(C) = 1 / (1 + e^{-2C}), K = k0 exp(-|x - x'|^2 / (2 l^2)) + k_b (the RBF kernel with an offset). The estimator
here is annealed importance sampling (Neal 2001): P independent chains, no resampling, a fixed schedule of T
temperatures beta_t = (t / T)^4 (dense near the prior, where the tempered targets change fastest), one elliptical
slice move (Murray, Adams & MacKay 2010) per temperature; each chain's weight is unbiased for N(D), the estimate is
ln of their mean and its standard error the delta method's. Two replicas with other seeds must agree within their
errors. Everything is written here with NumPy and SciPy alone (the kernel, nu, the factor, the sampler), so the
references can find what bayesvm's tempered SMC gets wrong.

The points: 560 stratified rows of Ripley's synth.te (the rows of ``benchmarks/fit_cost.py --log-evidence``), C 1
and 0.3 at the amplitudes and length scales where short runs disagreed, k_b = k0. Usage::

    python benchmarks/reference_normalization.py                 # T = 20,000, P = 128, two replicas per point
    python benchmarks/reference_normalization.py --quick         # T = 2,000: a smoke run
    python benchmarks/reference_normalization.py --compare       # bayesvm's default estimate beside each reference

Writes benchmarks/results/reference_normalization.json (``--out``), which tests/test_reference_normalization.py
reads; ``--compare`` adds to it, per point, ``bayesvm.log_evidence``'s ln N(D) (the default tempered SMC at its
fixed budget) for two seeds, its standard error and whether it calls itself trusted.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import logsumexp

from _common import RESULTS, add_standard_arguments, markdown_table, provenance, write_json

#: (C, k0 = k_b, RBF length scale): C = 1 where short runs disagreed or lay low, C = 0.3 where they agreed
POINTS = ((1.0, 100.0, 3.0), (1.0, 10.0, 1.76), (1.0, 10.0, 1.0), (1.0, 1.0, 1.0), (0.3, 10.0, 1.0),
          (0.3, 100.0, 0.5))
ROWS = 560


def synth_rows(n: int = ROWS) -> tuple[np.ndarray, np.ndarray]:
    """The stratified n rows of synth.te that benchmarks/fit_cost.py --log-evidence uses."""
    from sklearn.model_selection import train_test_split

    from bayesvm.datasets import load_dataset  # the data only; no estimator code

    X, y = load_dataset("synth_test", return_X_y=True)
    X, _, y, _ = train_test_split(X, y, train_size=n, stratify=y, random_state=0)
    return np.asarray(X, dtype=np.float64), np.asarray(y)


def rbf_gram(X: np.ndarray, k0: float, length_scale: float, offset: float) -> np.ndarray:
    differences = X[:, None, :] - X[None, :, :]
    return k0 * np.exp(-0.5 * np.sum(differences**2, axis=-1) / length_scale**2) + offset


def square_root(K: np.ndarray) -> np.ndarray:
    """S with S S^T = K (symmetric eigen-factor, negative rounding clipped): exact for singular K too."""
    values, vectors = np.linalg.eigh(0.5 * (K + K.T))
    return vectors * np.sqrt(np.clip(values, 0.0, None))


def log_nu_sum(theta: np.ndarray, C: float) -> np.ndarray:
    """sum_i ln nu(theta_i) for each row of theta (P, M)."""
    log_kappa = -np.log1p(np.exp(-2.0 * C))
    terms = np.logaddexp(-C * np.maximum(0.0, 1.0 - theta), -C * np.maximum(0.0, 1.0 + theta))
    return np.sum(terms, axis=-1) + theta.shape[-1] * log_kappa


def slice_move(rng, theta, ll, beta, S, C, max_shrinks: int = 100):
    """One elliptical slice move of every chain at the target N(0, S S^T) exp(beta L)."""
    P = theta.shape[0]
    nu = rng.standard_normal((P, S.shape[1])) @ S.T
    level = beta * ll + np.log(rng.random(P))
    phi = rng.uniform(0.0, 2.0 * np.pi, P)
    lo, hi = phi - 2.0 * np.pi, phi.copy()
    new, new_ll = theta.copy(), ll.copy()
    todo = np.arange(P)
    for _ in range(max_shrinks):
        candidate = theta[todo] * np.cos(phi[todo])[:, None] + nu[todo] * np.sin(phi[todo])[:, None]
        candidate_ll = log_nu_sum(candidate, C)
        accept = beta * candidate_ll > level[todo]
        new[todo[accept]], new_ll[todo[accept]] = candidate[accept], candidate_ll[accept]
        rejected = todo[~accept]
        lo[rejected] = np.where(phi[rejected] < 0, phi[rejected], lo[rejected])
        hi[rejected] = np.where(phi[rejected] > 0, phi[rejected], hi[rejected])
        phi[rejected] = rng.uniform(lo[rejected], hi[rejected])
        todo = rejected
        if todo.size == 0:
            break
    return new, new_ll


def annealed_importance_sampling(S: np.ndarray, C: float, *, temperatures: int, chains: int, seed: int) -> dict:
    """ln N(D) by AIS over ``temperatures`` steps with ``chains`` independent chains: value, standard error, and the
    chains' effective number."""
    rng = np.random.default_rng(seed)
    betas = (np.arange(temperatures + 1) / temperatures) ** 4
    theta = rng.standard_normal((chains, S.shape[1])) @ S.T
    ll = log_nu_sum(theta, C)
    log_w = np.zeros(chains)
    for previous, beta in zip(betas[:-1], betas[1:]):
        log_w += (beta - previous) * ll
        theta, ll = slice_move(rng, theta, ll, beta, S, C)
    value = logsumexp(log_w) - np.log(chains)
    w = np.exp(log_w - logsumexp(log_w))  # normalised weights
    ess = 1.0 / np.sum(w**2)
    se = float(np.sqrt(np.var(w * chains, ddof=1) / chains))  # of the mean weight, relative: the se of ln Z
    return {"value": float(value), "se": se, "ess": float(ess), "seed": seed}


def compare(path, seeds=(0, 1)) -> None:
    """Add bayesvm's default ln N(D) at every reference point of the file at ``path`` (module docstring)."""
    import json
    import warnings

    import bayesvm

    data = json.loads(path.read_text())
    X, y = synth_rows(data["points"][0]["rows"])
    for point in data["points"]:
        kernel = bayesvm.RBF(amplitude=point["k0"], offset=point["offset"], length_scale=point["length_scale"])
        point["bayesvm"] = []
        for seed in seeds:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", bayesvm.BayesvmWarning)
                evidence = bayesvm.log_evidence(X, y, C=point["C"], kernel=kernel, random_state=seed)
            point["bayesvm"].append({"seed": seed, "value": evidence.log_normalization,
                                     "se": evidence.log_normalization_se,
                                     "trusted": bool(evidence.normalization_trusted)})
            print(f"C {point['C']:4.1f} k0 {point['k0']:6.1f} l {point['length_scale']:4.2f} seed {seed}: "
                  f"{evidence.log_normalization:9.3f} +- {evidence.log_normalization_se:.3f} against "
                  f"{point['value']:9.3f} ({'trusted' if point['bayesvm'][-1]['trusted'] else 'untrusted'})")
    data["bayesvm_provenance"] = provenance()  # the reference keeps its own provenance; this is the comparison's
    write_json(path, data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_standard_arguments(parser, out=RESULTS / "reference_normalization.json", quick="T = 2,000")
    parser.add_argument("--temperatures", type=int, default=20_000)
    parser.add_argument("--chains", type=int, default=128)
    parser.add_argument("--points", type=int, nargs="+", default=list(range(len(POINTS))),
                        help="which of POINTS to run (indices; default all)")
    parser.add_argument("--compare", action="store_true",
                        help="add bayesvm's default estimate at every point of the file --out names (module docstring)")
    args = parser.parse_args()
    if args.compare:
        return compare(args.out)
    temperatures = 2_000 if args.quick else args.temperatures
    X, _ = synth_rows()
    records = []
    for C, k0, length_scale in (POINTS[i] for i in args.points):
        started = time.perf_counter()
        S = square_root(rbf_gram(X, k0, length_scale, k0))
        replicas = [annealed_importance_sampling(S, C, temperatures=temperatures, chains=args.chains,
                                                 seed=args.seed + 1000 * r) for r in range(2)]
        values = np.array([r["value"] for r in replicas])
        ses = np.array([r["se"] for r in replicas])
        weights = 1.0 / np.maximum(ses, 1e-6) ** 2
        combined = float(np.sum(weights * values) / np.sum(weights))
        agree = bool(abs(values[0] - values[1]) <= 3.0 * np.hypot(*ses) + 0.05)
        records.append({"C": C, "k0": k0, "offset": k0, "length_scale": length_scale, "rows": ROWS,
                        "value": combined, "se": float(1.0 / np.sqrt(np.sum(weights))), "replicas": replicas,
                        "replicas_agree": agree, "seconds": time.perf_counter() - started})
        print(f"C {C:4.1f} k0 {k0:6.1f} l {length_scale:4.2f}: ln N(D) {combined:9.3f} +- {records[-1]['se']:.3f} "
              f"(replicas {values[0]:.3f}, {values[1]:.3f}; {'agree' if agree else 'DISAGREE'}; "
              f"{records[-1]['seconds']:.0f} s)", flush=True)
    print(markdown_table(["C", "k0 = k_b", "l", "ln N(D)", "se", "replicas agree"],
                         [[r["C"], r["k0"], r["length_scale"], f"{r['value']:.3f}", f"{r['se']:.3f}",
                           r["replicas_agree"]] for r in records]))
    write_json(args.out, {"temperatures": temperatures, "chains": args.chains, "schedule": "beta_t = (t / T)^4",
                          "data": f"{ROWS} stratified rows of synth.te (random_state 0)", "points": records})


if __name__ == "__main__":
    main()

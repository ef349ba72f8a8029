"""Where the MAP dual solver converges: 64 scrambled-Sobol points over the search's default box.

For adult rows (standardised; a seeded random subset of ``--sizes`` rows) and the RBF kernel, 64 points of a
scrambled Sobol sequence (seed 0) over ``SearchSpace.default`` (ln C, ln amplitude, ln offset ratio, ln length
scale), each solved by ``fit_map_on_gram`` at its default tolerance (KKT violation <= 1e-8 in margin units), in
one process pinned to one core. Per point: converged or not, the KKT violation, coordinate steps, seconds, and
C max K(x, x) (the box times the largest prior variance). Target, per size, printed as met or missed: at least 95%
of the points converge. Usage::

    python benchmarks/solver_convergence.py                 # 1,000 rows (about 5 minutes)
    python benchmarks/solver_convergence.py --sizes 1000 5000
    python benchmarks/solver_convergence.py --quick         # 300 rows, 16 points

Writes benchmarks/results/solver_convergence.json (``--out``) with the commit, the command and the machine.
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import RESULTS, add_standard_arguments, environment, markdown_table, pin_one_core, timed, write_json

TARGET_SHARE = 0.95


def run_size(n: int, n_points: int, seed: int) -> list[dict]:
    from scipy.stats import qmc

    from bayesvm import RBF
    from bayesvm._precision import float64_scope
    from bayesvm.datasets import load_dataset
    from bayesvm.hyperparameters import SearchSpace, kernel_hyperparameters_at
    from bayesvm.kernels import gram_matrix
    from bayesvm.solver.dual import fit_map_on_gram

    X, y = load_dataset("adult", return_X_y=True)
    rows = np.random.default_rng(seed).choice(len(y), n, replace=False)
    X, y = X[rows], np.where(y[rows] == np.unique(y)[1], 1.0, -1.0)
    template = RBF()
    space = SearchSpace.default(X, template)
    points = qmc.scale(qmc.Sobol(4, seed=0).random(64), space.lower, space.upper)[:n_points]
    records = []
    with float64_scope(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for x in points:
            kernel = template.replace(**kernel_hyperparameters_at(template, x))
            C = float(np.exp(x[0]))
            K = gram_matrix(kernel, X)
            fit, seconds = timed(fit_map_on_gram, K, X, y, np.array([-1, 1]), C, kernel)
            solution = fit.solution
            records.append({"n": n, "x": x.tolist(), "converged": bool(solution.converged),
                            "kkt_violation": float(solution.kkt_violation), "steps": int(solution.n_iter),
                            "polish": int(solution.n_polish), "seconds": seconds,
                            "box_variance": C * float(np.max(np.diagonal(np.asarray(K))))})
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_standard_arguments(parser, out=RESULTS / "solver_convergence.json", quick="300 rows, 16 points")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000])
    args = parser.parse_args()
    core = pin_one_core()
    sizes, n_points = ([300], 16) if args.quick else (args.sizes, 64)
    records, targets = [], []
    for n in sizes:
        mine = run_size(n, n_points, args.seed)
        records += mine
        converged = [r for r in mine if r["converged"]]
        failed = [r for r in mine if not r["converged"]]
        share = len(converged) / len(mine)
        print(f"{n} rows: {len(converged)} of {len(mine)} converged; C max K(x, x) of the converged up to "
              f"{max((r['box_variance'] for r in converged), default=0):.3g}, of the others from "
              f"{min((r['box_variance'] for r in failed), default=np.inf):.3g}; their violations "
              f"{min((r['kkt_violation'] for r in failed), default=0):.2g}-"
              f"{max((r['kkt_violation'] for r in failed), default=0):.2g}", flush=True)
        targets.append((f"{n} rows: at least {TARGET_SHARE:.0%} of the points converge ({share:.0%})",
                        share >= TARGET_SHARE))
    print(markdown_table(["n", "ln C", "ln k0", "ln r", "ln l", "converged", "violation", "steps", "s", "C max K"],
                         [[r["n"], *(f"{v:.2f}" for v in r["x"]), r["converged"], f"{r['kkt_violation']:.2g}",
                           r["steps"], f"{r['seconds']:.2f}", f"{r['box_variance']:.3g}"] for r in records]))
    for text, met in targets:
        print(f"{'MET   ' if met else 'MISSED'} {text}")
    write_json(args.out, {"environment": environment(), "core": core, "records": records,
                          "targets": [{"target": t, "met": m} for t, m in targets]})


if __name__ == "__main__":
    main()

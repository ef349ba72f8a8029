"""Where the MAP dual solver converges: scrambled-Sobol points over the search's default box, adult rows.

For ``--sizes`` rows of the adult census data (``bayesvm.datasets.load_adult(n, random_state=seed)``: numeric
columns standardised, one-hot columns 0/1) and the RBF kernel, ``--points`` points (default 64) of a scrambled
Sobol sequence (``scipy.stats.qmc.Sobol(4, scramble=True, seed=seed)``) over ``SearchSpace.default(X, RBF())``
(ln C, ln amplitude, ln offset ratio, ln length scale). Each point is solved by ``fit_map_on_gram`` with its
defaults (the solve alone is timed; the Gram matrix is built first; the first point of each size also pays for
compilation), in one process pinned to one core. ``--points-at N=P`` uses the first P points at N rows (a prefix
of the same sequence), for sizes where the full set takes too long; the output says so. By default 5,000 rows get
the first 8 points only: a point that does not converge runs its whole step budget, 200 n + 10,000 coordinate
steps of O(n) each, and 6 polish rounds of O(m^3) on a free set of m points.

Per point: converged, the KKT violation (margin units) and the tolerance it was held to, coordinate steps,
polish rounds, seconds, C max K(x, x) (the box times the largest prior variance) and the ConvergenceWarning's
text, if any. Target, per size, printed as MET or MISSED: at least 95% of the points converge.

    python benchmarks/solver_convergence.py                               # 1,000 rows, and 5,000 (8 points)
    python benchmarks/solver_convergence.py --sizes 1000
    python benchmarks/solver_convergence.py --quick                       # smoke run: 300 rows, 8 points

Writes benchmarks/results/solver_convergence.json (``--out``).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np
from _common import RESULTS, add_standard_arguments, environment, markdown_table, pin_one_core, timed, write_json

TARGET_SHARE = 0.95


def sobol_points(space, n_points: int, seed: int) -> np.ndarray:
    """The first ``n_points`` of a scrambled Sobol sequence scaled to the space's box (rows: coordinates)."""
    from scipy.stats import qmc

    unit = qmc.Sobol(space.lower.size, scramble=True, seed=seed).random(n_points)
    return qmc.scale(unit, space.lower, space.upper)


def run_size(n: int, n_points: int, seed: int) -> list[dict]:
    from bayesvm import RBF, ConvergenceWarning
    from bayesvm._precision import float64_scope
    from bayesvm.datasets import load_adult
    from bayesvm.hyperparameters import SearchSpace, kernel_hyperparameters_at
    from bayesvm.kernels import gram_matrix
    from bayesvm.solver.dual import fit_map_on_gram

    X, y = load_adult(n, random_state=seed, return_X_y=True)
    template = RBF()
    space = SearchSpace.default(X, template)
    records = []
    with float64_scope():
        for point in sobol_points(space, n_points, seed):
            kernel = template.replace(**kernel_hyperparameters_at(template, point))
            C = float(np.exp(point[0]))
            K = np.asarray(gram_matrix(kernel, X))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ConvergenceWarning)
                fit, seconds = timed(fit_map_on_gram, K, X, y, np.array([-1, 1]), C, kernel)
            solution = fit.solution
            message = [str(w.message) for w in caught if issubclass(w.category, ConvergenceWarning)]
            records.append({
                "n": n, "x": point, "C": C, "amplitude": kernel.amplitude, "offset": kernel.offset,
                "length_scale": kernel.length_scale, "box_variance": C * float(np.max(np.diagonal(K))),
                "converged": bool(solution.converged), "kkt_violation": float(solution.kkt_violation),
                "tolerance": float(solution.tolerance), "n_iter": int(solution.n_iter),
                "n_polish": int(solution.n_polish), "seconds": seconds, "warning": message[0] if message else None,
            })
            r = records[-1]
            print(f"n={n} ln C {point[0]:6.2f} ln k0 {point[1]:6.2f} ln r {point[2]:6.2f} ln l {point[3]:5.2f}  "
                  f"{'ok  ' if r['converged'] else 'FAIL'} kkt {r['kkt_violation']:.1e} (tol {r['tolerance']:.1e})  "
                  f"steps {r['n_iter']:7d}  polish {r['n_polish']:3d}  {seconds:6.2f} s", flush=True)
    return records


def summary(records: list[dict], n: int, n_points: int, planned: int) -> dict:
    mine = [r for r in records if r["n"] == n]
    failed = [r for r in mine if not r["converged"]]
    share = 1.0 - len(failed) / len(mine)
    return {
        "n": n, "points": len(mine), "of_planned": planned, "converged": len(mine) - len(failed), "share": share,
        "met": share >= TARGET_SHARE, "seconds_total": sum(r["seconds"] for r in mine),
        "seconds_median": float(np.median([r["seconds"] for r in mine])),
        "worst_violation": max(r["kkt_violation"] for r in mine),
        "failed_violations": sorted(r["kkt_violation"] for r in failed),
        "smallest_failing_box_variance": min((r["box_variance"] for r in failed), default=None),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_standard_arguments(parser, out=RESULTS / "solver_convergence.json", seed=0,
                           quick="smoke run: 300 rows, 8 points")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000], help="rows (default 1000 5000)")
    parser.add_argument("--points", type=int, default=64, help="Sobol points per size (default 64)")
    parser.add_argument("--points-at", nargs="*", default=["5000=8"], metavar="N=P",
                        help="fewer points at some sizes: the first P of the sequence at N rows (default 5000=8)")
    args = parser.parse_args(argv)
    core = pin_one_core()
    sizes, points = ([300], 8) if args.quick else (args.sizes, args.points)
    fewer = {int(n): int(p) for n, p in (item.split("=") for item in args.points_at)}
    records, summaries = [], []
    for n in sizes:
        records += run_size(n, fewer.get(n, points), args.seed)
        summaries.append(summary(records, n, fewer.get(n, points), points))
    print(markdown_table(
        ["n", "ln C", "ln k0", "ln r", "ln l", "C max K", "converged", "KKT", "tol", "steps", "polish", "s"],
        [[r["n"], *(f"{v:.2f}" for v in r["x"]), f"{r['box_variance']:.2g}", r["converged"],
          f"{r['kkt_violation']:.1e}", f"{r['tolerance']:.1e}", r["n_iter"], r["n_polish"], f"{r['seconds']:.2f}"]
         for r in records]))
    for s in summaries:
        subset = "" if s["points"] == s["of_planned"] else f" (the first {s['points']} of the {s['of_planned']} points)"
        print(f"{'MET   ' if s['met'] else 'MISSED'} {s['n']} rows{subset}: {s['converged']} of {s['points']} "
              f"converged ({s['share']:.0%}; target >= {TARGET_SHARE:.0%}), worst KKT {s['worst_violation']:.1e}, "
              f"{s['seconds_total']:.0f} s in all (median {s['seconds_median']:.2f} s)")
    print(f"wrote {write_json(args.out, {'environment': environment(core=core), 'seed': args.seed, 'summaries': summaries, 'records': records})}")


if __name__ == "__main__":
    main()

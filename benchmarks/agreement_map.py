"""Agreement map of ln N(D): the default estimator against a long reference, over the default search box.

For each data set and training-set size, points are spread over the default
search box (a scrambled Sobol design in ln C, ln k0, ln k_b/k0 and ln length
scale; :meth:`bayesvm.hyperparameters.SearchSpace.default`). At each point:

* default: :func:`bayesvm.log_normalization` as :func:`bayesvm.log_evidence`
  computes it (tempered SMC at the fixed budget of
  :class:`bayesvm.normalization.budget.EvidenceBudget`, ``--evidence-budget`` times the default): value, whether
  it is trusted, the budget (runs x particles x moves per temperature), the rank it sampled in, its likelihood
  evaluations and seconds;
* reference: two independent long tempered-SMC runs (``--reference-particles``
  x ``--reference-runs`` each, four times the default's slice moves per
  temperature, temperatures chosen for a target ESS of ``--reference-target-ess``,
  other seeds) by two routes, one from
  the prior and one from EP's Gaussian; their mean where each one's runs agree
  and the two agree within ``--reference-tolerance`` nats, else the higher
  value where its own runs agree (disagreeing runs are biased low), else none.

Reported per (set, n): the share of points whose default value is trusted,
the share with a usable reference, and |default - reference| over the points
that have both (median, worst), next to the target of the issue (worst error
at most 1 nat per 1,000 points).

Run: python benchmarks/agreement_map.py [--sets synth pima] [--sizes 400]
[--points 10] [--box default|ordinary] [--reference-particles 1024] [--reference-runs 32]
[--reference-target-ess 0.95] [--output FILE] (prints the table,
writes benchmarks/results/agreement_map.json after every point). ``--reuse-reference FILE``
evaluates the default again at a previous run's points against its
references (before/after a change of the default; ``--rows`` picks some of them). Every row
records the default's round (budget, value, standard error, effective runs, seconds).

ln N(D) depends on the training inputs alone, so a machine without the data packages (an accelerator's) can
run the map from a file of inputs: ``--save-inputs FILE.npz`` writes the subsamples of ``--sets`` x ``--sizes``
and stops; ``--inputs FILE.npz`` reads them instead of loading the sets. ``--time-budget S`` starts no new
point after S seconds (the points of all (set, n) are interleaved, so a cut run still covers every group).
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings
from pathlib import Path

import jax
import numpy as np
from _common import provenance
from scipy.stats import qmc
from sklearn.model_selection import train_test_split

from bayesvm import UntrustedEvidenceWarning, log_normalization
from bayesvm.normalization import budget
from bayesvm.normalization.annealing import annealed_log_normalization, prior_factor
from bayesvm.normalization.budget import EvidenceBudget
from bayesvm.normalization.ep_started import annealed_from_ep
from bayesvm.datasets import load_dataset
from bayesvm.hyperparameters import SearchSpace, kernel_hyperparameters_at, pairwise_distances
from bayesvm.kernels import RBF

RESULTS = Path(__file__).parent / "results" / "agreement_map.json"


def subsample(name: str, n: int, seed: int = 0):
    data = load_dataset(name)
    if n >= data.X.shape[0]:
        return data.X, data.y
    X, _, y, _ = train_test_split(data.X, data.y, train_size=n, stratify=data.y, random_state=seed)
    return X, y


def ordinary_box(X: np.ndarray, template) -> SearchSpace:
    """Where the default fits and the reported failures lived: C 0.3-3, k0 1-100, k_b/k0 0.3-3, length scale
    from a quarter of the median pairwise distance to twice it (inside the default box)."""
    default = SearchSpace.default(X, template)
    median = np.log(np.median(pairwise_distances(X, max_points=300)))
    lower = np.log([0.3, 1.0, 0.3, 1.0])
    upper = np.log([3.0, 100.0, 3.0, 1.0])
    lower[3], upper[3] = median - np.log(4.0), median + np.log(2.0)
    return SearchSpace(np.maximum(lower, default.lower), np.minimum(upper, default.upper))


def design(space: SearchSpace, points: int, seed: int) -> np.ndarray:
    """``points`` scrambled-Sobol points over the box (fixed coordinates kept)."""
    with warnings.catch_warnings():  # balance needs a power of two; the spread does not
        warnings.simplefilter("ignore", UserWarning)
        unit = qmc.Sobol(d=4, scramble=True, seed=seed).random(points)
    return space.lower + unit * (space.upper - space.lower)


def reference(kernel, C, X, seeds, particles, runs, tolerance, target_ess):
    """Two long runs by two routes from other seeds: from the prior and from EP's Gaussian
    (:func:`bayesvm.normalization.ep_started.annealed_from_ep`), each with four times the default's slice moves
    per temperature (:meth:`bayesvm.normalization.budget.EvidenceBudget.moves`: runs that have not mixed can agree
    while all lying low) and the temperatures of ``target_ess`` (0.95 by default: at hard points the default's
    0.5 gives 5-7 temperatures and values 1-2 nats lower for the same moves; docs/normalisation.md). Their mean where
    both agree internally and with each other; else, since disagreeing runs are biased low, the higher value if
    its own runs agree; else None."""
    chol = prior_factor(np.asarray(kernel(X)))
    moves = 4 * EvidenceBudget().moves(X.shape[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        results = [annealed_log_normalization(kernel, C, X.shape[0], X, route="product", chol=chol, key=seeds[0],
                                              n_particles=particles, n_runs=runs, n_mcmc_steps=moves,
                                              target_ess=target_ess),
                   annealed_from_ep(chol, C, key=seeds[1], n_particles=particles, n_runs=runs, n_mcmc_steps=moves,
                                    target_ess=target_ess)[0]]
    values = [r.value for r in results]
    agree = [bool(r.runs_agree) for r in results]
    if all(agree) and abs(values[0] - values[1]) <= tolerance:
        return float(np.mean(values)), values, agree
    higher = int(np.argmax(values))
    return (float(values[higher]) if agree[higher] else None), values, agree


def inputs_key(name: str, n: int) -> str:
    return f"{name}_{n}"


def group_points(X: np.ndarray, args, earlier: list[dict] | None) -> list[np.ndarray]:
    """The design's points for one (set, n), or a previous run's points (``earlier``)."""
    if earlier is not None:
        return [np.array(r["x"]) for r in earlier]
    template = RBF()
    space = SearchSpace.default(X, template) if args.box == "default" else ordinary_box(X, template)
    return list(design(space, args.points, seed=args.seed))


class RecordedRounds:
    """The default's sampler calls: wraps the sampler call of :mod:`bayesvm.normalization.budget` and keeps each
    call's particles, moves, target ESS, value, standard error, effective runs, temperatures and seconds."""

    def __init__(self):
        self.rounds: list[dict] = []
        self._sample = budget.annealed_log_expectation

    def __enter__(self):
        def recorded(*args, **kwargs):
            started = time.perf_counter()
            result = self._sample(*args, **kwargs)
            self.rounds.append({
                "particles": kwargs["n_particles"], "moves": kwargs["n_mcmc_steps"], "target_ess": kwargs["target_ess"],
                "value": float(result.value), "se": float(result.se),
                "effective_runs": float(result.ess), "temperatures": int(result.n_temperatures),
                "seconds": time.perf_counter() - started})
            return result

        budget.annealed_log_expectation = recorded
        return self

    def __exit__(self, *exc):
        budget.annealed_log_expectation = self._sample


def evaluate(name: str, X: np.ndarray, x: np.ndarray, args, earlier_row: dict | None = None) -> dict:
    """One point: the default against its reference (computed, or ``earlier_row``'s)."""
    template = RBF()
    hyper = kernel_hyperparameters_at(template, x)
    kernel, C = template.replace(**hyper), float(np.exp(x[0]))
    started = time.perf_counter()
    with warnings.catch_warnings(), RecordedRounds() as recorded:
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UntrustedEvidenceWarning)
        default = log_normalization(kernel=kernel, C=C, n=X.shape[0], inputs=X, random_state=args.seed,
                                    evidence_budget=args.evidence_budget)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    if earlier_row is None:
        ref, ref_values, ref_agree = reference(kernel, C, X, (101 + args.seed, 202 + args.seed),
                                               args.reference_particles, args.reference_runs,
                                               args.reference_tolerance, args.reference_target_ess)
    else:
        ref, ref_values, ref_agree = (earlier_row[k] for k in ("reference", "reference_runs",
                                                               "reference_runs_agree"))
    row = {
        "set": name, "n": int(X.shape[0]), "box": args.box, "x": x.tolist(), "C": C,
        "amplitude": float(kernel.amplitude), "offset": float(kernel.offset),
        "length_scale": float(kernel.length_scale),
        "default": float(default.value), "default_se": float(default.se), "trusted": bool(default.trusted),
        "rank": int(default.diagnostics["rank"]),
        "likelihood_evaluations": int(default.diagnostics["likelihood_evaluations"]),
        "effective_runs": float(default.diagnostics["ess"]), "runs": int(default.diagnostics["n_runs"]),
        "particles": int(default.diagnostics["n_particles"]), "moves": int(default.diagnostics["n_mcmc_steps"]),
        "seconds": seconds, "rounds": recorded.rounds,
        "reference": ref, "reference_runs": ref_values, "reference_runs_agree": ref_agree,
        "reference_seconds": time.perf_counter() - started,
        "error": None if ref is None else abs(float(default.value) - ref),
    }
    print(f"{name:>14} n={row['n']:5d} C={C:8.3g} k0={row['amplitude']:9.3g} kb={row['offset']:9.3g} "
          f"l={row['length_scale']:7.3g}  default {row['default']:9.2f} +- {row['default_se']:.2f} "
          f"{'trusted' if row['trusted'] else 'UNTRUSTED':9} ({row['runs']}x{row['particles']}x{row['moves']}, "
          f"{seconds:5.1f} s)  reference {('%9.2f' % ref) if ref is not None else '     none'} "
          f"({row['reference_seconds']:5.0f} s)", flush=True)
    return row


def run(groups: list[tuple[str, int]], inputs, args, earlier: list[dict] | None = None) -> list[dict]:
    """Every point of every (set, n), interleaved (point 0 of each group, then point 1, ...), the JSON written
    after each; with ``earlier`` rows (a previous run's), the default is evaluated again at their points and
    their references are reused (a before/after comparison of the default)."""
    began = time.perf_counter()
    plans = []
    for name, n in groups:
        X = inputs(name, n)
        previous = None if earlier is None else [r for r in earlier if (r["set"], r["n"]) == (name, n)]
        plans.append((name, X, group_points(X, args, previous), previous))
    rows: list[dict] = []
    for i in range(max(len(points) for _, _, points, _ in plans)):
        for name, X, points, previous in plans:
            if i >= len(points):
                continue
            if time.perf_counter() - began > args.time_budget:
                print(f"time budget ({args.time_budget:.0f} s) spent: stopped before point {i} of {name}", flush=True)
                return rows
            rows.append(evaluate(name, X, points[i], args, None if previous is None else previous[i]))
            write(rows, args)
    return rows


def write(rows: list[dict], args) -> None:
    args.output.parent.mkdir(parents=True, exist_ok=True)
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    settings["device"] = str(jax.devices()[0])
    partial = args.output.with_suffix(".partial")
    partial.write_text(json.dumps({"provenance": provenance(), "settings": settings, "table": summarise(rows),
                                "rows": rows}, indent=1))
    partial.replace(args.output)


def _share(flags: list[bool]) -> float | None:
    return float(np.mean(flags)) if flags else None


def summarise(rows: list[dict]) -> list[dict]:
    table = []
    for key in sorted({(r["set"], r["n"]) for r in rows}):
        group = [r for r in rows if (r["set"], r["n"]) == key]
        errors = [r["error"] for r in group if r["error"] is not None and r["trusted"]]
        table.append({
            "set": key[0], "n": key[1], "points": len(group),
            "trusted": float(np.mean([r["trusted"] for r in group])),
            "with_reference": float(np.mean([r["reference"] is not None for r in group])),
            "median_error": float(np.median(errors)) if errors else None,
            "worst_error": float(np.max(errors)) if errors else None,
            "target_worst": key[1] / 1000.0,
            "median_seconds": float(np.median([r["seconds"] for r in group])),
            # the default's error where it is untrusted: its widened standard error against its actual error
            "untrusted_within_2_se": _share([r["error"] <= 2 * r["default_se"] for r in group
                                             if r["error"] is not None and not r["trusted"]]),
        })
    return table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["synth", "pima"])
    parser.add_argument("--sizes", nargs="+", type=int, default=[400])
    parser.add_argument("--points", type=int, default=10)
    parser.add_argument("--box", choices=["default", "ordinary"], default="default",
                        help="the default search box, or its ordinary middle (ordinary_box)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--evidence-budget", type=float, default=1.0, help="the default's evidence_budget")
    parser.add_argument("--reference-particles", type=int, default=1024)
    parser.add_argument("--reference-runs", type=int, default=32)
    parser.add_argument("--reference-tolerance", type=float, default=1.0)
    parser.add_argument("--reference-target-ess", type=float, default=0.95,
                        help="the references' adaptive schedule (the default estimator's is 0.5)")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--reuse-reference", type=Path, default=None,
                        help="a previous run's JSON: evaluate the default again at its points, keep its references")
    parser.add_argument("--rows", nargs="+", type=int, default=None,
                        help="with --reuse-reference: only these rows of the previous run (0-based, in its order)")
    parser.add_argument("--save-inputs", type=Path, default=None,
                        help="write the subsamples of --sets x --sizes to this .npz and stop")
    parser.add_argument("--inputs", type=Path, default=None,
                        help="read the subsamples from a --save-inputs file instead of loading the sets")
    parser.add_argument("--time-budget", type=float, default=math.inf,
                        help="seconds after which no new point starts")
    args = parser.parse_args(argv)
    if args.save_inputs is not None:
        arrays = {inputs_key(name, n): subsample(name, n)[0] for name in args.sets for n in args.sizes}
        np.savez_compressed(args.save_inputs, **arrays)
        print(f"wrote {args.save_inputs}: {', '.join(f'{k} {v.shape}' for k, v in arrays.items())}")
        return
    if args.inputs is None:
        inputs = lambda name, n: subsample(name, n)[0]  # noqa: E731
    else:
        saved = np.load(args.inputs)
        inputs = lambda name, n: saved[inputs_key(name, n)]  # noqa: E731
    if args.reuse_reference is None:
        rows = run([(name, n) for name in args.sets for n in args.sizes], inputs, args)
    else:
        earlier = json.loads(args.reuse_reference.read_text())
        for key in ("box", "seed", "points"):
            setattr(args, key, earlier["settings"][key])
        chosen = [r for i, r in enumerate(earlier["rows"]) if args.rows is None or i in args.rows]
        groups = sorted({(r["set"], r["n"]) for r in chosen})
        rows = run(groups, inputs, args, chosen)
    print(f"\n{'set':>14} {'n':>5} {'points':>6} {'trusted':>8} {'with ref':>8} {'median |err|':>12} "
          f"{'worst |err|':>11} {'target':>6} {'untrusted within 2 se':>21} {'median s':>8}")
    for t in summarise(rows):
        fmt = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
        print(f"{t['set']:>14} {t['n']:5d} {t['points']:6d} {t['trusted']:8.0%} {t['with_reference']:8.0%} "
              f"{fmt(t['median_error']):>12} {fmt(t['worst_error']):>11} {t['target_worst']:6.2f} "
              f"{fmt(t['untrusted_within_2_se']):>21} {t['median_seconds']:8.1f}")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()

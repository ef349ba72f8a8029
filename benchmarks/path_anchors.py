"""The search path's anchors against long references: is the ln N(D) the search moves on biased?

For each data set and split, ``BayesianSVC()`` selects its hyperparameters on
min(``--n``, 70% of the set) training rows. The search steps that made a new
anchor of the ln N(D) path (``selection_.search.steps``, ``anchored``:
tempered SMC ran there), at most ``--anchors`` per fit spread along the path,
are re-estimated by the long two-route reference of ``agreement_map.py``
(``--reference-particles`` x ``--reference-runs`` from the prior and from
EP's Gaussian, other seeds).

Reported: anchors, with a usable reference, median and worst
|anchor - reference| in nats and in the anchor's own standard errors, and
how many lie below the reference by more than three standard errors (a
value biased low makes the evidence look better than it is, and the search
goes there). The record of the bridged anchors tried and reverted on
2026-11-25 (``git show 6479655``) is ``results/path_anchors_bridge.json``.

Run: python benchmarks/path_anchors.py [--sets pima synth] [--splits 1 2 3] [--n 300]
(prints the table, writes benchmarks/results/path_anchors.json).
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import train_test_split

from agreement_map import reference
from bayesvm import BayesianSVC
from bayesvm.datasets import load_dataset
from bayesvm.hyperparameters import kernel_hyperparameters_at
from bayesvm.kernels import RBF

RESULTS = Path(__file__).parent / "results" / "path_anchors.json"


def anchors_of_one_fit(name: str, split: int, args) -> list[dict]:
    X, y = load_dataset(name, return_X_y=True)
    X, _, y, _ = train_test_split(X, y, train_size=min(args.n, int(0.7 * len(y))), stratify=y, random_state=split)
    started = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model = BayesianSVC().fit(X, y)
    seconds = time.perf_counter() - started
    steps = [s for s in model.selection_.search.steps if s.anchored and np.isfinite(s.log_normalization)]
    picked = np.unique(np.linspace(0, len(steps) - 1, min(args.anchors, len(steps))).astype(int))
    chosen = [steps[i] for i in picked]
    print(f"{name} split {split}: fit {seconds:.1f} s, {len(steps)} anchors", flush=True)
    rows = []
    for step in chosen:
        kernel = RBF().replace(**kernel_hyperparameters_at(RBF(), step.x))
        C = float(np.exp(step.x[0]))
        started = time.perf_counter()
        ref, ref_values, ref_agree = reference(kernel, C, X, (101 + split, 202 + split), args.reference_particles,
                                               args.reference_runs, args.reference_tolerance)
        row = {"set": name, "split": split, "n": int(X.shape[0]), "x": step.x.tolist(),
               "anchor": step.log_normalization, "anchor_se": step.log_normalization_se, "reference": ref,
               "reference_runs": ref_values, "reference_runs_agree": ref_agree,
               "reference_seconds": time.perf_counter() - started,
               "error": None if ref is None else step.log_normalization - ref}
        rows.append(row)
        print(f"   C={C:7.3g} k0={float(kernel.amplitude):8.3g} "
              f"l={float(kernel.length_scale):6.3g}  anchor {step.log_normalization:8.2f} +- "
              f"{step.log_normalization_se:.2f}  reference {('%8.2f' % ref) if ref is not None else '    none'} "
              f"({row['reference_seconds']:.0f} s)", flush=True)
    return rows


def summarise(rows: list[dict]) -> list[dict]:
    table = []
    for name in sorted({r["set"] for r in rows}):
        group = [r for r in rows if r["set"] == name]
        errors = np.array([r["error"] for r in group if r["error"] is not None])
        ses = np.array([r["anchor_se"] for r in group if r["error"] is not None])
        z = errors / np.maximum(ses, 1e-12)
        table.append({
            "set": name, "anchors": len(group), "with_reference": int(errors.size),
            "median_abs_error": float(np.median(np.abs(errors))) if errors.size else None,
            "worst_abs_error": float(np.max(np.abs(errors))) if errors.size else None,
            "median_abs_z": float(np.median(np.abs(z))) if errors.size else None,
            "low_by_3_se": int(np.sum(z < -3)) if errors.size else 0,
        })
    return table


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", nargs="+", default=["pima", "synth"])
    parser.add_argument("--splits", nargs="+", type=int, default=[1, 2, 3])
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--anchors", type=int, default=4, help="anchors re-estimated per fit (default 4)")
    parser.add_argument("--reference-particles", type=int, default=512)
    parser.add_argument("--reference-runs", type=int, default=20)
    parser.add_argument("--reference-tolerance", type=float, default=0.5)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    rows = [row for name in args.sets for split in args.splits for row in anchors_of_one_fit(name, split, args)]
    table = summarise(rows)
    print("\n| set | anchors | with a reference | median / worst \\|error\\| (nats) | median \\|error\\| / se "
          "| below the reference by > 3 se |\n|---|---|---|---|---|---|")
    for t in table:
        fmt = (lambda v: "-" if v is None else f"{v:.2f}")
        print(f"| {t['set']} | {t['anchors']} | {t['with_reference']} | {fmt(t['median_abs_error'])} / "
              f"{fmt(t['worst_abs_error'])} | {fmt(t['median_abs_z'])} | {t['low_by_3_se']} |")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"settings": {k: (str(v) if isinstance(v, Path) else v)
                                                    for k, v in vars(args).items()},
                                       "summary": table, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()

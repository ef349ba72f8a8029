"""The low-rank selection against the full-prior one as m grows, over several splits of adult.

For each split (``--seeds``: the test set and the training rows of
``benchmarks/large_n.py`` with that seed, and the seed of the k-means
inducing inputs and of the samplers) and each number of inducing inputs
(``--inducing``), ``BayesianSVC(n_inducing=m)`` is fitted on ``--n`` training
points, and ``BayesianSVC(n_inducing=None)`` (the full n x n prior) on the
same rows; each fit runs in a fresh process (``large_n.in_fresh_process``).
The table gives, per m, the mean over splits of the chosen hyperparameters'
logarithms and of the test NLL and error, their differences from the full
prior's on the same split, and the split-to-split standard deviation of the
full prior's values: the question is at which m the differences fall within
that spread. Seconds are recorded but are not the point (run ``large_n.py``
for times).

    python benchmarks/low_rank_agreement.py                       # n = 1000, m = 50 200, seeds 0 1 2
    python benchmarks/low_rank_agreement.py --inducing 50 200 400 --seeds 0 1 2 3 4
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from large_n import _run_bayesvm, in_fresh_process

RESULTS = Path(__file__).resolve().parent / "results" / "low_rank_agreement.json"
COMPARED = ("log_C", "log_amplitude", "log_length_scale", "nll", "error")


def _compared(row: dict) -> dict:
    return {"log_C": np.log(row["C"]), "log_amplitude": np.log(row["amplitude"]),
            "log_length_scale": np.log(row["length_scale"]), "nll": row["nll"], "error": row["error"]}


def summarise(rows: list[dict]) -> list[dict]:
    """Per m: mean differences from the full prior over the splits where both fitted, and the full prior's spread."""
    full = {r["seed"]: _compared(r) for r in rows if r["m"] is None and "seconds" in r}
    spread = {k: float(np.std([f[k] for f in full.values()], ddof=1)) if len(full) > 1 else float("nan")
              for k in COMPARED}
    table = []
    for m in sorted({r["m"] for r in rows if r["m"] is not None}):
        pairs = [(_compared(r), full[r["seed"]]) for r in rows if r["m"] == m and "seconds" in r and r["seed"] in full]
        if not pairs:
            continue
        differences = {k: [low[k] - ref[k] for low, ref in pairs] for k in COMPARED}
        table.append({"m": m, "splits": len(pairs), "trusted": sum(r.get("trusted", False) for r in rows if r["m"] == m),
                      **{f"mean_difference_{k}": float(np.mean(v)) for k, v in differences.items()}})
    return [{"m": "full", "splits": len(full), "trusted": sum(r.get("trusted", False) for r in rows if r["m"] is None),
             **{f"sd_{k}": v for k, v in spread.items()}}] + table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--inducing", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per fit")
    parser.add_argument("--output", default=str(RESULTS))
    args = parser.parse_args(argv)
    output = Path(args.output)
    rows = json.loads(output.read_text())["rows"] if output.exists() else []
    for seed in args.seeds:
        for m in [None, *args.inducing]:
            if any(r["seed"] == seed and r["m"] == m and r["n"] == args.n for r in rows):
                continue  # already measured (the file is a cache: delete it to measure again)
            row = {"n": args.n, "seed": seed, "m": m, **in_fresh_process(_run_bayesvm, args.n, seed,
                                                                         {"n_inducing": m, "selection_size": None},
                                                                         timeout=args.timeout)}
            rows.append(row)
            output.parent.mkdir(parents=True, exist_ok=True)
            output.write_text(json.dumps({"settings": vars(args), "rows": rows}, indent=1))
            print(f"seed {seed} m {m or 'full':>4}: " + (
                f"C {row['C']:.3g} k0 {row['amplitude']:.3g} l {row['length_scale']:.3g} NLL {row['nll']:.3f} "
                f"error {row['error']:.3f} {'trusted' if row['trusted'] else 'UNTRUSTED'} {row['seconds']:.0f} s"
                if "seconds" in row else str(row)), flush=True)
    summary = summarise([r for r in rows if r["n"] == args.n])
    output.write_text(json.dumps({"settings": vars(args), "rows": rows, "summary": summary}, indent=1))
    print("\nfull: the full prior's split-to-split sd; m: mean over splits of (low-rank - full)")
    print(f"\n{'m':>5} {'splits':>6}  " + "  ".join(f"{k:>16}" for k in COMPARED))
    for line in summary:
        kind = "sd" if line["m"] == "full" else "mean_difference"
        print(f"{line['m']!s:>5} {line['splits']:>6}  " + "  ".join(f"{line[f'{kind}_{k}']:>16.3f}" for k in COMPARED))
    return 0


if __name__ == "__main__":
    sys.exit(main())

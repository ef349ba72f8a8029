"""Where a fit's tempered SMC goes: every round of ln N(D)'s budget ladder in ``BayesianSVC().fit``, timed.

Fits ``BayesianSVC()`` with its defaults on the splits of ``benchmarks/selection.py`` (one data set, training
parts of min(``--max-train``, 70%) rows), in one process, one split after the other (the first compiles), and
records every round that :func:`bayesvm.normalization.budget.annealed_until_runs_agree` makes (the search's
anchors, with 4 runs a round, and the checks at its end points, with 16): its budget (particles, slice moves per
temperature, target ESS, whether the moves go round EP's Gaussian), its seconds (the round returns once its
runs' values are on the host) and, of them, the seconds JAX spent compiling (``jax.monitoring``'s backend
compile durations: a "warm" fit still compiles the programs the process meets for the first time), its
temperatures, its value, standard error and effective runs, and whether its runs agree. Per split it prints the
fit's seconds with the search's and the checks' share and its compiling, the rounds' seconds by kind, and the
checks' rounds one by one; the JSON holds every round. Usage::

    python benchmarks/ladder_rounds.py --dataset pima --max-train 400 --splits 3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cold_start import _jax_counter  # noqa: E402
from selection import environment, splits  # noqa: E402

from bayesvm import BayesianSVC  # noqa: E402
from bayesvm.datasets import load_dataset  # noqa: E402
from bayesvm.normalization import budget  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"


class LadderRounds:
    """Every round of ln N(D)'s budget ladder made while the context is active (module docstring)."""

    def __init__(self, compiled: dict):
        self.rounds: list[dict] = []
        self.compiled = compiled  # the process's running compile counts (cold_start's ``_jax_counter``)

    def __enter__(self):
        self._round = budget.annealed_log_expectation

        def recorded(chol, log_likelihood, **options):
            started, compiled = time.perf_counter(), self.compiled["compile_s"]
            result = self._round(chol, log_likelihood, **options)
            self.rounds.append({
                "compile_s": self.compiled["compile_s"] - compiled,
                "runs": int(result.n_runs), "particles": int(result.n_particles),
                "moves": int(result.n_mcmc_steps), "target_ess": float(options["target_ess"]),
                "guided": bool(result.guided), "seconds": time.perf_counter() - started,
                "temperatures": float(np.mean(np.sum(np.isfinite(result.temperatures), -1) - 1)),
                "value": float(result.value), "se": float(result.se), "effective_runs": float(result.ess),
                "runs_agree": bool(result.runs_agree),
            })
            return result

        budget.annealed_log_expectation = recorded
        return self

    def __exit__(self, *exc):
        budget.annealed_log_expectation = self._round


def fit_split(X, y, train: np.ndarray, compiled: dict) -> dict:
    """One default fit on the training rows, with its ladder's rounds and what JAX compiled meanwhile (``compiled``:
    the process's running counts)."""
    before = dict(compiled)
    with LadderRounds(compiled) as ladder:
        started = time.perf_counter()
        model = BayesianSVC().fit(X[train], y[train])
        seconds = time.perf_counter() - started
    selection = model.selection_
    return {"fit_s": seconds, "compile_s": compiled["compile_s"] - before["compile_s"],
            "programs_compiled": compiled["compilations"] - before["compilations"],
            "n_train": int(train.size), "seconds": dict(selection.seconds),
            "counts": selection.summary_counts(), "trusted": bool(selection.report.trusted),
            "best": {k: float(v) for k, v in selection.best.items() if np.ndim(v) == 0},
            "rounds": ladder.rounds}


def summary(record: dict) -> str:
    """The split's fit, the rounds' seconds by kind, and the checks' rounds (16 runs) one by one."""
    rounds = record["rounds"]
    kinds: dict[str, list[float]] = {}
    for r in rounds:
        kind = f"{r['runs']} runs, {r['moves']} moves, ESS {r['target_ess']:g}{', guided' if r['guided'] else ''}"
        kinds.setdefault(kind, []).append(r["seconds"])
    lines = [f"fit {record['fit_s']:.1f} s (search {record['seconds']['search']:.1f}, checks "
             f"{record['seconds']['check']:.1f}; compiling {record['compile_s']:.1f} s, "
             f"{record['programs_compiled']} programs); rounds {sum(r['seconds'] for r in rounds):.1f} s in "
             f"{len(rounds)}, of which compiling {sum(r['compile_s'] for r in rounds):.1f} s"]
    lines += [f"  {len(v):3d} x {kind}: {sum(v):.1f} s" for kind, v in sorted(kinds.items())]
    lines.append("  the checks' rounds (runs > 4):")
    lines += [f"    {r['moves']:3d} moves, ESS {r['target_ess']:g}, {'guided' if r['guided'] else 'prior '}: "
              f"{r['seconds']:6.1f} s, {r['temperatures']:4.1f} temperatures, {r['value']:9.3f} +- {r['se']:.3f}, "
              f"{r['effective_runs']:.1f} of {r['runs']} effective{'' if r['runs_agree'] else ', runs disagree'}"
              for r in rounds if r["runs"] > 4]
    return "\n".join(lines)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="pima")
    parser.add_argument("--max-train", type=int, default=400)
    parser.add_argument("--splits", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0, help="the splits' seed (benchmarks/selection.py's)")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args(argv)
    output = args.output or RESULTS / f"ladder_rounds_{args.dataset}_{args.max_train}.json"
    compiled = _jax_counter()
    X, y = load_dataset(args.dataset, return_X_y=True)
    records = []
    for i, (train, _) in enumerate(splits(X, y, args.splits, args.max_train, args.seed)):
        records.append({"split": i, **fit_split(X, y, train, compiled)})
        print(f"split {i}: " + summary(records[-1]), flush=True)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps({"settings": {k: str(v) for k, v in vars(args).items()},
                                      "environment": environment(), "splits": records}, indent=1))
    print(f"wrote {output}")


if __name__ == "__main__":
    main()

"""Selection time against the number of training points: evidence search, 5-fold grid search + Platt, GP classifier.

On one data set (default ``digits_even_odd``, 1797 points, the largest of
``benchmarks/selection.py``'s sets), for each training-set size n
(``--sizes``, default 100 200 400 800 1600) a stratified subsample of n
points is drawn; the rest of the set is the test part. Arms (``--arms``), the
same as in ``benchmarks/selection.py`` (their functions are imported from it):

* ``search``: ``BayesianSVC()`` with its defaults. JAX compiles for every new
  n, so it is fitted twice at each n: first on one subsample (``first_s``:
  in process, compilation for this n included; what compiled at smaller n is
  reused), then on a different subsample of the same size (``warm_s``: the
  time the slope is fitted to). Both fits' work counts are recorded
  (``selection_.summary_counts()``: evaluations, EP sweeps, factorisations,
  tempered-SMC anchors, starts, seconds of the search and of the check) with
  the trust report;
* ``cv+platt``: ``GridSearchCV(SVC(kernel="rbf"), cv=5)`` on the 11 x 11 grid
  C = 10^[-2..3], gamma = 10^[-4..1], then ``CalibratedClassifierCV(...,
  method="sigmoid", cv=5)``; one fit per n, on the second subsample;
* ``gpc``: ``GaussianProcessClassifier(ConstantKernel() * RBF())`` with
  scikit-learn's defaults; one fit per n, on the second subsample;
* ``evaluation``: one evaluation of ln P(D), ``bayesvm.log_evidence`` (EP and
  the trusted tempered-SMC ln N(D)), on all n training points of the second
  subsample at the warm fit's hyperparameters (the search arm runs first), at
  sizes up to ``--evaluation-max-n`` (default 1,000): on the full prior up to
  ``--full-prior-max`` points (default 1,000) and on the low-rank prior through
  ``--inducing`` k-means inducing inputs above. Above 1,000 points neither
  finishes in minutes on two cores (a full prior's ln N(D) at 2,000 points takes
  half an hour or more; a low-rank one at 2,000 adult points, 200 inducing
  inputs, was stopped after 25 minutes in its third round), and the default
  fit never computes them: it selects on a 500-row subsample.
  ``--evaluation-repeats`` times (default 2) with seeds 0, 1, ...: the first
  compiles what the search at this n did not, the others are warm.

Every arm of the package records the tempered-SMC work it did
(:class:`SamplerWork`: the sampler's runs, particles, temperatures summed over
the runs, slice moves of one particle and the likelihood evaluations in them)
beside the search's own counts. ``--cv-max-train`` caps the rows grid search +
Platt sees (a stratified subsample of the training part; default: all), as
issue 25's yardstick is grid search + Platt on 2,000 points;
``--max-test`` caps the test part (a stratified subsample of the rest).
``--resume`` keeps the rows of an earlier run in ``--out`` at the sizes asked
for and fits only the others (the arms must be the same).

Test error and NLL on the rest of the set are recorded as a sanity check (at
n = 1600 the rest is only 197 points). Log-log slopes: ``np.polyfit(log n,
log t, 1)`` per arm (and for the search's first fits, and its seconds per
L-BFGS-B evaluation). Writes benchmarks/results/selection_scaling.json (after
every n) and the log-log figure docs/figures/selection_scaling.png (slopes in
the legend).

Usage:
    python benchmarks/selection_scaling.py [--dataset digits_even_odd] [--sizes 100 200 400 800 1600]
        [--arms search cv+platt gpc evaluation] [--n-jobs 1] [--quick]
    python benchmarks/selection_scaling.py --dataset adult --sizes 400 1000 2000 5000 \
        --arms search evaluation cv+platt --cv-max-train 2000 --max-test 5000 --out .../work_against_n_adult.json
``--quick``: n = 60 and 120 -- a smoke run that checks the machinery; it
writes benchmarks/results/selection_scaling_quick.{json,png} and leaves the
documentation's figure alone. On the shared 2-core machine a full run takes
hours: the search at n = 1600 dominates (each EP sweep and each tempered-SMC
anchor is O(n^3)).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.model_selection import StratifiedShuffleSplit

sys.path.insert(0, str(Path(__file__).resolve().parent))

from selection import (  # noqa: E402
    COUNTS,
    DATASETS,
    RESULTS,
    SVC_C,
    SVC_GAMMA,
    _markdown,
    _plain,
    environment,
    run_cv_platt,
    run_gpc,
    run_search,
)

from bayesvm import log_evidence  # noqa: E402
from bayesvm.datasets import load_dataset  # noqa: E402
from bayesvm.kernels import RBF  # noqa: E402
from bayesvm.normalization import annealing, path  # noqa: E402

ARMS = ("search", "cv+platt", "gpc", "evaluation")
DEFAULT_SIZES = (100, 200, 400, 800, 1600)
QUICK_SIZES = (60, 120)
DEFAULT_DATASET = "digits_even_odd"
FIGURE = Path(__file__).resolve().parent.parent / "docs" / "figures" / "selection_scaling.png"
MIN_TEST = 20


def subsample(y, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A stratified subsample of ``size`` points and the rest."""
    splitter = StratifiedShuffleSplit(n_splits=1, train_size=size, test_size=y.size - size, random_state=seed)
    train, test = next(splitter.split(np.zeros((y.size, 1)), y))
    return np.sort(train), np.sort(test)


#: positions in the tuple the compiled sampler returns (``bayesvm.normalization.annealing.smc_runs``): each run's
#: ln Z and temperatures, and, summed over its runs, the mean likelihood evaluations per particle and the moves
_LOG_Z, _STEPS, _EVALUATIONS, _MOVES = 0, 1, 4, 6


class SamplerWork:
    """Tempered SMC's work while the context is active, counted where it is done: every call of the compiled
    sampler (``bayesvm.normalization.annealing.smc_runs``: the search's anchors, the checks' rounds and
    ``log_evidence``'s) and of the path's moves at the target (``bayesvm.normalization.path.moves_at_target``, a
    refinement's particles). The sampler's outputs are kept as they come and read only in :meth:`totals`, so the
    counting does not make the caller wait on them."""

    def __init__(self):
        self._annealed: list[tuple[int, tuple]] = []  # (particles per run, the sampler's outputs)
        self._target_moves = 0

    def __enter__(self):
        self._smc_runs, self._moves_at_target = annealing.smc_runs, path.moves_at_target

        def counted_runs(*args, **kwargs):
            out = self._smc_runs(*args, **kwargs)
            self._annealed.append((int(kwargs["n_particles"]), out))
            return out

        def counted_moves(log_likelihood, chol, key, args, theta, n_mcmc_steps, **kwargs):
            self._target_moves += int(np.prod(np.shape(theta)[:2])) * int(n_mcmc_steps)
            return self._moves_at_target(log_likelihood, chol, key, args, theta, n_mcmc_steps, **kwargs)

        annealing.smc_runs, path.moves_at_target = counted_runs, counted_moves
        return self

    def __exit__(self, *exc):
        annealing.smc_runs, path.moves_at_target = self._smc_runs, self._moves_at_target

    def totals(self) -> dict:
        """Calls of the sampler, independent runs, particles (summed over runs), temperatures (summed over runs),
        slice moves of one particle each (the annealing's and the path's at the target) and the likelihood
        evaluations inside the annealing's moves."""
        runs = [int(np.shape(out[_LOG_Z])[0]) for _, out in self._annealed]
        return {
            "sampler_calls": len(self._annealed),
            "runs": int(sum(runs)),
            "particles": int(sum(r * n for r, (n, _) in zip(runs, self._annealed))),
            "temperatures": int(sum(int(np.sum(np.asarray(out[_STEPS]))) for _, out in self._annealed)),
            # the sampler's moves are sweeps over all n particles of a run, its evaluations means per particle
            "slice_moves": int(sum(n * float(out[_MOVES]) for n, out in self._annealed)) + self._target_moves,
            "likelihood_evaluations": int(sum(n * float(out[_EVALUATIONS]) for n, out in self._annealed)),
        }


def run_evaluation(X, y, hyperparameters: dict, *, full_prior_max: int, inducing: int, random_state: int) -> dict:
    """One ``log_evidence`` at the RBF kernel's ``hyperparameters`` (a search record's) on every row of X: the full
    prior up to ``full_prior_max`` rows, the low-rank prior through ``inducing`` inputs above; seconds, ln P(D) and
    its terms, whether ln N(D) is trusted, EP's sweeps (full prior) and the sampler's work."""
    kernel = RBF(amplitude=hyperparameters["amplitude"], offset=hyperparameters["offset"],
                 length_scale=hyperparameters["length_scale"])
    low_rank = X.shape[0] > full_prior_max
    with SamplerWork() as work, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.perf_counter()
        evidence = log_evidence(X, y, C=hyperparameters["C"], kernel=kernel, random_state=random_state,
                                inducing=inducing if low_rank else None)
        seconds = time.perf_counter() - started
    return {
        "seconds": seconds, "random_state": random_state,
        "prior": f"low-rank (m = {inducing})" if low_rank else "full",
        "log_evidence": float(evidence.total), "log_evidence_se": float(evidence.total_se),
        "log_naive_evidence": float(evidence.naive), "log_normalization": float(evidence.log_normalization),
        "log_normalization_se": float(evidence.log_normalization_se),
        "trusted": bool(evidence.normalization_trusted and evidence.naive_converged),
        "ep_sweeps": None if evidence.ep is None else int(evidence.ep.n_iter),
        "sampler": work.totals(),
        "warning_messages": sorted({f"{w.category.__name__}: {str(w.message)[:200]}" for w in caught}),
    }


def _capped(y, train: np.ndarray, test: np.ndarray, max_test: int | None, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The training rows, and the test rows cut to a stratified ``max_test`` of them (all with None)."""
    if max_test is None or test.size <= max_test:
        return train, test
    return train, test[subsample(y[test], max_test, seed)[0]]


def _brief(record: dict) -> dict:
    """What the scaling run keeps of an arm's record (selection.py's runners)."""
    keep = ("fit_s", "predict_s", "search_s", "calibration_s", "error", "nll", "hyperparameters", "log_evidence",
            "log_evidence_se", "counts", "report", "at_bound", "n_support", "n_marginal", "flags",
            "load_before", "load_after", "log_marginal_likelihood")
    out = {k: record[k] for k in keep if k in record}
    out["warnings"] = len(record["warnings"])
    out["warning_messages"] = sorted({f"{w['category']}: {w['message'][:200]}" for w in record["warnings"]})
    return out


def slope(sizes, seconds) -> float | None:
    """The log-log slope of t against n (None with fewer than two positive points)."""
    pairs = [(n, t) for n, t in zip(sizes, seconds) if t is not None and t > 0]
    if len(pairs) < 2:
        return None
    n, t = np.array(pairs, dtype=float).T
    return float(np.polyfit(np.log(n), np.log(t), 1)[0])


def series(rows: list[dict]) -> dict[str, tuple[list[int], list[float]]]:
    """(sizes, seconds) per timed series."""
    out: dict[str, tuple[list[int], list[float]]] = {}

    def add(name, n, t):
        if t is not None:
            out.setdefault(name, ([], []))
            out[name][0].append(n)
            out[name][1].append(t)

    for row in rows:
        n = row["n"]
        if "search" in row:
            add("search (warm)", n, row["search"]["warm"]["fit_s"])
            add("search (first fit at this n)", n, row["search"]["first"]["fit_s"])
            c = row["search"]["warm"]["counts"]
            add("search: s per evaluation", n, c["seconds_search"] / c["evaluations"] if c["evaluations"] else None)
        if "cv+platt" in row:
            add("cv+platt", n, row["cv+platt"]["fit_s"])
        if "gpc" in row:
            add("gpc", n, row["gpc"]["fit_s"])
        if row.get("evaluation"):
            add("one evaluation of ln P(D) (warm)", n, row["evaluation"][-1]["seconds"])
    return out


def slopes(rows: list[dict]) -> dict[str, float | None]:
    return {name: slope(n, t) for name, (n, t) in series(rows).items()}


def table(rows: list[dict], arms: list[str]) -> str:
    header = ["n"]
    if "search" in arms:
        header += ["search warm s", "first s", "evals", "EP sweeps", "factorisations", "anchors", "SMC runs",
                   "slice moves (M)", "s search", "s check", "trusted", "ln P(D)", "error", "NLL"]
    if "evaluation" in arms:
        header += ["evaluation s (first / warm)", "prior", "EP sweeps", "SMC runs x mean particles", "slice moves (M)",
                   "trusted"]
    if "cv+platt" in arms:
        header += ["cv+platt s (rows)", "cv/search", "error", "NLL"]
    if "gpc" in arms:
        header += ["gpc s", "error", "NLL"]
    header += ["flags"]
    body = []
    for row in rows:
        cells = [str(row["n"])]
        warm = row.get("search", {}).get("warm")
        if "search" in arms:
            c, w = warm["counts"], warm.get("sampler")
            cells += [f"{warm['fit_s']:.1f}", f"{row['search']['first']['fit_s']:.1f}", str(c["evaluations"]),
                      str(c["ep_sweeps"]), str(c["factorizations"]), str(c["anchors"]),
                      "-" if w is None else str(w["runs"]), "-" if w is None else f"{w['slice_moves'] / 1e6:.2f}",
                      f"{c['seconds_search']:.1f}", f"{c['seconds_check']:.1f}",
                      "yes" if warm["report"]["trusted"] else "NO", f"{warm['log_evidence']:.2f}",
                      f"{warm['error']:.3f}", f"{warm['nll']:.3f}"]
        if "evaluation" in arms and not row.get("evaluation"):
            cells += ["-"] * 6
        elif "evaluation" in arms:
            first_e, last_e = row["evaluation"][0], row["evaluation"][-1]
            w = last_e["sampler"]
            per_run = w["particles"] // w["runs"] if w["runs"] else 0
            cells += [f"{first_e['seconds']:.1f} / {last_e['seconds']:.1f}", last_e["prior"],
                      str(last_e["ep_sweeps"] if last_e["ep_sweeps"] is not None else "-"),
                      f"{w['runs']} x {per_run}" + ("" if w["sampler_calls"] else " (none)"),
                      f"{w['slice_moves'] / 1e6:.2f}", "yes" if last_e["trusted"] else "NO"]
        if "cv+platt" in arms:
            cv = row["cv+platt"]
            ratio = f"{cv['fit_s'] / warm['fit_s']:.2g}x" if warm else "-"
            cells += [f"{cv['fit_s']:.1f} ({cv.get('rows', row['n'])})", ratio, f"{cv['error']:.3f}",
                      f"{cv['nll']:.3f}"]
        if "gpc" in arms:
            g = row["gpc"]
            cells += [f"{g['fit_s']:.1f}", f"{g['error']:.3f}", f"{g['nll']:.3f}"]
        flagged = [f"{a}: {', '.join(row[a]['flags'])}" for a in ("cv+platt", "gpc") if a in row and row[a]["flags"]]
        if warm and warm["flags"]:
            flagged.insert(0, f"search: {', '.join(warm['flags'])}")
        cells.append("; ".join(flagged) or "-")
        body.append(cells)
    fitted = slopes(rows)
    lines = "\n".join(f"  {name}: {'-' if s is None else f'{s:.2f}'}" for name, s in fitted.items())
    return (_markdown(header, body) + "\n\nlog-log slopes (np.polyfit(log n, log t, 1)):\n" + lines)


def figure(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"search (warm)": ("C0", "o", "-"), "search (first fit at this n)": ("C0", "o", ":"),
              "search: s per evaluation": ("C0", "x", "--"), "cv+platt": ("C1", "s", "-"), "gpc": ("C2", "^", "-"),
              "one evaluation of ln P(D) (warm)": ("C3", "d", "-.")}
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for name, (n, t) in series(rows).items():
        color, marker, line = styles.get(name, ("k", ".", "-"))
        s = slope(n, t)
        ax.loglog(n, t, marker=marker, linestyle=line, color=color,
                  label=f"{name}" + ("" if s is None else f" (slope {s:.2f})"))
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    sizes = sorted({row["n"] for row in rows})
    ax.set_xticks(sizes)
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("training points n")
    ax.set_ylabel("wall time, s")
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _resumed(args) -> list[dict]:
    """The rows of an earlier run in ``args.out`` at the sizes asked for (``SystemExit`` if its arms differ)."""
    if not args.out.exists():
        return []
    saved = json.loads(args.out.read_text())
    if saved["config"]["arms"] != args.arms or saved["config"]["dataset"] != args.dataset:
        raise SystemExit(f"--resume: {args.out} has arms {saved['config']['arms']} on {saved['config']['dataset']}, "
                         f"not {args.arms} on {args.dataset}")
    rows = [row for row in saved["rows"] if row["n"] in args.sizes]
    print(f"resumed {[row['n'] for row in rows]} from {args.out}", flush=True)
    return rows


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=DEFAULT_DATASET, help=f"default {DEFAULT_DATASET} (of {DATASETS})")
    parser.add_argument("--sizes", nargs="+", type=int, default=None,
                        help=f"training-set sizes (default {' '.join(map(str, DEFAULT_SIZES))}; --quick "
                             f"{' '.join(map(str, QUICK_SIZES))})")
    parser.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS))
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=1, help="processes for GridSearchCV (default 1)")
    parser.add_argument("--random-state", type=int, default=0, help="seed of the subsamples")
    parser.add_argument("--quick", action="store_true", help="smoke run: n = 60, 120")
    parser.add_argument("--full-prior-max", type=int, default=1000,
                        help="the evaluation arm's full prior up to this many points (default 1000), low-rank above")
    parser.add_argument("--inducing", type=int, default=200,
                        help="the evaluation arm's inducing inputs above --full-prior-max (default 200)")
    parser.add_argument("--evaluation-max-n", type=int, default=1000,
                        help="the evaluation arm at sizes up to this (default 1000)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows of an earlier run in --out at these sizes; fit the other sizes")
    parser.add_argument("--evaluation-repeats", type=int, default=2,
                        help="evaluations per n, seeds 0, 1, ... (default 2: the first compiling, the rest warm)")
    parser.add_argument("--cv-max-train", type=int, default=None,
                        help="grid search + Platt on a stratified subsample of this many training rows (default all)")
    parser.add_argument("--max-test", type=int, default=None,
                        help="a stratified subsample of this many test rows (default: every row not trained on)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--figure", type=Path, default=None)
    parser.add_argument("--replot", action="store_true",
                        help="fit nothing: redraw the figure and the table from the JSON (--out) of an earlier run")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    args.sizes = sorted(set(args.sizes))
    if args.cv_max_train is None:
        args.cv_max_train = max(args.sizes)
    if args.out is None:
        args.out = RESULTS / ("selection_scaling_quick.json" if args.quick else "selection_scaling.json")
    if args.figure is None:
        args.figure = RESULTS / "selection_scaling_quick.png" if args.quick else FIGURE
    args.arms = [a for a in ARMS if a in args.arms]
    return args


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.replot:
        saved = json.loads(args.out.read_text())
        rows, config = saved["rows"], saved["config"]
        arms = [a for a in ARMS if all(a in row for row in rows)]
        figure(rows, args.figure, f"selection time vs n: {config['dataset']}, one fit per n and arm"
                                  f"{' (quick smoke run)' if config.get('quick') else ''}")
        print(table(rows, arms))
        print(f"\nredrew {args.figure} from {args.out}")
        return
    X, y = load_dataset(args.dataset, return_X_y=True)
    too_big = [n for n in args.sizes if n > y.size - MIN_TEST]
    if too_big:
        raise SystemExit(f"{args.dataset} has {y.size} points: sizes {too_big} leave fewer than {MIN_TEST} to test on")
    config = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    config.update(n=int(y.size), d=int(X.shape[1]), svc_C=SVC_C.tolist(), svc_gamma=SVC_GAMMA.tolist())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    print(f"{args.dataset} ({y.size} x {X.shape[1]}); sizes {args.sizes}; arms {', '.join(args.arms)}", flush=True)
    rows = _resumed(args) if args.resume else []
    start_all = time.perf_counter()
    for i, n in enumerate(args.sizes):
        if any(row["n"] == n for row in rows):
            continue
        seed = args.random_state + 1000 * i
        first_train, first_test = _capped(y, *subsample(y, n, seed), args.max_test, seed)
        train, test = _capped(y, *subsample(y, n, seed + 1), args.max_test, seed + 1)
        data = (X[train], y[train], X[test], y[test])
        row = {"n": n, "n_test": int(test.size), "overlap_first_second": int(np.intersect1d(train, first_train).size)}
        if "search" in args.arms:
            row["search"] = {}
            for name, (fit_rows, test_rows) in (("first", (first_train, first_test)), ("warm", (train, test))):
                with SamplerWork() as work:
                    record = _brief(run_search(X[fit_rows], y[fit_rows], X[test_rows], y[test_rows]))
                row["search"][name] = {**record, "sampler": work.totals()}
            first, warm = row["search"]["first"], row["search"]["warm"]
            c, w = warm["counts"], warm["sampler"]
            print(f"  n={n} search: first {first['fit_s']:.1f} s, warm {warm['fit_s']:.1f} s "
                  f"({c['evaluations']} evaluations, {c['ep_sweeps']} EP sweeps, {c['factorizations']} "
                  f"factorisations, {c['anchors']} anchors; SMC: {w['runs']} runs, {w['particles']} particles, "
                  f"{w['slice_moves']} slice moves), trusted {warm['report']['trusted']}, "
                  f"error {warm['error']:.3f}, NLL {warm['nll']:.3f}, flags {warm['flags'] or '-'}", flush=True)
        if "evaluation" in args.arms and n <= args.evaluation_max_n:
            if "search" not in row:
                raise SystemExit("the evaluation arm evaluates at the search's choice: run it with --arms search")
            row["evaluation"] = [run_evaluation(X[train], y[train], row["search"]["warm"]["hyperparameters"],
                                                full_prior_max=args.full_prior_max, inducing=args.inducing,
                                                random_state=r) for r in range(args.evaluation_repeats)]
            for e in row["evaluation"]:
                w = e["sampler"]
                print(f"  n={n} evaluation ({e['prior']}, seed {e['random_state']}): {e['seconds']:.1f} s, "
                      f"ln P(D) {e['log_evidence']:.2f} +- {e['log_evidence_se']:.2f}, trusted {e['trusted']}, "
                      f"EP sweeps {e['ep_sweeps']}; SMC: {w['runs']} runs, {w['particles']} particles, "
                      f"{w['slice_moves']} slice moves, {w['likelihood_evaluations']} likelihood evaluations",
                      flush=True)
        if "cv+platt" in args.arms:
            cv_rows = train if n <= args.cv_max_train else train[subsample(y[train], args.cv_max_train, seed + 2)[0]]
            row["cv+platt"] = {**_brief(run_cv_platt(X[cv_rows], y[cv_rows], X[test], y[test], folds=args.folds,
                                                     n_jobs=args.n_jobs)), "rows": int(cv_rows.size)}
            print(f"  n={n} cv+platt ({cv_rows.size} rows): {row['cv+platt']['fit_s']:.1f} s, "
                  f"error {row['cv+platt']['error']:.3f}, NLL {row['cv+platt']['nll']:.3f}, "
                  f"flags {row['cv+platt']['flags'] or '-'}", flush=True)
        if "gpc" in args.arms:
            row["gpc"] = _brief(run_gpc(*data))
            print(f"  n={n} gpc: {row['gpc']['fit_s']:.1f} s, error {row['gpc']['error']:.3f}, "
                  f"NLL {row['gpc']['nll']:.3f}, flags {row['gpc']['flags'] or '-'}", flush=True)
        rows = sorted(rows + [row], key=lambda r: r["n"])
        payload = {"config": config, "environment": environment(), "counts_recorded": list(COUNTS), "rows": rows,
                   "slopes": slopes(rows), "total_s": time.perf_counter() - start_all}
        args.out.write_text(json.dumps(_plain(payload), indent=1))
    title = (f"selection time vs n: {args.dataset}, one fit per n and arm"
             f"{' (quick smoke run)' if args.quick else ''}")
    figure(rows, args.figure, title)
    print()
    print(table(rows, args.arms))
    print(f"\ntotal {time.perf_counter() - start_all:.0f} s; wrote {args.out} and {args.figure}")


if __name__ == "__main__":
    main()

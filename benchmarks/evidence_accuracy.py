"""Accuracy of the naive-evidence approximations ln Q(D): Laplace-style, EP, annealed sampling.

Question: how far is each deterministic approximation of the naive evidence

    ln Q(D) = n ln kappa(C) + ln INT N(theta; 0, K) exp(-C sum_i l(y_i theta_i)) dtheta

from the truth, and where do their maxima over the hyperparameters land?

* ``laplace``: Sollich's Laplace-style form, regularised determinant
  det(I + L_m K_m) (the default) and the raw det(L_m K_m) (docs/theory.md);
* ``ep``: expectation propagation (docs/ep.md);
* ``sampled``: the reference, annealed tempered SMC (docs/normalisation.md),
  with stronger settings than the library default and a reliability check
  (below).

Data: the model's own toy data (``make_toy``, 2-D uniform inputs, RBF length
scale 0.3, amplitude = offset = 2, C = 1) and stratified subsamples of
breast_cancer, digits_3v8, pima, ionosphere and synth, all with n = 80
(``--n``), features standardised by the loaders.

Grid per data set (14 points): RBF length scale l = f * (median pairwise
distance) with f in {short, mid, 1, 2}, C k0 in {1, 10, 100} at C = 1 (4 x 3),
plus C = 0.3 and C = 3 at (mid, C k0 = 10); offset = amplitude = k0 throughout.
short/mid = 0.25/0.5 for the data sets with d >= 8 and 0.1/0.3 for the 2-D
ones (toy, synth), chosen so that at (short, C k0 = 100) most points are
marginal (the hard corner; docs/theory.md).

Sampling and its reliability. Stage 1: 32 independent SMC runs of 128
particles, 10 elliptical-slice moves per temperature, target ESS 0.8. The
value is trusted when the effective number of runs is at least 16 of 32 AND
the two halves of 16 runs (independent estimates) agree within
max(0.5 nats, 3 combined standard errors). Otherwise stage 2 repeats it with
512 particles; a point that still fails is flagged ``unreliable`` and left out
of the error statistics (it is still shown, marked).

Predictors of the Laplace error, from the MAP fit alone: the fraction of
marginal points; the kink width w_i = 1/a_i + 1/(C - a_i) (the area of a
marginal point's exp(kink)) against the prior sd sqrt(K_ii) and against the
conditional prior sd s_i = 1 / sqrt([K_m^-1]_ii) of theta_i given the other
marginal points; and a "1-D prediction": the sum over marginal points of the
Laplace error of the one-dimensional integral INT N(u; 1 - a_i s_i^2, s_i^2)
exp(-C l(u)) du (exact: two Gaussian CDF terms; Laplace: -b^2/2 -
ln(1 + 2 pi s_i^2 / w_i^2) / 2 with b = a_i s_i), i.e. the form applied to
each marginal point on its own, couplings dropped; and the same for the
non-marginal points ("1-D prediction, all points"): the Laplace form treats
their hinge as linear everywhere, and the error of that under
q = N(u; y_i theta_i, s_i^2), s_i^2 the prior variance of theta_i
conditional on the marginal points, is -ln E_q[exp(-C (u - 1)_+)] (a_i = C)
or -ln E_q[exp(-C (1 - u)_+)] (a_i = 0).

Also ln N(D) by EP (``ep_log_normalization``, the training inputs standing in
for Q(x)), common to all three, to compare argmaxes of ln P(D) = ln Q - ln N.

Usage:
    python benchmarks/evidence_accuracy.py            # full study (25 min on a loaded 2-core machine)
    python benchmarks/evidence_accuracy.py --quick    # 2 data sets x 3 points, smoke run
    python benchmarks/evidence_accuracy.py --datasets toy pima
Writes benchmarks/results/evidence_accuracy.json (``--output``) and, with
``--figure PATH``, a scatter figure of the errors against the predictors.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

import numpy as np
import scipy.linalg
from scipy.spatial.distance import pdist
from scipy.special import log_ndtr, logsumexp
from scipy.stats import pearsonr, spearmanr
from _common import provenance
from sklearn.model_selection import train_test_split

import bayesvm
from bayesvm.normalization.annealing import annealed_log_naive_evidence, prior_factor
from bayesvm.datasets import load_dataset, make_toy
from bayesvm.inference.ep import ep_log_evidence, ep_log_normalization
from bayesvm.evidence.log_evidence import naive_evidence
from bayesvm.kernels import gram_matrix

DATASETS = ("toy", "breast_cancer", "digits_3v8", "pima", "ionosphere", "synth")
LOW_DIM = ("toy", "synth")
RESULTS = Path(__file__).parent / "results"

TOY = dict(length_scale=0.3, amplitude=2.0, offset=2.0, C=1.0)

STAGE1 = dict(n_particles=128, n_runs=32, n_mcmc_steps=10, target_ess=0.8)
STAGE2 = dict(n_particles=512, n_runs=32, n_mcmc_steps=10, target_ess=0.8)
AGREE_NATS = 0.5
AGREE_SE = 3.0

LAPLACE_WARN_NATS = 5.0


# ---------------------------------------------------------------- data and grid


def load(name: str, n: int, seed: int):
    if name == "toy":
        kernel = bayesvm.RBF(length_scale=TOY["length_scale"], amplitude=TOY["amplitude"], offset=TOY["offset"])
        toy = make_toy(n, kernel=kernel, C=TOY["C"], input_distribution="uniform", n_features=2, random_state=seed)
        return toy.X, toy.y
    X, y = load_dataset(name, return_X_y=True)
    if n < X.shape[0]:
        X, _, y, _ = train_test_split(X, y, train_size=n, stratify=y, random_state=seed)
    return X, y


def grid(name: str, X: np.ndarray, quick: bool = False) -> list[dict]:
    median = float(np.median(pdist(X)))
    short, mid = (0.1, 0.3) if name in LOW_DIM else (0.25, 0.5)
    if quick:
        points = [(short, 100.0, 1.0), (mid, 10.0, 1.0), (1.0, 1.0, 1.0)]
    else:
        points = [(f, ck0, 1.0) for f in (short, mid, 1.0, 2.0) for ck0 in (1.0, 10.0, 100.0)]
        points += [(mid, 10.0, 0.3), (mid, 10.0, 3.0)]
    return [
        dict(length_factor=f, length_scale=f * median, Ck0=ck0, C=C, amplitude=ck0 / C, offset=ck0 / C)
        for f, ck0, C in points
    ]


# ---------------------------------------------------------------- predictors


def _one_d_log_z(a, C, s):
    """ln INT N(u; 1 - a s^2, s^2) exp(-C max(0, 1 - u)) du, exact (docs/ep.md section 2)."""
    b = a * s
    log_z1 = log_ndtr(-b)
    log_z2 = C * s * (C * s / 2.0 - b) + log_ndtr(b - C * s)
    return np.logaddexp(log_z1, log_z2)


def _one_d_laplace(a, C, s):
    """The regularised Laplace-style form of the same one-dimensional integral."""
    w = C / (a * (C - a))
    return -0.5 * (a * s) ** 2 - 0.5 * np.log1p(2.0 * np.pi * s**2 / w**2)


def _non_marginal_error(u0, at_C, C, sd):
    """-ln E_q[true site / linear site], q = N(u0, sd^2): the Laplace form's error from one non-marginal hinge."""
    # a_i = C (u0 < 1): the site is taken as exp(-C (1 - u)) everywhere; the truth is 1 for u > 1
    log_c = np.logaddexp(log_ndtr((1 - u0) / sd), -C * (u0 - 1) + (C * sd) ** 2 / 2 + log_ndtr((u0 - 1 - C * sd**2) / sd))
    # a_i = 0 (u0 > 1): the site is taken as 1 everywhere; the truth is exp(-C (1 - u)) for u < 1
    log_0 = np.logaddexp(log_ndtr((u0 - 1) / sd), -C * (1 - u0) + (C * sd) ** 2 / 2 + log_ndtr((1 - u0 - C * sd**2) / sd))
    return -np.where(at_C, log_c, log_0)


def predictors(fit, K: np.ndarray) -> dict:
    m = fit.marginal
    C = fit.C
    u0 = fit.y * fit.theta
    out = dict(n_marginal=int(m.sum()), marginal_fraction=float(m.mean()))
    if not m.any():
        sd = np.sqrt(np.diag(K))
        e_non = _non_marginal_error(u0, fit.alpha >= C, C, sd)
        return {**out, "kink_over_prior_sd": 0.0, "kink_over_cond_sd": 0.0, "median_kink_over_cond_sd": 0.0,
                "predicted_error_1d": 0.0, "predicted_error_1d_prior": 0.0,
                "predicted_error_1d_all": float(np.sum(e_non)), "n_near_margin": int(np.sum(np.abs(u0 - 1) < sd))}
    a = fit.alpha[m]
    w = C / (a * (C - a))  # kink width (area of exp(kink))
    K_m = K[np.ix_(m, m)]
    prior_sd = np.sqrt(np.diag(K_m))
    jitter = 1e-10 * float(np.mean(np.diag(K_m)))
    L = scipy.linalg.cholesky(K_m + jitter * np.eye(K_m.shape[0]), lower=True)
    L_inv = scipy.linalg.solve_triangular(L, np.eye(K_m.shape[0]), lower=True)
    cond_sd = 1.0 / np.sqrt(np.sum(L_inv**2, axis=0))
    e_cond = _one_d_laplace(a, C, cond_sd) - _one_d_log_z(a, C, cond_sd)
    e_prior = _one_d_laplace(a, C, prior_sd) - _one_d_log_z(a, C, prior_sd)
    # non-marginal points: prior variance conditional on the marginal ones
    nm = ~m
    V = L_inv @ K[np.ix_(m, nm)]
    sd_nm = np.sqrt(np.maximum(np.diag(K)[nm] - np.sum(V**2, axis=0), 1e-12 * float(np.mean(np.diag(K)))))
    e_non = _non_marginal_error(u0[nm], fit.alpha[nm] >= C, C, sd_nm)
    return {
        **out,
        "kink_over_prior_sd": float(np.mean(w / prior_sd)),
        "kink_over_cond_sd": float(np.mean(w / cond_sd)),
        "median_kink_over_cond_sd": float(np.median(w / cond_sd)),
        "predicted_error_1d": float(np.sum(e_cond)),
        "predicted_error_1d_prior": float(np.sum(e_prior)),
        "predicted_error_1d_all": float(np.sum(e_cond) + np.sum(e_non)),
        "n_near_margin": int(np.sum(np.abs(u0[nm] - 1) < sd_nm)),
    }


# ---------------------------------------------------------------- sampling


def sampled(chol, y, C: float, seed: int, options: dict) -> dict:
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the diagnostics below replace the warning
        r = annealed_log_naive_evidence(None, y, C, chol=chol, key=seed, **options)
    seconds = time.perf_counter() - start
    runs = np.asarray(r.log_z_runs)
    R = runs.size
    halves = [runs[: R // 2], runs[R // 2:]]
    half_values, half_se = [], []
    for h in halves:
        value = logsumexp(h) - np.log(h.size)
        ratio = np.exp(h - value)
        half_values.append(float(value))
        half_se.append(float(np.sqrt(np.sum((ratio - 1.0) ** 2) / (h.size * (h.size - 1)))))
    gap = abs(half_values[0] - half_values[1])
    tolerance = max(AGREE_NATS, AGREE_SE * float(np.hypot(*half_se)))
    trusted = bool(r.ess >= R / 2 and gap <= tolerance)
    return dict(
        value=float(r.value), se=float(r.se), ess=float(r.ess), n_runs=R, spread=float(np.std(runs)),
        halves=half_values, halves_gap=float(gap), agree_tolerance=float(tolerance), trusted=trusted,
        n_temperatures=int(r.n_temperatures), min_particle_ess=float(r.min_particle_ess),
        slice_evaluations=float(r.mean_slice_evaluations), stuck_fraction=float(r.stuck_fraction),
        options=dict(options), seconds=seconds,
    )


# ---------------------------------------------------------------- one grid point


def evaluate(X, y, point: dict, seed: int) -> dict:
    start = time.perf_counter()
    kernel = bayesvm.RBF(length_scale=point["length_scale"], amplitude=point["amplitude"], offset=point["offset"])
    caught = []
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")
        fit = bayesvm.fit_map(X, y, C=point["C"], kernel=kernel)
        K_j = gram_matrix(fit.kernel, fit.X)  # NumPy in: converted to float64 inside bayesvm
        K = np.asarray(K_j)
        lap = naive_evidence(fit, "laplace").value
        raw = naive_evidence(fit, "laplace", determinant="raw").value
        ep = ep_log_evidence(K_j, fit.y, fit.C)
        ep_norm = ep_log_normalization(K_j, fit.C)
        caught += [str(w.message).split(";")[0] for w in log]
    record = dict(point)
    record.update(predictors(fit, K))
    record.update(
        n=int(fit.X.shape[0]), n_support=int((fit.alpha > 0).sum()), n_at_C=int((fit.alpha >= fit.C).sum()),
        laplace=float(lap), laplace_raw=float(raw) if np.isfinite(raw) else None,
        ep=float(ep.log_z), ep_converged=bool(ep.converged), ep_iterations=int(ep.n_iter),
        log_normalization_ep=float(ep_norm.log_z), log_normalization_ep_converged=bool(ep_norm.converged),
        warnings=sorted(set(caught)),
    )
    chol = prior_factor(K_j)
    stage1 = sampled(chol, fit.y, fit.C, seed, STAGE1)
    stages = [stage1]
    if not stage1["trusted"]:
        stages.append(sampled(chol, fit.y, fit.C, seed + 1, STAGE2))
    final = stages[-1]
    record["sampled"] = final
    record["sampled_stages"] = stages
    s = final["value"]
    n = record["n"]
    record["error_laplace"] = record["laplace"] - s
    record["error_laplace_raw"] = None if record["laplace_raw"] is None else record["laplace_raw"] - s
    record["error_ep"] = record["ep"] - s
    for key in ("error_laplace", "error_laplace_raw", "error_ep"):
        record[key + "_per_point"] = None if record[key] is None else record[key] / n
    record["seconds"] = time.perf_counter() - start
    return record


# ---------------------------------------------------------------- summaries


def _fmt(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def point_label(r: dict) -> str:
    """Three table cells: l/med | C k0 | C."""
    return f"{r['length_factor']:g} | {r['Ck0']:g} | {r['C']:g}"


def point_name(r: dict) -> str:
    """l/med, C k0, C as one short name (one table cell)."""
    return f"{r['length_factor']:g}/{r['Ck0']:g}/{r['C']:g}"


def _solver_warned(r: dict) -> bool:
    """The MAP solver stopped above its KKT tolerance: the marginal set (and so the Laplace value) is inexact."""
    return any("dual solver" in w for w in r["warnings"])


def point_table(name: str, records: list[dict]) -> str:
    lines = [
        f"**{name}** (n = {records[0]['n']})",
        "",
        "| l/med | C k0 | C | marg | Laplace | raw | EP | sampled | err Lap | err raw | err EP | ESSr | spread | T |",
        "|---|---|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        s = r["sampled"]
        flag = "" if s["trusted"] else " (unrel.)"
        stage = "*" if len(r["sampled_stages"]) > 1 else ""
        kkt = " (KKT)" if _solver_warned(r) else ""
        lines.append(
            f"| {point_label(r)} | {r['n_marginal']}{kkt} | {r['laplace']:.1f} | {_fmt(r['laplace_raw'], '.1f')} | "
            f"{r['ep']:.2f}{'' if r['ep_converged'] else ' (nc)'} | {s['value']:.2f} +- {s['se']:.2f}{stage}{flag} | "
            f"{r['error_laplace']:+.1f} | {_fmt(r['error_laplace_raw'], '+.1f')} | {r['error_ep']:+.2f} | "
            f"{s['ess']:.1f} | {s['spread']:.2f} | {s['n_temperatures']} |"
        )
    return "\n".join(lines)


def argmax_summary(records: list[dict]) -> dict:
    """Per data set: where each approximation's maximum lands, and the sampled ln Q (and ln P) lost there."""
    out = {}
    sampled_q = np.array([r["sampled"]["value"] for r in records])
    se = np.array([r["sampled"]["se"] for r in records])
    log_n = np.array([r["log_normalization_ep"] for r in records])
    for target, offset in (("lnQ", 0.0 * log_n), ("lnP", log_n)):
        truth = sampled_q - offset
        best = int(np.argmax(truth))
        entry = {"sampled_argmax": point_name(records[best]), "sampled_max": float(truth[best]),
                 "sampled_argmax_trusted": bool(records[best]["sampled"]["trusted"]),
                 "runner_up_gap": float(np.sort(truth)[-1] - np.sort(truth)[-2]) if truth.size > 1 else None}
        for approx in ("laplace", "laplace_raw", "ep"):
            values = np.array([np.nan if r[approx] is None else r[approx] for r in records]) - offset
            if not np.any(np.isfinite(values)):
                continue
            i = int(np.nanargmax(np.where(np.isfinite(values), values, -np.inf)))
            entry[approx] = {
                "argmax": point_name(records[i]),
                "same": i == best,
                "sampled_lost": float(truth[best] - truth[i]),
                "lost_se": float(np.hypot(se[best], se[i])) if i != best else 0.0,
                "n_marginal_at_argmax": records[i]["n_marginal"],
                "spearman_vs_sampled": float(spearmanr(values[np.isfinite(values)], truth[np.isfinite(values)]).statistic)
                if truth.size > 2 else None,
            }
        out[target] = entry
    return out


def argmax_table(summaries: dict) -> str:
    lines = []
    for target, title in (("lnQ", "ln Q(D)"), ("lnP", "ln P(D) = ln Q(D) - ln N(D), ln N(D) by EP (common)")):
        lines += [
            f"Argmax of {title} over the grid (l/med / C k0 / C); 'lost' = sampled value at the sampled argmax "
            "minus sampled value at the approximation's argmax",
            "",
            "(rho = Spearman rank correlation with the sampled values over the grid; gap = sampled best minus "
            "second best)",
            "",
            "| data | sampled argmax (gap) | Laplace argmax (lost), rho | raw argmax (lost), rho | EP argmax (lost), rho |",
            "|---|---|---|---|---|",
        ]
        for name, summary in summaries.items():
            e = summary[target]
            cells = []
            for approx in ("laplace", "laplace_raw", "ep"):
                if approx not in e:
                    cells.append("-")
                    continue
                a = e[approx]
                where = "same" if a["same"] else f"{a['argmax']} ({a['sampled_lost']:.1f} +- {a['lost_se']:.1f})"
                rho = a.get("spearman_vs_sampled")
                cells.append(where + ("" if rho is None else f", {rho:.2f}"))
            trust = "" if e["sampled_argmax_trusted"] else " (unrel.)"
            gap = "" if e.get("runner_up_gap") is None else f" ({e['runner_up_gap']:.2f})"
            lines.append(f"| {name} | {e['sampled_argmax']}{trust}{gap} | " + " | ".join(cells) + " |")
        lines.append("")
    return "\n".join(lines)


PREDICTORS = ("marginal_fraction", "kink_over_prior_sd", "kink_over_cond_sd", "predicted_error_1d",
              "predicted_error_1d_all")


def predictor_analysis(records: list[dict]) -> dict:
    ok = [r for r in records if r["sampled"]["trusted"] and not _solver_warned(r)]
    out = {"n_points": len(ok), "n_unreliable": sum(not r["sampled"]["trusted"] for r in records),
           "n_solver_unconverged": sum(_solver_warned(r) and r["sampled"]["trusted"] for r in records),
           "correlations": {}, "thresholds": {}}
    if len(ok) < 4:
        return out
    for target in ("error_laplace", "error_laplace_per_point", "error_ep", "error_ep_per_point"):
        e = np.array([r[target] for r in ok])
        out["correlations"][target] = {}
        for p in PREDICTORS:
            x = np.array([r[p] for r in ok])
            out["correlations"][target][p] = {
                "spearman": float(spearmanr(x, e).statistic), "pearson": float(pearsonr(x, e).statistic)
            }
    e = np.array([r["error_laplace"] for r in ok])
    for p in PREDICTORS:
        x = np.array([r[p] for r in ok])
        big = e > LAPLACE_WARN_NATS
        # smallest threshold t such that every point with x > t has error > 5 nats
        t_sure = float(np.max(x[~big])) if np.any(~big) else float(np.min(x))
        # largest threshold below which no point has error > 5 nats
        t_safe = float(np.min(x[big])) if np.any(big) else float(np.max(x))
        out["thresholds"][p] = {
            "all_above_exceed_5_nats_if_x_gt": t_sure,
            "none_exceeds_5_nats_if_x_lt": t_safe,
            "points_above_t_sure": int(np.sum(x > t_sure)),
            "points_with_error_gt_5": int(np.sum(big)),
        }
    x = np.array([r["marginal_fraction"] for r in ok])
    out["marginal_fraction_levels"] = {}
    for level in (LAPLACE_WARN_NATS, 10.0, 20.0):
        big = e > level
        out["marginal_fraction_levels"][f"{level:g}"] = {
            "all_exceed_if_fraction_gt": float(np.max(x[~big])) if np.any(~big) else 0.0,
            "none_exceeds_if_fraction_lt": float(np.min(x[big])) if np.any(big) else 1.0,
            "points_exceeding": int(np.sum(big)),
        }
    out["laplace_error_range"] = [float(e.min()), float(e.max())]
    out["laplace_error_per_point_range"] = [float(e.min() / ok[0]["n"]), float(e.max() / ok[0]["n"])]
    ep = np.array([r["error_ep"] for r in ok])
    out["ep_error"] = {"mean": float(ep.mean()), "sd": float(ep.std()), "min": float(ep.min()), "max": float(ep.max()),
                       "abs_gt_0.5": int(np.sum(np.abs(ep) > 0.5)), "abs_gt_1": int(np.sum(np.abs(ep) > 1.0))}
    for p in ("marginal_fraction", "predicted_error_1d", "predicted_error_1d_all"):
        fit = np.polyfit([r[p] for r in ok], e, 1)
        resid = e - np.polyval(fit, [r[p] for r in ok])
        out[f"laplace_error_vs_{p}"] = {"slope": float(fit[0]), "intercept": float(fit[1]),
                                        "residual_sd": float(np.std(resid))}
    return out


def predictor_table(analysis: dict) -> str:
    if not analysis.get("correlations"):
        return "(too few trusted points for the predictor analysis)"
    lines = [
        f"Correlation (Spearman / Pearson) over {analysis['n_points']} trusted points "
        f"({analysis['n_unreliable']} with unreliable sampling and {analysis['n_solver_unconverged']} with an "
        "unconverged MAP solver left out)",
        "",
        "| error | " + " | ".join(PREDICTORS) + " |",
        "|---|" + "---|" * len(PREDICTORS),
    ]
    for target, row in analysis["correlations"].items():
        cells = (f"{row[p]['spearman']:.2f} / {row[p]['pearson']:.2f}" for p in PREDICTORS)
        lines.append(f"| {target} | " + " | ".join(cells) + " |")
    lines += ["", f"Thresholds for the Laplace error > {LAPLACE_WARN_NATS:g} nats", "",
              "| predictor | error > 5 for every x > | no error > 5 for x < | points above | points with error > 5 |",
              "|---|---:|---:|---:|---:|"]
    for p, t in analysis["thresholds"].items():
        lines.append(f"| {p} | {t['all_above_exceed_5_nats_if_x_gt']:.3g} | {t['none_exceeds_5_nats_if_x_lt']:.3g} | "
                     f"{t['points_above_t_sure']} | {t['points_with_error_gt_5']} |")
    lines += ["", "Laplace error levels against the fraction of marginal points", "",
              "| level (nats) | exceeded at every fraction > | never exceeded at fraction < | points exceeding |",
              "|---:|---:|---:|---:|"]
    for level, t in analysis["marginal_fraction_levels"].items():
        lines.append(f"| {level} | {t['all_exceed_if_fraction_gt']:.3g} | {t['none_exceeds_if_fraction_lt']:.3g} | "
                     f"{t['points_exceeding']} |")
    lo, hi = analysis["laplace_error_range"]
    lines += ["", f"Laplace error range {lo:.1f} to {hi:.1f} nats"]
    for p in ("marginal_fraction", "predicted_error_1d", "predicted_error_1d_all"):
        f = analysis[f"laplace_error_vs_{p}"]
        lines += [f"Least squares: Laplace error = {f['slope']:.2f} x {p} {f['intercept']:+.2f} nats "
                  f"(residual sd {f['residual_sd']:.1f})"]
    ep = analysis["ep_error"]
    lines += ["", f"EP - sampled: mean {ep['mean']:+.3f}, sd {ep['sd']:.3f}, range {ep['min']:+.2f} to {ep['max']:+.2f} "
                  f"nats; |error| > 0.5 at {ep['abs_gt_0.5']} points, > 1 at {ep['abs_gt_1']}"]
    return "\n".join(lines)


def figure(records: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["dataset"] for r in records))
    colours = dict(zip(names, plt.cm.tab10.colors))
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.3), layout="constrained")
    for r in records:
        trusted = r["sampled"]["trusted"]
        marker = "s" if _solver_warned(r) else ("o" if trusted else "x")
        style = dict(color=colours[r["dataset"]], marker=marker, s=28, alpha=0.85,
                     facecolors="none" if marker == "s" else None)
        axes[0].scatter(r["marginal_fraction"], r["error_laplace"], **style)
        axes[1].scatter(r["predicted_error_1d"], r["error_laplace"], **style)
        axes[2].scatter(r["marginal_fraction"], r["error_ep"], **style)
    lim = max(max(r["predicted_error_1d"] for r in records), max(r["error_laplace"] for r in records))
    axes[1].plot([0, lim], [0, lim], color="grey", lw=0.8, ls="--")
    for ax in axes[:2]:
        ax.axhline(LAPLACE_WARN_NATS, color="red", lw=0.8, ls=":")
    axes[0].set(xlabel="fraction of marginal points", ylabel="Laplace - sampled (nats)", title="Laplace (regularised)")
    axes[1].set(xlabel="1-D kink prediction of the Laplace error (nats)", ylabel="Laplace - sampled (nats)",
                title="Laplace error against its 1-D prediction")
    axes[2].set(xlabel="fraction of marginal points", ylabel="EP - sampled (nats)", title="EP")
    axes[2].axhline(0, color="grey", lw=0.8)
    for name in names:
        axes[0].scatter([], [], color=colours[name], label=name)
    axes[0].scatter([], [], color="k", marker="x", label="sampled unreliable")
    axes[0].scatter([], [], color="k", marker="s", facecolors="none", label="MAP solver unconverged")
    axes[0].legend(fontsize=8)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


# ---------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=None)
    parser.add_argument("--quick", action="store_true", help="2 data sets x 3 grid points (smoke run)")
    parser.add_argument("--n", type=int, default=80, help="points per data set (stratified subsample)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=RESULTS / "evidence_accuracy.json")
    parser.add_argument("--figure", type=Path, default=None, help="write the error scatter figure here")
    parser.add_argument("--from-json", type=Path, default=None,
                        help="only re-print the tables (and figure) from a saved results file")
    args = parser.parse_args()
    if args.from_json is not None:
        report(json.loads(args.from_json.read_text()), args.figure)
        return
    datasets = args.datasets or (["toy", "breast_cancer"] if args.quick else list(DATASETS))

    args.output.parent.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    all_records, summaries, dataset_info = [], {}, {}
    for name in datasets:
        X, y = load(name, args.n, args.seed)
        points = grid(name, X, quick=args.quick)
        dataset_info[name] = dict(n=int(X.shape[0]), d=int(X.shape[1]), n_positive=int(np.sum(y == np.max(y))),
                                  median_distance=float(np.median(pdist(X))))
        print(f"\n== {name}: n = {X.shape[0]}, d = {X.shape[1]}, median distance "
              f"{dataset_info[name]['median_distance']:.3g}", flush=True)
        records = []
        for point in points:
            r = evaluate(X, y, point, args.seed)
            r["dataset"] = name
            records.append(r)
            s = r["sampled"]
            print(f"  {point_name(r):>12}  marg {r['n_marginal']:3d}  Laplace {r['laplace']:8.2f}  "
                  f"raw {_fmt(r['laplace_raw'], '8.2f')}  EP {r['ep']:8.2f}  sampled {s['value']:8.2f} +- {s['se']:.2f} "
                  f"(ESSr {s['ess']:.1f}/{s['n_runs']}, spread {s['spread']:.2f}, halves gap {s['halves_gap']:.2f}, "
                  f"stages {len(r['sampled_stages'])}, {'ok' if s['trusted'] else 'UNRELIABLE'})  "
                  f"pred1d {r['predicted_error_1d']:.1f}/{r['predicted_error_1d_all']:.1f}  {r['seconds']:.0f}s  "
                  f"[total {time.perf_counter() - t0:.0f}s]",
                  flush=True)
        summaries[name] = argmax_summary(records)
        all_records += records
        _write(args.output, all_records, summaries, dataset_info, t0, args, final=False)

    analysis = predictor_analysis(all_records)
    elapsed = _write(args.output, all_records, summaries, dataset_info, t0, args, final=True, analysis=analysis)
    report(json.loads(args.output.read_text()), args.figure)
    print(f"\nwrote {args.output}; total {elapsed:.0f} s")


def report(payload: dict, figure_path: Path | None) -> None:
    """Print the markdown tables of a results payload (and draw the figure)."""
    records = payload["records"]
    names = list(dict.fromkeys(r["dataset"] for r in records))
    summaries = {name: argmax_summary([r for r in records if r["dataset"] == name]) for name in names}
    print("\n## Per grid point (nats; sampled marked * when stage 2 was needed)\n")
    for name in names:
        print(point_table(name, [r for r in records if r["dataset"] == name]))
        print()
    print(argmax_table(summaries))
    print(predictor_table(predictor_analysis(records)))
    if figure_path is not None:
        figure(records, figure_path)
        print(f"\nwrote {figure_path}")


def _write(path, records, summaries, info, t0, args, *, final, analysis=None) -> float:
    elapsed = time.perf_counter() - t0
    payload = {
        "provenance": provenance(),
        "config": {"n": args.n, "seed": args.seed, "quick": args.quick, "stage1": STAGE1, "stage2": STAGE2,
                   "agree_nats": AGREE_NATS, "agree_se": AGREE_SE, "toy": TOY, "platform": platform.platform()},
        "datasets": info, "records": records, "argmax": summaries, "predictors": analysis,
        "seconds": elapsed, "complete": final,
    }
    path.write_text(json.dumps(payload, indent=1, default=float))
    return elapsed


if __name__ == "__main__":
    main()

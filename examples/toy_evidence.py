"""Does the evidence find the C that generated the data?

Draws a 1-D data set from the SVM's own probabilistic model
(:func:`bayesvm.datasets.make_toy`: theta ~ GP(0, K) with an RBF kernel,
x uniform on [0, 1], labels from Q(y | theta(x))) with known C, amplitude k0
and length scale, and computes the evidence along C at the true product
C k0 (amplitude = C k0 / C), where the MAP solution, and so the SVM's
decision function, is the same for every C. Cross-validation cannot tell
these C apart; the evidence can.

Writes ``toy_evidence.png``: left, the naive evidence ln Q(D), the
normalisation ln N(D) and the evidence ln P(D) = ln Q(D) - ln N(D) against C
with +-1 standard-error bands and the true C; right, the class probability
P(y = +1 | x) at the chosen C (MAP plug-in, posterior average and the band
from the error bars theta* +- sigma) against the true probability of the
generating function.

With ``--seeds N`` the experiment is repeated for N data sets and a table
of the true C against the C chosen by the naive evidence and by the full
evidence is printed (the figure shows the first seed).

``--evidence`` picks the estimator: ``ep`` (the default, as in the
library: expectation propagation for ln Q(D) and ln N(D)),
``laplace-prior`` (Sollich's original method: the Laplace-style ln Q(D) and
ln N(D) by plain sampling from the GP prior, which is biased low when its
effective sample size is small; the table counts the C values where that
happened), or EP's ln Q(D) with ln N(D) by plain prior sampling
(``ep-prior``) or by annealing (``ep-annealed``, tempered SMC).

With ``--sampler-seeds K`` the evidence of the first data set is computed
again with the sampler seeds 0..K-1 and a table of the C maximising it per
seed is printed: whether a sampling estimator's maximum stays put.

Usage::

    python examples/toy_evidence.py [--out DIR] [--quick] [--seeds N] [--n N] [--sampler-seeds K]
                                    [--evidence ep|laplace-prior|ep-prior|ep-annealed]

``--quick`` (or BAYESVM_QUICK=1): 30 points and 7 values of C, for CI.
"""

from __future__ import annotations

import argparse
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from bayesvm import BayesvmWarning, plotting  # noqa: E402
from bayesvm.datasets import ToyData, make_toy  # noqa: E402
from bayesvm.evidence.log_evidence import log_evidence  # noqa: E402
from bayesvm.kernels import RBF  # noqa: E402
from bayesvm.posterior import Posterior  # noqa: E402

TRUE_C = 2.0
TRUE_AMPLITUDE = 1.0
TRUE_LENGTH_SCALE = 0.1
#: effective sample size below which bayesvm.normalization.draws flags the prior estimator
LOW_ESS = 100.0
#: --evidence choices: (approximation of ln Q(D), estimator of ln N(D))
ESTIMATORS = {
    "ep": ("ep", "ep"),
    "laplace-prior": ("laplace", "prior"),
    "ep-prior": ("ep", "prior"),
    "ep-annealed": ("ep", "annealed"),
}
#: nats shown below the lowest of the three curves' maxima (the far tails drop by hundreds)
EVIDENCE_WINDOW = 40.0


@dataclass(frozen=True)
class EvidenceCurve:
    """The evidence and its terms at each C of a line of constant C k0."""

    C: np.ndarray
    naive: np.ndarray
    log_normalization: np.ndarray
    log_normalization_se: np.ndarray
    total: np.ndarray
    total_se: np.ndarray
    ess: np.ndarray
    fits: tuple

    @property
    def best(self) -> int:
        return int(np.argmax(self.total))

    @property
    def best_naive(self) -> int:
        return int(np.argmax(self.naive))


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent, help="folder for the PNG")
    parser.add_argument("--quick", action="store_true", help="small problem, for CI (also BAYESVM_QUICK=1)")
    parser.add_argument("--seeds", type=int, default=1, help="number of data sets (seeds 0..N-1); N > 1 prints a table")
    parser.add_argument("--n", type=int, default=None, help="training points per data set (default 100, quick 30)")
    parser.add_argument("--evidence", choices=sorted(ESTIMATORS), default="ep",
                        help="ep (default), laplace-prior (Sollich's original method), ep-prior or ep-annealed")
    parser.add_argument("--sampler-seeds", type=int, default=1,
                        help="K > 1: the first data set's evidence again with sampler seeds 0..K-1, and a table")
    args = parser.parse_args(argv)
    args.quick = args.quick or os.environ.get("BAYESVM_QUICK", "") not in ("", "0")
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1; got {args.seeds}")
    if args.sampler_seeds < 1:
        parser.error(f"--sampler-seeds must be >= 1; got {args.sampler_seeds}")
    if args.n is None:
        args.n = 30 if args.quick else 100
    if args.n < 2:
        parser.error(f"--n must be >= 2; got {args.n}")
    return args


def true_kernel() -> RBF:
    """The generating kernel; no offset (the true latent function has no bias term)."""
    return RBF(length_scale=TRUE_LENGTH_SCALE, amplitude=TRUE_AMPLITUDE, offset=0.0)


def draw_data(n: int, seed: int, grid: np.ndarray) -> ToyData:
    """n labelled points from the model, with the true P(y=+1|x) on ``grid``.

    Uses ``restart="input"`` (a "don't know" draws a fresh input for the same
    theta): exact ``restart="theta"`` sampling succeeds with probability
    N(D), far too rarely at n = 100.
    """
    return make_toy(
        n, kernel=true_kernel(), C=TRUE_C, n_features=1, grid=grid[:, None], restart="input", random_state=seed
    )


def evidence_along_C(
    data: ToyData, Cs: np.ndarray, n_samples: int, estimator: str = "ep", random_state: int = 0
) -> EvidenceCurve:
    """ln P(D) at each C with amplitude = (true C k0) / C, so C k0 stays at its true value.

    ``random_state`` seeds the sampling estimators (the same seed at every C: common random numbers).
    """
    C_k0 = TRUE_C * TRUE_AMPLITUDE
    approximation, normalization = ESTIMATORS[estimator]
    results = []
    with warnings.catch_warnings():
        # low effective sample sizes are recorded in the curve (ess) and reported in the table
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", BayesvmWarning)
        for C in Cs:
            kernel = true_kernel().replace(amplitude=C_k0 / C)
            results.append(log_evidence(data.X, data.y, C=float(C), kernel=kernel, approximation=approximation,
                                        normalization=normalization, n_samples=n_samples,
                                        random_state=random_state))
    column = lambda name: np.array([getattr(r, name) for r in results])  # noqa: E731
    return EvidenceCurve(
        C=np.asarray(Cs),
        naive=column("naive"),
        log_normalization=column("log_normalization"),
        log_normalization_se=column("log_normalization_se"),
        total=column("total"),
        total_se=column("total_se"),
        ess=column("normalization_ess"),
        fits=tuple(r.fit for r in results),
    )


def figure(data: ToyData, curve: EvidenceCurve, grid: np.ndarray):
    """Evidence against C (left) and the class probability at the chosen C (right)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13.5, 4.6), layout="constrained")
    plotting.plot_evidence_curve(
        curve.C,
        curve.naive,
        curve.log_normalization,
        curve.total,
        se_normalization=curve.log_normalization_se,
        se_total=curve.total_se,
        true_C=TRUE_C,
        ax=left,
    )
    peaks = [np.max(values) for values in (curve.naive, curve.log_normalization, curve.total)]
    low, high = min(peaks) - EVIDENCE_WINDOW, max(peaks)
    left.set_ylim(low, high + 0.05 * (high - low))
    left.set_title(
        rf"{data.X.shape[0]} points from the model, true $C$ = {TRUE_C:g}, $C\,k_0$ = {TRUE_C * TRUE_AMPLITUDE:g}, "
        f"$l$ = {TRUE_LENGTH_SCALE:g}",
        fontsize="medium",
    )
    fit = curve.fits[curve.best]
    posterior = Posterior.from_fit(fit)
    x = grid[:, None]
    bars = posterior.error_bars(x)
    plotting.plot_probability_1d(
        grid,
        posterior.predict_proba(x, method="map"),
        posterior.predict_proba(x, method="averaged"),
        bars.p_lower,
        bars.p_upper,
        p_true=data.p_positive_grid,
        X_train=data.X,
        y_train=data.y,
        ax=right,
    )
    right.set_title(f"class probability at the evidence maximum $C$ = {fit.C:.3g}", fontsize="medium")
    return fig


def table(rows: list[tuple[int, ToyData, EvidenceCurve]]) -> str:
    """Markdown table: true C, the C maximising the naive evidence and the evidence, and diagnostics."""
    lines = [
        "| seed | n (+1 / -1) | true C | C, naive max | C, evidence max | ln P(D) at max - at true C | C values with ESS < 100 |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for seed, data, curve in rows:
        true_index = int(np.argmin(np.abs(np.log(curve.C / TRUE_C))))
        gap = curve.total[curve.best] - curve.total[true_index]
        n_pos = int(np.sum(data.y > 0))
        lines.append(
            f"| {seed} | {n_pos} / {data.y.size - n_pos} | {TRUE_C:g} | {curve.C[curve.best_naive]:.3g} | "
            f"{curve.C[curve.best]:.3g} | {gap:.2f} | {int(np.sum(curve.ess < LOW_ESS))} of {curve.C.size} |"
        )
    return "\n".join(lines)


def summary(rows: list[tuple[int, ToyData, EvidenceCurve]]) -> str:
    """How often the evidence lands within a factor 2 of the true C, and the median log-ratio."""
    chosen = np.array([curve.C[curve.best] for _, _, curve in rows])
    naive = np.array([curve.C[curve.best_naive] for _, _, curve in rows])
    within = lambda c: int(np.sum(np.abs(np.log2(c / TRUE_C)) <= 1.0))  # noqa: E731
    return (
        f"evidence: within a factor 2 of the true C in {within(chosen)} of {len(rows)} data sets, "
        f"median chosen C = {np.median(chosen):.3g}; naive evidence: {within(naive)} of {len(rows)}, "
        f"median {np.median(naive):.3g}; the normalisation moved the maximum in "
        f"{int(np.sum(chosen != naive))} of {len(rows)} data sets"
    )


def sampler_table(curves: list[EvidenceCurve]) -> str:
    """Markdown table: the C maximising the evidence of one data set for each sampler seed."""
    true_index = int(np.argmin(np.abs(np.log(curves[0].C / TRUE_C))))
    lines = [
        "| sampler seed | C, evidence max | ln P(D) at max | ln N(D) at true C | its se |",
        "|---:|---:|---:|---:|---:|",
    ]
    for seed, curve in enumerate(curves):
        lines.append(
            f"| {seed} | {curve.C[curve.best]:.3g} | {curve.total[curve.best]:.2f} | "
            f"{curve.log_normalization[true_index]:.2f} | {curve.log_normalization_se[true_index]:.2f} |"
        )
    chosen = {float(curve.C[curve.best]) for curve in curves}
    spread = np.std([curve.log_normalization[true_index] for curve in curves], ddof=1)
    lines.append(
        f"\n{len(chosen)} distinct maximum(s) over {len(curves)} sampler seeds; "
        f"ln N(D) at the true C varies with sd {spread:.2f} nats across seeds"
    )
    return "\n".join(lines)


def main(argv=None) -> Path:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    Cs = np.geomspace(0.25, 16.0, 7 if args.quick else 25)
    grid = np.linspace(0.0, 1.0, 60 if args.quick else 300)
    n_samples = 500 if args.quick else 2000
    rows = []
    for seed in range(args.seeds):
        data = draw_data(args.n, seed, grid)
        rows.append((seed, data, evidence_along_C(data, Cs, n_samples, args.evidence)))
    _, data, curve = rows[0]
    print(
        f"seed 0: C maximising the evidence {curve.C[curve.best]:.3g} "
        f"(naive evidence {curve.C[curve.best_naive]:.3g}), true C {TRUE_C:g}"
    )
    if args.seeds > 1:
        print(table(rows))
        print(summary(rows))
    if args.sampler_seeds > 1:
        curves = [curve] + [
            evidence_along_C(data, Cs, n_samples, args.evidence, random_state=seed)
            for seed in range(1, args.sampler_seeds)
        ]
        print(sampler_table(curves))
    fig = figure(data, curve, grid)
    path = plotting.save_figure(fig, args.out / "toy_evidence.png")
    print(f"wrote {path}")
    return path


if __name__ == "__main__":
    main()

"""The grid selection's trust policy: checks at every argmax it acts on, and the warnings it owes the user.

Checking the surface's ln N(D). EP treats the factors nu(theta_i) one at a
time. Where the prior is much wider than the margin and strongly correlated
(C -> 0 with a huge amplitude and length scale) each factor is nearly
constant under its cavity; EP settles near the factorised value and misses
the rare event that every theta_i lies inside the margin together, which
carries N(D) (tens of nats low; theory: "Expectation propagation"). The
screening tempered-SMC runs of ``normalization="annealed"`` are cheap and
can be biased low where their runs disagree. Either error makes the evidence
run away into the cells where it is worst. So every argmax the selection
acts on is checked against a full tempered-SMC estimate of the same
integral; where they disagree by more than
:data:`bayesvm.selection.trust.NORMALIZATION_TOLERANCE` nats (or three standard
errors) the full value replaces the surface's at that cell and the argmax
is taken again, up to ``max_checks`` checks. A check whose own runs disagree
cannot settle the cell: it is left out (NaN).

The posterior at the optimum. With ``approximation="ep"`` every argmax must
also be a point where EP's posterior (label sites, full tolerance: what
:class:`~bayesvm.BayesianSVC` predicts with) converges. In the small-C,
huge-amplitude, long-length-scale corner its sites can keep moving while
ln Z has settled, and the class probabilities are then meaningless; such a
cell is left out and the argmax taken again, at most ``max_checks`` tests.

Nothing here changes a surface: :class:`GridChecks` records what it found,
and the selection reads the corrections from it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .._warnings import warn_user
from ..evidence.approximations import Cells, normalization_estimator
from ..inference.ep import ep_log_evidence
from ..normalization.agreement import within_error
from ..exceptions import BayesvmWarning, ConvergenceWarning, UntrustedEvidenceWarning
from ..posterior import Posterior
from ..solver.dual import MapSVM
from .trust import NORMALIZATION_TOLERANCE

__all__ = ["NormalizationCheck", "GridChecks", "DegenerateSelectionWarning", "CHECKED_NORMALIZATIONS",
           "warn_degenerate", "cell_key"]

#: ln N(D) estimators whose value at every argmax is checked against a full tempered-SMC run
CHECKED_NORMALIZATIONS = ("ep", "annealed")
#: a selection is flagged as degenerate when no training point's predicted P(y = +1) is further than this from 1/2
_DEGENERATE_MARGIN = 0.1


class DegenerateSelectionWarning(BayesvmWarning):
    """The selected hyperparameters give near-constant class probabilities on the training data."""


def cell_key(point: dict) -> tuple:
    """A grid cell's identity: its log coordinates to 9 decimals (robust to the rounding of exp(log(x))
    in the refinement; an offset ratio of 0 maps to ln of the smallest positive float)."""
    values = [point["shape"], point["offset_ratio"], point["C_k0"], point["C"]]
    return tuple(np.round(np.log(np.maximum(values, np.finfo(float).tiny)), 9).tolist())


class NormalizationCheck(NamedTuple):
    """The surface's ln N(D) at one grid point against a full tempered-SMC estimate of the same integral.

    ``point`` holds the surface coordinates; ``surface`` is the value the
    surface had there; ``agreed`` is |surface - annealed| <= max(tolerance, 3 se)
    (:func:`bayesvm.normalization.agreement.within_error`);
    ``reliable`` says the full estimate's independent runs agree (otherwise it
    is biased low and its se is not to be trusted).
    """

    point: dict
    surface: float
    annealed: float
    annealed_se: float
    agreed: bool
    reliable: bool

    def correction(self) -> tuple[float, float] | None:
        """(ln N(D), se) the surface must carry at this cell instead of its own value, or None."""
        if not self.reliable:
            return np.nan, np.nan
        return None if self.agreed else (self.annealed, self.annealed_se)


@dataclass
class GridChecks:
    """What the checks found, by :func:`cell_key` (module docstring). It owns its records; it changes nothing else."""

    approximation: str
    normalization: str
    max_checks: int
    random_state: int
    normalization_checks: dict = field(default_factory=dict)
    posterior_tests: dict = field(default_factory=dict)

    def wants_normalization_check(self, key: tuple) -> bool:
        return (self.normalization in CHECKED_NORMALIZATIONS and key not in self.normalization_checks
                and len(self.normalization_checks) < self.max_checks)

    def check_normalization(self, point: dict, cell: Cells, value: float) -> NormalizationCheck:
        """The full tempered-SMC ln N(D) of the one-cell ``cell`` against the surface's ``value`` there."""
        # seeded apart from the screening runs, so that the check is independent of the value it checks
        full = normalization_estimator("annealed", key=self.random_state + 1)(cell).at(0)
        agreed = within_error(value, full.value, se=full.se, floor=NORMALIZATION_TOLERANCE)
        check = NormalizationCheck(dict(point), float(value), full.value, full.se, bool(agreed), full.trusted)
        self.normalization_checks[cell_key(point)] = check
        return check

    def wants_posterior_test(self, key: tuple) -> bool:
        return self.approximation == "ep" and key not in self.posterior_tests and len(self.posterior_tests) < self.max_checks

    def test_posterior(self, point: dict, cell: Cells) -> bool:
        """Whether EP's posterior (label sites, full tolerance) converges at the one-cell ``cell``."""
        converged = bool(ep_log_evidence(cell.prior(0), cell.y, cell.C[0]).converged)
        self.posterior_tests[cell_key(point)] = converged
        return converged

    def normalization_correction(self, key: tuple) -> tuple[float, float] | None:
        check = self.normalization_checks.get(key)
        return None if check is None else check.correction()

    def posterior_failed(self, key: tuple) -> bool:
        return self.posterior_tests.get(key) is False

    def warn(self, point: dict) -> None:
        """The warnings the checks owe: failures found, and a selected point the budget left unchecked."""
        key = cell_key(point)
        checks = list(self.normalization_checks.values())
        unreliable = [c for c in checks if not c.reliable]
        if unreliable:
            warn_user(
                f"ln N(D) could not be estimated reliably at {len(unreliable)} of {len(checks)} checked point(s), "
                "where the prior is far wider than the margin, and they were left out of the maximisation (NaN on "
                "the surface); fix C or narrow the grid there (grid={'C': ..., 'C_k0': ...})",
                UntrustedEvidenceWarning,
            )
        failed = [c for c in checks if c.reliable and not c.agreed]
        name = {"ep": "EP's", "annealed": "the screening annealed"}.get(self.normalization)
        if failed:
            worst = max(failed, key=lambda c: abs(c.annealed - c.surface))
            remedy = ("estimators=GridEstimators(normalization='annealed') is closer where EP fails"
                      if self.normalization == "ep" else f"a larger options=GridOptions(max_checks=...) checks more "
                      f"points (now {self.max_checks})")
            warn_user(
                f"{name} ln N(D) disagreed with the full annealed estimate at {len(failed)} of {len(checks)} "
                f"checked point(s), by up to {abs(worst.annealed - worst.surface):.1f} nats (at C = "
                f"{worst.point['C']:.3g}, C k0 = {worst.point['C_k0']:.3g}), and the full values replace the "
                f"surface's there (EvidenceSurface.checks); {remedy}",
                UntrustedEvidenceWarning,
            )
        if self.normalization in CHECKED_NORMALIZATIONS and self.max_checks > 0 and key not in self.normalization_checks:
            warn_user(
                f"the check budget (max_checks={self.max_checks}) ran out before {name} ln N(D) at the selected "
                "point was checked against the full annealed estimate; pass a larger options=GridOptions(max_checks=...) "
                "(CLI: --max-checks)",
                UntrustedEvidenceWarning,
            )
        not_converged = [k for k, converged in self.posterior_tests.items() if not converged]
        if not_converged:
            warn_user(
                f"EP's posterior did not converge at {len(not_converged)} of {len(self.posterior_tests)} candidate "
                "optimum(s), where the class probabilities cannot be computed, and they were left out of the "
                "maximisation; fix C or narrow the grid there (grid={'C': ..., 'C_k0': ...})",
                ConvergenceWarning,
            )
        if self.approximation == "ep" and self.max_checks > 0 and key not in self.posterior_tests:
            warn_user(
                f"the test budget (max_checks={self.max_checks}) ran out before EP's posterior at the selected "
                "point was tested for convergence; pass a larger options=GridOptions(max_checks=...) (CLI: "
                "--max-checks)",
                ConvergenceWarning,
            )


def warn_degenerate(fit: MapSVM) -> None:
    """Warn when the chosen hyperparameters make the predicted class probabilities nearly constant.

    Judged on what :class:`~bayesvm.BayesianSVC` predicts by default: the
    averaged probability under EP's posterior of theta at the training
    inputs. The MAP plug-in P(+1 | theta*) = sigmoid(C g(theta*)) is not the
    test: at C -> 0 with a huge amplitude every plug-in probability is near
    1/2 while the posterior spreads theta over the prior's scale and can
    still predict well.
    """
    with warnings.catch_warnings():  # an unconverged EP run is reported by the estimator that predicts with it
        warnings.simplefilter("ignore", ConvergenceWarning)
        probability = Posterior.from_fit(fit, "ep").predict_proba(fit.X)
    spread = float(np.max(np.abs(np.asarray(probability) - 0.5)))
    if spread < _DEGENERATE_MARGIN:
        warn_user(
            f"the selected hyperparameters (C = {fit.C:.3g}, amplitude = {float(fit.kernel.amplitude):.3g}) give "
            f"near-constant class probabilities (every training point's P(y = +1) within {spread:.3f} of 1/2): the "
            "evidence runs into its C -> 0, large-amplitude limit. Fix C or narrow the grid (grid={'C': ...}), or "
            "compare with method='cv'",
            DegenerateSelectionWarning,
        )

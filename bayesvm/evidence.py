"""The evidence of an SVM's hyperparameters, ln P(D | C, K) = ln Q(D) - ln N(D).

ln Q(D) (the naive evidence) comes from an approximation of the GP integral
of the unnormalised likelihood; ln N(D) from an estimator of the
normalisation factor (theory: "Why C and k0 need the evidence" and "The
normalisation factor"). :func:`log_evidence` fits the MAP
SVM, computes both and returns an :class:`Evidence` with every term, the
standard errors of the sampled parts, and the fit itself.

Approximations of ln Q(D):

* ``"laplace"``: Sollich's Laplace-style form around the MAP solution
  (:mod:`bayesvm.laplace`), the original method; far too optimistic where
  most points are marginal (theory: "Where the Laplace form breaks").
* ``"ep"``: expectation propagation (:func:`bayesvm.ep.ep_log_evidence`).
* ``"sampled"``: annealed tempered SMC from the prior to the posterior
  (:func:`bayesvm.annealing.annealed_log_naive_evidence`), with a standard
  error: the reference the other two are checked against.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import _linalg
from ._precision import float64, numpy_leaves
from .annealing import annealed_log_naive_evidence
from .ep import ep_log_evidence
from .kernels import Kernel, gram_matrix
from .laplace import DETERMINANTS, LaplaceFactor, NaiveEvidenceTerms, laplace_factor, laplace_log_naive_evidence
from .normalization import TRAINING_INPUT_METHODS, NormalizationEstimate, log_normalization, normalization_inputs
from .posterior import Posterior
from .solver import MapSVM, fit_map

__all__ = ["APPROXIMATIONS", "Evidence", "NaiveEvidence", "log_evidence", "log_naive_evidence", "naive_evidence"]

APPROXIMATIONS = ("laplace", "ep", "sampled")
#: EP runs for the evidence stop once ln Z changes by less than this (nats) three times in a row
_EP_LOG_Z_TOL = 1e-6
#: Laplace-style evidence is flagged when more than this share of the points is marginal. Measured
#: (evidence-accuracy study of the documentation, 72 points on six data sets at n = 80): above 7.5% every
#: Laplace value was more than 5 nats above the sampled reference; its error was about
#: LAPLACE_OPTIMISM_SLOPE * share + LAPLACE_OPTIMISM_INTERCEPT nats (theory: "Where the Laplace form breaks").
LAPLACE_MARGINAL_SHARE = 0.075
#: Least-squares fit, over the same 72 points, of the Laplace-style value's excess over tempered sampling (nats)
#: against the share of marginal points: excess ~= slope * share + intercept, residual sd in nats.
LAPLACE_OPTIMISM_SLOPE = 28.6
LAPLACE_OPTIMISM_INTERCEPT = 4.2
LAPLACE_OPTIMISM_RESIDUAL_SD = 4.2


@dataclass(frozen=True)
class Evidence:
    """ln P(D) = naive - log_normalization, with its parts.

    Attributes
    ----------
    total, total_se : ln P(D) and its standard error (from the sampled terms).
    naive, naive_se : ln Q(D), the naive evidence, and its standard error
        (0 for the deterministic approximations).
    terms : the parts of the Laplace-style ln Q(D) (None for the others).
    log_normalization, log_normalization_se, normalization_ess : ln N(D), its
        standard error and the effective sample size of its estimator.
    n_marginal : size of the marginal set at the MAP solution.
    approximation, determinant : how ln Q(D) was computed.
    fit : the MAP SVM.
    naive_converged : EP for ln Q(D) converged (always True for the other approximations).
    posterior : Sollich's Gaussian posterior around the fit, built on first
        use; it reuses the Laplace factor of the evidence when there is one.
    """

    total: float
    total_se: float
    naive: float
    naive_se: float
    terms: NaiveEvidenceTerms | None
    log_normalization: float
    log_normalization_se: float
    normalization_ess: float
    n_marginal: int
    approximation: str
    determinant: str
    normalization: str
    fit: MapSVM
    naive_converged: bool = True
    _factor: LaplaceFactor | None = field(default=None, repr=False, compare=False)

    def __getstate__(self):
        # JAX arrays would unpickle in the precision of the moment (float32 with the flag off): store NumPy
        return numpy_leaves(self.__dict__)

    @cached_property
    def posterior(self) -> Posterior:
        if self._factor is None:
            return Posterior.from_fit(self.fit)
        return Posterior(fit=self.fit, factor=self._factor)

    @property
    def n(self) -> int:
        return int(self.fit.X.shape[0])

    def summary(self) -> str:
        """A readable table of the evidence and its terms."""
        rows = [("ln P(D)  (total)", f"{self.total:12.3f} +- {self.total_se:.3f}")]
        rows.append((f"ln Q(D)  (naive, {self.approximation})", f"{self.naive:12.3f} +- {self.naive_se:.3f}"))
        if self.terms is not None:
            rows += [
                ("   n ln kappa(C)", f"{float(self.terms.log_kappa_term):12.3f}"),
                ("   -1/2 sum y a theta", f"{float(self.terms.quadratic_term):12.3f}"),
                ("   -C sum hinge", f"{float(self.terms.hinge_term):12.3f}"),
                (f"   -1/2 ln det ({self.determinant})", f"{float(self.terms.log_det_term):12.3f}"),
            ]
        rows += [
            (f"ln N(D)  (normalisation, {self.normalization})",
             f"{self.log_normalization:12.3f} +- {self.log_normalization_se:.3f}"),
            ("   effective samples", f"{self.normalization_ess:12.1f}"),
            ("marginal points", f"{self.n_marginal:8d} of {self.n}"),
        ]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


class NaiveEvidence(NamedTuple):
    """ln Q(D) by one approximation: value, standard error (0 unless sampled),
    the Laplace terms and factor (None for the other approximations)."""

    value: float
    se: float
    terms: NaiveEvidenceTerms | None
    factor: LaplaceFactor | None
    converged: bool = True


def _laplace_naive_evidence(fit: MapSVM, determinant: str) -> tuple[NaiveEvidenceTerms, LaplaceFactor]:
    if determinant not in DETERMINANTS:
        raise ValueError(f"determinant must be one of {DETERMINANTS}; got {determinant!r}")
    K = gram_matrix(fit.kernel, jnp.asarray(fit.X))
    size = _linalg.buffer_size(int(fit.marginal.sum()), fit.X.shape[0])
    factor = laplace_factor(K, fit.solution, fit.C, size)
    terms = laplace_log_naive_evidence(K, jnp.asarray(fit.y), fit.C, fit.solution, factor, determinant)
    return NaiveEvidenceTerms(*(np.asarray(t) for t in terms)), factor


@float64
def log_naive_evidence(fit: MapSVM, *, determinant: str = "regularized") -> NaiveEvidenceTerms:
    """Sollich's Laplace-style ln Q(D) for a fitted MAP SVM (see :mod:`bayesvm.laplace`)."""
    return _laplace_naive_evidence(fit, determinant)[0]


@float64
def naive_evidence(
    fit: MapSVM, approximation: str = "laplace", *, determinant: str = "regularized", random_state=0
) -> NaiveEvidence:
    """ln Q(D) for a fitted MAP SVM by the named approximation."""
    if approximation not in APPROXIMATIONS:
        raise ValueError(f"approximation must be one of {APPROXIMATIONS}; got {approximation!r}")
    if approximation == "laplace":
        terms, factor = _laplace_naive_evidence(fit, determinant)
        return NaiveEvidence(float(terms.value), 0.0, terms, factor)
    K = gram_matrix(fit.kernel, jnp.asarray(fit.X))
    if approximation == "ep":
        result = ep_log_evidence(K, jnp.asarray(fit.y), fit.C, log_z_tol=_EP_LOG_Z_TOL)
        if not bool(result.converged):
            warnings.warn("EP for ln Q(D) did not converge; the value is unreliable", RuntimeWarning, stacklevel=3)
        return NaiveEvidence(float(result.log_z), 0.0, None, None, bool(result.converged))
    result = annealed_log_naive_evidence(K, fit.y, fit.C, key=random_state)
    return NaiveEvidence(float(result.value), float(result.se), None, None)


@float64
def log_evidence(
    X,
    y,
    *,
    C: float = 1.0,
    kernel: Kernel | None = None,
    approximation: str = "ep",
    determinant: str = "regularized",
    normalization: str = "annealed",
    normalization_inputs_from="training",
    n_samples: int = 2000,
    max_inputs: int = 500,
    random_state=0,
) -> Evidence:
    """ln P(D | C, kernel) for a data set.

    Parameters
    ----------
    X, y : training inputs and two-valued labels.
    C, kernel : hyperparameters (kernel default ``RBF()``).
    approximation : how ln Q(D) is computed: ``"ep"`` (default),
        ``"laplace"`` (Sollich's Laplace-style form; theory: "The naive
        evidence: a Laplace-style approximation") or
        ``"sampled"`` (see the module docstring).
    determinant : for ``"laplace"``: ``"regularized"`` det(I + L_m K_m)
        (default) or ``"raw"`` det(L_m K_m).
    normalization : estimator of ln N(D) (see
        :func:`bayesvm.normalization.log_normalization`): ``"annealed"``
        (default: tempered SMC over the n training inputs, the estimator the
        selection and :class:`~bayesvm.BayesianSVC` report), ``"ep"`` (over the
        training inputs; fast, but tens of nats low where the latents are
        strongly correlated), ``"annealed-stand-in"`` or ``"prior"`` (over
        stand-in inputs; ``"prior"`` is biased low at realistic n).
    normalization_inputs_from : for the stand-in methods, the inputs standing
        in for Q(x): ``"training"``, ``"gaussian"``, ``"box"`` or an array (see
        :func:`bayesvm.normalization.normalization_inputs`).
    n_samples, max_inputs, random_state : of the sampling estimators.
    """
    if approximation not in APPROXIMATIONS:
        raise ValueError(f"approximation must be one of {APPROXIMATIONS}; got {approximation!r}")
    if determinant not in DETERMINANTS:
        raise ValueError(f"determinant must be one of {DETERMINANTS}; got {determinant!r}")
    fit = fit_map(X, y, C=C, kernel=kernel)
    naive, naive_se, terms, factor, converged = naive_evidence(
        fit, approximation, determinant=determinant, random_state=random_state
    )
    if normalization in TRAINING_INPUT_METHODS:
        inputs = fit.X
    else:
        inputs = normalization_inputs(fit.X, normalization_inputs_from, max_inputs=max_inputs, random_state=random_state)
    norm: NormalizationEstimate = log_normalization(
        kernel=fit.kernel,
        C=fit.C,
        n=fit.X.shape[0],
        inputs=inputs,
        method=normalization,
        n_samples=n_samples,
        max_inputs=max_inputs,
        random_state=random_state,
    )
    n_marginal = int(fit.marginal.sum())
    if approximation == "laplace":
        _warn_outside_range(terms, n_marginal, fit.X.shape[0], determinant)
    return Evidence(
        total=naive - float(norm.value),
        total_se=float(np.hypot(naive_se, float(norm.se))),
        naive=naive,
        naive_se=naive_se,
        terms=terms,
        log_normalization=float(norm.value),
        log_normalization_se=float(norm.se),
        normalization_ess=float(norm.ess),
        n_marginal=n_marginal,
        approximation=approximation,
        determinant=determinant,
        normalization=normalization,
        fit=fit,
        naive_converged=converged,
        _factor=factor,
    )


def _warn_outside_range(terms: NaiveEvidenceTerms, n_marginal: int, n: int, determinant: str) -> None:
    if not np.isfinite(terms.value):
        warnings.warn(
            f"the {determinant} Laplace determinant is degenerate (singular K_m or a marginal alpha at a bound): "
            f"ln Q(D) = {float(terms.value)}. Use determinant='regularized'.",
            RuntimeWarning,
            stacklevel=4,  # _warn_outside_range, log_evidence, its float64 wrapper, the caller
        )
    share = n_marginal / n
    if share > LAPLACE_MARGINAL_SHARE:
        warnings.warn(
            f"{n_marginal} of {n} points are marginal: the Laplace-style evidence linearises the prior over "
            f"each marginal kink and is too optimistic, by about "
            f"{LAPLACE_OPTIMISM_SLOPE * share + LAPLACE_OPTIMISM_INTERCEPT:.0f} +- {LAPLACE_OPTIMISM_RESIDUAL_SD:.0f} "
            "nats at this share (measured against annealed sampling on six data sets of 80 points). Use "
            "approximation='ep' (the default), or 'sampled' to check.",
            RuntimeWarning,
            stacklevel=4,
        )

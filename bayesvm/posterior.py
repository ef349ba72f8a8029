"""Predictive class probabilities and error bars (theory: "Error bars and predictive probabilities").

The posterior of the latent output at x is approximated as Gaussian,
theta(x) ~ N(theta*(x), sigma^2(x)), with theta* the SVM output and sigma^2
from the Laplace-style factor (:mod:`bayesvm.inference.laplace`), or, with
``approximation="ep"``, with the mean and variance of expectation propagation
(:func:`bayesvm.inference.ep.ep_predict`; its mean need not have the sign of theta*). Three predictive
probabilities of y = +1, all > 1/2 exactly when theta*(x) > 0 and = 1/2 at
theta* = 0 (g is odd and increasing and the Gaussian is symmetric about theta*):

* ``"map"``: the plug-in P(+1 | x, theta*) = sigmoid(C g(theta*));
* ``"averaged"`` (default): <Q(+1|theta)> / <nu(theta)>, the probability of +1
  given that x receives a label at all. Both averages are Gaussian integrals
  of exp(-C l(+-theta)) with closed forms (Gaussian CDF terms and a shifted
  Gaussian; :func:`bayesvm.inference.tilted.hinge_tilted_moments`), so no quadrature is used;
* ``"simple"``: <P(+1|theta)> = <sigmoid(C g(theta))>, by Gauss-Hermite quadrature.

Error bars: theta* +- sigma and the plug-in probabilities at those two ends.

The GP classifier (the probit likelihood Phi(y theta), :class:`ProbitPosterior`) has EP's posterior alone and
one predictive probability, Phi(mean / sqrt(1 + variance)), which "averaged" and "simple" both are; "map" is
Phi(mean).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from scipy import special

from . import _linalg
from ._precision import as_float64, float64, numpy_leaves
from ._validation import TrainingData, check_inputs
from ._warnings import warn_user
from .inference.ep import FULL_TOLERANCE, EPResult, converged_ep, ep_predict
from .inference.ep_gradient import EPSites
from .inference.ep_loop import merged_label_weights
from .inference.ep_low_rank import (LowRankEPPredictor, low_rank_naive_evidences_and_gradient, low_rank_predict,
                                   low_rank_predictor)
from .inference.tilted import hinge_tilted_moments
from .exceptions import ConvergenceWarning
from .compilation import jit
from .hyperparameters import coordinates_of
from .kernels import Kernel, gram_diagonal, gram_matrix
from .inference.laplace import LaplaceFactor, laplace_factor, laplace_latent_variance
from .model import label_probability
from .solver.dual import MapSVM, fit_map_on_gram

Array = jax.Array

__all__ = [
    "PROBABILITY_METHODS",
    "ErrorBars",
    "Posterior",
    "LowRankPosterior",
    "map_probability",
    "averaged_probability",
    "simple_average_probability",
    "predictive_probability",
    "LowRankFit",
    "low_rank_posteriors",
    "posteriors_at",
    "ProbitPosterior",
    "probit_posteriors",
    "probit_probability",
]

PROBABILITY_METHODS = ("averaged", "map", "simple")
APPROXIMATIONS = ("laplace", "ep")
_HERMITE_NODES, _HERMITE_WEIGHTS = np.polynomial.hermite.hermgauss(64)
#: EP's site tolerance (:func:`bayesvm.inference.ep_loop.run_ep`'s ``tol``) for a posterior fitted for its predictions
#: alone, whose ln Q(D) is not reported (every row after a selection on a subsample, :func:`posteriors_at`).
#: 1e-4: probabilities that differ from those at the evidence's 1e-8 by far less than their error bars, in fewer
#: sweeps (CHANGELOG.md, 2026-11-29)
PREDICTION_TOLERANCE = 1e-4
#: below this variance the averages equal the plug-in value to rounding; use it directly
_MIN_VARIANCE = 1e-24


def _same_side_of_half(p: Array, mean: Array) -> Array:
    """Make sign(p - 1/2) = sign(mean) exactly.

    The property holds mathematically for every method (g is odd and
    increasing, the Gaussian symmetric about its mean); rounding can break it
    only when p is within an ulp or so of 1/2, and this moves p by at most that,
    so predict and predict_proba never disagree.
    """
    above, below = jnp.nextafter(0.5, 1.0), jnp.nextafter(0.5, 0.0)
    return jnp.where(mean > 0.0, jnp.maximum(p, above), jnp.where(mean < 0.0, jnp.minimum(p, below), 0.5))


@float64
@jit(rarely_run=True)
def map_probability(mean: Array, variance: Array | None, C: Array | float) -> Array:
    """Plug-in P(+1 | theta*) = sigmoid(C g(theta*)) (``variance`` is ignored)."""
    return _same_side_of_half(label_probability(mean, C), mean)


@float64
@jit(rarely_run=True)
def averaged_probability(mean: Array, variance: Array, C: Array | float) -> Array:
    """<Q(+1|theta)> / <nu(theta)> under theta ~ N(mean, variance), in closed form.

    = sigmoid(ln Z_+ - ln Z_-), Z_s = INT N(theta; mean, variance) exp(-C l(s theta)) d theta
    (kappa(C) cancels).
    """
    safe_var = jnp.maximum(variance, _MIN_VARIANCE)
    log_odds = hinge_tilted_moments(mean, safe_var, C, 1.0).log_z - hinge_tilted_moments(mean, safe_var, C, -1.0).log_z
    p = jnp.where(variance > _MIN_VARIANCE, jax.nn.sigmoid(log_odds), label_probability(mean, C))
    return _same_side_of_half(p, mean)


@float64
@jit(rarely_run=True)
def simple_average_probability(mean: Array, variance: Array, C: Array | float) -> Array:
    """<P(+1|theta)> under theta ~ N(mean, variance), by 64-node Gauss-Hermite quadrature."""
    nodes = jnp.asarray(_HERMITE_NODES)
    weights = jnp.asarray(_HERMITE_WEIGHTS) / np.sqrt(np.pi)
    theta = mean[..., None] + jnp.sqrt(2.0 * variance)[..., None] * nodes
    p = jnp.sum(weights * label_probability(theta, C), axis=-1)
    return _same_side_of_half(p, mean)


_PROBABILITY = {"averaged": averaged_probability, "map": map_probability, "simple": simple_average_probability}


@float64
def predictive_probability(mean: Array, variance: Array, C: Array | float, method: str = "averaged") -> Array:
    """P(y = +1 | x) from the Gaussian latent posterior by the named method."""
    if method not in _PROBABILITY:
        raise ValueError(f"method must be one of {PROBABILITY_METHODS}; got {method!r}")
    return _PROBABILITY[method](as_float64(mean), None if variance is None else as_float64(variance), C)


class ErrorBars(NamedTuple):
    """theta* +- sigma at each input and the plug-in probabilities at the two ends."""

    theta: np.ndarray
    sigma: np.ndarray
    p_lower: np.ndarray  # P(+1 | theta* - sigma)
    p_upper: np.ndarray  # P(+1 | theta* + sigma)


class _LatentPredictions:
    """Class probabilities and error bars from a Gaussian latent posterior: ``_latent(X)`` and ``C``. Every public
    prediction computes on fixed-size blocks of the inputs' rows (:func:`bayesvm._linalg.on_row_blocks`): one
    compiled program for every number of inputs, the memory of one block, and each row's prediction its own."""

    def __getstate__(self):
        # JAX arrays would unpickle in the precision of the moment (float32 with the flag off): store NumPy
        return numpy_leaves(self.__dict__)

    def _block_latent(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        mean, variance = self._latent(X)
        return np.asarray(mean), np.maximum(np.asarray(variance), 0.0)

    @float64
    def latent(self, X) -> tuple[np.ndarray, np.ndarray]:
        """Posterior mean and variance of theta(x) at new inputs."""
        return _linalg.on_row_blocks(self._block_latent, self._checked_inputs(X))

    def _probability(self, mean: np.ndarray, variance: np.ndarray, method: str):
        """P(y = +1 | x) of the latent posterior N(mean, variance) by the named method."""
        return predictive_probability(mean, variance, self.C, method)

    def _plug_in(self, theta: np.ndarray):
        """P(y = +1 | theta), the likelihood's class probability at a latent value."""
        return label_probability(theta, self.C)

    @float64
    def predict_proba(self, X, method: str = "averaged") -> np.ndarray:
        """P(y = +1 | x) by the named method (module docstring), shape (n_samples,)."""
        return _linalg.on_row_blocks(lambda X: self._probability(*self._block_latent(X), method),
                                      self._checked_inputs(X))

    @float64
    def error_bars(self, X) -> ErrorBars:
        """The posterior mean of theta(x) +- sigma and P(+1) at those ends."""

        def bars(X):
            mean, variance = self._block_latent(X)
            sigma = np.sqrt(variance)
            return ErrorBars(mean, sigma, self._plug_in(mean - sigma), self._plug_in(mean + sigma))

        return _linalg.on_row_blocks(bars, self._checked_inputs(X))


@dataclass(frozen=True)
class Posterior(_LatentPredictions):
    """Gaussian approximation of the latent posterior of a fitted MAP SVM.

    Build it with :meth:`from_fit`; ``factor`` is set for the Laplace-style
    approximation, ``ep`` for expectation propagation.
    """

    fit: MapSVM
    factor: LaplaceFactor | None = None
    ep: EPResult | None = None

    @classmethod
    @float64
    def from_fit(cls, fit: MapSVM, approximation: str = "laplace", *, ep: EPResult | None = None) -> "Posterior":
        """Factor the approximation once: B = I + L^1/2 K_m L^1/2 (Laplace) or an EP run.

        ``ep``: a converged EP run at the fit's hyperparameters (``Evidence.ep``, the evidence's own run
        of ln Q(D), or one to :data:`PREDICTION_TOLERANCE`), used as it is instead of running EP again.
        """
        if approximation not in APPROXIMATIONS:
            raise ValueError(f"approximation must be one of {APPROXIMATIONS}; got {approximation!r}")
        if approximation == "ep":
            # converged fully (log_z_tol = 0); a loop that does not converge is followed by the slower ones of EP_LOOPS
            result = ep if ep is not None else _converged_label_ep(gram_matrix(fit.kernel, fit.X), fit)
            if not bool(result.converged):
                warn_user(f"EP for the posterior did not converge (its last loop: {int(result.n_iter)} "
                          "iterations), so its predictions are approximate; the Laplace-style posterior "
                          "(BayesianSVC(posterior='laplace')) needs no iteration", ConvergenceWarning)
            return cls(fit=fit, ep=result)
        K = gram_matrix(fit.kernel, fit.X)
        size = _linalg.buffer_size(int(fit.marginal.sum()), fit.X.shape[0])
        return cls(fit=fit, factor=laplace_factor(K, fit.solution, fit.boxes, size))

    @property
    def approximation(self) -> str:
        return "laplace" if self.ep is None else "ep"

    @property
    def C(self) -> float:
        return float(self.fit.C)

    def _checked_inputs(self, X) -> np.ndarray:
        return check_inputs(X, n_features=self.fit.X.shape[1])

    def _latent(self, X: np.ndarray) -> tuple[Array, Array]:
        K_cross = gram_matrix(self.fit.kernel, X, np.asarray(self.fit.X, dtype=np.float64))
        K_diag = gram_diagonal(self.fit.kernel, X)
        if self.ep is not None:
            return ep_predict(self.ep, K_cross, K_diag)
        mean = np.asarray(K_cross) @ (np.asarray(self.fit.solution.alpha) * np.asarray(self.fit.y))
        return mean, laplace_latent_variance(self.factor, K_cross, K_diag)


def _converged_label_ep(K, fit: MapSVM, tol: float = FULL_TOLERANCE) -> EPResult:
    """EP for the posterior of the fit's problem on its Gram matrix K, one label site per distinct input
    (:func:`bayesvm.inference.ep_loop.merged_label_weights`), converged to the site tolerance ``tol``."""
    weights, opposite = merged_label_weights(fit.X, fit.y, fit.weights)
    return converged_ep(K, jnp.asarray(fit.y), fit.C, weights=weights[0],
                        opposite=None if opposite is None else opposite[0], tol=tol)


def probit_probability(mean, variance, method: str = "averaged") -> np.ndarray:
    """P(y = +1 | x) of the GP classifier from its latent posterior N(mean, variance) (host-side, NumPy).

    ``"averaged"`` and ``"simple"``: <Phi(theta)> = Phi(mean / sqrt(1 + variance)) (Rasmussen & Williams 2006,
    eq. 3.80): the probit likelihood is normalised, so the probability of +1 given that a label is emitted and the
    average of P(+1 | theta) are one and the same; ``"map"``: the plug-in Phi(mean). Above 1/2 exactly where
    mean > 0 (:func:`_same_side_of_half`, on the host).
    """
    if method not in PROBABILITY_METHODS:
        raise ValueError(f"method must be one of {PROBABILITY_METHODS}; got {method!r}")
    mean, variance = np.asarray(mean, dtype=np.float64), np.asarray(variance, dtype=np.float64)
    p = special.ndtr(mean if method == "map" else mean / np.sqrt(1.0 + variance))
    above, below = np.nextafter(0.5, 1.0), np.nextafter(0.5, 0.0)
    return np.where(mean > 0.0, np.maximum(p, above), np.where(mean < 0.0, np.minimum(p, below), 0.5))


@dataclass(frozen=True)
class ProbitPosterior(_LatentPredictions):
    """EP's Gaussian posterior of the latent function of the GP classifier (the probit likelihood Phi(y theta)).

    ``X``: the training inputs (distinct rows; rows of equal input share one site); ``kernel``: the prior's;
    ``ep``: EP's run on them (:func:`bayesvm.inference.ep.converged_ep` with ``likelihood="probit"``), its
    ``log_z`` the problem's ln P(D). Predictions as :class:`Posterior`'s with EP, and class probabilities
    Phi(mean / sqrt(1 + variance)) (:func:`probit_probability`; error bars: Phi at mean -+ sigma). There is no C:
    ``C`` is None.
    """

    X: np.ndarray
    kernel: Kernel
    ep: EPResult
    C = None

    @property
    def approximation(self) -> str:
        return "ep"

    @property
    def log_evidence(self) -> float:
        """ln P(D) of the problem by EP (the likelihood is normalised: no ln N(D))."""
        return float(self.ep.log_z)

    @property
    def converged(self) -> bool:
        return bool(self.ep.converged)

    def _checked_inputs(self, X) -> np.ndarray:
        return check_inputs(X, n_features=self.X.shape[1])

    def _latent(self, X: np.ndarray) -> tuple[Array, Array]:
        K_cross = gram_matrix(self.kernel, X, np.asarray(self.X, dtype=np.float64))
        return ep_predict(self.ep, K_cross, gram_diagonal(self.kernel, X))

    def _probability(self, mean, variance, method: str):
        return probit_probability(mean, variance, method)

    def _plug_in(self, theta):
        return special.ndtr(theta)


@float64
def probit_posteriors(data: TrainingData, kernel: Kernel, *, tol: float = FULL_TOLERANCE) -> tuple[ProbitPosterior, ...]:
    """The GP classifier's EP posterior of each binary problem of validated ``data`` at a valid kernel, from one
    Gram matrix: one site per distinct input carrying every label there
    (:func:`bayesvm.inference.ep_loop.merged_label_weights`), cold sites converged to the site tolerance ``tol``
    with each slower loop of EP_LOOPS in turn where needed (:func:`bayesvm.inference.ep.converged_ep`). Each run's
    ``log_z`` is that problem's ln P(D); no warning here (the callers say what an unconverged run means for
    them)."""
    K = gram_matrix(kernel, jnp.asarray(data.X))
    weights, opposite = merged_label_weights(data.X, data.Y, data.weights)
    return tuple(ProbitPosterior(data.X, kernel, converged_ep(K, y, likelihood="probit", weights=weights[c],
                                                              opposite=None if opposite is None else opposite[c],
                                                              tol=tol))
                 for c, y in enumerate(data.Y))


@dataclass(frozen=True)
class LowRankPosterior(_LatentPredictions):
    """EP's Gaussian posterior of theta under a low-rank prior through inducing inputs (:mod:`bayesvm.inference.ep_low_rank`).

    ``predictor`` holds the weight posterior; predictions cost O(m^2) per
    input. ``n`` is the number of training points, ``C`` the penalty.
    """

    predictor: LowRankEPPredictor
    C: float
    n: int

    @property
    def approximation(self) -> str:
        return "ep"

    @property
    def n_inducing(self) -> int:
        return int(self.predictor.inducing.shape[0])

    def _checked_inputs(self, X) -> np.ndarray:
        return check_inputs(X, n_features=self.predictor.inducing.shape[1])

    def _latent(self, X: np.ndarray) -> tuple[Array, Array]:
        return low_rank_predict(self.predictor, X)


class LowRankFit(NamedTuple):
    """EP over one low-rank prior for k binary problems: each problem's posterior, its ln Q(D) and whether its EP
    converged."""

    posteriors: tuple[LowRankPosterior, ...]
    log_naive: np.ndarray
    converged: np.ndarray


@float64
def low_rank_posteriors(data: TrainingData, C: float, kernel: Kernel, inducing) -> LowRankFit:
    """EP over the FITC prior through the (m, d) ``inducing`` inputs for each binary problem of validated ``data``
    at a valid (C, kernel) (:mod:`bayesvm.inference.ep_low_rank`): one prior for every problem, cold sites converged
    fully (``log_z_tol`` 0), as the full path's posterior is."""
    x, X, Z = (as_float64(a) for a in (coordinates_of(C, kernel), data.X, inducing))
    cold = EPSites(*(np.zeros(data.Y.shape),) * 2)
    weights, opposite = merged_label_weights(data.X, data.Y, data.weights)
    naive = low_rank_naive_evidences_and_gradient(x, X, Z, data.Y, kernel, cold, weights=weights, opposite=opposite,
                                                  tol=FULL_TOLERANCE, log_z_tol=0.0)
    posteriors = tuple(LowRankPosterior(low_rank_predictor(x, X, Z, kernel, EPSites(precision, shift)), C,
                                        data.X.shape[0])
                       for precision, shift in zip(*(np.asarray(s) for s in naive.sites)))
    return LowRankFit(posteriors, np.asarray(naive.value), np.asarray(naive.converged))


@float64
def posteriors_at(data: TrainingData, C: float, kernel: Kernel, *, inducing=None, approximation: str = "ep",
                  tol: float = PREDICTION_TOLERANCE) -> tuple[Posterior | LowRankPosterior, ...]:
    """The posterior of each binary problem of validated ``data`` at a valid (C, kernel), without the evidence.

    What a selection made on a subsample (:mod:`bayesvm.selection.subsample`) fits on every training row, and a
    fit at fixed hyperparameters: on the full prior, the MAP SVM and its ``approximation`` (EP to the site
    tolerance ``tol``, or the Laplace-style factor) from one Gram matrix; given (m, d) ``inducing`` inputs, EP over
    the low-rank prior (:func:`low_rank_posteriors`). Warns where EP did not converge.
    """
    if inducing is not None:
        fitted = low_rank_posteriors(data, C, kernel, inducing)
        if not np.all(fitted.converged):
            warn_user("EP for the posterior on the low-rank prior did not converge, so its predictions are "
                      "approximate; compare with more inducing inputs (BayesianSVC(n_inducing=...)) or the full "
                      "prior (n_inducing=None)", ConvergenceWarning)
        return fitted.posteriors
    K = gram_matrix(kernel, jnp.asarray(data.X))
    posteriors = []
    for problem in data.problems:
        fit = fit_map_on_gram(K, data.X, problem.Y[0], problem.classes, C, kernel, weights=data.weights)
        ep = _converged_label_ep(K, fit, tol) if approximation == "ep" else None
        posteriors.append(Posterior.from_fit(fit, approximation, ep=ep))
    return tuple(posteriors)

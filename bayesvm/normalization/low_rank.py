"""ln N(D) under a low-rank prior: tempered SMC in the r = m + 1 inducing dimensions, and its search path.

With the low-rank prior of :mod:`bayesvm.low_rank` (FITC: Snelson &
Ghahramani 2006; or DTC), theta = V w + eps with w ~ N(0, I_r) and
eps_i ~ N(0, d_i) independent. Integrating eps out first,

    N(D) = E_theta[ prod_i nu(theta_i) ] = E_w[ prod_i nubar_i(v_i^T w) ],
    nubar_i(u) = E_{eps ~ N(0, d_i)}[ nu(u + eps) ] = INT N(t; u, d_i) nu(t) dt,

with v_i^T the rows of V. nubar_i is the Gaussian convolution of nu, i.e. the
normaliser of the nu-tilted distribution N(t; u, d_i) nu(t), in closed form
(:func:`bayesvm.inference.tilted.nu_tilted_moments`); as d_i -> 0 it tends to nu(u).
The integral over w is then annealed by tempered SMC (Del Moral, Doucet &
Jasra 2006; :mod:`bayesvm.normalization.annealing`) with the standard normal prior
(square-root factor I_r) and log-likelihood

    l(w) = sum_i ln nubar_i(v_i^T w):

a batch of P particles W (P, r) costs one matrix product W V^T (O(P n r))
and P n evaluations of ln nubar, in O(n r + P n) memory, against O(n^2) per
particle and O(n^3) for the factor under the exact prior.

The annealing starts from EP's Gaussian approximation q(w) = N(m, S S^T) of
the weights' distribution p(w) proportional to N(w; 0, I) prod_i nubar_i(v_i^T w)
(:func:`bayesvm.inference.ep_low_rank.nu_weight_gaussian`) rather than from the prior:
with w = m + S z, z ~ N(0, I),

    N(D) = E_z[ p(w) / q(w) ],  ln p(w) - ln q(w) = -|w|^2/2 + |z|^2/2 + ln|det S| + l(w),

so the sampler only has to bridge EP's error, not the whole way from the
prior to the posterior, where runs from the prior can disagree by hundreds of nats at large amplitudes
(documentation: large data). Where EP does not converge the prior is the reference.

Along a search, :class:`LowRankNormalizationPath` reweights an anchor's
particles w_s (the prior on w does not depend on the coordinates x, so they
need no whitening):

    ln N(D; x) = ln N(D; x_a) + ln (1/S) sum_s exp(l(w_s; x) - l(w_s; x_a)),
    l(w; x) = sum_i ln nubar_i(v_i(x)^T w; d_i(x), C(x)),

with the exact gradient by differentiating this estimate (the Fisher
identity), under the re-anchoring rules of :mod:`bayesvm.normalization.path`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._precision import as_float64, float64
from .._validation import check_positive
from .annealing import AnnealingResult, annealed_log_expectation
from .budget import EvidenceBudget
from .ep_started import reference_log_ratio
from ..compilation import jit
from ..hyperparameters import MARGIN_RESOLUTION, kernel_at, penalty_at
from ..kernels import Kernel
from ..low_rank import INDUCING_JITTER, KINDS, LowRankPrior, low_rank_prior_at
from ..inference.ep_low_rank import WeightGaussian, nu_weight_gaussian
from ..model import log_nu
from .path import MIN_ESS_FRACTION, Annealed, ReweightedPath
from ..inference.tilted import nu_tilted_moments

Array = jax.Array

__all__ = [
    "log_nu_smoothed",
    "low_rank_log_likelihood",
    "annealed_log_normalization_low_rank",
    "LowRankPathPrior",
    "LowRankNormalizationPath",
]

#: below this noise variance nubar is taken as nu itself: the two differ by at most about
#: C sqrt(d) / 2 (at the kinks |u| = 1), under 1e-10 C, while the closed form loses its
#: accuracy (and its gradient) as d underflows
SMOOTHING_FLOOR = 1e-20


@float64
def log_nu_smoothed(u: Array, d: Array, C: Array | float) -> Array:
    """ln nubar(u) = ln E_{eps ~ N(0, d)}[nu(u + eps)] = ln INT N(t; u, d) nu(t) dt, elementwise.

    The normaliser of the nu-tilted distribution
    (:func:`bayesvm.inference.tilted.nu_tilted_moments`). For d <= ``SMOOTHING_FLOOR``
    (d = 0 exactly: DTC, or FITC at an inducing input) it is ln nu(u); the
    other branch then sees d = 1, so neither value nor gradient is NaN.
    """
    d = jnp.asarray(d)
    smooth = d > SMOOTHING_FLOOR
    convolved = nu_tilted_moments(u, jnp.where(smooth, d, 1.0), C).log_z
    return jnp.where(smooth, convolved, log_nu(u, C))


@float64
def low_rank_log_likelihood(w: Array, V: Array, d: Array, C: Array | float, weights: Array | float = 1.0) -> Array:
    """l(w) = sum_i c_i ln nubar_i(v_i^T w), for one w (r,) or a batch of rows (..., r) as one product w V^T;
    c_i = ``weights`` (n,), each input's summed row weight (1: every input once; theory: "Weights and repeated
    rows")."""
    return jnp.sum(weights * log_nu_smoothed(w @ V.T, d, C), axis=-1)


def _checked_prior(prior) -> tuple[np.ndarray, np.ndarray]:
    V, d = (np.asarray(a, dtype=np.float64) for a in prior)
    if V.ndim != 2 or V.shape[0] == 0 or V.shape[1] == 0 or d.shape != (V.shape[0],):
        raise ValueError(f"the prior needs V of shape (n, r) and d of shape (n,); got {V.shape} and {d.shape}")
    if not (np.all(np.isfinite(V)) and np.all(np.isfinite(d)) and np.all(d >= 0.0)):
        raise ValueError("the prior's V must be finite and its variances d finite and >= 0")
    return V, d


@float64
def reference_log_likelihood(z: Array, mean: Array, scale: Array, log_det_scale: Array, V: Array, d: Array,
                             C: Array | float, weights: Array | float = 1.0) -> Array:
    """ln p(w) - ln q(w) at w = m + S z: the integrand of N(D) = E_{z ~ N(0, I)}[p(w) / q(w)] (module docstring).

    p(w) = N(w; 0, I) prod_i nubar_i(v_i^T w) and q = N(m, S S^T) the reference
    (``mean``, ``scale``, ``log_det_scale`` = ln |det S|):
    -|w|^2 / 2 + |z|^2 / 2 + ln |det S| + l(w) (``weights`` as in :func:`low_rank_log_likelihood`).
    """
    w = mean + z @ scale.T
    return reference_log_ratio(w, z, log_det_scale) + low_rank_log_likelihood(w, V, d, C, weights)


@float64
def annealed_log_normalization_low_rank(prior: LowRankPrior, C: float, *, key=0, reference: bool = True,
                                        budget: EvidenceBudget = EvidenceBudget(), role: str = "check",
                                        keep_particles: bool = False,
                                        weights=None) -> tuple[AnnealingResult, WeightGaussian]:
    """ln N(D) = ln E_w[prod_i nubar_i(v_i^T w)^c_i] under the prior V V^T + diag(d), by tempered SMC over w;
    c_i the inputs' summed row ``weights`` (None: 1 each).

    ``prior`` is a :class:`bayesvm.low_rank.LowRankPrior` (V, d) over the n
    training inputs, e.g. ``low_rank_prior(kernel, X, Z, kind)``. With
    ``reference`` (the default) the annealing starts from EP's Gaussian
    approximation of the weights' distribution
    (:func:`bayesvm.inference.ep_low_rank.nu_weight_gaussian`), else from the prior
    N(0, I) (module docstring). The work is ``budget``'s for the m + 1 weights, at its plan for ``role``
    (:meth:`bayesvm.normalization.budget.EvidenceBudget.plan`); with ``keep_particles``
    the particles are the z, w = mean + z scale^T with the returned reference.
    """
    V, d = _checked_prior(prior)
    C = check_positive(C, "C")
    eye = np.eye(V.shape[1])  # host-side: no program of its own
    start = (nu_weight_gaussian(LowRankPrior(V, d), C) if reference
             else WeightGaussian(np.zeros(V.shape[1]), eye, np.zeros(()), np.asarray(False)))
    plan = budget.plan(V.shape[1], V.shape[0], C, role)
    result = annealed_log_expectation(eye, reference_log_likelihood,
                                      args=(start.mean, start.scale, start.log_det_scale, V, d, C,
                                            np.ones(V.shape[0]) if weights is None
                                            else np.asarray(weights, dtype=np.float64)), key=key,
                                      keep_particles=keep_particles, warn=False, **plan)
    return result, start


@jit(static_argnames="kind")
def _prior_at(x: Array, X: Array, Z: Array, template: Kernel, kind: str) -> tuple[LowRankPrior, Array]:
    """The low-rank prior at x and the inducing jitter it carries, in theta^2 units (k0 x relative jitter x scale)."""
    kernel = kernel_at(template, x)
    scale = jnp.mean(kernel.replace(amplitude=1.0, offset=0.0).base_diag(Z))
    return low_rank_prior_at(x, X, Z, template, kind), kernel.amplitude * INDUCING_JITTER * scale


@partial(jax.tree_util.register_dataclass, data_fields=["X", "Z", "template", "weights"], meta_fields=["kind"])
@dataclass(frozen=True)
class LowRankPathPrior:
    """The low-rank prior through the inducing inputs ``Z``, as a :class:`bayesvm.normalization.path.PathPrior`.

    The particles are the w themselves; ln f(w; x) = l(w; x) (module
    docstring), each input's term times its summed row weight (``weights``). Not resolved where V or d is not
    finite, or where the jitter
    added to K_mm, k0 x ``INDUCING_JITTER`` x mean diag of the shape over Z
    (theta^2 units), exceeds the margin's resolution.
    """

    X: Array
    Z: Array
    template: Kernel
    weights: Array
    kind: str = "fitc"

    def log_integrand(self, x: Array, w: Array, aux) -> Array:
        V, d = low_rank_prior_at(x, self.X, self.Z, self.template, self.kind)
        return low_rank_log_likelihood(w, V, d, penalty_at(x), self.weights)

    def anneal(self, x: np.ndarray, key, budget: EvidenceBudget, role: str) -> Annealed | None:
        prior, jitter = _prior_at(as_float64(x), self.X, self.Z, self.template, self.kind)
        finite = all(bool(np.all(np.isfinite(np.asarray(a)))) for a in prior)
        if not (finite and float(jitter) <= MARGIN_RESOLUTION):
            return None
        result, reference = annealed_log_normalization_low_rank(
            prior, float(np.exp(x[0])), key=key, keep_particles=True, budget=budget, role=role, weights=self.weights
        )
        z = np.asarray(result.particles).reshape(-1, prior.V.shape[1])  # host-side: no programs of their own
        return Annealed(result, np.asarray(reference.mean) + z @ np.asarray(reference.scale).T, None)


class LowRankNormalizationPath(ReweightedPath):
    """ln N(D) and its exact gradient along a search path under the low-rank prior (module docstring).

    ``X`` (n, d) the training inputs, ``Z`` (m, d) the inducing inputs,
    ``template`` the kernel family, ``kind`` "fitc" or "dtc" (:mod:`bayesvm.low_rank`),
    ``budget`` the fit's :class:`~bayesvm.normalization.budget.EvidenceBudget`, ``weights`` (n,) the rows' weights
    (None: 1 each). Same interface and re-anchoring rules as :class:`bayesvm.normalization.path.NormalizationPath`.
    """

    def __init__(self, X: Array, Z: Array, template: Kernel, kind: str = "fitc", key: int = 0,
                 budget: EvidenceBudget = EvidenceBudget(), min_ess_fraction: float = MIN_ESS_FRACTION,
                 weights=None):
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
        weights = np.ones(np.shape(X)[0]) if weights is None else np.asarray(weights, dtype=np.float64)
        super().__init__(LowRankPathPrior(X, Z, template, as_float64(weights), kind), key, budget, min_ess_fraction)
